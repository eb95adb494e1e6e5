"""Shared test helpers: run the real CLI, assert what a report judged, and build queue states
on a real server."""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import psycopg.sql

from qadvisor.model import Finding, Report
from qadvisor.render.json import fix_dict, report_dict
from qadvisor.settings.resolve import ENV_VARIABLES
from qadvisor.sql.dequeue import value_placeholder
from tests.conftest import TestDB, flush_stats
from tests.json_schemas import assert_valid_report

# A code no check can ever have: the registry takes two to five capitals and three digits
# (tests/checks/test_pack.py proves it refuses this one). QA999 would be a legal next code.
NO_SUCH_CODE = "QA1010"


@dataclass(frozen=True)
class Pathology:
    """A state on a server whose findings have fixes to run (tests/fixes/test_fix_steps.py):
    declared as ``FIX_PATHOLOGIES`` (name -> Pathology) in the test module of a check."""

    codes: frozenset[str]  # the checks whose fixes it shows (others may fire too)
    build: Callable[[TestDB], Run]
    # What the application sends for the parameters a rewrite leaves to it (<value of $n>).
    values: Mapping[int, str] = field(default_factory=dict)


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
    QADVISOR_FAIL_ON exported in the developer's shell must not change what the tests see).

    The process is forked from tests/zygote.py, which has imported qadvisor once, unless the
    run needs a fresh interpreter or starts a server (see there)."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES}
    forked = _ZYGOTE.run(args, env, Path(cwd or os.getcwd()), timeout)
    if forked is not None:
        return forked
    proc = subprocess.run(
        [sys.executable, "-m", "qadvisor", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


class _Zygote:
    """The client of tests/zygote.py: started on first use, one per test session."""

    # Runs that start a PostgreSQL server: the server guard must see their command.
    SERVER_STARTS = frozenset({"demo", "--prove"})

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}
        self.files: Path | None = None
        self.runs = 0
        self.lock = threading.Lock()
        self.pending = b""

    def _interpreter(self, env: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if k.startswith("PYTHON")}

    def run(
        self, args: tuple[str, ...], env: dict[str, str], cwd: Path, timeout: float
    ) -> Run | None:
        """The run forked from the zygote; None: it must be a subprocess of its own."""
        if self.SERVER_STARTS.intersection(args) or os.environ.get("QADVISOR_TEST_NO_ZYGOTE"):
            return None
        if not self.lock.acquire(blocking=False):
            return None  # another thread's run is under way: that one has the zygote
        try:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            if self._interpreter(env) != self._interpreter(self.env):
                return None
            return self._fork(args, env, cwd, timeout)
        finally:
            self.lock.release()

    def _start(self) -> None:
        self.env = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES}
        self.files = Path(tempfile.mkdtemp(prefix="qadvisor-zygote-"))
        self.pending = b""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parent.parent,
            env=self.env,
            bufsize=0,
        )
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.files is not None:
            shutil.rmtree(self.files, ignore_errors=True)

    def _fork(self, args: tuple[str, ...], env: dict[str, str], cwd: Path, timeout: float) -> Run:
        assert self.proc is not None and self.proc.stdin is not None and self.files is not None
        self.runs += 1
        out, err = self.files / f"{self.runs}.out", self.files / f"{self.runs}.err"
        request = {
            "args": list(args),
            "env": env,
            "cwd": str(cwd),
            "out": str(out),
            "err": str(err),
        }
        line = memoryview((json.dumps(request) + "\n").encode())
        while line:  # an unbuffered pipe may take a long request in parts
            line = line[self.proc.stdin.write(line) or 0 :]
        pid = int(self._answer(30)["pid"])
        try:
            status = int(self._answer(timeout)["status"])
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            self._answer(30)
            raise subprocess.TimeoutExpired(
                [sys.executable, "-m", "qadvisor", *args], timeout, _read(out), _read(err)
            ) from None
        try:
            return Run(status, _read(out), _read(err))
        finally:
            out.unlink(missing_ok=True)
            err.unlink(missing_ok=True)

    def _answer(self, timeout: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        ends = time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = ends - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not ready:
                raise subprocess.TimeoutExpired("tests.zygote", timeout)
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError("tests/zygote.py ended: see its stderr above")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer


def default_sigint() -> None:
    """For a child a test interrupts with Ctrl-C (Popen's ``preexec_fn``): SIGINT's default
    action back. A shell that starts the suite in the background (a CI runner, nohup) ignores
    SIGINT, its children inherit that, and Python then never raises KeyboardInterrupt: the
    test would press Ctrl-C at a process that cannot hear it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interruptible(*args: str, scratch: Path) -> subprocess.Popen[str]:
    """``qadvisor ARGS`` as a process of its own that a test interrupts: SIGINT's default
    action back, TMPDIR at ``scratch`` (a throwaway server's files go there), pipes for both
    outputs."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES} | {"TMPDIR": str(scratch)}
    return subprocess.Popen(
        [sys.executable, "-m", "qadvisor", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_sigint,
    )


def wait_for_line(proc: subprocess.Popen[str], text: str) -> None:
    """Reads ``proc``'s stderr until a line holding ``text`` (the step a test acts at)."""
    assert proc.stderr is not None
    for line in proc.stderr:
        if text in line:
            return
    raise AssertionError(f"the run ended before a line with {text!r}")


def assert_interrupted_cleanly(
    proc: subprocess.Popen[str], out: str, err: str, signum: int, scratch: Path
) -> None:
    """The run was cut short by ``signum`` (exit 128 + signal, no report) and left no file
    under ``scratch`` and no process of a server there."""
    assert out == "", out[:200]
    assert proc.returncode == 128 + signum, err
    assert list(scratch.iterdir()) == []  # the cluster, its socket and its log: all removed
    assert processes_under(scratch) == []  # no postgres of that cluster left


def processes_under(path: Path) -> list[str]:
    """The command lines of running processes that name ``path`` (a server started from a
    data directory under it). Read at full width: ps cuts them to $COLUMNS otherwise, and a
    cut line would name nothing."""
    running = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in running.splitlines() if str(path) in line]


def _read(path: Path) -> str:
    # As subprocess.run(text=True) decodes: the locale's encoding, universal newlines.
    with open(path, encoding=locale.getpreferredencoding(False), newline=None) as f:
        return f.read()


_ZYGOTE = _Zygote()


def check(db: TestDB, *args: str) -> Run:
    run = qadvisor("check", db.dsn, "--format", "json", *args)
    # Passed or findings, with the report on stdout.
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


def fix_steps(finding: dict[str, Any] | Finding, kind: str) -> list[dict[str, Any]]:
    """The steps of ``kind`` ("migration", "rewrite", "review") of a finding's fix, as the
    JSON report spells them, from a report's finding or a Finding."""
    fix = fix_dict(finding.fix) if isinstance(finding, Finding) else finding["fix"]
    assert fix is not None, "the finding has no fix"
    return [s for s in fix["steps"] if s["kind"] == kind]


def rewrite_of(finding: dict[str, Any] | Finding) -> str:
    """The one rewrite of a finding's fix: the statement as the application should send it."""
    (step,) = fix_steps(finding, "rewrite")
    after: str = step["sql"]
    return after


def fix_sql(finding: dict[str, Any] | Finding, *, review: bool = False) -> list[str]:
    """The statements of a finding's fix to run as printed, in order: its migration steps
    (which are its ``statements``), with ``review`` its review steps too. Never a rewrite:
    that is application code (see plan_rewrites)."""
    kinds = ("migration", "review") if review else ("migration",)
    fix = fix_dict(finding.fix) if isinstance(finding, Finding) else finding["fix"]
    assert fix is not None
    assert fix["statements"] == [s["sql"] for s in fix["steps"] if s["kind"] == "migration"]
    out = [s["sql"] for s in fix["steps"] if s["kind"] in kinds]
    assert out, f"the fix has no step to run: {fix}"
    return out


def apply_fix(db: TestDB, finding: dict[str, Any] | Finding, *, review: bool = False) -> None:
    """Run a finding's fix exactly as printed, one statement per call (CONCURRENTLY needs
    it): its migration steps, with ``review`` its review steps too (see fix_sql)."""
    for statement in fix_sql(finding, review=review):
        db.execute(statement)


def as_the_application(rewrite: str, values: Mapping[int, str]) -> str:
    """A printed rewrite with each ``<value of $n>`` filled with the value the application
    sends (SQL text), as its author would: only the test, like the application, knows it."""
    for n, value in values.items():
        rewrite = rewrite.replace(value_placeholder(n), value)
    left = re.findall(r"<value of \$\d+>", rewrite)
    assert not left, f"the application's value for {left} was not given"
    return rewrite


def plan_rewrites(
    db: TestDB, finding: dict[str, Any] | Finding, values: Mapping[int, str] | None = None
) -> list[str]:
    """EXPLAIN each rewrite of a finding's fix on the server, in place of the statement it
    replaces, in a rolled-back transaction: the text parses, names what exists, and plans.
    ``values`` fill the rewrite's ``<value of $n>`` as the application would; other
    parameters ($n, as pg_stat_statements shows them) are planned as NULL after PREPARE has
    inferred their types. The plans' texts, one per rewrite."""
    steps = fix_steps(finding, "rewrite")
    assert steps, "the fix has no rewrite"
    plans = []
    with psycopg.connect(db.dsn) as conn:
        for step in steps:
            assert step["before"] is None or step["before"] != step["sql"]
            text = as_the_application(step["sql"], values or {}).strip().rstrip(";")
            conn.execute(psycopg.sql.SQL("PREPARE rewritten AS {}").format(psycopg.sql.SQL(text)))
            row = conn.execute(
                "SELECT cardinality(parameter_types) FROM pg_prepared_statements"
                " WHERE name = 'rewritten'"
            ).fetchone()
            assert row is not None
            args = ", ".join(["NULL"] * row[0])
            explain = "EXPLAIN EXECUTE rewritten" + (f"({args})" if args else "")
            plans.append("\n".join(r[0] for r in conn.execute(explain).fetchall()))
            conn.rollback()
            conn.execute("DEALLOCATE ALL")
    return plans


def record_afresh(dba: TestDB, *, planning_in: TestDB | None = None) -> None:
    """pg_stat_statements installed and emptied: what the application runs next is all it
    holds; with ``planning_in``, that database's sessions count their plans too
    (track_planning), as a server that tells a cached plan from a new one."""
    dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    if planning_in is not None:
        dba.execute(f"ALTER DATABASE {planning_in.name} SET pg_stat_statements.track_planning = on")
    dba.execute("SELECT pg_stat_statements_reset()")


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


# pq's table and the index its create.sql makes for named queues (created for the queue
# name ''): a job waits while dequeued_at IS NULL and is kept once taken; no status column.
PQ_TABLE = """
CREATE TABLE jobs (
    id          bigserial   PRIMARY KEY,
    enqueued_at timestamptz NOT NULL DEFAULT current_timestamp,
    dequeued_at timestamptz,
    expected_at timestamptz,
    schedule_at timestamptz,
    q_name      text        NOT NULL CHECK (length(q_name) > 0),
    data        json        NOT NULL
);
CREATE INDEX priority_idx_no_ ON jobs
    (schedule_at NULLS FIRST, expected_at NULLS LAST, q_name)
    WHERE dequeued_at IS NULL AND q_name != '';
"""


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
    analyzed(db, "jobs", "VACUUM (ANALYZE)")


# A queue in Sidequest's shape: a varchar status with no default, no CHECK and no index on
# it, whose claim binds it as a parameter (pg_stat_statements shows $1).
UNINDEXED_STATUS_TABLE = """
CREATE TABLE jobs (
    id           bigserial    PRIMARY KEY,
    queue        varchar(255) NOT NULL,
    status       varchar(255) NOT NULL,
    inserted_at  timestamptz  NOT NULL DEFAULT now(),
    available_at timestamptz  NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
CREATE INDEX jobs_queue_index ON jobs (queue);
"""
UNINDEXED_STATUS_CLAIM = (
    "SELECT * FROM jobs WHERE status = %s AND queue = %s AND available_at <= now() "
    "ORDER BY inserted_at LIMIT %s FOR UPDATE SKIP LOCKED"
)


def _finished_jobs(db: TestDB, rows: int, days: int, failed_every: int = 0) -> None:
    """``rows`` finished jobs of the unindexed-status table over the last ``days`` days, one in
    ``failed_every`` failed (none with 0)."""
    failed = f"g % {failed_every} = 0" if failed_every else "false"
    db.execute(
        f"""
        INSERT INTO jobs (queue, status, inserted_at, available_at, finished_at)
        SELECT 'default', CASE WHEN {failed} THEN 'failed' ELSE 'completed' END, t, t,
               t + interval '1 second'
          FROM generate_series(1, {rows}) AS g,
               LATERAL (SELECT now() - (g::float8 / {rows}) * interval '{days} days' AS t) AS at
        """
    )


def _claims_bound(db: TestDB) -> None:
    """The unindexed-status queue's claim, its values bound by the driver, three times."""
    with psycopg.connect(db.dsn) as conn:
        for _ in range(3):
            conn.execute(UNINDEXED_STATUS_CLAIM, ["waiting", "default", 10])
            conn.commit()
        flush_stats(conn)


def build_rare_waiting_queue(db: TestDB, dba: TestDB, *, archive: int = 299_998) -> None:
    """An aged queue whose waiting value ANALYZE saw too rarely to count as common: the
    histogram holds it. ``archive`` completed jobs over 29 days, one failed, one waiting; the
    status's statistics target makes ANALYZE read every row, so the result is the same every
    time (a value held by one row is no common value, and two of them make the histogram
    {failed,waiting}, as a sample of a larger table shows values it saw once or twice)."""
    dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    db.execute(UNINDEXED_STATUS_TABLE)
    _finished_jobs(db, archive, 29)
    db.execute(
        "INSERT INTO jobs (queue, status, finished_at) VALUES ('default', 'failed', now());"
        "INSERT INTO jobs (queue, status) VALUES ('default', 'waiting');"
        "ALTER TABLE jobs ALTER COLUMN status SET STATISTICS 10000;"
    )
    analyzed(db, "jobs")
    _claims_bound(db)


def build_stale_statistics_queue(
    db: TestDB, dba: TestDB, *, archive: int = 300_000, waiting: int = 500, days: int = 29
) -> None:
    """An aged queue whose statistics predate its waiting rows: ``archive`` jobs finished
    over the last ``days`` days (one in a thousand failed), ANALYZEd; then ``waiting`` jobs
    arrive, far fewer than autoanalyze waits for (10 % of the table), and the claim runs with
    its status bound by the driver. pg_stats has never seen the waiting value."""
    dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    db.execute(UNINDEXED_STATUS_TABLE)
    _finished_jobs(db, archive, days, failed_every=1000)
    analyzed(db, "jobs")
    db.execute(
        f"INSERT INTO jobs (queue, status) SELECT 'default', 'waiting' "
        f"FROM generate_series(1, {waiting})"
    )
    _claims_bound(db)
    db.wait_for_stats("jobs", lambda r: r["n_mod_since_analyze"] >= waiting)


def judged_without_its_value(run: Run, code: str) -> dict[str, Any]:
    """The one finding of ``code`` in a report of the stale-statistics queue, whose one queue
    has no live predicate: nothing the catalog holds names the value its claim waits for."""
    (queue,) = run.report["queues"]
    assert queue["live_predicate"] is None, queue["reason"]
    (f,) = run.findings(code)
    assert f["severity"] == "warning", f["message"]
    finding: dict[str, Any] = f
    return finding


def analyzed(db: TestDB, table: str, command: str = "ANALYZE") -> None:
    """ANALYZE ``table`` (or VACUUM (ANALYZE) it) as autovacuum would, once the writes of the
    sessions before have been counted, so that it leaves no change since it: an ANALYZE in
    the writing session, or one that runs before a finished session's counts arrive, is
    followed by them, as if every row had changed since."""
    db.wait_for_stats(table, lambda r: r["n_mod_since_analyze"] > 0)
    db.execute(f"{command} {table}")
    db.wait_for_stats(table, lambda r: r["n_mod_since_analyze"] == 0)
