"""Dequeue statements of a snapshot and the queues they claim from: their names for finding
keys and messages, the statement's evidence, and the iterations the statement checks share
(plans: dequeues; lock shape: lockings), each a stream of what can be judged and of skips for
what cannot.

Pure: names were resolved by the collector (``Statement.queue``); the rule for statements
without a resolved queue is :func:`queues_named`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from qadvisor.derive.plans.reading import indexes_used, partitions_read
from qadvisor.derive.statement_ids import statement_id
from qadvisor.model import Finding, Queue, Severity, Skip, Snapshot, Statement, Table, Target
from qadvisor.sql.dequeue import DequeueStatement


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


def statement_label(statement: Statement) -> str:
    """Where a statement was seen, as a person finds it again: ``pg_stat_statements
    3f9a2c1b0d (12,345 calls, 0.42 ms mean)``, ``sql/claim.sql:12``, ``--query 1``."""
    if statement.source == "pg_stat_statements":
        facts = []
        if statement.calls is not None:
            facts.append(f"{statement.calls:,} calls")
        if statement.mean_exec_ms is not None:
            facts.append(f"{statement.mean_exec_ms:g} ms mean")
        where = f"pg_stat_statements {statement.fingerprint or statement.queryid}"
        return where + (f" ({', '.join(facts)})" if facts else "")
    if statement.function:
        runs = f" ({statement.calls:,} calls)" if statement.calls is not None else ""
        return statement.source + runs
    return statement.source


def statement_start(statement: Statement, width: int = 100) -> str:
    """The start of a statement's text on one line."""
    text = " ".join(statement.text.split())
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def statement_evidence(statement: Statement) -> dict[str, Any]:
    """What a finding about a statement shows of it: where it was seen, the start of its
    text, the search_path it was planned under, and what of it was planned when the role
    could not plan it whole."""
    out: dict[str, Any] = {"statement": statement_label(statement)}
    out["statement_text"] = statement_start(statement)
    if statement.search_path is not None:
        out["planned_with_search_path"] = statement.search_path
    if statement.planned_as is not None:
        out["planned_as"] = statement.planned_as
    pruning = _partitions_read(statement)
    if pruning:
        out["partitions_read"] = pruning
    return out


def _partitions_read(statement: Statement) -> str:
    """What partition pruning left of a partitioned queue table in the statement's plans:
    the partitions each plan scans, and those its executor pruned as it started (EXPLAIN
    EXECUTE of a generic plan with values; EXPLAIN (GENERIC_PLAN) has none to prune with)."""
    said = []
    for name, plan in (("custom plan", statement.custom_plan),
                       ("generic plan", statement.generic_plan)):  # fmt: skip
        scanned, removed = partitions_read(plan)
        if not scanned and not removed:
            continue
        shown = ", ".join(scanned[:3]) + (
            f" and {len(scanned) - 3} more" if len(scanned) > 3 else ""
        )
        text = f"{name}: {len(scanned)} partition(s) ({shown})"
        if removed:
            text += f", after the executor pruned {removed} as it started (run-time pruning)"
        said.append(text)
    return "; ".join(said)


def queues_named(parsed: DequeueStatement, queues: Sequence[Queue]) -> list[Queue]:
    """The queues a parsed statement's table name can mean: an unqualified name matches a
    queue of that name in any schema, public first. (Collection resolves names under the
    application's search_path and records the result in ``Statement.queue``; this is the
    rule for statements without one.)"""
    matches = [
        q
        for q in queues
        if q.table == parsed.table and (parsed.schema is None or parsed.schema == q.schema)
    ]
    return sorted(matches, key=lambda q: q.schema != "public")


def statement_queue(snapshot: Snapshot, statement: Statement) -> tuple[Queue, Table] | None:
    """The discovered queue (and its table facts) that the statement dequeues from."""
    if statement.parsed is None:
        return None
    if statement.queue is not None:
        queue = next((q for q in snapshot.queues if q.qualified == statement.queue), None)
        table = snapshot.table(queue.schema, queue.table) if queue is not None else None
        return (queue, table) if queue is not None and table is not None else None
    for queue in queues_named(statement.parsed, snapshot.queues):
        table = snapshot.table(queue.schema, queue.table)
        if table is not None:
            return queue, table
    return None


def claims_on(snapshot: Snapshot, table: Table) -> list[Statement]:
    """The recorded statements that dequeue from ``table``."""
    found = []
    for statement in snapshot.statements:
        on = statement_queue(snapshot, statement)
        if on is not None and on[1].qualified == table.qualified:
            found.append(statement)
    return found


def claims_reading(snapshot: Snapshot, table: Table, index: str) -> list[Statement]:
    """The claims on ``table`` whose custom or generic plan reads ``index``."""
    return [
        s
        for s in claims_on(snapshot, table)
        if any(
            index in indexes_used(plan, table.schema, table.name)
            for plan in (s.custom_plan, s.generic_plan)
            if plan is not None
        )
    ]


def unplanned_claims(snapshot: Snapshot, table: Table) -> list[Statement]:
    """The claims on ``table`` that could not be planned at all (a GRANT the role lacks,
    another session's lock): which indexes they read is unknown."""
    return [
        s for s in claims_on(snapshot, table) if s.custom_plan is None and s.generic_plan is None
    ]


def unplanned_note(claims: Sequence[Statement]) -> str:
    """How an index fix names claims that could not be planned, with why."""
    listed = "; ".join(f"{statement_label(s)}: {s.plan_error or 'not planned'}" for s in claims[:3])
    more = f" and {len(claims) - 3} more" if len(claims) > 3 else ""
    return f"{len(claims)} claim(s) on the table could not be planned ({listed}{more})"


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
        job = _claimed_table(snapshot, stmt, stmt.parsed)
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


def job_table(snapshot: Snapshot, stmt: Statement) -> tuple[str | None, str] | None:
    """(schema, name) of the table whose rows the statement claims: the analysed queue table
    when it is a discovered queue, else the first table the statement reads that is one (a
    lock at the outer level of a round-robin query makes the analysis pick the rotation
    table), else the analysed table."""
    return None if stmt.parsed is None else _claimed_table(snapshot, stmt, stmt.parsed)


def _claimed_table(
    snapshot: Snapshot, stmt: Statement, parsed: DequeueStatement
) -> tuple[str | None, str]:
    found = statement_queue(snapshot, stmt)
    if found is not None:
        return found[0].schema, found[0].table
    for schema, name in parsed.relations:
        for queue in snapshot.queues:
            if queue.table == name and schema in (None, queue.schema):
                return queue.schema, queue.table
    return parsed.schema, parsed.table


def statement_target(snapshot: Snapshot, stmt: Statement) -> Target:
    """The statement as a finding target: the table it claims, named by the statement's id."""
    table = job_table(snapshot, stmt)
    schema, name = table if table is not None else (None, None)
    return Target("statement", schema, name, statement_id(stmt))


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
