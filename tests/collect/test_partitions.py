"""A partitioned table is one queue (real servers).

The claim names the partitioned table and locks the row it takes in that row's partition:
the parent is the queue. Its facts are its leaves' summed (sizes, reltuples, counters, each
index declared on it with its partitions' indexes), its partitions stay in the snapshot with
their own, and the claim is planned on it, the plan's scans of partitions read as scans of
the queue table. Nested partitions and a DEFAULT partition are partitions like any other.
"""

from __future__ import annotations

import psycopg
import pytest

from qadvisor.derive.statement_queues import statement_evidence
from qadvisor.model import Snapshot, Table
from tests.collect.test_statements_collect import take_snapshot
from tests.conftest import TestDB
from tests.full_run import logged_runs, logging_role
from tests.helpers import assert_quiet, check
from tests.partitioned import (
    DAILY_CLAIM,
    LIST_CLAIM,
    build_by_queue,
    build_daily,
    build_nested,
    run_claims,
)


def _queue(snap: Snapshot) -> Table:
    assert [q.qualified for q in snap.queues] == ["public.jobs"], snap.rejected
    table = snap.table("public", "jobs")
    assert table is not None
    return table


def test_a_table_partitioned_by_day_is_one_queue_whose_facts_are_its_partitions(
    db: TestDB,
) -> None:
    db.execute("CREATE EXTENSION pg_stat_statements")
    build_daily(db, days=5, per_day=1_000, waiting=200)
    run_claims(db, DAILY_CLAIM)
    snap = take_snapshot(db)
    table = _queue(snap)
    (queue,) = snap.queues
    assert queue.live is not None and queue.live.values == ("pending",)
    assert "a partitioned table, its partitions judged together as one queue" in queue.reason
    # Five past days, today, tomorrow, and the DEFAULT partition: eight leaves.
    assert table.partition_key == "RANGE (created_at)"
    leaves = {p.name: p for p in table.leaves}
    assert len(leaves) == 8 and leaves["jobs_default"].partition_bound == "DEFAULT"
    assert all(p.partition_of == "public.jobs" for p in table.partitions)
    assert all(p.columns == table.columns for p in table.partitions)
    # Summed, as the server counts them.
    ((rows,),) = db.execute("SELECT count(*) FROM jobs")
    assert table.reltuples == rows == 5_200
    ((size,),) = db.execute(
        "SELECT sum(pg_table_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'jobs'::regclass"
    )
    assert table.bytes == size
    ((index_bytes, parts),) = db.execute(
        "SELECT sum(pg_relation_size(inhrelid)), count(*) FROM pg_inherits "
        "WHERE inhparent = 'jobs_pending'::regclass"
    )
    (pending,) = [i for i in table.indexes if i.name == "jobs_pending"]
    assert parts == 8 and pending.bytes == index_bytes and pending.reltuples == 200
    assert all(
        i.partition_of == "jobs_pending" for p in table.leaves for i in p.indexes if i.predicate
    )
    # The statistics: its partitions' merged, their rows weighted.
    status = table.stats_of("status")
    assert status is not None and status.most_common_vals is not None
    shares = dict(zip(status.most_common_vals, status.most_common_freqs or (), strict=True))
    assert shares["pending"] == pytest.approx(200 / 5_200, rel=0.05)

    # The claim is planned on the queue table; its plan reads the partitions as the queue's.
    (claim,) = [s for s in snap.statements if s.queue == "public.jobs"]
    assert claim.custom_plan is not None and claim.plan_error is None
    scans = [n for n in claim.custom_plan.walk() if n.partition is not None]
    assert scans and all(n.relation == "jobs" for n in scans)
    assert {n.partition for n in scans} <= set(leaves)
    # The sub-select walks the live-set index, the UPDATE finds each row by the key.
    assert {n.index for n in scans if n.index} == {"jobs_pending", "jobs_pkey"}

    run = check(db)
    assert [q["table"] for q in run.report["queues"]] == ["jobs"]
    assert not [r for r in run.report["rejected"] if r["table"].startswith("jobs_")]
    # FOR UPDATE on the parent locks the claimed row in its partition: no lock warning.
    assert_quiet(run, "QA502")
    assert_quiet(run, "QA303")


