"""The row lock of a statement: which SELECT carries it, its strength, wait policy and OF
list, and the table whose rows it claims.

Nothing here talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

from sqlglot import exp

from qadvisor.sql.dequeue.levels import covered, of_names, qualifier, sources, unique
from qadvisor.sql.dequeue.predicates import predicates_of
from qadvisor.sql.scope import main_statement, source_key, table_name
from qadvisor.statement import LockClause, LockLevel, LockStrength, WaitPolicy


def lock_level_of(tree: exp.Expr, select: exp.Select) -> LockLevel:
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
        simple = sum(1 for p in predicates_of(level, key, only_qualified=True) if p.op != "other")
        return picks, orders, simple, id(table) in locked

    return max(candidates, key=score)  # max() keeps the first of equals: FROM order
