"""QA205 claim-updates-never-hot."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from qadvisor.api import (
    NOISE_MARGIN,
    Finding,
    Fix,
    FixStep,
    Index,
    Queue,
    Severity,
    Skip,
    Snapshot,
    Table,
    Target,
    at_least,
    check,
    drop_index,
    human_bytes,
    judgeable_queues,
    statement_label,
)
from qadvisor.api.provisional import (
    RecordedUpdate,
    claims_reading,
    index_columns,
    index_use,
    recorded_updates,
    stakeholder_label,
    stops_hot,
    unplanned_claims,
    unplanned_note,
)


@dataclass(frozen=True)
class Options:
    # Updates of the table (since its statistics were reset) before its HOT share means
    # anything, and updates recorded of the statements that could be HOT before a warning.
    min_updates: int = 1_000
    # A HOT share at or above this: the updates mostly avoid the indexes already.
    max_hot_share: float = 0.5
    # Counters move while they are read: counts within this share of min_updates give info.
    margin: float = NOISE_MARGIN


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "updates": "Updates of the table",
    "hot_updates": "HOT updates",
    "hot_share": "Share of updates HOT",
    "updates_from": "Updates, from",
    "statements": "Statements whose updates could be HOT",
    "recorded_updates": "Rows those statements updated",
    "indexes_stopping_hot": "Indexes that stop them being HOT",
    "indexes_each_update_writes": "Indexes each non-HOT update writes into",
    "partial_indexes_written_when_the_row_matches": "Partial indexes written when the row matches",
    "fillfactor": "Fillfactor",
}


@check("QA205", "claim-updates-never-hot", severity=Severity.WARNING, category="vacuum",
       options=Options,
       requires=("table_facts", "index_definitions", "live_set", "counters",
                 "statements"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """Updates that could be heap-only (HOT) are not: an index reads a column they set.

    ## What it finds
    A recorded statement that updates a queue table's rows (a heartbeat, a lock owner, a
    progress or retry counter) and sets a column that an index of the table references (a
    key column, an expression's column, an INCLUDE column or a partial index's predicate
    column) but not the live predicate's column, while the table's counters show that its
    updates are mostly not HOT (`n_tup_hot_upd` under `max_hot_share` of `n_tup_upd`, with
    at least `min_updates` updates). The statements are the claims, the maintenance
    statements and the other statements pg_stat_statements recorded on the table; what each
    sets is read from its text. The evidence names each such index with its size and
    whether another statement's plan reads it, and the indexes every non-HOT update writes
    into.

    ## Why it matters
    PostgreSQL writes an updated row as a heap-only tuple, with no new index entry, only when
    no column an index references changes (a BRIN index does not count from PostgreSQL 16).
    Otherwise each update adds an entry to every index of the table, archive-sized ones
    included, and leaves a dead one behind in each, for vacuum to clean: a heartbeat every
    few seconds on each running job writes into every index that often. Measured on a real
    library's aged database: 0 of 6,574 updates HOT, each writing into an 86 MB and a 70 MB
    index.

    ## How to fix
    For review: drop the index that stops these updates being HOT, when no recorded
    statement's plan reads it (`DROP INDEX CONCURRENTLY`). An index that a plan reads, or
    that enforces a constraint, stays, and the fix says which statement needs it: an index
    for that statement that leaves the updated column out (the same predicate over a column
    the updates do not set, the row filtered on the updated column) lets the updates be HOT.
    HOT also needs room on the row's page: a table whose updates stay non-HOT once no index
    reads the columns they set needs a fillfactor below 100 (the evidence gives it).

    ## When it stays quiet
    The table has fewer than `min_updates` updates, or at least `max_hot_share` of them are
    HOT, or every recorded update either sets no indexed column or sets the live
    predicate's column, which an index reads: a claim and an acknowledgement that change the
    status are never HOT while an index reads the status (QA101's partial index does), and
    that is the price of an index on the live set. It reports that it could not
    judge a queue whose updates are mostly not HOT while no recorded statement says which
    columns they set (pg_stat_statements missing, or the statements' text unreadable), or
    whose live set is unknown while a recorded update sets an indexed column (it may be the
    status change).
    """
    for queue, table in judgeable_queues(snapshot):
        found = _judge(snapshot, queue, table, options)
        if found is not None:
            yield found


def _judge(
    snapshot: Snapshot, queue: Queue, table: Table, options: Options
) -> Finding | Skip | None:
    updates, hot = table.stats.n_tup_upd, table.stats.n_tup_hot_upd
    if at_least(updates, options.min_updates, options.margin) is not True:
        return None  # too few updates for their HOT share to say anything
    share = hot / updates
    if share >= options.max_hot_share:
        return None
    recorded, unreadable = recorded_updates(snapshot, table)
    live = set(queue.live.columns) if queue.live is not None else set()
    version = snapshot.server.version_num
    blocking = [i for i in table.indexes if stops_hot(i, version)]
    avoidable: list[tuple[RecordedUpdate, list[Index]]] = []
    for u in recorded:
        sets = set(u.columns)
        stopping = [i for i in blocking if index_columns(i, table) & sets]
        if not stopping:
            continue
        if any(index_columns(i, table) & sets & live for i in stopping):
            continue  # it sets the live predicate's column, which an index reads
        avoidable.append((u, stopping))
    if avoidable and queue.live is None:
        # Whether these updates set the live predicate's column (the status change of a
        # claim, which is never HOT while an index reads the status) is unknown.
        return Skip(
            f"{table.qualified}: {hot:,} of {updates:,} updates were HOT ({share:.1%}) and "
            f"{avoidable[0][0].label} sets an indexed column, but whether that is the live "
            f"predicate's column is unknown: {queue.reason}",
            table.qualified,
        )
    if not avoidable:
        # The other recorded statements (heartbeats, acknowledgements) are what is judged
        # here: without them the claims alone are no all-clear.
        others = snapshot.unavailable.get("stakeholders") or snapshot.unavailable.get(
            "pg_stat_statements"
        )
        if recorded and others is None:
            return None
        why = (
            (f"the other statements on it could not be read ({others})" if others else "")
            or (f"the text of {', '.join(unreadable[:3])} did not parse" if unreadable else "")
            or "no recorded statement updates it"
        )
        return Skip(
            f"{table.qualified}: {hot:,} of {updates:,} updates were HOT ({share:.1%}), and "
            f"which columns the updates set is unknown: {why}",
            table.qualified,
        )
    return _finding(snapshot, table, avoidable, share, options)


def _finding(
    snapshot: Snapshot,
    table: Table,
    avoidable: list[tuple[RecordedUpdate, list[Index]]],
    share: float,
    options: Options,
) -> Finding:
    updates, hot = table.stats.n_tup_upd, table.stats.n_tup_hot_upd
    stopping: dict[str, Index] = {}
    for _u, idxs in avoidable:
        stopping.update((i.name, i) for i in idxs)
    recorded = sum((u.rows if u.rows is not None else u.calls) or 0 for u, _ in avoidable)
    many = at_least(recorded, options.min_updates, options.margin)
    severity = Severity.WARNING if many is True else Severity.INFO
    written = [i for i in table.indexes if not i.is_partial]
    into = (
        f"the table's {len(written)} index(es) that cover every row "
        f"({human_bytes(sum(i.bytes for i in written))})"
        if written
        else "each index whose predicate the new version satisfies"
    )
    first, first_idx = avoidable[0]
    sets = ", ".join(sorted(set(first.columns) & _referenced(first_idx, table)))
    names = ", ".join(f"{i.name} ({human_bytes(i.bytes)})" for i in first_idx)
    more = f" (and {len(avoidable) - 1} more such statement(s))" if len(avoidable) > 1 else ""
    evidence: dict[str, object] = {
        "updates": updates,
        "hot_updates": hot,
        "hot_share": round(share, 4),
        "updates_from": "pg_stat_user_tables since the table's statistics were reset",
        "statements": [
            {
                "statement": u.label,
                "kind": u.kind,
                "sets": list(u.columns),
                "calls": u.calls,
                "rows": u.rows,
                "stopped_by": [i.name for i in idxs],
            }
            for u, idxs in avoidable
        ],
        "recorded_updates": recorded,
        "indexes_stopping_hot": [
            {
                "index": i.name,
                "bytes": i.bytes,
                "references": sorted(index_columns(i, table)),
                "scans": i.idx_scan,
            }
            for i in stopping.values()
        ],
        "indexes_each_update_writes": [{"index": i.name, "bytes": i.bytes} for i in written],
        "partial_indexes_written_when_the_row_matches": [
            i.name for i in table.indexes if i.is_partial
        ],
        "fillfactor": int(table.reloptions.get("fillfactor", "100")),
    }
    return Finding(
        target=Target("table", table.schema, table.name, table.name),
        severity=severity,
        message=(
            f"Updates of queue table {table.qualified} are not HOT: {hot:,} of {updates:,} "
            f"({share:.1%}) were. {first.label} sets {sets}, which {names} references, "
            f"without setting the live predicate's column{more}: each such update writes a "
            f"new entry into {into} and leaves a dead one in each."
        ),
        evidence=evidence,
        explanation=(
            "An update is heap-only (HOT), with no new index entry, only when no column an "
            "index references changes; an index on a column a heartbeat or a lock owner "
            "sets makes every such update write into every index of the table."
        ),
        fix=_fix(snapshot, table, list(stopping.values())),
    )


def _referenced(indexes: list[Index], table: Table) -> set[str]:
    out: set[str] = set()
    for i in indexes:
        out |= index_columns(i, table)
    return out


def _fix(snapshot: Snapshot, table: Table, stopping: list[Index]) -> Fix:
    notes: list[str] = []
    steps: list[FixStep] = []
    for idx in stopping:
        if idx.is_primary or idx.is_unique or idx.is_constraint:
            notes.append(
                f"{idx.name} enforces a constraint and stays: an update that changes a key it "
                "enforces cannot be HOT."
            )
            continue
        use = index_use(snapshot, table, idx.name)
        claims = claims_reading(snapshot, table, idx.name)
        if use.users or claims:
            listed = "; ".join(
                [statement_label(s) for s in claims[:3]]
                + [stakeholder_label(s) for s in use.users[:3]]
            )
            notes.append(
                f"{idx.name} stays: recorded plans read it ({listed}). An index for them that "
                "leaves the updated columns out (the same predicate over a column these "
                "updates do not set, filtering the updated one) lets the updates be HOT."
            )
            continue
        drop = drop_index(table.schema, idx.name, partitioned=table.partition_key is not None)
        steps.append(replace(drop, kind="review"))
        checked = (
            f"no recorded claim or statement reads {idx.name}"
            if use.unavailable is None
            else f"whether other statements read {idx.name} is unknown ({use.unavailable})"
        )
        if use.unknown:
            checked += f"; {len(use.unknown)} recorded statement(s) could not be planned"
        unplanned = unplanned_claims(snapshot, table)
        if unplanned:
            checked += f"; {unplanned_note(unplanned)}, so whether they read it is unknown"
        scans = (
            f"; it has been scanned {idx.idx_scan:,} times since statistics were reset"
            if idx.idx_scan
            else ""
        )
        notes.append(
            f"Drop {idx.name}: {checked}{scans}. The DROP is for review: make sure no query "
            "pg_stat_statements did not record (reports, admin pages) needs it."
        )
    notes.append(
        "A HOT update also needs room on the row's page: if the updates stay non-HOT once no "
        "index reads the columns they set, the table's fillfactor "
        f"({table.reloptions.get('fillfactor', '100')}) leaves them none."
    )
    return Fix(notes=" ".join(notes), safety="review", steps=tuple(steps))
