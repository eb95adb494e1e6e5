"""QA502 tenant-row-lock: unit tests on parsed statements, then --query statements on real
servers, fixed with the printed rewrite."""

from __future__ import annotations

import dataclasses

import pytest

from qadvisor.model import Snapshot
from qadvisor.sql.dequeue import LockClause, analyse
from tests import snapshots as S
from tests.checks.test_qa401_round_robin_walks_backlog import FIFO, RR_BY_ID, build_tenant_queue
from tests.checks.test_qa501_lock_without_skip_locked import (
    CTE_CLAIM,
    findings,
    lock_of,
    with_statements,
)
from tests.conftest import TestDB
from tests.helpers import (
    Pathology,
    Run,
    assert_quiet,
    check,
    holding,
    rewrite_of,
    row_locked,
    run_now,
)
from tests.partitioned import DAILY_CLAIM, build_daily
from tests.shapes import Shape

JOIN = (
    "select j.id, t.id from tenants t join jobs j on j.tenant_id = t.id "
    "where j.status = 'queued' and t.active order by j.id limit 1 {lock}"
)
# The round-robin query with the lock moved to the outer level: it locks the rotation row.
RR_OUTER_LOCK = RR_BY_ID.replace("  for update skip locked\n", "") + " for update skip locked"


def test_lock_of_the_tenant_instead_of_the_job() -> None:
    (f,) = findings("QA502", with_statements(JOIN.format(lock="for update of t skip locked")))
    assert f.key == "QA502:public.--query 1"
    assert f.evidence["locked_tables"] == ["tenants"] and f.evidence["job_locked"] is False
    assert "and not the jobs row it claims" in f.message
    assert "two workers can claim the same job" in f.message
    assert f.fix is not None
    assert lock_of(rewrite_of(f)) == LockClause("update", "skip locked", ("jobs",))
    # A statement's lock shape alone: QA501 stays quiet, it has SKIP LOCKED.
    only_tenant = with_statements(JOIN.format(lock="for update of t skip locked"))
    assert_quiet(S.report("QA501", only_tenant), "QA501")


def test_lock_without_of_in_a_join_locks_both() -> None:
    (f,) = findings("QA502", with_statements(JOIN.format(lock="for update")))
    assert f.evidence["locked_tables"] == ["tenants", "jobs"] and f.evidence["job_locked"]
    assert "as well as the job" in f.message
    assert f.fix is not None
    assert lock_of(rewrite_of(f)) == LockClause("update", "skip locked", ("jobs",))


def test_round_robin_with_the_lock_at_the_outer_level() -> None:
    # The analysis takes the rotation table for the queue here; the discovered queue wins.
    parsed = analyse(RR_OUTER_LOCK)
    assert parsed is not None and set(parsed.locked_tables) == {"queue_tenants", "jobs"}
    (f,) = findings("QA502", with_statements(RR_OUTER_LOCK))
    assert (f.target.table, f.evidence["queue_table"]) == ("jobs", "jobs")
    assert "locks rows of queue_tenants as well as the job" in f.message
    assert f.fix is not None
    rewritten = analyse(rewrite_of(f).rstrip(";"))
    assert rewritten is not None and rewritten.locked_tables == ("jobs",)


def test_quiet_when_only_the_job_is_locked() -> None:
    snap = with_statements(
        JOIN.format(lock="for update of j skip locked"),
        RR_BY_ID,
        "select id from jobs where status = 'queued' limit 1 for update skip locked",
    )
    assert_quiet(S.report("QA502", snap), "QA502")


# The claim reads each job's own row of job_details (job_details.job_id is unique): FOR
# UPDATE without OF locks it too, one row per job.
DETAILS = (
    "select j.id, d.payload from jobs j join job_details d on d.job_id = j.id "
    "where j.status = 'queued' order by j.id limit 1 for update skip locked"
)


def with_keys(sql: str, keys: dict[str, tuple[tuple[str, ...], ...]]) -> Snapshot:
    snap = with_statements(sql)
    (stmt,) = snap.statements
    names = {"job_details": "public.job_details", "jobs": "public.jobs"}
    stmt = dataclasses.replace(stmt, queue="public.jobs", names=names, unique_keys=keys)
    return dataclasses.replace(snap, statements=(stmt,))


