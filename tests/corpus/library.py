"""A queue library's database, built by the library itself, and what qadvisor says about it.

`build_fresh` gives the library an empty database of its own (owned by the role its workers
log in as, with pg_stat_statements at production's default ``track = top`` unless the library
asks for ``all``), lets it create
its schema with its own migrations, enqueues a skewed workload through its public API and runs
its real worker until most due jobs are done. `build_aged` clones that database (a template
copy: data and pg_stats, but not the cumulative statistics that pg_stat_statements and
pg_stat_user_tables keep per database), adds an archive of finished rows in the library's own
row shape, runs the worker again on the aged table (so its claims are in pg_stat_statements
under the clone) and ANALYZEs. `build_stale` clones the aged database again and lets a fresh
batch of waiting rows arrive after that ANALYZE. `observe` then runs qadvisor as a user would.

Our own sessions (the done-count polls, the aging inserts, ANALYZE) run with
``pg_stat_statements.track = none``, so pg_stat_statements holds the library's statements only
(and, after a run, qadvisor's own).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from qadvisor.demo.pgserver import LocalServer
from tests.corpus import envs
from tests.helpers import Run, qadvisor
from tests.json_schemas import assert_valid_snapshot

APP_ROLE = "corpus_app"  # the role the library's migrations and workers log in as
_ROLE_LOCK = threading.Lock()  # builds run in threads, and the role is per server
SAVE_ENV = "QADVISOR_CORPUS_SAVE"  # a directory: keep every qadvisor report there
DONE_SHARE = 0.9  # the worker stops once this share of the due jobs is finished


@dataclass(frozen=True)
class Workload:
    """Jobs to enqueue: per queue (skewed: most in one), plus some due an hour from now."""

    queues: tuple[tuple[str, int], ...]
    scheduled: int

    @property
    def due(self) -> int:
        return sum(count for _, count in self.queues)

    def as_json(self) -> str:
        return json.dumps({"queues": dict(self.queues), "scheduled": self.scheduled})


@dataclass(frozen=True)
class Library:
    """How to install and drive one queue library, and how to age its table."""

    name: str  # also names its databases
    env: envs.PythonEnv | envs.NodeEnv
    driver: str  # file under drivers/, run as `<interpreter> <driver> migrate|enqueue|work`
    # Finished jobs so far: the worker runs until this reaches done_share of the due jobs.
    done_sql: str
    # Statements that add about 1 M finished rows as the library itself leaves them.
    age_sql: tuple[str, ...]
    workload: Workload
    rerun: Workload  # enqueued and worked on the aged clone
    extra_env: Mapping[str, str] = field(default_factory=dict)
    # A bound on each driver run (enqueue, work) against a hang, not a measure of speed: on a
    # machine shared with other work, kombu's enqueue of 3,400 messages took over 120 s.
    worker_timeout: float = 300
    # pg_stat_statements.track for the library's sessions: production's default "top" shows
    # only what the client sends; "all" adds statements run inside functions and triggers.
    track: str = "top"
    # pg_stat_statements.track_planning for the library's sessions (off by default, as in
    # production): on, it counts the plans each statement made, which tells a cached plan.
    track_planning: bool = False
    # Clone this library's aged database instead of aging our own (the same table written
    # by the same library in another mode): the archive is built once.
    aged_from: Library | None = None
    # The share of the due jobs after which the worker is stopped: what is left is the
    # backlog qadvisor sees (a lower share leaves a queue that has fallen behind).
    done_share: float = DONE_SHARE


@dataclass
class Observed:
    """What one qadvisor run said about a library's database."""

    db: str
    check: Run
    snapshot: dict[str, Any]
    build_seconds: dict[str, float]
    # The server's clock as the check began: what autovacuum did since is in pg_stat_*.
    began: datetime.datetime | None = None

    @property
    def report(self) -> dict[str, Any]:
        return self.check.report

    def queues(self) -> dict[str, dict[str, Any]]:
        return {f"{q['schema']}.{q['table']}": q for q in self.report["queues"]}

    def codes(self) -> set[str]:
        return self.check.codes()

    def statements(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.snapshot.get("statements", [])
        return found


def admin(server: LocalServer, dbname: str = "postgres") -> psycopg.Connection[Any]:
    """A superuser session whose own statements pg_stat_statements does not record."""
    conn = psycopg.connect(server.dsn(dbname), autocommit=True)
    conn.execute("SET pg_stat_statements.track = none")
    return conn


def build_fresh(server: LocalServer, lib: Library, installed: envs.Installed) -> dict[str, float]:
    """The library's database, named after it, as its migrations and worker leave it."""
    seconds: dict[str, float] = {}
    with admin(server) as conn:
        # Roles are per server; another library's build may have made it already, or be
        # making it now in another thread (two concurrent CREATE ROLEs: the loser fails on
        # pg_authid's unique index, not with DuplicateObject).
        with _ROLE_LOCK:
            exists = conn.execute("SELECT FROM pg_roles WHERE rolname = %s", [APP_ROLE]).fetchone()
            if exists is None:
                with contextlib.suppress(
                    psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation
                ):
                    conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(_ident(APP_ROLE)))
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_ident(lib.name)))
        conn.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(_ident(lib.name), _ident(APP_ROLE))
        )
    with admin(server, lib.name) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
    _set_track(server, lib.name, lib.track, lib.track_planning)

    started = time.monotonic()
    _driver(server, lib, installed, lib.name, "migrate", lib.workload)
    seconds["migrate"] = time.monotonic() - started
    started = time.monotonic()
    _driver(server, lib, installed, lib.name, "enqueue", lib.workload)
    seconds["enqueue"] = time.monotonic() - started
    seconds["work"] = _work(server, lib, installed, lib.name, lib.workload.due)
    _analyze(server, lib.name)
    return seconds


