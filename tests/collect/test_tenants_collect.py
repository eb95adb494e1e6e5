"""qadvisor.collect.tenants: per-tenant facts from bounded queries, on real servers.

Counted through the per-tenant index (skip scan, capped per tenant) or from a capped read of
the live set; the rotation table's idle tenants by probe or by comparison; mean job
durations through an index on the finish column; never a seq scan of the queue table; a
failure recorded and the rest collected; every identifier quoted.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

import psycopg
import pytest

from qadvisor.collect import tenants as T
from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.collect.snapshot import collect
from qadvisor.model import Column, Snapshot, Statement, TenantCount, TenantFacts
from qadvisor.sql.dequeue import analyse
from tests.checks.test_qa401_round_robin_walks_backlog import (
    FIFO,
    RR_BY_ID,
    build_tenant_queue,
    jobs,
)
from tests.conftest import TestDB

SMALL = {1: 300, 2: 20, **dict.fromkeys(range(3, 8), 1)}  # 7 tenants, 325 live rows


def statement(sql: str) -> Statement:
    return Statement(source="--query 1", text=sql, parsed=analyse(sql))


def facts_of(
    db: TestDB,
    sqls: Sequence[str] = (RR_BY_ID,),
    tables: Sequence[str] = (),
    limits: SessionLimits | None = None,
) -> tuple[TenantFacts | None, dict[str, str], Snapshot]:
    """collect_tenants as snapshot.collect calls it, on a read-only qadvisor session."""
    with connect(db.dsn, limits or SessionLimits()) as conn:
        snap = collect(conn, tables)
        stmts = [statement(s) for s in sqls]
        read = T.collect_tenants(conn, snap.queues, snap.tables, stmts)
    return (read.value[0] if read.value else None), dict(read.unavailable), snap


def counts(facts: TenantFacts) -> dict[str, int]:
    return {c.tenant: c.rows for c in facts.live_by_tenant}


# --- pure parts --------------------------------------------------------------------------------


def test_tenant_column_from_the_lateral_then_by_name() -> None:
    table = jobs()
    assert T.tenant_column(table, [statement(RR_BY_ID)]) == "tenant_id"
    assert T.tenant_column(table, []) == "tenant_id"
    renamed = dataclasses.replace(
        table, columns=(Column("id", "bigint"), Column("account_id", "bigint"))
    )
    assert T.tenant_column(renamed, []) == "account_id"
    other = dataclasses.replace(
        table, columns=(Column("id", "bigint"), Column("owner_tenant", "int"))
    )
    assert T.tenant_column(other, []) == "owner_tenant"
    none = dataclasses.replace(table, columns=(Column("id", "bigint"), Column("user_id", "int")))
    assert T.tenant_column(none, []) is None


# --- on real servers ---------------------------------------------------------------------------


def test_counts_through_the_per_tenant_index_and_probes_idle_tenants(db: TestDB) -> None:
    build_tenant_queue(db, SMALL, rotation=50, done=2000)
    facts, unavailable, _ = facts_of(db)
    assert facts is not None and unavailable == {}
    assert counts(facts) == {"1": 300, "2": 20, **{str(t): 1 for t in range(3, 8)}}
    assert facts.live_by_tenant[:2] == (TenantCount("1", 300), TenantCount("2", 20))
    assert (facts.tenants_counted, facts.counts_complete, facts.count_cap) == (7, True, T.COUNT_CAP)
    assert (facts.rotation_schema, facts.rotation_table) == ("public", "queue_tenants")
    assert (facts.rotation_rows, facts.rotation_probed, facts.idle_tenants) == (50, 50, 43)
    assert any("one descent of index jobs_queued_tenant_id" in n for n in facts.notes)
    assert facts.mean_job_seconds is not None and abs(facts.mean_job_seconds - 0.02) < 1e-6
    assert facts.duration_jobs == T.DURATION_JOBS


def test_caps_and_limits_are_said(db: TestDB, monkeypatch: pytest.MonkeyPatch) -> None:
    build_tenant_queue(db, SMALL, rotation=50)
    monkeypatch.setattr(T, "COUNT_CAP", 100)
    monkeypatch.setattr(T, "TENANT_LIMIT", 3)
    monkeypatch.setattr(T, "ROTATION_LIMIT", 20)
    facts, _, _ = facts_of(db)
    assert facts is not None
    # The first 3 tenants in tenant_id order, tenant 1 counted up to the cap.
    assert counts(facts) == {"1": 100, "2": 20, "3": 1}
    assert facts.counts_complete is False
    (note,) = [n for n in facts.notes if n.startswith("live rows counted")]
    assert "only the first 3 tenants" in note and "reached the cap" in note
    assert (facts.rotation_probed, facts.rotation_rows) == (20, 50)  # reltuples beyond the cap
    assert any("only the first 20 of about 50 rows" in n for n in facts.notes)


def test_without_a_per_tenant_index_the_live_set_is_read_up_to_a_cap(
    db: TestDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_tenant_queue(db, SMALL, rotation=50, tenant_index=None)
    facts, _, _ = facts_of(db)
    assert facts is not None
    assert counts(facts)["1"] == 300 and facts.counts_complete is True
    assert any("through index jobs_queued_fifo" in n for n in facts.notes)
    # Idle tenants by comparing the rotation with the complete set of live tenants.
    assert facts.idle_tenants == 43
    assert any("by comparing queue_tenants" in n for n in facts.notes)

    monkeypatch.setattr(T, "SCAN_CAP", 100)
    facts, _, _ = facts_of(db)
    assert facts is not None
    assert sum(counts(facts).values()) == 100 and facts.counts_complete is False
    assert any("only the first 100 live rows" in n for n in facts.notes)
    # Live tenants not all known, no index to probe with: idle tenants are left unknown.
    assert facts.idle_tenants is None and facts.rotation_rows == 50

    monkeypatch.setattr(T, "SCAN_CAP", 10_000)
    monkeypatch.setattr(T, "TENANT_LIMIT", 3)
    facts, _, _ = facts_of(db)
    assert facts is not None
    assert list(counts(facts)) == ["1", "2", "3"] and facts.tenants_counted == 7
    assert any("7 tenants seen, the largest 3 listed" in n for n in facts.notes)


def test_nothing_is_counted_when_no_index_reaches_the_live_set(db: TestDB) -> None:
    # Finished jobs make the status values tell the live predicate without a partial index.
    build_tenant_queue(db, SMALL, tenant_index=None, done=2000)
    db.execute("DROP INDEX jobs_queued_fifo")
    facts, _, snap = facts_of(db, [FIFO], tables=["public.jobs"])
    assert snap.queues and snap.queues[0].live is not None
    assert facts is not None and facts.live_by_tenant == ()
    assert any("no index of public.jobs reaches the live set" in n for n in facts.notes)


def test_the_queue_table_is_never_seq_scanned(db: TestDB) -> None:
    build_tenant_queue(db, SMALL, rotation=50, done=2000)
    query = "SELECT seq_scan, idx_scan FROM pg_stat_user_tables WHERE relname = 'jobs'"
    before = db.wait_for_stats("jobs", lambda r: r["seq_scan"] is not None)
    for index in ("jobs_queued_tenant_id", None):
        if index is None:
            db.execute("DROP INDEX jobs_queued_tenant_id")  # the sample and list paths
        facts, unavailable, _ = facts_of(db)
        assert facts is not None and facts.live_by_tenant and unavailable == {}
    # Statistics of the closed sessions arrive asynchronously: wait for the index scans.
    after = db.wait_for_stats("jobs", lambda r: r["idx_scan"] > before["idx_scan"])
    assert db.execute(query)[0][0] == before["seq_scan"] == after["seq_scan"]


def test_a_failure_is_recorded_and_the_rest_still_collected(db: TestDB) -> None:
    build_tenant_queue(db, SMALL, rotation=50)
    locked = threading.Event()
    release = threading.Event()

    def hold_lock() -> None:
        with psycopg.connect(db.dsn) as conn:
            conn.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
            locked.set()
            release.wait(30)

    with connect(db.dsn, SessionLimits(lock_timeout_ms=200)) as conn:
        snap = collect(conn)  # catalog facts first, then the application takes its lock
        holder = threading.Thread(target=hold_lock)
        holder.start()
        try:
            assert locked.wait(10)
            read = T.collect_tenants(conn, snap.queues, snap.tables, [statement(RR_BY_ID)])
        finally:
            release.set()
            holder.join()
    (facts,) = read.value
    assert facts.error is not None and "lock timeout" in facts.error
    assert read.unavailable == {"tenants:public.jobs": facts.error}
    assert facts.live_by_tenant == () and facts.rotation_table == "queue_tenants"


def test_identifiers_are_quoted(db: TestDB) -> None:
    db.execute(
        """
        CREATE SCHEMA "Queue Space";
        CREATE TABLE "Queue Space"."Job Queue" (
          id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          "Tenant_Id" int NOT NULL,
          "Status" text NOT NULL DEFAULT 'queued'
        );
        CREATE INDEX "Per Tenant" ON "Queue Space"."Job Queue" ("Tenant_Id", id)
          WHERE "Status" = 'queued';
        INSERT INTO "Queue Space"."Job Queue" ("Tenant_Id")
        SELECT g % 3 FROM generate_series(1, 30) g;
        CREATE TABLE "Queue Space"."Rot ""R"" Table" ("Tenant_Id" int PRIMARY KEY);
        INSERT INTO "Queue Space"."Rot ""R"" Table" SELECT generate_series(0, 9);
        ANALYZE "Queue Space"."Job Queue";
        """
    )
    rr = (
        'select j.id from "Queue Space"."Rot ""R"" Table" qt cross join lateral (select id from '
        '"Queue Space"."Job Queue" where "Tenant_Id" = qt."Tenant_Id" and "Status" = \'queued\' '
        "order by id limit 1 for update skip locked) j limit 1"
    )
    facts, unavailable, _ = facts_of(db, [rr], tables=['"Queue Space"."Job Queue"'])
    assert unavailable == {}, unavailable
    assert facts is not None and facts.tenant_column == "Tenant_Id"
    assert counts(facts) == {"0": 10, "1": 10, "2": 10}
    assert (facts.rotation_schema, facts.rotation_table) == ("Queue Space", 'Rot "R" Table')
    assert (facts.rotation_rows, facts.idle_tenants) == (10, 7)


def test_a_queue_without_a_tenant_column_has_no_facts(db: TestDB) -> None:
    db.execute(
        "CREATE TABLE jobs (id bigint PRIMARY KEY, status text NOT NULL);"
        "CREATE INDEX ON jobs (id) WHERE status = 'queued';"
        "INSERT INTO jobs SELECT g, 'queued' FROM generate_series(1, 10) g; ANALYZE jobs"
    )
    facts, _, snap = facts_of(db, [FIFO], tables=["public.jobs"])
    assert snap.queues and facts is None
