"""QA101 archive-bloated-index."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from qadvisor.api import (
    NOISE_MARGIN,
    Finding,
    Fix,
    FixStep,
    Index,
    LivePredicate,
    Severity,
    Skip,
    Snapshot,
    Statement,
    Table,
    Target,
    at_least,
    check,
    drop_index,
    human_bytes,
    human_count,
    judgeable_queues,
    live_rows,
    statement_label,
)
from qadvisor.api.provisional import (
    IndexKey,
    IndexMatch,
    IndexUse,
    Param,
    Stakeholder,
    btree_bytes,
    claims_on,
    claims_reading,
    existing_index,
    index_growth,
    index_keys,
    index_use,
    indexes_used,
    live_set_index,
    matching_statements,
    operand_values,
    predicate_implies,
    predicate_sql,
    stakeholder_label,
    statement_queue,
    sum_partitions,
    unplanned_claims,
    unplanned_note,
    writing_partitions,
)

# Columns a dequeue usually orders by, used when the old index has no key besides the status.
_ORDER_COLUMNS = ("created_at", "enqueued_at", "scheduled_at", "run_at", "inserted_at", "id")


@dataclass(frozen=True)
class Options:
    # Share of the table's rows that are finished before covering them is the problem.
    min_archive_fraction: float = 0.9
    # Below 8 MiB (1,024 pages) an index stays in shared_buffers anyway; not worth a migration.
    min_index_bytes: int = 8 * 1024 * 1024
    # How many times larger than its partial replacement the index must be.
    min_size_ratio: float = 10.0
    # The partial index's size is estimated from live rows, which move between runs: a
    # ratio up to this share past min_size_ratio gives an info finding, so two runs agree.
    margin: float = NOISE_MARGIN


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "archive_fraction": "Finished rows",
    "existing_partial_index": "Partial index already there",
    "existing_partial_index_use": "Its use by claims",
    "idx_scan": "Index scans",
    "statements_checked": "Other recorded statements planned",
    "statements_reading_index": "Recorded statements that read the index",
    "claims_reading_index": "Other claims whose plans read the index",
    "claims_whose_generic_plan_alone_reads_index": (
        "Claims whose generic plan alone reads the index, never scanned while they ran"
    ),
    "claims_not_planned": "Claims that could not be planned",
    "statements_not_checked": "Recorded statements that could not be planned",
    "live_predicate": "Live predicate",
    "statements_evicted": "Statements pg_stat_statements evicted",
    "readers_outside_live_set": "Readers of rows outside the live set (maintenance)",
    "partial_index_serves": "Statements the partial index serves",
    "min_archive_fraction": "Minimum finished share",
}


@check("QA101", "archive-bloated-index", severity=Severity.WARNING, category="indexes",
       options=Options,
       requires=("table_facts", "sizes", "index_definitions", "live_set"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """A non-partial index on the dequeue path covers the archive of finished jobs.

    ## What it finds
    An index on a queue table whose key includes the live-set column (the status column, or
    the column of a `finished_at IS NULL` style predicate), or that is led by the column a
    known dequeue statement orders by, but that has no WHERE clause, on a table whose rows are
    mostly finished. The index serves the dequeue, yet it holds an entry for every finished
    job too.

    ## Why it matters
    A queue table is two tables: a small live set and an archive that grows forever. An index
    over both grows with the archive. Measured on PostgreSQL 17 with 5,000 pending jobs: a
    composite `(status, created_at)` index grew 11.2 -> 40.3 -> 310.4 MB as the table grew to
    10 M rows, while a partial `(created_at) WHERE status = 'pending'` index stayed at 7.6 MB
    (41x smaller) for a 6.9 % difference in claims per second.
    With `--history DIR`, the evidence also holds the index's size at each earlier snapshot
    of the directory and how much it grew a day since the first (`index_growth_per_day_bytes`,
    and over which interval): the growth is measured, not inferred.

    ## How to fix
    Build the partial index on the live predicate with the remaining key columns, then drop
    the old index. Both run `CONCURRENTLY`, so writes continue; neither can run inside a
    transaction block. The dequeue query must then spell the predicate exactly as the index
    does, with a literal (see QA301). Primary key, unique and constraint indexes are never
    dropped: only the partial index is proposed.

    Nothing another statement needs is dropped. Every other statement pg_stat_statements
    recorded on the table (a purge, a reaper, an admin listing) is planned generically before
    the fix is written: when one reads the old index, the index is kept (the fix builds only the
    partial index, and names the statements); when one could not be planned (a privilege the
    role lacks, another session's lock), or pg_stat_statements is not there or may have lost
    statements (it evicted entries to make room since its statistics were reset, per
    `pg_stat_statements_info`, or is older than 1.9 and cannot say), the DROP is a step for
    review that says so. Another claim on the table whose plan reads the old index keeps it as
    well, unless the partial index matches that claim's WHERE and ORDER BY: the CREATE INDEX
    step names the claims it matches, derived from their text (not a plan: the index does not
    exist yet). A claim on the table that could not be planned (a GRANT the role lacks, another
    session's lock) and that the partial index does not match may read the old index today: the
    DROP is then for review, and names it. A claim whose generic plan alone reads the old index,
    while planned with its values bound it reads another path, does not keep it when the server
    has not scanned the old index since its statistics were reset (never, or before
    pg_stat_statements' were) and pg_stat_statements counts calls of the claim since its own
    reset: those counters say the generic plan is not what runs (pg-boss writes its states as
    literals, which pg_stat_statements shows as $n). The DROP is then for review, and the note
    says why. The evidence lists what was checked.

    When the partial index exists already, the fix says it serves the live set only with
    evidence that claims use it: a recorded claim's plan reads it, or its `idx_scan` is above
    0. Without that (a claim whose OR branch the predicate does not cover passes it over),
    the DROP of the old index is for review, and the note says why.

    A partitioned table's index is judged on the partitions that take writes (those with
    dead tuples or rows changed since their last VACUUM or ANALYZE, those holding live
    rows, of a table partitioned by time the present's): the writes, and the bloat, land in
    their parts of the index, while the parts of cold partitions are written no more (a
    table partitioned by day keeps each day's archive apart). When no partition shows
    writes and the live rows of some cannot be read (pg_stats of the partitions hidden from
    the role), it is a skip. PostgreSQL builds no index of a partitioned table
    `CONCURRENTLY`: the fix creates it `ON ONLY` the table (a SHARE lock for a moment),
    builds each partition's `CONCURRENTLY` and attaches it (the partitioned table's index is
    valid once all are), and drops the old index with a plain `DROP INDEX` (ACCESS EXCLUSIVE
    on the table and its partitions: with a lock_timeout, at a quiet moment).

    No index without a reader: the partial index takes the old index's other keys, or, when
    no recorded statement's WHERE and ORDER BY match those, the ORDER BY of a claim that
    reads the old index planned with its values bound. With the table's claims known, a
    partial index that no recorded statement matches is not proposed (the note says so); a
    claim that could not be planned, whose parameter may hold a value the index covers,
    counts as one it may serve, and says so. Readers that are maintenance statements
    selecting rows outside the live set (a purge of finished rows, a reaper of stuck ones,
    recognised from their text unless their condition names a live value) need the rows the
    index holds beyond the live set: the index is theirs, not bloated by the archive, and the
    finding is info at most, naming them (`readers_outside_live_set`). A finding with nothing
    to build or drop is info.

    ## When it stays quiet
    The index is partial; the table is mostly live (rows are deleted or moved on completion);
    the index is under `min_index_bytes`; or a partial replacement already exists for a
    constraint index, or for an index that other recorded statements read, and no claim of
    the live set still reads the old index when planned with its values bound (then the
    finding stays, with nothing to build or drop, and names the claims, until their plans
    read the partial index; a generic plan alone that passes it over is QA301's). Another claim
    on the table whose plan reads the index keeps it too, unless the partial index matches
    that claim's WHERE and ORDER BY (derived from its text: the index does not exist yet, so
    no plan can say): then the claim moves to it with the dequeue. The partial index's size
    is estimated from the live rows, which move between runs: a size ratio up to `margin`
    (20 %) past `min_size_ratio` gives an info finding.
    """
    for queue, table in judgeable_queues(snapshot):
        live = queue.live
        if not any(
            i.is_valid and not i.is_partial and i.bytes >= options.min_index_bytes
            for i in table.indexes
        ):
            continue  # no full index is large enough to flag: judged without the live set
        if live is None:
            yield Skip(f"{table.qualified}: live set unknown: {queue.reason}", table.qualified)
            continue
        order_columns = _dequeue_order_columns(snapshot, table)
        candidates = [i for i in table.indexes if _on_dequeue_path(i, live, order_columns)]
        if not candidates:
            continue
        scope = _scope(snapshot, table, live)
        if scope.unknown:
            yield Skip(f"{table.qualified}: {scope.unknown}", table.qualified)
            continue
        est = live_rows(scope.table, live)
        if est.rows is None:
            yield Skip(f"{table.qualified}: live set unknown: {est.source}", table.qualified)
            continue
        if scope.table.reltuples <= 0:
            continue
        archive = max(1.0 - est.rows / scope.table.reltuples, 0.0)
        if archive < options.min_archive_fraction:
            continue
        for idx in candidates:
            finding = _judge(snapshot, table, idx, live, est.rows, est.source, archive, options,
                             scope)  # fmt: skip
            if finding is not None and est.stale:
                finding = dataclasses.replace(
                    finding, evidence={**finding.evidence, "live_rows_stale": est.stale}
                )
            if finding is not None:
                yield finding


@dataclass(frozen=True)
class _Scope:
    """What the index is judged over: the table, or of a partitioned one the partitions
    that take writes (their rows, sizes and live rows summed), which ``words`` name, and
    why none is known to when that is so (``unknown``)."""

    table: Table
    words: str = ""
    partitions: tuple[str, ...] = ()
    unknown: str = ""

    def index(self, idx: Index) -> Index:
        """``idx`` as sized over the scope."""
        return next((i for i in self.table.indexes if i.name == idx.name), idx)


def _scope(snapshot: Snapshot, table: Table, live: LivePredicate) -> _Scope:
    """A partitioned table's writes land in some partitions (today's, the queues'), and the
    index grows and bloats there; its parts on cold partitions are written no more, and a
    claim only descends them. So its partitions that take writes are what it is judged by."""
    if table.partition_key is None:
        return _Scope(table)
    now = snapshot.server.collected_at
    writes = writing_partitions(table, live, datetime.fromisoformat(now) if now else None)
    names = tuple(w.table.name for w in writes.writing)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    words = f" on its {len(names)} partition(s) that take writes ({shown})"
    unknown = ""
    if not names and writes.unknown:
        first = writes.unknown[0]
        unknown = (
            f"no partition shows writes since its last VACUUM or ANALYZE, and the live rows "
            f"of {len(writes.unknown)} are unknown ({first.table.name}: {first.live.source})"
        )
    return _Scope(sum_partitions(table, [w.table for w in writes.writing]), words, names, unknown)


def _on_dequeue_path(idx: Index, live: LivePredicate, order_columns: set[str]) -> bool:
    """Non-partial and either keyed on the live column, or led by a column a dequeue
    statement orders by (the claim walks it from the oldest entry, finished rows first)."""
    if not idx.is_valid or idx.is_partial:
        return False
    keyed = any(c in idx.columns for c in live.columns)
    return keyed or (bool(idx.columns) and idx.columns[0] in order_columns)


def _dequeue_order_columns(snapshot: Snapshot, table: Table) -> set[str]:
    columns: set[str] = set()
    for stmt in snapshot.statements:
        found = statement_queue(snapshot, stmt)
        if stmt.parsed is None or found is None or found[1].qualified != table.qualified:
            continue
        if stmt.parsed.lateral is None:  # a round-robin's inner order is QA401's
            columns |= {o.column for o in stmt.parsed.order_by[:1]}
    return columns


def _judge(
    snapshot: Snapshot,
    table: Table,
    idx: Index,
    live: LivePredicate,
    rows: float,
    source: str,
    archive: float,
    options: Options,
    scope: _Scope,
) -> Finding | None:
    sized = scope.index(idx)
    if sized.bytes < options.min_index_bytes:
        return None
    key_items, matches = _replacement(snapshot, table, idx, live)
    keys = tuple(k.column for k in key_items)
    estimated = btree_bytes(table, keys, rows)
    ratio = sized.bytes / estimated
    if ratio < options.min_size_ratio:
        return None
    keeps_constraint = idx.is_primary or idx.is_unique or idx.is_constraint
    existing = existing_index(table, key_items, live)
    use = index_use(snapshot, table, idx.name)
    build = live_set_index(table, live, key_items)
    # No index without a reader: with the table's claims known, a partial index whose WHERE
    # and ORDER BY no recorded statement has is not proposed. (Without a known claim, whether
    # one would use it cannot be said.)
    proposed = bool(matches) or not claims_on(snapshot, table)
    # Another claim on the table whose plan reads the index today, and whose WHERE and ORDER
    # BY the partial index does not match (from their text), would lose its path: it stays.
    # (One not planned may move to it, or not: it is no evidence either way.)
    moved = {id(m.statement) for m in matches if not m.unbound}
    readers = [s for s in claims_reading(snapshot, table, idx.name) if id(s) not in moved]
    # A claim whose generic plan alone reads the index, which the server never scanned while
    # the claim ran: its counters say that plan is not what runs (pg_stat_statements shows a
    # literal the application writes as $n). It does not keep the index; the DROP is reviewed.
    unrun = [s for s in readers if _generic_plan_never_ran(snapshot, s, table, idx)]
    stuck = [s for s in readers if all(s is not u for u in unrun)]
    # A claim that could not be planned (a GRANT the role lacks, another session's lock) may
    # read the index today: nobody knows, so its DROP is for review.
    unplanned = [s for s in unplanned_claims(snapshot, table) if id(s) not in moved]
    # Another recorded statement's plan reads the index: it stays theirs. Once the live set
    # has its partial index, the dequeue no longer needs it and there is nothing to fix;
    # unless a claim of the live set still reads the bloated index beside it when planned
    # with its values bound (its custom plan): the partial index is then no evidence that the
    # dequeue left it. A generic plan that passes the partial index over is QA301's (a $n of
    # pg_stat_statements may be a literal the application wrote); a claim of other rows by a
    # literal (a stager of retries) keeps the old index for itself.
    kept = keeps_constraint or bool(use.users) or bool(stuck)
    passed = [s for s in stuck if _custom_plan_reads(s, table, idx.name, live)]
    if kept and existing is not None and not passed:
        return None
    serving = _serving(snapshot, table, existing) if existing is not None else None
    where = predicate_sql(live)
    notes = (
        [
            f"The dequeue query must say {where} with a literal, or the planner cannot use the "
            "partial index (see QA301).",
        ]
        if proposed or existing is not None
        else []
    )
    if keeps_constraint:
        notes.insert(0, f"{idx.name} enforces a constraint, so it is kept; the partial index "
                        "takes the dequeue path off it.")  # fmt: skip
    elif use.users:
        notes.insert(0, _kept_for(idx.name, use.users))
    elif stuck and existing is None:
        notes.insert(0, _kept_for_claims(idx.name, build.name, stuck))
    steps: list[FixStep] = [*build.steps(snapshot)] if existing is None and proposed else []
    if existing is None and not proposed:
        notes.insert(0, _no_reader(build.name))
    # Readers that tidy rows no worker waits for (a purge of finished rows, a reaper of
    # stuck ones) need the rows the index holds beyond the live set: it is theirs.
    reading_live = [s for s in stuck if _custom_plan_reads(s, table, idx.name, live)]
    outside = (
        _outside_live(snapshot, table, use.users, live) if use.users and not reading_live else []
    )
    if outside:
        notes.insert(0, _theirs(idx.name, outside))
    if existing is not None and passed:
        notes.insert(0, _passed_over(existing, idx.name, passed))
    elif existing is not None and serving is not None:
        notes.insert(
            0, f"The partial index {existing.name} already serves the live set: {serving}."
        )
    elif existing is not None:
        notes.insert(0, _unproven(existing, idx.name))
    if not kept:
        drop = _drop(table, idx, use, notes, scans_known=not snapshot.server.is_standby)
        if unrun:
            notes.append(_never_ran(snapshot, table, idx.name, unrun))
        if unplanned:
            notes.append(
                f"{unplanned_note(unplanned)}, so nobody knows whether they read {idx.name}: "
                "the DROP is for review."
            )
        doubt = unrun or unplanned or (existing is not None and serving is None)
        if doubt and drop.kind == "migration":
            drop = dataclasses.replace(drop, kind="review")
        steps.append(drop)
    near = at_least(ratio, options.min_size_ratio, options.margin) is None
    message = (
        f"Index {idx.name} on {table.qualified} is {human_bytes(sized.bytes)}{scope.words} "
        f"but {archive:.2%} of {'their' if scope.words else 'the table' + chr(39) + 's'} "
        f"{human_count(scope.table.reltuples)} rows are finished: a partial index on the "
        f"{human_count(rows)} live rows would be about {human_bytes(estimated)} "
        f"({ratio:,.0f}x smaller)."
    )
    if outside:
        message += (
            f" Its readers are maintenance statements that select rows outside the live set: "
            f"it indexes what they ask for ({_listed_readers(outside)})."
        )
    elif not steps:
        message += " Nothing is to be built or dropped: see the notes."
    return Finding(
        target=Target("index", table.schema, table.name, idx.name),
        severity=Severity.INFO if near or outside or not steps else None,
        message=message,
        evidence={
            "index_bytes": sized.bytes,
            **({"index_bytes_source": sized.bytes_source} if sized.bytes_source else {}),
            **({"partitions_taking_writes": list(scope.partitions)} if scope.words else {}),
            "index_definition": idx.definition,
            "table_rows": round(scope.table.reltuples),
            "live_rows": round(rows),
            "live_rows_source": source,
            "live_predicate": where,
            "archive_fraction": round(archive, 4),
            "estimated_partial_bytes": estimated,
            "size_ratio": round(ratio, 1),
            "idx_scan": idx.idx_scan,
            **index_growth(snapshot, table, idx.name),
            **(
                {
                    "existing_partial_index": existing.name,
                    "existing_partial_index_use": serving or "none seen",
                }
                if existing is not None
                else {}
            ),
            "statements_checked": len(use.checked),
            "statements_reading_index": [stakeholder_label(s) for s in use.users],
            **(
                {"readers_outside_live_set": [f"{stakeholder_label(r)}: {w}" for r, w in outside]}
                if outside
                else {}
            ),
            "partial_index_serves": [_match_label(m) for m in matches] if proposed else [],
            "claims_reading_index": [statement_label(s) for s in stuck],
            **(
                {
                    "claims_whose_generic_plan_alone_reads_index": [
                        statement_label(s) for s in unrun
                    ],
                }
                if unrun
                else {}
            ),
            **(
                {
                    "claims_not_planned": [
                        f"{statement_label(s)}: {s.plan_error or 'not planned'}" for s in unplanned
                    ]
                }
                if unplanned
                else {}
            ),
            "statements_not_checked": [
                f"{stakeholder_label(s)}: {s.plan_error}" for s in use.unknown
            ],
            **({"statements_evicted": use.evicted} if use.evicted else {}),
            "min_archive_fraction": options.min_archive_fraction,
            "min_index_bytes": options.min_index_bytes,
            "min_size_ratio": options.min_size_ratio,
            **(
                {"near_threshold": f"{ratio:,.1f}x against {options.min_size_ratio:g}x"}
                if near
                else {}
            ),
        },
        explanation=(
            "PostgreSQL indexes every row, finished or not: an index over the whole table "
            "grows with the archive while the dequeue only ever needs the live rows."
        ),
        fix=Fix(notes=" ".join(notes), safety="review", steps=tuple(steps)),
    )


def _replacement(
    snapshot: Snapshot, table: Table, idx: Index, live: LivePredicate
) -> tuple[tuple[IndexKey, ...], tuple[IndexMatch, ...]]:
    """The keys of the partial index that replaces ``idx`` on the live rows, with the recorded
    statements whose WHERE and ORDER BY it matches: ``idx``'s keys after the live columns;
    when no statement matches those, the ORDER BY of a claim that reads ``idx`` planned with
    its values bound (the order it reads the live rows in), the first that one matches. (A
    claim whose generic plan alone reads it compares the live column with a parameter: no
    partial index serves that plan, QA301's subject.)"""
    keys = tuple(IndexKey(k) for k in _replacement_keys(table, idx, live))
    matches = matching_statements(snapshot, live_set_index(table, live, keys))
    if matches:
        return keys, matches
    for claim in claims_reading(snapshot, table, idx.name):
        if not _custom_plan_reads(claim, table, idx.name, live):
            continue
        order = index_keys(claim.parsed.order_by, table) if claim.parsed is not None else None
        order = tuple(k for k in order or () if k.column not in live.columns)
        if not order or order == keys:
            continue
        found = matching_statements(snapshot, live_set_index(table, live, order))
        if found:
            return order, found
    return keys, matches


def _match_label(m: IndexMatch) -> str:
    said = " (if its parameter holds a value the index covers: not planned)" if m.unbound else ""
    return statement_label(m.statement) + said + (f" (the arm {m.arm} of its OR)" if m.arm else "")


def _no_reader(name: str) -> str:
    return (
        f"No recorded statement's WHERE and ORDER BY match {name} (derived from their text), "
        "so it is not proposed: an index no statement uses costs every write and helps "
        "nothing."
    )


def _outside_live(
    snapshot: Snapshot, table: Table, users: tuple[Stakeholder, ...], live: LivePredicate
) -> list[tuple[Stakeholder, str]]:
    """Each statement reading the index as the maintenance statement it is, with why the rows
    it selects are not the live set: a maintenance statement tidies rows no worker waits for
    (a purge of finished rows, a reset of stuck ones), unless its condition names a live
    value or implies the live predicate. Empty when one of them is no maintenance or reads
    the live set."""
    known = {m.queryid: m for m in snapshot.maintenance if m.queue == table.qualified and m.queryid}
    out = []
    for s in users:
        m = known.get(s.queryid) if s.queryid is not None else None
        what = m.parsed.maintenance if m is not None and m.parsed is not None else None
        if m is None or m.parsed is None or what is None:
            return []
        named = [
            v
            for p in m.parsed.predicates
            if p.column in live.columns
            for v in operand_values(p, {}) or ()
        ]
        if predicate_implies(m.parsed.predicates, live, {}).implies or set(named) & set(
            live.values
        ):
            return []
        why = f"a {what.kind} ({what.reason}"
        why += f"; its condition names {', '.join(named)})" if named else ")"
        out.append((s, why))
    return out


def _theirs(name: str, readers: list[tuple[Stakeholder, str]]) -> str:
    return (
        f"{name} serves maintenance statements that select rows outside the live set "
        f"({_listed_readers(readers)}): it is not bloated by the archive, it indexes what its "
        "readers ask for, and it stays."
    )


def _listed_readers(readers: list[tuple[Stakeholder, str]]) -> str:
    return "; ".join(f"{stakeholder_label(s)}: {why}" for s, why in readers[:3])


def _serving(snapshot: Snapshot, table: Table, existing: Index) -> str | None:
    """What shows that claims use ``existing``: a claim's plan reads it, or it has been
    scanned; None when nothing does (it may exist and still be passed over, as for a claim
    whose OR branch its predicate does not cover)."""
    readers = claims_reading(snapshot, table, existing.name)
    if readers:
        listed = "; ".join(statement_label(s) for s in readers[:3])
        return f"the plans of {len(readers)} claim(s) read it ({listed})"
    if existing.idx_scan and not snapshot.server.is_standby:
        return f"it has been scanned {existing.idx_scan:,} times since statistics were reset"
    return None


def _unproven(existing: Index, name: str) -> str:
    scans = "unknown" if existing.idx_scan is None else f"{existing.idx_scan:,}"
    return (
        f"The partial index {existing.name} has this key and predicate, but nothing shows that "
        f"a claim uses it: no recorded claim's plan reads it and idx_scan is {scans}. A claim "
        "whose WHERE does not imply its predicate (an OR branch, a parameter: see QA302, "
        f"QA301) keeps reading {name}, so dropping {name} is for review until the claim's plan "
        f"reads {existing.name}."
    )


def _custom_plan_reads(stmt: Statement, table: Table, name: str, live: LivePredicate) -> bool:
    """The claim can take the live set (it compares a live column with a parameter, or with a
    live value), and planned with its values bound it reads index ``name``."""
    if stmt.parsed is None or stmt.custom_plan is None:
        return False
    if not any(_may_take_live(p.operands, p.column, live) for p in stmt.parsed.predicates):
        return False
    return name in indexes_used(stmt.custom_plan, table.schema, table.name)


def _generic_plan_never_ran(snapshot: Snapshot, stmt: Statement, table: Table, idx: Index) -> bool:
    """Only ``stmt``'s generic plan reads ``idx``, its custom plan reads another path, and the
    server counts no scan of ``idx`` while pg_stat_statements counts calls of ``stmt`` (a
    standby counts its own scans only, so there it cannot say). The scans must be counted
    over the calls' span: statistics never reset, or reset before pg_stat_statements was."""
    if snapshot.server.is_standby or idx.idx_scan != 0 or not stmt.calls:
        return False
    reset, since = snapshot.server.stats_reset, snapshot.pgss_since
    # Both are read to the second: the same second cannot say which came first.
    if reset is not None and (
        since is None or datetime.fromisoformat(reset) >= datetime.fromisoformat(since)
    ):
        return False
    if stmt.custom_plan is None or stmt.generic_plan is None:
        return False
    return idx.name not in indexes_used(
        stmt.custom_plan, table.schema, table.name
    ) and idx.name in indexes_used(stmt.generic_plan, table.schema, table.name)


def _never_ran(snapshot: Snapshot, table: Table, name: str, claims: list[Statement]) -> str:
    calls = sum(s.calls or 0 for s in claims)
    reset, pgss = snapshot.server.stats_reset, snapshot.pgss_since
    since = f"since statistics were reset ({reset})" if reset else "ever (statistics never reset)"
    counted = f" since its reset ({pgss})" if pgss else ""
    read = sorted(
        {i for s in claims if s.custom_plan
         for i in indexes_used(s.custom_plan, table.schema, table.name)} - {name}
    )  # fmt: skip
    instead = f"read {', '.join(read)}" if read else f"do not read {name}"
    return (
        f"The generic plans of {len(claims)} claim(s) read {name} ({_listed(claims)}), but "
        f"the server has not scanned {name} {since} while "
        f"pg_stat_statements counted {calls:,} call(s) of them{counted}; planned with their "
        f"values bound they {instead}. The counters say the generic plan is not what runs (a "
        f"literal the code writes shows as $n in pg_stat_statements), so {name} is not kept "
        f"for them, and the DROP is for review: keep {name} if the code sends those values "
        "as parameters and its plans go generic (see QA301)."
    )


def _may_take_live(operands: tuple[Param, ...], column: str, live: LivePredicate) -> bool:
    if column not in live.columns:
        return False
    if live.op != "in" or any(o.kind != "literal" for o in operands):
        return True  # a parameter, or a live set no literal comparison rules out
    return any(o.text.strip("'") in live.values for o in operands)


def _listed(claims: list[Statement]) -> str:
    """The first three claims' labels, and how many more."""
    more = f" and {len(claims) - 3} more" if len(claims) > 3 else ""
    return "; ".join(statement_label(s) for s in claims[:3]) + more


def _passed_over(existing: Index, name: str, claims: list[Statement]) -> str:
    return (
        f"The partial index {existing.name} has this key and predicate, but planned with "
        f"their values bound, {len(claims)} claim(s) on the live set still read {name}: "
        f"{_listed(claims)}. Nothing is to be built or dropped here: the planner passes the "
        f"partial index over for them (compare their WHERE and ORDER BY with it, and EXPLAIN "
        f"them); once their plans read {existing.name}, this finding goes."
    )


def _replacement_keys(table: Table, idx: Index, live: LivePredicate) -> tuple[str, ...]:
    keys = tuple(c for c in idx.columns if c is not None and c not in live.columns)
    if keys:
        return keys
    for name in _ORDER_COLUMNS:
        if table.column(name) is not None and name not in live.columns:
            return (name,)
    pk = next((i for i in table.indexes if i.is_primary), None)
    if pk is not None and all(pk.columns):
        return tuple(c for c in pk.columns if c is not None)
    return live.columns[:1]


def _kept_for_claims(name: str, new: str, claims: list[Statement]) -> str:
    return (
        f"{name} is kept: the plans of {len(claims)} other claim(s) on the table read it, and "
        f"{new} does not match their WHERE and ORDER BY (derived from their text): "
        f"{_listed(claims)}. Drop it only once they have an index of their own."
    )


def _kept_for(name: str, users: tuple[Stakeholder, ...]) -> str:
    listed = "; ".join(stakeholder_label(s) for s in users[:3])
    more = f" and {len(users) - 3} more" if len(users) > 3 else ""
    return (
        f"{name} is kept: the plans of {len(users)} other recorded statement(s) on the table "
        f"read it ({listed}{more}). Drop it only once they have an index of their own."
    )


def _drop(table: Table, idx: Index, use: IndexUse, notes: list[str], scans_known: bool) -> FixStep:
    """The DROP INDEX step: a migration when every recorded statement on the table was
    planned and none reads the index; a review step, with why, when nobody can know."""
    name = idx.name
    step = drop_index(table.schema, name, partitioned=table.partition_key is not None)
    if idx.idx_scan and scans_known:
        # pg_stat_statements keeps only pg_stat_statements.max entries and forgets on reset;
        # the index's own scan count is the reader who is never evicted.
        notes.append(
            f"{name} has been scanned {idx.idx_scan:,} times since statistics were reset; "
            "statements pg_stat_statements no longer holds may be among them."
        )
    if use.unavailable is not None:
        notes.append(
            f"No other statement could be checked for {name} ({use.unavailable}): the DROP is "
            "for review; make sure no query (reports, admin pages, maintenance) needs it."
        )
        return dataclasses.replace(step, kind="review")
    if use.evicted is not None:
        notes.append(
            f"Whether a statement pg_stat_statements no longer holds reads {name} cannot be "
            f"known ({use.evicted}): the DROP is for review; make sure no query (reports, "
            "admin pages, maintenance) needs it."
        )
        return dataclasses.replace(step, kind="review")
    if use.unknown:
        listed = "; ".join(f"{stakeholder_label(s)}: {s.plan_error}" for s in use.unknown[:3])
        notes.append(
            f"{len(use.unknown)} recorded statement(s) on the table could not be planned, so "
            f"nobody knows whether they read {name} ({listed}): the DROP is for review."
        )
        return dataclasses.replace(step, kind="review")
    if use.checked:
        notes.append(
            f"Checked the plans of the {len(use.checked)} other recorded statement(s) on the "
            f"table: none reads {name}."
        )
    else:
        notes.append(f"pg_stat_statements records no other statement on {table.qualified}.")
    return step
