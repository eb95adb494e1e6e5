"""What a check author imports: the one door between a check pack and qadvisor.

The built-in pack (``checks/``) imports nothing else of qadvisor (an import contract in the
test suite holds it to that), so a third-party pack can do all it does. Every name below is a
promise to third-party packs; the groups read as a table of contents:

1. writing a check: the decorator, what a check yields (a Finding or a Skip), and the items
   it can judge (their skips go to the report by themselves);
2. the snapshot: the facts a check reads;
3. queues and their facts;
4. estimates shared by the checks, so a pack's evidence agrees with theirs;
5. dequeue statements as parsed, and statements rewritten;
6. statements and the queues they claim from;
7. plans;
8. predicates of statements against the queue's predicates;
9. fixes: their steps, index fixes, the round-robin pattern;
10. SQL text and units for messages and fixes.

A name the built-in pack does not use is kept only with a reason (a comment at its import).
"""

from collections.abc import Iterator

from qadvisor.derive.archive_dates import DatingColumn, dating_column, parse_bound
from qadvisor.derive.discover import selects_waiting
from qadvisor.derive.estimates import (
    MIN_SAMPLE_ROWS,
    LiveBound,
    LiveEstimate,
    Rates,
    VacuumTrigger,
    autovacuum_enabled,
    btree_bytes,
    distinct_values,
    live_bound,
    live_index,
    live_rows,
    parse_index_predicate,
    rates,
    suggested_vacuum_threshold,
    vacuum_threshold_sql,
    vacuum_trigger,
)
from qadvisor.derive.history import index_growth, per_day, series
from qadvisor.derive.hot_updates import RecordedUpdate, index_columns, recorded_updates, stops_hot
from qadvisor.derive.id_range import ENDLESS as ID_RANGE_ENDLESS
from qadvisor.derive.id_range import id_limit, ids_used
from qadvisor.derive.margins import NOISE_MARGIN, at_least, at_most, near
from qadvisor.derive.partitions import (
    TimePartition,
    Writes,
    Writing,
    default_partition,
    single_valued,
    sum_partitions,
    time_partitions,
    writing_partitions,
)
from qadvisor.derive.plans.cache_mode import PlanCacheMode, plan_cache_mode
from qadvisor.derive.plans.explain_json import parse_explain
from qadvisor.derive.plans.reading import (
    SortInput,
    describe_node,
    indexes_used,
    plan_outline,
    scans,
    sort_inputs,
    sorts_over,
)
from qadvisor.derive.predicates import (
    ValueJudgement,
    index_predicate_columns,
    operand_values,
    predicate_implies,
    predicate_text,
    predicate_words,
)
from qadvisor.derive.stakeholders import IndexUse, index_use, stakeholder_label
from qadvisor.derive.statement_ids import statement_id
from qadvisor.derive.statement_queues import (
    Dequeue,
    Locking,
    claims_on,
    claims_reading,
    dequeue_statements,
    dequeues,
    locking_statements,
    lockings,
    over_bindings,
    statement_evidence,
    statement_label,
    statement_queue,
    statement_target,
    unplanned_claims,
    unplanned_note,
)
from qadvisor.fixes.builders import (
    CONCURRENT_BUILD_NOTE,
    IndexFix,
    IndexKey,
    IndexMatch,
    analyze,
    comparable_index,
    covering_index,
    drop_index,
    existing_index,
    index_keys,
    index_users_note,
    live_set_index,
    matching_statements,
    migration,
    order_keys_sql,
    reindex,
    review,
    rewrite,
    set_rows_index,
    table_setting,
)
from qadvisor.fixes.partitions import (
    CONCURRENT_DETACH_VERSION,
    detach,
    guarded_drop,
    waiting_guard,
)
from qadvisor.fixes.round_robin import (
    existing_tenant_index,
    round_robin_fix,
    tenant_index,
    tenant_index_sql,
    tenant_order,
)
from qadvisor.model import (
    Column,
    ColumnStats,
    Fix,
    FixStep,
    HorizonHolder,
    IdSequence,
    Index,
    LivePredicate,
    PlanNode,
    Queue,
    RoleSetting,
    Sample,
    ServerInfo,
    Severity,
    Snapshot,
    Stakeholder,
    Statement,
    Table,
    TableStats,
    Target,
    TenantCount,
    TenantFacts,
)
from qadvisor.registry import Finding, Issue, NoOptions, Skip, Unmet, check, judgeable
from qadvisor.sql.dequeue import (
    DequeueStatement,
    KeyNotReturned,
    Lateral,
    LockClause,
    OrderItem,
    Param,
    Predicate,
    StatementError,
    condition_columns,
    value_placeholder,
    window_partitions,
    with_literals,
    with_lock_outside,
    with_order_by,
    with_placeholders,
    with_skip_locked,
)
from qadvisor.sql.printing import (
    array_literal,
    ident,
    index_name,
    literal,
    predicate_sql,
    qualified,
)
from qadvisor.sql.recorded_statements import own_parameters, writes_rows
from qadvisor.units import human_bytes, human_count, human_seconds, nice_ceil

