"""QA501 lock-without-skip-locked: unit tests on parsed statements, then --query statements on
real servers, fixed with the printed rewrite."""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg
import pytest

from qadvisor.model import Finding, Snapshot, Statement
from qadvisor.sql.dequeue import LockClause, analyse
from tests import snapshots as S
from tests.checks.test_qa401_round_robin_walks_backlog import (
    FIFO,
    FIFO_IDX,
    PKEY,
    QUEUED,
    build_tenant_queue,
    jobs,
)
from tests.helpers import assert_quiet, holding, rewrite_of, run_now
from tests.shapes import Shape

CLAIM = (
    "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs WHERE status = $1 "
    "ORDER BY id LIMIT $2 FOR UPDATE) RETURNING id"
)


def with_statements(*sqls: str, queryid: int | None = None) -> Snapshot:
    statements = tuple(
        Statement(source=f"--query {i}", text=sql, parsed=analyse(sql), queryid=queryid)
        for i, sql in enumerate(sqls, 1)
    )
    return dataclasses.replace(S.snapshot(jobs(PKEY, FIFO_IDX), live=QUEUED), statements=statements)


def findings(code: str, snap: Snapshot) -> list[Finding]:
    out = S.run(code, snap)
    assert all(isinstance(f, Finding) for f in out), out
    return out


def lock_of(statement: str) -> LockClause:
    parsed = analyse(statement.rstrip(";"))
    assert parsed is not None
    return parsed.lock


@pytest.mark.parametrize(
    ("clause", "policy"),
    [("for update", "wait"), ("for update nowait", "nowait"), ("for no key update", "wait")],
)
def test_lock_without_skip_locked_is_flagged_and_rewritten(clause: str, policy: str) -> None:
    sql = FIFO.replace("for update skip locked", clause)
    (f,) = findings("QA501", with_statements(sql))
    assert f.key == "QA501:public.--query 1"
    assert (f.target.kind, f.target.schema, f.target.table) == ("statement", "public", "jobs")
    assert f.evidence["wait_policy"] == policy
    assert ("gets an error" in f.message) == (policy == "nowait")
    assert f.fix is not None
    rewritten = rewrite_of(f)
    lock = lock_of(rewritten)
    assert lock.wait_policy == "skip locked" and lock.of == ()
    assert lock.strength == ("no key update" if "no key" in clause else "update")


def test_nested_claim_from_pg_stat_statements_keeps_its_parameters() -> None:
    (f,) = findings("QA501", with_statements(CLAIM, queryid=-42))
    assert f.target.name == "pgss:-42"
    assert f.fix is not None
    rewritten = rewrite_of(f)
    assert "FOR UPDATE SKIP LOCKED" in rewritten
    assert "status = $1" in rewritten and "LIMIT $2" in rewritten
    assert rewritten.startswith("UPDATE jobs SET status = 'running'")


def test_join_without_of_is_rewritten_to_lock_only_the_job() -> None:
    sql = ("select j.id from tenants t join jobs j on j.tenant_id = t.id "
           "where j.status = 'queued' order by j.id limit 1 for update")  # fmt: skip
    (f,) = findings("QA501", with_statements(sql))
    assert f.fix is not None
    lock = lock_of(rewrite_of(f))
    assert lock == LockClause("update", "skip locked", ("jobs",))


# The outer lock reads only the WITH query, so it locks nothing (PostgreSQL accepts it): the
# claim is the CTE's. SKIP LOCKED on the outer clause would leave the claim waiting.
CTE_CLAIM = (
    "with c as (select id from jobs where status = 'queued' order by id limit 1 for update) "
    "select id from c for update"
)


def test_the_rewrite_puts_skip_locked_on_the_level_that_claims() -> None:
    (f,) = findings("QA501", with_statements(CTE_CLAIM))
    assert f.fix is not None
    rewritten = rewrite_of(f)
    assert lock_of(rewritten).wait_policy == "skip locked", rewritten


def test_a_quoted_alias_stays_quoted_in_of() -> None:
    sql = ('select "J".id from tenants t join jobs "J" on "J".tenant_id = t.id '
           "where \"J\".status = 'queued' order by \"J\".id limit 1 for update")  # fmt: skip
    (f,) = findings("QA501", with_statements(sql))
    assert f.fix is not None
    rewritten = rewrite_of(f)
    assert 'FOR UPDATE OF "J" SKIP LOCKED' in rewritten, rewritten
    assert lock_of(rewritten) == LockClause("update", "skip locked", ("jobs",))


def test_quiet_with_skip_locked_everywhere_or_no_lock() -> None:
    rr = "select 1"  # takes no row lock: parsed is None
    snap = with_statements(FIFO)
    snap = dataclasses.replace(
        snap, statements=(*snap.statements, Statement(source="--query 2", text=rr, parsed=None))
    )
    assert_quiet(S.report("QA501", snap), "QA501")


# --- on real servers --------------------------------------------------------------------------


def _plan_errors(run: Any) -> list[str]:
    return [s["reason"] for s in run.report["skipped"] if "--query" in s["reason"]]


@pytest.mark.judges("QA501", reads=("plans",))
def test_a_cte_claim_rewritten_skips_the_held_job(shape: Shape) -> None:
    db = shape.db
    build_tenant_queue(db, {1: 50, 2: 50})
    (f,) = shape.check("--query", CTE_CLAIM).findings("QA501")
    rewritten = rewrite_of(f)
    assert_quiet(shape.check("--query", rewritten), "QA501", shape.queue)
    with holding(db, rewritten) as held:
        ((first,),) = held
        ((other,),) = run_now(db, rewritten)
        assert other != first
        with pytest.raises(psycopg.errors.LockNotAvailable):
            run_now(db, CTE_CLAIM)


# That PostgreSQL plans the rewrite is the plans fact's (QA501 itself reads no plan).
@pytest.mark.judges("QA501", reads=("plans",))
def test_plain_for_update_found_rewritten_and_gone(shape: Shape) -> None:
    db = shape.db
    build_tenant_queue(db, {1: 50, 2: 50})
    for clause in ("for update", "for update nowait"):
        original = FIFO.replace("for update skip locked", clause)
        run = shape.check("--query", original)
        (f,) = run.findings("QA501")
        rewritten = rewrite_of(f)
        assert f["fix"]["statements"] == []  # application code: nothing to run as printed
        (plan,) = shape.plan_rewrites(f)
        assert "LockRows" in plan
        fixed = shape.check("--query", rewritten)
        assert_quiet(fixed, "QA501", shape.queue)
        assert _plan_errors(fixed) == []  # PostgreSQL plans the rewrite as printed
        # A worker holds the first job: the rewrite claims the next one, where the statement
        # as found waits for that worker (or fails at once with NOWAIT).
        with holding(db, rewritten) as held:
            ((first, _),) = held
            ((other, _),) = run_now(db, rewritten)
            assert other != first
            with pytest.raises(psycopg.errors.LockNotAvailable):
                run_now(db, original)
