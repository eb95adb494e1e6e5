"""QA302 predicate-does-not-imply-index: unit tests on snapshots, then real servers.

On the servers a dequeue with ``status IN ('queued', 'retry')`` or ``status <> 'done'``
against the ``WHERE status = 'queued'`` partial index is flagged; the printed index, built as
printed, makes it go (and QA303 with it, since the index also supplies the order).
"""

from __future__ import annotations

import dataclasses

import pytest

from qadvisor.api.provisional import (
    indexes_used,
)
from qadvisor.model import Finding, PlanNode, Snapshot, Statement
from qadvisor.sql.dequeue import analyse
from tests import snapshots as S
from tests.collect.test_statements_collect import build_claim_queue, take_snapshot
from tests.conftest import TestDB
from tests.helpers import Pathology, Run, assert_quiet, check
from tests.shapes import Shape

PARTIAL = S.index(
    "jobs_pending_created_at", ("created_at",), 8 * 1024 * 1024,
    predicate="(status = 'pending'::text)",
)  # fmt: skip
SEQ_SORT = PlanNode(
    "Limit", total_cost=4000.0, plan_rows=1,
    children=(PlanNode("LockRows", children=(PlanNode("Sort", sort_key=("created_at",), children=(
        PlanNode("Seq Scan", relation="jobs", schema="public", total_cost=3900.0, plan_rows=5000,
                 filter="(status = ANY ('{pending,retry}'::text[]))"),
    )),)),),
)  # fmt: skip
USES_PARTIAL = PlanNode(
    "Limit",
    total_cost=0.33,
    children=(PlanNode("Index Scan", relation="jobs", schema="public", index=PARTIAL.name),),
)


NOT_PROVED = {PARTIAL.name: "not proved"}


def _snap(text: str, plan: PlanNode = SEQ_SORT, **kw: object) -> Snapshot:
    kw.setdefault("index_probes", NOT_PROVED)
    stmt = Statement("--query 1", text, parsed=analyse(text), custom_plan=plan,
                     generic_plan=plan, **kw)  # type: ignore[arg-type]  # fmt: skip
    snap = S.snapshot(S.jobs_table(indexes=(PARTIAL,)))
    return dataclasses.replace(snap, statements=(stmt,))


def _findings(snap: Snapshot) -> list[Finding]:
    return [f for f in S.run("QA302", snap) if isinstance(f, Finding)]


def _claim(condition: str) -> str:
    return (
        f"SELECT id FROM jobs WHERE {condition} ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
    )


def test_an_in_list_wider_than_the_index_is_flagged_with_a_matching_index() -> None:
    (f,) = _findings(_snap(_claim("status IN ('pending', 'retry')")))
    assert f.key == "QA302:public.--query 1"
    assert f.evidence["partial_index"] == "jobs_pending_created_at"
    assert f.evidence["statement_predicates"] == ["status IN ('pending', 'retry')"]
    assert f.evidence["custom_plan_scan"].startswith("Seq Scan on public.jobs")
    assert f.fix is not None
    assert f.fix.statements == (
        "CREATE INDEX CONCURRENTLY jobs_pending_retry_created_at_idx ON public.jobs "
        "(created_at) WHERE status IN ('pending', 'retry');",
    )


def test_a_negation_is_flagged_even_from_pg_stat_statements_text() -> None:
    (f,) = _findings(_snap(_claim("status <> $1"), custom_values={"1": "'done'"}))
    assert f.fix is not None
    assert f.fix.statements[0].endswith("(created_at) WHERE status <> 'done';")
    assert "$n" in f.fix.notes


def test_an_index_that_already_covers_the_proposed_one_is_not_proposed_again() -> None:
    # The query's own predicate already has an index with its key: building another would
    # duplicate it; the fix says so and builds nothing.
    own = S.index("jobs_not_done_created_at", ("created_at", "id"), 1 << 20,
                  predicate="(status <> 'done'::text)")  # fmt: skip
    snap = _snap(_claim("status <> 'done'"))
    snap = dataclasses.replace(snap, tables=(S.jobs_table(indexes=(PARTIAL, own)),))
    (f,) = _findings(snap)
    assert f.fix is not None and f.fix.statements == ()
    assert "Index jobs_not_done_created_at already has the keys" in f.fix.notes
    # Without it, the index is proposed, and its step names the statement it is for,
    # derived from the statement's text.
    (f,) = _findings(_snap(_claim("status <> 'done'")))
    assert f.fix is not None
    (step,) = f.fix.steps
    assert step.sql.endswith("(created_at) WHERE status <> 'done';")
    assert step.note.startswith("Statements whose WHERE implies")
    assert "--query 1" in step.note and "not from a plan" in step.note