def test_a_lock_of_the_jobs_own_row_of_another_table_is_no_tenant_lock() -> None:
    # jobs.id is the snapshot's primary key; job_details.job_id unique in the catalog.
    own = with_keys(DETAILS, {"public.job_details": (("job_id",),), "public.jobs": (("id",),)})
    assert_quiet(S.report("QA502", own), "QA502")
    # Without the jobs table's key in the statement's catalog facts, its indexes say it.
    assert_quiet(S.report("QA502", with_keys(DETAILS, {"public.job_details": (("job_id",),)})),
                 "QA502")  # fmt: skip


def test_a_lock_of_a_row_several_jobs_can_share_is_a_tenant_lock() -> None:
    # Several detail rows per job (no unique key on job_id): not the job's own row.
    (f,) = findings("QA502", with_keys(DETAILS, {"public.job_details": (("id",),)}))
    assert f.evidence["locked_tables"] == ["jobs", "job_details"]
    # A batch's row, keyed by its primary key, is shared by every job of the batch: batch_id
    # is not unique in jobs.
    batch = (
        "select j.id from jobs j join batches b on b.id = j.batch_id "
        "where j.status = 'queued' order by j.id limit 1 for update skip locked"
    )
    snap = with_statements(batch)
    (stmt,) = snap.statements
    stmt = dataclasses.replace(
        stmt, queue="public.jobs", names={"batches": "public.batches"},
        unique_keys={"public.batches": (("id",),)},
    )  # fmt: skip
    (f,) = findings("QA502", dataclasses.replace(snap, statements=(stmt,)))
    assert "serialized per batches row" in f.message


# --- on real servers --------------------------------------------------------------------------


@pytest.mark.judges("QA501", "QA502")
def test_tenant_row_lock_found_rewritten_and_gone(shape: Shape) -> None:
    db = shape.db
    build_tenant_queue(db, {1: 50, 2: 50}, rotation=2)
    db.execute(
        "CREATE TABLE tenants (id int PRIMARY KEY, active bool NOT NULL DEFAULT true);"
        "INSERT INTO tenants (id) VALUES (1), (2)"
    )
    cases = [
        (JOIN.format(lock="for update of t skip locked"), "tenants", "id"),
        (JOIN.format(lock="for update"), "tenants", "id"),
        (RR_OUTER_LOCK, "queue_tenants", "tenant_id"),
    ]
    for sql, tenants, key in cases:
        (f,) = shape.check("--query", sql).findings("QA502")
        rewritten = rewrite_of(f)
        fixed = shape.check("--query", rewritten)
        assert_quiet(fixed, "QA501", shape.queue)
        assert_quiet(fixed, "QA502", shape.queue)
        # The statement as found holds the tenant's row until the claim commits...
        with holding(db, sql) as held:
            ((_, tenant),) = held
            assert row_locked(db, tenants, key, tenant)
        # ...the rewrite holds only the job: the tenant's row stays free, and a second worker
        # skips the held job and claims another one.
        with holding(db, rewritten) as held:
            ((job, tenant),) = held
            assert not row_locked(db, tenants, key, tenant), sql
            ((other, _),) = run_now(db, rewritten)
            assert other != job


@pytest.mark.judges("QA501", "QA502")
def test_a_claim_on_a_partitioned_table_locks_the_job_in_its_partition(shape: Shape) -> None:
    # FOR UPDATE on the partitioned table locks the claimed row in the partition it is in:
    # no other table's row is locked, and two workers never get the same job.
    build_daily(shape.db, days=5, per_day=500, waiting=50)
    claim = DAILY_CLAIM.replace("LIMIT 10", "LIMIT 1")
    run = shape.check("--query", claim)
    assert [q["table"] for q in run.report["queues"]] == ["jobs"]
    assert_quiet(run, "QA501", shape.queue)
    assert_quiet(run, "QA502", shape.queue)
    with holding(shape.db, claim) as held:
        ((job,),) = held
        assert row_locked(shape.db, "jobs", "id", job)
        ((other,),) = run_now(shape.db, claim)
        assert other != job


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_tenant_queue(db, {1: 50, 2: 50}, rotation=2)
    db.execute(
        "CREATE TABLE tenants (id int PRIMARY KEY, active bool NOT NULL DEFAULT true);"
        "INSERT INTO tenants (id) VALUES (1), (2)"
    )
    return check(
        db,
        "--query", FIFO.replace("for update skip locked", "for update nowait"),
        "--query", CTE_CLAIM,
        "--query", JOIN.format(lock="for update"),
    )  # fmt: skip


FIX_PATHOLOGIES = {"locks": Pathology(frozenset({"QA501", "QA502"}), _fix_pathology)}
