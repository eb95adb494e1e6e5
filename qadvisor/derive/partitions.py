"""The partitions of a partitioned queue table, as the checks judge them.

A partitioned queue is one queue (its facts are its partitions' summed), but autovacuum, the
write path and retention work per partition: autovacuum vacuums each partition on its own
trigger, from its own reltuples and reloptions; the rows a worker updates are in the
partitions that hold the live set and take the new jobs; and a table partitioned by time
keeps its history as old partitions, which go whole. Pure: partitions come from the
snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from qadvisor.derive.estimates import LiveEstimate, live_rows
from qadvisor.model import LivePredicate, Table
from qadvisor.sql.partitions import is_default, list_values, partition_key, range_bound

# Column types a range partition on time is keyed by (format_type's spelling).
TIME_TYPES = ("timestamp with time zone", "timestamp without time zone", "date")


@dataclass(frozen=True)
class TimePartition:
    """A leaf partition of a range on one time column: its bounds as moments (the upper one
    exclusive; None where unbounded), and the table it is a partition of."""

    table: Table
    parent: str  # "schema.table" it is a partition of (the queue table, or a level below)
    column: str
    lower: datetime | None
    upper: datetime | None


def time_partitions(table: Table, now: datetime) -> list[TimePartition]:
    """The leaves of ``table`` whose partitioned table is a range on one date or timestamp
    column, oldest first. A bound without a time zone (a date, a timestamp) is read in the
    time zone of ``now`` (the server's clock as the snapshot read it)."""
    keys = {table.qualified: table.partition_key}
    keys |= {p.qualified: p.partition_key for p in table.partitions if p.partition_key}
    out = []
    for leaf in table.leaves:
        key = partition_key(keys.get(leaf.partition_of or ""))
        if key is None or key.strategy != "range" or len(key.columns) != 1:
            continue
        (column,) = key.columns
        col = table.column(column) if column is not None else None
        bound = range_bound(leaf.partition_bound)
        if col is None or col.type not in TIME_TYPES or bound is None:
            continue
        lower, upper = _moment(bound.lower, now), _moment(bound.upper, now)
        out.append(TimePartition(leaf, leaf.partition_of or "", col.name, lower, upper))
    return sorted(out, key=lambda p: (p.lower is not None, p.lower or now, p.table.name))


def single_valued(table: Table, partition: str) -> frozenset[str]:
    """The columns that hold one value in every row of ``partition`` (a partition's name, a
    leaf of ``table``): the key of a list partition with one value, at any level above it
    (``jobs_mail FOR VALUES IN ('mail')`` under ``LIST (queue)``). A scan of it filters
    such a column without discarding any row for it."""
    by_name = {p.qualified: p for p in table.partitions}
    keys = {table.qualified: table.partition_key} | {
        q: p.partition_key for q, p in by_name.items() if p.partition_key
    }
    found: set[str] = set()
    node = next((p for p in table.partitions if p.name == partition), None)
    while node is not None and node.partition_of is not None:
        key = partition_key(keys.get(node.partition_of))
        values = list_values(node.partition_bound)
        if key is not None and key.strategy == "list" and len(key.columns) == 1:
            (column,) = key.columns
            if column is not None and values is not None and len(values) == 1:
                found.add(column)
        node = by_name.get(node.partition_of)
    return frozenset(found)


def _moment(text: str | None, now: datetime) -> datetime | None:
    """A bound's value as a moment; None for an unbounded one (MINVALUE, MAXVALUE, infinity)
    or one Python cannot hold (a BC date)."""
    if text is None or text.lstrip("-") == "infinity":
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=now.tzinfo)


@dataclass(frozen=True)
class Writing:
    """A partition that takes writes, and why it is counted as one."""

    table: Table
    live: LiveEstimate
    why: str


def writing_partitions(
    table: Table, live: LivePredicate | None, now: datetime | None
) -> list[Writing]:
    """The leaves of a partitioned queue table that take writes: those written since their
    last VACUUM or ANALYZE (dead tuples, rows changed or inserted since), those that hold
    live rows (workers update them), and of a range on time the one whose range holds
    ``now`` (new jobs land there). The others are cold: what autovacuum and the write path
    do to them is done."""
    current = set()
    if now is not None:
        current = {
            p.table.qualified
            for p in time_partitions(table, now)
            if (p.lower is None or p.lower <= now) and (p.upper is None or now < p.upper)
        }
    out = []
    for leaf in table.leaves:
        est = live_rows(leaf, live)
        s = leaf.stats
        why = []
        if est.rows:
            why.append(f"it holds {est.rows:,.0f} live rows")
        if s.n_dead_tup or s.n_mod_since_analyze or s.n_ins_since_vacuum:
            why.append(
                f"{s.n_dead_tup:,} dead tuples, {s.n_mod_since_analyze:,} rows changed since "
                f"its last ANALYZE, {s.n_ins_since_vacuum:,} inserted since its last VACUUM"
            )
        if leaf.qualified in current:
            why.append("its range holds the present, where new jobs land")
        if why:
            out.append(Writing(leaf, est, "; ".join(why)))
    return out


def default_partition(table: Table, parent: str | None = None) -> Table | None:
    """The DEFAULT partition directly under ``parent`` ("schema.table": the queue table
    ``table`` itself, or a partitioned partition of it), if it has one."""
    under = parent or table.qualified
    return next(
        (p for p in table.partitions if p.partition_of == under and is_default(p.partition_bound)),
        None,
    )
