"""Every run has a bound, and the role's own limits are never loosened (real servers).

A server that stops answering (its backend stopped with SIGSTOP), an endpoint that accepts a
connection and never speaks, a DSN or environment that asks libpq to wait forever: each run
ends with one line and exit 2 within the bound docs/cli.md states. A role whose
statement_timeout is stricter than qadvisor's keeps it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest

from qadvisor.collect.connect import (
    BoundedConnection,
    SessionLimits,
    Unresponsive,
    connect,
)
from qadvisor.collect.session_limits import startup_options
from qadvisor.settings.defaults import CONNECT_TIMEOUT_S, STATEMENT_MARGIN_S
from qadvisor.settings.resolve import ENV_VARIABLES
from tests.conftest import TestDB

# Starting Python and importing qadvisor, on a machine shared with other work.
START_SLACK_S = 15


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES}
    env.pop("PGCONNECT_TIMEOUT", None)
    env.update(extra)
    return env


def _qadvisor(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "qadvisor", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or _env(),
    )


def _ended(proc: subprocess.Popen[str], within: float) -> tuple[int, str, float]:
    """(exit code, stderr, seconds taken); the process is killed when it outlives ``within``."""
    start = time.monotonic()
    try:
        _out, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"qadvisor still running after {within:g} s")
    return proc.returncode, err, time.monotonic() - start


@contextlib.contextmanager
def silent_endpoint() -> Iterator[int]:
    """A port on 127.0.0.1 whose kernel completes the handshake but where nobody ever reads
    or answers (listen(), never accept())."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


@pytest.mark.parametrize("where", ["dsn", "env"])
def test_a_connect_timeout_of_zero_does_not_disable_the_bound(where: str) -> None:
    # libpq reads 0 as "wait forever" (psycopg as 130 s per address); qadvisor's bound holds.
    with silent_endpoint() as port:
        dsn = f"host=127.0.0.1 port={port} dbname=app user=nobody"
        if where == "dsn":
            proc = _qadvisor("check", dsn + " connect_timeout=0")
        else:
            proc = _qadvisor("check", dsn, env=_env(PGCONNECT_TIMEOUT="0"))
        rc, err, took = _ended(proc, CONNECT_TIMEOUT_S + START_SLACK_S)
    assert rc == 3, err
    assert len(err.strip().splitlines()) == 1 and "timeout" in err, err
    assert took >= CONNECT_TIMEOUT_S - 1


def test_a_stricter_dsn_connect_timeout_wins() -> None:
    with silent_endpoint() as port:
        dsn = f"host=127.0.0.1 port={port} dbname=app user=nobody connect_timeout=2"
        rc, err, _took = _ended(_qadvisor("check", dsn, "--connect-timeout", "30"), 2 + 10)
    assert rc == 3 and "timeout" in err, err


@pytest.fixture
def stopped_backend(db: TestDB) -> Iterator[list[int]]:
    """Stops (SIGSTOP) the backend serving qadvisor's session as soon as it appears; the
    list holds its pid. Continued (SIGCONT) afterwards, whatever happened."""
    stopped: list[int] = []
    yield stopped
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def _stop_qadvisor_backend(db: TestDB, stopped: list[int]) -> None:
    with db.connect() as admin:
        # Each poll its own transaction: pg_stat_activity is read once per transaction, so
        # a poll in the first one's would never see a session that connected after it.
        admin.autocommit = True
        deadline = time.monotonic() + 20
        while not stopped and time.monotonic() < deadline:
            row = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'qadvisor'"
                " AND datname = current_database()"
            ).fetchone()
            if row is not None:
                os.kill(row[0], signal.SIGSTOP)
                stopped.append(row[0])
            time.sleep(0.05)
    assert stopped, "qadvisor's session never appeared"


@pytest.mark.parametrize(
    ("flags", "bound", "says"),
    [
        # Its next read waits on the stopped backend: the sample (3 s) + the statement bound.
        (("--statement-timeout", "1000"), 3 + 1 + STATEMENT_MARGIN_S, "did not answer within"),
        # A statement bound longer than the run's: the run bound ends it.
        (("--statement-timeout", "600000", "--run-timeout", "6"), 6, "did not end within"),
    ],
    ids=["statement", "run"],
)
def test_a_stopped_backend_ends_the_run_within_its_bound(
    db: TestDB, stopped_backend: list[int], flags: tuple[str, ...], bound: float, says: str
) -> None:
    # A queue (found by its partial index): without one there is nothing to sample, and the
    # run could end before the poll below sees its session.
    db.execute(
        "CREATE TABLE jobs (id bigint PRIMARY KEY, status text NOT NULL);"
        "CREATE INDEX jobs_queued ON jobs (id) WHERE status = 'queued'"
    )
    started = time.monotonic()
    # --sample keeps the session open between its two reads: time to find and stop it.
    proc = _qadvisor("check", db.dsn, "--sample", "3", *flags)
    try:
        _stop_qadvisor_backend(db, stopped_backend)
        rc, err, _took = _ended(proc, bound + START_SLACK_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert rc == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], err
    assert time.monotonic() - started >= min(bound, 3) - 1


def _watchdogs() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "qadvisor-watchdog"]


def test_one_watchdog_thread_bounds_a_session_and_ends_with_it(db: TestDB) -> None:
    before = _watchdogs()
    conn = connect(db.dsn, SessionLimits())
    with conn:
        for _ in range(50):
            conn.execute("SELECT 1").fetchone()
        ours = [t for t in _watchdogs() if t not in before]
        assert len(ours) == 1 and ours[0].is_alive()
    ours[0].join(5)
    assert not ours[0].is_alive()


