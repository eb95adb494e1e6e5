"""Rewriting dequeue statements: the text made fit to plan, and the statements fixes propose
(literals for parameters, an ORDER BY, SKIP LOCKED and the lock on the job, a window moved
out of the lock's level) and the planner's probe of a partial index.

The rewrites are printed by sqlglot's PostgreSQL generator, pretty, without a trailing ';'.
Nothing here talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from sqlglot import Token, TokenType, exp
from sqlglot.dialects.postgres import Postgres

from qadvisor.sql import scope
from qadvisor.sql.dequeue import levels
from qadvisor.sql.dequeue.identity import TYPED_LITERALS
from qadvisor.sql.dequeue.locks import claimed_table, lock_clause
from qadvisor.sql.dequeue.predicates import parameter_index
from qadvisor.sql.dequeue.screening import (
    DIALECT,
    StatementError,
    check_plannable,
    expression,
    is_placeholder,
    parse,
    split_statements,
    tokenize,
)

if TYPE_CHECKING:
    from sqlglot.generator import Generator as _PostgresGenerator
else:  # typed as the base class: mypy cannot subclass the class-valued attribute
    _PostgresGenerator = Postgres.generator_class


def normalise_for_planning(sql: str) -> tuple[str, dict[int, str]]:
    """pg_stat_statements text made fit to plan.

    pg_stat_statements replaces every constant with ``$n``, so ``LIMIT 1`` arrives as
    ``LIMIT $2``; planned as a parameter, the planner assumes 10 % of the rows are wanted and
    costs the dequeue as a large fetch. A LIMIT or FETCH FIRST whose count is a bare
    parameter gets ``1`` back; the remaining parameters are renumbered ``$1..$k`` without gaps,
    in order of first appearance, so that PREPARE / EXPLAIN (GENERIC_PLAN) accept the text.

    Returns the new text and ``{new number: original placeholder}``, e.g. ``{1: "$1"}``: keyed
    by the new number because that is what the caller binds or reports against; the value is
    the original ``$n`` as written so messages can quote it. The text is the original
    statement edited in place (comments and spelling kept, no trailing ';'), not a sqlglot
    regeneration. Raises StatementError as check_plannable does.
    """
    check_plannable(sql)
    text = split_statements(sql)[0]
    tokens = tokenize(text)
    edits: list[tuple[int, int, str]] = []  # (start, end exclusive, replacement)
    numbers: dict[str, int] = {}
    for i, (dollar, number) in enumerate(itertools.pairwise(tokens)):
        if not is_placeholder(dollar, number):
            continue
        original = f"${number.text}"
        if _counts_rows(tokens, i):
            edits.append((dollar.start, number.end + 1, "1"))
            continue
        new = numbers.setdefault(original, len(numbers) + 1)
        typed = tokens[i - 1] if i and tokens[i - 1].token_type in _TYPED_LITERALS else None
        if typed is not None and typed.end + 1 <= dollar.start:
            # INTERVAL '30 seconds' is recorded as INTERVAL $5, which is not SQL: only a
            # string may follow the type name there. A cast says the same.
            edits.append((typed.start, number.end + 1, f"${new}::{typed.text.lower()}"))
        else:
            edits.append((dollar.start, number.end + 1, f"${new}"))
    for start, end, replacement in reversed(edits):
        text = text[:start] + replacement + text[end:]
    return text, {new: original for original, new in numbers.items()}


# Type names that take a string constant after them (typed-literal syntax: DATE '2024-01-01').
_TYPED_LITERALS = TYPED_LITERALS


def _extract_field(tokens: Sequence[Token], i: int) -> bool:
    """The placeholder at ``i`` is the field of ``EXTRACT($n FROM ...)``."""
    return (
        i >= 2
        and i + 2 < len(tokens)
        and tokens[i - 2].text.upper() == "EXTRACT"
        and tokens[i - 1].token_type == TokenType.L_PAREN
        and tokens[i + 2].token_type == TokenType.FROM
    )


def typed_placeholders(sql: str) -> str:
    """pg_stat_statements text with each typed literal whose string became ``$n``
    (``timestamptz $2``, ``interval $5``) written as the cast it means (``$2::timestamptz``),
    and each ``EXTRACT($n FROM x)`` as the call it is (``date_part($n, x)``), its numbers
    kept. pg_stat_statements hides the field of ``EXTRACT(epoch FROM x)`` as a constant, and
    only a string may follow a type name, so the text as recorded neither parses nor plans;
    the cast types the parameter as the literal was typed, and ``date_part`` takes the field
    as the text it is, so no value is made up for either."""
    tokens = tokenize(sql)
    edits: list[tuple[int, int, str]] = []
    for i, (dollar, number) in enumerate(itertools.pairwise(tokens)):
        if not is_placeholder(dollar, number) or not i:
            continue
        typed = tokens[i - 1]
        if typed.token_type in _TYPED_LITERALS and typed.end + 1 <= dollar.start:
            edits.append((typed.start, number.end + 1, f"${number.text}::{typed.text.lower()}"))
        elif _extract_field(tokens, i):
            call = f"date_part(${number.text},"
            edits.append((tokens[i - 2].start, tokens[i + 2].end + 1, call))
    for start, end, replacement in reversed(edits):
        sql = sql[:start] + replacement + sql[end:]
    return sql


def _counts_rows(tokens: list[Token], i: int) -> bool:
    """Token ``i`` is the count of ``LIMIT $n`` or ``FETCH FIRST|NEXT $n ROW(S)``."""
    before = [t.token_type for t in tokens[max(0, i - 2) : i]]
    return before[-1:] == [TokenType.LIMIT] or (
        len(before) == 2
        and before[0] == TokenType.FETCH
        and before[1] in (TokenType.FIRST, TokenType.NEXT)
    )


def with_literals(sql: str, values: Mapping[int, str]) -> str:
    """``sql`` with parameter ``$n`` replaced by the SQL literal ``values[n]``.

    Values are SQL text already quoted (``"'pending'"``, ``"1"``,
    ``"'queued'::job_status"``); parameters without a value stay. The result is sqlglot's
    pretty PostgreSQL output without a trailing ';' (it spells some things its own way:
    ``now()`` as ``CURRENT_TIMESTAMP``, ``x::text`` as ``CAST(x AS TEXT)``).
    """
    return _pretty(_bound(parse(sql), values))


def value_placeholder(n: int) -> str:
    """How a rewrite names the value of parameter ``$n`` that the application sends and
    qadvisor never saw. Not valid SQL on purpose: a statement still holding one cannot be
    run or shipped by mistake; whoever knows the value writes it in its place."""
    return f"<value of ${n}>"


def with_placeholders(sql: str, numbers: Iterable[int]) -> str:
    """``sql`` with each parameter ``$n`` of ``numbers`` replaced by :func:`value_placeholder`,
    printed like with_literals; other parameters stay. For a value pg_stat_statements showed
    as ``$n``, or a bound parameter of the user's text: the rewrite says where the
    application's own value goes without writing one qadvisor would have to guess."""
    wanted = sorted(set(numbers))
    # A string literal no statement holds stands in for each placeholder while the tree is
    # printed; the printed text then gets the placeholder in its place.
    marks = {n: f"qadvisor placeholder {n} 7f3c" for n in wanted}
    text = _pretty(_bound(parse(sql), {n: _mark_literal(m) for n, m in marks.items()}))
    for n, mark in marks.items():
        text = text.replace(_mark_literal(mark), value_placeholder(n))
    return text


