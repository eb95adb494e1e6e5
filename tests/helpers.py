"""Shared test helpers: run the real CLI, assert what a report judged, and build queue states
on a real server."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from qadvisor.model import Report
from qadvisor.render.json import report_dict
from qadvisor.settings import ENV_VARIABLES
from tests.conftest import TestDB
from tests.json_schemas import assert_valid_report


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str

    @property
    def report(self) -> dict[str, Any]:
        """The JSON report on stdout, validated against the published schema."""
        data: dict[str, Any] = json.loads(self.stdout)
        assert_valid_report(data)
        return data

    def codes(self) -> set[str]:
        return {f["code"] for f in self.report["findings"]}

    def findings(self, code: str) -> list[dict[str, Any]]:
        return [f for f in self.report["findings"] if f["code"] == code]


def qadvisor(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, cwd: Path | None = None
) -> Run:
    """Run the installed CLI as a user would, in its own process (in ``cwd``, else here);
    without ``env``, in this process's environment minus qadvisor's settings variables (a
    QADVISOR_FAIL_ON exported in the developer's shell must not change what the tests see)."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES}
    proc = subprocess.run(
        [sys.executable, "-m", "qadvisor", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def check(db: TestDB, *args: str) -> Run:
    run = qadvisor("check", db.dsn, "--format", "json", *args)
    # An uncaught exception also exits 1: a report on stdout is what tells them apart.
    assert run.rc in (0, 1) and run.stdout.startswith("{"), run.stderr
    return run


def assert_quiet(
    result: Run | Report, code: str, queue: str = "public.jobs", *, live: bool = True
) -> None:
    """``code`` judged ``queue`` ("schema.table") and found nothing wrong with it.

    The only way a test says "stays quiet" or "gone after the fix": the queue is in the
    report (with a live predicate unless ``live`` is False, for checks that need none), the
    check ran, it left no skip for that queue or for the whole snapshot, and it raised no
    finding on that queue. A finding whose target is not one of the report's queue tables (a
    rotation table, the server, the xmin horizon) counts against every queue.
    """
    report = result.report if isinstance(result, Run) else report_dict(result)
    assert_valid_report(report)
    queues = {f"{q['schema']}.{q['table']}": q for q in report["queues"]}
    assert queue in queues, f"{queue} is not among the queues found: {sorted(queues)}"
    if live:
        assert queues[queue]["live_predicate"] is not None, (
            f"{queue} has no live predicate: {queues[queue]['reason']}"
        )
    assert code in report["checks_run"], f"{code} did not run: {report['checks_run']}"
    skips = [s for s in report["skipped"] if s["code"] == code and s["queue"] in (None, queue)]
    assert not skips, f"{code} did not judge {queue}: {skips}"

    def on_queue(finding: dict[str, Any]) -> bool:
        target = finding["target"]
        named = f"{target['schema']}.{target['table']}"
        return named == queue or named not in queues

    found = [f for f in report["findings"] if f["code"] == code and on_queue(f)]
    assert not found, f"{code} found on {queue}: {[f['message'] for f in found]}"


def apply_fix(db: TestDB, finding: dict[str, Any]) -> None:
    """Run a finding's fix exactly as printed, one statement per call (CONCURRENTLY needs it)."""
    for statement in finding["fix"]["statements"]:
        db.execute(statement)


@contextlib.contextmanager
def holding(db: TestDB, statement: str) -> Iterator[list[tuple[Any, ...]]]:
    """Run a claim in a worker's session and keep its transaction, and so its row locks, open
    while the block runs; rolled back afterwards."""
    with psycopg.connect(db.dsn) as conn:
        rows = conn.execute(statement).fetchall()
        try:
            yield rows
        finally:
            conn.rollback()


def run_now(db: TestDB, statement: str) -> list[tuple[Any, ...]]:
    """Run a statement in another session that waits at most 500 ms for a row lock (then
    psycopg.errors.LockNotAvailable); rolled back."""
    with psycopg.connect(db.dsn) as conn:
        conn.execute("SET lock_timeout = '500ms'")
        try:
            return conn.execute(statement).fetchall()
        finally:
            conn.rollback()


def row_locked(db: TestDB, table: str, column: str, value: object) -> bool:
    """Another session holds a row lock on the row of ``table`` whose ``column`` is ``value``."""
    try:
        with psycopg.connect(db.dsn) as conn:
            conn.execute(
                f"SELECT 1 FROM {table} WHERE {column} = %s FOR UPDATE NOWAIT", [value]
            ).fetchall()
            conn.rollback()
    except psycopg.errors.LockNotAvailable:
        return True
    return False


def build_archive_queue(
    db: TestDB,
    *,
    archive: int = 400_000,
    live: int = 500,
    composite: bool = True,
    partial: bool = False,
    reloptions: str = "",
) -> None:
    """The measured archive case, scaled down: a large archive of done jobs, a small live set."""
    with_clause = f" WITH ({reloptions})" if reloptions else ""
    db.execute(
        f"""
        CREATE TABLE jobs (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            status      text        NOT NULL DEFAULT 'pending',
            payload     jsonb       NOT NULL DEFAULT '{{}}',
            created_at  timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz
        ){with_clause};
        INSERT INTO jobs (status, created_at, finished_at)
        SELECT 'done', now() - interval '30 days' + g * interval '1 second',
               now() - interval '30 days' + g * interval '1 second'
          FROM generate_series(1, {archive}) AS g;
        INSERT INTO jobs (status, created_at)
        SELECT 'pending', now() + g * interval '1 millisecond' FROM generate_series(1, {live}) g;
        """
    )
    if composite:
        db.execute("CREATE INDEX jobs_status_created_at_idx ON jobs (status, created_at)")
    if partial:
        db.execute("CREATE INDEX jobs_pending_created_at ON jobs (created_at) "
                   "WHERE status = 'pending'")  # fmt: skip
    db.execute("VACUUM (ANALYZE) jobs")