__all__ = [  # noqa: RUF022 -- grouped by topic, in the order of the contents above
    # 1. writing a check. Issue and Unmet are Finding's and Skip's names in packs written
    # before them; judgeable is for a pack's own streams of items and skips.
    "Finding",
    "Fix",
    "FixStep",
    "Issue",
    "NoOptions",
    "Severity",
    "Skip",
    "Target",
    "Unmet",
    "check",
    "judgeable",
    "judgeable_dequeues",
    "judgeable_locking",
    "judgeable_queues",
    # 2. the snapshot. ServerInfo, RoleSetting, Sample, TableStats, Column, ColumnStats and
    # TenantCount are not named in the built-in checks: a pack's tests build snapshots of them
    # (the guide's own test does).
    "Column",
    "ColumnStats",
    "HorizonHolder",
    "Index",
    "LivePredicate",
    "PlanNode",
    "Queue",
    "RoleSetting",
    "Sample",
    "ServerInfo",
    "Snapshot",
    "Statement",
    "Table",
    "IdSequence",
    "TableStats",
    "TenantCount",
    "TenantFacts",
    # 3. queues and their facts. queue_facts is judgeable_queues with its skips, for a pack
    # that loops over it as packs did before judgeable_queues.
    "queue_facts",
    "queue_tables",
    "selects_waiting",
    "tenant_facts",
    # 4. estimates. LiveEstimate, LiveBound, Rates and VacuumTrigger are what live_rows,
    # live_bound, rates and vacuum_trigger return (for a pack's annotations); live_index is
    # promised by the guide.
    "MIN_SAMPLE_ROWS",
    "LiveBound",
    "LiveEstimate",
    "Rates",
    "VacuumTrigger",
    "autovacuum_enabled",
    "btree_bytes",
    "distinct_values",
    "live_bound",
    "live_index",
    "live_rows",
    "parse_index_predicate",
    "rates",
    "suggested_vacuum_threshold",
    "vacuum_threshold_sql",
    "vacuum_trigger",
    # 4a. the timestamp that dates a queue's finished rows, and a statistics bound of it as
    # a time (qadvisor.derive.archive_dates).
    "DatingColumn",
    "dating_column",
    "parse_bound",
    # 4b. margins on thresholds that read noisy counters (qadvisor.derive.margins): within
    # the margin a check gives its conservative answer, so two runs agree.
    "NOISE_MARGIN",
    "at_least",
    "at_most",
    "near",
    # 4c. which recorded updates of a queue table could be heap-only, and which index stops
    # them (qadvisor.derive.hot_updates). RecordedUpdate is what recorded_updates lists.
    "RecordedUpdate",
    "index_columns",
    "recorded_updates",
    "stops_hot",
    # 4d. figures over time: a queue table's readings at the earlier snapshots of --history,
    # this one and --sample's second read, as evidence series, and their change a day
    # (qadvisor.derive.history).
    "index_growth",
    "per_day",
    "series",
    # 4e. a partitioned queue table's partitions as autovacuum, the write path and retention
    # see them (qadvisor.derive.partitions): those that take writes, the time ranges of a
    # table partitioned by time, the columns a list partition holds one value of, and the
    # facts of some partitions summed (as the collector sums them all into the table's).
    # TimePartition, Writes and Writing are what they give.
    "TimePartition",
    "Writes",
    "Writing",
    "default_partition",
    "single_valued",
    "sum_partitions",
    "time_partitions",
    "writing_partitions",
    # 4f. how far an integer id has gone and can go (qadvisor.derive.id_range), as QA206
    # and the OpenMetrics output read it.
    "ID_RANGE_ENDLESS",
    "id_limit",
    "ids_used",
    # 5. dequeue statements as parsed (the parts of Statement.parsed: DequeueStatement,
    # LockClause and Param are for a pack's annotations), and rewritten. Parsing and printing
    # SQL text stay in qadvisor.sql.dequeue: a check never parses SQL itself.
    "DequeueStatement",
    "KeyNotReturned",
    "Lateral",
    "LockClause",
    "OrderItem",
    "Param",
    "Predicate",
    "StatementError",
    "condition_columns",
    "window_partitions",
    "value_placeholder",
    "with_literals",
    "with_placeholders",
    "own_parameters",
    "writes_rows",
    "with_lock_outside",
    "with_order_by",
    "with_skip_locked",
    # 6. statements and their queues. Dequeue and Locking are what judgeable_dequeues and
    # judgeable_locking yield (for a pack's annotations); dequeue_statements and
    # locking_statements are the same as tuples with their skips, for packs that loop over
    # them as packs did before. claims_on gives a table's claims, claims_reading those whose
    # plans read an index, unplanned_claims those no plan could be made of, whose index use
    # an index fix cannot know (unplanned_note says so).
    "Dequeue",
    "Locking",
    "claims_on",
    "claims_reading",
    "dequeue_statements",
    "locking_statements",
    "over_bindings",
    "statement_evidence",
    "statement_id",
    "statement_label",
    "statement_queue",
    "statement_target",
    "unplanned_claims",
    "unplanned_note",
    # 7. plans. parse_explain makes a PlanNode tree of EXPLAIN (FORMAT JSON) output, for a
    # pack's tests with plans saved from a server; PlanCacheMode is what plan_cache_mode returns,
    # SortInput what sort_inputs returns.
    "PlanCacheMode",
    "SortInput",
    "describe_node",
    "indexes_used",
    "parse_explain",
    "plan_cache_mode",
    "plan_outline",
    "scans",
    "sort_inputs",
    "sorts_over",
    # 8. predicates. ValueJudgement is what predicate_implies returns.
    "ValueJudgement",
    "index_predicate_columns",
    "operand_values",
    "predicate_implies",
    "predicate_text",
    "predicate_words",
    # 9. fixes: steps (migration, rewrite, review) with their locks, index fixes built from
    # a description, and the round-robin pattern. order_keys_sql (the keys' SQL text) and
    # tenant_index_sql (the per-tenant index as name and statement) are what packs had before
    # IndexKey and IndexFix, kept for them.
    "CONCURRENT_BUILD_NOTE",
    "IndexFix",
    "IndexKey",
    "analyze",
    "drop_index",
    "existing_index",
    "covering_index",
    "comparable_index",
    "set_rows_index",
    "index_users_note",
    "matching_statements",
    "IndexMatch",
    "index_keys",
    "live_set_index",
    "migration",
    "order_keys_sql",
    "reindex",
    "review",
    "rewrite",
    "table_setting",
    "existing_tenant_index",
    "round_robin_fix",
    "tenant_index",
    "tenant_index_sql",
    "tenant_order",
    # 9a. retention of a table partitioned by time: old partitions detached (CONCURRENTLY
    # from the version CONCURRENT_DETACH_VERSION names) and dropped, never one that holds a
    # waiting row (qadvisor.fixes.partitions).
    "CONCURRENT_DETACH_VERSION",
    "detach",
    "guarded_drop",
    "waiting_guard",
    # 10. SQL text and units. nice_ceil (a threshold rounded up to a number a person would
    # write) is promised by the guide; index_name is how every fix names an index (IndexFix
    # calls it), for a pack's own index.
    "array_literal",
    "human_bytes",
    "human_count",
    "index_use",
    "IndexUse",
    "stakeholder_label",
    "Stakeholder",
    "human_seconds",
    "ident",
    "index_name",
    "literal",
    "nice_ceil",
    "predicate_sql",
    "qualified",
]