def with_set_kept(
    sql: str, numbers: Iterable[int] | None = None
) -> tuple[str, tuple[str, ...]] | None:
    """``sql`` with every UPDATE ... SET assignment whose value computes with a parameter
    (``attempted_at = timezone($6, now())``: the parameter an argument, not the value itself),
    one of ``numbers`` if given, turned into one that keeps the column's value
    (``attempted_at = o0.attempted_at``), and the columns so kept, in order. None when no
    assignment is of that kind, or ``sql`` cannot be parsed.

    For running a recorded statement on a scratch copy when a value qadvisor filled in for a
    parameter pg_stat_statements hid is refused there: the row is still found, locked and
    written (a new row version, the same indexes touched unless a kept column is indexed), but
    by a value no one has to guess. A bare ``SET col = $n`` is left alone: its value is filled
    in from the column, as the planner does. Printed like with_literals.
    """
    try:
        tree = parse(sql)
    except StatementError:
        return None
    wanted = None if numbers is None else set(numbers)
    kept: list[str] = []
    for update in tree.find_all(exp.Update):
        target = update.this
        if not isinstance(target, exp.Table):
            continue
        alias = target.args.get("alias")
        owner = alias.this if isinstance(alias, exp.TableAlias) and alias.this else target.this
        for assignment in update.expressions:
            if not isinstance(assignment, exp.EQ) or not isinstance(assignment.this, exp.Column):
                continue
            value = assignment.expression
            read = {parameter_index(p) for p in value.find_all(exp.Parameter)}
            if isinstance(levels.unwrap(value), exp.Parameter) or not read:
                continue
            if wanted is not None and not read & wanted:
                continue
            column = assignment.this
            assignment.set("expression", exp.Column(this=column.this.copy(), table=owner.copy()))
            kept.append(column.name)
    return (_pretty(tree), tuple(kept)) if kept else None


