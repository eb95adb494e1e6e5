"""How far an integer id of a queue table has gone, and how far it can go: from the sequence
that numbers it, else from its statistics.

Pure: the sequence's last value and the column's statistics were read at collection.
"""

from __future__ import annotations

from qadvisor.model import IdSequence, Table

# The largest value of each integer type a sequence can number.
TYPE_MAX = {"smallint": 2**15 - 1, "integer": 2**31 - 1, "bigint": 2**63 - 1}
# Above this a range does not run out at any rate a queue reaches (2^62 ids at a million a
# second last 146,000 years).
ENDLESS = 2**62


def id_limit(seq: IdSequence) -> int | None:
    """The largest id the column and the sequence can give; None for a descending sequence
    or a column type that is not an integer."""
    column_max = TYPE_MAX.get(seq.column_type)
    if column_max is None or seq.increment <= 0:
        return None
    return min(column_max, seq.max_value)


def ids_used(table: Table, seq: IdSequence) -> tuple[int | None, str]:
    """The last id given, and where that was read: the sequence's last value (0 before its
    first), else the largest id ANALYZE saw; (None, "") when neither was read."""
    if seq.readable:
        if seq.last_value is None:
            return 0, f"{seq.qualified} has given no id yet"
        return seq.last_value, f"the last value of {seq.qualified}"
    stats = table.stats_of(seq.column)
    if stats is None or stats.upper_bound is None:
        return None, ""
    return int(stats.upper_bound), f"the largest {seq.column} ANALYZE saw (pg_stats)"
