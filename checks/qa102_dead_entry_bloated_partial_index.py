"""QA102 dead-entry-bloated-partial-index."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from qadvisor.api import (
    NOISE_MARGIN,
    Finding,
    Fix,
    Severity,
    Skip,
    Snapshot,
    Target,
    at_least,
    check,
    human_bytes,
    human_count,
    judgeable_queues,
    live_rows,
    reindex,
    table_setting,
    vacuum_trigger,
)
from qadvisor.api.provisional import (
    btree_bytes,
    index_growth,
    suggested_vacuum_threshold,
    vacuum_threshold_sql,
)

# QA201's default: a trigger this many times the live set means vacuum comes too late.
_TRIGGER_RATIO = 10.0


@dataclass(frozen=True)
class Options:
    # Smaller partial indexes cost nothing worth a REINDEX (128 pages).
    min_index_bytes: int = 1024 * 1024
    # How many times larger than a fresh build of the same entries the index must be.
    min_size_ratio: float = 10.0
    # The fresh size is estimated from row counts that move between runs: a ratio up to this
    # share past min_size_ratio gives an info finding, so two runs agree.
    margin: float = NOISE_MARGIN


@check("QA102", "dead-entry-bloated-partial-index", severity=Severity.WARNING,
       category="indexes", options=Options,
       requires=("table_facts", "sizes", "index_definitions", "counters"))  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """A partial index on a queue table is far larger than the live rows it holds need.

    ## What it finds
    A partial index whose size is many times what a fresh build of its entries would take.
    The entries counted are the index's own `reltuples` (exact after VACUUM, estimated by
    ANALYZE from its sample), so the estimate holds for any predicate.

    ## Why it matters
    A claim moves a row out of the partial index's predicate (pending -> done), but the index
    entry stays until vacuum removes it. A small index therefore still bloats at the rate of
    the throughput: in a 15-minute run at 2,000 jobs/s a partial index grew 0.125 -> 38.2 MB
    (about 305x) while the live set stayed between 3,000 and 5,000 rows. Every dequeue walks
    past the dead entries.
    With `--history DIR`, the evidence also holds the index's size at each earlier snapshot
    of the directory and how much it grew a day since the first (`index_growth_per_day_bytes`,
    and over which interval): the growth is measured, not inferred.

    ## How to fix
    `REINDEX INDEX CONCURRENTLY` rebuilds it without blocking writes (PostgreSQL 12+; not in a
    transaction block). When autovacuum is scaled by the archive (QA201) the index bloats
    again, so the table's vacuum threshold is fixed in the same step.

    ## When it stays quiet
    The index is under `min_index_bytes`, or within `min_size_ratio` of its fresh size. The
    fresh size is estimated from the index's row count, which moves between runs: a ratio up
    to `margin` (20 %) past `min_size_ratio` gives an info finding.
    """
    for queue, table in judgeable_queues(snapshot):
        for idx in table.indexes:
            if not (idx.is_partial and idx.is_valid) or idx.bytes < options.min_index_bytes:
                continue
            if idx.reltuples < 0:
                yield Skip(
                    f"{idx.name}: the index has no row estimate yet (run ANALYZE)",
                    table.qualified,
                )
                continue
            keys = tuple(c or "?" for c in idx.columns)
            fresh = btree_bytes(table, keys, idx.reltuples)
            ratio = idx.bytes / fresh
            if ratio < options.min_size_ratio:
                continue
            steps = [reindex(table.schema, idx.name)]
            notes: list[str] = []
            trigger = vacuum_trigger(snapshot, table)
            live = live_rows(table, queue.live)
            live_n = live.rows if live.rows is not None else idx.reltuples
            if trigger.scaled_part > trigger.threshold and trigger.value > _TRIGGER_RATIO * max(
                live_n, 1.0
            ):
                n, basis = suggested_vacuum_threshold(snapshot, table, live_n)
                steps.append(table_setting(vacuum_threshold_sql(table, n)))
                notes.append(
                    f"Autovacuum waits for {human_count(trigger.value)} dead tuples on this "
                    f"table (QA201), so the index would bloat again: the ALTER TABLE fixes "
                    f"the threshold at {n:,}: {basis}."
                )
            near = at_least(ratio, options.min_size_ratio, options.margin) is None
            yield Finding(
                target=Target("index", table.schema, table.name, idx.name),
                severity=Severity.INFO if near else None,
                message=(
                    f"Partial index {idx.name} on {table.qualified} is "
                    f"{human_bytes(idx.bytes)} for about {human_count(idx.reltuples)} entries; "
                    f"a fresh build would be about {human_bytes(fresh)} ({ratio:,.0f}x smaller)."
                ),
                evidence={
                    "index_bytes": idx.bytes,
                    **({"index_bytes_source": idx.bytes_source} if idx.bytes_source else {}),
                    "index_definition": idx.definition,
                    "index_entries": round(idx.reltuples),
                    "estimated_fresh_bytes": fresh,
                    "size_ratio": round(ratio, 1),
                    **index_growth(snapshot, table, idx.name),
                    "n_dead_tup": table.stats.n_dead_tup,
                    "vacuum_trigger": round(trigger.value),
                    "last_autovacuum": table.stats.last_autovacuum,
                    "min_index_bytes": options.min_index_bytes,
                    "min_size_ratio": options.min_size_ratio,
                    **(
                        {"near_threshold": f"{ratio:,.1f}x against {options.min_size_ratio:g}x"}
                        if near
                        else {}
                    ),
                },
                explanation=(
                    "Rows leave a partial index's predicate when they are claimed, but their "
                    "entries stay until vacuum: the index bloats with throughput, not size."
                ),
                fix=Fix(
                    notes=" ".join(notes),
                    safety="safe" if len(steps) == 1 else "review",
                    steps=tuple(steps),
                ),
            )
