"""Reading PlanNode trees: which nodes read a table, which indexes, which sorts, and the
plan as one-liners for evidence. Pure: plans come from the snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from qadvisor.model import PlanNode

# Scan nodes whose rows come from one relation.
SCAN_NODES = frozenset(
    {
        "Seq Scan",
        "Index Scan",
        "Index Only Scan",
        "Bitmap Heap Scan",
        "Bitmap Index Scan",
        "Tid Scan",
        "Tid Range Scan",
        "Sample Scan",
    }
)
SORT_NODES = frozenset({"Sort", "Incremental Sort"})


def _is(node: PlanNode, schema: str | None, table: str) -> bool:
    return node.relation == table and (schema is None or node.schema in (None, schema))


def scans(plan: PlanNode | None, schema: str | None, table: str) -> list[PlanNode]:
    """Every node that reads ``schema.table`` (schema None: any schema), in plan order."""
    if plan is None:
        return []
    return [n for n in plan.walk() if n.node_type in SCAN_NODES and _is(n, schema, table)]


def index_scans(plan: PlanNode | None, schema: str | None, table: str) -> list[PlanNode]:
    """The index scans (plain, index-only, bitmap) of ``schema.table``."""
    return [n for n in scans(plan, schema, table) if n.index is not None]


def indexes_used(plan: PlanNode | None, schema: str | None, table: str) -> tuple[str, ...]:
    """Names of the indexes of ``schema.table`` the plan reads, each once, in plan order."""
    return tuple(dict.fromkeys(n.index for n in index_scans(plan, schema, table) if n.index))


def sorts_over(
    plan: PlanNode | None, schema: str | None, table: str
) -> list[tuple[PlanNode, PlanNode]]:
    """(Sort node, the scan of ``schema.table`` it sorts): sorts whose input reads the table.

    Only full ``Sort`` nodes count (an ``Incremental Sort`` gets a prefix of its order from
    an index already). The scan is the first one of the table below the sort, not looking
    into sub-plans (InitPlan / SubPlan) that merely feed a parameter.
    """
    if plan is None:
        return []
    out = []
    for node in plan.walk():
        if node.node_type != "Sort":
            continue
        below = (n for n in _input(node) if n.node_type in SCAN_NODES and _is(n, schema, table))
        scan = next(below, None)
        if scan is not None:
            out.append((node, scan))
    return out


@dataclass(frozen=True)
class SortInput:
    """A sort node (``Sort`` or ``Incremental Sort``) whose input reads a table.

    ``scan`` is the first scan of the table below the sort that no ``Limit`` bounds, else the
    first one; ``limit`` is the Limit between the sort and ``scan`` (None: the sort gets every
    row the scan returns). With a Limit on every way down, as in a ``CROSS JOIN LATERAL``
    whose branches each end in ``LIMIT n``, the sort sorts at most loops x n rows, whatever
    the scan's own estimate says.
    """

    sort: PlanNode
    scan: PlanNode
    limit: PlanNode | None

    @property
    def incremental(self) -> bool:
        return self.sort.node_type == "Incremental Sort"


def sort_inputs(plan: PlanNode | None, schema: str | None, table: str) -> list[SortInput]:
    """Every sort node of the plan over a scan of ``schema.table``, in plan order, not
    looking into sub-plans (InitPlan / SubPlan) that merely feed a parameter."""
    if plan is None:
        return []
    out = []
    for node in plan.walk():
        if node.node_type not in SORT_NODES:
            continue
        found = list(_scans_below(node, schema, table, None))
        if not found:
            continue
        scan, limit = next(((s, lim) for s, lim in found if lim is None), found[0])
        out.append(SortInput(node, scan, limit))
    return out


def _scans_below(
    node: PlanNode, schema: str | None, table: str, limit: PlanNode | None
) -> Iterator[tuple[PlanNode, PlanNode | None]]:
    """(scan of the table, the nearest Limit above it on the way down from ``node``)."""
    for child in node.children:
        if child.parent_relationship in ("InitPlan", "SubPlan"):
            continue
        if child.node_type in SCAN_NODES and _is(child, schema, table):
            yield child, limit
        bound = child if child.node_type == "Limit" else limit
        yield from _scans_below(child, schema, table, bound)


def _input(node: PlanNode) -> Iterator[PlanNode]:
    for child in node.children:
        if child.parent_relationship in ("InitPlan", "SubPlan"):
            continue
        yield child
        yield from _input(child)


def partitions_read(plan: PlanNode | None) -> tuple[tuple[str, ...], int]:
    """The partitions of a partitioned queue table the plan scans (each once, in plan
    order), and how many more the executor prunes when it starts (run-time pruning, as a
    generic plan of ``queue = $1`` does): what partition pruning left of the table."""
    if plan is None:
        return (), 0
    nodes = list(plan.walk())
    scanned = tuple(dict.fromkeys(n.partition for n in nodes if n.partition is not None))
    return scanned, sum(n.subplans_removed or 0 for n in nodes)


def describe_node(node: PlanNode) -> str:
    """One line as EXPLAIN prints it: ``Index Scan using i on public.jobs j (cost=..)``; a
    partition's scan names the partition and its index, as EXPLAIN does."""
    text = node.node_type
    index = node.partition_index or node.index
    relation = node.partition or node.relation
    if index is not None:
        text += f" using {index}"
    if relation is not None and node.node_type != "Bitmap Index Scan":
        text += f" on {node.schema + '.' if node.schema else ''}{relation}"
        if node.alias and node.alias != relation:
            text += f" {node.alias}"
    text += f" (cost={node.startup_cost:.2f}..{node.total_cost:.2f} rows={node.plan_rows:.0f})"
    if node.subplans_removed:
        text += f" [{node.subplans_removed} partitions pruned at run time]"
    if node.actual_rows is not None:
        loops = node.actual_loops or 1
        text += f" (actual rows={node.actual_rows:g} loops={loops:g})"
    return text


def plan_outline(plan: PlanNode | None, max_nodes: int = 12) -> list[str]:
    """The plan as indented one-liners with conditions, for evidence (at most ``max_nodes``)."""
    if plan is None:
        return []
    lines: list[str] = []

    def visit(node: PlanNode, depth: int) -> None:
        if len(lines) >= max_nodes:
            return
        extra = []
        if node.subplan_name:
            extra.append(node.subplan_name)
        if node.index_cond:
            extra.append(f"Index Cond: {node.index_cond}")
        if node.filter:
            extra.append(f"Filter: {node.filter}")
        if node.sort_key:
            extra.append(f"Sort Key: {', '.join(node.sort_key)}")
        suffix = f" [{'; '.join(extra)}]" if extra else ""
        lines.append(f"{'  ' * depth}{describe_node(node)}{suffix}")
        for child in node.children:
            visit(child, depth + 1)

    visit(plan, 0)
    return lines
