"""QA204 archive-without-retention."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from qadvisor.api import (
    NOISE_MARGIN,
    Finding,
    Fix,
    FixStep,
    LiveEstimate,
    LivePredicate,
    Severity,
    Skip,
    Snapshot,
    Table,
    Target,
    analyze,
    at_least,
    check,
    human_bytes,
    human_count,
    ident,
    judgeable_queues,
    live_rows,
    qualified,
    review,
)
from qadvisor.api.provisional import (
    CONCURRENT_DETACH_VERSION,
    DatingColumn,
    TimePartition,
    dating_column,
    default_partition,
    detach,
    guarded_drop,
    live_bound,
    rates,
    recorded_updates,
    series,
    time_partitions,
    waiting_guard,
)

# Rows each batch of the printed DELETE removes at most: short transactions, few locks held.
_BATCH = 10_000
_INTEGER_TYPES = ("smallint", "integer", "bigint")


@dataclass(frozen=True)
class Options:
    # Share of the table's rows outside the live set, and how many rows that is, before the
    # archive is the table's bulk.
    min_archive_fraction: float = 0.5
    min_archive_rows: int = 10_000
    # The oldest finished row older than this many days (and the margin): nothing prunes
    # the archive. The printed DELETE keeps this many days.
    max_age_days: float = 7.0
    # Row estimates move between ANALYZE runs: an archive within this share of its size
    # thresholds gives info. The age must pass max_age_days by this share too (8.4 days by
    # default), so a daily pruner that keeps max_age_days stays quiet.
    margin: float = NOISE_MARGIN


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "archive_rows_at_least": "Rows outside the live set: a lower bound",
    "archive_share": "Share of the table outside the live set",
    "live_rows_from": "Live rows, from",
    "dated_by": "Dated by",
    "dated_by_kind": "Dated by (finish or creation)",
    "dated_by_from": "Why that column dates them",
    "oldest_row": "Oldest row",
    "oldest_row_from": "Oldest row, from",
    "oldest_row_age_days": "Oldest row's age (days)",
    "age_measured_at": "Age measured at",
    "age_measured_from": "Age measured at, from",
    "max_age_days": "Retention threshold (days)",
    "rows_added_per_day": "Rows added a day",
    "table_rows_series": "Live tuples over time",
    "rows_added_per_day_from": "Rows added a day, from",
    "partitioned_by": "Partitioned by",
    "retention_cutoff": "Partitions to drop ended before",
    "partitions_to_drop": "Partitions to drop",
    "partitions_to_drop_rows": "Rows in the partitions to drop",
    "partitions_to_drop_bytes": "Size of the partitions to drop",
    "partitions_to_drop_changed_since_analyze": "Partitions to drop changed since their ANALYZE",
    "partitions_kept": "Old partitions kept",
    "waiting_rows_judged_by": "Waiting rows judged by",
}


@check("QA204", "archive-without-retention", severity=Severity.WARNING, category="vacuum",
       options=Options,
       requires=("table_facts", "live_set", "archive_age"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """A queue table keeps its finished rows without bound: nothing prunes the archive.

    ## What it finds
    A queue table whose rows are mostly outside the live set (the archive share, as QA101
    computes it, at least `min_archive_fraction` and `min_archive_rows` rows) and whose
    oldest finished row is older than `max_age_days` by more than `margin` (8.4 days by
    default). The age comes from the statistics, not
    from a scan: the smallest value ANALYZE saw of the finish timestamp (`finished_at`,
    `completed_at`, `finalized_at`, `completed_on`, ...), measured at the table's last
    ANALYZE (the statistics are that old). Without a finish timestamp, the creation timestamp
    (`created_at`, `inserted_at`, `enqueued_at`, ...) dates the oldest row of any state, which
    on a table that is mostly archive is most likely a finished one: that finding is info.
    A queue whose live predicate is one timestamp being NULL (`dequeued_at IS NULL`) sets it
    when a row leaves the live set, so that timestamp dates the finished rows whatever its
    name (after a finish timestamp, before a creation one). So does the one timestamp that a
    recorded UPDATE sets together with the live column (a broker's delivery: `SET visible =
    $1, timestamp = $2`), though it is set on waiting rows too: the DELETE then keeps the rows
    the live predicate holds for. A column of those names that
    holds seconds or milliseconds since the epoch in an integer (`completed_at bigint`, as
    DBOS keeps its times) dates rows the same way, when the smallest value ANALYZE saw of it
    reads as a date since 2001 in one of those units; the DELETE compares it in that unit.
    With `--sample`, or `--history DIR` between earlier snapshots and this one, the evidence
    gives the rows the table gains a day (inserts less deletes) and over which interval; with
    `--history`, the table's live tuples at each snapshot too. When the statistics cannot count
    the live set now (more rows changed since the last ANALYZE than they hold, or a claim whose
    value is hidden behind `$n` with nothing in the catalog naming it), the archive is at least
    what the finished common values of the status (or the rows whose finish time is set) held
    then, less every row changed since: the message says "at least" (`archive_rows_at_least`).
    Where that bound cannot confirm it (as many rows changed since as a pruner would have
    deleted) and only the statistics' older count does, the finding is info (`live_rows_stale`
    says why), until an ANALYZE settles it.

    ## Why it matters
    A queue's finished rows are kept for a while to be looked at; kept forever they are most
    of the table, and everything that reads the whole table pays for them: indexes that
    cover the archive (QA101), autovacuum thresholds scaled by the archive (QA201), counts
    and admin listings. Reported in 2026: an Oban table at 227 k completed rows behind a
    count that cost 5.45 h of database time; pruning it by age took the table from 174 MB
    to 4.2 MB and the query from 132 ms to 6.7 ms.

    ## How to fix
    For review: a retention job that deletes finished rows older than `max_age_days` in
    bounded batches, written out. With an integer primary key it walks the key in ranges of
    10,000 ids, committing after each (a `DO` block, outside a transaction block), so no
    transaction holds many row locks or runs long, and each batch reads one key range.
    Without one, each batch takes up to 10,000 old rows with `FOR UPDATE SKIP LOCKED`. A
    queue library's own pruner, where the table is a library's, is the lasting fix. When
    only a creation timestamp dates the rows, the DELETE carries a placeholder for the
    condition that tells a finished row, which only the application knows.

    A table partitioned by time (a range on one date or timestamp column, at any level of
    its partitions) keeps its history as partitions, and retention drops them whole: no
    DELETE, no dead tuples, nothing for autovacuum. The partitions whose range ended
    `max_age_days` before the report was read are detached (`CONCURRENTLY` on PostgreSQL
    14+: SHARE UPDATE EXCLUSIVE, claims go on; the plain form, ACCESS EXCLUSIVE on the
    partitioned table, where it has a DEFAULT partition, which rules `CONCURRENTLY` out)
    and dropped. A partition whose statistics show a waiting row (its part of the live-set
    index, else its pg_stats) is never among them, and the evidence names it; since
    statistics are as old as a partition's last ANALYZE and a retried job may wait in an old
    partition, the first step reads each partition for a waiting row and stops the script
    with an error naming it, and the DROP does the same once they are detached. Rows go by
    the partition key: a job created before the cutoff goes with its partition however
    recently it finished. The rows of a DEFAULT partition are outside every range: they are
    deleted in batches, never dropped with it. An ANALYZE of the partitioned table ends the
    fix: autovacuum never analyzes a partitioned table itself. A table partitioned otherwise
    (a partition per queue or tenant) is pruned by the batched DELETE through it.

    ## When it stays quiet
    The archive is small (rows are deleted or moved on completion, or pruned), or its oldest
    row is younger than `max_age_days` and the margin: a pruner that keeps `max_age_days` and
    runs daily stays quiet. An archive near a size threshold (within `margin`) gives info,
    since the estimates move between runs. It reports that it could not judge a queue whose
    live set is unknown and whose statistics show no finished rows to bound it, a table with
    no finish or creation timestamp, or one whose timestamp has no statistics yet.
    """
    for queue, table in judgeable_queues(snapshot):
        if table.reltuples < options.min_archive_rows * (1 - options.margin):
            continue  # too few rows for an archive this size, whatever the live set
        est = live_rows(table, queue.live)
        # Statistics that cannot count the live set now (they predate the rows changed
        # since, or the value the claim waits for is unknown) still bound it: the archive
        # is at least what the archive's share of the rows ANALYZE saw leaves.
        bound = None
        if est.rows is None or est.stale:
            bound = est.bound if est.rows is not None else live_bound(table, queue.live)
        if est.rows is None and bound is None:
            why = est.source if queue.live is not None else queue.reason
            yield Skip(f"{table.qualified}: live set unknown: {why}", table.qualified)
            continue
        live = bound.rows if bound is not None else est.rows or 0.0
        archive_rows, share, large = _archive(table, live, options)
        stale_only = False
        if False in large and bound is not None and est.rows is not None:
            # The bound cannot confirm it (the rows changed since may all have been deleted
            # from the archive): only the statistics' count, older than those changes, says
            # the archive is large, so the finding is info until an ANALYZE settles it.
            archive_rows, share, large = _archive(table, est.rows, options)
            bound, stale_only = None, True
        if False in large:
            continue
        live_source = est.source if bound is None else f"{bound.text}; {est.source}"
        dating = dating_column(table, queue.live, recorded_updates(snapshot, table)[0])
        if dating is None:
            yield Skip(
                f"{table.qualified}: {human_count(archive_rows)} rows are outside the live "
                "set, and the table has no finish or creation timestamp to date them by",
                table.qualified,
            )
            continue
        found = _judge(
            snapshot,
            table,
            queue.live,
            dating,
            archive_rows,
            share,
            live_source,
            None in large or stale_only,
            options,
            at_least_rows=bound is not None,
        )
        if isinstance(found, Finding) and stale_only:
            found = replace(found, evidence={**found.evidence, "live_rows_stale": est.stale})
        if found is not None:
            yield found


def _archive(
    table: Table, live: float, options: Options
) -> tuple[float, float, tuple[bool | None, bool | None]]:
    """The rows outside a live set of ``live`` rows, their share of the table, and whether
    each is past its threshold (None: within the margin)."""
    archive_rows = max(table.reltuples - live, 0.0)
    share = archive_rows / table.reltuples if table.reltuples > 0 else 0.0
    return (
        archive_rows,
        share,
        (
            at_least(archive_rows, options.min_archive_rows, options.margin),
            at_least(share, options.min_archive_fraction, options.margin),
        ),
    )


def _judge(
    snapshot: Snapshot,
    table: Table,
    live: LivePredicate | None,
    dating: DatingColumn,
    archive_rows: float,
    share: float,
    live_source: str,
    near: bool,
    options: Options,
    at_least_rows: bool = False,
) -> Finding | Skip | None:
    stats = table.stats_of(dating.name)
    if stats is None:
        return Skip(
            f"{table.qualified}: {ident(dating.name)} has no statistics: the table has not "
            "been analyzed since the column was added (run ANALYZE)",
            table.qualified,
        )
    if stats.lower_bound is None:
        return Skip(
            f"{table.qualified}: ANALYZE saw no value of {ident(dating.name)} (NULL in "
            f"{stats.null_frac:.0%} of its sample): the finished rows are not dated by it",
            table.qualified,
        )
    oldest = dating.moment(stats.lower_bound)
    if oldest is None:
        return Skip(
            f"{table.qualified}: the smallest {ident(dating.name)} ANALYZE saw is "
            f"{stats.lower_bound!r}, not a date",
            table.qualified,
        )
    measured_at, measured_from = _measured_at(snapshot, table)
    if measured_at is None:
        return Skip(
            f"{table.qualified}: when the statistics of {ident(dating.name)} were gathered is "
            "unknown, and so is how old their oldest row is",
            table.qualified,
        )
    age_days = (measured_at - oldest).total_seconds() / 86400
    # One-sided: a pruner that keeps max_age_days (the printed fix's retention) and runs
    # every day or so leaves its oldest row up to a day past it, and that queue is pruned.
    if age_days < options.max_age_days * (1 + options.margin):
        return None
    finish = dating.kind == "finish"
    # Info when the archive's size is within the margin of its thresholds, or when a
    # creation timestamp dates the oldest row of any state.
    severity = Severity.WARNING if finish and not near else Severity.INFO
    what = "finished row" if finish else "row (of any state)"
    growth, growth_from = _growth(snapshot, table)
    zone = "" if dating.has_time_zone else f", read in the server's TimeZone ({dating.type})"
    if dating.epoch is not None:
        unit = "milliseconds" if dating.epoch == "ms" else "seconds"
        zone = f", read as {unit} since the epoch ({dating.type})"
    evidence: dict[str, object] = {
        "archive_rows": round(archive_rows),
        **({"archive_rows_at_least": True} if at_least_rows else {}),
        "archive_share": round(share, 4),
        "table_rows": round(table.reltuples),
        "live_rows_from": live_source,
        "dated_by": dating.name,
        "dated_by_kind": dating.kind,
        "dated_by_from": (
            f"{dating.from_live}: it is set when a row leaves the live set"
            if dating.from_live
            else f"its name (a {dating.kind} timestamp)"
        ),
        "oldest_row": oldest.isoformat(),
        "oldest_row_from": f"the smallest {dating.name} ANALYZE saw (pg_stats){zone}",
        "oldest_row_age_days": round(age_days, 1),
        "age_measured_at": measured_at.isoformat(),
        "age_measured_from": measured_from,
        "max_age_days": options.max_age_days,
        "rows_added_per_day": growth,
        "rows_added_per_day_from": growth_from,
        "table_bytes": table.bytes,
        "index_bytes": sum(i.bytes for i in table.indexes),
    }
    over_time = series(snapshot, table, table_rows=lambda r: r.stats.n_live_tup)
    if over_time:
        evidence["table_rows_series"] = over_time
    # Without a live predicate (a claim's value hidden behind $n, judged on a bound) no
    # partition can be read for a waiting row: the batched DELETE prunes them.
    retention = None if live is None else _retention(snapshot, table, live, options)
    if retention is not None:
        evidence |= retention.evidence()
    return Finding(
        target=Target("table", table.schema, table.name, table.name),
        severity=severity,
        message=(
            f"Queue table {table.qualified} keeps its finished rows: "
            f"{'at least ' if at_least_rows else ''}"
            f"{human_count(archive_rows)} of {human_count(table.reltuples)} rows "
            f"({share:.1%}) are outside the live set, and the oldest {what} by "
            f"{dating.name} was {_age(age_days)} old when the statistics were gathered "
            f"(threshold {options.max_age_days:g} days)."
            + (retention.sentence() if retention is not None else "")
        ),
        evidence=evidence,
        explanation=(
            "An archive nobody prunes becomes most of the table: every index over it, "
            "every vacuum of it and every count of it grows with the history, not the queue."
        ),
        fix=_fix(table, dating, options)
        if retention is None or not retention.drop or live is None
        else _drop_fix(snapshot, table, live, dating, retention, options),
    )


@dataclass(frozen=True)
class _Retention:
    """A queue table partitioned by time: the partitions whose whole range ended before the
    retention's cutoff, those whose statistics show no waiting row (to drop) and those whose
    statistics show one or cannot say (kept), and its DEFAULT partition when it holds rows
    (outside every range, never dropped)."""

    column: str
    cutoff: datetime
    drop: tuple[tuple[TimePartition, LiveEstimate], ...]
    kept: tuple[tuple[TimePartition, str], ...]
    default: Table | None

    def evidence(self) -> dict[str, object]:
        tables = [p.table for p, _ in self.drop]
        return {
            "partitioned_by": self.column,
            "retention_cutoff": self.cutoff.isoformat(),
            "partitions_to_drop": [t.name for t in tables],
            "partitions_to_drop_rows": round(sum(max(t.reltuples, 0.0) for t in tables)),
            "partitions_to_drop_bytes": sum(_bytes(t) for t in tables),
            "waiting_rows_judged_by": sorted({_judged_by(p.table, est) for p, est in self.drop}),
            "partitions_kept": [f"{p.table.name}: {why}" for p, why in self.kept],
            "partitions_to_drop_changed_since_analyze": [
                f"{p.table.name}: {p.table.stats.n_mod_since_analyze:,} rows"
                for p, _ in self.drop
                if p.table.stats.n_mod_since_analyze
            ],
        }

    def sentence(self) -> str:
        if not self.drop:
            return ""
        size = human_bytes(sum(_bytes(p.table) for p, _ in self.drop))
        return (
            f" It is partitioned by {self.column}: {len(self.drop)} of its partitions hold only "
            f"rows from before {self.cutoff:%Y-%m-%d %H:%M %Z} and, by their statistics, none "
            f"waiting ({size} with their indexes)."
        )


def _judged_by(partition: Table, est: LiveEstimate) -> str:
    """Where a partition's waiting rows were read, in words that hold for every partition
    read alike: its part of an index of the queue table, its own statistics."""
    source = est.source.split(",")[0]
    for idx in partition.indexes:
        if idx.partition_of is not None and source == f"reltuples of partial index {idx.name}":
            return f"reltuples of each partition's part of partial index {idx.partition_of}"
    return source.replace(f" {partition.name}", " of each partition")


def _bytes(table: Table) -> int:
    return table.bytes + sum(i.bytes for i in table.indexes)


def _retention(
    snapshot: Snapshot, table: Table, live: LivePredicate, options: Options
) -> _Retention | None:
    """Which partitions of a table partitioned by time retention drops whole; None for a
    table that is not (a list of queues or tenants keeps every partition)."""
    if table.partition_key is None or snapshot.server.collected_at is None:
        return None
    now = datetime.fromisoformat(snapshot.server.collected_at)
    ranges = time_partitions(table, now)
    if not ranges:
        return None
    cutoff = now - timedelta(days=options.max_age_days)
    drop, kept = [], []
    for part in ranges:
        if part.upper is None or part.upper > cutoff:
            continue
        est = live_rows(part.table, live)
        if est.rows is None:
            kept.append((part, f"its waiting rows are unknown ({est.source})"))
        elif est.rows > 0:
            kept.append((part, f"{est.rows:,.0f} rows wait in it ({est.source})"))
        else:
            drop.append((part, est))
    held = default_partition(table)
    column = ranges[0].column
    return _Retention(
        column,
        cutoff,
        tuple(drop),
        tuple(kept),
        held if held is not None and held.reltuples > 0 else None,
    )


def _drop_fix(
    snapshot: Snapshot,
    table: Table,
    live: LivePredicate,
    dating: DatingColumn,
    retention: _Retention,
    options: Options,
) -> Fix:
    """Detach and drop the old partitions, never one that holds a waiting row; then the
    partitioned table's own statistics, and the DEFAULT partition's old rows by DELETE."""
    parts = [p for p, _ in retention.drop]
    steps: list[FixStep] = [waiting_guard([p.table for p in parts], live)]
    for part in parts:
        has_default = default_partition(table, part.parent) is not None
        concurrent = snapshot.server.version_num >= CONCURRENT_DETACH_VERSION and not has_default
        steps.append(detach(part.table, concurrently=concurrent, has_default=has_default))
    steps.append(guarded_drop([p.table for p in parts], live))
    name = qualified(table.schema, table.name)
    days = f"{options.max_age_days:g}"
    notes = [
        f"{name} is partitioned by {retention.column}: the {len(parts)} partitions whose range "
        f"ended before {retention.cutoff:%Y-%m-%d %H:%M %Z} ({days} days before this report "
        "was read) go whole, detached and then dropped: their rows leave with no DELETE, no "
        "dead tuples and nothing for autovacuum. No partition is to be dropped whose "
        "statistics show a waiting row (its part of the live-set index, else its pg_stats), "
        "and the first step and the DROP read each partition for one again: statistics are "
        "as old as the partition's last ANALYZE (the evidence names any partition changed "
        "since), and a retried job may wait there now. Rows go by "
        f"{retention.column} (the partition key), not by {dating.name}: a job created "
        "before the cutoff goes with its partition however recently it finished.",
    ]
    if retention.kept:
        notes.append(
            "Kept although older than the cutoff: "
            + "; ".join(f"{p.table.name} ({why})" for p, why in retention.kept)
            + ". Once their jobs are claimed and finished, the next run lists them."
        )
    notes.append(
        "Autovacuum never analyzes a partitioned table itself (its partitions, yes): the "
        f"ANALYZE refreshes the statistics of {name} as a whole, which the planner and a "
        "monitoring role without SELECT on the partitions read."
    )
    if retention.default is not None:
        held = retention.default
        steps.extend(_fix(held, dating, options).steps)
        notes.append(
            f"The DEFAULT partition {held.name} holds {human_count(held.reltuples)} rows outside "
            "every range: it is never dropped, and its rows older than the retention are "
            "deleted in batches instead (the step before the ANALYZE)."
        )
    # Last: ANALYZE of a partitioned table reads what is left of each partition too.
    steps.append(analyze(table))
    notes.append(
        "A partition manager's retention (pg_partman's, or a scheduled job running these "
        "steps each day) is the lasting fix; create the partitions ahead as it does."
    )
    return Fix(notes=" ".join(notes), safety="review", steps=tuple(steps))


def _measured_at(snapshot: Snapshot, table: Table) -> tuple[datetime | None, str]:
    """When the statistics were gathered: the table's last ANALYZE (a row that old then is
    older now, unless a pruner deleted it since), else when they were read."""
    times = [t for t in (table.stats.last_analyze, table.stats.last_autoanalyze) if t]
    if times:
        return max(datetime.fromisoformat(t) for t in times), "the table's last ANALYZE"
    if snapshot.server.collected_at is None:
        return None, ""
    return (
        datetime.fromisoformat(snapshot.server.collected_at),
        "when this report was collected (the table's last ANALYZE is not recorded here: "
        "a standby, or statistics reset since)",
    )


def _growth(snapshot: Snapshot, table: Table) -> tuple[int | None, str]:
    """Rows the table gained a day during --sample, else between --history snapshots
    (inserts less deletes): how fast the archive grows while nothing prunes it."""
    measured = rates(snapshot, table)
    if measured is None or not measured.inserts_measured:
        return None, "not measured: run with --sample while jobs arrive, or with --history"
    per_day = (measured.inserts_per_s - measured.deletes_per_s) * 86400
    return round(per_day), f"inserts less deletes during {measured.source}"


def _age(days: float) -> str:
    if days < 2:
        return f"{days * 24:.1f} hours"
    return f"{days:,.0f} days"


def _fix(table: Table, dating: DatingColumn, options: Options) -> Fix:
    name = qualified(table.schema, table.name)
    days = f"{options.max_age_days:g}"
    old = f"{ident(dating.name)} < {dating.since(f'{days} days')}"
    if dating.unless_live is not None:
        # IS NOT TRUE: a row the live predicate is NULL for is never claimed either.
        old += f" AND ({dating.unless_live}) IS NOT TRUE"
    if dating.kind == "creation":
        old += " AND <condition true only for finished rows>"
    key = table.primary_key
    types = {c.name: c.type for c in table.columns}
    if len(key) == 1 and types.get(key[0]) in _INTEGER_TYPES:
        k = ident(key[0])
        sql = (
            "DO $$\n"
            "DECLARE\n"
            "  _from bigint;\n"
            "  _last bigint;\n"
            "BEGIN\n"
            f"  SELECT min({k}), max({k}) INTO _from, _last FROM {name};\n"
            "  WHILE _from <= _last LOOP\n"
            f"    DELETE FROM {name}\n"
            f"     WHERE {k} >= _from AND {k} < _from + {_BATCH}\n"
            f"       AND {old};\n"
            f"    _from := _from + {_BATCH};\n"
            "    COMMIT;\n"
            "  END LOOP;\n"
            "END\n"
            "$$;"
        )
        walk = (
            f"walks {ident(key[0])} in ranges of {_BATCH:,} ids and commits after each: "
            "each batch reads one key range of the primary key"
        )
    else:
        pick = ", ".join(ident(c) for c in key) if key else "ctid"
        sql = (
            "DO $$\n"
            "DECLARE\n"
            "  _deleted bigint;\n"
            "BEGIN\n"
            "  LOOP\n"
            f"    DELETE FROM {name}\n"
            f"     WHERE ({pick}) IN (SELECT {pick} FROM {name}\n"
            f"                   WHERE {old}\n"
            f"                   LIMIT {_BATCH} FOR UPDATE SKIP LOCKED);\n"
            "    GET DIAGNOSTICS _deleted = ROW_COUNT;\n"
            "    EXIT WHEN _deleted = 0;\n"
            "    COMMIT;\n"
            "  END LOOP;\n"
            "END\n"
            "$$;"
        )
        walk = (
            f"deletes up to {_BATCH:,} old rows at a time and commits after each; without an "
            f"index on {ident(dating.name)} each batch scans the table for them"
        )
    note = (
        f"{walk}. A row a worker holds locked makes its batch wait. Run it from a scheduler "
        "(pg_cron, the application's), or once before a pruner takes over"
    )
    if dating.from_live is not None:
        waiting = (
            f"; it is set on waiting rows too, which the DELETE keeps ({dating.unless_live})"
            if dating.unless_live is not None
            else ""
        )
        note = (
            f"{ident(dating.name)} is set when a row leaves the live set ({dating.from_live}"
            f"), so it dates the finished rows{waiting}; a row taken over {days} days ago and "
            "still being worked on is deleted too. " + note[0].upper() + note[1:]
        )
    if dating.kind == "creation":
        note = (
            "replace the placeholder with the condition that tells a finished row (its "
            "state): the table has no finish timestamp; " + note
        )
    return Fix(
        notes=(
            f"Deletes rows whose {dating.name} is older than {days} days: choose the retention "
            "your incident reviews need first. Where the table is a queue library's, its own "
            "pruner or retention setting is the lasting fix. The deleted rows' space is "
            "reused once autovacuum has run; the indexes shrink only when rebuilt (REINDEX "
            "CONCURRENTLY). A large table partitioned by finish time drops its oldest "
            "partition instead of deleting rows."
        ),
        safety="review",
        steps=(review(sql, "ROW EXCLUSIVE", in_transaction_block=False, note=note),),
    )
