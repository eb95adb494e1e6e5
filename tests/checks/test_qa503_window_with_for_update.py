"""QA503 window-with-for-update: unit tests on parsed statements, then --query statements on
real servers: PostgreSQL refuses the original, takes the printed rewrite."""

from __future__ import annotations

import pytest

from qadvisor.model import Severity
from qadvisor.sql.dequeue import analyse
from tests import snapshots as S
from tests.checks.test_qa401_round_robin_walks_backlog import build_tenant_queue, split_fix
from tests.checks.test_qa501_lock_without_skip_locked import findings, with_statements
from tests.conftest import TestDB
from tests.helpers import Pathology, Run, assert_quiet, check, holding, rewrite_of, run_now
from tests.shapes import Shape

# "Each tenant's first job", the obvious way: PostgreSQL refuses it.
PER_TENANT_WINDOW = (
    "select id from (select id, row_number() over (partition by tenant_id order by id) rn "
    "from jobs where status = 'queued') x where rn = 1 limit 1 for update skip locked"
)
# A window that is not about tenants: the oldest 10 jobs by a rank.
RANKED = (
    "select id, rank() over (order by enqueued_at) from jobs where status = 'queued' "
    "order by enqueued_at limit 10 for update skip locked"
)


def test_per_tenant_window_gets_the_round_robin_rewrite() -> None:
    (f,) = findings("QA503", with_statements(PER_TENANT_WINDOW))
    assert f.key == "QA503:public.--query 1" and f.severity is Severity.CRITICAL
    assert f.evidence["partition_by"] == ["tenant_id"]
    assert "FOR UPDATE is not allowed with window functions" in f.message
    assert f.fix is not None
    assert f.fix.statements[0].startswith("CREATE TABLE public.jobs_tenants")
    assert not any(s.startswith("SELECT") for s in f.fix.statements)
    dequeue = analyse(rewrite_of(f).rstrip(";"))
    assert dequeue is not None and dequeue.lateral is not None and not dequeue.has_window
    assert "one job per tenant_id" in f.fix.notes


def test_other_windows_move_to_a_where_sub_select() -> None:
    (f,) = findings("QA503", with_statements(RANKED))
    assert f.fix is not None
    assert f.fix.statements == ()
    rewritten = rewrite_of(f)
    parsed = analyse(rewritten.rstrip(";"))
    assert parsed is not None
    assert (parsed.has_window, parsed.locked_tables, parsed.lock.wait_policy) == (
        False,
        ("jobs",),
        "skip locked",
    )
    assert rewritten.startswith("SELECT\n  *\nFROM public.jobs\nWHERE\n  id IN (")


def test_template_when_the_key_is_not_returned() -> None:
    sql = RANKED.replace("select id, rank()", "select tenant_id, rank()")
    (f,) = findings("QA503", with_statements(sql))
    assert f.fix is not None and f.fix.statements == ()
    assert "must return the key (id)" in f.fix.notes


def test_quiet_when_the_window_is_out_of_the_locks_reach() -> None:
    accepted = (
        "select id from jobs where id in (select max(id) over () from jobs) for update skip locked"
    )
    assert_quiet(S.report("QA503", with_statements(accepted)), "QA503")


# --- on real servers --------------------------------------------------------------------------


# PostgreSQL's refusal is seen by planning: the plans fact (QA503 itself reads no plan).
@pytest.mark.judges("QA401", "QA402", "QA403", "QA501", "QA502", "QA503", reads=("plans",))
def test_window_refused_by_postgresql_and_the_rewrites_accepted(shape: Shape) -> None:
    db = shape.db
    build_tenant_queue(db, {1: 100, 2: 5, 3: 5})
    run = shape.check("--query", RANKED, "--query", PER_TENANT_WINDOW)
    ranked, per_tenant = sorted(run.findings("QA503"), key=lambda f: f["target"]["name"])
    assert ranked["severity"] == "critical"
    # The collector could not plan it: PostgreSQL refuses the statement itself.
    assert "not allowed with window functions" in (ranked["evidence"]["plan_error"] or "")

    assert ranked["fix"]["statements"] == []
    rewritten = rewrite_of(ranked)
    fixed = shape.check("--query", rewritten)
    for code in ("QA501", "QA502", "QA503"):
        assert_quiet(fixed, code, shape.queue)
    assert len(run_now(db, rewritten)) == 10
    # A worker holds the oldest job: the rewrite skips it (and, as its note says, does not
    # replace it with the eleventh).
    oldest = "select id from jobs where status = 'queued' order by enqueued_at limit 1 for update"
    with holding(db, oldest) as held:
        ((first,),) = held
        claimed = [row[0] for row in run_now(db, rewritten)]
        assert len(claimed) == 9 and first not in claimed

    ddl, (dequeue,) = split_fix(per_tenant)
    shape.apply(ddl)
    fixed = shape.check("--query", dequeue)
    for code in ("QA401", "QA402", "QA403", "QA501", "QA502", "QA503"):
        assert_quiet(fixed, code, shape.queue)
    # The round-robin dequeue: a worker holds one job, the next worker claims another.
    with holding(db, dequeue) as held:
        ((job, _),) = held
        ((other, _),) = run_now(db, dequeue)
        assert other != job


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_tenant_queue(db, {1: 100, 2: 5, 3: 5})
    return check(db, "--query", RANKED, "--query", PER_TENANT_WINDOW)


FIX_PATHOLOGIES = {"windows": Pathology(frozenset({"QA503"}), _fix_pathology)}
