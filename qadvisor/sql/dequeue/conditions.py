"""Conditions and values of SQL text that the catalog and EXPLAIN give (a partial index's
predicate, a plan's filter): their conjuncts, disjuncts, null tests, columns, and literal
and array values.

Nothing here talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

from sqlglot import TokenType, exp

from qadvisor.sql.dequeue.levels import column_name, unwrap
from qadvisor.sql.dequeue.predicates import OPS, arm_predicate, or_arms, predicates_of
from qadvisor.sql.dequeue.screening import StatementError, expression, parse, tokenize
from qadvisor.sql.scope import folded_name, main_statement
from qadvisor.statement import Predicate


def condition_predicates(condition: str) -> tuple[Predicate, ...]:
    """The conjuncts of a WHERE condition about one table's unqualified columns, such as
    ``pg_get_expr`` gives for a partial index: ``(status = 'queued'::text)``."""
    tree = parse(f"SELECT 1 FROM qadvisor_condition WHERE {condition}")
    select = main_statement(tree)
    assert isinstance(select, exp.Select)
    return tuple(predicates_of(select, "qadvisor_condition"))


def _condition_tree(condition: str) -> exp.Expr | None:
    """A condition's tree, read as the WHERE of a query on one table; None when it does not
    parse."""
    try:
        tree = parse(f"SELECT 1 FROM qadvisor_condition WHERE {condition}")
    except StatementError:
        return None
    select = main_statement(tree)
    where = select.args.get("where") if isinstance(select, exp.Select) else None
    return where.this if where is not None else None


def disjuncts(condition: str) -> tuple[Predicate, ...]:
    """The arms of an OR of comparisons (``state = $4 OR j.state = $5``), each as a
    predicate on its column however qualified; () when the condition is no OR or an arm is
    not a comparison of a column. What a parameter in such an arm is compared with."""
    where = _condition_tree(condition)
    arms = or_arms(where) if where is not None else ()

    def is_column(n: exp.Expr) -> bool:
        n = unwrap(n)
        return isinstance(n, exp.Column) and isinstance(n.this, exp.Identifier)

    out = [arm_predicate(arm, is_column) for arm in arms]
    return tuple(p for p in out if p is not None) if all(out) else ()


def nullness_arms(condition: str) -> tuple[tuple[tuple[str, bool], ...], ...]:
    """The arms of an OR condition, each as what it requires of columns being NULL:
    ``(column, True)`` for ``col IS NULL``, ``(column, False)`` for ``col IS NOT NULL`` or a
    comparison of the column with something else, which no NULL passes (``next_run_at <=
    $3``, ``lease_expires_at < now() - interval '5 minutes'``, ``state = ANY($1)``).

    ``(locked_at IS NULL AND next_run_at <= $3) OR locked_at <= $4`` gives
    ``((("locked_at", True), ("next_run_at", False)), (("locked_at", False),))``. A condition
    of an arm that says nothing of NULL (a function, a comparison of two columns) narrows the
    arm and is passed over; an arm that is itself an OR is read as one arm with no
    requirement. () when the condition is no OR or does not parse. Columns however qualified.
    """
    where = _condition_tree(condition)
    node = unwrap(where) if where is not None else None
    if not isinstance(node, exp.Or):
        return ()
    arms: list[exp.Expr] = []
    pending: list[exp.Expr] = [node]
    while pending:
        item = unwrap(pending.pop())
        if isinstance(item, exp.Or):
            pending += [item.expression, item.this]
        else:
            arms.append(item)
    return tuple(_nullness(arm) for arm in arms)


def _nullness(arm: exp.Expr) -> tuple[tuple[str, bool], ...]:
    required: dict[str, bool] = {}
    pending: list[exp.Expr] = [arm]
    while pending:
        item = unwrap(pending.pop())
        if isinstance(item, exp.And):
            pending += [item.expression, item.this]
            continue
        negated = isinstance(item, exp.Not)
        node = unwrap(item.this) if negated else item
        found: tuple[str, bool] | None = None
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            subject = unwrap(node.this)
            if isinstance(subject, exp.Column) and isinstance(subject.this, exp.Identifier):
                is_null = negated == bool(node.args.get("negate"))
                found = (column_name(subject), is_null)
        elif isinstance(node, (*OPS, exp.In)):
            # A strict comparison is NULL, never true, for a NULL operand (so is its NOT).
            left = unwrap(node.this)
            right = None if isinstance(node, exp.In) else unwrap(node.expression)
            sides = [n for n in (left, right) if isinstance(n, exp.Column)]
            if len(sides) == 1 and isinstance(sides[0].this, exp.Identifier):
                found = (column_name(sides[0]), False)
        if found is not None:
            required.setdefault(*found)
    return tuple(required.items())


def condition_columns(condition: str) -> frozenset[str]:
    """The names of the columns a condition mentions, however qualified (``status``,
    ``tenant_id`` of ``qt.tenant_id``), as PostgreSQL folds them; values, types and function
    names are not columns. A condition the parser does not take whole (EXPLAIN's ``hashed
    SubPlan 1``) is read from its tokens instead."""
    try:
        tree = parse(f"SELECT 1 FROM qadvisor_condition WHERE {condition}")
    except StatementError:
        return _token_columns(condition)
    names = set()
    for column in tree.find_all(exp.Column):
        name = folded_name(column.this)
        if name is not None:
            names.add(name)
    return frozenset(names)


def _token_columns(condition: str) -> frozenset[str]:
    names = set()
    tokens = tokenize(condition)
    for i, token in enumerate(tokens):
        if token.token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
            continue
        following = tokens[i + 1].token_type if i + 1 < len(tokens) else None
        if following in (TokenType.L_PAREN, TokenType.DOT):
            continue  # a function's or a qualifier's name, not a column
        if i and tokens[i - 1].token_type in (TokenType.DCOLON, TokenType.ALIAS):
            continue  # a type: 'queued'::job_status, CAST(... AS job_status)
        names.add(token.text if token.token_type == TokenType.IDENTIFIER else token.text.lower())
    return frozenset(names)


def literal_value(text: str) -> str | None:
    """The value of an SQL literal as Param text spells it: ``'queued'``, ``E'a\\\\b'``,
    ``CAST('queued' AS job_status)``, ``'queued'::job_status``, ``42``, ``-1.5``; None for
    anything else (a parameter, a column, an expression)."""
    try:
        node = expression(text, "an SQL literal")
    except StatementError:
        return None
    return _literal_of(node)


def _literal_of(node: exp.Expr) -> str | None:
    inner = unwrap(node)
    negative = isinstance(inner, exp.Neg)
    if negative:
        inner = unwrap(inner.this)
    if isinstance(inner, exp.Literal) and not inner.is_string:
        return ("-" if negative else "") + str(inner.this)
    if isinstance(inner, exp.Literal | exp.ByteString) and not negative:
        return str(inner.this)
    return None


def array_values(text: str) -> tuple[str, ...] | None:
    """The items of a text array written as a literal, ``'{a,"b c"}'`` (PostgreSQL's array
    input syntax: double quotes, backslash escapes), or as ``ARRAY['a', 'b']``, casts
    allowed; None for anything else (an item that is NULL or not a literal included)."""
    try:
        node = unwrap(expression(text, "an array"))
    except StatementError:
        return None
    if isinstance(node, exp.Array):
        items = [_literal_of(e) for e in node.expressions]
        return None if any(i is None for i in items) else tuple(i for i in items if i is not None)
    value = _literal_of(node)
    if value is None or not (value.startswith("{") and value.endswith("}")):
        return None
    return _array_items(value[1:-1])


def _array_items(body: str) -> tuple[str, ...] | None:
    """The items of a one-dimensional array's text between its braces."""
    items: list[str] = []
    i, n = 0, len(body)
    while i < n:
        while i < n and body[i].isspace():
            i += 1
        if i == n:
            break
        if body[i] == '"':
            i += 1
            chars = []
            while i < n and body[i] != '"':
                if body[i] == "\\" and i + 1 < n:
                    i += 1
                chars.append(body[i])
                i += 1
            if i == n:
                return None  # no closing quote
            items.append("".join(chars))
            i += 1
        else:
            start = i
            while i < n and body[i] not in ',"{}':
                i += 1
            word = body[start:i].strip()
            if word.upper() == "NULL" or not word:
                return None
            items.append(word)
        while i < n and body[i].isspace():
            i += 1
        if i < n:
            if body[i] != ",":
                return None  # nested braces or stray text: not a plain list
            i += 1
    return tuple(items)
