"""Dequeue statements analysed into plain data: the frozen dataclasses checks read, the
analysis that fills them, the shape's fingerprint, and the conditions and literal values of
SQL text that plans and catalogs give (a partial index's predicate, EXPLAIN's conditions).

Nothing here talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlglot import TokenType, exp

from qadvisor.sql.dequeue.levels import (
    column_name,
    covered,
    cte_names,
    filters,
    is_base_table,
    locking_select,
    of_names,
    own_columns,
    qualifier,
    sources,
    sql_text,
    unique,
    unwrap,
)
from qadvisor.sql.dequeue.maintenance import due_times, recognise, write_level
from qadvisor.sql.dequeue.screening import (
    StatementError,
    expression,
    is_placeholder,
    parse,
    tokenize,
)
from qadvisor.sql.scope import folded_name, main_statement, set_targets, source_key, table_name
from qadvisor.statement import (
    DequeueStatement,
    JoinKey,
    Lateral,
    LockClause,
    LockLevel,
    LockStrength,
    OrderItem,
    Param,
    Predicate,
    PredicateOp,
    StatementKind,
    WaitPolicy,
)

# --- identity ---------------------------------------------------------------------------

# Type names that may stand before a string constant as a typed literal (interval '1 hour').
TYPED_LITERALS = {TokenType.INTERVAL, TokenType.DATE, TokenType.TIME, TokenType.TIMESTAMP,
                  TokenType.TIMESTAMPTZ, TokenType.TIMETZ, TokenType.UUID, TokenType.JSON,
                  TokenType.JSONB, TokenType.INET}  # fmt: skip
_CONSTANTS = {TokenType.STRING, TokenType.NUMBER, TokenType.NATIONAL_STRING, TokenType.BIT_STRING,
              TokenType.HEX_STRING, TokenType.BYTE_STRING}  # fmt: skip
FINGERPRINT_HEX = 10


def fingerprint(sql: str) -> str:
    """A short hash of the statement's shape, the same wherever the statement is seen.

    pg_stat_statements shows constants as ``$n`` and numbers its parameters per entry, an
    application's file shows literals, and PostgreSQL 18 squashes constant lists into
    ``IN ($1 /*, ... */)``; a queryid changes with table OIDs (a restore from a dump, an
    upgrade). So the hash is taken over the tokens with every constant and parameter as
    ``?``, runs of them (IN lists, array items) as one ``?``, comments and spacing dropped,
    keywords upper case and unquoted names folded to lower case as PostgreSQL folds them.
    """
    words: list[str] = []
    tokens = tokenize(sql.strip().rstrip(";"))
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if (
            token.token_type == TokenType.DCOLON
            and words[-1:] == ["?"]
            and i + 1 < len(tokens)
            and tokens[i + 1].token_type in TYPED_LITERALS
        ):
            i += 2  # $4::interval (a typed placeholder rewritten) is $4
            continue
        if (
            i
            and token.token_type in (*_CONSTANTS, TokenType.PARAMETER)
            and tokens[i - 1].token_type in TYPED_LITERALS
            and words[-1:] == [tokens[i - 1].text.upper()]
        ):
            # interval '1 hour' in a file, interval $4 (15 and later) and $4 (14) in
            # pg_stat_statements: one constant.
            words.pop()
        if (
            token.token_type == TokenType.PARAMETER
            and i + 1 < len(tokens)
            and is_placeholder(token, tokens[i + 1])
        ):
            word, i = "?", i + 2
        elif token.token_type in _CONSTANTS:
            word, i = "?", i + 1
        else:
            i += 1
            if token.token_type == TokenType.IDENTIFIER:
                word = '"' + token.text.replace('"', '""') + '"'
            elif token.token_type == TokenType.VAR:
                word = token.text.lower()
            else:
                word = token.text.upper()
        if word == "?" and words[-2:-1] == ["?"] and words[-1] == ",":
            words.pop()  # "?, ?" -> "?": lists of constants have no fixed length
            continue
        if words[-1:] == ["?"] and word == "?":
            continue
        words.append(word)
    digest = hashlib.sha256(" ".join(words).encode()).hexdigest()
    return digest[:FINGERPRINT_HEX]


# --- conditions -------------------------------------------------------------------------


def condition_predicates(condition: str) -> tuple[Predicate, ...]:
    """The conjuncts of a WHERE condition about one table's unqualified columns, such as
    ``pg_get_expr`` gives for a partial index: ``(status = 'queued'::text)``."""
    tree = parse(f"SELECT 1 FROM qadvisor_condition WHERE {condition}")
    select = main_statement(tree)
    assert isinstance(select, exp.Select)
    return tuple(_predicates(select, "qadvisor_condition"))


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
    arms = _or_arms(where) if where is not None else ()

    def is_column(n: exp.Expr) -> bool:
        n = unwrap(n)
        return isinstance(n, exp.Column) and isinstance(n.this, exp.Identifier)

    out = [_arm_predicate(arm, is_column) for arm in arms]
    return tuple(p for p in out if p is not None) if all(out) else ()


def _or_arms(node: exp.Expr) -> tuple[exp.Expr, ...]:
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
        elif isinstance(node, (*_OPS, exp.In)):
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


# --- the analysis -----------------------------------------------------------------------


def analyse(sql: str) -> DequeueStatement | None:
    """The dequeue shape of ``sql``, or None when it takes no row lock.

    When several query levels lock, the first one in the text that takes rows is analysed
    (a level before the levels inside it, a WITH query before the next: pgqueuer's claim of
    queued jobs before its re-claim of stale ones); ``lock`` is its first locking clause
    (``locked_tables`` counts them all).
    Raises StatementError as check_plannable does.
    """
    tree = parse(sql)
    select = locking_select(tree)
    if select is None:
        return None
    ctes = cte_names(tree)
    queue_table, owner = claimed_table(select, ctes)
    queue_key = source_key(queue_table)
    locks = select.args["locks"]
    level = _lock_level(tree, select)
    predicates = tuple(_predicates(owner, queue_key))
    return DequeueStatement(
        **_names(sql, tree, queue_table),
        predicates=predicates,
        order_by=_order_items(select),
        limit=_literal_limit(select),
        limit_is_parameter=_limit_is_parameter(select),
        lock=lock_clause(locks[0], select, ctes),
        lock_level=level,
        locked_tables=unique(table_name(t) for t, _ in covered(select, of_names(locks), ctes)),
        has_window=_has_window(select, ctes),
        lateral=_lateral(select, owner, queue_key, ctes) if level == "lateral" else None,
        parameters=tuple(sorted({parameter_index(p) for p in tree.find_all(exp.Parameter)})),
        relations=_relations(tree, ctes),
        maintenance=recognise(tree, select, queue_table, predicates),
        joins=_joins(owner, queue_key, ctes),
        unconditional=_unconditional(select, owner, queue_key),
        by_value=_by_value(select, owner, queue_key),
        due=due_times(tree, select, queue_table, predicates),
    )


def analyse_write(sql: str) -> DequeueStatement | None:
    """The maintenance shape of an UPDATE or DELETE that has no locking clause (a purge of
    old rows, a reset of stale ones: :mod:`qadvisor.sql.dequeue.maintenance`), or None: for a
    statement that locks rows (:func:`analyse` reads it), that writes no table, or whose
    conditions do not make it maintenance. Raises StatementError as check_plannable does.

    Its ``lock`` is the row lock the write takes of the rows it changes (FOR UPDATE for a
    DELETE, FOR NO KEY UPDATE for an UPDATE that sets no key column, the usual case), with
    no wait policy: the write waits for a row another session holds.
    """
    tree = parse(sql)
    if locking_select(tree) is not None:
        return None
    found = write_level(tree)
    if found is None:
        return None
    level, table = found
    predicates = tuple(_predicates(level, source_key(table)))
    if not predicates:
        return None  # no condition chooses its rows: it reads them all by design
    what = recognise(tree, level, table, predicates)
    if what is None:
        return None
    write = table.parent
    ctes = cte_names(tree)
    return DequeueStatement(
        **_names(sql, tree, table),
        predicates=predicates,
        order_by=(),
        limit=None,
        limit_is_parameter=False,
        lock=LockClause("no key update" if isinstance(write, exp.Update) else "update", None, ()),
        lock_level="top" if write is main_statement(tree) else "cte",
        locked_tables=(table_name(table),),
        has_window=False,
        lateral=None,
        parameters=tuple(sorted({parameter_index(p) for p in tree.find_all(exp.Parameter)})),
        relations=_relations(tree, ctes),
        maintenance=what,
        locking_clause=False,
    )


def _names(sql: str, tree: exp.Expr, queue: exp.Table) -> dict[str, Any]:
    """The text, the main statement's kind and the queue table's names as written."""
    return {
        "text": sql,
        "kind": _kind(main_statement(tree)),
        "schema": folded_name(queue.args.get("db")),
        "table": table_name(queue),
        "alias": folded_name(queue.args.get("alias")),
    }


def _unconditional(select: exp.Select, owner: exp.Select, key: str) -> bool:
    """No condition chooses among the queue table's rows: none at its own level mentions its
    columns (a join equality aside; ``NOT q.paused`` is about the joined table's rows), and
    none sits at a level between it and the lock (``WHERE n > $6`` over a ranking of it)."""

    def ours(node: exp.Expr) -> bool:
        # Its columns at this level, and those a sub-select correlates with it (EXISTS).
        nested = (c for c in node.find_all(exp.Column) if qualifier(c) == key)
        return any(qualifier(c) in (key, None) for c in own_columns(node)) or any(nested)

    for level in _levels(select, owner):
        for conjunct in filters(level):
            if _chooses(conjunct) and (level is not owner or ours(conjunct)):
                return False
    return True


def _by_value(select: exp.Select, owner: exp.Select, key: str) -> bool:
    """It takes the first rows of an order (ORDER BY and LIMIT where the lock is) and every
    condition that chooses among the queue table's rows is at its own level and compares one
    of its columns with parameters or constants (=, IN, = ANY): a choice of which queue or
    key to serve. Whether that column also says which rows wait (a status) is for the
    catalog to tell; a sweep with no LIMIT, a range or a sub-select is never this."""
    if not select.args.get("order") or _limit_count(select) is None:
        return False

    def is_ours(node: exp.Expr) -> bool:
        node = unwrap(node)
        return (
            isinstance(node, exp.Column)
            and isinstance(node.this, exp.Identifier)
            and qualifier(node) in (key, None)
        )

    compared = False
    for level in _levels(select, owner):
        for conjunct in filters(level):
            if not _chooses(conjunct):
                continue
            nested = any(qualifier(c) == key for c in conjunct.find_all(exp.Column))
            if level is not owner:
                return False
            if not nested and not any(is_ours(c) for c in own_columns(conjunct)):
                continue  # about a joined table's rows
            pred = _predicate(conjunct, is_ours)
            if (
                pred is None
                or pred.op not in ("=", "in", "any")
                or not pred.operands
                or any(o.kind not in ("parameter", "literal") for o in pred.operands)
            ):
                return False
            compared = True
    return compared


def _levels(select: exp.Select, owner: exp.Select) -> Iterator[exp.Select]:
    """The query levels from the queue table's up to the locking one."""
    level: exp.Expr | None = owner
    while isinstance(level, exp.Select):
        yield level
        if level is select:
            return
        level = level.parent.find_ancestor(exp.Select) if level.parent else None


def _chooses(conjunct: exp.Expr) -> bool:
    """A condition that chooses rows: anything but an equality of two columns (a join)."""
    if not isinstance(conjunct, exp.EQ):
        return True
    return not all(
        isinstance(unwrap(side), exp.Column) for side in (conjunct.this, conjunct.expression)
    )


def _joins(owner: exp.Select, key: str, ctes: set[str]) -> tuple[JoinKey, ...]:
    """Equalities of ``owner``'s filters between a column of the queue table (``key``) and a
    column of another base table of that level, both qualified (no catalog here to say which
    table an unqualified column is of)."""
    tables = {source_key(s): s for s in sources(owner) if is_base_table(s, ctes)}
    found = []
    for conjunct in filters(owner):
        if not isinstance(conjunct, exp.EQ):
            continue
        sides = [unwrap(conjunct.this), unwrap(conjunct.expression)]
        if not all(isinstance(c, exp.Column) and isinstance(c.this, exp.Identifier) for c in sides):
            continue
        for ours, theirs in (sides, sides[::-1]):
            assert isinstance(ours, exp.Column) and isinstance(theirs, exp.Column)
            other = qualifier(theirs)
            if qualifier(ours) != key or other is None or other == key or other not in tables:
                continue
            table = tables[other]
            assert isinstance(table, exp.Table)
            found.append(
                JoinKey(
                    folded_name(table.args.get("db")),
                    table_name(table),
                    column_name(theirs),
                    column_name(ours),
                )
            )
    return tuple(dict.fromkeys(found))


def _relations(tree: exp.Expr, ctes: set[str]) -> tuple[tuple[str | None, str], ...]:
    found = (
        (folded_name(t.args.get("db")), table_name(t))
        for t in tree.find_all(exp.Table)
        if is_base_table(t, ctes) and not isinstance(t.parent, exp.Lock)
    )
    return tuple(dict.fromkeys(found))


def tables_named(sql: str) -> set[tuple[str | None, str]]:
    """(schema or None, table) of every table a statement of any kind names, wherever (WITH
    query names too); empty when sqlglot cannot parse it."""
    try:
        tree = parse(sql, plannable=False)
    except StatementError:
        return set()
    found = set()
    for node in tree.find_all(exp.Table):
        name = folded_name(node.args.get("this"))
        if name is not None:
            found.add((folded_name(node.args.get("db")), name))
    return found


def _kind(main: exp.Expr) -> StatementKind:
    if isinstance(main, exp.Update):
        return "update"
    if isinstance(main, exp.Delete):
        return "delete"
    return "select"


def _lock_level(tree: exp.Expr, select: exp.Select) -> LockLevel:
    """Where the locking SELECT sits, judged by what immediately contains it."""
    if select is main_statement(tree):
        return "top"
    parent = select.parent
    if isinstance(parent, exp.CTE):
        return "cte"
    if isinstance(parent, exp.Subquery) and isinstance(parent.parent, exp.Lateral):
        return "lateral"
    return "subquery"


def lock_clause(lock: exp.Lock, select: exp.Select, ctes: set[str]) -> LockClause:
    # sqlglot: update=True/False, key=True turns UPDATE into NO KEY UPDATE and SHARE into
    # KEY SHARE; wait=False is SKIP LOCKED, wait=True is NOWAIT, absent is "wait".
    update, key, wait = lock.args.get("update"), lock.args.get("key"), lock.args.get("wait")
    strength: LockStrength = (
        ("no key update" if key else "update") if update else ("key share" if key else "share")
    )
    policy: WaitPolicy | None = None if wait is None else ("nowait" if wait else "skip locked")
    of: tuple[str, ...] = ()
    if lock.expressions:
        names = {source_key(t) for t in lock.expressions}
        # An OF name the level does not have stays as written (PostgreSQL would refuse it).
        known = {source_key(s) for s in sources(select)}
        of = unique(
            [table_name(t) for t, _ in covered(select, names, ctes)] + sorted(names - known)
        )
    return LockClause(strength=strength, wait_policy=policy, of=of)


def claimed_table(select: exp.Select, ctes: set[str]) -> tuple[exp.Table, exp.Select]:
    """The queue table among the tables reachable from the locking level, with its level.

    One table: that one. Several (a join with the tenant table): the one the first ORDER BY
    column belongs to, then the one with most simple predicates, then the first locked one.
    It is picked without regard to OF, so that locking the tenant row instead of the job
    still names the job table as the queue (and locked_tables shows the mistake).
    """
    candidates = list(covered(select, None, ctes))
    if len(candidates) == 1:
        return candidates[0]
    order = select.args.get("order")
    first = order.expressions[0].this if order and order.expressions else None
    locked = {id(t) for t, _ in covered(select, of_names(select.args["locks"]), ctes)}

    def score(item: tuple[exp.Table, exp.Select]) -> tuple[bool, bool, int, bool]:
        table, level = item
        key = source_key(table)
        # A LATERAL sub-select that picks one row per outer row (its own ORDER BY / LIMIT)
        # picks the job, even when the lock sits at the outer level (the round-robin query
        # with its lock moved out: it locks the rotation row, and the job table is the queue).
        picks = (
            level is not select
            and isinstance(level.parent, exp.Subquery)
            and isinstance(level.parent.parent, exp.Lateral)
            and bool(level.args.get("limit") or level.args.get("order"))
        )
        orders = isinstance(first, exp.Column) and qualifier(first) == key and level is select
        simple = sum(1 for p in _predicates(level, key, only_qualified=True) if p.op != "other")
        return picks, orders, simple, id(table) in locked

    return max(candidates, key=score)  # max() keeps the first of equals: FROM order


# Predicates.

_OPS: dict[type[exp.Binary], tuple[PredicateOp, PredicateOp]] = {
    # sqlglot node -> (op, op with the operands swapped)
    exp.EQ: ("=", "="),
    exp.NEQ: ("<>", "<>"),
    exp.LT: ("<", ">"),
    exp.LTE: ("<=", ">="),
    exp.GT: (">", "<"),
    exp.GTE: (">=", "<="),
}


def _predicates(select: exp.Expr, key: str, *, only_qualified: bool = False) -> Iterator[Predicate]:
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
            yield _predicate(conjunct, is_ours) or Predicate(
                column=column_name(ours[0]), op="other", operands=(), text=sql_text(conjunct)
            )


def _predicate(conjunct: exp.Expr, is_ours: Callable[[exp.Expr], bool]) -> Predicate | None:
    """The conjunct as column-op-operands when it has that shape, else None.

    An OR whose every arm compares the same column for equality with values (``state = $4
    OR state = $5``, ``(state = 'a' OR state IN ('b', 'c'))``) admits exactly the values it
    names: it is that column's IN list, as PostgreSQL 18's planner also reads it (an OR of
    equalities becomes ``= ANY``), whatever spelling the application chose.
    """
    arms = _or_arms(conjunct)
    if arms:
        return _in_list(arms, sql_text(conjunct), is_ours)
    return _arm_predicate(conjunct, is_ours)


def _in_list(
    arms: Sequence[exp.Expr], text: str, is_ours: Callable[[exp.Expr], bool]
) -> Predicate | None:
    """The OR of ``arms`` as one IN predicate, or None when it is not an OR of equalities of
    one column with literals or parameters."""
    columns: set[str] = set()
    operands: list[Param] = []
    for arm in arms:
        pred = _arm_predicate(arm, is_ours)
        if pred is None or pred.op not in ("=", "in"):
            return None
        if any(o.kind not in ("literal", "parameter") for o in pred.operands):
            return None
        columns.add(pred.column)
        operands += pred.operands
    if len(columns) != 1:
        return None
    return Predicate(columns.pop(), "in", tuple(operands), text)


def _arm_predicate(conjunct: exp.Expr, is_ours: Callable[[exp.Expr], bool]) -> Predicate | None:
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
    if negated or type(node) not in _OPS:
        return None
    assert isinstance(node, exp.Binary)
    op, swapped = _OPS[type(node)]
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


# ORDER BY, LIMIT, windows, LATERAL.


def _order_items(select: exp.Select) -> tuple[OrderItem, ...]:
    order = select.args.get("order")
    return tuple(_order_item(o) for o in (order.expressions if order else []))


def _order_item(ordered: exp.Ordered) -> OrderItem:
    node = ordered.this
    plain = isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier)
    descending = bool(ordered.args.get("desc"))
    # sqlglot always fills nulls_first with the effective value; keep it only when it is not
    # PostgreSQL's default (NULLS LAST for ASC, NULLS FIRST for DESC).
    nulls_first = bool(ordered.args.get("nulls_first"))
    return OrderItem(
        column=column_name(node) if plain else sql_text(node),
        descending=descending,
        nulls_first=None if nulls_first == descending else nulls_first,
    )


