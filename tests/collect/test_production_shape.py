"""Databases shaped like production, on real servers (PostgreSQL 18 and 15).

The queue lives in its own schema, ``app``, owned by the application's role, whose search_path
in the database is ``app`` (the builders run as that role, with unqualified names). qadvisor
is run as a monitoring role with ``pg_monitor`` only, then with the grants docs/privileges.md
names; as a role with nothing but CONNECT; while another session holds ACCESS EXCLUSIVE on the
queue table, or waits for it; and while workers hold row locks on queued jobs. The claim is
given with ``--query``, schema-qualified.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.collect.snapshot import collect
from qadvisor.model import Snapshot
from qadvisor.sql.dequeue import fingerprint
from tests.checks.test_qa401_round_robin_walks_backlog import RR_BY_ID, build_trap
from tests.collect.test_statements_collect import CLAIM, build_claim_queue
from tests.conftest import TestDB
from tests.helpers import Run, build_archive_queue, qadvisor
from tests.shapes import RoleDB

# The measured claims, naming the queue table with its schema.
CLAIM_APP = CLAIM.replace("UPDATE jobs", "UPDATE app.jobs").replace("FROM jobs", "FROM app.jobs")
RR_APP = RR_BY_ID.replace("from queue_tenants", "from app.queue_tenants").replace(
    "from jobs", "from app.jobs"
)
SELECT_APP = (
    "SELECT id FROM app.jobs WHERE status = 'pending' ORDER BY created_at LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)
LIMITS = SessionLimits(statement_timeout_ms=5_000, lock_timeout_ms=1_000)
TIMEOUTS = ("--lock-timeout", "1000", "--statement-timeout", "5000")


@dataclass
class Prod:
    db: TestDB  # as the superuser (the DBA)
    app: RoleDB  # as the application's role, owner of schema app, search_path app
    monitor: RoleDB  # pg_monitor and nothing else
    nobody: RoleDB  # nothing but CONNECT (PUBLIC's default on a database)

    def check(self, who: TestDB, *args: str) -> Run:
        run = qadvisor("check", who.dsn, "--format", "json", *TIMEOUTS, *args)
        assert run.rc in (0, 1) and run.stdout.startswith("{"), run.stderr
        return run

    def text(self, who: TestDB, *args: str) -> Run:
        return qadvisor("check", who.dsn, *TIMEOUTS, *args, env=_wide())


def _wide() -> dict[str, str]:
    import os

    return {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}


@pytest.fixture
def prod(db: TestDB) -> Iterator[Prod]:
    app, monitor, nobody = (f"{db.name}_{r}" for r in ("app", "monitor", "nobody"))
    db.execute(
        f"""
        CREATE ROLE {app} LOGIN;
        CREATE ROLE {monitor} LOGIN IN ROLE pg_monitor;
        CREATE ROLE {nobody} LOGIN;
        CREATE SCHEMA app AUTHORIZATION {app};
        ALTER ROLE {app} IN DATABASE {db.name} SET search_path = app;
        """
    )
    yield Prod(db, RoleDB(db.name, db.server, app), RoleDB(db.name, db.server, monitor),
               RoleDB(db.name, db.server, nobody))  # fmt: skip
    db.execute(f"DROP OWNED BY {app}, {monitor}, {nobody}")
    db.execute(f"DROP ROLE {app}, {monitor}, {nobody}")


def archive_with_dead_tuples(prod: Prod) -> None:
    """The measured archive case (QA101 + QA201), built by the application in schema app."""
    build_archive_queue(prod.app)
    prod.app.execute("UPDATE jobs SET finished_at = now() WHERE id <= 20000")
    prod.app.wait_for_stats("jobs", lambda r: r["n_dead_tup"] >= 20_000)


def keys(run: Run) -> set[tuple[str, str, str]]:
    return {(f["code"], f["severity"], f["key"]) for f in run.report["findings"]}


def skips(run: Run) -> set[tuple[str, str | None]]:
    return {(s["code"], s["queue"]) for s in run.report["skipped"]}


def grants(run: Run) -> list[str]:
    found = [g for s in run.report["skipped"] for g in s["grants"]]
    found += [g for h in run.report["hidden"] for g in h["grants"]]
    return list(dict.fromkeys(found))


def snapshot_as(who: TestDB, **kw: Any) -> tuple[Snapshot, float]:
    """collect() in this process (no interpreter start-up in the time), and its wall time."""
    with connect(who.dsn, LIMITS) as conn:
        start = time.monotonic()
        snap = collect(conn, **kw)
        return snap, time.monotonic() - start


# --- a monitoring role ----------------------------------------------------------------------


def test_pg_monitor_role_names_the_grant_for_the_live_set_and_finds_all_once_granted(
    prod: Prod,
) -> None:
    archive_with_dead_tuples(prod)
    dba = prod.check(prod.db, "--table", "app.jobs")
    assert {"QA101", "QA201"} <= {c for c, _, _ in keys(dba)}

    # pg_monitor only: the table is named by schema without USAGE on it; the status values
    # (pg_stats) are hidden, so the live set is unknown: a skip with the exact GRANT.
    m = prod.monitor.user
    blind = prod.check(prod.monitor, "--table", "app.jobs")
    column_grant = f"GRANT SELECT (status) ON app.jobs TO {m};"
    by_code = {s["code"]: s for s in blind.report["skipped"] if s["queue"] == "app.jobs"}
    for code in ("QA101", "QA201"):
        assert by_code[code]["fact"] == "live_set" and by_code[code]["grants"] == [column_grant]
        assert column_grant in by_code[code]["reason"]
    assert not {"QA101", "QA201"} & {c for c, _, _ in keys(blind)}
    # What needs no hidden fact is still judged: catalog, counters, reloptions, settings.
    assert "QA203" not in {c for c, _ in skips(blind)}
    text = prod.text(prod.monitor, "--table", "app.jobs")
    assert "No problems found" not in text.stdout and column_grant in text.stdout
    assert "Not an all-clear" in text.stdout

    # Discovery: the table is not taken for a queue, and the report says why and what to grant.
    found = prod.check(prod.monitor)
    assert found.report["queues"] == []
    (gap,) = [h for h in found.report["hidden"] if h["fact"] == "discovery"]
    assert gap["grants"] == [column_grant] and "app.jobs" in gap["reason"]
    assert qadvisor("check", prod.monitor.dsn, "--fail-on-skip").rc == 3

    # The GRANT the report printed, exactly: the findings come, as the DBA's did.
    for statement in grants(blind):
        prod.db.execute(statement)
    seen = prod.check(prod.monitor, "--table", "app.jobs")
    assert keys(seen) == keys(dba)
    assert skips(seen) == skips(dba)
    assert [q["table"] for q in prod.check(prod.monitor).report["queues"]] == ["jobs"]


def test_pg_monitor_role_with_the_documented_grants_judges_the_claim_as_the_dba_does(
    prod: Prod,
) -> None:
    build_claim_queue(prod.app)
    prod.db.execute(f"ALTER DATABASE {prod.db.name} SET plan_cache_mode = force_generic_plan")
    dba = prod.check(prod.db, "--query", CLAIM_APP)
    assert ("QA301", "critical", f"QA301:app.jobs@{fingerprint(CLAIM_APP)}") in keys(dba)

    m = prod.monitor.user
    blind = prod.check(prod.monitor, "--query", CLAIM_APP)
    # Found by its partial index; nothing sent that would fail: the plan and the tenant
    # probes are skips naming exactly what is missing.
    assert [q["table"] for q in blind.report["queues"]] == ["jobs"]
    plans = [s for s in blind.report["skipped"] if s["fact"] == "plans"]
    assert {s["code"] for s in plans} == {"QA301", "QA302", "QA303", "QA304", "QA401"}
    # Only what the claim's scan reads: its conditions and its ORDER BY, no UPDATE.
    assert plans[0]["grants"] == [
        f"GRANT USAGE ON SCHEMA app TO {m};",
        f"GRANT SELECT (created_at, status) ON app.jobs TO {m};",
    ]
    tenants = [s for s in blind.report["skipped"] if s["fact"] == "tenant_counts"]
    assert {s["code"] for s in tenants} == {"QA402", "QA403"} and tenants[0]["grants"] == [
        f"GRANT USAGE ON SCHEMA app TO {m};",
        f"GRANT SELECT (tenant_id, status) ON app.jobs TO {m};",
    ]
    assert "QA301" not in {c for c, _, _ in keys(blind)}
    # The autovacuum reloption needs no grant: judged all the same.
    assert ("QA203", "warning", "QA203:app.jobs") in keys(blind) & keys(dba)

    # The grants the skips named, as printed: no UPDATE (the claim's scan is planned without
    # its row locks), and the same findings as the DBA's.
    for grant in dict.fromkeys(g for s in blind.report["skipped"] for g in s["grants"]):
        prod.db.execute(grant)
    seen = prod.check(prod.monitor, "--query", CLAIM_APP)
    assert keys(seen) == keys(dba)
    assert skips(seen) == skips(dba)
    assert seen.report["hidden"] == []
    assert not prod.db.execute(
        "SELECT 1 FROM information_schema.role_table_grants WHERE grantee = %s "
        "AND privilege_type = 'UPDATE'",
        [m],
    )
    # The session stayed read-only: planning the UPDATE claim changed nothing.
    assert prod.db.execute("SELECT count(*) FROM app.jobs WHERE status = 'running'") == [(0,)]


def test_the_round_robin_trap_as_a_monitoring_role_needs_the_rotation_table_too(
    prod: Prod,
) -> None:
    build_trap(prod.app)
    dba = prod.check(prod.db, "--query", RR_APP)
    assert {"QA401", "QA402"} <= {c for c, _, _ in keys(dba)}

    m = prod.monitor.user
    prod.db.execute(f"GRANT USAGE ON SCHEMA app TO {m}; GRANT SELECT ON app.jobs TO {m};")
    part = prod.check(prod.monitor, "--query", RR_APP)
    (rotation,) = [s for s in part.report["skipped"] if s["fact"] == "tenant_rotation"]
    assert rotation["code"] == "QA402" and rotation["queue"] == "app.jobs"
    assert rotation["grants"] == [f"GRANT SELECT ON app.queue_tenants TO {m};"]
    assert "QA402" not in {c for c, _, _ in keys(part)}
    # The plan reads the rotation table too: the server refuses it, and the skip says so.
    plan = next(s for s in part.report["skipped"] if s["code"] == "QA401")
    assert "permission denied for table queue_tenants" in plan["reason"]

    prod.db.execute(f"GRANT SELECT ON app.queue_tenants TO {m}")  # docs/privileges.md
    seen = prod.check(prod.monitor, "--query", RR_APP)
    assert keys(seen) == keys(dba) and skips(seen) == skips(dba)
    assert seen.report["hidden"] == []


def test_a_role_with_nothing_but_connect_gets_a_report_of_what_it_could_not_see(
    prod: Prod,
) -> None:
    build_claim_queue(prod.app)
    prod.app.execute("ALTER TABLE jobs RESET (autovacuum_enabled)")
    prod.db.execute("CREATE EXTENSION pg_stat_statements")
    prod.app.execute("SELECT id FROM jobs WHERE status = 'queued' LIMIT 1 FOR UPDATE SKIP LOCKED")
    n = prod.nobody.user

    run = prod.check(prod.nobody)
    assert run.rc == 0 and run.report["findings"] == []
    assert [q["table"] for q in run.report["queues"]] == ["jobs"]
    facts = {s["fact"] for s in run.report["skipped"]}
    assert {"horizon", "statements"} <= facts
    read_all_stats = f"GRANT pg_read_all_stats TO {n};"
    assert read_all_stats in grants(run)
    horizon = [s for s in run.report["skipped"] if s["code"] == "QA202"]
    assert horizon and horizon[0]["queue"] is None and horizon[0]["grants"] == [read_all_stats]

    text = prod.text(prod.nobody)
    assert text.rc == 0 and "Traceback" not in text.stderr
    assert "No problems found" not in text.stdout
    assert "Not an all-clear" in text.stdout and read_all_stats in text.stdout
    assert prod.text(prod.nobody, "--fail-on-skip", "--fail-on", "never").rc == 3


# --- another session's lock ---------------------------------------------------------------------


def test_access_exclusive_on_the_queue_table_costs_only_what_it_blocks(prod: Prod) -> None:
    archive_with_dead_tuples(prod)
    free = prod.check(prod.db, "--table", "app.jobs", "--query", SELECT_APP)
    assert {"QA101", "QA201"} <= {c for c, _, _ in keys(free)}
    with psycopg.connect(prod.app.dsn) as holder:
        holder.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
        pid = holder.info.backend_pid

        query = [("--query 1", SELECT_APP)]
        snap, collect_s = snapshot_as(prod.db, tables=["app.jobs"], queries=query)
        start = time.monotonic()
        run = prod.check(prod.db, "--table", "app.jobs", "--query", SELECT_APP)
        wall_s = time.monotonic() - start
        print(f"\nACCESS EXCLUSIVE held: collect {collect_s:.3f} s, qadvisor check {wall_s:.2f} s")
    # Nothing waited for the lock (lock_timeout is 1 s), and the whole run is well within
    # lock_timeout + statement_timeout.
    assert collect_s < LIMITS.lock_timeout_ms / 1000
    assert wall_s < (LIMITS.lock_timeout_ms + LIMITS.statement_timeout_ms) / 1000
    assert set(snap.unavailable) == {"pg_stat_statements"}  # not installed here; nothing failed
    # What it could read is reported: the vacuum trigger needs no lock.
    assert "QA201" in {c for c, _, _ in keys(run)}
    named = {s["code"]: s["reason"] for s in run.report["skipped"] if s["queue"] == "app.jobs"}
    assert {"QA101", "QA102", "QA301", "QA302", "QA303", "QA401"} <= set(named)
    for reason in named.values():
        assert f"pid {pid} holds AccessExclusiveLock on app.jobs" in reason
        assert "idle in transaction" in reason
        assert "LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE" in reason
    (stmt,) = snap.statements
    assert stmt.custom_plan is None and f"pid {pid}" in (stmt.plan_error or "")
    table = snap.table("app", "jobs")
    assert table is not None and table.indexes == ()
    assert table.bytes == table.relpages * 8192 and "relpages" in (table.bytes_source or "")
    # Released: the same report as before the lock.
    after = prod.check(prod.db, "--table", "app.jobs", "--query", SELECT_APP)
    assert keys(after) == keys(free)


def test_a_waiting_access_exclusive_request_is_not_queued_behind(prod: Prod) -> None:
    archive_with_dead_tuples(prod)
    reader = psycopg.connect(prod.app.dsn)
    migration = psycopg.connect(prod.app.dsn)
    reader.execute("SELECT 1 FROM jobs LIMIT 1")  # an open transaction holding ACCESS SHARE
    alter = threading.Thread(target=migration.execute, args=("ALTER TABLE jobs ADD x int",))
    pid, behind = migration.info.backend_pid, reader.info.backend_pid
    try:
        alter.start()
        _wait_until_waiting(prod.db, pid)
        _, collect_s = snapshot_as(prod.db, tables=["app.jobs"])
        run = prod.check(prod.db, "--table", "app.jobs")
    finally:
        reader.rollback()
        alter.join(timeout=30)
        migration.rollback()
        reader.close()
        migration.close()
    print(f"\nACCESS EXCLUSIVE requested: collect {collect_s:.3f} s")
    assert collect_s < LIMITS.lock_timeout_ms / 1000
    reason = next(s["reason"] for s in run.report["skipped"] if s["code"] == "QA101")
    assert f"pid {pid} waits for AccessExclusiveLock on app.jobs" in reason
    assert f"behind pid {behind}" in reason
    assert "ALTER TABLE jobs ADD x int" in reason
    assert "QA201" in {c for c, _, _ in keys(run)}


def _wait_until_waiting(db: TestDB, pid: int) -> None:
    deadline = time.monotonic() + 10
    query = "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted"
    while db.execute(query, [pid]) != [(1,)]:
        assert time.monotonic() < deadline, "the ALTER TABLE never queued for its lock"
        time.sleep(0.02)


def test_workers_holding_row_locks_make_nothing_wait(prod: Prod) -> None:
    build_claim_queue(prod.app)
    claim = CLAIM_APP.replace("$1", "'queued'")
    before = prod.check(prod.db, "--query", CLAIM_APP)
    workers = [psycopg.connect(prod.app.dsn) for _ in range(3)]
    try:
        for w in workers:  # each holds 100 queued jobs, as a worker in its transaction does
            w.execute(
                "SELECT id FROM jobs WHERE status = 'queued' ORDER BY created_at LIMIT 100 "
                "FOR UPDATE SKIP LOCKED"
            )
        held = prod.db.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND mode = 'RowShareLock'"
            " AND pid = ANY(%s)",
            [[w.info.backend_pid for w in workers]],
        )
        assert held[0][0] >= 3
        snap, collect_s = snapshot_as(prod.db, queries=[("--query 1", CLAIM_APP)])
        analyzed, analyze_s = snapshot_as(prod.db, queries=[("--query 1", claim)], analyze=True)
        start = time.monotonic()
        during = prod.check(prod.db, "--query", CLAIM_APP)
        wall_s = time.monotonic() - start
    finally:
        for w in workers:
            w.close()
    print(
        f"\nrow locks held by 3 workers: collect {collect_s:.3f} s, with --analyze "
        f"{analyze_s:.3f} s, qadvisor check {wall_s:.2f} s"
    )
    assert collect_s < LIMITS.lock_timeout_ms / 1000 and analyze_s < LIMITS.lock_timeout_ms / 1000
    assert snap.hidden == () and set(snap.unavailable) == {"pg_stat_statements"}
    (stmt,) = snap.statements
    assert stmt.plan_error is None and stmt.generic_plan is not None
    # EXPLAIN ANALYZE skips the locked rows (SKIP LOCKED) and is rolled back.
    (done,) = analyzed.statements
    assert done.plan_error is None and done.analyzed_plan is not None
    assert keys(during) == keys(before) and skips(during) == skips(before)
