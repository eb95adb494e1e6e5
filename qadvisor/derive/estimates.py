"""Numbers derived from a snapshot that several checks share: live set, vacuum trigger, sizes.

Everything here is a pure function of snapshot data; none of it reads a table.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from qadvisor.derive.predicates import operand_values
from qadvisor.derive.states import archived, status_like
from qadvisor.model import (
    ColumnStats,
    Index,
    LivePredicate,
    Snapshot,
    Table,
    TableStats,
    live_op,
)
from qadvisor.sql.dequeue import Predicate, StatementError, condition_predicates
from qadvisor.sql.printing import RANGE_OPS, qualified
from qadvisor.units import human_share, nice_round

PAGE_BYTES = 8192
# A btree page keeps 24 bytes of page header and 16 of btree special space.
_BTREE_USABLE = PAGE_BYTES - 24 - 16
# CREATE INDEX fills btree leaves to 90 % (the default fillfactor for btree).
_BTREE_FILL = 0.90

_TYPE_WIDTH = {
    "boolean": 1,
    "smallint": 2,
    "integer": 4,
    "bigint": 8,
    "date": 4,
    "real": 4,
    "double precision": 8,
    "timestamp with time zone": 8,
    "timestamp without time zone": 8,
    "uuid": 16,
    "oid": 4,
}


@dataclass(frozen=True)
class LiveBound:
    """At most how many rows are live now, from what the statistics do know when they cannot
    count the live set: the archive's share of the rows ANALYZE saw (the common values that
    read as finished, or the rows whose finish time is set) leaves at most ``at_analyze``
    rows that were not finished then, and every row that became live since is among the
    ``changed`` rows inserted, updated or deleted since."""

    rows: float
    at_analyze: float
    changed: int
    source: str  # where the archive's share came from

    @property
    def text(self) -> str:
        """The bound in words, for a message."""
        return (
            f"at most {self.rows:,.0f} ({self.at_analyze:,.0f} not finished when ANALYZE ran, "
            f"by {self.source}, plus the {self.changed:,} rows changed since)"
        )


@dataclass(frozen=True)
class LiveEstimate:
    rows: float | None
    source: str  # how it was estimated, or why it could not be
    fraction: float | None = None
    # Said when the statistics are older than the table's changes since: more rows were
    # inserted, updated or deleted since its last ANALYZE than the estimate holds.
    stale: str = ""
    # With stale statistics, at most how many rows are live now (None: nothing bounds them).
    bound: LiveBound | None = None

    @property
    def known(self) -> bool:
        return self.rows is not None


# A pure function of the text, and databases repeat one text in many tables' partial indexes
# (``(status = 'active'::text)`` in a thousand tables): each is parsed once a run.
@lru_cache(maxsize=4096)
def parse_index_predicate(predicate: str) -> LivePredicate | None:
    """Read ``pg_get_expr`` output of a partial index into a live predicate, when it is one.

    One condition on one column: ``(status = 'x'::type)``, ``((status)::text = 'x'::text)``,
    ``(status = ANY (ARRAY['a'::text, 'b'::text]))``, ``status IN (...)``, ``<>`` / ``NOT IN``,
    ``(col IS NULL)``, a boolean column or its ``NOT``, or an enum range ``(state <
    'active'::job_state)``. Anything else (several conjuncts, functions, parameters) is not a
    simple live predicate. Parsed with the statement parser, not pattern-matched.
    """
    try:
        conditions = condition_predicates(predicate)
    except StatementError:
        return None
    if len(conditions) != 1:
        return None
    (pred,) = conditions
    if pred.op in ("is null", "true", "false"):
        return LivePredicate(pred.column, pred.op)
    flag = boolean_literal(pred)
    if flag is not None:
        return LivePredicate(pred.column, flag)
    values = operand_values(pred, {})
    if not values:
        return None
    op = live_op(pred.op)
    if op in ("in", "not in"):
        return LivePredicate(pred.column, op, tuple(dict.fromkeys(values)))
    if op in RANGE_OPS and len(values) == 1:
        return LivePredicate(pred.column, op, values)
    return None


def boolean_literal(pred: Predicate) -> Literal["true", "false"] | None:
    """``flag = true`` (``flag <> false``) as "true", ``flag = false`` as "false"; None for any
    other condition. PostgreSQL keeps an index predicate as written, ``= true`` included."""
    if pred.op not in ("=", "<>") or len(pred.operands) != 1:
        return None
    operand = pred.operands[0]
    word = operand.text.strip().lower()
    if operand.kind != "literal" or word not in ("true", "false"):
        return None
    return "true" if (word == "true") == (pred.op == "=") else "false"


def same_predicate(a: LivePredicate, b: LivePredicate) -> bool:
    if a.op == "or" or b.op == "or":
        return (
            a.op == b.op
            and len(a.parts) == len(b.parts)
            and all(any(same_predicate(p, q) for q in b.parts) for p in a.parts)
        )
    return a.column == b.column and a.op == b.op and set(a.values) == set(b.values)


def live_index(table: Table, live: LivePredicate) -> Index | None:
    """A valid partial index whose predicate is exactly the live predicate (none when the
    whole table is the live set: no partial index holds it)."""
    if live.whole_table:
        return None
    for idx in table.indexes:
        if idx.is_valid and idx.predicate:
            parsed = parse_index_predicate(idx.predicate)
            if parsed and same_predicate(parsed, live):
                return idx
    return None


def live_rows(table: Table, live: LivePredicate | None) -> LiveEstimate:
    """Rows in the live set, from statistics only (a count would read the whole archive)."""
    if live is None:
        return LiveEstimate(None, "no live predicate is known for this table")
    if table.reltuples < 0:
        return LiveEstimate(None, "the table has never been analyzed (reltuples = -1)")
    if live.whole_table:
        return LiveEstimate(
            table.reltuples, "reltuples of the table: the claim takes any of its rows", 1.0
        )
    if live.op == "or":
        return _union_estimate(table, live)
    idx = live_index(table, live)
    by_stats = _stats_estimate(table, live)
    # Every ANALYZE (alone, in VACUUM ANALYZE or autovacuum's) re-estimates a partial index's
    # entries from the sample pg_stats comes from, and a VACUUM that scans the index counts
    # them exactly: the live-set index's reltuples is never older than pg_stats.
    if idx is not None and idx.reltuples >= 0:
        frac = idx.reltuples / table.reltuples if table.reltuples > 0 else None
        source = f"reltuples of partial index {idx.name}{_as_of(table, vacuum=True)}"
        other = by_stats.rows
        if other is not None and not _agree(idx.reltuples, other):
            source += f"; pg_stats of {live.column} says {other:,.0f}"
        return _with_bound(table, live, LiveEstimate(idx.reltuples, source, frac))
    if by_stats.rows is not None:
        return _with_bound(table, live, by_stats)
    return by_stats


def _with_bound(table: Table, live: LivePredicate, est: LiveEstimate) -> LiveEstimate:
    """The estimate, said to be stale (with the bound on the live set now) when more rows
    changed since the last ANALYZE than it holds."""
    stale = _stale(table, est.rows or 0.0)
    if not stale:
        return est
    return dataclasses.replace(est, stale=stale, bound=live_bound(table, live))


def live_bound(table: Table, live: LivePredicate | None) -> LiveBound | None:
    """At most how many rows are live now, from the archive's share alone (see LiveBound);
    without a live predicate, from the status-like column whose finished values hold the
    most rows. None when no statistics show an archive."""
    if table.reltuples < 0:
        return None
    share, source = _archive_share(table, live)
    if share is None:
        return None
    at_analyze = max(1.0 - share, 0.0) * table.reltuples
    changed = table.stats.n_mod_since_analyze
    return LiveBound(at_analyze + changed, at_analyze, changed, source)


def _archive_share(table: Table, live: LivePredicate | None) -> tuple[float | None, str]:
    """The share of the rows ANALYZE saw that are finished, and where it came from: of a
    live predicate ``x IS NULL``, the rows with ``x`` set; else the common values of the
    live column (of every status-like column, without one) that a claim never waits for."""
    if live is not None and live.op == "is null":
        stats = table.stats_of(live.column)
        if stats is None:
            return None, ""
        return 1.0 - stats.null_frac, f"the rows with {live.column} set (pg_stats null_frac)"
    if live is not None and live.op == "or":
        return _union_archive_share(table, live)
    if live is not None and not live.whole_table:
        columns = [live.column]
    elif live is None:
        columns = [c.name for c in table.columns if status_like(c.name)]
    else:
        return None, ""
    best: tuple[float, str] | None = None
    for column in columns:
        stats = table.stats_of(column)
        if stats is None or not stats.most_common_vals or not stats.most_common_freqs:
            continue
        waiting = set(live.values) if live is not None and live.op == "in" else set()
        # A lone common value beside rarer ones is still one of several.
        values = max(len(stats.most_common_vals), 2 if stats.n_distinct != 1 else 1)
        finished = [
            (v, f)
            for v, f in zip(stats.most_common_vals, stats.most_common_freqs, strict=False)
            if v not in waiting and archived(v, f, values) is not None
        ]
        if not finished:
            continue
        share = sum(f for _, f in finished)
        if best is None or share > best[0]:
            listed = ", ".join(f"{v} {human_share(f)}" for v, f in finished)
            best = (share, f"the finished common values of {column} ({listed})")
    return (best[0], best[1]) if best is not None else (None, "")


def _union_estimate(table: Table, live: LivePredicate) -> LiveEstimate:
    """The rows of a union of one-column conditions: at most the sum of its parts' rows (a
    row in two parts, a running job that still has its next run, counts twice), each part
    from a partial index on exactly it when there is one, else from pg_stats."""
    rows = 0.0
    sources = []
    for part in live.parts:
        idx = part_index(table, part)
        if idx is not None and idx.reltuples >= 0:
            rows += idx.reltuples
            sources.append(f"reltuples of partial index {idx.name}")
            continue
        if part.op not in ("is null", "is not null"):
            return LiveEstimate(None, f"{part.column} {part.op} in a union is not estimated")
        stats = table.stats_of(part.column)
        if stats is None:
            return _stats_estimate(table, LivePredicate(part.column, "is null"))
        null = stats.null_frac if part.op == "is null" else 1.0 - stats.null_frac
        rows += null * table.reltuples
        sources.append(f"null_frac of {part.column} in pg_stats")
    rows = min(rows, table.reltuples)
    frac = rows / table.reltuples if table.reltuples > 0 else None
    source = "at most the sum of " + ", ".join(sources) + _as_of(table, vacuum=True)
    return _with_bound(table, live, LiveEstimate(rows, source, frac))


def _union_archive_share(table: Table, live: LivePredicate) -> tuple[float | None, str]:
    """The share of the rows a union of one-column NULL conditions does not take, at least:
    each part fails on a share pg_stats' null_frac gives, and rows failing every part are at
    least the sum of those shares less one for each part beyond the first (the least they
    can overlap)."""
    failing = []
    for part in live.parts:
        stats = table.stats_of(part.column)
        if stats is None or part.op not in ("is null", "is not null"):
            return None, ""
        failing.append(stats.null_frac if part.op == "is not null" else 1.0 - stats.null_frac)
    share = max(sum(failing) - (len(failing) - 1), 0.0)
    if share <= 0:
        return None, ""
    columns = " and ".join(p.column for p in live.parts)
    return share, f"the rows the union cannot take ({columns} by pg_stats null_frac)"


def part_index(table: Table, part: LivePredicate) -> Index | None:
    """A valid partial index whose predicate is exactly ``part`` (``next_run_at IS NOT
    NULL``), a condition ``parse_index_predicate`` does not read as a live set by itself."""
    for idx in table.indexes:
        if not (idx.is_valid and idx.predicate):
            continue
        try:
            conditions = condition_predicates(idx.predicate)
        except StatementError:
            continue
        if [(c.column, c.op) for c in conditions] == [(part.column, part.op)]:
            return idx
    return None


def _agree(a: float, b: float) -> bool:
    """Two estimates of one count within a factor of two (or a handful of rows) of each
    other: ANALYZE's sample of a small live set is that noisy."""
    return abs(a - b) <= 10 or max(a, b) <= 2 * min(a, b)