def _limit_count(select: exp.Select) -> exp.Expr | None:
    limit = select.args.get("limit")
    if isinstance(limit, exp.Fetch):  # FETCH FIRST ROW ONLY has no count: one row
        return limit.args.get("count") or exp.Literal.number(1)
    return limit.expression if isinstance(limit, exp.Limit) else None


def _literal_limit(select: exp.Select) -> int | None:
    count = _limit_count(select)
    if isinstance(count, exp.Literal) and count.is_int:
        return int(count.name)
    return None


def _limit_is_parameter(select: exp.Select) -> bool:
    count = _limit_count(select)
    return count is not None and isinstance(unwrap(count), exp.Parameter)


def _has_window(select: exp.Select, ctes: set[str]) -> bool:
    """A window function at a level the lock applies to.

    PostgreSQL checks every level a lock reaches: "FOR UPDATE is not allowed with window
    functions" is raised for ``SELECT row_number() OVER () ... FOR UPDATE`` and also for
    ``SELECT ... FROM (SELECT row_number() OVER () ...) x FOR UPDATE``, because the lock is
    pushed down into the derived table (verified on PostgreSQL 15). It is not raised when OF
    leaves the derived table out, for windows in sub-selects of WHERE or the select list, or
    for an unused WINDOW clause.
    """
    levels = {id(select): select}
    for _, level in covered(select, of_names(select.args["locks"]), ctes):
        levels[id(level)] = level
    return any(_own_window(level) for level in levels.values())


