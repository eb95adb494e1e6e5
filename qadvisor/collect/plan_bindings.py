"""Hidden values as hypotheses: the other plausible bindings of the values
pg_stat_statements hid (``$1`` where the application sent ``'mail'``), each planned as a
custom plan of its own by :mod:`qadvisor.collect.planner`, so a plan that only some values
get is seen.

Nothing here talks to PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from qadvisor.collect.plan_values import HYPOTHESISED_OPS, Job, Param, lit
from qadvisor.derive import discover
from qadvisor.derive.estimates import parse_index_predicate
from qadvisor.sql import dequeue
from qadvisor.sql.printing import array_literal

# Plausible bindings of hidden values planned per statement (each is one custom plan, and
# its probes).
MAX_BINDINGS = 3


def hypotheses(job: Job, params: dict[int, Param], plain: list[str]) -> list[tuple[list[str], str]]:
    """The plausible bindings of the planned text's parameters, most plausible first, at
    most MAX_BINDINGS, each with where its values came from.

    ``plain`` is the binding made parameter by parameter (``param_value``). A parameter the text
    hid that is compared with a column for equality (``=``, ``IN``, ``= ANY``, an arm of an
    OR) is a hypothesis: its column's evidence in this statement offers value sets (the
    predicate of a partial index whose keys supply the ORDER BY, then the queue's live
    values); every parameter on the column takes values from one set, so two OR-ed
    equalities take both values of an index's IN list and never a value no row holds. The
    first binding takes each column's first set; each further one changes one column to its
    next set."""
    if job.table is None or not params:
        return [(plain, "")]
    on_column: dict[str, list[int]] = {}
    for k in sorted(params):
        param = params[k]
        if param.column is not None and param.op in HYPOTHESISED_OPS:
            on_column.setdefault(param.column.name, []).append(k)
    offered = {c: _value_sets(c, job) for c in on_column}
    offered = {c: sets for c, sets in offered.items() if sets}
    if not offered:
        return [(plain, "")]

    def bound(choice: dict[str, int]) -> tuple[list[str], str]:
        values = list(plain)
        said = []
        for column, j in choice.items():
            chosen, why = offered[column][j]
            numbers = on_column[column]
            for i, k in enumerate(numbers):
                if params[k].op == "any":
                    values[k - 1] = array_literal(chosen)
                else:
                    values[k - 1] = lit(chosen[i % len(chosen)])
            shown = ", ".join(lit(v) for v in chosen)
            said.append(f"{column}: {shown} ({why})")
        return values, "; ".join(said)

    first = {c: 0 for c in offered}
    out = [bound(first)]
    for column, sets in offered.items():
        for j in range(1, len(sets)):
            candidate = bound({**first, column: j})
            if len(out) < MAX_BINDINGS and all(candidate[0] != v for v, _ in out):
                out.append(candidate)
    return out


def _value_sets(column: str, job: Job) -> list[tuple[tuple[str, ...], str]]:
    """Sets of values the evidence offers for a hidden parameter on ``column``, strongest
    first: the predicate of a valid partial index on the column whose keys supply the
    statement's ORDER BY (the index the statement was written for), the queue's live
    values. Each is a set of values rows hold or are meant to hold, never a default."""
    table, planned = job.table, job.planned
    out: list[tuple[tuple[str, ...], str]] = []
    if table is None:
        return out
    for idx in sorted(table.indexes, key=lambda i: i.name):
        target = parse_index_predicate(idx.predicate) if idx.predicate else None
        if not idx.is_valid or target is None or target.column != column:
            continue
        if target.op != "in" or not target.values or not _supplies_order(idx.columns, planned):
            continue
        out.append((target.values, f"partial index {idx.name}, whose keys supply the ORDER BY"))
    live = job.queue.live if job.queue is not None else None
    if live is not None and live.column == column and live.op == "in" and live.values:
        out.append((live.values, "the queue's live values"))
    unique: dict[tuple[str, ...], str] = {}
    for values, why in out:
        unique.setdefault(values, why)
    return list(unique.items())


def _supplies_order(keys: Sequence[str | None], planned: dequeue.DequeueStatement) -> bool:
    """An index on ``keys`` returns the statement's ORDER BY order: its keys, after those
    the statement pins by equality, begin with the ORDER BY's columns."""
    return discover.keys_supply_order(
        keys,
        [o.column for o in planned.order_by],
        (p.column for p in planned.predicates if p.op == "="),
    )
