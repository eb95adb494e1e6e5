"""The values a dequeue statement is planned with: which queue-table column each parameter of
the planned text is compared with, the type it is PREPAREd with, and a representative value
for it (the live value for the live column, a value the claim waits for on a status column,
the most common value of another, a plain default of its type otherwise). The values
pg_stat_statements hid, tried as hypotheses, are :mod:`qadvisor.collect.plan_bindings`.

Nothing here talks to PostgreSQL: :mod:`qadvisor.collect.planner` sends the statements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qadvisor.derive import discover
from qadvisor.derive.states import status_like
from qadvisor.model import Column, ColumnStats, LivePredicate, Queue, Table
from qadvisor.sql import dequeue
from qadvisor.sql.printing import RANGE_OPS, array_literal, literal


class PlanError(Exception):
    """One step of planning failed; the message is one line, safe to print."""

    def __init__(self, message: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate  # the server's error code, when the server refused


@dataclass(frozen=True)
class Job:
    """One text to plan, with what its values are chosen from."""

    text: str
    count: int  # parameters of the planned text
    planned: dequeue.DequeueStatement
    queue: Queue | None
    table: Table | None
    search_path: str | None
    given: tuple[str, ...]  # PREPARE types known beforehand, by planned number ('' unknown)
    # What is PREPAREd and planned when it is not ``text``: ``text`` without its locking
    # clauses (``text`` keeps them for the index probes and --analyze).
    plan_text: str | None = None


@dataclass(frozen=True)
class TypeInfo:
    """A parameter's type as the server resolved it."""

    name: str
    kind: str = ""  # pg_type.typtype: b base, e enum, d domain...
    base: str | None = None  # a domain's base type
    labels: tuple[str, ...] = ()  # an enum's labels (a domain over an enum: its labels)


@dataclass(frozen=True)
class Param:
    """What a parameter of the planned text is compared with."""

    column: Column | None
    op: str | None


def parameters_of(planned: dequeue.DequeueStatement, table: Table | None) -> dict[int, Param]:
    """Parameter number -> the queue-table column it is compared with (first comparison),
    an arm of an OR of comparisons (``state = $4 OR state = $5``) included."""
    out: dict[int, Param] = {}
    for conjunct in planned.predicates:
        arms = dequeue.disjuncts(conjunct.text) if conjunct.op == "other" else (conjunct,)
        for pred in arms:
            column = table.column(pred.column) if table is not None else None
            for operand in pred.operands:
                if operand.kind == "parameter" and operand.index and operand.index not in out:
                    out[operand.index] = Param(column, pred.op)
    return out


HYPOTHESISED_OPS = ("=", "in", "any")


# The server's codes for "cannot resolve this operator/function/expression for these types".
TYPE_ERRORS = {"42883", "42804", "42725"}


MAX_TYPE_TRIES = 12


_BUILTIN_TYPE = re.compile(
    r"\b(smallint|integer|bigint|numeric|real|double precision|boolean|interval|uuid|jsonb?|"
    r"date|time(?:stamp)?(?: with(?:out)? time zone)?)\b"
)


def types_named(message: str) -> list[str]:
    """Types a type error names that a parameter may have had (``integer`` of
    ``operator does not exist: integer + text``), with ``interval`` where a date or time is
    named (``timestamptz - $2`` is a timestamp minus an interval)."""
    named = list(dict.fromkeys(_BUILTIN_TYPE.findall(message.split(":", 1)[-1])))
    if any(t.startswith(("date", "time")) for t in named) and "interval" not in named:
        named.append("interval")
    return named


def prepare_type(param: Param | None) -> str:
    if param is None or param.column is None or param.op in ("other", None):
        return "unknown"
    if param.op == "any":
        return f"{param.column.type}[]"
    return param.column.type


_INTEGER = {"smallint", "integer", "bigint", "oid"}


_NUMERIC = {"numeric", "real", "double precision", "money"}


_TEXT = {"text", "character varying", "character", "name", "citext", "bpchar", "varchar"}


def _base_type(type_name: str) -> str:
    return re.sub(r"\(.*?\)", "", type_name).strip()


