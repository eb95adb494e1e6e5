"""QA305 maintenance-scans-queue."""

from __future__ import annotations

from collections.abc import Iterator

from qadvisor.api import (
    Finding,
    Fix,
    FixStep,
    LivePredicate,
    Queue,
    Severity,
    Skip,
    Snapshot,
    Statement,
    Table,
    check,
    human_count,
    ident,
    judgeable_queues,
    qualified,
    statement_evidence,
    statement_target,
)
from qadvisor.api.provisional import (
    CONCURRENT_BUILD_NOTE,
    IndexKey,
    Predicate,
    comparable_index,
    index_name,
    live_set_index,
    operand_values,
    parse_index_predicate,
    set_rows_index,
)

# A run that reads at least this share of the table's pages reads all of it: a Seq Scan
# reads every page once; an index scan of the few rows a reaper resets reads a handful.
WHOLE_TABLE_SHARE = 0.5
# Below this the table is read from memory in a moment and an index would not pay for itself
# (8 MiB, the size under which the index checks stay quiet too).
MIN_PAGES = 1024
PAGE_BYTES = 8192


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "age_conditions": "Age conditions",
    "maintenance_kind": "Maintenance statement",
    "maintenance_reason": "Why it is maintenance",
    "table_read_share": "Share of the table read per call",
}


