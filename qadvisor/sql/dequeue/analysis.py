"""Dequeue statements analysed into plain data: :func:`analyse` (and :func:`analyse_write`)
fill the frozen dataclasses of :mod:`qadvisor.statement` from SQL text, standing on the
sections beside it: ``locks`` (the row lock and the table it claims), ``predicates`` (the
filters about the queue table), ``order`` (ORDER BY, LIMIT, windows, LATERAL), ``identity``
(the fingerprint) and ``conditions`` (SQL conditions the catalog and EXPLAIN give). Also
here: the tables a statement names and the queue-table columns it reads.

Nothing here talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlglot import exp

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
    unique,
    unwrap,
)
from qadvisor.sql.dequeue.locks import claimed_table, lock_clause, lock_level_of
from qadvisor.sql.dequeue.maintenance import due_times, recognise, write_level
from qadvisor.sql.dequeue.order import (
    has_window,
    lateral_of,
    limit_count,
    limit_is_parameter,
    literal_limit,
    order_items,
)
from qadvisor.sql.dequeue.predicates import parameter_index, predicate_of, predicates_of
from qadvisor.sql.dequeue.screening import StatementError, parse
from qadvisor.sql.scope import folded_name, main_statement, set_targets, source_key, table_name
from qadvisor.statement import DequeueStatement, JoinKey, LockClause, StatementKind


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
    level = lock_level_of(tree, select)
    predicates = tuple(predicates_of(owner, queue_key))
    return DequeueStatement(
        **_names(sql, tree, queue_table),
        predicates=predicates,
        order_by=order_items(select),
        limit=literal_limit(select),
        limit_is_parameter=limit_is_parameter(select),
        lock=lock_clause(locks[0], select, ctes),
        lock_level=level,
        locked_tables=unique(table_name(t) for t, _ in covered(select, of_names(locks), ctes)),
        has_window=has_window(select, ctes),
        lateral=lateral_of(select, owner, queue_key, ctes) if level == "lateral" else None,
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
    predicates = tuple(predicates_of(level, source_key(table)))
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
    if not select.args.get("order") or limit_count(select) is None:
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
            pred = predicate_of(conjunct, is_ours)
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
