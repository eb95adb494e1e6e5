"""Earlier snapshots of the same database, as facts beside the new one (--history): which may
be measured against it, what each read of the queue tables, and the rates and series measured
between them.

A counter of pg_stat_user_tables is a count since the statistics were last reset, so a rate is
the difference of two readings over the time between them, and it means something only while
the counters ran on from one reading to the next: the same cluster (its system identifier)
and the same database (its OID and name), no restart between (a crash resets the counters; a
clean stop on PostgreSQL 14 too) and no reset of the statistics. A snapshot that fails one of
those is not mixed in, and says why. A table whose counter went backwards between two
readings was reset on its own (pg_stat_reset_single_table_counters, or dropped and created
again): no rate is measured across that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from qadvisor.derive.estimates import Rates, rates_between, vacuum_trigger
from qadvisor.model import Earlier, History, NotMixedIn, Reading, Snapshot, Table, TableStats
from qadvisor.units import human_seconds


def reading(snapshot: Snapshot, table: Table) -> Reading:
    """What a snapshot read of a queue table, as history keeps it."""
    return Reading(
        reltuples=table.reltuples,
        bytes=table.bytes,
        stats=table.stats,
        index_bytes={i.name: i.bytes for i in table.indexes},
        id_values={
            s.qualified: s.last_value
            for s in table.id_sequences
            if s.readable and s.last_value is not None
        },
        vacuum_trigger=vacuum_trigger(snapshot, table).value,
    )


def earlier(snapshot: Snapshot, source: str) -> Earlier:
    """An earlier snapshot reduced to the readings of its queue tables."""
    tables = {}
    for q in snapshot.queues:
        t = snapshot.table(q.schema, q.table)
        if t is not None:
            tables[t.qualified] = reading(snapshot, t)
    return Earlier(source, snapshot.server.collected_at or "", tables)


def not_comparable(old: Snapshot, new: Snapshot) -> str | None:
    """Why ``old``'s counters do not run on into ``new``'s; None when they do."""
    a, b = old.server, new.server
    if a.system_identifier is None or a.database_oid is None or a.started_at is None:
        return "it does not say which cluster and server start it was read from (an older qadvisor)"
    if b.system_identifier is None or b.database_oid is None or b.started_at is None:
        return "this snapshot does not say which cluster and server start it was read from"
    if a.system_identifier != b.system_identifier:
        return f"another cluster (system identifier {a.system_identifier})"
    if a.database_oid != b.database_oid or a.database != b.database:
        return f"another database ({a.database}, OID {a.database_oid})"
    if a.started_at != b.started_at:
        return f"the server restarted since (it had started at {a.started_at})"
    if a.stats_reset != b.stats_reset:
        return f"this database's statistics were reset since (at {b.stats_reset})"
    if not a.collected_at or not b.collected_at or _at(a.collected_at) >= _at(b.collected_at):
        return "it was not read before this snapshot"
    return None


def history(new: Snapshot, directory: str, found: Sequence[tuple[str, Snapshot | str]]) -> History:
    """The history of ``new`` from the snapshots found in the directory (name, snapshot or
    why it could not be read), oldest first."""
    kept: list[tuple[datetime, Earlier]] = []
    left: list[NotMixedIn] = []
    for source, snap in found:
        why = snap if isinstance(snap, str) else not_comparable(snap, new)
        if why is not None or isinstance(snap, str):
            left.append(NotMixedIn(source, why or ""))
            continue
        kept.append((_at(snap.server.collected_at or ""), earlier(snap, source)))
    kept.sort(key=lambda pair: pair[0])
    return History(directory, tuple(e for _, e in kept), tuple(left))


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# The source of the reading --sample adds (counters only).
SAMPLED = "the second read of --sample"


@dataclass(frozen=True)
class Point:
    """A queue table's reading at one moment: from --history, the snapshot itself, or the
    second read of --sample (counters only)."""

    at: datetime
    reading: Reading
    source: str


def readings(snapshot: Snapshot, table: Table) -> list[Point]:
    """The readings of a table over time, oldest first: the earlier snapshots of --history
    whose counters run on into this one's, this snapshot, and the second read of --sample."""
    out: list[Point] = []
    if snapshot.history is not None:
        for e in snapshot.history.earlier:
            r = e.tables.get(table.qualified)
            if r is not None and e.collected_at:
                out.append(Point(_at(e.collected_at), r, e.source))
    if snapshot.server.collected_at is None:
        return out
    now = _at(snapshot.server.collected_at)
    here = reading(snapshot, table)
    out.append(Point(now, here, "this snapshot"))
    sample = snapshot.sample
    later = sample.tables.get(table.qualified) if sample is not None else None
    if sample is not None and later is not None:
        # Counters only: sizes, ids and the trigger are not read again.
        then = replace(here, stats=later)
        later_at = now + timedelta(seconds=sample.seconds)
        out.append(Point(later_at, then, SAMPLED))
    return _unbroken(out)


