"""Maintenance statements: the row-locking statements that tidy a queue table rather than
take jobs from it (a reaper that resets rows stuck in a running state, a pruner that deletes
old rows, a mover that deletes them into another table).

They lock with ``FOR UPDATE SKIP LOCKED`` like a claim (so that two workers running the same
reaper do not wait on each other), and pg_stat_statements shows them next to the claims, but
what they select is not what workers wait for, and judging them as claims gives wrong
answers: a queue made of a workers table, a guessed binding of the reaper's ``state = $3``.

What tells one from a claim is in the text, and only the text is read here:

- a claim hands rows to a worker: it chooses them in an order (ORDER BY at the level that
  locks), takes a bounded number of them (LIMIT) and returns them (RETURNING, or it is a
  SELECT);
- a maintenance statement writes the queue table (UPDATE or DELETE of the table it locks)
  and selects its rows by age: a column compared ``<`` / ``<=`` with a bound in the past
  (``now() - interval '5 minutes'``, ``$1 - INTERVAL $4``, ``$1``), or, for a DELETE that
  returns nothing, by whatever condition it has (a purge: a deleted row reaches no worker).

An UPDATE or DELETE without a locking clause is read the same way (its row locks are the
write's own): its WHERE, or the sub-select of the same table its WHERE takes keys from
(``id IN (SELECT id FROM jobs WHERE finished_at < $1 LIMIT 1000)``), is the level that chooses
its rows. An hourly ``DELETE FROM jobs WHERE completed_at < $1 OR failed_at < $2`` takes no row
lock of its own choosing and still reads the whole table when no index serves it. An age
condition may be an OR of ages (a row finished, failed or cancelled long enough ago): each arm
is an age condition of its column, and the statement takes the rows of any of them.

The age may be another row's: a reaper that resets the jobs of dead workers selects them by
their worker's heartbeat, ``NOT EXISTS (SELECT 1 FROM workers w WHERE w.id = j.worker_id AND
w.last_seen >= now() - interval '90 seconds')`` (no fresh heartbeat vouches for the job), or
``EXISTS (... w.last_seen < now() - ...)`` (a stale one marks it). A sub-select correlated
with the locked row that compares a column with time arithmetic that way is an age condition
of that row.

A bound written as time arithmetic (an interval, a subtraction) says "older than": such a
statement is maintenance unless it also takes a bounded number of rows and returns them (then
it is a claim that ends with an age condition). A bare bound (``$1``, ``now()``) may be a
claim's "due by now" (``run_at <= now()``), so it makes maintenance only of a statement that
returns nothing. Nothing here depends on a library's table or column names.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

from sqlglot import exp

from qadvisor.sql.dequeue.conditions import disjuncts
from qadvisor.sql.dequeue.levels import filters, qualifier, sql_text, unwrap
from qadvisor.sql.dequeue.screening import StatementError, expression
from qadvisor.sql.scope import folded_name, main_statement, source_key, table_name
from qadvisor.statement import Maintenance, MaintenanceAction, MaintenanceKind, Predicate

# PostgreSQL's functions of the current time (SQLValueFunction and the pg_catalog ones).
_NOW = {"now", "clock_timestamp", "statement_timestamp", "transaction_timestamp",
        "current_timestamp", "localtimestamp", "current_date", "timeofday"}  # fmt: skip
_ACTION_KIND: dict[MaintenanceAction, MaintenanceKind] = {
    "reset": "reaper",
    "delete": "pruner",
    "move": "mover",
}


def recognise(
    tree: exp.Expr,
    select: exp.Expr,
    queue: exp.Table,
    predicates: Sequence[Predicate],
) -> Maintenance | None:
    """The maintenance shape of a parsed statement that writes the queue table, None when it
    may be a claim.

    ``select`` is the level that chooses its rows (the one that locks them, or for a write
    without a locking clause the write itself or its sub-select of the same table), ``queue``
    the table whose rows it takes, and ``predicates`` that level's conditions on the queue
    table.
    """
    write = _write_of(tree, queue)
    if write is None or select.args.get("order"):
        return None  # a SELECT hands its rows to the client; an ordered level picks the next
    returns = bool(write.args.get("returning"))
    limited = select.args.get("limit") is not None
    strong: list[tuple[str | None, str]] = []
    weak: list[tuple[str | None, str]] = []
    others = []
    any_of: list[str] = []
    for pred in predicates:
        strength = _age_bound(pred.operands[0].text) if pred.op in ("<", "<=") else None
        arms = _age_arms(pred.text) if pred.op == "other" else None
        if strength == "arithmetic":
            strong.append((pred.column, pred.text))
        elif strength == "bare":
            weak.append((pred.column, pred.text))
        elif arms is not None:
            columns, strength = arms
            # One condition that dates rows by any of several columns.
            (strong if strength == "arithmetic" else weak).append((None, pred.text))
            any_of += [c for c in columns if c not in any_of]
        else:
            others.append(pred.text)
    # The age of a row the locked one refers to: no column of the queue table is its key.
    referred = list(_referred_ages(select, queue))
    strong += [(None, text) for text in referred]
    action: MaintenanceAction = "reset" if isinstance(write, exp.Update) else "delete"
    if isinstance(write, exp.Delete) and _moved(tree, write):
        action = "move"
    if referred and not (limited and returns):
        reason = (
            "it selects rows by the age of a row they refer to (older than a time bound) and "
            "hands none to a worker in order"
        )
    elif strong and not (limited and returns):
        reason = "it selects rows older than a time bound and hands none to a worker in order"
    elif (strong or weak) and not returns:
        reason = "it selects rows by age and returns none of them"
    elif action != "reset" and not returns:
        reason = "it deletes the rows it locks and returns none of them: no worker gets them"
    else:
        return None
    age = strong + weak
    columns = [c for c, _ in age if c is not None]
    return Maintenance(
        kind=_ACTION_KIND[action],
        action=action,
        age=tuple(t for _, t in age),
        age_columns=tuple(dict.fromkeys([*columns, *any_of])),
        conditions=tuple(others),
        returns=returns,
        limited=limited,
        reason=reason,
        age_any=tuple(any_of),
    )


def due_times(
    tree: exp.Expr,
    select: exp.Select,
    queue: exp.Table,
    predicates: Sequence[Predicate],
) -> tuple[str, ...]:
    """The columns of the queue table whose time a claim waits to come: a ``column <= bound``
    (or ``<``) whose bound is the current time itself (``vt <= clock_timestamp()``,
    ``run_at <= now()``), or a parameter when the statement itself sets that column to a time
    reckoned from now (a visibility timeout or a lease the claim pushes forward: ``vt <= $1
    ... SET vt = clock_timestamp() + $2``).

    Only of a level that takes the next rows in an order (ORDER BY and LIMIT where the lock
    is): a statement that locks every row past a bound is a sweep, and a parameter compared
    with a column the statement does not set reads as a clean-up's cut-off as well as a due
    time. A bound written as time arithmetic (``now() - interval '1 day'``) says "older
    than", never "due"."""
    if not select.args.get("order") or select.args.get("limit") is None:
        return ()
    write = _write_of(tree, queue)
    pushed = set(_set_to_a_time(write)) if isinstance(write, exp.Update) else set()
    due: list[str] = []
    for pred in predicates:
        if pred.op not in ("<", "<=") or len(pred.operands) != 1:
            continue
        text = pred.operands[0].text
        if _age_bound(text) != "bare":
            continue
        if not _is_now(unwrap(expression(text, "a bound"))) and pred.column not in pushed:
            continue  # a parameter: "due" only where the claim moves that time itself
        if pred.column not in due:
            due.append(pred.column)
    return tuple(due)


