"""The helpers the built-in checks share beyond :mod:`qadvisor.api`: provisional.

They are how the built-in pack reads what it reads, and a third-party pack may use them so its
evidence agrees with the built-in checks'; but unlike :mod:`qadvisor.api` they carry no
promise: any release may rename, change or remove one. A pack that imports this module pins
the qadvisor versions it was tested with. A helper a pack cannot do without moves to
:mod:`qadvisor.api` when its shape has settled.
"""

from qadvisor.api.statement_checks import over_bindings
from qadvisor.derive.archive_dates import DatingColumn, dating_column
from qadvisor.derive.discover import selects_waiting
from qadvisor.derive.estimates import (
    MIN_SAMPLE_ROWS,
    LiveBound,
    Rates,
    autovacuum_enabled,
    btree_bytes,
    distinct_values,
    live_bound,
    parse_index_predicate,
    rates,
    suggested_vacuum_threshold,
    vacuum_threshold_sql,
)
from qadvisor.derive.history import index_growth, per_day, series
from qadvisor.derive.hot_updates import RecordedUpdate, index_columns, recorded_updates, stops_hot
from qadvisor.derive.id_range import ENDLESS as ID_RANGE_ENDLESS
from qadvisor.derive.id_range import id_limit, ids_used
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
from qadvisor.derive.plans.reading import SortInput, indexes_used, sort_inputs, sorts_over
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
    claims_on,
    claims_reading,
    statement_queue,
    unplanned_claims,
    unplanned_note,
)
from qadvisor.fixes.builders import (
    CONCURRENT_BUILD_NOTE,
    IndexFix,
    IndexKey,
    IndexMatch,
    comparable_index,
    covering_index,
    existing_index,
    index_keys,
    live_set_index,
    matching_statements,
    set_rows_index,
)
from qadvisor.fixes.partitions import CONCURRENT_DETACH_VERSION, detach, guarded_drop, waiting_guard
from qadvisor.fixes.round_robin import (
    existing_tenant_index,
    round_robin_fix,
    tenant_index,
    tenant_order,
)
from qadvisor.model import Stakeholder
from qadvisor.sql.dequeue import (
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
    with_lock_outside,
    with_order_by,
    with_placeholders,
    with_skip_locked,
)
from qadvisor.sql.printing import index_name, predicate_sql
from qadvisor.sql.recorded_statements import own_parameters, writes_rows

__all__ = [  # noqa: RUF022 -- grouped by topic
    # 1. queues: which statement reads a queue's waiting rows (the claim's own words).
    "selects_waiting",
    # 2. estimates beyond live_rows and vacuum_trigger: the live set's bound where statistics
    # are stale, rates between two reads, the autovacuum settings and thresholds a fix sets, and
    # an index's size from its rows.
    "MIN_SAMPLE_ROWS",
    "LiveBound",
    "Rates",
    "autovacuum_enabled",
    "btree_bytes",
    "distinct_values",
    "live_bound",
    "parse_index_predicate",
    "rates",
    "suggested_vacuum_threshold",
    "vacuum_threshold_sql",
    # 2a. the timestamp that dates a queue's finished rows (qadvisor.derive.archive_dates).
    "DatingColumn",
    "dating_column",
    # 2b. which recorded updates of a queue table could be heap-only, and which index stops
    # them (qadvisor.derive.hot_updates).
    "RecordedUpdate",
    "index_columns",
    "recorded_updates",
    "stops_hot",
    # 2c. figures over time: readings at the earlier snapshots of --history, this one and
    # --sample's second read, as evidence series, and their change a day.
    "index_growth",
    "per_day",
    "series",
    # 2d. a partitioned queue table's partitions as autovacuum, the write path and retention
    # see them (Writes and Writing are what writing_partitions gives).
    "TimePartition",
    "Writes",
    "Writing",
    "default_partition",
    "single_valued",
    "sum_partitions",
    "time_partitions",
    "writing_partitions",
    # 2e. how far an integer id has gone and can go.
    "ID_RANGE_ENDLESS",
    "id_limit",
    "ids_used",
    # 3. dequeue statements as parsed (the parts of DequeueStatement; LockClause and Param for
    # annotations), and rewritten. Parsing and printing SQL stay in qadvisor.sql: a check never
    # parses SQL itself.
    "KeyNotReturned",
    "Lateral",
    "LockClause",
    "OrderItem",
    "Param",
    "Predicate",
    "StatementError",
    "condition_columns",
    "own_parameters",
    "value_placeholder",
    "window_partitions",
    "with_lock_outside",
    "with_order_by",
    "with_placeholders",
    "with_skip_locked",
    "writes_rows",
    # 4. statements and their queues: a table's claims, those whose plans read an index, those
    # no plan could be made of (unplanned_note says so), and a statement's id and queue.
    "claims_on",
    "claims_reading",
    "over_bindings",
    "statement_id",
    "statement_queue",
    "unplanned_claims",
    "unplanned_note",
    # 5. plans. parse_explain makes a PlanNode tree of EXPLAIN (FORMAT JSON) output, for a
    # pack's tests with plans saved from a server; PlanCacheMode is what plan_cache_mode returns,
    # SortInput what sort_inputs returns.
    "PlanCacheMode",
    "SortInput",
    "indexes_used",
    "parse_explain",
    "plan_cache_mode",
    "sort_inputs",
    "sorts_over",
    # 6. predicates of statements against the queue's (ValueJudgement is what predicate_implies
    # returns).
    "ValueJudgement",
    "index_predicate_columns",
    "operand_values",
    "predicate_implies",
    "predicate_text",
    "predicate_words",
    # 7. index fixes built from a description, and the round-robin pattern.
    "CONCURRENT_BUILD_NOTE",
    "IndexFix",
    "IndexKey",
    "IndexMatch",
    "comparable_index",
    "covering_index",
    "existing_index",
    "existing_tenant_index",
    "index_keys",
    "live_set_index",
    "matching_statements",
    "round_robin_fix",
    "set_rows_index",
    "tenant_index",
    "tenant_order",
    # 7a. retention of a table partitioned by time: old partitions detached (CONCURRENTLY from
    # the version CONCURRENT_DETACH_VERSION names) and dropped, never one holding a waiting row.
    "CONCURRENT_DETACH_VERSION",
    "detach",
    "guarded_drop",
    "waiting_guard",
    # 8. who else reads a queue's indexes, and SQL text: index_name is how every fix names an
    # index (IndexFix calls it), predicate_sql prints a predicate.
    "IndexUse",
    "Stakeholder",
    "index_use",
    "stakeholder_label",
    "index_name",
    "predicate_sql",
]
