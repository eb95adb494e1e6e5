"""Which column dates a queue table's finished rows, and how old the oldest of them is.

The oldest finished row is read from the planner's statistics (the smallest value ANALYZE saw
of a timestamp column, its first histogram bound or its least common value), never from a
scan of the archive. A finish timestamp (``finished_at``, ``completed_on``, ...) dates the
finished rows themselves; without one, a creation timestamp (``created_at``, ...) dates the
oldest row of any state, which on a table that is mostly archive is a finished one. A queue
whose live predicate is one timestamp being NULL (pq's ``dequeued_at IS NULL``) sets that
timestamp when a row leaves the live set: whatever its name, it dates the rows that left,
and comes before a creation timestamp. A column of those names that holds epoch seconds or
milliseconds in an integer (DBOS's ``completed_at bigint``) dates rows too, when the smallest
value ANALYZE saw of it reads as a date in this century in one of those units. Without either,
a timestamp that a recorded UPDATE sets together with the live column (a broker's delivery,
``SET visible = $1, timestamp = $2``) is the time of a row's last move, out of the live set
for the rows outside it: it dates them, whatever its name, when it is the only timestamp such
updates set and ANALYZE saw it hold a value (one NULL in every sampled row is cleared again
when a row finishes). It is set on waiting rows too (when they are sent), so the rows it
dates are told apart by the live predicate. Pure: shared by the check and by the collector, which
records a hidden column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from qadvisor.derive.hot_updates import RecordedUpdate
from qadvisor.model import LivePredicate, Table
from qadvisor.sql.printing import predicate_sql

# Words queue libraries name a finish or a creation timestamp with (good_job and Solid
# Queue's finished_at, Oban's completed_at, River's finalized_at, pg-boss's completed_on and
# created_on, Oban's inserted_at, django-tasks' enqueued_at), each with the suffixes they take.
_FINISH_STEMS = ("finished", "completed", "finalized", "done", "processed")
_CREATION_STEMS = ("created", "inserted", "enqueued")
_SUFFIXES = ("_at", "_on", "")
Kind = Literal["finish", "creation"]
Epoch = Literal["s", "ms"]  # seconds or milliseconds since the epoch
_DATE_TYPES = ("timestamp with time zone", "timestamp without time zone", "date")
_EPOCH_TYPES = ("integer", "bigint")
# Smallest values ANALYZE may see of an epoch column in each unit: 2001-09-09 onwards, up to
# 2286. A count, a duration or an id is far outside both ranges.
_EPOCH_UNITS: tuple[tuple[Epoch, int, int], ...] = (("s", 10**9, 10**10), ("ms", 10**12, 10**13))


@dataclass(frozen=True)
class DatingColumn:
    name: str
    kind: Kind
    type: str  # format_type of the column
    # Why it dates the finished rows when its name does not say so: the live predicate.
    from_live: str | None = None
    # An integer of seconds or milliseconds since the epoch ("s", "ms"); None for a timestamp.
    epoch: Epoch | None = None
    # The live predicate (SQL) when the column is set on waiting rows too: the rows it dates
    # are those the predicate does not hold for.
    unless_live: str | None = None

    def since(self, interval: str) -> str:
        """SQL for the moment ``interval`` ago in this column's own terms."""
        if self.epoch is None:
            return f"now() - interval '{interval}'"
        scale = " * 1000" if self.epoch == "ms" else ""
        return f"(extract(epoch FROM now() - interval '{interval}'){scale})::bigint"

    def moment(self, bound: str) -> datetime | None:
        """The collector's lower bound of this column as a moment (UTC); None when it is
        none."""
        if self.epoch is None:
            return parse_bound(bound)
        try:
            value = int(bound)
        except ValueError:
            return None
        return datetime.fromtimestamp(value / (1000 if self.epoch == "ms" else 1), tz=UTC)

    @property
    def has_time_zone(self) -> bool:
        return self.type == "timestamp with time zone"


