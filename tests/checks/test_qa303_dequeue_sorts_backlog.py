"""QA303 dequeue-sorts-backlog: unit tests on snapshots, then real servers.

On the servers a claim ordered by a column no index supplies (``ORDER BY tenant_id, id``
with only a ``(created_at) WHERE status = 'queued'`` index) sorts the whole live backlog for
each claim; the printed partial index, built as printed, makes it go.
"""

from __future__ import annotations

import dataclasses

import pytest

from qadvisor.model import Finding, PlanNode, Severity, Snapshot, Statement
from qadvisor.sql.dequeue import analyse
from tests import snapshots as S
from tests.collect.test_statements_collect import build_claim_queue
from tests.helpers import assert_quiet
from tests.shapes import Shape

PARTIAL = S.index(
    "jobs_pending_created_at", ("created_at",), 8 * 1024 * 1024,
    predicate="(status = 'pending'::text)", reltuples=5000.0,
)  # fmt: skip
SCAN = PlanNode("Seq Scan", relation="jobs", schema="public", total_cost=230_000.0,
                plan_rows=5000, filter="(jobs.status = 'pending'::text)")  # fmt: skip
SORTED = PlanNode(
    "Limit", total_cost=230_100.0, plan_rows=1,
    children=(PlanNode("LockRows", children=(
        PlanNode("Sort", sort_key=("jobs.priority DESC", "jobs.id"), plan_rows=5000,
                 children=(SCAN,)),
    )),),
)  # fmt: skip
BY_INDEX = PlanNode("Limit", children=(dataclasses.replace(SCAN, node_type="Index Scan",
                                                          index=PARTIAL.name),))  # fmt: skip
QUERY = (
    "SELECT id FROM jobs WHERE status = 'pending' ORDER BY priority DESC, id LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)


def _snap(text: str = QUERY, plan: PlanNode = SORTED) -> Snapshot:
    table = S.jobs_table(indexes=(PARTIAL,))
    table = dataclasses.replace(table, columns=(*table.columns, S.Column("priority", "integer")))
    stmt = Statement("--query 1", text, parsed=analyse(text), custom_plan=plan)
    return dataclasses.replace(S.snapshot(table), statements=(stmt,))


def _findings(snap: Snapshot) -> list[Finding]:
    return [f for f in S.run("QA303", snap) if isinstance(f, Finding)]


def test_a_sort_over_a_scan_of_the_queue_is_flagged_with_the_order_by_index() -> None:
    (f,) = _findings(_snap())
    assert f.key == "QA303:public.--query 1"
    ev = f.evidence
    assert ev["rows_sorted"] == 5000 and ev["limit"] == 1
    assert ev["rows_read"] == 10_000_000  # a Seq Scan reads the archive too
    assert ev["sort_key"] == ["jobs.priority DESC", "jobs.id"]
    assert "archive included" in f.message
    assert f.fix is not None
    assert f.fix.statements == (
        "CREATE INDEX CONCURRENTLY jobs_pending_priority_id_idx ON public.jobs "
        "(priority DESC, id) WHERE status = 'pending';",
    )


def test_round_robin_sub_select_gets_a_tenant_led_key() -> None:
    text = (
        "SELECT j.id FROM queue_tenants qt CROSS JOIN LATERAL (SELECT id FROM jobs "
        "WHERE tenant_id = qt.tenant_id AND status = 'pending' ORDER BY created_at LIMIT 1 "
        "FOR UPDATE SKIP LOCKED) j ORDER BY qt.last_served LIMIT 1"
    )
    snap = _snap(text)
    table = dataclasses.replace(
        snap.tables[0], columns=(*snap.tables[0].columns, S.Column("tenant_id", "integer"))
    )
    (f,) = _findings(dataclasses.replace(snap, tables=(table,)))
    assert f.fix is not None
    assert "(tenant_id, created_at) WHERE status = 'pending';" in f.fix.statements[0]


def test_quiet_when_an_index_supplies_the_order_or_the_sort_is_small() -> None:
    assert_quiet(S.report("QA303", _snap(plan=BY_INDEX)), "QA303")
    small = dataclasses.replace(
        SORTED,
        children=(PlanNode("Sort", plan_rows=50, children=(
            dataclasses.replace(SCAN, node_type="Index Scan", index="x", plan_rows=50),
        )),),
    )  # fmt: skip
    assert_quiet(S.report("QA303", _snap(plan=small)), "QA303")
    no_limit = QUERY.replace(" LIMIT 1", "")
    assert_quiet(S.report("QA303", _snap(no_limit)), "QA303")


@pytest.mark.judges("QA301", "QA302", "QA303")
def test_found_fixed_and_gone(shape: Shape) -> None:
    build_claim_queue(shape.db)
    query = (
        "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs "
        "WHERE status = 'queued' ORDER BY tenant_id, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
        "RETURNING id"
    )
    run = shape.check("--query", query)
    (f,) = run.findings("QA303")
    ev = f["evidence"]
    assert ev["rows_sorted"] >= 1000 and ev["limit"] == 1
    assert ev["sort_node"].startswith("Sort ")
    assert ev["scan_node"].startswith(("Index Scan using jobs_queued_created_at_idx", "Seq Scan"))
    assert f["fix"]["statements"] == [
        f"CREATE INDEX CONCURRENTLY jobs_queued_tenant_id_id_idx ON {shape.queue} (tenant_id, id) "
        "WHERE status = 'queued';"
    ]
    assert_quiet(run, "QA302", shape.queue)

    shape.apply_fix(f)
    after = shape.check("--query", query)
    for code in ("QA301", "QA302", "QA303"):
        assert_quiet(after, code, shape.queue)


def _sorting(rows: float) -> PlanNode:
    """SORTED over an index scan (not the whole table) that returns ``rows``."""
    scan = dataclasses.replace(SCAN, node_type="Index Scan", index="x", plan_rows=rows)
    return dataclasses.replace(
        SORTED, children=(PlanNode("Sort", plan_rows=rows, children=(scan,)),)
    )


@pytest.mark.parametrize(
    ("rows", "severity"),
    [(999, None), (1_000, Severity.INFO), (1_199, Severity.INFO), (1_200, Severity.WARNING)],
)
def test_rows_read_within_the_margin_of_min_rows_read_is_info(
    rows: float, severity: Severity | None
) -> None:
    # min_rows_read 1,000, margin 20 %: an estimate that moves with ANALYZE's sample is info
    # up to 1,200 rows, and the same snapshot twice gives the same answer.
    once, again = _findings(_snap(plan=_sorting(rows))), _findings(_snap(plan=_sorting(rows)))
    S.assert_margin_answer(once, again, severity)