def test_quiet_when_the_predicate_implies_the_index_or_the_plan_uses_it() -> None:
    def quiet(snap: Snapshot) -> None:
        assert_quiet(S.report("QA302", snap), "QA302")

    quiet(_snap(_claim("status = 'pending'")))  # a cost choice, not a proof
    quiet(_snap(_claim("status IN ('pending', 'retry')"), USES_PARTIAL))
    quiet(_snap(_claim("tenant_id = 3")))  # nothing said about the status
    # Unknown values of a bound IN list: cannot tell.
    quiet(_snap(_claim("status IN ($1, $2)")))


def test_only_the_planners_own_no_counts() -> None:
    wide = _claim("(status = 'pending' OR status = 'retry')")
    # The planner proved it: the plan avoided the index for another reason (QA303's).
    proved = _snap(wide, index_probes={PARTIAL.name: "proved"})
    assert_quiet(S.report("QA302", proved), "QA302")
    # Not clear, or never asked: a skip for the queue, not a finding and not an all-clear.
    for probes in ({PARTIAL.name: "undecided: the planner chose jobs_status_idx"}, {}):
        (skip,) = S.run("QA302", _snap(wide, index_probes=probes))
        assert not isinstance(skip, Finding) and skip.queue == "public.jobs"
        assert "is not clear" in skip.reason


def test_an_or_of_the_index_values_is_proved_by_the_planner(shape: Shape) -> None:
    db = shape.db
    build_claim_queue(db)
    db.execute(
        "CREATE INDEX jobs_waiting_created_at ON jobs (created_at) "
        "WHERE status = ANY ('{queued,retry}')"
    )
    db.execute("ANALYZE jobs")
    # Ordered by id, the chosen plan walks the primary key: it avoids the index for its
    # order, which is no proof that the index cannot serve the condition.
    query = _claim("(status = 'queued' OR status = 'retry')").replace("created_at", "id")
    assert_quiet(shape.check("--query", query), "QA302", shape.queue)
    (stmt,) = take_snapshot(shape.checker, [("--query 1", query)]).statements
    assert stmt.custom_plan is not None
    assert "jobs_waiting_created_at" not in indexes_used(stmt.custom_plan, shape.schema, "jobs")
    assert stmt.index_probes["jobs_waiting_created_at"] == "proved"
    assert stmt.index_probes["jobs_queued_created_at_idx"].startswith("undecided")


@pytest.mark.parametrize(
    "condition", ["status IN ('queued', 'retry')", "status <> 'done'"], ids=["in-list", "not"]
)
@pytest.mark.judges("QA302", "QA303")
def test_found_fixed_and_gone(shape: Shape, condition: str) -> None:
    build_claim_queue(shape.db)
    query = _claim(condition)
    run = shape.check("--query", query)
    (f,) = run.findings("QA302")
    assert f["severity"] == "warning"
    assert f["evidence"]["custom_plan_scan"].startswith(f"Seq Scan on {shape.queue}")
    assert "jobs_queued_created_at_idx" not in str(f["evidence"]["custom_plan"])
    (create,) = f["fix"]["statements"]
    assert create.startswith("CREATE INDEX CONCURRENTLY ") and f"WHERE {condition};" in create
    # QA303 proposes the very same index (same name), not a second one.
    (sort,) = run.findings("QA303")
    assert sort["fix"]["statements"] == [create]
    # The step names the statement the index serves ...
    (step,) = f["fix"]["steps"]
    assert step["note"].startswith("Statements whose WHERE implies") and "--query 1" in step["note"]

    shape.apply_fix(f)
    after = shape.check("--query", query)
    assert_quiet(after, "QA302", shape.queue)
    assert_quiet(after, "QA303", shape.queue)
    # ... and that statement's plan reads it.
    name = create.split()[3]
    (stmt,) = take_snapshot(shape.checker, [("--query 1", query)]).statements
    assert stmt.custom_plan is not None
    assert name in indexes_used(stmt.custom_plan, shape.schema, "jobs")


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_claim_queue(db)
    return check(db, "--query", _claim("status IN ('queued', 'retry')"))


FIX_PATHOLOGIES = {"wider-predicate": Pathology(frozenset({"QA302", "QA303"}), _fix_pathology)}
