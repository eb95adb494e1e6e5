"""Timing a dequeue statement on the scratch copy the way the application runs it: prepared,
executed five times (the plan cache has then made its generic-or-custom choice), then timed
with ``EXPLAIN (ANALYZE, BUFFERS)`` a few times more; each execution in a transaction that is
rolled back, so every run finds the same rows waiting. Every timed run is kept: a figure is
its median with the spread of its runs, and the rows the statement took in them.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

PREPARED = "qadvisor_prove"
WARM_RUNS = 5  # the plan cache chooses after five custom plans
TIMED_RUNS = 3
# A statement whose first run takes longer is not warmed up: it is timed by its first
# TIMED_RUNS runs (eight runs of a claim that walks the backlog for seconds would cost a minute,
# and three still give its spread).
SLOW_MS = 1_000.0
# One run's bound on the copy: the round-robin trap's claim walks a million buffers, 5 s on a
# quiet machine and up to a minute on a busy one; the proofs as a whole have their own bound.
STATEMENT_TIMEOUT_MS = 120_000


@dataclass(frozen=True)
class Timed:
    runs_ms: tuple[float, ...]  # execution time of each timed run
    runs_blocks: tuple[float, ...]  # shared buffers hit and read in each
    node: str  # the scan that finds the rows: "Index Scan using jobs_pending on jobs"
    # Rows the statement returned or changed in each timed run, as pg_stat_statements counts
    # them: 0 is a claim that took nothing.
    runs_rows: tuple[float, ...] = ()
    # False: a statement slower than SLOW_MS, timed by its first runs, before the plan cache
    # chose its plan.
    warmed: bool = True

    @property
    def ms(self) -> float:
        return statistics.median(self.runs_ms)

    @property
    def shared_blocks(self) -> float:
        return statistics.median(self.runs_blocks)

    @property
    def rows(self) -> float | None:
        """The rows it took in a run (the median of its runs); None: not known."""
        return statistics.median(self.runs_rows) if self.runs_rows else None

    @property
    def runs(self) -> int:
        return len(self.runs_ms)


@dataclass(frozen=True)
class Prepared:
    """A statement prepared on a copy's session: ``run`` executes it, ``explained`` runs it
    under EXPLAIN (ANALYZE, BUFFERS) and gives the plan's JSON; each in a transaction that is
    rolled back, and as one statement of the extended protocol (its values are a snapshot's
    text, which must not smuggle in a second statement)."""

    conn: psycopg.Connection[Any]
    call: sql.Composed

    def run(self) -> None:
        with self.conn.transaction(force_rollback=True):
            self.conn.execute(self.call, binary=True)

    def explained(self) -> dict[str, Any]:
        explain = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + self.call
        with self.conn.transaction(force_rollback=True):
            row = self.conn.execute(explain, binary=True).fetchone()
        assert row is not None
        result: dict[str, Any] = row[0][0]
        return result


@contextlib.contextmanager
def prepared(
    conn: psycopg.Connection[Any], text: str, values: list[str], search_path: str | None
) -> Iterator[Prepared]:
    """``text`` (parameters ``$1..$k``) prepared with ``values`` (SQL literals, in order) on
    ``conn``, deallocated after. Sent as one statement of the extended protocol, which the
    server refuses to split: a text smuggled in after a ';' of a snapshot's statement is an
    error, never a second statement. Raises psycopg.Error when the server refuses it."""
    conn.execute(
        sql.SQL("SELECT set_config('statement_timeout', {}, false)").format(
            sql.Literal(str(STATEMENT_TIMEOUT_MS))
        )
    )
    if search_path:
        conn.execute(
            sql.SQL("SELECT set_config('search_path', {}, false)").format(sql.Literal(search_path))
        )
    name = sql.Identifier(PREPARED)
    conn.execute(sql.SQL("PREPARE {} AS ").format(name) + sql.SQL(text), binary=True)
    call = sql.SQL("EXECUTE {}").format(name)
    if values:
        call += sql.SQL("({})").format(sql.SQL(", ").join(sql.SQL(v) for v in values))
    try:
        yield Prepared(conn, call)
    finally:
        conn.execute(sql.SQL("DEALLOCATE {}").format(name))


def time_statement(
    conn: psycopg.Connection[Any],
    text: str,
    values: list[str],
    search_path: str | None,
    table: str | None = None,
) -> Timed:
    """``text`` (parameters ``$1..$k``) prepared and run with ``values`` (SQL literals, in
    order). Raises psycopg.Error when the server refuses it."""
    with prepared(conn, text, values, search_path) as statement:
        runs = [statement.explained()]
        warmed = float(runs[0]["Execution Time"]) <= SLOW_MS
        if warmed:
            for _ in range(WARM_RUNS - 1):
                statement.run()
            runs = []
        runs += [statement.explained() for _ in range(TIMED_RUNS - len(runs))]
    return Timed(
        tuple(float(r["Execution Time"]) for r in runs),
        tuple(_blocks(r["Plan"]) for r in runs),
        main_node(runs[-1]["Plan"], table),
        tuple(r for r in (statement_rows(run["Plan"]) for run in runs) if r is not None),
        warmed,
    )


def statement_rows(plan: dict[str, Any]) -> float | None:
    """The rows a statement returned or changed in an analysed run: its top node's. An UPDATE
    or DELETE without RETURNING returns none, so its rows are those its ModifyTable was fed
    (the plan below it; an InitPlan there computes a value, not rows). None when the plan does
    not say."""
    rows = plan.get("Actual Rows")
    if plan.get("Node Type") != "ModifyTable" or rows:
        return None if rows is None else float(rows) * float(plan.get("Actual Loops", 1))
    fed = [c for c in plan.get("Plans", []) if c.get("Parent Relationship") in (None, "Outer")]
    if not fed or fed[0].get("Actual Rows") is None:
        return None
    return float(fed[0]["Actual Rows"]) * float(fed[0].get("Actual Loops", 1))


def _blocks(plan: dict[str, Any]) -> float:
    return float(plan.get("Shared Hit Blocks", 0)) + float(plan.get("Shared Read Blocks", 0))


def main_node(plan: dict[str, Any], table: str | None = None) -> str:
    """The scan that finds the rows: the first scan of ``table`` (depth first), else the
    first scan, with its index and relation; a Sort above it is named too: it is what a
    backlog sort costs."""
    found = _scans(plan)
    on_table = [name for name in found if table is not None and name.endswith(f" on {table}")]
    chosen = on_table or found
    return chosen[0] if chosen else str(plan.get("Node Type", "?"))


def _scans(plan: dict[str, Any]) -> list[str]:
    """Every scan of the plan, depth first, by its name (a Sort above it named too)."""
    found: list[str] = []

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
            found.append(sort + out)
        for child in node.get("Plans", []):
            walk(child, sort)

    walk(plan, "")
    return found
