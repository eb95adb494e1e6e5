"""A partitioned table's key and its partitions' bounds, as PostgreSQL prints them (pure)."""

from __future__ import annotations

from qadvisor.sql.partitions import (
    PartitionKey,
    RangeBound,
    is_default,
    list_values,
    partition_key,
    range_bound,
)


def test_keys_as_pg_get_partkeydef_prints_them() -> None:
    assert partition_key("RANGE (created_at)") == PartitionKey("range", ("created_at",))
    assert partition_key("LIST (queue)") == PartitionKey("list", ("queue",))
    assert partition_key("HASH (id)") == PartitionKey("hash", ("id",))
    assert partition_key('RANGE ("Created At", id)') == PartitionKey("range", ("Created At", "id"))
    assert partition_key("RANGE (((created_at)::date))") == PartitionKey("range", (None,))
    assert partition_key(None) is None and partition_key("DEFAULT") is None


def test_bounds_as_pg_get_expr_prints_them() -> None:
    day = "FOR VALUES FROM ('2026-11-08 00:00:00+00') TO ('2026-11-09 00:00:00+00')"
    assert range_bound(day) == RangeBound("2026-11-08 00:00:00+00", "2026-11-09 00:00:00+00")
    assert range_bound("FOR VALUES FROM (MINVALUE) TO ('2026-01-01')") == RangeBound(
        None, "2026-01-01"
    )
    assert range_bound("FOR VALUES FROM (100) TO (MAXVALUE)") == RangeBound("100", None)
    assert range_bound("FOR VALUES FROM ('it''s, here') TO ('z')") == RangeBound("it's, here", "z")
    # Several columns, a list, a hash, DEFAULT: no one-column range.
    assert range_bound("FOR VALUES FROM ('a', 1) TO ('a', 5)") is None
    assert range_bound("FOR VALUES IN ('mail')") is None
    assert range_bound("FOR VALUES WITH (modulus 4, remainder 0)") is None
    assert range_bound("DEFAULT") is None and is_default("DEFAULT")
    assert not is_default(day) and not is_default(None)


def test_the_values_of_a_list_partition() -> None:
    assert list_values("FOR VALUES IN ('mail')") == ("mail",)
    assert list_values("FOR VALUES IN ('a', 'b,c', NULL)") == ("a", "b,c", None)
    assert list_values("FOR VALUES IN (1, 2)") == ("1", "2")
    assert list_values("DEFAULT") is None and list_values(None) is None
