"""Sorts over a table's scans: what bounds the rows a sort gets."""

from __future__ import annotations

from qadvisor.derive.plans.reading import sort_inputs
from qadvisor.model import PlanNode

SCAN = PlanNode("Index Scan", relation="jobs", schema="public", index="i", plan_rows=2000)
OTHER = PlanNode("Function Scan", relation="unnest", plan_rows=3)


def _lateral(branch: PlanNode) -> PlanNode:
    """Sort over a Nested Loop of three entrypoints and a LATERAL branch per entrypoint."""
    loop = PlanNode("Nested Loop", plan_rows=30, children=(OTHER, branch))
    return PlanNode("Limit", children=(PlanNode("Sort", plan_rows=30, children=(loop,)),))


def test_a_limit_between_the_sort_and_the_scan_bounds_the_sort() -> None:
    limit = PlanNode("Limit", plan_rows=10, children=(PlanNode("LockRows", children=(SCAN,)),))
    (found,) = sort_inputs(_lateral(limit), "public", "jobs")
    assert found.scan is SCAN and found.limit is limit and not found.incremental


def test_a_sort_under_the_branch_limit_is_not_bounded_by_it() -> None:
    inner = PlanNode("Sort", sort_key=("c.created_at",), children=(SCAN,))
    limit = PlanNode("Limit", plan_rows=10, children=(inner,))
    outer, under = sort_inputs(_lateral(limit), "public", "jobs")
    assert outer.limit is limit and under.sort is inner and under.limit is None


def test_an_unbounded_scan_beside_a_bounded_one_is_the_one_reported() -> None:
    bounded = PlanNode("Limit", plan_rows=10, children=(SCAN,))
    seq = PlanNode("Seq Scan", relation="jobs", schema="public", plan_rows=50_000)
    append = PlanNode("Append", children=(bounded, seq))
    (found,) = sort_inputs(PlanNode("Sort", children=(append,)), "public", "jobs")
    assert found.scan is seq and found.limit is None


def test_an_incremental_sort_is_a_sort_input_and_sub_plans_are_not_its_input() -> None:
    init = PlanNode("Seq Scan", relation="jobs", schema="public", parent_relationship="InitPlan")
    inc = PlanNode("Incremental Sort", presorted_key=("jobs.schedule_at",), children=(init, SCAN))
    (found,) = sort_inputs(inc, "public", "jobs")
    assert found.incremental and found.scan is SCAN
    assert sort_inputs(PlanNode("Sort", children=(init,)), "public", "jobs") == []