def test_nested_partitions_are_summed_through_every_level(db: TestDB) -> None:
    db.execute("CREATE EXTENSION pg_stat_statements")
    build_nested(db)
    run_claims(db, LIST_CLAIM, params=["mail"])
    table = _queue(take_snapshot(db))
    assert {p.name: p.partition_key for p in table.partitions} == {
        "jobs_mail": "RANGE (created_at)",
        "jobs_mail_old": None,
        "jobs_mail_new": None,
        "jobs_other": None,
    }
    assert {p.name: p.partition_of for p in table.partitions}["jobs_mail_new"] == (
        "public.jobs_mail"
    )
    assert table.reltuples == 8000
    (pending,) = [i for i in table.indexes if i.name == "jobs_pending"]
    # Three leaves' indexes, attached through jobs_mail's to the queue table's.
    assert pending.reltuples == 800
    ((size,),) = db.execute(
        "SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i "
        "WHERE i.indrelid IN ('jobs_mail_old'::regclass, 'jobs_mail_new'::regclass, "
        "'jobs_other'::regclass) AND i.indpred IS NOT NULL"
    )
    assert pending.bytes == size


def test_partition_pruning_is_read_from_the_claim_s_plans(db: TestDB) -> None:
    db.execute("CREATE EXTENSION pg_stat_statements")
    build_by_queue(db, per_queue=2_000, waiting=50)
    run_claims(db, LIST_CLAIM, params=["mail"])
    snap = take_snapshot(db)
    _queue(snap)
    (claim,) = [s for s in snap.statements if s.queue == "public.jobs"]
    # The planner prunes to the one queue's partition when it sees the value: the evidence
    # of every finding on the claim says what each plan reads.
    said = statement_evidence(claim)["partitions_read"]
    assert said.startswith("custom plan: 1 partition(s) (jobs_"), said
    assert "generic plan: " in said, said


def test_a_partitioned_table_found_by_its_structure_is_the_queue(db: TestDB) -> None:
    # No claim is known: the status values and the partial index on the parent say it.
    build_daily(db, days=3, per_day=500, waiting=100, default=False)
    db.execute("ANALYZE jobs")
    run = check(db)
    queues = {f"{q['schema']}.{q['table']}": q for q in run.report["queues"]}
    assert list(queues) == ["public.jobs"], run.report["rejected"]
    assert queues["public.jobs"]["live_predicate"] == "status = 'pending'"


def test_the_statements_sent_do_not_grow_with_the_partitions(db: TestDB) -> None:
    """One query per kind of fact, whatever the number of partitions: a database with 3
    partitions and one with 30 get the same statements."""
    db.execute("CREATE EXTENSION pg_stat_statements")
    counts = []
    for days in (1, 28):
        db.execute("DROP TABLE IF EXISTS jobs")
        build_daily(db, days=days, per_day=50, waiting=20, default=False)
        # The same statements recorded each time: the claims alone.
        db.execute("SELECT pg_stat_statements_reset()")
        run_claims(db, DAILY_CLAIM)
        with logging_role(db) as logged:
            (logged_run,) = logged_runs(logged, [("check", logged.dsn, "--format", "json")])
        counts.append(len(logged_run.statements))
    assert counts[0] == counts[1], counts


def test_another_session_s_lock_on_one_partition_is_not_waited_for(db: TestDB) -> None:
    # A migration holds ACCESS EXCLUSIVE on today's partition: planning the claim on the
    # partitioned table would open it and wait. The report names the lock instead.
    db.execute("CREATE EXTENSION pg_stat_statements")
    build_daily(db, days=3, per_day=500, waiting=100, default=False)
    run_claims(db, DAILY_CLAIM)
    ((today,),) = db.execute("SELECT 'jobs_' || to_char(current_date, 'YYYYMMDD')")
    with psycopg.connect(db.dsn) as holder:
        holder.execute(f"LOCK TABLE {today} IN ACCESS EXCLUSIVE MODE")
        ((pid,),) = holder.execute("SELECT pg_backend_pid()").fetchall()
        run = check(db)
        holder.rollback()
    assert [q["table"] for q in run.report["queues"]] == ["jobs"]
    plans = [h for h in run.report["hidden"] if h["fact"] == "plans"]
    assert plans and all(h["blocker_pid"] == pid for h in plans), run.report["hidden"]
    assert f"public.{today}" in plans[0]["reason"]
    assert "lock_timeout" not in run.stdout