def _own_window(select: exp.Select) -> bool:
    for node in select.walk(prune=lambda n: n is not select and isinstance(n, exp.Query)):
        if isinstance(node, exp.Window) and node.arg_key != "windows":
            return True
    return False


def _lateral(select: exp.Select, owner: exp.Select, key: str, ctes: set[str]) -> Lateral | None:
    """The round-robin shape around a lock in a LATERAL sub-select; None when the sub-select
    is not correlated on a column of a table of the outer level (a WITH query or a function
    in FROM, such as pgqueuer's ``unnest($2)`` of entrypoints, is no rotation table)."""
    lateral = select.find_ancestor(exp.Lateral)
    outer = lateral.find_ancestor(exp.Select) if lateral else None
    if not isinstance(outer, exp.Select):
        return None
    inner_keys = {source_key(s) for s in sources(owner)}
    outer_tables = {source_key(s): s for s in sources(outer) if is_base_table(s, ctes)}
    for conjunct in filters(owner):
        if not isinstance(conjunct, exp.EQ):
            continue
        sides = [unwrap(conjunct.this), unwrap(conjunct.expression)]
        if not all(isinstance(s, exp.Column) for s in sides):
            continue
        for ours, theirs in (sides, sides[::-1]):
            assert isinstance(ours, exp.Column) and isinstance(theirs, exp.Column)
            correlated = qualifier(theirs)
            if (
                qualifier(ours) in (key, None)
                and correlated not in inner_keys
                and correlated in outer_tables
            ):
                table = outer_tables[correlated]
                assert isinstance(table, exp.Table)
                return Lateral(
                    outer_schema=folded_name(table.args.get("db")),
                    outer_table=table_name(table),
                    inner_column=column_name(ours),
                    outer_column=column_name(theirs),
                    outer_order_by=_order_items(outer),
                )
    return None