def build_aged(
    server: LocalServer, lib: Library, installed: envs.Installed, source: str, *, age: bool
) -> dict[str, float]:
    """A clone of `source` with an archive of about 1 M finished rows (added now if `age`,
    else `source` is another mode's aged database), worked on again."""
    aged = f"{lib.name}_aged"
    seconds: dict[str, float] = {}
    with admin(server) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_ident(aged)))
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {} OWNER {}").format(
                _ident(aged), _ident(source), _ident(APP_ROLE)
            )
        )
    # Per-database settings are not part of what a template copies.
    _set_track(server, aged, lib.track, lib.track_planning)
    if age:
        started = time.monotonic()
        with admin(server, aged) as conn:
            for statement in lib.age_sql:
                conn.execute(statement)
        _analyze(server, aged)
        seconds["age"] = time.monotonic() - started
    with admin(server, aged) as conn:
        before = _count(conn, lib.done_sql)
    _driver(server, lib, installed, aged, "enqueue", lib.rerun)
    seconds["work"] = _work(server, lib, installed, aged, lib.rerun.due, already=before)
    _analyze(server, aged)
    return seconds


def build_stale(server: LocalServer, lib: Library, installed: envs.Installed) -> dict[str, float]:
    """A clone of the library's aged database whose statistics predate its waiting rows, as
    in production between two autoanalyzes: the clone keeps the aged database's pg_stats and
    reltuples (a template copies the catalog, not the counters, so no change since ANALYZE is
    counted yet and pg_stat_statements starts empty); the library's worker works through a
    batch as before (its claims are recorded), then a fresh batch arrives and waits. No
    ANALYZE runs: a few thousand changes are far from the tenth of a 1 M-row table that
    autoanalyze waits for, and the tests check the statistics stayed as they were."""
    stale = f"{lib.name}_stale"
    seconds: dict[str, float] = {}
    with admin(server) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_ident(stale)))
        started = time.monotonic()
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {} OWNER {}").format(
                _ident(stale), _ident(f"{lib.name}_aged"), _ident(APP_ROLE)
            )
        )
        seconds["clone"] = time.monotonic() - started
    _set_track(server, stale, lib.track)
    with admin(server, stale) as conn:
        before = _count(conn, lib.done_sql)
    _driver(server, lib, installed, stale, "enqueue", lib.rerun)
    seconds["work"] = _work(server, lib, installed, stale, lib.rerun.due, already=before)
    started = time.monotonic()
    _driver(server, lib, installed, stale, "enqueue", lib.rerun)
    seconds["batch"] = time.monotonic() - started
    with admin(server, stale) as conn:
        _settled(conn)
    return seconds


def _settled(conn: psycopg.Connection[Any], timeout: float = 30.0) -> None:
    """Wait until the changes the driver's sessions made are counted: a session reports its
    counters as it ends, a moment after its client has gone, so the count is read once no
    other client session is left in the database, and taken when it held still over a second.
    A library's worker may write through several sessions (pgqueuer logs through one and
    claims through another): a total that held still for a moment while one session was still
    ending left the queue table's changes uncounted, and the stale tier had nothing stale."""
    counted = "SELECT coalesce(sum(n_mod_since_analyze), 0) FROM pg_stat_user_tables"
    others = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + timeout
    last, still = -1, 0
    while time.monotonic() < deadline:
        now = _count(conn, counted)
        still = still + 1 if now == last and not _count(conn, others) else 0
        if now > 0 and still >= 3:
            return
        last = now
        time.sleep(0.3)
    raise AssertionError(
        f"the changes the library made were still being counted after {timeout:.0f} s "
        f"(n_mod_since_analyze {last}, other sessions {_count(conn, others)})"
    )


def stale_tables(observed: Observed) -> list[str]:
    """The queue tables of a stale-stage snapshot whose statistics predate the changes since
    the clone: never analyzed there (a template copies no counters), with changes counted."""
    out = []
    for t in observed.snapshot["tables"]:
        counters = t["stats"]
        analyzed = counters["analyze_count"] + counters["autoanalyze_count"]
        if analyzed == 0 and counters["n_mod_since_analyze"] > 0:
            out.append(f"{t['schema']}.{t['name']}")
    return out


