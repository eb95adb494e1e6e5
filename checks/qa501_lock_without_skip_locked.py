"""QA501 lock-without-skip-locked."""

from __future__ import annotations

from collections.abc import Iterator

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from qadvisor.api import (
    Fix,
    Issue,
    Severity,
    Snapshot,
    Statement,
    StatementError,
    Target,
    Unmet,
    check,
    statement_evidence,
    statement_id,
    statement_label,
    statement_queue,
    with_literals,
)

DIALECT = "postgres"


@check(
    "QA501",
    "lock-without-skip-locked",
    severity=Severity.WARNING,
    category="locking",
    requires=("statements",),
)
def run(snapshot: Snapshot, options: object) -> Iterator[Issue | Unmet]:
    """A dequeue statement locks rows with FOR UPDATE (or NOWAIT) but without SKIP LOCKED.

    ## What it finds
    A statement that claims queue rows with `FOR UPDATE`, `FOR NO KEY UPDATE` or `FOR SHARE`
    (at any query level: top, sub-select, CTE, LATERAL) whose locking clause waits for
    locked rows or fails on them with `NOWAIT`, instead of skipping them.

    ## Why it matters
    Every worker asks for the same first row. Without SKIP LOCKED the second worker waits
    until the first commits and then usually finds the row gone, so the workers take turns
    instead of working in parallel; with NOWAIT the second worker gets an error instead. The
    PostgreSQL documentation recommends SKIP LOCKED "to avoid lock contention with multiple
    consumers accessing a queue-like table".

    ## How to fix
    Add `SKIP LOCKED` to the locking clause (the statement is printed rewritten). If the
    clause also locks rows of another table (a tenant or rotation table), the rewrite names
    the queue table with `OF` so that only the job is locked (see QA502).

    ## When it stays quiet
    Every locking clause of the statement has SKIP LOCKED, or the statement takes no row
    lock. A queue whose dequeue statement is not known (no pg_stat_statements, no `--query`)
    is reported as skipped.
    """
    for item in claims(snapshot):
        if isinstance(item, Unmet):
            yield item
            continue
        stmt, job = item
        parsed = stmt.parsed
        assert parsed is not None
        if parsed.lock.wait_policy == "skip locked":
            continue
        target = statement_target(snapshot, stmt)
        policy = parsed.lock.wait_policy
        clause = f"FOR {parsed.lock.strength.upper()}" + (" NOWAIT" if policy else "")
        consequence = (
            "a second worker gets an error instead of the next free job"
            if policy == "nowait"
            else "a second worker waits for the first one's transaction and the workers take "
            "turns instead of running in parallel"
        )
        rewritten = healthy_lock_sql(stmt, job)
        fix = None
        if rewritten is not None:
            fix = Fix(
                (rewritten + ";",),
                "Ship this statement in place of the current one: it is the dequeue with SKIP "
                "LOCKED (and OF the queue table when the clause locked other tables too), not "
                "a migration. A worker now skips rows other workers hold and takes the next "
                "free one.",
                "review",
            )
        yield Issue(
            target=target,
            message=(
                f"{statement_label(stmt)} claims {target.table} rows with {clause} without SKIP "
                f"LOCKED: {consequence}."
            ),
            evidence={
                **statement_evidence(stmt),
                "source": stmt.source,
                "lock_strength": parsed.lock.strength,
                "wait_policy": policy or "wait",
                "lock_level": parsed.lock_level,
                "locked_tables": list(parsed.locked_tables),
                "calls": stmt.calls,
                "mean_exec_ms": stmt.mean_exec_ms,
            },
            explanation=(
                "Workers of a queue all want the same first row; only SKIP LOCKED lets each "
                "take a different one without waiting or failing."
            ),
            fix=fix,
        )


def claims(snapshot: Snapshot) -> Iterator[tuple[Statement, tuple[str | None, str]] | Unmet]:
    """Each locking statement with the (schema, table) whose rows it claims, for the lock
    checks; an Unmet for a statement that could not be read, and for each queue no statement
    claims from: a queue whose dequeue is not known was not judged.

    The lock checks read the statement's text, not its plan: a plan error does not stop them
    (PostgreSQL refuses the statements QA503 finds).
    """
    reason = snapshot.unavailable.get("pg_stat_statements")
    if reason and not snapshot.statements:
        yield Unmet(reason)
    elif snapshot.queues and not snapshot.statements:
        yield Unmet(
            "no dequeue statement of the queue tables in pg_stat_statements: give the "
            "application's with --query or --query-file"
        )
    claimed: set[tuple[str | None, str]] = set()
    for stmt in snapshot.statements:
        job = job_table(snapshot, stmt)
        if job is None:
            if stmt.plan_error:
                yield Unmet(f"{statement_id(stmt)}: {stmt.plan_error}")
            continue
        claimed.add(job)
        yield stmt, job
    if snapshot.statements:
        for q in snapshot.queues:
            if (q.schema, q.table) not in claimed:
                yield Unmet(
                    f"{q.qualified}: no dequeue statement of this queue is known (in "
                    "pg_stat_statements, --query or --query-file)",
                    q.qualified,
                )