def window_partitions(sql: str) -> tuple[str, ...]:
    """The PARTITION BY columns of every window function in ``sql``, each once, names folded
    as PostgreSQL folds them; () when it has none or cannot be parsed."""
    try:
        tree = parse(sql)
    except StatementError:
        return ()
    found = (
        column_name(col)
        for window in tree.find_all(exp.Window)
        for col in window.args.get("partition_by") or []
        if isinstance(col, exp.Column) and isinstance(col.this, exp.Identifier)
    )
    return unique(found)


def queue_columns_read(sql: str, table: str) -> frozenset[str] | None:
    """The column names of the queue table ``table`` the statement may read (what PostgreSQL
    checks SELECT privilege on, EXPLAIN included); None when it reads them all (``*``).

    Conservative: a column qualified with the name or alias of any FROM item of that table
    counts, and so does every unqualified column (in a join, it may be the other table's:
    the caller keeps those the table has).
    """
    tree = parse(sql)
    keys = {
        source_key(t) for t in tree.walk() if isinstance(t, exp.Table) and table_name(t) == table
    } | {table}
    # UPDATE ... SET status = ...: the assigned column needs UPDATE, not SELECT.
    assigned = {id(c) for c in set_targets(tree)}
    out: set[str] = set()
    for node in tree.walk():
        if isinstance(node, exp.Star):
            owner = node.parent
            if isinstance(owner, exp.Column) and qualifier(owner) in keys:
                return None  # jobs.*
            if isinstance(owner, (exp.Select, exp.Returning)):
                return None  # SELECT *, RETURNING *: every column of every FROM item
            continue  # count(*) reads no column
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            if id(node) in assigned:
                continue
            q = qualifier(node)
            if q is None or q in keys:
                name = folded_name(node.this)
                if name:
                    out.add(name)
    return frozenset(out)
