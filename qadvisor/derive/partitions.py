"""The partitions of a partitioned queue table, as the checks judge them.

A partitioned queue is one queue (its facts are its partitions' summed), but autovacuum, the
write path and retention work per partition: autovacuum vacuums each partition on its own
trigger, from its own reltuples and reloptions; the rows a worker updates are in the
partitions that hold the live set and take the new jobs; and a table partitioned by time
keeps its history as old partitions, which go whole. Pure: partitions come from the
snapshot.

A partitioned table holds no rows, no pages and no counters of its own; its leaf partitions
do. So its facts are its leaves', summed (``sum_partitions``): reltuples, relpages, sizes
and every counter of pg_stat_all_tables added up (a leaf never analyzed, reltuples -1,
counts as empty, as autovacuum counts it), the times of the last VACUUM and ANALYZE the
latest of any leaf's; each index declared on it with its leaves' indexes attached to it,
sizes, reltuples and scans added up; pg_stats the leaves' rows merged, weighted by their
reltuples (autoanalyze keeps them current; it never analyzes the partitioned table itself),
where every leaf that holds rows has one for the column, else the partitioned table's own
(inherited) row, which only a manual ANALYZE of it writes. The collector sums what it read;
a check sums the partitions it judges (those that take writes) the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime

from qadvisor.derive.estimates import LiveEstimate, live_rows
from qadvisor.model import ColumnStats, Index, LivePredicate, Table, TableStats
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
    """A partition, why it is counted as taking writes (empty: it is not known to), and its
    live rows."""

    table: Table
    live: LiveEstimate
    why: str


@dataclass(frozen=True)
class Writes:
    """A partitioned table's leaves as the write path sees them: those that take writes,
    and those that show none but whose live rows are unknown (hidden statistics, never
    analyzed), of which it cannot be said that no worker will write them."""

    writing: tuple[Writing, ...]
    unknown: tuple[Writing, ...]


def writing_partitions(table: Table, live: LivePredicate | None, now: datetime | None) -> Writes:
    """The leaves of a partitioned queue table that take writes: those written since their
    last VACUUM or ANALYZE (dead tuples, rows changed or inserted since), those that hold
    live rows (workers update them), and of a range on time the one whose range holds
    ``now`` (new jobs land there). The others are cold: what autovacuum and the write path
    do to them is done, unless their live rows are unknown (``Writes.unknown``)."""
    current = set()
    if now is not None:
        current = {
            p.table.qualified
            for p in time_partitions(table, now)
            if (p.lower is None or p.lower <= now) and (p.upper is None or now < p.upper)
        }
    writing, unknown = [], []
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
            writing.append(Writing(leaf, est, "; ".join(why)))
        elif est.rows is None and live is not None:
            unknown.append(Writing(leaf, est, ""))
    return Writes(tuple(writing), tuple(unknown))


def default_partition(table: Table, parent: str | None = None) -> Table | None:
    """The DEFAULT partition directly under ``parent`` ("schema.table": the queue table
    ``table`` itself, or a partitioned partition of it), if it has one."""
    under = parent or table.qualified
    return next(
        (p for p in table.partitions if p.partition_of == under and is_default(p.partition_bound)),
        None,
    )


# --- a partitioned table's facts from its partitions' -------------------------------------

# pg_stats keeps at most default_statistics_target (100) common values per column: merged,
# the most common of the leaves' lists stand for the table as one list would.
MAX_COMMON_VALUES = 100

_TIMES = ("last_vacuum", "last_autovacuum", "last_analyze", "last_autoanalyze")


def sum_partitions(
    table: Table, partitions: Sequence[Table], unread: Collection[str] = ()
) -> Table:
    """``table`` (a partitioned table, as read) with its leaves' facts summed into it and
    every partition below it in ``partitions``; ``unread``: the partitions ("schema.table")
    whose indexes were not read (another session's lock)."""
    leaves = [p for p in partitions if p.partition_key is None]
    known = [p.reltuples for p in leaves if p.reltuples >= 0]
    estimated = [p for p in leaves if p.bytes_source is not None]
    return replace(
        table,
        reltuples=sum(known) if known or not leaves else -1.0,
        relpages=sum(p.relpages for p in leaves),
        bytes=sum(p.bytes for p in leaves),
        bytes_source=(
            f"{len(estimated)} of its {len(leaves)} partitions: {estimated[0].bytes_source}"
            if estimated
            else None
        ),
        stats=sum_stats([p.stats for p in leaves]),
        indexes=tuple(_index(idx, leaves, unread) for idx in table.indexes),
        column_stats=_column_stats(table, leaves),
        partitions=tuple(partitions),
    )


def sum_stats(stats: Sequence[TableStats]) -> TableStats:
    """Counters added up; each time the latest of them."""
    values: dict[str, object] = {}
    for f in fields(TableStats):
        if f.name in _TIMES:
            times = [t for s in stats if (t := getattr(s, f.name))]
            values[f.name] = max(times) if times else None
        else:
            values[f.name] = sum(getattr(s, f.name) for s in stats)
    return TableStats(**values)  # type: ignore[arg-type]


def _index(idx: Index, leaves: Sequence[Table], unread: Collection[str]) -> Index:
    """The parent's index with its leaves' indexes (those attached to it) summed in."""
    parts = [i for leaf in leaves for i in leaf.indexes if i.partition_of == idx.name]
    missing = [leaf.name for leaf in leaves if leaf.qualified in unread]
    scans = [i.idx_scan for i in parts if i.idx_scan is not None]
    read = [i.idx_tup_read for i in parts if i.idx_tup_read is not None]
    fetched = [i.idx_tup_fetch for i in parts if i.idx_tup_fetch is not None]
    estimated = [i for i in parts if i.bytes_source is not None]
    source = None
    if estimated:
        source = f"{len(estimated)} of its {len(parts)} partitions: {estimated[0].bytes_source}"
    if missing:
        unread_text = f"the indexes of {', '.join(missing[:3])}" + (
            f" and {len(missing) - 3} more partitions" if len(missing) > 3 else ""
        )
        said = f"without {unread_text}, which another session's lock kept from being read"
        source = f"{source}; {said}" if source else said
    return replace(
        idx,
        bytes=sum(i.bytes for i in parts),
        reltuples=sum(max(i.reltuples, 0.0) for i in parts),
        idx_scan=sum(scans) if scans else None,
        idx_tup_read=sum(read) if read else None,
        idx_tup_fetch=sum(fetched) if fetched else None,
        bytes_source=source,
    )


def _column_stats(table: Table, leaves: Sequence[Table]) -> tuple[ColumnStats, ...]:
    """Each column's statistics: the leaves' merged where every leaf with rows has them,
    else the parent's own."""
    holding = [leaf for leaf in leaves if leaf.reltuples > 0]
    out = []
    for column in table.columns:
        rows = [leaf.stats_of(column.name) for leaf in holding]
        present = [(leaf, s) for leaf, s in zip(holding, rows, strict=True) if s is not None]
        if present and len(present) == len(holding):
            out.append(merge_column_stats(column.name, present))
        elif (own := table.stats_of(column.name)) is not None:
            out.append(own)
    return tuple(out)


def merge_column_stats(column: str, parts: Sequence[tuple[Table, ColumnStats]]) -> ColumnStats:
    """One column's statistics over several partitions, each weighted by its reltuples: a
    value's share is the rows the partitions' common-value lists give it (a value missing
    from a partition's list counts as none there: ANALYZE saw too few to list it), its
    null fraction and width likewise; the distinct values are the most any partition has
    when each counts them (a status's few values recur in every partition), else their sum
    as a share of the rows (ids differ between partitions); the bounds are the widest."""
    total = sum(t.reltuples for t, _ in parts) or 1.0
    weighted = [(t.reltuples / total, s) for t, s in parts]
    stats = [s for _, s in parts]
    common: dict[str, float] = {}
    listed = False
    for w, s in weighted:
        if s.most_common_vals is None or s.most_common_freqs is None:
            continue
        listed = True
        for value, freq in zip(s.most_common_vals, s.most_common_freqs, strict=False):
            common[value] = common.get(value, 0.0) + freq * w
    ranked = sorted(common.items(), key=lambda kv: -kv[1])[:MAX_COMMON_VALUES]
    if all(s.n_distinct >= 0 for s in stats):
        distinct = max(s.n_distinct for s in stats)
    else:
        counted = sum(
            s.n_distinct if s.n_distinct >= 0 else -s.n_distinct * t.reltuples for t, s in parts
        )
        distinct = -min(counted / total, 1.0)
    return ColumnStats(
        column=column,
        null_frac=sum(s.null_frac * w for w, s in weighted),
        n_distinct=distinct,
        avg_width=round(sum(s.avg_width * w for w, s in weighted)),
        most_common_vals=tuple(v for v, _ in ranked) if listed else None,
        most_common_freqs=tuple(f for _, f in ranked) if listed else None,
        upper_bound=_bound(max, [s.upper_bound for s in stats]),
        lower_bound=_bound(min, [s.lower_bound for s in stats]),
    )


def _bound(pick: Callable[..., str], values: Sequence[str | None]) -> str | None:
    """The widest of the partitions' bounds: integers compared as numbers, times (ISO text,
    all printed alike) as text."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    try:
        numbers = [int(v) for v in known]
    except ValueError:
        return str(pick(known))
    return str(pick(numbers))
