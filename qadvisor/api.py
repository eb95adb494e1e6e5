"""What a check author imports: the check decorator, snapshot types and shared estimates.

The built-in pack (``checks/``) uses nothing else, so a third-party pack can do all it does.
"""

from collections.abc import Iterator

from qadvisor.dequeue import (
    DequeueStatement,
    Lateral,
    LockClause,
    OrderItem,
    Param,
    Predicate,
    StatementError,
    with_literals,
    with_order_by,
)
from qadvisor.discover import selects_waiting
from qadvisor.estimates import (
    MIN_SAMPLE_ROWS,
    LiveEstimate,
    Rates,
    VacuumTrigger,
    autovacuum_enabled,
    btree_bytes,
    distinct_values,
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
    HorizonHolder,
    Index,
    LivePredicate,
    PlanNode,
    Queue,
    RoleSetting,
    Sample,
    ServerInfo,
    Severity,
    Snapshot,
    Statement,
    Table,
    TableStats,
    Target,
    TenantCount,
    TenantFacts,
)
from qadvisor.plans import (
    PlanCacheMode,
    ValueJudgement,
    dequeue_statements,
    describe_node,
    index_predicate_columns,
    index_scans,
    indexes_used,
    literal_value,
    operand_values,
    order_keys_sql,
    parse_explain,
    plan_cache_mode,
    plan_outline,
    predicate_implies,
    predicate_text,
    predicate_words,
    scans,
    sorts_over,
    statement_evidence,
    statement_id,
    statement_label,
    statement_queue,
    statement_start,
)
from qadvisor.registry import Issue, NoOptions, Unmet, check
from qadvisor.sqltext import ident, index_name, literal, predicate_sql, qualified
from qadvisor.units import human_bytes, human_count, human_seconds, nice_ceil

__all__ = [
    "MIN_SAMPLE_ROWS",
    "Column",
    "ColumnStats",
    "DequeueStatement",
    "Fix",
    "HorizonHolder",
    "Index",
    "Issue",
    "Lateral",
    "LiveEstimate",
    "LivePredicate",
    "LockClause",
    "NoOptions",
    "OrderItem",
    "Param",
    "PlanCacheMode",
    "PlanNode",
    "Predicate",
    "Queue",
    "Rates",
    "RoleSetting",
    "Sample",
    "ServerInfo",
    "Severity",
    "Snapshot",
    "Statement",
    "StatementError",
    "Table",
    "TableStats",
    "Target",
    "TenantCount",
    "TenantFacts",
    "Unmet",
    "VacuumTrigger",
    "ValueJudgement",
    "autovacuum_enabled",
    "btree_bytes",
    "check",
    "dequeue_statements",
    "describe_node",
    "distinct_values",
    "human_bytes",
    "human_count",
    "human_seconds",
    "ident",
    "index_name",
    "index_predicate_columns",
    "index_scans",
    "indexes_used",
    "literal",
    "literal_value",
    "live_index",
    "live_rows",
    "nice_ceil",
    "operand_values",
    "order_keys_sql",
    "parse_explain",
    "parse_index_predicate",
    "plan_cache_mode",
    "plan_outline",
    "predicate_implies",
    "predicate_sql",
    "predicate_text",
    "predicate_words",
    "qualified",
    "queue_facts",
    "queue_tables",
    "rates",
    "scans",
    "selects_waiting",
    "sorts_over",
    "statement_evidence",
    "statement_id",
    "statement_label",
    "statement_queue",
    "statement_start",
    "suggested_vacuum_threshold",
    "tenant_facts",
    "vacuum_threshold_sql",
    "vacuum_trigger",
    "with_literals",
    "with_order_by",
]


def queue_tables(snapshot: Snapshot) -> list[tuple[Queue, Table]]:
    """Each discovered queue with its table facts (queues whose facts are missing are left out)."""
    out = []
    for q in snapshot.queues:
        t = snapshot.table(q.schema, q.table)
        if t is not None:
            out.append((q, t))
    return out


def queue_facts(snapshot: Snapshot) -> Iterator[tuple[Queue, Table] | Unmet]:
    """Each discovered queue with its table facts, or an Unmet for a queue whose facts are
    missing (a table dropped between discovery and the fact queries): a check that judges
    tables yields it, so that queue is reported as not judged rather than healthy."""
    for q in snapshot.queues:
        t = snapshot.table(q.schema, q.table)
        if t is None:
            yield Unmet(f"{q.qualified}: no table facts were collected", q.qualified)
        else:
            yield q, t


def tenant_facts(snapshot: Snapshot, schema: str, table: str) -> TenantFacts | None:
    """The per-tenant facts collected for a queue table, if it has a tenant column."""
    return next((f for f in snapshot.tenants if (f.schema, f.table) == (schema, table)), None)
