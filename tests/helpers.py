"""Shared test helpers: run the real CLI, and build queue states on a real server."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from tests.conftest import TestDB


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str

    @property
    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data

    def codes(self) -> set[str]:
        return {f["code"] for f in self.report["findings"]}

    def findings(self, code: str) -> list[dict[str, Any]]:
        return [f for f in self.report["findings"] if f["code"] == code]


def qadvisor(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Run:
    """Run the installed CLI as a user would, in its own process."""
    proc = subprocess.run(
        [sys.executable, "-m", "qadvisor", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def check(db: TestDB, *args: str) -> Run:
    run = qadvisor("check", db.dsn, "--format", "json", *args)
    # An uncaught exception also exits 1: a report on stdout is what tells them apart.
    assert run.rc in (0, 1) and run.stdout.startswith("{"), run.stderr
    return run


def apply_fix(db: TestDB, finding: dict[str, Any]) -> None:
    """Run a finding's fix exactly as printed, one statement per call (CONCURRENTLY needs it)."""
    for statement in finding["fix"]["statements"]:
        db.execute(statement)


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