def _as_of(table: Table, *, vacuum: bool) -> str:
    """When the table's statistics were last refreshed, as ", as of ..." (nothing when
    pg_stat_all_tables knows no time): its last ANALYZE, or with ``vacuum`` its last
    VACUUM or ANALYZE."""
    s = table.stats
    times = [s.last_analyze, s.last_autoanalyze]
    if vacuum:
        times += [s.last_vacuum, s.last_autovacuum]
    known = sorted(t for t in times if t)
    if not known:
        return ""
    what = "VACUUM or ANALYZE" if vacuum else "ANALYZE"
    return f", as of the table's last {what} ({known[-1]})"


def _stale(table: Table, rows: float) -> str:
    """A sentence when more rows changed since the last ANALYZE than the estimate holds."""
    changed = table.stats.n_mod_since_analyze
    if changed <= max(rows, 100.0):
        return ""
    return (
        f"{changed:,} rows were inserted, updated or deleted since the table's last ANALYZE, "
        f"more than the {rows:,.0f} live rows the statistics hold: the live set may be far "
        f"from that now (ANALYZE {table.qualified} for a current estimate)"
    )


def _stats_estimate(table: Table, live: LivePredicate) -> LiveEstimate:
    """The live rows from pg_stats of the live column, times reltuples."""
    stats = table.stats_of(live.column)
    if stats is None:
        if not table.stats_visible:
            return LiveEstimate(
                None,
                f"pg_stats of {live.column} is hidden from this role: it needs SELECT on the "
                f"column (GRANT SELECT ({live.column}) ON {table.qualified} TO <role>)",
            )
        return LiveEstimate(None, f"pg_stats has no row for column {live.column}; run ANALYZE")
    if live.op == "is null":
        frac = stats.null_frac
    elif live.op in ("true", "false"):
        frac = _value_fraction(stats, ("t" if live.op == "true" else "f",), table.reltuples)
    elif live.op in RANGE_OPS:
        labels = range_labels(table, live)
        if labels is None:
            return LiveEstimate(
                None,
                f"{live.column} {live.op} {live.values[0]!r} is a range of a type whose "
                "order qadvisor does not know (only enum ranges are estimated)",
            )
        frac = _value_fraction(stats, labels, table.reltuples) if labels else 0.0
    elif live.op == "not in":
        frac = max(
            1.0 - stats.null_frac - _value_fraction(stats, live.values, table.reltuples), 0.0
        )
    else:
        frac = _value_fraction(stats, live.values, table.reltuples)
    source = f"pg_stats of {live.column}{_as_of(table, vacuum=False)}"
    return LiveEstimate(frac * table.reltuples, source, frac)


