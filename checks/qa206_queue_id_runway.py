"""QA206 queue-id-runway."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from qadvisor.api import (
    Finding,
    Fix,
    IdSequence,
    Severity,
    Skip,
    Snapshot,
    Table,
    Target,
    check,
    human_bytes,
    human_count,
    ident,
    judgeable_queues,
    qualified,
    review,
)
from qadvisor.api.provisional import (
    ID_RANGE_ENDLESS,
    MIN_SAMPLE_ROWS,
    id_limit,
    ids_used,
    per_day,
    rates,
    series,
)


@dataclass(frozen=True)
class Options:
    # Ids left for fewer days than these (at the measured rate) warn / are critical.
    warn_days: float = 365.0
    critical_days: float = 30.0
    # This share of the range used warns / is critical whatever the rate.
    warn_used: float = 0.5
    critical_used: float = 0.9


@dataclass(frozen=True)
class _Rate:
    per_day: float
    source: str


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "ids_used_series": "Ids used over time",
    "id_column": "Id column",
    "column_type": "Column type",
    "sequence": "Sequence",
    "sequence_type": "Sequence type",
    "id_limit": "Largest id",
    "ids_used": "Ids used",
    "ids_used_from": "Ids used, from",
    "share_used": "Share of the range used",
    "ids_per_day": "Ids per day (at least)",
    "rate_from": "Rate from",
    "days_left": "Days left (at most)",
}


@check("QA206", "queue-id-runway", severity=Severity.WARNING, category="schema",
       options=Options,
       requires=("table_facts", "id_sequences"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """A queue table's id runs out: an integer column or sequence, used up fast.

    ## What it finds
    A queue table whose id is numbered by a sequence (serial or identity) with an `integer`
    (or `smallint`) range, in the column or in the sequence itself (`AS integer`, which a
    `serial` makes even for a column later widened to bigint), when the share of the range
    used or the days left at the rate rows are inserted cross a threshold. How far the
    sequence has gone is its last value (SELECT on the sequence), else the largest id
    ANALYZE saw (pg_stats of the id column). The rate is the inserts counted during
    `--sample`; else, with `--history DIR`, the ids the sequence gave between the first
    earlier snapshot that read its last value and this one (the inserts between them where
    it was not read); else the inserts since this database's statistics were last reset.
    Counted inserts are lower bounds, since an insert that fails or an `ON CONFLICT DO
    NOTHING` uses an id too. The evidence says which rate, over which interval.

    ## Why it matters
    A queue burns ids at the rate of its throughput, and its archive keeps none of them back
    for reuse. When the sequence reaches its maximum, every enqueue fails (`nextval: reached
    maximum value of sequence`) and the workers of a library that inserts on start cannot
    start. Widening the column then is `ALTER TABLE ... TYPE bigint`, which rewrites the
    whole table, archive included, and every index under an ACCESS EXCLUSIVE lock.

    ## How to fix
    For review: the bigint migration, written out with what it rewrites (the table's and its
    indexes' sizes) and its lock, and `ALTER SEQUENCE ... AS bigint` where the sequence is
    typed integer. Where the queue cannot stop for the rewrite, the online way: a new bigint
    column filled in batches and swapped in.

    ## When it stays quiet
    The id and its sequence are bigint, or the share used and the days left at the measured
    rate are within the thresholds. Without a rate (no `--sample`, statistics never reset)
    and with less than `warn_used` of the range used, it reports that it could not judge.
    """
    for _queue, table in judgeable_queues(snapshot):
        for seq in table.id_sequences:
            yield from _judge(snapshot, table, seq, options)


def _judge(
    snapshot: Snapshot, table: Table, seq: IdSequence, options: Options
) -> Iterator[Finding | Skip]:
    limit = id_limit(seq)
    if limit is None or limit >= ID_RANGE_ENDLESS:
        return
    used, used_source = ids_used(table, seq)
    if used is None:
        # Neither the sequence nor the id's statistics were read (collection records the grant
        # as a hidden fact, which skips the queue before it gets here; a snapshot without it
        # still must not pass as judged).
        yield Skip(
            f"how far {seq.qualified} has gone is unknown: its last value and the statistics "
            f"of {seq.column} were not read",
            table.qualified,
        )
        return
    share = max(0.0, used / limit)
    rate = _rate(snapshot, table, seq)
    days_left = (limit - used) / rate.per_day if rate is not None and rate.per_day > 0 else None
    if share >= options.critical_used or (
        days_left is not None and days_left < options.critical_days
    ):
        severity = Severity.CRITICAL
    elif share >= options.warn_used or (days_left is not None and days_left < options.warn_days):
        severity = Severity.WARNING
    elif rate is None:
        yield Skip(
            f"{seq.qualified} has used {share:.1%} of its range, and the rate ids are used "
            "at is unknown: this database's statistics were never reset; run with --sample",
            table.qualified,
        )
        return
    else:
        return
    runway = (
        f"at {human_count(rate.per_day)} ids a day or more ({rate.source}), it runs out in "
        f"{_days(days_left)} at most"
        if rate is not None and days_left is not None
        else "the rate ids are used at is unknown (run with --sample)"
    )
    evidence: dict[str, object] = {
        "id_column": seq.column,
        "column_type": seq.column_type,
        "sequence": seq.qualified,
        "sequence_type": seq.data_type,
        "id_limit": limit,
        "ids_used": used,
        "ids_used_from": used_source,
        "share_used": round(share, 4),
        "ids_per_day": round(rate.per_day, 1) if rate is not None else None,
        "rate_from": rate.source if rate is not None else None,
        "days_left": round(days_left, 1) if days_left is not None else None,
        "table_bytes": table.bytes,
        "index_bytes": sum(i.bytes for i in table.indexes),
    }
    over_time = series(
        snapshot, table, sampled=False, ids_used=lambda r: r.id_values.get(seq.qualified)
    )
    if over_time:
        evidence["ids_used_series"] = over_time
    yield Finding(
        target=Target("table", table.schema, table.name, table.name),
        severity=severity,
        message=(
            f"Queue table {table.qualified} numbers {seq.column} ({seq.column_type}) from "
            f"{seq.qualified} ({seq.data_type}): {used:,} of {limit:,} ids used "
            f"({share:.0%}); {runway}."
        ),
        evidence=evidence,
        explanation=(
            "Every enqueue takes an id and the archive returns none: at the end of the "
            "range every insert fails, and widening the column rewrites the whole table."
        ),
        fix=_fix(table, seq),
    )


def _rate(snapshot: Snapshot, table: Table, seq: IdSequence) -> _Rate | None:
    """Ids used a day, at least: rows inserted during --sample; else the sequence's advance
    between the first earlier snapshot of --history and this one (rows inserted, where its
    last value was not read); else rows inserted since the statistics were reset."""
    measured = rates(snapshot, table)
    if measured is not None and not measured.from_history and measured.inserts_measured:
        return _Rate(
            measured.inserts_per_s * 86400,
            f"{measured.inserted_rows:,} rows inserted in {measured.source}",
        )
    advanced = _advance(snapshot, table, seq)
    if advanced is not None:
        return advanced
    if measured is not None and measured.inserts_measured:
        return _Rate(
            measured.inserts_per_s * 86400,
            f"{measured.inserted_rows:,} rows inserted in {measured.source}",
        )
    server = snapshot.server
    if server.stats_reset is None or server.collected_at is None:
        return None
    seconds = (
        datetime.fromisoformat(server.collected_at) - datetime.fromisoformat(server.stats_reset)
    ).total_seconds()
    if seconds <= 0 or table.stats.n_tup_ins < MIN_SAMPLE_ROWS:
        return None
    return _Rate(
        table.stats.n_tup_ins / seconds * 86400,
        f"{table.stats.n_tup_ins:,} rows inserted since the statistics reset at "
        f"{server.stats_reset}",
    )


def _advance(snapshot: Snapshot, table: Table, seq: IdSequence) -> _Rate | None:
    """The ids the sequence gave between the first --history snapshot that read its last
    value and this one, a day: every id taken, an insert that failed included."""
    known = series(snapshot, table, sampled=False, ids=lambda r: r.id_values.get(seq.qualified))
    rate = per_day(known, "ids")
    if rate is None:
        return None
    first, last = known[0], known[-1]
    ids = int(str(last["ids"])) - int(str(first["ids"]))
    if ids < MIN_SAMPLE_ROWS:
        return None
    return _Rate(
        rate,
        f"{ids:,} ids given by {seq.qualified} between the snapshot of {first['at']} and "
        f"this one (--history, {len(known)} readings)",
    )


def _days(days: float) -> str:
    if days < 2:
        return f"{days * 24:.1f} hours"
    return f"{days:,.0f} days"


def _fix(table: Table, seq: IdSequence) -> Fix:
    name = qualified(table.schema, table.name)
    index_bytes = sum(i.bytes for i in table.indexes)
    steps = []
    if seq.column_type != "bigint":
        steps.append(
            review(
                f"ALTER TABLE {name} ALTER COLUMN {ident(seq.column)} TYPE bigint;",
                "ACCESS EXCLUSIVE",
                note=(
                    f"rewrites the table ({human_bytes(table.bytes)}) and its "
                    f"{len(table.indexes)} indexes ({human_bytes(index_bytes)}) while every "
                    "claim and enqueue waits"
                ),
            )
        )
    if seq.data_type != "bigint":
        steps.append(
            review(
                f"ALTER SEQUENCE {qualified(seq.schema, seq.name)} AS bigint;",
                "SHARE ROW EXCLUSIVE",
                note="raises its maximum to bigint's when it was integer's",
            )
        )
    return Fix(
        notes=(
            "Run in a maintenance window, or the online way: add a bigint column, fill it "
            "in batches by id range, keep new rows filled (a trigger or a DEFAULT of the "
            "sequence), build a unique index on it CONCURRENTLY, then swap the columns and "
            "the primary key in one short transaction. Columns of other tables that hold "
            "this id (foreign keys, job references) need the same widening; qadvisor does "
            "not list them."
        ),
        safety="review",
        steps=tuple(steps),
    )
