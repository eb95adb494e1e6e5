"""Predicates of dequeue statements against the queue's predicates: does a statement's WHERE
prove a partial index's predicate, which values does a condition compare with, and the SQL
text and index-name words made from them. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qadvisor.model import Index, LivePredicate, Table
from qadvisor.sql.dequeue import (
    Param,
    Predicate,
    StatementError,
    array_values,
    condition_columns,
    literal_value,
    nullness_arms,
)
from qadvisor.sql.printing import ident


def index_predicate_columns(index: Index, table: Table) -> frozenset[str]:
    """Columns of ``table`` that the partial index's predicate mentions (empty: not partial)."""
    if index.predicate is None:
        return frozenset()
    try:
        mentioned = condition_columns(index.predicate)
    except StatementError:
        return frozenset()
    return mentioned & {c.name for c in table.columns}


@dataclass(frozen=True)
class ValueJudgement:
    """Whether a statement's predicates prove a partial index's simple predicate."""

    implies: bool | None  # None: cannot tell (a parameter whose value is unknown)
    predicates: tuple[Predicate, ...]  # the statement's predicates on the column


def predicate_implies(
    predicates: Sequence[Predicate],
    target: LivePredicate,
    values: dict[str, str] | None = None,
) -> ValueJudgement:
    """Do the conjuncts on ``target.column`` prove ``target`` (as PostgreSQL's predicate test
    would for simple forms)?

    ``values`` gives the SQL text of parameters (``{"1": "'queued'"}``); a parameter without a
    value leaves an ``=``/``IN``/``ANY`` undecided (None). ``<>``, ``NOT IN``, ranges and other
    forms never prove an equality or IN predicate; only ``IS NULL`` proves ``IS NULL``.
    """
    if target.whole_table:
        return ValueJudgement(True, ())  # every row: any condition implies it
    if target.op == "or":
        return _implies_union(predicates, target)
    on_column = tuple(p for p in predicates if p.column == target.column)
    if not on_column:
        return ValueJudgement(False, on_column)
    undecided = False
    for pred in on_column:
        if target.op == "is null":
            if pred.op == "is null":
                return ValueJudgement(True, on_column)
            continue
        if target.op in ("true", "false"):
            # ``WHERE is_available`` is proved by ``is_available`` and ``is_available = true``
            if pred.op == target.op:
                return ValueJudgement(True, on_column)
            if pred.op != "=" or len(pred.operands) != 1:
                continue
            value = _boolean(pred.operands[0], values or {})
            if value is None:
                undecided = True
            elif value == (target.op == "true"):
                return ValueJudgement(True, on_column)
            continue
        if pred.op not in ("=", "in", "any"):
            continue
        got = operand_values(pred, values or {})
        if got is None:
            undecided = True
        elif got and set(got) <= set(target.values):
            return ValueJudgement(True, on_column)
    return ValueJudgement(None if undecided else False, on_column)


def _implies_union(predicates: Sequence[Predicate], target: LivePredicate) -> ValueJudgement:
    """A union of one-column IS NULL / IS NOT NULL parts is proved, as PostgreSQL's predicate
    test proves an OR, by a conjunct that proves one part (a strict comparison proves IS NOT
    NULL, a parameter's value unknown or not) or by an OR each of whose arms proves a part."""
    wanted = {(p.column, p.op == "is null") for p in target.parts}
    columns = {p.column for p in target.parts}
    used = tuple(p for p in predicates if p.column in columns or p.op == "other")
    for pred in used:
        if pred.op == "other":
            arms = nullness_arms(pred.text)
            if arms and all(any(req in wanted for req in arm) for arm in arms):
                return ValueJudgement(True, used)
            continue
        if pred.op == "is null" and (pred.column, True) in wanted:
            return ValueJudgement(True, used)
        strict = pred.op not in ("is null", "true", "false", "other")
        if strict and (pred.column, False) in wanted:
            return ValueJudgement(True, used)
    return ValueJudgement(False, used)


def operand_values(pred: Predicate, values: dict[str, str]) -> tuple[str, ...] | None:
    """The values a condition compares with, parameters taken from ``values``; None when one
    is not a literal or a parameter with a value."""
    out: list[str] = []
    for operand in pred.operands:
        text = operand.text
        if operand.kind == "parameter":
            if operand.index is None or str(operand.index) not in values:
                return None
            text = values[str(operand.index)]
        elif operand.kind != "literal":
            return None
        if pred.op == "any":
            # = ANY('{a,b}') has one array operand; = ANY(ARRAY['a', 'b']) one per item.
            arr = array_values(text) if len(pred.operands) == 1 else None
            if arr is not None:
                out.extend(arr)
                continue
        value = literal_value(text)
        if value is None:
            return None
        out.append(value)
    return tuple(out)


def predicate_text(pred: Predicate, values: dict[str, str] | None = None) -> str | None:
    """The conjunct as SQL on the bare column (no alias), fit for an index's WHERE clause;
    parameters are replaced by ``values`` (``{"1": "'done'"}``). None when it cannot be
    written so (an "other" form, a parameter without a value, a column or expression operand).
    """
    operands = []
    for operand in pred.operands:
        if operand.kind == "parameter":
            if operand.index is None or str(operand.index) not in (values or {}):
                return None
            operands.append((values or {})[str(operand.index)])
        elif operand.kind == "literal":
            operands.append(operand.text)
        else:
            return None
    col = ident(pred.column)
    if pred.op == "is null":
        return f"{col} IS NULL"
    if pred.op == "is not null":
        return f"{col} IS NOT NULL"
    if pred.op in ("in", "not in") and operands:
        return f"{col} {pred.op.upper()} ({', '.join(operands)})"
    if pred.op == "any" and len(operands) == 1:
        return f"{col} = ANY ({operands[0]})"
    if pred.op in ("=", "<>", "<", "<=", ">", ">=") and len(operands) == 1:
        return f"{col} {pred.op} {operands[0]}"
    return None


def predicate_words(preds: Sequence[Predicate], values: dict[str, str] | None = None) -> list[str]:
    """Words for an index name from the values of ``preds``: ``queued``, ``not_done``,
    ``finished_at_null`` (at most three), as QA101 names a live-set index."""
    words: list[str] = []
    for pred in preds:
        if pred.op == "is null":
            words.append(f"{pred.column}_null")
            continue
        prefix = "not_" if pred.op in ("<>", "not in") else ""
        for operand in pred.operands:
            text = operand.text
            if operand.kind == "parameter" and operand.index is not None:
                text = (values or {}).get(str(operand.index), "")
            arr = array_values(text) if pred.op == "any" else None
            found = list(arr) if arr is not None else [literal_value(text)]
            words += [prefix + v for v in found if v is not None]
    return words[:3]


def _boolean(operand: Param, values: dict[str, str]) -> bool | None:
    """A boolean operand's value (``true``, ``'t'``, a parameter bound to ``false``), None
    when it is not known."""
    text = operand.text
    if operand.kind == "parameter":
        text = values.get(str(operand.index), "")
    elif operand.kind != "literal":
        return None
    word = text.strip().split("::")[0].strip("'").lower()
    if word in ("true", "t", "yes", "on", "1"):
        return True
    if word in ("false", "f", "no", "off", "0"):
        return False
    return None