def range_labels(table: Table, live: LivePredicate) -> tuple[str, ...] | None:
    """The enum labels inside a range predicate, in the enum's order; None: not an enum."""
    col = table.column(live.column)
    if col is None or not col.enum_labels or live.values[0] not in col.enum_labels:
        return None
    at = col.enum_labels.index(live.values[0])
    return {
        "<": col.enum_labels[:at],
        "<=": col.enum_labels[: at + 1],
        ">": col.enum_labels[at + 1 :],
        ">=": col.enum_labels[at:],
    }[live.op]


def _value_fraction(stats: ColumnStats, values: tuple[str, ...], reltuples: float) -> float:
    pairs = dict(zip(stats.most_common_vals or (), stats.most_common_freqs or (), strict=False))
    frac = sum(pairs.get(v, 0.0) for v in values)
    missing = [v for v in values if v not in pairs]
    if missing:
        # Same rule as the planner: values outside the MCV list share what the list leaves.
        distinct = stats.n_distinct if stats.n_distinct >= 0 else -stats.n_distinct * reltuples
        others = max(distinct - len(pairs), 1.0)
        rest = max(1.0 - stats.null_frac - sum(pairs.values()), 0.0)
        frac += len(missing) * rest / others
    return min(frac, 1.0)


@dataclass(frozen=True)
class VacuumTrigger:
    """When autovacuum vacuums a table: dead tuples above ``value``.

    PostgreSQL docs, "The Autovacuum Daemon": vacuum threshold = vacuum base threshold +
    vacuum scale factor * number of tuples (reltuples), capped on 18+ by
    autovacuum_vacuum_max_threshold.
    """

    threshold: float
    scale_factor: float
    reltuples: float
    max_threshold: float | None
    value: float
    threshold_source: str
    scale_factor_source: str

    @property
    def scaled_part(self) -> float:
        return self.scale_factor * self.reltuples


