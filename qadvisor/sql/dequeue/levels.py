"""Query levels of a parsed statement: the FROM items of one level, which SELECT carries the
lock and which base tables its lock reaches, and the conditions that filter a level's rows.
The analysis and the rewriting both stand on these (and on :mod:`qadvisor.sql.scope` for
names as PostgreSQL folds them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sqlglot import exp

from qadvisor.sql.dequeue.screening import DIALECT
from qadvisor.sql.scope import folded_name, main_statement, source_key, table_name


def sources(select: exp.Select) -> list[exp.Expr]:
    """The FROM items of one query level, joins included."""
    from_ = select.args.get("from_")
    items = [from_.this] if from_ else []
    items += [join.this for join in select.args.get("joins") or []]
    return items


def inner_select(source: exp.Expr) -> exp.Select | None:
    """The SELECT of a derived table or LATERAL sub-select; None for anything else."""
    if isinstance(source, exp.Lateral):
        source = source.this
    if isinstance(source, exp.Subquery):
        inner = main_statement(source)
        return inner if isinstance(inner, exp.Select) else None
    return None


def cte_names(tree: exp.Expr) -> set[str]:
    return {name for cte in tree.find_all(exp.CTE) if (name := folded_name(cte.args.get("alias")))}


def is_base_table(source: exp.Expr, ctes: set[str]) -> bool:
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
        return False  # a function in FROM, e.g. generate_series()
    return bool(source.args.get("db")) or table_name(source) not in ctes


def covered(
    select: exp.Select, of: set[str] | None, ctes: set[str]
) -> Iterator[tuple[exp.Table, exp.Select]]:
    """The base tables a lock at ``select`` takes rows of, each with the level it is in.

    As PostgreSQL does (transformLockingClause): a lock without OF covers every FROM item; a
    derived table or LATERAL sub-select it covers passes the lock on to all of its own FROM
    items; a WITH query referenced in FROM is not locked.
    """
    for source in sources(select):
        if of is not None and source_key(source) not in of:
            continue
        if is_base_table(source, ctes):
            assert isinstance(source, exp.Table)
            yield source, select
        elif (inner := inner_select(source)) is not None:
            yield from covered(inner, None, ctes)


def of_names(locks: list[exp.Lock]) -> set[str] | None:
    """The names listed after OF in all lock clauses of a level, None if one has no OF."""
    names: set[str] = set()
    for lock in locks:
        if not lock.expressions:
            return None
        names.update(source_key(t) for t in lock.expressions)
    return names


def locking_select(tree: exp.Expr) -> exp.Select | None:
    """The first SELECT (outer before inner) with a locking clause that takes rows of a table.

    ``SELECT 1 FOR UPDATE`` or a lock on a level that reads only a WITH query locks nothing
    (PostgreSQL accepts both), so such a level does not count.
    """
    ctes = cte_names(tree)
    selects = (n for n in tree.walk(bfs=False) if isinstance(n, exp.Select) and n.args.get("locks"))
    for select in selects:
        if next(covered(select, None, ctes), None) is not None:
            return select
    return None


def sql_text(node: exp.Expr) -> str:
    return node.sql(dialect=DIALECT)


def conjuncts(node: exp.Expr | None) -> Iterator[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from conjuncts(node.this)
        yield from conjuncts(node.expression)
    elif node is not None:
        yield node


def filters(select: exp.Expr) -> Iterator[exp.Expr]:
    """WHERE conjuncts plus ON conjuncts of inner joins: both filter the queue rows (of a
    SELECT, or of the table an UPDATE or DELETE writes)."""
    where = select.args.get("where")
    yield from conjuncts(where.this if where else None)
    for join in select.args.get("joins") or []:
        if not join.side:  # LEFT/RIGHT/FULL ON conditions do not filter the preserved side
            yield from conjuncts(join.args.get("on"))


def qualifier(column: exp.Column) -> str | None:
    return folded_name(column.args.get("table"))


def unwrap(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Cast | exp.Paren) and isinstance(node.this, exp.Expr):
        node = node.this
    return node


def own_columns(node: exp.Expr) -> Iterator[exp.Column]:
    """Columns of ``node`` at its own query level (not inside a nested sub-select)."""
    for sub in node.walk(prune=lambda n: n is not node and isinstance(n, exp.Query)):
        if isinstance(sub, exp.Column) and isinstance(sub.this, exp.Identifier):
            yield sub


def column_name(node: exp.Expr) -> str:
    node = unwrap(node)
    assert isinstance(node, exp.Column)
    return folded_name(node.this) or node.name


def unique(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))