def _mark_literal(mark: str) -> str:
    return f"'{mark}'"  # marks hold no quote or backslash


def _bound(tree: exp.Expr, values: Mapping[int, str]) -> exp.Expr:
    """The tree with parameter ``$n`` replaced by the literal ``values[n]`` (SQL text)."""
    literals = {n: _literal(text) for n, text in values.items()}

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Parameter) and parameter_index(node) in literals:
            return literals[parameter_index(node)].copy()
        return node

    return tree.transform(replace)


def index_probe(sql: str, keys: Sequence[str], values: Mapping[int, str]) -> str | None:
    """A question for the planner: can the claim's conditions on its queue table use an index
    whose key is ``keys``?

    ``SELECT 1 FROM <queue table> <alias> WHERE <the conditions of the claim's level that read
    only the queue table> ORDER BY <keys> LIMIT 1``, parameters replaced by ``values`` (SQL
    literals) so the planner sees the values, as in a custom plan. Planned with sequential
    scans, bitmap scans and sorts disabled, it is served by a partial index with that key
    exactly when PostgreSQL proves the index's predicate from the conditions. None when the
    statement takes no row lock. Key items are column names (``created_at DESC``), qualified
    here with the queue table's alias.
    """
    tree = parse(sql)
    select = levels.locking_select(tree)
    if select is None:
        return None
    queue_table, owner = claimed_table(select, levels.cte_names(tree))
    key = scope.source_key(queue_table)
    conditions = [c.copy() for c in levels.filters(owner) if _reads_only(c, key)]
    probe = exp.select("1").from_(queue_table.copy())
    if conditions:
        probe = probe.where(exp.and_(*conditions))
    items = []
    for text in keys:
        ordered = _ordered(text)
        if isinstance(ordered.this, exp.Column) and not ordered.this.args.get("table"):
            ordered.this.set("table", exp.to_identifier(key))
        items.append(ordered)
    probe.set("order", exp.Order(expressions=items))
    return _pretty(_bound(probe.limit(1), values))


def _reads_only(condition: exp.Expr, key: str) -> bool:
    """The condition names no FROM item of its level but the queue table (``key``): columns of
    sub-selects inside it may name their own FROM items."""
    inner = {scope.source_key(t) for t in condition.find_all(exp.Table)}
    return all(
        levels.qualifier(c) in (None, key) or levels.qualifier(c) in inner
        for c in condition.find_all(exp.Column)
        if isinstance(c.this, exp.Identifier)
    )


def _literal(text: str) -> exp.Expr:
    return expression(text, "an SQL literal")


def with_order_by(sql: str, columns: Sequence[str]) -> str:
    """``sql`` with the ORDER BY of the SELECT that carries the lock set to ``columns``.

    Each column is SQL for one ORDER BY item (``"enqueued_at"``, ``"id DESC"``). A plain
    column name is qualified with the queue table's alias when that SELECT reads several
    tables. Other levels (the outer ORDER BY of the round-robin query) are left alone. The
    result is sqlglot's pretty PostgreSQL output, like with_literals. Raises StatementError
    when ``sql`` is not plannable or takes no row lock.
    """
    if not columns:
        raise ValueError("with_order_by needs at least one column")
    tree = parse(sql)
    select = levels.locking_select(tree)
    if select is None:
        raise StatementError("no SELECT ... FOR UPDATE/SHARE whose ORDER BY could be set")
    queue_table, _ = claimed_table(select, levels.cte_names(tree))
    qualify = len(levels.sources(select)) > 1
    items = []
    for column in columns:
        ordered = _ordered(column)
        target = ordered.this
        if qualify and isinstance(target, exp.Column) and not target.args.get("table"):
            target.set("table", exp.to_identifier(scope.source_key(queue_table)))
        items.append(ordered)
    select.set("order", exp.Order(expressions=items))
    return _pretty(tree)


def _ordered(text: str) -> exp.Ordered:
    node = expression(text, "an ORDER BY item", exp.Ordered)
    if not isinstance(node, exp.Ordered):
        raise StatementError(f"not an ORDER BY item: {text!r}")
    return node


