"""The iterations the statement checks share, each a stream of what can be judged and of
skips for what cannot: plans (:func:`dequeues`), lock shape (:func:`lockings`), and a plan
check's answer under each binding pg_stat_statements hid (:func:`over_bindings`).

They yield a check's answers (Finding and Skip), so they sit with the checks' door, above
:mod:`qadvisor.derive` (which gives the pure facts they stand on:
:mod:`qadvisor.derive.statement_queues`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from qadvisor.derive.statement_queues import (
    claimed_table,
    statement_label,
    statement_queue,
)
from qadvisor.model import Finding, Queue, Severity, Skip, Snapshot, Statement, Table
from qadvisor.statement import DequeueStatement


@dataclass(frozen=True)
class Dequeue:
    """A parsed dequeue statement on a discovered queue, with the queue's table facts: what
    the plan checks judge."""

    statement: Statement
    parsed: DequeueStatement  # statement.parsed
    queue: Queue
    table: Table

    def compared_columns(self) -> list[str]:
        """Columns of the queue table the claim compares with one value (``queue = $1``,
        ``kind = 'mail'``), other than the live column: what tells one queue's rows from
        another's, so an index that serves the claim leads with them."""
        live = self.queue.live.columns if self.queue.live is not None else ()
        out = [
            p.column
            for p in self.parsed.predicates
            if p.op == "=" and p.column not in live and self.table.column(p.column) is not None
        ]
        return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Locking:
    """A parsed row-locking statement with the (schema, table) whose rows it claims: what the
    lock checks judge."""

    statement: Statement
    parsed: DequeueStatement  # statement.parsed
    job: tuple[str | None, str]


def dequeues(snapshot: Snapshot) -> Iterator[Dequeue | Skip]:
    """Each parsed statement on a discovered queue, with the queue and its table facts; a
    Skip for each statement that could not be judged (unparsable, not a dequeue, not on a
    queue table, a plan that failed), for a missing pg_stat_statements, and for each queue no
    statement claims from.

    A statement whose planning failed only in part (say, EXPLAIN ANALYZE timed out) is still
    yielded after its Skip: checks look at the plans they need.
    """
    yield from _without_statements(snapshot)
    claimed: set[tuple[str | None, str]] = set()
    for stmt in snapshot.statements:
        name = statement_label(stmt)
        parsed = stmt.parsed
        if parsed is None:
            if stmt.plan_error:
                yield Skip(f"{name}: {stmt.plan_error}")
            continue
        found = statement_queue(snapshot, stmt)
        if found is None and stmt.queue is None and stmt.plan_error:
            yield Skip(f"{name}: {stmt.plan_error}")  # its names resolved nowhere
            continue
        if found is None:
            table = stmt.queue or (f"{parsed.schema + '.' if parsed.schema else ''}{parsed.table}")
            yield Skip(f"{name}: {table} is not a discovered queue table (name it with --table)")
            continue
        queue, facts = found
        if stmt.plan_error:
            yield Skip(f"{name}: {stmt.plan_error}", queue.qualified)
        claimed.add((queue.schema, queue.table))
        yield Dequeue(stmt, parsed, queue, facts)
    yield from _unclaimed(snapshot, claimed)


def lockings(snapshot: Snapshot) -> Iterator[Locking | Skip]:
    """Each parsed statement with the (schema, table) whose rows it claims, for the lock
    checks; a Skip for a statement that could not be read, and for each queue no statement
    claims from: a queue whose dequeue is not known was not judged.

    The lock checks read the statement's text, not its plan: a plan error does not stop them
    (PostgreSQL refuses the statements QA503 finds).
    """
    yield from _without_statements(snapshot)
    claimed: set[tuple[str | None, str]] = set()
    for stmt in snapshot.statements:
        if stmt.parsed is None:
            if stmt.plan_error:
                yield Skip(f"{statement_label(stmt)}: {stmt.plan_error}")
            continue
        job = claimed_table(snapshot, stmt, stmt.parsed)
        claimed.add(job)
        yield Locking(stmt, stmt.parsed, job)
    yield from _unclaimed(snapshot, claimed)


def dequeue_statements(snapshot: Snapshot) -> Iterator[tuple[Statement, Queue, Table] | Skip]:
    """:func:`dequeues` as (statement, queue, table) tuples, the shape packs had first."""
    for item in dequeues(snapshot):
        yield item if isinstance(item, Skip) else (item.statement, item.queue, item.table)


def locking_statements(
    snapshot: Snapshot,
) -> Iterator[tuple[Statement, tuple[str | None, str]] | Skip]:
    """:func:`lockings` as (statement, (schema, table)) tuples, the shape packs had first."""
    for item in lockings(snapshot):
        yield item if isinstance(item, Skip) else (item.statement, item.job)


def _without_statements(snapshot: Snapshot) -> Iterator[Skip]:
    """Why the statement checks judge nothing when the snapshot holds no statement. Without
    pg_stat_statements the user's --query statements are still judged: the missing extension
    is worth a skip only when nothing else was given."""
    if snapshot.statements:
        return
    reason = snapshot.unavailable.get("pg_stat_statements")
    if reason:
        yield Skip(reason)
    elif snapshot.queues:
        yield Skip(
            "no dequeue statement of the queue tables in pg_stat_statements: give the "
            "application's with --query or --query-file"
        )


def _unclaimed(snapshot: Snapshot, claimed: set[tuple[str | None, str]]) -> Iterator[Skip]:
    """A queue whose claim is not known was not judged by any statement check."""
    if not snapshot.statements:
        return
    for q in snapshot.queues:
        if (q.schema, q.table) not in claimed:
            yield Skip(
                f"{q.qualified}: no dequeue statement of this queue is known (in "
                "pg_stat_statements, --query or --query-file)",
                q.qualified,
            )


def over_bindings(
    d: Dequeue, judge: Callable[[Dequeue], Finding | Skip | None]
) -> Finding | Skip | None:
    """``judge`` of the dequeue under each plausible binding of the values pg_stat_statements
    hid (``Statement.other_bindings``), its own first; one answer.

    A problem every binding has is the check's finding, its evidence naming the binding
    (``binding``). A problem only some have is info that names the binding with it and
    those without (``bindings_without_it``): the values are hypotheses, and the application
    may never send the ones with the problem. No binding with a problem: the statement's own
    answer (nothing, or its skip)."""
    stmt = d.statement
    variants = [d]
    for b in stmt.other_bindings:
        other = replace(
            stmt,
            custom_values=dict(b.custom_values),
            custom_plan=b.custom_plan,
            index_probes=dict(b.index_probes),
            binding=b.binding,
            other_bindings=(),
            # --analyze ran the first binding's plan, not this one.
            analyzed_plan=None,
            analyzed_ms=None,
        )
        variants.append(replace(d, statement=other))
    answers = [judge(v) for v in variants]
    found = [
        (a, v.statement.binding)
        for a, v in zip(answers, variants, strict=True)
        if isinstance(a, Finding)
    ]
    if not found:
        return answers[0]
    first, binding = found[0]
    if not binding:
        return first
    evidence = {**first.evidence, "binding": binding}
    if len(found) == len(answers):
        return replace(first, evidence=evidence)
    without = [
        v.statement.binding
        for a, v in zip(answers, variants, strict=True)
        if not isinstance(a, Finding)
    ]
    message = (
        f"{first.message} Only with the values bound as {binding}: with {'; or '.join(without)}"
        " it does not, and pg_stat_statements does not say which the application sends."
    )
    return replace(
        first,
        severity=Severity.INFO,
        message=message,
        evidence={**evidence, "bindings_without_it": without},
    )
