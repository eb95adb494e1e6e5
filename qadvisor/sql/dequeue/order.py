"""What orders and bounds a claim: ORDER BY, LIMIT, window functions, and the LATERAL
sub-select of the round-robin shape.

Nothing here talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

from sqlglot import exp

from qadvisor.sql.dequeue.levels import (
    column_name,
    covered,
    filters,
    is_base_table,
    of_names,
    qualifier,
    sources,
    sql_text,
    unique,
    unwrap,
)
from qadvisor.sql.dequeue.screening import StatementError, parse
from qadvisor.sql.scope import folded_name, source_key, table_name
from qadvisor.statement import Lateral, OrderItem


def order_items(select: exp.Select) -> tuple[OrderItem, ...]:
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


def limit_count(select: exp.Select) -> exp.Expr | None:
    limit = select.args.get("limit")
    if isinstance(limit, exp.Fetch):  # FETCH FIRST ROW ONLY has no count: one row
        return limit.args.get("count") or exp.Literal.number(1)
    return limit.expression if isinstance(limit, exp.Limit) else None


def literal_limit(select: exp.Select) -> int | None:
    count = limit_count(select)
    if isinstance(count, exp.Literal) and count.is_int:
        return int(count.name)
    return None


def limit_is_parameter(select: exp.Select) -> bool:
    count = limit_count(select)
    return count is not None and isinstance(unwrap(count), exp.Parameter)


def has_window(select: exp.Select, ctes: set[str]) -> bool:
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


def lateral_of(select: exp.Select, owner: exp.Select, key: str, ctes: set[str]) -> Lateral | None:
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
                    outer_order_by=order_items(outer),
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
