"""A partitioned table's facts from its partitions' (derive/partitions.py), and its
partitions' scans read as its own in plans (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from qadvisor.derive.partitions import merge_column_stats, sum_partitions, sum_stats
from qadvisor.derive.plans.explain_json import parse_explain, partition_names
from qadvisor.derive.plans.reading import describe_node, indexes_used, partitions_read, scans
from qadvisor.model import ColumnStats, Table, TableStats
from tests import snapshots as S


def leaf(name: str, reltuples: float, *, pending: float, stats: TableStats | None = None) -> Table:
    base = S.jobs_table(reltuples=reltuples, pending_freq=pending)
    idx = S.index(
        f"{name}_created_at_idx",
        ("created_at",),
        8192 * (1 + int(reltuples * pending) // 100),
        predicate="(status = 'pending'::text)",
        reltuples=reltuples * pending,
        idx_scan=3,
        partition_of="jobs_pending",
    )
    return replace(
        base,
        name=name,
        relpages=int(reltuples // 50),
        bytes=int(reltuples * 100),
        indexes=(idx,),
        stats=stats or TableStats(),
        partition_of="public.jobs",
        partition_bound="FOR VALUES IN ('x')",
    )


def parent() -> Table:
    own = S.index("jobs_pending", ("created_at",), 0, predicate="(status = 'pending'::text)")
    return replace(
        S.jobs_table(reltuples=-1, pending_freq=None),
        relpages=0,
        bytes=0,
        indexes=(own,),
        partition_key="LIST (queue)",
    )


def test_the_parent_sums_its_leaves_and_keeps_them() -> None:
    hot = leaf("jobs_hot", 10_000, pending=0.3, stats=TableStats(n_dead_tup=900, vacuum_count=2,
               last_autovacuum="2026-12-07T08:00:00+00:00"))  # fmt: skip
    cold = leaf("jobs_cold", 90_000, pending=0.0, stats=TableStats(n_dead_tup=0, vacuum_count=1,
                last_autovacuum="2026-12-01T08:00:00+00:00"))  # fmt: skip
    table = sum_partitions(parent(), [hot, cold])
    assert table.reltuples == 100_000 and table.bytes == 10_000_000 and table.relpages == 2_000
    assert table.stats.n_dead_tup == 900 and table.stats.vacuum_count == 3
    assert table.stats.last_autovacuum == "2026-12-07T08:00:00+00:00"
    (idx,) = table.indexes
    assert idx.reltuples == 3_000 and idx.idx_scan == 6
    assert idx.bytes == sum(i.bytes for p in (hot, cold) for i in p.indexes)
    assert table.leaves == (hot, cold) and table.partitions == (hot, cold)
    # pg_stats: the leaves' merged, weighted by their rows.
    status = table.stats_of("status")
    assert status is not None
    shares = dict(zip(status.most_common_vals or (), status.most_common_freqs or (), strict=True))
    assert shares["pending"] == pytest.approx(0.03)
    # Never analyzed anywhere: unknown, as reltuples -1 says.
    fresh = sum_partitions(parent(), [replace(hot, reltuples=-1), replace(cold, reltuples=-1)])
    assert fresh.reltuples == -1


def test_a_partition_whose_indexes_were_not_read_is_named() -> None:
    hot = leaf("jobs_hot", 10_000, pending=0.3)
    cold = replace(leaf("jobs_cold", 90_000, pending=0.0), indexes=())
    (idx,) = sum_partitions(parent(), [hot, cold], unread={"public.jobs_cold"}).indexes
    assert idx.bytes == hot.indexes[0].bytes
    assert idx.bytes_source is not None and "jobs_cold" in idx.bytes_source


def test_the_parent_s_own_statistics_stand_in_when_a_leaf_s_are_hidden() -> None:
    hot = leaf("jobs_hot", 10_000, pending=0.3)
    hidden = replace(leaf("jobs_cold", 90_000, pending=0.0), column_stats=())
    own = ColumnStats("status", 0.0, 2, 5, ("done", "pending"), (0.97, 0.03))
    table = sum_partitions(replace(parent(), column_stats=(own,)), [hot, hidden])
    assert table.stats_of("status") == own
    # Without it, no statistics rather than a part's passed for the whole.
    assert sum_partitions(parent(), [hot, hidden]).stats_of("status") is None


def test_merged_statistics() -> None:
    a = replace(S.jobs_table(reltuples=1_000), name="a")
    b = replace(S.jobs_table(reltuples=3_000), name="b")
    merged = merge_column_stats(
        "c",
        [
            (a, ColumnStats("c", 0.5, 3, 4, ("x", "y"), (0.3, 0.2), "10", "2")),
            (b, ColumnStats("c", 0.1, 2, 8, ("y",), (0.9,), "9", "5")),
        ],
    )
    assert merged.null_frac == pytest.approx(0.2) and merged.avg_width == 7
    assert merged.most_common_vals == ("y", "x")
    assert merged.most_common_freqs == pytest.approx((0.725, 0.075))
    # A status's values recur in each partition: the most any has; ids differ: their sum.
    assert merged.n_distinct == 3
    assert (merged.upper_bound, merged.lower_bound) == ("10", "2")
    ids = merge_column_stats(
        "id", [(a, ColumnStats("id", 0, -1.0, 8)), (b, ColumnStats("id", 0, -1.0, 8))]
    )
    assert ids.n_distinct == -1.0
    times = merge_column_stats(
        "t",
        [
            (a, ColumnStats("t", 0, -1, 8, lower_bound="2026-11-08T00:00:00.000000")),
            (b, ColumnStats("t", 0, -1, 8, lower_bound="2026-10-30T00:00:00.000000")),
        ],
    )
    assert times.lower_bound == "2026-10-30T00:00:00.000000"


def test_sum_stats_of_nothing_is_zero() -> None:
    assert sum_stats([]) == TableStats()


PARTITIONED_PLAN = [
    {
        "Plan": {
            "Node Type": "Limit",
            "Plans": [
                {
                    "Node Type": "Append",
                    "Subplans Removed": 2,
                    "Plans": [
                        {
                            "Node Type": "Index Scan",
                            "Relation Name": "jobs_hot",
                            "Schema": "public",
                            "Alias": "jobs_1",
                            "Index Name": "jobs_hot_created_at_idx",
                        },
                        {
                            "Node Type": "Bitmap Heap Scan",
                            "Relation Name": "jobs_cold",
                            "Schema": "public",
                            "Alias": "jobs_2",
                            "Plans": [
                                {
                                    "Node Type": "Bitmap Index Scan",
                                    "Index Name": "jobs_cold_created_at_idx",
                                }
                            ],
                        },
                    ],
                }
            ],
        }
    }
]


def test_a_partition_s_scan_reads_the_queue_table_through_its_index() -> None:
    table = sum_partitions(
        parent(),
        [leaf("jobs_hot", 10_000, pending=0.3), leaf("jobs_cold", 90_000, pending=0.001)],
    )
    plan, _ = parse_explain(PARTITIONED_PLAN, partition_names([table]))
    assert [n.partition for n in scans(plan, "public", "jobs")] == [
        "jobs_hot",
        "jobs_cold",
        "jobs_cold",
    ]
    assert indexes_used(plan, "public", "jobs") == ("jobs_pending",)
    assert partitions_read(plan) == (("jobs_hot", "jobs_cold"), 2)
    (first,) = [n for n in plan.walk() if n.partition == "jobs_hot"]
    assert describe_node(first).startswith(
        "Index Scan using jobs_hot_created_at_idx on public.jobs_hot jobs_1"
    )
    # Without the partitions known, a plan names what EXPLAIN named.
    bare, _ = parse_explain(PARTITIONED_PLAN)
    assert scans(bare, "public", "jobs") == [] and partitions_read(bare) == ((), 2)