def _set_to_a_time(update: exp.Update) -> Iterator[str]:
    """The columns an UPDATE sets to a time reckoned from now (``SET vt = clock_timestamp()
    + $2``, ``lease_until = now() + interval '5 minutes'``): a bare parameter may be any
    value (pg-boss sets ``state = $n``), so it says nothing."""
    for assignment in update.expressions or []:
        if not isinstance(assignment, exp.EQ) or not isinstance(assignment.this, exp.Column):
            continue
        value = assignment.expression
        if any(_is_now(n) or _is_interval(n) for n in value.walk()):
            name = folded_name(assignment.this.this)
            if name is not None:
                yield name


def _age_arms(text: str) -> tuple[list[str], Literal["arithmetic", "bare"]] | None:
    """The columns of an OR whose every arm is an age condition of one column (``completed_at
    < $1 OR failed_at < now() - interval '1 day'``), with the weakest bound's strength; None
    for any other condition."""
    arms = disjuncts(text)
    if not arms or any(a.op not in ("<", "<=") or len(a.operands) != 1 for a in arms):
        return None
    strengths = [_age_bound(a.operands[0].text) for a in arms]
    if any(s is None for s in strengths):
        return None
    strength: Literal["arithmetic", "bare"] = (
        "arithmetic" if all(s == "arithmetic" for s in strengths) else "bare"
    )
    return list(dict.fromkeys(a.column for a in arms)), strength