def autoanalyzed_instead(observed: Observed) -> list[str]:
    """The queue tables autovacuum analyzed since the clone, when that left none stale (empty
    otherwise): the stale stage's build raced autovacuum, not a fault of the library's."""
    tables = observed.snapshot["tables"]
    if not tables or stale_tables(observed):
        return []
    return [f"{t['schema']}.{t['name']}" for t in tables if t["stats"]["autoanalyze_count"] > 0]


def observe(
    server: LocalServer, dbname: str, label: str, build_seconds: dict[str, float]
) -> Observed:
    """`qadvisor check --format json` as a user runs it, then `qadvisor snapshot` for the
    statements it found and planned (the check report does not list them)."""
    dsn = server.dsn(dbname)
    began = server_now(server, dbname)
    run = qadvisor("check", dsn, "--format", "json")
    assert run.rc in (0, 1) and run.stdout.startswith("{"), (
        f"qadvisor check failed on {label} (exit {run.rc}):\n{run.stderr}"
    )
    snap = qadvisor("snapshot", dsn)
    assert snap.rc == 0 and snap.stdout.startswith("{"), (
        f"qadvisor snapshot failed on {label} (exit {snap.rc}):\n{snap.stderr}"
    )
    snapshot = json.loads(snap.stdout)
    assert_valid_snapshot(snapshot)
    observed = Observed(dbname, run, snapshot, build_seconds, began)
    save_dir = os.environ.get(SAVE_ENV, "").strip()
    if save_dir:
        target = Path(save_dir)
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{label}.check.json").write_text(run.stdout)
        (target / f"{label}.snapshot.json").write_text(snap.stdout)
    return observed


def server_now(server: LocalServer, dbname: str) -> datetime.datetime:
    with admin(server, dbname) as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]


def maintained_since(
    server: LocalServer, observed: Observed, moment: datetime.datetime | None = None
) -> list[str]:
    """The tables of the observed database that a VACUUM or ANALYZE (autovacuum's or
    another's) has finished since `moment`, by default since the observed check began."""
    moment = moment or observed.began
    if moment is None:
        return []
    with admin(server, observed.db) as conn:
        rows = conn.execute(
            """
            SELECT schemaname || '.' || relname FROM pg_stat_user_tables
             WHERE greatest(last_vacuum, last_autovacuum, last_analyze, last_autoanalyze) > %s
             ORDER BY 1
            """,
            [moment],
        ).fetchall()
    return [r[0] for r in rows]


def _set_track(server: LocalServer, dbname: str, track: str, planning: bool = False) -> None:
    with admin(server, dbname) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET pg_stat_statements.track = {}").format(
                _ident(dbname), sql.Literal(track)
            )
        )
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET pg_stat_statements.track_planning = {}").format(
                _ident(dbname), sql.Literal("on" if planning else "off")
            )
        )
        # Only what the library runs from here on: not our CREATE EXTENSION.
        conn.execute(
            "SELECT pg_stat_statements_reset(0, oid) FROM pg_database "
            "WHERE datname = current_database()"
        )


def _driver(
    server: LocalServer,
    lib: Library,
    installed: envs.Installed,
    dbname: str,
    command: str,
    workload: Workload,
) -> None:
    argv, env, cwd = _driver_command(server, lib, installed, dbname, command, workload)
    envs.run(argv, what=f"{lib.name} {command}", env=env, cwd=cwd, timeout=lib.worker_timeout)


def _work(
    server: LocalServer,
    lib: Library,
    installed: envs.Installed,
    dbname: str,
    due: int,
    already: int = 0,
) -> float:
    argv, env, cwd = _driver_command(server, lib, installed, dbname, "work", lib.workload)
    target = already + int(due * lib.done_share)
    with admin(server, dbname) as conn:

        def done() -> bool:
            return _count(conn, lib.done_sql) >= target

        return envs.run_until(
            argv,
            what=f"{lib.name} worker on {dbname}",
            done=done,
            env=env,
            cwd=cwd,
            timeout=lib.worker_timeout,
        )


def _driver_command(
    server: LocalServer,
    lib: Library,
    installed: envs.Installed,
    dbname: str,
    command: str,
    workload: Workload,
) -> tuple[list[str | Path], dict[str, str], Path]:
    script = envs.DRIVERS / lib.driver
    cwd = envs.DRIVERS
    if isinstance(lib.env, envs.NodeEnv):
        # An ES module resolves its imports next to itself: run a copy inside the environment.
        cwd = installed.interpreter.parent.parent.parent
        shutil.copyfile(script, cwd / script.name)
        script = cwd / script.name
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "VIRTUAL_ENV"))}
    env.pop("PYTHONPATH", None)
    env |= {
        "PGHOST": str(server.socket_dir),
        "PGPORT": str(server.port),
        "PGUSER": APP_ROLE,
        "PGDATABASE": dbname,
        "CORPUS_WORKLOAD": workload.as_json(),
        **lib.extra_env,
    }
    return [installed.interpreter, script, command], env, cwd


def _count(conn: psycopg.Connection[Any], query: str) -> int:
    row = conn.execute(query).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _analyze(server: LocalServer, dbname: str) -> None:
    with admin(server, dbname) as conn:
        conn.execute("ANALYZE")


def _ident(name: str) -> sql.Identifier:
    return sql.Identifier(name)