def test_a_watchdog_fires_after_round_trips_that_ended_in_time(db: TestDB) -> None:
    # The deadline is re-armed for each round trip: the quick ones before must not leave the
    # thread asleep until a stale deadline, nor fire on one.
    conn = connect(db.dsn, SessionLimits(statement_timeout_ms=60_000))
    assert isinstance(conn, BoundedConnection)
    with conn:
        for _ in range(20):
            conn.execute("SELECT 1").fetchone()
        conn.bound(0.5, time.monotonic() + 60, 60)
        started = time.monotonic()
        with pytest.raises(Unresponsive, match=r"did not answer within 0\.5 s"):
            conn.execute("SELECT pg_sleep(3)")
        assert time.monotonic() - started < 2.5


@pytest.fixture
def role_with(db: TestDB) -> Iterator[Callable[[str, str], str]]:
    made: list[str] = []

    def make(setting: str, value: str) -> str:
        role = f"mon_{db.name}_{len(made)}"
        db.execute(f"CREATE ROLE {role} LOGIN")
        db.execute(f"ALTER ROLE {role} SET {setting} = '{value}'")
        made.append(role)
        return role

    yield make
    for role in made:
        db.execute(f"DROP ROLE {role}")


def _session_settings(db: TestDB, role: str) -> dict[str, str]:
    conn = connect(f"{db.dsn} user={role}", SessionLimits())
    with conn:
        names = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")
        return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]


def test_a_stricter_role_statement_timeout_is_kept(
    db: TestDB, role_with: Callable[[str, str], str]
) -> None:
    assert (
        _session_settings(db, role_with("statement_timeout", "300ms"))["statement_timeout"]
        == "300ms"
    )
    assert _session_settings(db, role_with("statement_timeout", "1h"))["statement_timeout"] == "5s"
    assert _session_settings(db, role_with("lock_timeout", "20ms"))["lock_timeout"] == "20ms"
    assert _session_settings(db, role_with("lock_timeout", "0"))["lock_timeout"] == "1s"
    idle = _session_settings(db, role_with("idle_in_transaction_session_timeout", "2s"))
    assert idle["idle_in_transaction_session_timeout"] == "2s"


def test_the_lock_timeout_of_the_startup_packet_keeps_a_stricter_one(
    db: TestDB, role_with: Callable[[str, str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The startup packet's lock_timeout hides what ALTER ROLE / ALTER DATABASE set: read back,
    # the stricter is kept, and the role's wins over the database's as in PostgreSQL.
    db.execute(f"ALTER DATABASE {db.name} SET lock_timeout = '30ms'")
    assert _session_settings(db, role_with("search_path", "public"))["lock_timeout"] == "30ms"
    assert _session_settings(db, role_with("lock_timeout", "5s"))["lock_timeout"] == "1s"
    assert _session_settings(db, role_with("lock_timeout", "0.02s"))["lock_timeout"] == "20ms"
    db.execute(f"ALTER DATABASE {db.name} RESET lock_timeout")
    monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=50")
    assert _session_settings(db, role_with("search_path", "public"))["lock_timeout"] == "50ms"
    monkeypatch.setenv("PGOPTIONS", "--lock-timeout=5min -c search_path=public")
    settings = _session_settings(db, role_with("search_path", "public"))
    assert settings["lock_timeout"] == "1s"


def test_a_role_that_may_not_read_pg_db_role_setting_keeps_qadvisors_lock_timeout(
    db: TestDB, role_with: Callable[[str, str], str]
) -> None:
    role = role_with("lock_timeout", "20ms")
    # A shared catalog: revoked for this server's every database, put back whatever happens.
    db.execute("REVOKE SELECT ON pg_db_role_setting FROM PUBLIC")
    try:
        assert _session_settings(db, role)["lock_timeout"] == "1s"
    finally:
        db.execute("GRANT SELECT ON pg_db_role_setting TO PUBLIC")


@pytest.mark.parametrize(
    ("given", "ours"),
    [
        (None, "-c lock_timeout=1000"),
        ("-c lock_timeout=50", "-c lock_timeout=50 -c lock_timeout=50"),
        ("-clock_timeout=2s -c geqo=off", "-clock_timeout=2s -c geqo=off -c lock_timeout=1000"),
        ("--lock-timeout=0.5s", "--lock-timeout=0.5s -c lock_timeout=500"),
        ("-c lock_timeout=0", "-c lock_timeout=0 -c lock_timeout=1000"),
    ],
)
def test_startup_options_carry_the_stricter_lock_timeout(given: str | None, ours: str) -> None:
    assert startup_options(given, 1000) == f"{ours} -c default_transaction_read_only=on"


def test_a_role_with_a_1ms_statement_timeout_gets_no_clean_run(
    db: TestDB, role_with: Callable[[str, str], str]
) -> None:
    role = role_with("statement_timeout", "1ms")
    db.execute(f"GRANT pg_monitor TO {role}")
    proc = _qadvisor("check", f"{db.dsn} user={role}", "--format", "json")
    out, err = proc.communicate(timeout=120)
    # The role's 1 ms holds: reads are cancelled, so the run either ends (exit 2, one line
    # naming the timeout) or reports what the timeout kept it from judging; never a clean run.
    # (A 1 ms timeout that fires as a statement ends is reported by the server as a cancel
    # "due to user request"; qadvisor's line then names the setting.)
    named = "statement timeout" in err + out or "statement_timeout" in err + out
    assert named, (proc.returncode, err)
    with contextlib.suppress(psycopg.Error):
        db.execute(f"REVOKE pg_monitor FROM {role}")