def write_level(tree: exp.Expr) -> tuple[exp.Expr, exp.Table] | None:
    """For an UPDATE or DELETE of a base table (the main statement or a WITH query, the first
    in the text): the level that chooses its rows and the table written. That is the write
    itself, unless its WHERE takes the table's own keys from a sub-select of the same table
    (``id IN (SELECT id FROM jobs WHERE ... LIMIT 1000)``, ``id = ANY(ARRAY(SELECT ...))``):
    then that sub-select. None for any other statement."""
    for node in tree.walk(bfs=False):
        if not isinstance(node, exp.Update | exp.Delete) or not isinstance(node.this, exp.Table):
            continue
        table = node.this
        if not isinstance(table.this, exp.Identifier):
            continue
        return _keys_from(node, table) or node, table
    return None


def _keys_from(write: exp.Expr, table: exp.Table) -> exp.Select | None:
    """The sub-select of ``table`` alone that a condition of ``write`` compares a column with
    (``id IN (SELECT id FROM jobs ...)``), when it is the write's only condition."""
    found = list(filters(write))
    if len(found) != 1:
        return None
    node = unwrap(found[0])
    if not isinstance(node, exp.In | exp.EQ) or not isinstance(unwrap(node.this), exp.Column):
        return None
    sub = next(node.find_all(exp.Select), None)
    if sub is None:
        return None
    from_ = sub.args.get("from_")
    if from_ is None or sub.args.get("joins") or not isinstance(from_.this, exp.Table):
        return None
    inner = from_.this
    same = table_name(inner) == table_name(table) and folded_name(
        inner.args.get("db")
    ) == folded_name(table.args.get("db"))
    return sub if same else None


def _referred_ages(select: exp.Expr, queue: exp.Table) -> Iterator[str]:
    """The conditions of the locking level that choose its rows by the age of another row
    they refer to, as SQL: a ``NOT EXISTS`` whose sub-select, correlated with the queue
    table's row, keeps only fresh rows (``last_seen >= now() - interval ...``), or an
    ``EXISTS`` whose sub-select keeps only stale ones (``last_seen < now() - ...``)."""
    key = source_key(queue)
    for conjunct in filters(select):
        negated = isinstance(conjunct, exp.Not)
        node = unwrap(conjunct.this if negated else conjunct)
        if not isinstance(node, exp.Exists):
            continue
        sub = main_statement(node.this)
        if not isinstance(sub, exp.Select):
            continue
        if not any(qualifier(c) == key for c in sub.find_all(exp.Column)):
            continue  # not about the locked row: the same for every row
        # The sub-select's rows must be stale (EXISTS) or, under NOT, fresh.
        wanted = (">", ">=") if negated else ("<", "<=")
        for inner in filters(sub):
            bound = _bound_of(inner, wanted)
            if bound is not None and _age_bound(sql_text(bound)) == "arithmetic":
                yield sql_text(conjunct)
                break