def queue_tables(snapshot: Snapshot) -> list[tuple[Queue, Table]]:
    """Each discovered queue with its table facts (queues whose facts are missing are left out)."""
    out = []
    for q in snapshot.queues:
        t = snapshot.table(q.schema, q.table)
        if t is not None:
            out.append((q, t))
    return out


def queue_facts(snapshot: Snapshot) -> Iterator[tuple[Queue, Table] | Skip]:
    """Each discovered queue with its table facts, or a Skip for a queue whose facts are
    missing (a table dropped between discovery and the fact queries), so that queue is
    reported as not judged rather than healthy."""
    for q in snapshot.queues:
        t = snapshot.table(q.schema, q.table)
        if t is None:
            yield Skip(f"{q.qualified}: no table facts were collected", q.qualified)
        else:
            yield q, t


def judgeable_queues(snapshot: Snapshot) -> Iterator[tuple[Queue, Table]]:
    """Each discovered queue with its table facts; a queue whose facts are missing goes to
    the report as a skip of the check, by itself."""
    return judgeable(queue_facts(snapshot))


def judgeable_dequeues(snapshot: Snapshot) -> Iterator[Dequeue]:
    """Each parsed dequeue statement on a discovered queue, for the plan checks; the
    statements and queues that cannot be judged go to the report as skips, by themselves."""
    return judgeable(dequeues(snapshot))


def judgeable_locking(snapshot: Snapshot) -> Iterator[Locking]:
    """Each parsed row-locking statement with the table whose rows it claims, for the lock
    checks; the statements and queues that cannot be judged go to the report as skips, by
    themselves."""
    return judgeable(lockings(snapshot))


def tenant_facts(snapshot: Snapshot, schema: str, table: str) -> TenantFacts | None:
    """The per-tenant facts collected for a queue table, if it has a tenant column."""
    return next((f for f in snapshot.tenants if (f.schema, f.table) == (schema, table)), None)