def _unbroken(readings: list[Point]) -> list[Point]:
    """The readings since the last one whose counters went backwards (the table's counters
    were reset on their own between them)."""
    start = 0
    for i in range(1, len(readings)):
        if _went_back(readings[i - 1].reading.stats, readings[i].reading.stats):
            start = i
    return readings[start:]


def _went_back(a: TableStats, b: TableStats) -> bool:
    return any(getattr(b, c) < getattr(a, c) for c in ("n_tup_ins", "n_tup_upd", "n_tup_del"))


def interval(snapshot: Snapshot, table: Table) -> tuple[Point, Point, int] | None:
    """The longest interval --history measured for the table: its first reading after the
    last break, this snapshot's, and how many readings lie between them (both included);
    None without an earlier snapshot."""
    readings_ = [p for p in readings(snapshot, table) if p.source != SAMPLED]
    if len(readings_) < 2:
        return None
    return readings_[0], readings_[-1], len(readings_)


def history_rates(snapshot: Snapshot, table: Table) -> Rates | None:
    """The table's rates between its first reading in --history and this snapshot."""
    span = interval(snapshot, table)
    if span is None:
        return None
    first, last, n = span
    seconds = (last.at - first.at).total_seconds()
    if seconds <= 0:
        return None
    source = (
        f"the {human_seconds(seconds)} since the snapshot of {first.at.isoformat()} "
        f"(--history, {n} readings)"
    )
    return rates_between(first.reading.stats, last.reading.stats, seconds, source, True)


def series(
    snapshot: Snapshot,
    table: Table,
    *,
    sampled: bool = True,
    **figures: Callable[[Reading], float | int | None],
) -> list[dict[str, object]]:
    """A table's figures at each reading, as evidence holds them (``{"at": ISO, name:
    value}``), oldest first; readings that lack a figure are left out, and so is the
    second read of --sample unless ``sampled`` (it reads counters only). Empty for fewer
    than two readings: a series of one shows no change."""
    out: list[dict[str, object]] = []
    for p in readings(snapshot, table):
        if p.source == SAMPLED and not sampled:
            continue
        values = {name: get(p.reading) for name, get in figures.items()}
        if any(v is None for v in values.values()):
            continue
        out.append({"at": p.at.isoformat(), **values})
    return out if len(out) >= 2 else []


def per_day(points: Sequence[dict[str, object]], figure: str) -> float | None:
    """How much a figure of a series changed a day between its first and last reading."""
    if len(points) < 2:
        return None
    first, last = points[0], points[-1]
    days = (_at(str(last["at"])) - _at(str(first["at"]))).total_seconds() / 86400
    a, b = first[figure], last[figure]
    if days <= 0 or not isinstance(a, int | float) or not isinstance(b, int | float):
        return None
    return (b - a) / days


def index_growth(snapshot: Snapshot, table: Table, index: str) -> dict[str, object]:
    """An index's size at each --history snapshot and how much it grew a day between the
    first and this one, as evidence fields; none without an earlier snapshot that read it."""
    sizes = series(snapshot, table, sampled=False, index_bytes=lambda r: r.index_bytes.get(index))
    grew = per_day(sizes, "index_bytes")
    if grew is None:
        return {}
    return {
        "index_bytes_series": sizes,
        "index_growth_per_day_bytes": round(grew),
        "index_growth_from": (
            f"between the snapshot of {sizes[0]['at']} and this one (--history, "
            f"{len(sizes)} readings)"
        ),
    }
