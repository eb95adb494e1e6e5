"""A partitioned queue table's facts from its partitions': one table, judged as one queue.

A partitioned table holds no rows, no pages and no counters of its own; its leaf partitions
do, each with its own autovacuum, reloptions, statistics and indexes (an index declared on
the parent is one index per leaf, attached to the parent's). The queue is the parent: the
claim names it and locks its rows through it. So the parent's facts are its leaves', summed:

- reltuples, relpages, sizes and every counter of pg_stat_all_tables added up (a leaf never
  analyzed, reltuples -1, counts as empty, as autovacuum counts it); the times of the last
  VACUUM and ANALYZE are the latest of any leaf's;
- each index declared on the parent: its leaves' indexes attached to it, sizes, reltuples
  and scans added up;
- pg_stats: the leaves' rows merged, weighted by their reltuples (autoanalyze keeps them
  current; it never analyzes the parent itself), where every leaf that holds rows has one
  for the column; else the parent's own (inherited) row, which only a manual ANALYZE of the
  parent writes, when there is one.

The partitions stay in ``Table.partitions`` with their own facts: autovacuum and retention
work per partition, and the checks that judge them read them there.

Pure: the collector reads the rows, this module adds them up.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import fields, replace

from qadvisor.model import ColumnStats, Index, Table, TableStats

# pg_stats keeps at most default_statistics_target (100) common values per column: merged,
# the most common of the leaves' lists stand for the table as one list would.
MAX_COMMON_VALUES = 100

_TIMES = ("last_vacuum", "last_autovacuum", "last_analyze", "last_autoanalyze")


def fold(table: Table, partitions: Sequence[Table], unread: Collection[str] = ()) -> Table:
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
    if not parts and not missing:
        return idx
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
