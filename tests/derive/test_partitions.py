"""A partitioned queue table's partitions as the checks judge them (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

from qadvisor.derive.partitions import (
    default_partition,
    single_valued,
    time_partitions,
    writing_partitions,
)
from qadvisor.model import Column, Table, TableStats
from tests import snapshots as S

NOW = datetime(2026, 12, 7, 9, 30, tzinfo=UTC)


def part(
    name: str, bound: str, *, parent: str = "public.jobs", stats: TableStats | None = None
) -> Table:
    base = replace(S.jobs_table(reltuples=10_000, pending_freq=0.0), name=name)
    return replace(base, partition_of=parent, partition_bound=bound, stats=stats or TableStats())


def day(d: int) -> str:
    start = (NOW + timedelta(days=d)).date()
    return f"FOR VALUES FROM ('{start} 00:00:00+00') TO ('{start + timedelta(days=1)} 00:00:00+00')"


def queue(*partitions: Table, key: str = "RANGE (created_at)") -> Table:
    return replace(S.jobs_table(), partition_key=key, partitions=partitions)


def test_the_ranges_of_a_table_partitioned_by_time_oldest_first() -> None:
    table = queue(part("jobs_b", day(-1)), part("jobs_a", day(-2)), part("jobs_d", "DEFAULT"))
    ranges = time_partitions(table, NOW)
    assert [p.table.name for p in ranges] == ["jobs_a", "jobs_b"]
    assert ranges[0].column == "created_at" and ranges[0].parent == "public.jobs"
    assert ranges[0].upper == datetime(2026, 12, 6, tzinfo=UTC)
    held = default_partition(table)
    assert held is not None and held.name == "jobs_d"
    # A list of queues, a range over a column that is no time: no time ranges.
    listed = queue(part("jobs_x", "FOR VALUES IN ('x')"), key="LIST (queue)")
    assert time_partitions(listed, NOW) == []
    assert time_partitions(queue(part("jobs_a", day(-1)), key="RANGE (id)"), NOW) == []


def test_a_bound_without_a_time_zone_is_read_in_the_server_s() -> None:
    naive = replace(
        queue(part("jobs_a", "FOR VALUES FROM ('2026-12-06') TO ('2026-12-07')")),
        columns=(Column("created_at", "date", True),),
    )
    kolkata = timezone(timedelta(hours=5, minutes=30))
    (p,) = time_partitions(naive, NOW.astimezone(kolkata))
    assert p.upper == datetime(2026, 12, 7, tzinfo=kolkata)


def test_a_nested_range_is_read_under_its_own_partitioned_table() -> None:
    mail = replace(part("jobs_mail", "FOR VALUES IN ('mail')"), partition_key="RANGE (created_at)")
    table = queue(
        mail,
        part("jobs_mail_1", day(-3), parent="public.jobs_mail"),
        part("jobs_other", "DEFAULT"),
        key="LIST (queue)",
    )
    (p,) = time_partitions(table, NOW)
    assert p.table.name == "jobs_mail_1" and p.parent == "public.jobs_mail"
    assert default_partition(table, "public.jobs_mail") is None


def test_the_partitions_that_take_writes() -> None:
    cold = part("jobs_a", day(-3))
    dirty = part("jobs_b", day(-1), stats=TableStats(n_dead_tup=40))
    today = part("jobs_c", day(0))
    stats = S.jobs_table(pending_freq=0.1).column_stats
    live = replace(part("jobs_d", "DEFAULT"), column_stats=stats)
    hidden = replace(part("jobs_e", day(-4)), column_stats=(), stats_visible=False)
    writes = writing_partitions(queue(cold, dirty, today, live, hidden), S.PENDING, NOW)
    writing = writes.writing
    assert [w.table.name for w in writing] == ["jobs_b", "jobs_c", "jobs_d"]
    # Cold by its counters, but whether a job waits in it is hidden from the role.
    (unknown,) = writes.unknown
    assert unknown.table.name == "jobs_e" and "hidden from this role" in unknown.live.source
    assert "40 dead tuples" in writing[0].why
    assert writing[1].why == "its range holds the present, where new jobs land"
    assert writing[2].why.startswith("it holds 1,000 live rows")


def test_the_columns_a_list_partition_holds_one_value_of() -> None:
    mail = replace(part("jobs_mail", "FOR VALUES IN ('mail')"), partition_key="RANGE (created_at)")
    table = queue(
        mail,
        part("jobs_mail_1", day(-3), parent="public.jobs_mail"),
        part("jobs_some", "FOR VALUES IN ('a', 'b')"),
        part("jobs_other", "DEFAULT"),
        key="LIST (queue)",
    )
    assert single_valued(table, "jobs_mail_1") == {"queue"}
    assert single_valued(table, "jobs_some") == set()
    assert single_valued(table, "jobs_other") == set()
    assert single_valued(table, "missing") == set()
