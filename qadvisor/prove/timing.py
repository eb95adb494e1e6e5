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
# A statement whose first run takes longer is timed by that run alone: eight runs of a claim
# that walks the backlog for seconds would cost a minute to say what one run says.
SLOW_MS = 1_000.0
STATEMENT_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class Timed:
    ms: float  # median execution time
    shared_blocks: float  # median shared buffers hit and read
    node: str  # the scan that finds the rows: "Index Scan using jobs_pending on jobs"
    runs: int  # how many runs the figures are the median of (1: a slow statement, run once)
    # Rows the scan that finds them (``node``) returned in the last run, its filters applied:
    # 0 is a claim that found nothing to take. None: no scan in the plan.
    found: float | None = None


def time_statement(
    conn: psycopg.Connection[Any],
    text: str,
    values: list[str],
    search_path: str | None,
    table: str | None = None,
) -> Timed:
    """``text`` (parameters ``$1..$k``) prepared and run with ``values`` (SQL literals, in
    order). Raises psycopg.Error when the server refuses it."""
    conn.execute(
        sql.SQL("SELECT set_config('statement_timeout', {}, false)").format(
            sql.Literal(str(STATEMENT_TIMEOUT_MS))
        )
    )
    if search_path:
        conn.execute(
            sql.SQL("SELECT set_config('search_path', {}, false)").format(sql.Literal(search_path))
        )
    conn.execute(sql.SQL("PREPARE {} AS ").format(sql.Identifier(PREPARED)) + sql.SQL(text))
    call = sql.SQL("EXECUTE {}").format(sql.Identifier(PREPARED))
    if values:
        call += sql.SQL("({})").format(sql.SQL(", ").join(sql.SQL(v) for v in values))
    explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + call

    def timed() -> dict[str, Any]:
        with conn.transaction(force_rollback=True):
            row = conn.execute(explain).fetchone()
        assert row is not None
        result: dict[str, Any] = row[0][0]
        return result

    try:
        runs = [timed()]
        if float(runs[0]["Execution Time"]) <= SLOW_MS:
            for _ in range(WARM_RUNS - 1):
                with conn.transaction(force_rollback=True):
                    conn.execute(call)
            runs = [timed() for _ in range(TIMED_RUNS)]
    finally:
        conn.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(PREPARED)))
    ms = statistics.median(float(r["Execution Time"]) for r in runs)
    blocks = statistics.median(_blocks(r["Plan"]) for r in runs)
    last = runs[-1]["Plan"]
    scan = _main_scan(last, table)
    found = None
    if scan is not None and "Actual Rows" in scan[1]:
        found = float(scan[1]["Actual Rows"]) * float(scan[1].get("Actual Loops", 1))
    return Timed(ms, blocks, main_node(last, table), len(runs), found)


def _blocks(plan: dict[str, Any]) -> float:
    return float(plan.get("Shared Hit Blocks", 0)) + float(plan.get("Shared Read Blocks", 0))


def main_node(plan: dict[str, Any], table: str | None = None) -> str:
    """The scan that finds the rows: the first scan of ``table`` (depth first), else the
    first scan, with its index and relation; a Sort above it is named too: it is what a
    backlog sort costs."""
    scan = _main_scan(plan, table)
    return scan[0] if scan is not None else str(plan.get("Node Type", "?"))


def _main_scan(plan: dict[str, Any], table: str | None) -> tuple[str, dict[str, Any]] | None:
    """The scan main_node names, with its plan node; None without a scan."""
    found = _scans(plan)
    first_on_table = [f for f in found if table is not None and f[0].endswith(f" on {table}")]
    chosen = first_on_table or found
    return chosen[0] if chosen else None


def _scans(plan: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every scan of the plan, depth first: its name (a Sort above it named too) and node."""
    found: list[tuple[str, dict[str, Any]]] = []

    def walk(node: dict[str, Any], sort: str) -> None:
        kind = str(node.get("Node Type", ""))
        if kind in ("Sort", "Incremental Sort") and not sort:
            sort = f"{kind} over "
        if "Scan" in kind and kind != "Subquery Scan":
            out = kind
            if node.get("Index Name"):
                out += f" using {node['Index Name']}"
            if node.get("Relation Name"):
                out += f" on {node['Relation Name']}"
            found.append((sort + out, node))
        for child in node.get("Plans", []):
            walk(child, sort)

    walk(plan, "")
    return found
