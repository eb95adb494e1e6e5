"""Timing a dequeue statement on the scratch copy the way the application runs it: prepared,
executed five times (the plan cache has then made its generic-or-custom choice), then timed
with ``EXPLAIN (ANALYZE, BUFFERS)`` a few times more; each execution in a transaction that is
rolled back, so every run finds the same rows waiting."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

PREPARED = "qadvisor_prove"
WARM_RUNS = 5  # the plan cache chooses after five custom plans
TIMED_RUNS = 3


@dataclass(frozen=True)
class Timed:
    ms: float  # median execution time
    shared_blocks: float  # median shared buffers hit and read
    node: str  # the scan that finds the rows: "Index Scan using jobs_pending on jobs"


def time_statement(
    conn: psycopg.Connection[Any], text: str, values: list[str], search_path: str | None
) -> Timed:
    """``text`` (parameters ``$1..$k``) prepared and run with ``values`` (SQL literals, in
    order). Raises psycopg.Error when the server refuses it."""
    if search_path:
        conn.execute(
            sql.SQL("SELECT set_config('search_path', {}, false)").format(sql.Literal(search_path))
        )
    conn.execute(sql.SQL("PREPARE {} AS ").format(sql.Identifier(PREPARED)) + sql.SQL(text))
    call = sql.SQL("EXECUTE {}").format(sql.Identifier(PREPARED))
    if values:
        call += sql.SQL("({})").format(sql.SQL(", ").join(sql.SQL(v) for v in values))
    explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + call
    try:
        for _ in range(WARM_RUNS):
            with conn.transaction(force_rollback=True):
                conn.execute(call)
        runs = []
        for _ in range(TIMED_RUNS):
            with conn.transaction(force_rollback=True):
                row = conn.execute(explain).fetchone()
            assert row is not None
            runs.append(row[0][0])
    finally:
        conn.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(PREPARED)))
    ms = statistics.median(float(r["Execution Time"]) for r in runs)
    blocks = statistics.median(_blocks(r["Plan"]) for r in runs)
    return Timed(ms, blocks, main_node(runs[-1]["Plan"]))


def _blocks(plan: dict[str, Any]) -> float:
    return float(plan.get("Shared Hit Blocks", 0)) + float(plan.get("Shared Read Blocks", 0))


def main_node(plan: dict[str, Any]) -> str:
    """The first scan of the plan (depth first), with its index and relation; a Sort above it
    is named too: it is what a backlog sort costs."""
    sort = ""
    stack = [plan]
    while stack:
        node = stack.pop(0)
        kind = str(node.get("Node Type", ""))
        if kind in ("Sort", "Incremental Sort") and not sort:
            sort = f"{kind} over "
        if "Scan" in kind and kind != "Subquery Scan":
            out = kind
            if node.get("Index Name"):
                out += f" using {node['Index Name']}"
            if node.get("Relation Name"):
                out += f" on {node['Relation Name']}"
            return sort + out
        stack = list(node.get("Plans", [])) + stack
    return sort + str(plan.get("Node Type", "?"))