def vacuum_trigger(snapshot: Snapshot, table: Table) -> VacuumTrigger:
    def pick(name: str) -> tuple[float | None, str]:
        if name in table.reloptions:
            return float(table.reloptions[name]), "table reloption"
        raw = snapshot.settings.get(name)
        return (float(raw), "server setting") if raw is not None else (None, "not set")

    threshold, t_src = pick("autovacuum_vacuum_threshold")
    scale, s_src = pick("autovacuum_vacuum_scale_factor")
    cap, _ = pick("autovacuum_vacuum_max_threshold")
    threshold = 50.0 if threshold is None else threshold
    scale = 0.2 if scale is None else scale
    # autovacuum takes a never-analyzed table's reltuples (-1) as zero.
    reltuples = max(table.reltuples, 0.0)
    value = threshold + scale * reltuples
    max_threshold = cap if cap is not None and cap >= 0 else None
    if max_threshold is not None:
        value = min(value, max_threshold)
    return VacuumTrigger(threshold, scale, reltuples, max_threshold, value, t_src, s_src)


def autovacuum_enabled(snapshot: Snapshot, table: Table) -> bool:
    return snapshot.settings.get("autovacuum", "on") == "on" and table.reloptions.get(
        "autovacuum_enabled", "true"
    ).lower() not in ("false", "off", "0")