def _bound_of(condition: exp.Expr, ops: tuple[str, ...]) -> exp.Expr | None:
    """The bound of ``column <op> bound`` (either side written first) when ``op`` is one of
    ``ops`` as read from the column's side, else None."""
    node = unwrap(condition)
    if type(node) not in _SIDES:
        return None
    assert isinstance(node, exp.Binary)
    op, swapped = _SIDES[type(node)]
    left, right = unwrap(node.this), unwrap(node.expression)
    bound: exp.Expr | None = None
    if isinstance(left, exp.Column) and not isinstance(right, exp.Column) and op in ops:
        bound = node.expression
    elif isinstance(right, exp.Column) and not isinstance(left, exp.Column) and swapped in ops:
        bound = node.this
    return bound


# A comparison node -> (its operator, the operator with the sides swapped).
_SIDES: dict[type[exp.Expr], tuple[str, str]] = {
    exp.LT: ("<", ">"),
    exp.LTE: ("<=", ">="),
    exp.GT: (">", "<"),
    exp.GTE: (">=", "<="),
}


def _write_of(tree: exp.Expr, queue: exp.Table) -> exp.Update | exp.Delete | None:
    """The UPDATE or DELETE of the queue table: the main statement or a WITH query."""
    target = (folded_name(queue.args.get("db")), table_name(queue))
    main = main_statement(tree)
    candidates = [main, *(cte.this for cte in tree.find_all(exp.CTE))]
    for node in candidates:
        node = main_statement(node)
        if isinstance(node, exp.Update | exp.Delete) and isinstance(node.this, exp.Table):
            written = (folded_name(node.this.args.get("db")), table_name(node.this))
            if written[1] == target[1] and (None in (written[0], target[0]) or written == target):
                return node
    return None


def _moved(tree: exp.Expr, delete: exp.Delete) -> bool:
    """A DELETE ... RETURNING whose rows an INSERT of the same statement reads."""
    if not delete.args.get("returning"):
        return False
    cte = delete.parent
    name = folded_name(cte.args.get("alias")) if isinstance(cte, exp.CTE) else None
    for insert in tree.find_all(exp.Insert):
        if name is None or any(table_name(t) == name for t in insert.find_all(exp.Table)):
            return True
    return False


def _age_bound(text: str) -> Literal["arithmetic", "bare"] | None:
    """How a ``column < bound`` condition's bound says "in the past": "arithmetic" for time
    arithmetic (an interval, a subtraction), "bare" for a parameter or the current time,
    None for anything else (a column, a number)."""
    try:
        bound = expression(text, "a bound")
    except StatementError:
        return None
    inner = unwrap(bound)
    if any(_is_interval(n) for n in bound.walk()) or (
        isinstance(inner, exp.Sub) and _is_now(unwrap(inner.this))
    ):
        return "arithmetic"
    if isinstance(inner, exp.Parameter) or _is_now(inner):
        return "bare"
    return None


def _is_interval(node: exp.Expr) -> bool:
    if isinstance(node, exp.Interval):
        return True
    if isinstance(node, exp.Cast) and node.to.is_type(exp.DataType.Type.INTERVAL):
        return True
    return isinstance(node, exp.Anonymous) and str(node.this).lower() == "make_interval"


def _is_now(node: exp.Expr) -> bool:
    if isinstance(node, exp.CurrentTimestamp | exp.CurrentDate | exp.Localtimestamp):
        return True
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower() in _NOW
    return isinstance(node, exp.Func) and node.sql_name().lower() in _NOW