class _Generator(_PostgresGenerator):
    """sqlglot's PostgreSQL generator with the locking clause on its own line when pretty
    (sqlglot 30 glues it after LIMIT with stray spaces: "LIMIT 1   FOR UPDATE")."""

    def after_limit_modifiers(self, expression: exp.Expr) -> list[str]:
        locks = "".join(self.seg(self.sql(lock)) for lock in expression.args.get("locks") or [])
        return [locks, self.sql(expression, "sample")]


def _pretty(tree: exp.Expr) -> str:
    return str(_Generator(dialect=DIALECT, pretty=True).generate(tree))


def with_skip_locked(sql: str, schema: str | None, table: str) -> str | None:
    """``sql`` with SKIP LOCKED on the locking clause of the level that claims (the one
    analyse reads), and, when that clause also locks rows of other tables than the queue
    ``schema.table`` (a tenant or rotation table), one clause ``FOR <strength> OF <queue>
    SKIP LOCKED`` in its place that locks only the job. ``<queue>`` is how that level names
    the queue table, or the sub-select that reads it, spelled as written there.

    None when ``sql`` cannot be parsed, takes no row lock, or its locking level does not read
    the queue table. Printed like with_literals.
    """
    try:
        tree = parse(sql)
    except StatementError:
        return None
    select = levels.locking_select(tree)
    if select is None:
        return None
    ctes = levels.cte_names(tree)
    locks: list[exp.Lock] = select.args["locks"]
    locked = [t for t, _ in levels.covered(select, levels.of_names(locks), ctes)]
    if any(scope.table_name(t) != table for t in locked):
        name = _queue_source_name(select, schema, table, ctes)
        if name is None:
            return None
        first = locks[0]
        lock = exp.Lock(
            update=first.args.get("update"),
            key=first.args.get("key"),
            expressions=[exp.Table(this=name)],
            wait=False,
        )
        select.set("locks", [lock])
    else:
        for lock in locks:
            lock.set("wait", False)
    return _pretty(tree)


def _queue_source_name(
    select: exp.Select, schema: str | None, table: str, ctes: set[str]
) -> exp.Identifier | None:
    """The identifier the level uses for the FROM item holding the queue table: the table's
    alias (or name), or the alias of the sub-select / LATERAL that reads it."""

    def is_queue(node: exp.Expr) -> bool:
        if not levels.is_base_table(node, ctes) or scope.table_name(node) != table:  # type: ignore[arg-type]
            return False
        written = scope.folded_name(node.args.get("db"))
        return written is None or schema is None or written == schema

    for source in levels.sources(select):
        alias = source.args.get("alias")
        alias_id = alias.this if isinstance(alias, exp.TableAlias) else None
        if is_queue(source):
            name = alias_id if isinstance(alias_id, exp.Identifier) else source.this
            return name.copy() if isinstance(name, exp.Identifier) else None
        if isinstance(source, exp.Subquery | exp.Lateral) and any(
            is_queue(t) for t in source.find_all(exp.Table)
        ):
            return alias_id.copy() if isinstance(alias_id, exp.Identifier) else None
    return None


class KeyNotReturned(StatementError):
    """The statement does not return the key columns a rewrite needs."""


def with_lock_outside(sql: str, queue: str, keys: Sequence[str]) -> str | None:
    """The rows a top-level ``SELECT ... FOR ...`` picks, locked at a level of their own:
    ``SELECT * FROM <queue> WHERE <keys> IN (SELECT w.<keys> FROM (<sql without its locking
    clause>) AS w) FOR <its strength> SKIP LOCKED``. A window function of ``sql`` then sits in
    a sub-select of WHERE, a level the lock does not reach.

    ``queue`` is the queue table as SQL (qualified, quoted as needed), ``keys`` the names of
    its key columns, spelled in the rewrite as the statement's select list spells them. None
    when ``sql`` is not a top-level SELECT with a locking clause, or when there are no keys;
    KeyNotReturned when it does not return every key column.
    """
    try:
        tree = parse(sql)
    except StatementError:
        return None
    if not (isinstance(tree, exp.Select) and tree.args.get("locks") and keys):
        return None
    returned = {e.output_name: e for e in tree.selects}
    if not all(k in returned for k in keys):
        raise KeyNotReturned(f"the statement does not return the key ({', '.join(keys)})")
    strength = lock_clause(tree.args["locks"][0], tree, levels.cte_names(tree)).strength.upper()
    tree.set("locks", None)
    inner = levels.sql_text(tree)
    names = [_output_identifier(returned[k]) for k in keys]
    listed = ", ".join(names)
    outer = listed if len(keys) == 1 else f"({listed})"
    chosen = ", ".join(f"w.{n}" for n in names)
    wrapped = (
        f"SELECT * FROM {queue} WHERE {outer} IN (SELECT {chosen} FROM ({inner}) AS w) "
        f"FOR {strength} SKIP LOCKED"
    )
    try:
        return _pretty(parse(wrapped))
    except StatementError:
        return None


