"""What a check author imports: the check decorator, snapshot types and shared estimates.

The built-in pack (``checks/``) uses nothing else, so a third-party pack can do all it does.
"""

from qadvisor.estimates import (
    LiveEstimate,
    Rates,
    VacuumTrigger,
    autovacuum_enabled,
    btree_bytes,
    live_index,
    live_rows,
    parse_index_predicate,
    rates,
    suggested_vacuum_threshold,
    vacuum_threshold_sql,
    vacuum_trigger,
)
from qadvisor.model import (
    Column,
    ColumnStats,
    Fix,
    Index,
    LivePredicate,
    Queue,
    Severity,
    Snapshot,
    Table,
    TableStats,
    Target,
)
from qadvisor.registry import Issue, NoOptions, Unmet, check
from qadvisor.sqltext import ident, index_name, literal, predicate_sql, qualified
from qadvisor.units import human_bytes, human_count, human_seconds, nice_ceil

__all__ = [
    "Column",
    "ColumnStats",
    "Fix",
    "Index",
    "Issue",
    "LiveEstimate",
    "LivePredicate",
    "NoOptions",
    "Queue",
    "Rates",
    "Severity",
    "Snapshot",
    "Table",
    "TableStats",
    "Target",
    "Unmet",
    "VacuumTrigger",
    "autovacuum_enabled",
    "btree_bytes",
    "check",
    "human_bytes",
    "human_count",
    "human_seconds",
    "ident",
    "index_name",
    "literal",
    "live_index",
    "live_rows",
    "nice_ceil",
    "parse_index_predicate",
    "predicate_sql",
    "qualified",
    "queue_tables",
    "rates",
    "suggested_vacuum_threshold",
    "vacuum_threshold_sql",
    "vacuum_trigger",
]


def queue_tables(snapshot: Snapshot) -> list[tuple[Queue, Table]]:
    """Each discovered queue with its table facts (queues whose facts are missing are left out)."""
    out = []
    for q in snapshot.queues:
        t = snapshot.table(q.schema, q.table)
        if t is not None:
            out.append((q, t))
    return out