def _default(type_name: str, column: Column | None = None) -> str:
    """A plain, non-NULL value of the type."""
    base = _base_type(type_name)
    if base.endswith("[]"):
        return "'{}'"
    if base in _INTEGER or base in _NUMERIC:
        return "1"
    if base == "boolean":
        return "true"
    if base.startswith("timestamp"):
        return "now()"
    if base == "date":
        return "CURRENT_DATE"
    if base.startswith("time"):
        return "LOCALTIME"
    if base == "interval":
        return "'1 minute'"
    if base == "uuid":
        return "'00000000-0000-0000-0000-000000000000'"
    if base in ("json", "jsonb"):
        return "'{}'"
    if column is not None and column.enum_labels:
        return literal(column.enum_labels[0])
    return "''"


def param_value(
    param: Param | None, resolved: TypeInfo, queue: Queue | None, table: Table | None
) -> str:
    """A representative literal for one parameter (SQL text)."""
    column = param.column if param is not None else None
    if column is None or param is None or table is None:
        return _typed_default(resolved, queue)
    op = param.op or "="
    live = queue.live if queue is not None else None
    if live is not None and live.column == column.name:
        if live.op in RANGE_OPS and op == live.op:
            return lit(live.values[0])  # state < $2: the bound of the live range
        if live.op in ("true", "false") and op == "=":
            return live.op  # is_available = $3: the value the live set holds
        if live.op == "in" and live.values:
            if op in ("=", "in"):
                return lit(live.values[0])
            if op == "any":
                return array_literal(live.values)
            if op in ("<>", "not in"):
                other = _non_live_value(column, table, live)
                if other is not None:
                    return lit(other)
    base = _base_type(column.type)
    if base.startswith("timestamp") or base == "date":
        return _default(column.type)
    stats = table.stats_of(column.name)
    mcv = stats.most_common_vals if stats is not None else None
    if op in HYPOTHESISED_OPS and status_like(column.name):
        # A status the queue's live predicate does not cover: a claim waits for no finished
        # or running state, nor for the archive's bulk, so the most common value is no
        # binding; without another one the claim is not planned, rather than planned as a
        # query the application never runs.
        waiting = _status_value(column, stats)
        return array_literal((waiting,)) if op == "any" else lit(waiting)
    if mcv:
        return array_literal(mcv[:1]) if op == "any" else lit(mcv[0])
    if op == "any":
        return "'{}'" if not column.enum_labels else array_literal(column.enum_labels[:1])
    return _default(column.type, column)


def _status_value(column: Column, stats: ColumnStats | None) -> str:
    """The value a claim's status parameter waits for, from the common values and enum
    labels (discover.waiting_value); PlanError when they name none."""
    common = (stats.most_common_vals or ()) if stats is not None else ()
    freqs = (stats.most_common_freqs or ()) if stats is not None else ()
    seen = [
        discover.SeenValue(v, f"the pg_stats common values of {column.name}", share)
        for v, share in zip(common, [*freqs, *[None] * len(common)], strict=False)
    ]
    seen += [
        discover.SeenValue(v, f"the enum labels of {column.name}")
        for v in column.enum_labels
        if v not in common
    ]
    chosen, why = discover.waiting_value(seen)
    if chosen is None:
        raise PlanError(
            f"not planned: no value it waits for on {column.name} is known, and a value no "
            f"waiting row holds would plan a query the application never runs ("
            f"{why or 'the catalog holds none'})"
        )
    return chosen.value


def _typed_default(resolved: TypeInfo, queue: Queue | None) -> str:
    """A value for a parameter no queue-table column is compared with (``SET state = $1``),
    of the type the server resolved: an enum's live label if the queue's live predicate
    names one, else its first label; a domain's base type's default."""
    if resolved.labels:
        live = queue.live if queue is not None else None
        if live is not None and live.op == "in":
            match = next((v for v in live.values if v in resolved.labels), None)
            if match is not None:
                return lit(match)
        return lit(resolved.labels[0])
    if resolved.kind == "d" and resolved.base:
        return _default(resolved.base)
    return _default(resolved.name)


def _non_live_value(column: Column, table: Table, live: LivePredicate) -> str | None:
    stats = table.stats_of(column.name)
    for value in (stats.most_common_vals or ()) if stats is not None else ():
        if value not in live.values:
            return value
    return next((v for v in column.enum_labels if v not in live.values), None)


def lit(value: str) -> str:
    return literal(value).strip()
