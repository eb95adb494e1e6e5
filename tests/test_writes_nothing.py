"""Around a full run of qadvisor on a queue with a backlog, nothing is written: no table
counter moves, no row version is written or locked (xmin, xmax and ctid of every row are
what they were), no object is created or rewritten, no setting persists, no sequence
advances; under --analyze the rows a claim would take are still waiting, and another session
locks them at once afterwards. pg_stat_statements, the one trace a run leaves, is the only
thing that grows (docs/safety.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.checks.test_qa401_round_robin_walks_backlog import FIFO
from tests.conftest import TestDB, flush_stats
from tests.full_run import QUEUED, build, runs
from tests.helpers import qadvisor, row_locked

# pg_statistic and its TOAST table: what an autoanalyze of a catalog writes.
STATISTIC_RELS = (
    "SELECT 'pg_statistic'::regclass UNION ALL"
    " SELECT reltoastrelid FROM pg_class WHERE oid = 'pg_statistic'::regclass"
)

# What is compared before and after, each read in one query of a fresh session.
STATE: dict[str, str] = {
    # The write counters of the application's tables (autovacuum is off on them); reads
    # (seq_scan, idx_scan, idx_tup_fetch) may move.
    "table counters": """
        SELECT relid::regclass::text, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd,
               n_live_tup, n_dead_tup, n_mod_since_analyze, n_ins_since_vacuum,
               vacuum_count, autovacuum_count, analyze_count, autoanalyze_count,
               last_vacuum, last_analyze
          FROM pg_stat_user_tables ORDER BY relid""",
    # The catalogs' writes (a temporary table, a created object would be some); autovacuum
    # may analyze a catalog meanwhile, which writes pg_statistic and, for a wide histogram,
    # its TOAST table, and nothing else counted.
    "catalog writes": f"""
        SELECT relid::regclass::text, n_tup_ins, n_tup_upd, n_tup_del
          FROM pg_stat_sys_tables WHERE relid NOT IN ({STATISTIC_RELS}) ORDER BY relid""",
    # The database's, less pg_statistic's and its TOAST table's (an autoanalyze of a catalog
    # counts here too).
    "database write counters": f"""
        SELECT d.tup_inserted - sum(s.n_tup_ins), d.tup_updated - sum(s.n_tup_upd),
               d.tup_deleted - sum(s.n_tup_del), d.conflicts, d.deadlocks, d.temp_files
          FROM pg_stat_database d, pg_stat_sys_tables s
         WHERE d.datname = current_database() AND s.relid IN ({STATISTIC_RELS})
         GROUP BY d.tup_inserted, d.tup_updated, d.tup_deleted, d.conflicts, d.deadlocks,
                  d.temp_files""",
    # Every row version of the application's tables: a lock (even rolled back) sets xmax,
    # a write makes a new version.
    "row versions of jobs": "SELECT md5(string_agg(concat_ws(',', ctid, xmin, xmax, status),"
    " ';' ORDER BY id)), count(*) FROM jobs",
    "row versions of queue_tenants": "SELECT md5(string_agg(concat_ws(',', ctid, xmin, xmax,"
    " last_served), ';' ORDER BY tenant_id)), count(*) FROM queue_tenants",
    "waiting rows": "SELECT status, count(*) FROM jobs GROUP BY status ORDER BY status",
    "relations": """
        SELECT c.oid, c.relname, c.relnamespace, c.relkind, c.relfilenode, c.relpersistence,
               CASE WHEN n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
                    THEN array[c.relpages::float8, c.reltuples::float8] END,
               c.reloptions
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace ORDER BY c.oid""",
    "indexes": "SELECT indexrelid, indrelid, indisvalid, indisready, indislive FROM pg_index"
    " ORDER BY 1",
    "attributes": "SELECT attrelid, attnum, attname, atttypid, attnotnull FROM pg_attribute"
    " WHERE attrelid >= 16384 ORDER BY 1, 2",
    "functions": "SELECT oid, proname, md5(coalesce(prosrc, '')), proconfig FROM pg_proc"
    " ORDER BY oid",
    "schemas": "SELECT oid, nspname, nspowner FROM pg_namespace ORDER BY oid",
    "types": "SELECT oid, typname FROM pg_type WHERE oid >= 16384 ORDER BY oid",
    "triggers, rules, policies": "SELECT (SELECT count(*) FROM pg_trigger),"
    " (SELECT count(*) FROM pg_rewrite), (SELECT count(*) FROM pg_policy),"
    " (SELECT count(*) FROM pg_event_trigger), (SELECT count(*) FROM pg_publication)",
    "extensions": "SELECT extname, extversion FROM pg_extension ORDER BY 1",
    "roles": "SELECT oid, rolname, rolsuper FROM pg_roles ORDER BY oid",
    "role and database settings": "SELECT setdatabase, setrole, setconfig"
    " FROM pg_db_role_setting ORDER BY 1, 2",
    "grants": "SELECT c.oid, c.relacl::text FROM pg_class c WHERE c.oid >= 16384 ORDER BY 1",
    # A setting that outlives a session: ALTER SYSTEM (postgresql.auto.conf) or a reload.
    "settings a new session starts with": "SELECT name, setting, source FROM pg_settings"
    " WHERE source NOT IN ('default', 'session', 'client', 'override') ORDER BY name",
    "configuration files": "SELECT sourcefile, name, setting FROM pg_file_settings ORDER BY 1, 2",
    "sequences": "SELECT schemaname, sequencename, last_value FROM pg_sequences ORDER BY 1, 2",
    "prepared transactions": "SELECT gid FROM pg_prepared_xacts ORDER BY 1",
    "replication slots": "SELECT slot_name FROM pg_replication_slots ORDER BY 1",
    "large objects": "SELECT count(*) FROM pg_largeobject_metadata",
}


def state(db: TestDB) -> dict[str, list[tuple[Any, ...]]]:
    with db.connect() as conn:
        # One snapshot of the statistics for all of it.
        conn.autocommit = False
        conn.execute("SET LOCAL stats_fetch_consistency = snapshot")
        out = {name: conn.execute(query).fetchall() for name, query in STATE.items()}
        conn.rollback()
    return out


def settle(db: TestDB, timeout: float = 20) -> None:
    """Every earlier session's statistics flushed: a backend flushes them as it exits, which
    may come after its client has gone, so wait until no other session of the database is
    left."""
    deadline = time.monotonic() + timeout
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
    )
    while db.execute(query)[0][0]:
        assert time.monotonic() < deadline, "the database's other sessions did not end"
        time.sleep(0.05)


def test_a_full_run_writes_nothing_and_locks_no_waiting_row(db: TestDB, tmp_path: Path) -> None:
    build(db)
    # Without the texts (showtext false): the view with them materialises every entry of the
    # server past work_mem in a temporary file, which would count in this database.
    recorded = "SELECT count(*), sum(calls) FROM pg_stat_statements(false)"
    pgss_before = db.execute(recorded)[0]
    settle(db)
    before = state(db)
    commands = runs(db.dsn, tmp_path)
    assert any("--analyze" in c for c in commands) and any("--sample" in c for c in commands)
    for args in commands:
        run = qadvisor(*args)
        assert run.rc in (0, 1) and "Traceback" not in run.stderr, (args, run.stderr)
    settle(db)
    after = state(db)
    changed = {name: (before[name], after[name]) for name in STATE if before[name] != after[name]}
    assert not changed, "\n".join(f"{k}:\n  before {b}\n  after  {a}" for k, (b, a) in
                                  changed.items())  # fmt: skip

    # The waiting rows are all still waiting, and none of them is locked.
    assert ("queued", QUEUED) in after["waiting rows"]
    assert not row_locked(db, "jobs", "status", "queued")
    with psycopg.connect(db.dsn) as conn:
        claimed = conn.execute(FIFO.replace("skip locked", "nowait")).fetchall()
        conn.rollback()
    assert len(claimed) == 1
    # The one trace: pg_stat_statements recorded the runs' statements.
    pgss_after = db.execute(recorded)[0]
    assert pgss_after[1] > pgss_before[1]


def test_the_comparison_sees_a_write_a_lock_and_a_setting(db: TestDB) -> None:
    """What the full-run test compares moves when someone writes: a rolled-back update, a
    rolled-back FOR UPDATE, ALTER ROLE ... SET and nextval each change it."""
    build(db)
    settle(db)
    before = state(db)
    with psycopg.connect(db.dsn) as conn:
        conn.execute(FIFO).fetchall()
        conn.rollback()
    settle(db)
    locked = state(db)
    assert locked["row versions of jobs"] != before["row versions of jobs"]
    assert locked["table counters"] == before["table counters"]
    with psycopg.connect(db.dsn) as conn:
        conn.execute("UPDATE queue_tenants SET last_served = now() WHERE tenant_id = 1")
        conn.rollback()
    settle(db)
    written = state(db)
    assert written["table counters"] != locked["table counters"]
    assert written["row versions of queue_tenants"] != locked["row versions of queue_tenants"]
    db.execute("CREATE TEMPORARY TABLE scratch (a int)")
    settle(db)
    assert state(db)["catalog writes"] != written["catalog writes"]
    db.execute("SELECT nextval('jobs_id_seq')")
    db.execute(f"ALTER DATABASE {db.name} SET work_mem = '8MB'")
    settle(db)
    later = state(db)
    assert later["sequences"] != written["sequences"]
    assert later["role and database settings"] != written["role and database settings"]
    assert (
        later["settings a new session starts with"] != written["settings a new session starts with"]
    )


def temp_files(db: TestDB) -> int:
    query = "SELECT temp_files FROM pg_stat_database WHERE datname = current_database()"
    return int(db.execute(query)[0][0])


def test_reading_pg_stat_statements_writes_no_temporary_file(db: TestDB) -> None:
    """pg_stat_statements materialises every entry with its text before any filter, past
    work_mem in temporary files: with this database's work_mem at 1 MB (pg_settings, another
    such view, still fits) and the view holding more text than that, reading the view spills,
    and a whole run of qadvisor, which reads it once with work_mem raised for that statement,
    does not."""
    build(db)
    columns = ", ".join(f"c{i} int" for i in range(600))
    db.execute(f"CREATE TABLE wide ({columns})")
    # Inside the statement: a comment before it is not part of the recorded text.
    padding = " /* " + "x" * 3000 + " */"
    with db.connect() as conn:
        for i in range(600):  # one entry per column: each a queryid of its own
            conn.execute(f"SELECT c{i}{padding} FROM wide")
    db.execute(f"ALTER DATABASE {db.name} SET work_mem = '1MB'")
    settle(db)
    before = temp_files(db)
    with db.connect() as conn:
        conn.execute("SELECT count(*) FROM pg_stat_statements").fetchall()
    settle(db)
    spilled = temp_files(db)
    assert spilled > before, "reading the view wrote no temporary file: the test proves nothing"

    run = qadvisor("check", db.dsn, "--format", "json")
    assert run.rc in (0, 1) and "Traceback" not in run.stderr, run.stderr
    settle(db)
    assert temp_files(db) == spilled


# A queue with one index the claim reads and no tenant column (tenant reads are reads too):
# what moves the table's read counters is --analyze's scan, and the control read below.
ANALYZE_CLAIM = (
    "SELECT id FROM jobs WHERE status = 'queued' ORDER BY created_at LIMIT 5 FOR UPDATE SKIP LOCKED"
)
ANALYZE_SCAN = "SELECT id FROM jobs WHERE status = 'queued' ORDER BY created_at LIMIT 5"


@pytest.mark.parametrize("role", ["superuser", "granted", "monitor"])
def test_analyze_counts_no_read_where_the_role_may_switch_counting_off(
    role: str, db: TestDB, tmp_path: Path
) -> None:
    db.execute(
        "CREATE TABLE jobs (id bigserial PRIMARY KEY, status text NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT now());"
        "CREATE INDEX jobs_queued ON jobs (created_at) WHERE status = 'queued';"
        "INSERT INTO jobs (status) SELECT CASE WHEN i % 10 = 0 THEN 'queued' ELSE 'done' END"
        " FROM generate_series(1, 20000) i;"
        "ALTER TABLE jobs SET (autovacuum_enabled = off); ANALYZE jobs"
    )
    if role == "granted" and db.version_num < 150000:
        pytest.skip("GRANT SET ON PARAMETER is new in PostgreSQL 15")
    dsn = db.dsn
    if role != "superuser":
        name = f"reader_{db.name}"
        db.execute(f"CREATE ROLE {name} LOGIN IN ROLE pg_monitor")
        db.execute(f"GRANT SELECT, UPDATE ON jobs TO {name}")
        if role == "granted":
            db.execute(f"GRANT SET ON PARAMETER track_counts TO {name}")
        dsn = f"{db.dsn} user={name}"
    settle(db)
    before = db.wait_for_stats("jobs", lambda r: True)
    out = tmp_path / "analyzed.json"
    run = qadvisor("snapshot", dsn, "--analyze", "--query", ANALYZE_CLAIM, "-o", str(out))
    assert run.rc == 0, run.stderr
    (claim,) = json.loads(out.read_text())["statements"]
    assert claim["analyzed_ms"] is not None, claim.get("plan_error")
    # A read of the same rows, counted, as a control: once it shows, qadvisor's (whose
    # session ended first) shows too, on 14's statistics collector as well.
    with db.connect() as conn:
        assert len(conn.execute(ANALYZE_SCAN).fetchall()) == 5
        flush_stats(conn)
    # Documented (docs/cli.md, --analyze): a role that may not switch counting off counts.
    reads = 2 if role == "monitor" else 1
    after = db.wait_for_stats("jobs", lambda r: r["idx_scan"] >= before["idx_scan"] + reads)
    moved = {k: after[k] - before[k] for k in ("seq_scan", "idx_scan", "idx_tup_fetch")}
    assert moved == {"seq_scan": 0, "idx_scan": reads, "idx_tup_fetch": 5 * reads}
