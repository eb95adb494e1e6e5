"""EXPLAIN (FORMAT JSON) output as a PlanNode tree.

The collector (``qadvisor.collect.planner``) runs the EXPLAINs and calls :func:`parse_explain`;
a test of a check can do the same with EXPLAIN output saved from a server.

Conventions of the tree:

- ``relation``/``schema`` are filled for every node that reads a table, and also for a
  ``Bitmap Index Scan`` (EXPLAIN names only the index there): it gets the relation of the
  ``Bitmap Heap Scan`` above it, so "which indexes of table T does this plan use" is one walk.
- Conditions are EXPLAIN's own text (VERBOSE, so columns are qualified by the alias).
- ``actual_rows`` and ``actual_total_ms`` are per loop, as EXPLAIN ANALYZE prints them;
  multiply by ``actual_loops`` for the node's total. ``shared_blocks`` is shared hit + read.
- A scan of a partition of a partitioned queue table (``PartitionNames``) reads the queue
  table: ``relation`` and ``index`` name the queue table and its index, ``partition`` and
  ``partition_index`` what EXPLAIN named, so a check that asks which nodes read the queue
  table, through which of its indexes, reads a partitioned one as it reads any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from qadvisor.model import PlanNode, Table


@dataclass(frozen=True)
class PartitionNames:
    """What a partition's name in a plan stands for: (schema, partition) -> the partitioned
    queue table's name, (schema, index of a partition) -> its queue table's index."""

    tables: Mapping[tuple[str, str], str] = field(default_factory=dict)
    indexes: Mapping[tuple[str, str], str] = field(default_factory=dict)


def partition_names(tables: Iterable[Table]) -> PartitionNames:
    """The partitions of the partitioned tables among ``tables``, and their indexes that are
    partitions of the tables' own."""
    names: dict[tuple[str, str], str] = {}
    indexes: dict[tuple[str, str], str] = {}
    for table in tables:
        for part in table.partitions:
            names[(part.schema, part.name)] = table.name
            for idx in part.indexes:
                if idx.partition_of is not None:
                    indexes[(part.schema, idx.name)] = idx.partition_of
    return PartitionNames(names, indexes)


def parse_explain(
    data: Any, partitions: PartitionNames | None = None
) -> tuple[PlanNode, float | None]:
    """The plan tree of one EXPLAIN (FORMAT JSON) result, and its "Execution Time" in ms
    (only with ANALYZE, else None); a scan of a partition in ``partitions`` reads its queue
    table.

    ``data`` is what the server returns: a one-element list holding {"Plan": ...}; the bare
    object is accepted too. Raises ValueError on anything else.
    """
    if isinstance(data, list):
        if len(data) != 1:
            raise ValueError("EXPLAIN JSON must hold exactly one plan")
        data = data[0]
    if not isinstance(data, dict) or not isinstance(data.get("Plan"), dict):
        raise ValueError("not EXPLAIN (FORMAT JSON) output: no 'Plan' object")
    execution = data.get("Execution Time")
    plan = _node(data["Plan"], None, partitions or PartitionNames())
    return plan, float(execution) if execution is not None else None


def _node(
    d: dict[str, Any], heap: tuple[str | None, str | None] | None, partitions: PartitionNames
) -> PlanNode:
    node_type = str(d.get("Node Type", "?"))
    relation = _str(d.get("Relation Name"))
    schema = _str(d.get("Schema"))
    if node_type == "Bitmap Heap Scan":
        heap = (relation, schema)
    elif node_type == "Bitmap Index Scan" and heap is not None and relation is None:
        relation, schema = heap
    elif node_type not in ("BitmapAnd", "BitmapOr"):
        heap = None
    index = _str(d.get("Index Name"))
    partition = partition_index = None
    queue = partitions.tables.get((schema or "", relation or ""))
    if queue is not None:
        partition, relation = relation, queue
        if index is not None:
            partition_index = index
            index = partitions.indexes.get((schema or "", index), index)
    removed = d.get("Subplans Removed")
    sort_key = d.get("Sort Key") or ()
    children = tuple(
        _node(c, heap, partitions) for c in d.get("Plans") or () if isinstance(c, dict)
    )
    blocks = None
    if "Shared Hit Blocks" in d or "Shared Read Blocks" in d:
        blocks = int(d.get("Shared Hit Blocks") or 0) + int(d.get("Shared Read Blocks") or 0)
    return PlanNode(
        node_type=node_type,
        relation=relation,
        schema=schema,
        alias=_str(d.get("Alias")),
        index=index,
        index_cond=_str(d.get("Index Cond") or d.get("Recheck Cond")),
        filter=_str(d.get("Filter")),
        sort_key=tuple(str(k) for k in sort_key),
        presorted_key=tuple(str(k) for k in d.get("Presorted Key") or ()),
        parent_relationship=_str(d.get("Parent Relationship")),
        subplan_name=_str(d.get("Subplan Name")),
        startup_cost=float(d.get("Startup Cost") or 0.0),
        total_cost=float(d.get("Total Cost") or 0.0),
        plan_rows=float(d.get("Plan Rows") or 0.0),
        actual_rows=_float(d.get("Actual Rows")),
        actual_loops=_float(d.get("Actual Loops")),
        actual_total_ms=_float(d.get("Actual Total Time")),
        rows_removed_by_filter=_float(d.get("Rows Removed by Filter")),
        shared_blocks=blocks,
        children=children,
        partition=partition,
        partition_index=partition_index,
        subplans_removed=int(removed) if removed is not None else None,
    )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