def dating_column(
    table: Table, live: LivePredicate | None = None, updates: Sequence[RecordedUpdate] = ()
) -> DatingColumn | None:
    """The timestamp that dates the table's finished rows: a finish column (in the order of
    the stems above), else the timestamp whose NULL is the whole ``live`` predicate, else the
    one timestamp the recorded ``updates`` (hot_updates.recorded_updates) set with the live
    column, else a creation column; None when the table has none of them."""
    types = {c.name: c.type for c in table.columns}
    found = _named(table, types, "finish", _FINISH_STEMS)
    if found is not None:
        return found
    if live is not None and live.op == "is null" and types.get(live.column) in _DATE_TYPES:
        return DatingColumn(
            live.column,
            "finish",
            types[live.column],
            from_live=f"the live predicate is {live.column} IS NULL",
        )
    moved = _set_with_live(types, live, updates)
    if moved is not None and not _seen_only_null(table, moved.name):
        return moved
    return _named(table, types, "creation", _CREATION_STEMS)


def _set_with_live(
    types: dict[str, str], live: LivePredicate | None, updates: Sequence[RecordedUpdate]
) -> DatingColumn | None:
    """The one timestamp the recorded updates that set the live column set with it."""
    if live is None or not live.columns:
        return None
    found: dict[str, RecordedUpdate] = {}
    for update in updates:
        if not set(update.columns) & set(live.columns):
            continue
        for name in update.columns:
            if name not in live.columns and types.get(name) in _DATE_TYPES:
                found.setdefault(name, update)
    if len(found) != 1:
        return None  # none, or several: which of them a finished row last got is unknown
    ((name, update),) = found.items()
    moved = " and ".join(live.columns)
    return DatingColumn(
        name,
        "finish",
        types[name],
        from_live=f"{update.label} sets it with {moved}",
        unless_live=predicate_sql(live),
    )


def _seen_only_null(table: Table, column: str) -> bool:
    """True when ANALYZE sampled the column and saw NULL in every row: the rows that left the
    live set do not keep the time an update set (graphile-worker's failed jobs clear
    ``locked_at``), so it dates none of them."""
    stats = table.stats_of(column)
    return stats is not None and stats.lower_bound is None


def _named(
    table: Table, types: dict[str, str], kind: Kind, stems: tuple[str, ...]
) -> DatingColumn | None:
    for name in _names(stems):
        if types.get(name) in _DATE_TYPES:
            return DatingColumn(name, kind, types[name])
        if types.get(name) in _EPOCH_TYPES:
            unit = _epoch_unit(table, name)
            if unit is not None:
                return DatingColumn(name, kind, types[name], epoch=unit)
    return None


def _names(stems: tuple[str, ...]) -> list[str]:
    """The column names the stems take, in order of preference."""
    return [stem + suffix for stem in stems for suffix in _SUFFIXES]


def unproven_epoch_columns(table: Table) -> list[str]:
    """Integer columns of the finish or creation names whose statistics are not there to
    say whether they hold epoch seconds or milliseconds (pg_stats shows a column only to
    roles that may read it), finish names first."""
    types = {c.name: c.type for c in table.columns}
    return [
        name
        for name in _names((*_FINISH_STEMS, *_CREATION_STEMS))
        if types.get(name) in _EPOCH_TYPES and table.stats_of(name) is None
    ]


def _epoch_unit(table: Table, column: str) -> Epoch | None:
    """ "s" or "ms" when the smallest value ANALYZE saw of an integer column reads as a moment
    since 2001 in that unit; None otherwise (or without statistics)."""
    stats = table.stats_of(column)
    if stats is None or stats.lower_bound is None:
        return None
    try:
        value = int(stats.lower_bound)
    except ValueError:
        return None
    return next((unit for unit, low, high in _EPOCH_UNITS if low <= value < high), None)


def parse_bound(text: str) -> datetime | None:
    """A lower bound as the collector reads it (UTC, PostgreSQL's text form); None for a
    value that is no date (``-infinity``)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