@check("QA305", "maintenance-scans-queue", severity=Severity.WARNING, category="plans",
       requires=("table_facts", "sizes", "index_definitions", "statements"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: object) -> Iterator[Finding | Skip]:
    """A maintenance statement (a reaper, a pruner) reads the whole queue table every run.

    ## What it finds
    A maintenance statement on a queue table: an UPDATE or DELETE, with or without a locking
    clause, that resets, deletes or moves rows by age (`attempted_at < now() - interval '5
    minutes'`, `heartbeat < $1`, an OR of ages such as `completed_at < $1 OR failed_at < $2
    OR canceled_at < $3`, or the age of a row they refer to: `NOT EXISTS (SELECT 1 FROM
    workers w WHERE w.id = jobs.worker_id AND w.last_seen >= now() - interval '90
    seconds')`) or deletes rows and returns none, instead of handing jobs to a worker. A
    write without a locking clause that names its rows by a unique key (`DELETE FROM jobs
    WHERE id = $1`, an acknowledgement) is none. Such statements are recognised from their
    text, reported under `maintenance` and never judged as claims. This check judges what one
    costs as it ran: pg_stat_statements' shared blocks per call at half the table's pages or
    more (at least 8 MiB of table) say each run reads the whole table, archive included. The
    evidence gives the calls, mean time, shared blocks per call and the table's pages.

    ## Why it matters
    A reaper runs every few seconds on every node, whether anything is stuck or not. The rows
    it looks for (`state = 'executing'` and old) are a handful, but without an index on them
    the planner has one way to find them: a Seq Scan of every row the table has ever kept. On
    a table of a million finished jobs that is 15,000 blocks and over 100 ms per run, forever,
    and it grows with the archive. A clean-up without a row lock is no cheaper: Sidequest's
    hourly `DELETE FROM sidequest_jobs WHERE completed_at < $1 OR failed_at < $2 OR
    canceled_at < $3`, with no index on the three timestamps, read the whole 227 MB table on
    every run (a Seq Scan, 29,064 buffers, 437 ms). Nothing else reports it: it is no claim,
    so the claim checks do not look at it.

    ## How to fix
    A partial index on the age column under the statement's own state condition (`CREATE
    INDEX CONCURRENTLY ... (attempted_at) WHERE state = 'executing'`) holds only the rows in
    that state, stays small, and lets each run read a few pages. The index is built from the
    values in the statement's own text; when pg_stat_statements shows the state only as `$n`,
    the fix names the placeholder and leaves the application's value to you (give the
    statement with `--query-file` for a fix with its literal). A statement with a state
    parameter needs that literal in its text, too, for the planner to use a partial index in a
    generic plan (see QA301).

    A DELETE with no state condition removes what it selects, so after a run the rows older
    than its bound are the few that aged since: an index on its age column serves it, of the
    rows where the column is set when it may be NULL (`WHERE completed_at IS NOT NULL`, which
    the comparison implies in any plan). An OR of ages takes the rows of any arm, and the
    planner serves it only with an index for every arm, combined in a BitmapOr: the fix builds
    one per arm that has none (measured on 300,000 finished jobs kept as Sidequest keeps them:
    8,594 shared blocks and 363 ms per run before, 7 blocks and 0.02 ms after). The planner
    picks them from the bounds' values, which it sees in a custom plan. Each CREATE INDEX step
    names the statement it serves (and the arm).

    ## When it stays quiet
    The statement reads less than half the table per run, the table is under 8 MiB, or an
    index its conditions can use exists, for every arm of an OR of ages (its counters may
    predate the index). It skips a
    statement without pg_stat_statements counters (given only in a file), and every queue
    with no statement known when pg_stat_statements cannot be read.
    """
    missing = snapshot.unavailable.get("pg_stat_statements")
    for queue, table in judgeable_queues(snapshot):
        # With the claims given (--query), the queue's statements are the user's: a statement
        # that was not given is no more known than another check's. With none at all, say
        # that maintenance went unjudged.
        given = any(s.queue == queue.qualified for s in snapshot.statements)
        if missing and not given:
            yield Skip(f"{queue.qualified}: maintenance statements are judged by their cost in "
                       f"pg_stat_statements: {missing}", queue.qualified)  # fmt: skip
            continue
        for stmt in snapshot.maintenance:
            if stmt.queue != queue.qualified or stmt.parsed is None:
                continue
            if stmt.calls is None or stmt.shared_blks_per_call is None:
                yield Skip(
                    f"{queue.qualified}: maintenance statement {stmt.source} has no "
                    "pg_stat_statements counters (calls, shared blocks): its cost is unknown",
                    queue.qualified,
                )
                continue
            finding = _judge(snapshot, queue, table, stmt)
            if finding is not None:
                yield finding


def _pages(table: Table) -> int:
    # relpages is 0 before the first VACUUM or ANALYZE; the size on disk says it then.
    return table.relpages or table.bytes // PAGE_BYTES


def _judge(snapshot: Snapshot, queue: Queue, table: Table, stmt: Statement) -> Finding | None:
    parsed, what = stmt.parsed, stmt.parsed.maintenance if stmt.parsed else None
    assert parsed is not None and what is not None
    pages = _pages(table)
    blocks = stmt.shared_blks_per_call or 0.0
    if pages < MIN_PAGES or blocks < WHOLE_TABLE_SHARE * pages:
        return None
    age = [c for c in what.age_columns if table.column(c) is not None]
    # An OR of ages takes the rows of any arm: one index per arm serves it (a BitmapOr).
    arms = list(what.age_any) if all(table.column(c) for c in what.age_any) else []
    alone = [c for c in age if c not in what.age_any]
    states = [
        p
        for p in parsed.predicates
        if p.op in ("=", "in", "any") and p.column not in age and table.column(p.column)
    ]
    deletes = what.action != "reset"
    if _served(table, alone, arms, states, deletes):
        return None
    steps, notes = _fix(snapshot, stmt, table, alone[:1] or arms, states, deletes)
    calls = stmt.calls or 0
    mean = stmt.mean_exec_ms
    return Finding(
        target=statement_target(snapshot, stmt),
        message=(
            f"Maintenance statement ({what.description}) on {queue.qualified} reads "
            f"{human_count(round(blocks))} shared blocks per run, {blocks / pages:.0%} of the "
            f"table's {human_count(pages)} pages, over {human_count(calls)} calls"
            + (f" at {mean:g} ms each" if mean is not None else "")
            + ": every run scans the whole table."
        ),
        evidence={
            **statement_evidence(stmt),
            "maintenance_kind": what.kind,
            "maintenance_reason": what.reason,
            "age_conditions": list(what.age),
            "calls": calls,
            "mean_exec_ms": mean,
            "shared_blks_per_call": blocks,
            "table_pages": pages,
            "table_bytes": table.bytes,
            "table_read_share": round(blocks / pages, 3),
        },
        explanation=(
            "A maintenance statement runs on a timer whether anything is stale or not; "
            "without an index on the few rows it looks for, each run reads every row the "
            "table keeps, archive included, and costs more as the archive grows."
        ),
        fix=Fix(notes=" ".join(notes), safety="review", steps=steps),
    )


def _served(
    table: Table, alone: list[str], arms: list[str], states: list[Predicate], deletes: bool
) -> bool:
    """A valid index the statement's conditions can use: one led by a state column; one led
    by an age column (each arm's, for an OR of ages) that is partial on a state column (the
    value in it is the application's to choose when the statement's is a parameter), or, for
    a statement that deletes what it selects or has no state condition, one any comparison
    of that column can use."""
    state_columns = {p.column for p in states}
    if any(i.is_valid and i.columns[:1] and i.columns[0] in state_columns for i in table.indexes):
        return True

    def age_served(column: str) -> bool:
        for idx in table.indexes:
            if idx.is_valid and idx.columns[:1] == (column,) and idx.predicate:
                live = parse_index_predicate(idx.predicate)
                if live is not None and live.column in state_columns:
                    return True
        return (deletes or not states) and comparable_index(table, column) is not None

    return any(age_served(c) for c in alone) or (bool(arms) and all(map(age_served, arms)))


def _fix(
    snapshot: Snapshot,
    stmt: Statement,
    table: Table,
    columns: list[str],
    states: list[Predicate],
    deletes: bool,
) -> tuple[tuple[FixStep, ...], list[str]]:
    """The indexes that serve the statement: on its age column (each arm's, for an OR of
    ages) under its state condition; on a state column when it has no age."""
    if not columns and states:
        columns = [states[0].column]
    if not columns:
        return (), [
            "The statement names no condition an index could serve: give it a state "
            "condition and an index on it."
        ]
    known = [(p, operand_values(p, {})) for p in states]
    literal = [(p, v) for p, v in known if v]
    unknown = [p for p, v in known if not v]
    either = len(columns) > 1
    combined = (
        " The statement's OR takes the rows of any of them: the planner reads each index and "
        "combines what they find (a BitmapOr); without an index for every arm it reads the "
        "whole table."
        if either
        else ""
    )
    if literal and not unknown:
        pred, values = literal[0]
        state = LivePredicate(pred.column, "in", tuple(values))
        builds = [live_set_index(table, state, (IndexKey(c),)) for c in columns]
        return tuple(s for b in builds for s in b.steps(snapshot, stmt)), [
            f"An index on {', '.join(columns)} of the rows with {pred.text}: each run reads "
            f"the rows it looks for, not the table.{combined}",
            CONCURRENT_BUILD_NOTE,
        ]
    if unknown:
        p = unknown[0]
        placeholder = ", ".join(o.text for o in p.operands) or p.text
        templates = " ".join(
            f"CREATE INDEX CONCURRENTLY {ident(index_name(table.name, [p.column, c]))} ON "
            f"{qualified(table.schema, table.name)} ({ident(c)}) WHERE {ident(p.column)} = "
            f"<the value the application binds to {placeholder}>;"
            for c in columns
        )
        return (), [
            f"pg_stat_statements shows the state only as {placeholder} ({p.text}): the "
            f"partial index is {templates} Put the application's own value where the "
            f"placeholder is (its code, or the statement given with --query-file, has it); "
            "qadvisor does not guess it. Write it as a literal in the statement too, so a "
            f"generic plan can use the index.{combined}",
            CONCURRENT_BUILD_NOTE,
        ]
    if deletes:
        # Each run deletes what it selects: the rows older than its bound are those that
        # aged since the last run, a few, whatever the archive holds.
        wanted = [c for c in columns if comparable_index(table, c) is None]
        builds = [set_rows_index(table, c) for c in wanted]
        return tuple(b.step(snapshot, stmt) for b in builds), [
            f"An index on {', '.join(wanted)}"
            + (" (of the rows where it is set)" if any(b.where for b in builds) else "")
            + ": the statement deletes the rows it selects, so after a run the rows older "
            "than its bound are the few that aged since, and each run reads them through the "
            "index instead of the table."
            + combined
            + " The planner picks the index from the bound's value, which it sees in a custom "
            "plan: under plan_cache_mode = force_generic_plan it cannot tell how few rows are "
            "old and keeps reading the table.",
            CONCURRENT_BUILD_NOTE,
        ]
    key = columns[0]
    name = index_name(table.name, [key])
    return (), [
        f"The statement has no state condition: an index on {key} alone "
        f"({ident(name)}) helps only if few rows are old enough; a state column the rows "
        "it looks for share, in its WHERE and in a partial index, is the real fix."
    ]