def _output_identifier(select_item: exp.Expr) -> str:
    """How a select-list item names its output column, as SQL (quoted when it was)."""
    node = select_item.args.get("alias") if isinstance(select_item, exp.Alias) else select_item
    if isinstance(node, exp.Column):
        node = node.this
    return levels.sql_text(node) if isinstance(node, exp.Identifier) else select_item.output_name


_WRITES = (exp.Update, exp.Delete, exp.Insert, exp.Merge)


def read_only_scan(sql: str, values: Mapping[int, str]) -> str | None:
    """What ``EXPLAIN ANALYZE`` may execute of a claim: the query that finds its rows, with
    every locking clause removed and parameter ``$n`` replaced by the SQL literal
    ``values[n]``, so it runs in a read-only transaction, locks no row, waits on no worker's
    row lock and writes nothing.

    A SELECT (no data-modifying part) is kept whole, its laterals and joins included. For an
    UPDATE, DELETE or a data-modifying WITH query, it is the level that takes the row locks
    (:func:`levels.locking_select`), with the read-only WITH queries of the statement it may
    name. None when the statement locks no rows in a SELECT (a plain ``UPDATE ... WHERE``):
    nothing of it can be executed without writing.
    """
    scan = _locking_level(parse(sql))
    if scan is None:
        return None
    _remove_locks(scan)
    return _pretty(_bound(scan, values))


def locking_level(sql: str, projection: bool = True) -> str | None:
    """The query of a claim that finds and locks its rows, as a statement of its own: what
    :func:`read_only_scan` executes, with its locking clauses and its ``$n`` kept. A role may
    plan it with less than the claim needs (no UPDATE for an UPDATE's assignments, no SELECT
    on what only its RETURNING reads); its plan is the claim's plan below the data-modifying
    node.

    Without ``projection`` its select list is ``1``: PostgreSQL checks SELECT privilege on every
    column a statement names, and the select list of a level with a locking clause changes
    nothing in its plan (the row lock keeps index-only scans out). Only a list of columns,
    stars and constants that nothing else of the level refers to (an ORDER BY by position or
    output name) is replaced; else None. None also when no SELECT locks rows.
    """
    scan = _locking_level(parse(sql))
    if scan is None:
        return None
    if not projection:
        if not isinstance(scan, exp.Select) or not _projection_replaceable(scan):
            return None
        scan.set("expressions", [exp.Literal.number(1)])
    return _pretty(scan)


def without_locks(sql: str) -> str:
    """``sql`` with every locking clause removed, its ``$n`` kept: the scan a claim's LockRows
    reads, which a role without UPDATE on the queue table may plan (and ``SELECT ... FOR
    UPDATE`` may not)."""
    tree = parse(sql)
    _remove_locks(tree)
    return _pretty(tree)


def _locking_level(tree: exp.Expr) -> exp.Expr | None:
    if not any(isinstance(n, _WRITES) for n in tree.walk()):
        return tree.copy()
    select = levels.locking_select(tree)
    if select is None:
        return None
    scan = select.copy()
    with_ = tree.args.get("with_")
    if with_ is not None and scan.args.get("with_") is None:
        reads = [
            c.copy()
            for c in with_.expressions
            if not any(isinstance(n, _WRITES) for n in c.walk()) and c.this is not select
        ]
        if reads:
            recursive = with_.args.get("recursive")
            scan.set("with_", exp.With(expressions=reads, recursive=recursive))
    return scan


def _remove_locks(tree: exp.Expr) -> None:
    for node in tree.walk():
        if isinstance(node, exp.Select) and node.args.get("locks"):
            node.set("locks", None)


def _projection_replaceable(select: exp.Select) -> bool:
    if select.args.get("distinct") or select.args.get("group") or select.args.get("having"):
        return False
    names: set[str] = set()
    for item in select.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if not isinstance(inner, (exp.Star, exp.Column, exp.Literal, exp.Null)):
            return False
        if isinstance(item, exp.Alias):
            names.add(item.alias.lower())
    order = select.args.get("order")
    for ordered in order.expressions if order is not None else ():
        key = ordered.this
        if isinstance(key, exp.Literal) and not key.is_string:
            return False  # ORDER BY 2: a position in the select list
        if isinstance(key, exp.Column) and not key.table and key.name.lower() in names:
            return False  # ORDER BY an output name
    return True
