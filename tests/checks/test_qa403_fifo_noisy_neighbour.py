"""QA403 fifo-noisy-neighbour: unit tests on hand-built snapshots, then the measured FIFO queue
on real servers (one tenant with 1,000 queued jobs, ten with five), fixed with the printed
round-robin pattern, and healthy controls."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from typing import Any

import pytest

from qadvisor.model import Finding, Severity, Skip, Snapshot, Statement, TenantCount
from qadvisor.sql.dequeue import analyse
from tests import snapshots as S
from tests.checks.test_qa401_round_robin_walks_backlog import (
    FIFO,
    FIFO_IDX,
    PKEY,
    RR_FIXED,
    build_tenant_queue,
    jobs,
    rr_snapshot,
    split_fix,
    trap_facts,
)
from tests.conftest import TestDB
from tests.helpers import Pathology, Run, assert_quiet, check, holding, run_now
from tests.shapes import Shape

EXAMPLE_JOBS = {1: 1000, **dict.fromkeys(range(2, 12), 5)}
EXAMPLE_COUNTS = (TenantCount("1", 1000), *(TenantCount(str(t), 5) for t in range(2, 12)))


def fifo_snapshot(sql: str | None = FIFO, **facts: Any) -> Snapshot:
    snap = rr_snapshot(jobs(PKEY, FIFO_IDX), None, sql=sql or FIFO)
    counts: dict[str, Any] = {
        "live_by_tenant": EXAMPLE_COUNTS,
        "tenants_counted": 11,
        "rotation_table": None,
        "rotation_rows": None,
        "idle_tenants": None,
        "rotation_probed": None,
    }
    return dataclasses.replace(
        snap,
        statements=snap.statements if sql else (),
        tenants=(trap_facts(**(counts | facts)),),
    )


def run(snap: Snapshot) -> list[Any]:
    return S.run("QA403", snap)


def test_measured_fifo_backlog_is_flagged_with_a_per_worker_wait_estimate() -> None:
    (f,) = run(fifo_snapshot())
    assert isinstance(f, Finding)
    assert f.key == "QA403:public.jobs" and f.severity is Severity.WARNING
    ev = f.evidence
    assert (ev["live_rows"], ev["tenants_with_work"], ev["top_tenant"]) == (1050, 11, "1")
    assert ev["top_tenant_share"] == round(1000 / 1050, 4)
    assert ev["top_to_median_ratio"] == 200.0
    assert ev["backlog_ahead_of_new_job"] == 1050
    assert ev["fifo_statements"] == ["--query 1"]
    # Mean duration unknown: the estimate is the formula, made concrete with the measured setup.
    assert ev["mean_job_seconds"] is None
    assert "backlog x mean job duration / workers" in f.message
    assert "at 20 ms per job and 4 workers that is 5.2 s" in f.message
    assert f.fix is not None
    statements = f.fix.statements
    assert statements[0].startswith("CREATE TABLE public.jobs_tenants (\n  tenant_id integer ")
    assert statements[1] == (
        "CREATE INDEX jobs_tenants_last_served_idx ON public.jobs_tenants (last_served);"
    )
    assert statements[3] == (
        "CREATE INDEX CONCURRENTLY jobs_queued_tenant_id_enqueued_at_id_idx ON public.jobs "
        "(tenant_id, enqueued_at, id) WHERE status = 'queued';"
    )
    assert len(statements) == 4  # the migration; the dequeue is a rewrite of the FIFO claim
    (step,) = f.fix.of_kind("rewrite")
    assert step.source == "--query 1" and step.before is not None and "FIFO" not in step.sql
    dequeue = analyse(step.sql.rstrip(";"))
    assert dequeue is not None and dequeue.lateral is not None
    assert dequeue.lock_level == "lateral" and dequeue.locked_tables == ("jobs",)
    assert dequeue.lateral.outer_table == "jobs_tenants"


def test_measured_mean_duration_gives_the_wait() -> None:
    (f,) = run(fifo_snapshot(mean_job_seconds=0.020, duration_jobs=1000))
    assert isinstance(f, Finding)
    assert f.evidence["estimated_wait_s_per_worker"] == 21.0
    assert f.evidence["round_robin_wait_s_per_worker"] == 0.22
    assert "about 21 s per worker at the measured mean of 20 ms" in f.message


def test_no_known_dequeue_is_info() -> None:
    (f,) = run(fifo_snapshot(sql=None))
    assert isinstance(f, Finding) and f.severity is Severity.INFO
    assert "no known per-tenant dequeue" in f.message


def test_quiet_when_not_skewed_or_dequeued_per_tenant() -> None:
    def quiet(snap: Snapshot) -> None:
        assert_quiet(S.report("QA403", snap), "QA403")

    even = (TenantCount("1", 500), TenantCount("2", 500))
    quiet(fifo_snapshot(live_by_tenant=even, tenants_counted=2))
    one = (TenantCount("1", 1000),)
    quiet(fifo_snapshot(live_by_tenant=one, tenants_counted=1))
    small = (TenantCount("1", 60), TenantCount("2", 1))
    quiet(fifo_snapshot(live_by_tenant=small, tenants_counted=2))  # min_backlog
    quiet(fifo_snapshot(sql=RR_FIXED))
    per_tenant = FIFO.replace("where status", "where tenant_id = $1 and status")
    quiet(fifo_snapshot(sql=per_tenant))


def test_uncounted_live_set_is_a_skip() -> None:
    note = "live rows per tenant not counted: no index of public.jobs reaches the live set"
    (skip,) = run(fifo_snapshot(live_by_tenant=(), tenants_counted=0, notes=(note,)))
    assert isinstance(skip, Skip) and note in skip.reason


def test_statement_on_another_table_does_not_count() -> None:
    other = "select id from other_jobs where status = 'queued' limit 1 for update skip locked"
    snap = fifo_snapshot()
    stmt = Statement(source="--query 2", text=other, parsed=analyse(other))
    snap = dataclasses.replace(snap, statements=(*snap.statements, stmt))
    (f,) = run(snap)
    assert isinstance(f, Finding) and f.evidence["fifo_statements"] == ["--query 1"]


# --- on real servers --------------------------------------------------------------------------


@pytest.mark.judges("QA401", "QA402", "QA403")
def test_fifo_noisy_neighbour_found_fixed_with_round_robin_and_gone(shape: Shape) -> None:
    db = shape.db
    build_tenant_queue(db, EXAMPLE_JOBS, tenant_index=None)
    run = shape.check("--query", FIFO)
    (f,) = run.findings("QA403")
    ev = f["evidence"]
    assert (ev["live_rows"], ev["tenants_with_work"], ev["top_tenant_rows"]) == (1050, 11, 1000)
    assert ev["counts_complete"] is True
    assert ev["tenants"][0] == {"tenant": "1", "rows": 1000, "share": 0.9524}
    assert "waits behind all 1,050" in f["message"]
    ddl, (dequeue,) = split_fix(f)
    # The per-tenant index serves the dequeue the fix prints, which no server recorded yet.
    (index,) = [s for s in f["fix"]["steps"] if s["sql"].startswith("CREATE INDEX CONCURRENTLY")]
    assert index["note"].startswith("Built for the round-robin dequeue this fix prints")
    shape.apply(ddl)
    assert db.execute("SELECT count(*) FROM jobs_tenants") == [(11,)]
    # ... and its plan descends it.
    name = index["sql"].split()[3]
    assert name in str(db.execute(f"EXPLAIN {dequeue.rstrip(';')}"))
    fixed = shape.check("--query", dequeue)
    for code in ("QA401", "QA402", "QA403"):
        assert_quiet(fixed, code, shape.queue)
    # The lock is on the job: while a worker holds one, the next worker claims another.
    with holding(db, dequeue) as held:
        ((job, _),) = held
        ((other, _),) = run_now(db, dequeue)
        assert other != job
    # Claims as the fix's notes say (the dequeue, the job marked running, the tenant's turn
    # moved to the back): FIFO serves tenant 1's backlog first, round-robin serves each of
    # the 11 tenants within the first 11 claims.
    assert claims(db, FIFO, None, 11, keep=False) == [1] * 11
    m = re.search(r"`(UPDATE [^`]+ = \$1)`", f["fix"]["notes"])
    assert m, f["fix"]["notes"]
    turn = m.group(1).replace("$1", "%s")
    assert sorted(claims(db, dequeue, turn, 11)) == list(range(1, 12))


def claims(db: TestDB, dequeue: str, turn: str | None, n: int, keep: bool = True) -> list[int]:
    """The tenants of ``n`` successive claims, each committed on its own: the dequeue, the job
    set to running, then ``turn`` (the rotation update) for its tenant. ``keep`` False: in one
    transaction that is rolled back."""
    served = []
    outer = contextlib.nullcontext() if keep else None
    with db.connect() as conn, outer or conn.transaction(force_rollback=True):
        for _ in range(n):
            with conn.transaction():
                row = conn.execute(dequeue).fetchone()
                assert row is not None
                job, tenant = row
                conn.execute("UPDATE jobs SET status = 'running' WHERE id = %s", [job])
                if turn is not None:
                    conn.execute(turn, [tenant])
            served.append(tenant)
    return served


def test_measured_job_durations_make_the_estimate(shape: Shape) -> None:
    build_tenant_queue(shape.db, EXAMPLE_JOBS, tenant_index=None, done=5000)
    (f,) = shape.check("--query", FIFO).findings("QA403")
    ev = f["evidence"]
    assert abs(ev["mean_job_seconds"] - 0.020) < 1e-6
    assert ev["estimated_wait_s_per_worker"] == 21.0  # 1,050 jobs x 20 ms
    assert any("1,000 most recently finished jobs" in n for n in ev["tenant_facts"])


@pytest.mark.judges("QA401", "QA402", "QA403", "QA501", "QA502", "QA503")
def test_quiet_on_a_healthy_round_robin(shape: Shape) -> None:
    # Round-robin with the tenant-led index and only active tenants in the rotation.
    build_tenant_queue(shape.db, {1: 100_000, **dict.fromkeys(range(2, 12), 1)}, rotation=11,
                       tenant_index="(tenant_id, enqueued_at, id)")  # fmt: skip
    run = shape.check("--query", RR_FIXED)
    for code in ("QA401", "QA402", "QA403", "QA501", "QA502", "QA503"):
        assert_quiet(run, code, shape.queue)


def test_quiet_on_an_evenly_shared_fifo_queue(shape: Shape) -> None:
    build_tenant_queue(shape.db, {1: 500, 2: 500, 3: 480}, tenant_index=None)
    assert_quiet(shape.check("--query", FIFO), "QA403", shape.queue)


@pytest.mark.parametrize(
    ("top", "severity"),
    [(85, None), (100, Severity.INFO), (109, Severity.INFO), (111, Severity.WARNING)],
)
def test_a_backlog_within_the_margin_of_min_backlog_is_info(
    top: int, severity: Severity | None
) -> None:
    # One tenant with ``top`` jobs and ten with one each: min_backlog 100, margin 20 %, so a
    # backlog of 100 to 120 (moving as workers claim) is info on every run.
    counts = (TenantCount("1", top), *(TenantCount(str(t), 1) for t in range(2, 12)))
    snap = fifo_snapshot(live_by_tenant=counts)
    S.assert_margin_answer(run(snap), run(snap), severity)


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_tenant_queue(db, EXAMPLE_JOBS, tenant_index=None)
    return check(db, "--query", FIFO)


FIX_PATHOLOGIES = {"fifo": Pathology(frozenset({"QA403"}), _fix_pathology)}
