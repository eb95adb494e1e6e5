"""Dequeue statements of a snapshot and the queues they claim from: their names for finding
keys and messages, the statement's evidence, the table a statement claims and the claims on a
table. The iterations the statement checks share, which yield findings and skips, stand on
these in :mod:`qadvisor.api.statement_checks`.

Pure: names were resolved by the collector (``Statement.queue``); the rule for statements
without a resolved queue is :func:`queues_named`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qadvisor.derive.plans.reading import indexes_used, partitions_read
from qadvisor.derive.statement_ids import statement_id
from qadvisor.model import Queue, Snapshot, Statement, Table, Target
from qadvisor.sql.dequeue import DequeueStatement


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


def job_table(snapshot: Snapshot, stmt: Statement) -> tuple[str | None, str] | None:
    """(schema, name) of the table whose rows the statement claims: the analysed queue table
    when it is a discovered queue, else the first table the statement reads that is one (a
    lock at the outer level of a round-robin query makes the analysis pick the rotation
    table), else the analysed table."""
    return None if stmt.parsed is None else claimed_table(snapshot, stmt, stmt.parsed)


def claimed_table(
    snapshot: Snapshot, stmt: Statement, parsed: DequeueStatement
) -> tuple[str | None, str]:
    """:func:`job_table` of a statement that was parsed (``parsed`` is ``stmt.parsed``)."""
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
