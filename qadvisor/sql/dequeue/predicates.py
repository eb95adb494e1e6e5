"""The filters of one query level about one FROM item, as :class:`Predicate` values: the
comparison, its operands, and the arms of an OR.

Nothing here talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from sqlglot import exp

from qadvisor.sql.dequeue.levels import (
    column_name,
    filters,
    own_columns,
    qualifier,
    sql_text,
    unwrap,
)
from qadvisor.statement import Param, Predicate, PredicateOp


def or_arms(node: exp.Expr) -> tuple[exp.Expr, ...]:
    """The arms of an OR, nested ORs and parentheses flattened, in the order written; () when
    ``node`` is no OR."""
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Or):
        return ()
    arms: list[exp.Expr] = []
    pending: list[exp.Expr] = [node]
    while pending:
        item = pending.pop()
        while isinstance(item, exp.Paren):
            item = item.this
        if isinstance(item, exp.Or):
            pending += [item.expression, item.this]
        else:
            arms.append(item)
    return tuple(arms)


OPS: dict[type[exp.Binary], tuple[PredicateOp, PredicateOp]] = {
    # sqlglot node -> (op, op with the operands swapped)
    exp.EQ: ("=", "="),
    exp.NEQ: ("<>", "<>"),
    exp.LT: ("<", ">"),
    exp.LTE: ("<=", ">="),
    exp.GT: (">", "<"),
    exp.GTE: (">=", "<="),
}


def predicates_of(
    select: exp.Expr, key: str, *, only_qualified: bool = False
) -> Iterator[Predicate]:
    """The filters of ``select`` about the FROM item called ``key``.

    An unqualified column is taken to be the queue table's (no catalog here to say which
    table of a join has it) unless ``only_qualified``.
    """

    def is_ours(node: exp.Expr) -> bool:
        node = unwrap(node)
        if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
            return False
        written = qualifier(node)
        return written == key or (written is None and not only_qualified)

    for conjunct in filters(select):
        ours = [c for c in own_columns(conjunct) if is_ours(c)]
        if ours:
            yield predicate_of(conjunct, is_ours) or Predicate(
                column=column_name(ours[0]), op="other", operands=(), text=sql_text(conjunct)
            )


def predicate_of(conjunct: exp.Expr, is_ours: Callable[[exp.Expr], bool]) -> Predicate | None:
    """The conjunct as column-op-operands when it has that shape, else None.

    An OR whose every arm compares the same column for equality with values (``state = $4
    OR state = $5``, ``(state = 'a' OR state IN ('b', 'c'))``) admits exactly the values it
    names: it is that column's IN list, as PostgreSQL 18's planner also reads it (an OR of
    equalities becomes ``= ANY``), whatever spelling the application chose.
    """
    arms = or_arms(conjunct)
    if arms:
        return _in_list(arms, sql_text(conjunct), is_ours)
    return arm_predicate(conjunct, is_ours)


def _in_list(
    arms: Sequence[exp.Expr], text: str, is_ours: Callable[[exp.Expr], bool]
) -> Predicate | None:
    """The OR of ``arms`` as one IN predicate, or None when it is not an OR of equalities of
    one column with literals or parameters."""
    columns: set[str] = set()
    operands: list[Param] = []
    for arm in arms:
        pred = arm_predicate(arm, is_ours)
        if pred is None or pred.op not in ("=", "in"):
            return None
        if any(o.kind not in ("literal", "parameter") for o in pred.operands):
            return None
        columns.add(pred.column)
        operands += pred.operands
    if len(columns) != 1:
        return None
    return Predicate(columns.pop(), "in", tuple(operands), text)


def arm_predicate(conjunct: exp.Expr, is_ours: Callable[[exp.Expr], bool]) -> Predicate | None:
    """One comparison as column-op-operands when it has that shape, else None."""
    text = sql_text(conjunct)
    negated = isinstance(conjunct, exp.Not)
    node = conjunct.this if negated else conjunct
    if is_ours(node) and isinstance(unwrap(node), exp.Column) and not isinstance(node, exp.Cast):
        # A bare column as a condition is a boolean: WHERE is_available / WHERE NOT done.
        return Predicate(column_name(node), "false" if negated else "true", (), text)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null) and is_ours(node.this):
        negated = negated != bool(node.args.get("negate"))  # sqlglot 30: IS NOT is negate=True
        op: PredicateOp = "is not null" if negated else "is null"
        return Predicate(column_name(node.this), op, (), text)
    if (
        isinstance(node, exp.Is)
        and isinstance(node.expression, exp.Boolean)
        and is_ours(node.this)
        and not negated
        and not node.args.get("negate")
    ):
        # flag IS TRUE holds on the rows flag does (NULL on neither). IS NOT FALSE holds on
        # NULL too: no "true" or "false" says that, so it stays a condition of its own.
        said = bool(node.expression.this)
        return Predicate(column_name(node.this), "true" if said else "false", (), text)
    if isinstance(node, exp.In) and is_ours(node.this):
        query = node.args.get("query")
        items = [query] if query else node.expressions
        op = "not in" if negated else "in"
        return Predicate(column_name(node.this), op, tuple(_param(i) for i in items), text)
    if negated or type(node) not in OPS:
        return None
    assert isinstance(node, exp.Binary)
    op, swapped = OPS[type(node)]
    left, right = node.this, node.expression
    if not is_ours(left) and is_ours(right):
        left, right, op = right, left, swapped
    if not is_ours(left):
        return None
    if isinstance(right, exp.Any):
        if op != "=":
            return None
        return Predicate(column_name(left), "any", _any_operands(right), text)
    if isinstance(right, exp.All):
        return None
    return Predicate(column_name(left), op, (_param(right),), text)


def _any_operands(node: exp.Any) -> tuple[Param, ...]:
    """``= ANY($1)`` gives the parameter, ``= ANY(ARRAY['a', 'b'])`` the literals."""
    operand = node.this.this if isinstance(node.this, exp.Paren) else node.this
    array = unwrap(operand)
    if isinstance(array, exp.Array):
        return tuple(_param(e) for e in array.expressions)
    return (_param(operand),)


def _param(node: exp.Expr) -> Param:
    text = sql_text(node)
    inner = unwrap(node)  # $1::text is still the parameter, 'queued'::job_status a literal
    if isinstance(inner, exp.Neg):
        inner = inner.this
    if isinstance(inner, exp.Parameter):
        return Param("parameter", text, parameter_index(inner))
    if isinstance(inner, exp.Literal | exp.Null | exp.Boolean):
        return Param("literal", text)
    if isinstance(inner, exp.Column):
        return Param("column", text)
    return Param("expression", text)


def parameter_index(node: exp.Parameter) -> int:
    # sqlglot parses PostgreSQL's $1 as Parameter(this=Literal(1)).
    return int(node.this.name) if node.this.name.isdigit() else 0