def job_table(snapshot: Snapshot, stmt: Statement) -> tuple[str | None, str] | None:
    """(schema, name) of the table whose rows the statement claims: the analysed queue table
    when it is a discovered queue, else the first table of the statement that is one (a lock
    at the outer level of a round-robin query makes the analysis pick the rotation table),
    else the analysed table."""
    parsed = stmt.parsed
    if parsed is None:
        return None
    found = statement_queue(snapshot, stmt)
    if found is not None:
        return found[0].schema, found[0].table
    try:
        tree = sqlglot.parse_one(stmt.text, dialect=DIALECT)
    except (ParseError, TokenError):
        return parsed.schema, parsed.table
    for node in tree.find_all(exp.Table):
        schema, name = _names(node)
        if name is None:
            continue
        for queue in snapshot.queues:
            if queue.table == name and schema in (None, queue.schema):
                return queue.schema, queue.table
    return parsed.schema, parsed.table


def statement_target(snapshot: Snapshot, stmt: Statement) -> Target:
    """The statement as a finding target: the table it claims, named by the statement's id."""
    table = job_table(snapshot, stmt)
    schema, name = table if table is not None else (None, None)
    return Target("statement", schema, name, statement_id(stmt))


def _locking_select(tree: exp.Expr) -> exp.Select | None:
    """The outermost SELECT with a locking clause (what dequeue.analyse reads)."""
    return next((n for n in tree.bfs() if isinstance(n, exp.Select) and n.args.get("locks")), None)


def _sources(select: exp.Select) -> list[exp.Expr]:
    from_ = select.args.get("from_")
    items: list[exp.Expr] = [from_.this] if from_ else []
    items += [join.this for join in select.args.get("joins") or []]
    return items


def _folded(node: object) -> str | None:
    if not isinstance(node, exp.Identifier):
        return None
    return str(node.this) if node.quoted else str(node.this).lower()


def _names(node: exp.Table) -> tuple[str | None, str | None]:
    return _folded(node.args.get("db")), _folded(node.this)


def _is_table(node: exp.Expr, schema: str | None, table: str) -> bool:
    if not isinstance(node, exp.Table):
        return False
    node_schema, name = _names(node)
    return name == table and (node_schema is None or schema is None or node_schema == schema)


def queue_source_key(select: exp.Select, schema: str | None, table: str) -> str | None:
    """How the locking level names the FROM item that holds the queue table: the table's
    alias (or name), or the alias of the sub-select / LATERAL that reads it."""
    for source in _sources(select):
        if _is_table(source, schema, table):
            return source.alias_or_name
        if isinstance(source, exp.Subquery | exp.Lateral) and any(
            _is_table(t, schema, table) for t in source.find_all(exp.Table)
        ):
            return source.alias_or_name or None
    return None


def healthy_lock_sql(stmt: Statement, job: tuple[str | None, str] | None = None) -> str | None:
    """The statement with SKIP LOCKED on its locking clause, and ``OF <queue>`` when the
    clause locks rows of other tables than ``job`` (schema, table; default: the analysed
    queue table); None when it cannot be rewritten mechanically."""
    parsed = stmt.parsed
    if parsed is None:
        return None
    schema, table = job if job is not None else (parsed.schema, parsed.table)
    try:
        tree = sqlglot.parse_one(stmt.text, dialect=DIALECT)
    except (ParseError, TokenError):
        return None
    select = _locking_select(tree)
    if select is None:
        return None
    locks: list[exp.Lock] = select.args["locks"]
    if any(t != table for t in parsed.locked_tables):
        key = queue_source_key(select, schema, table)
        if key is None:
            return None
        first = locks[0]
        lock = exp.Lock(
            update=first.args.get("update"),
            key=first.args.get("key"),
            expressions=[exp.Table(this=exp.to_identifier(key))],
            wait=False,
        )
        select.set("locks", [lock])
    else:
        for lock in locks:
            lock.set("wait", False)
    try:
        # Printed through dequeue's pretty printer (with_literals with no values).
        return with_literals(tree.sql(dialect=DIALECT), {})
    except StatementError:
        return None