def distinct_values(table: Table, column: str) -> float | None:
    """pg_stats n_distinct as a number of values (a negative one is a fraction of the rows,
    which the planner multiplies by reltuples); None without statistics."""
    stats = table.stats_of(column)
    if stats is None:
        return None
    if stats.n_distinct >= 0:
        return stats.n_distinct
    return round(-stats.n_distinct * max(table.reltuples, 0.0))


def column_width(table: Table, column: str) -> int:
    stats = table.stats_of(column)
    if stats is not None and stats.avg_width > 0:
        return stats.avg_width
    col = table.column(column)
    if col is None:
        return 8
    return _TYPE_WIDTH.get(col.type, 16)


def btree_bytes(table: Table, columns: tuple[str, ...], rows: float) -> int:
    """Size of a freshly built btree holding ``rows`` entries of these key columns."""
    data = sum(column_width(table, c) for c in columns)
    # Index tuple: 8-byte header + data, MAXALIGNed to 8, plus a 4-byte line pointer.
    entry = 8 + math.ceil(data / 8) * 8 + 4
    per_page = max(int(_BTREE_USABLE * _BTREE_FILL) // entry, 1)
    leaves = math.ceil(max(rows, 0.0) / per_page)
    internal = math.ceil(leaves / 250) if leaves > 1 else 0
    # The metapage and a root page exist even when the index is empty.
    return (1 + max(leaves, 1) + internal) * PAGE_BYTES


# Fewer rows than this changed over a --sample are no rate: an idle queue, a cron job's
# touch, or one late statistics flush (a session reports its counters at most once a second,
# an idle one up to 10 s late) would otherwise read as a throughput.
MIN_SAMPLE_ROWS = 100


@dataclass(frozen=True)
class Rates:
    """Per-second rates over an interval: the ``--sample`` wait, else the time since the
    first earlier snapshot of ``--history`` whose counters run on into this one's."""

    seconds: float
    dead_per_s: float  # row versions made dead: updates + deletes
    inserts_per_s: float
    updates_per_s: float
    deletes_per_s: float
    autovacuums: int  # autovacuum runs during the interval
    dead_rows: int = 0  # row versions made dead during the interval
    inserted_rows: int = 0
    # The interval, as a sentence says it: "the 60 s of --sample", "the 2.0 h since the
    # snapshot of 2026-12-01T09:00:00+00:00 (--history, 3 readings)".
    source: str = ""
    # Measured between snapshots of --history, not during the --sample wait.
    from_history: bool = False

    @property
    def dead_measured(self) -> bool:
        """Enough dead tuples were made during the interval for their rate to mean something."""
        return self.dead_rows >= MIN_SAMPLE_ROWS

    @property
    def inserts_measured(self) -> bool:
        return self.inserted_rows >= MIN_SAMPLE_ROWS


def rates_between(
    first: TableStats, later: TableStats, seconds: float, source: str, from_history: bool = False
) -> Rates:
    """The rates of two readings of a table's counters ``seconds`` apart."""
    updated = max(later.n_tup_upd - first.n_tup_upd, 0)
    deleted = max(later.n_tup_del - first.n_tup_del, 0)
    inserted = max(later.n_tup_ins - first.n_tup_ins, 0)
    return Rates(
        seconds=seconds,
        dead_per_s=(updated + deleted) / seconds,
        inserts_per_s=inserted / seconds,
        updates_per_s=updated / seconds,
        deletes_per_s=deleted / seconds,
        autovacuums=max(later.autovacuum_count - first.autovacuum_count, 0),
        dead_rows=updated + deleted,
        inserted_rows=inserted,
        source=source,
        from_history=from_history,
    )


def rates(snapshot: Snapshot, table: Table) -> Rates | None:
    """The table's rates over the --sample wait; without one, over the longest interval
    --history measured; None without either."""
    if snapshot.sample is not None and snapshot.sample.seconds > 0:
        later = snapshot.sample.tables.get(table.qualified)
        if later is None:
            return None
        secs = snapshot.sample.seconds
        return rates_between(table.stats, later, secs, f"the {secs:g} s of --sample")
    # Imported here: history's readings compute the vacuum trigger of this module.
    from qadvisor.derive.history import history_rates

    return history_rates(snapshot, table)


# Seconds of dead tuples a queue table should collect before autovacuum runs: short enough
# that dead index entries do not pile up, long enough that vacuum is not always running.
VACUUM_WINDOW_S = 30
MIN_VACUUM_THRESHOLD = 1_000


def suggested_vacuum_threshold(
    snapshot: Snapshot, table: Table, live: float | None
) -> tuple[int, str]:
    """A fixed autovacuum_vacuum_threshold for a queue table and how it was derived: the
    basis, then the rounding to a readable number, said as it is.

    The basis is rounded to the nearest 1, 2 or 5 times a power of ten (nice_round), not up:
    a live set that a new ANALYZE's sample puts 20 % higher or lower (4,071 to 6,246 rows
    around 5,000 waiting, on one unchanged table) then prints the same threshold, where
    rounding up flipped it between 50,000 and 100,000."""
    r = rates(snapshot, table)
    if r is not None and r.dead_measured:
        raw = r.dead_per_s * VACUUM_WINDOW_S
        n, low, high = nice_round(max(raw, MIN_VACUUM_THRESHOLD))
        basis = (
            f"{VACUUM_WINDOW_S} s of dead tuples at the measured {r.dead_per_s:,.0f} dead tuples/s"
        )
        over = f", measured over {r.source}" if r.from_history else ""
        return n, basis + _rounded(raw, n, low, high) + over
    rows = live or 0.0
    raw = rows * 10
    n, low, high = nice_round(max(raw, MIN_VACUUM_THRESHOLD))
    return n, (
        f"10x the live set of {rows:,.0f} rows{_rounded(raw, n, low, high)} (no rate was "
        f"measured, by --sample or between --history snapshots: size it from your dead "
        f"tuples/s, about {VACUUM_WINDOW_S} s worth)"
    )


def _rounded(raw: float, n: int, low: float, high: float) -> str:
    """How ``n`` was made from ``raw``, and which figures give the same ``n``: said, since
    the rounding can move it by half."""
    if n == round(raw):
        return ""
    if raw < MIN_VACUUM_THRESHOLD:
        return f" is {raw:,.0f}, raised to the floor of {n:,}"
    return (
        f" is {raw:,.0f}, rounded to {n:,} (the nearest of 1, 2 and 5 times a power of ten: "
        f"any figure from {math.ceil(low):,} to {math.floor(high):,} gives it)"
    )


def vacuum_threshold_sql(table: Table, n: int) -> str:
    return (
        f"ALTER TABLE {qualified(table.schema, table.name)} SET "
        f"(autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = {n});"
    )
