"""Evidence in human words with units, for the reports people read (markdown, terminal).

A check's evidence is a mapping of stable field names to raw values (``index_bytes:
66854912``): right for JSON, wrong for an incident review. Here each field gets a label and
its value a unit (``Index size | 63.8 MB``); ``<field>_source`` is folded into its field
(``Live rows | 6,051 (pg_stats of status)``); the thresholds a check compared with (its
options, ``min_*``) are set apart, as what the finding was flagged against; plans and
statements are blocks of their own. A field no label is known for (a third-party check's)
is still shown, its name turned into words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from qadvisor.render.values import evidence_text
from qadvisor.units import human_bytes

LABELS: Mapping[str, str] = {
    "active_tenants": "Tenants with work",
    "age_conditions": "Age conditions",
    "actual_probes": "Probes run (EXPLAIN ANALYZE)",
    "age_s": "Age",
    "analyzed_ms": "Run time (EXPLAIN ANALYZE)",
    "analyzed_custom_ms": "Run time of the custom plan (EXPLAIN ANALYZE)",
    "analyzed_rows_read": "Rows read (EXPLAIN ANALYZE)",
    "analyzed_rows_removed_by_filter": "Rows removed by filter (EXPLAIN ANALYZE)",
    "analyzed_sort_node": "Sort node (EXPLAIN ANALYZE)",
    "application_name": "Application name",
    "archive_fraction": "Finished rows",
    "archive_rows": "Rows outside the live set",
    "archive_rows_at_least": "Rows outside the live set: a lower bound",
    "updates": "Updates of the table",
    "hot_updates": "HOT updates",
    "hot_share": "Share of updates HOT",
    "updates_from": "Updates, from",
    "statements": "Statements whose updates could be HOT",
    "recorded_updates": "Rows those statements updated",
    "indexes_stopping_hot": "Indexes that stop them being HOT",
    "indexes_each_update_writes": "Indexes each non-HOT update writes into",
    "partial_indexes_written_when_the_row_matches": "Partial indexes written when the row matches",
    "fillfactor": "Fillfactor",
    "sets": "Columns set",
    "stopped_by": "Not HOT because of",
    "references": "Columns it reads",
    "scans": "Index scans",
    "bytes": "Size",
    "rows": "Rows",
    "filter_column": "Column filtered, not in the index",
    "scan_index": "Index walked",
    "scan_index_keys": "Index walked: keys",
    "scan_index_cond": "Index Cond",
    "planner_rows_estimate": "Planner's row estimate for the scan",
    "index_rows": "Index entries",
    "rows_removed_per_claim": "Rows removed by filter per claim (--analyze)",
    "estimated_rows_removed_per_claim": "Rows removed per claim, as the planner estimates",
    "fired_by": "Decided by (measured, estimate or --analyze)",
    "archive_share": "Share of the table outside the live set",
    "live_rows_from": "Live rows, from",
    "dated_by": "Dated by",
    "dated_by_kind": "Dated by (finish or creation)",
    "dated_by_from": "Why that column dates them",
    "oldest_row": "Oldest row",
    "oldest_row_from": "Oldest row, from",
    "oldest_row_age_days": "Oldest row's age (days)",
    "age_measured_at": "Age measured at",
    "age_measured_from": "Age measured at, from",
    "max_age_days": "Retention threshold (days)",
    "rows_added_per_day": "Rows added a day",
    "rates_from": "Rates measured over",
    "proposed_vacuum_trigger": "Vacuum trigger the fix sets (dead tuples)",
    "dead_tuples_series": "Dead tuples over time",
    "table_rows_series": "Live tuples over time",
    "ids_used_series": "Ids used over time",
    "index_bytes_series": "Index size over time",
    "index_growth_per_day_bytes": "Index growth a day",
    "index_growth_from": "Index growth, measured",
    "rows_added_per_day_from": "Rows added a day, from",
    "autoanalyze_count": "Autoanalyze runs",
    "autovacuum_count": "Autovacuum runs",
    "autovacuum_enabled": "Autovacuum enabled",
    "id_column": "Id column",
    "column_type": "Column type",
    "sequence": "Sequence",
    "sequence_type": "Sequence type",
    "id_limit": "Largest id",
    "ids_used": "Ids used",
    "ids_used_from": "Ids used, from",
    "share_used": "Share of the range used",
    "ids_per_day": "Ids per day (at least)",
    "rate_from": "Rate from",
    "days_left": "Days left (at most)",
    "autovacuum_vacuum_max_threshold": "autovacuum_vacuum_max_threshold",
    "autovacuum_vacuum_scale_factor": "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_threshold": "autovacuum_vacuum_threshold",
    "backlog_ahead_of_new_job": "Backlog ahead of a new job",
    "binding": "Values bound where the text hid them",
    "bindings_without_it": "Other plausible bindings, without the problem",
    "calls": "Calls",
    "confirmed_by": "Confirmed by",
    "contradicted_by": "Contradicted by",
    "near_threshold": "Too close to a threshold",
    "counts_complete": "Tenant counts complete",
    "custom_plan_cost": "Custom plan cost",
    "custom_plan_scan": "Custom plan scan",
    "custom_values": "Custom plan values",
    "planned_as": "Planned as",
    "planned_with_search_path": "Planned with search_path",
    "partitions_read": "Partitions in the plans",
    "dead_tuples_per_s": "Dead tuples per second (measured)",
    "estimate_basis": "Estimate based on",
    "estimated_fresh_bytes": "Size once rebuilt (estimate)",
    "estimated_ms_per_dequeue": "Time per dequeue (estimate)",
    "estimated_partial_bytes": "Partial index size (estimate)",
    "estimated_wait_s_per_worker": "Wait per worker (estimate)",
    "existing_partial_index": "Partial index already there",
    "existing_partial_index_use": "Its use by claims",
    "fifo_statements": "FIFO claims",
    "filter": "Filter",
    "from_pg_stat_statements": "From pg_stat_statements",
    "generic_plan_cost": "Generic plan cost",
    "generic_plan_scan": "Generic plan scan",
    "generic_to_custom_cost_ratio": "Generic to custom plan cost",
    "idle_fraction": "Idle share of the rotation",
    "idle_tenants": "Idle tenants in the rotation",
    "idx_scan": "Index scans",
    "left_by": "Left by",
    "maintained_by_writes": "Maintained by writes",
    "shadowed_index": "Valid index beside it",
    "shadowed_index_bytes": "Size of the valid index",
    "invalid_indexes_on_table": "Invalid indexes on the table",
    "statements_checked": "Other recorded statements planned",
    "statements_reading_index": "Recorded statements that read the index",
    "claims_reading_index": "Other claims whose plans read the index",
    "claims_whose_generic_plan_alone_reads_index": (
        "Claims whose generic plan alone reads the index, never scanned while they ran"
    ),
    "claims_not_planned": "Claims that could not be planned",
    "statements_not_checked": "Recorded statements that could not be planned",
    "index": "Index",
    "index_bytes": "Index size",
    "index_columns": "Index columns",
    "index_cond": "Index condition",
    "index_definition": "Index definition",
    "index_entries": "Index entries",
    "index_idx_scan": "Index scans",
    "index_idx_tup_read": "Index entries read",
    "index_predicate": "Index predicate",
    "index_tup_read_per_scan": "Index entries read per scan",
    "indexes_used": "Indexes used",
    "inner_node": "Inner plan node",
    "inserts_per_s": "Inserts per second (measured)",
    "job_locked": "Job row locked",
    "kind": "Kind",
    "last_autoanalyze": "Last autoanalyze",
    "last_autovacuum": "Last autovacuum",
    "last_vacuum": "Last vacuum",
    "latent": "Latent",
    "limit": "LIMIT",
    "live_predicate": "Live predicate",
    "live_rows": "Live rows",
    "live_rows_stale": "Live rows: statistics older than the changes since",
    "live_rows_at_most": "Live rows now, at most",
    "live_rows_at_most_from": "Live rows now, at most: from",
    "judged_on": "Judged on",
    "lock_level": "Locking level",
    "lock_of": "Locked with OF",
    "lock_strength": "Lock strength",
    "locked_tables": "Tables locked",
    "maintenance_kind": "Maintenance statement",
    "maintenance_reason": "Why it is maintenance",
    "mean_exec_ms": "Mean execution time",
    "mean_job_seconds": "Mean job duration",
    "n_dead_tup": "Dead tuples",
    "n_distinct_tenant": "Tenants in pg_stats (n_distinct)",
    "name": "Name",
    "order_by": "ORDER BY",
    "presorted_key": "Presorted key (Incremental Sort)",
    "order_index": "Index giving the order",
    "order_index_columns": "Its columns",
    "parameter_columns": "Columns compared with a parameter",
    "partial_index": "Partial index",
    "partial_index_rows": "Rows in the partial index",
    "partial_index_scans": "Scans of the partial index",
    "partition_by": "PARTITION BY",
    "plan_cache_mode": "plan_cache_mode",
    "plan_error": "Planning error",
    "planner_probe": "Planner probe",
    "planner_rows_per_tenant": "Planner's rows per tenant",
    "plans_per_call": "Plans per call",
    "queue_dead_tuples": "Dead tuples in the queue",
    "queue_table": "Queue table",
    "reltuples": "Rows (pg_class.reltuples)",
    "role": "Role",
    "rotation_rows": "Rows in the rotation table",
    "rotation_rows_checked": "Rotation rows checked per dequeue",
    "rotation_table": "Rotation table",
    "round_robin_wait_s_per_worker": "Wait per worker, round robin (estimate)",
    "rows_read": "Rows read",
    "first_group_rows": "Rows in the first presorted group",
    "rows_read_per_row_returned": "Rows read per row returned",
    "rows_removed_by_filter_per_probe": "Rows removed by filter per probe",
    "rows_sorted": "Rows sorted",
    "sample_dead_tuples": "Dead tuples made in the interval measured",
    "sample_inserts": "Inserts in the interval measured",
    "sample_seconds": "Interval measured",
    "scan_filter": "Scan filter",
    "scan_node": "Scan node",
    "seconds_to_autovacuum": "Time to the next autovacuum",
    "settings_source": "Autovacuum settings from",
    "setting": "Setting",
    "shared_blks_per_call": "Shared blocks per call",
    "statements_evicted": "Statements pg_stat_statements evicted",
    "rows_per_call": "Rows per call",
    "readers_outside_live_set": "Readers of rows outside the live set (maintenance)",
    "partial_index_serves": "Statements the partial index serves",
    "shared_blocks": "Shared blocks",
    "size_ratio": "Size against the partial index",
    "sort_key": "Sort key",
    "sort_node": "Sort node",
    "source": "Seen in",
    "state": "State",
    "statement": "Statement",
    "statement_predicates": "Statement conditions",
    "table_bytes": "Table size",
    "partitioned_by": "Partitioned by",
    "partition": "Partition",
    "partitions_judged": "Partitions whose trigger the archive sets",
    "partitions_taking_writes": "Partitions that take writes",
    "partitions_autovacuum_disabled": "Partitions with autovacuum off",
    "retention_cutoff": "Partitions to drop ended before",
    "partitions_to_drop": "Partitions to drop",
    "partitions_to_drop_rows": "Rows in the partitions to drop",
    "partitions_to_drop_bytes": "Size of the partitions to drop",
    "partitions_to_drop_changed_since_analyze": "Partitions to drop changed since their ANALYZE",
    "partitions_kept": "Old partitions kept",
    "waiting_rows_judged_by": "Waiting rows judged by",
    "table_pages": "Table pages",
    "table_read_share": "Share of the table read per call",
    "table_rows": "Table rows",
    "tenant_column": "Tenant column",
    "tenant_facts": "Tenant counts, notes",
    "value": "Value",
    "tenants": "Tenants",
    "tenants_with_work": "Tenants with work",
    "top_tenant": "Largest tenant",
    "top_tenant_rows": "Largest tenant's live rows",
    "top_tenant_share": "Largest tenant's share",
    "top_to_median_ratio": "Largest to median tenant",
    "trigger_to_live_ratio": "Vacuum trigger to live rows",
    "user": "User",
    "vacuum_trigger": "Vacuum trigger (dead tuples)",
    "wait_formula": "Wait formula",
    "wait_policy": "Wait policy",
    "xmin_age": "xmin age (transactions)",
    # What the finding was flagged against: the check's options.
    "latent_top_share": "Largest tenant's share for a latent finding",
    "min_age_s": "Minimum age",
    "min_archive_fraction": "Minimum finished share",
    "min_idle_fraction": "Minimum idle share",
    "min_idle_tenants": "Minimum idle tenants",
    "min_index_bytes": "Minimum index size",
    "min_blocks_per_call": "Minimum shared blocks per call",
    "min_ratio": "Minimum ratio",
    "min_rows_read": "Minimum rows read",
    "min_sample_rows": "Minimum rows changed in a sample",
    "min_size_ratio": "Minimum size ratio",
    "min_trigger": "Minimum vacuum trigger",
    "min_xmin_age": "Minimum xmin age",
}

# Fields that hold a plan outline or a statement: shown as blocks, not table cells.
BLOCKS: Mapping[str, str] = {
    "custom_plan": "Custom plan",
    "generic_plan": "Generic plan",
    "statement_text": "Statement",
}
THRESHOLDS = frozenset({"latent_top_share"})


@dataclass(frozen=True)
class Line:
    """One row of evidence as a person reads it."""

    field: str  # the evidence field, as in the JSON
    label: str
    text: str


@dataclass(frozen=True)
class HumanEvidence:
    facts: tuple[Line, ...]  # what was measured
    thresholds: tuple[Line, ...]  # what it was flagged against
    blocks: tuple[Line, ...]  # plans and statements, verbatim


def is_threshold(field: str) -> bool:
    return field.startswith("min_") or field in THRESHOLDS


def label(field: str) -> str:
    """A field's label; an unknown one turned into words (``rows_seen`` -> ``Rows seen``)."""
    known = LABELS.get(field) or BLOCKS.get(field)
    if known:
        return known
    words = field.replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def value_text(field: str, value: object) -> str:
    """A value with the unit its field name gives it; a series (``<name>_series``: readings
    over time) as its first and last readings."""
    if field.endswith("_series") and isinstance(value, list) and value:
        return _series_text(field, value)
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value
    ):
        return ", ".join(value_text(field, v) for v in value) or "none"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return evidence_text(value)
    unit = _unit(field)
    if unit == "bytes":
        return human_bytes(value)
    if unit == "share":
        return f"{value * 100:.4g} %"
    if unit == "ratio":
        return f"{evidence_text(value)}x"
    if unit:
        return f"{evidence_text(value)} {unit}"
    return evidence_text(value)


def _series_text(field: str, points: list[object]) -> str:
    """``3 readings, 2026-12-07T09:00:00+00:00 to 09:00:10+00:00: 1,200 -> 9,800``: the
    series' first figure at its first and last reading."""
    first, last = points[0], points[-1]
    if not isinstance(first, dict) or not isinstance(last, dict):
        return evidence_text(points)
    name = next((k for k in first if k != "at"), None)
    if name is None:
        return evidence_text(points)
    unit_field = field.removesuffix("_series")
    start, end = str(first.get("at", "?")), str(last.get("at", "?"))
    same_day = start[:10] == end[:10]
    end = end[11:] if same_day else end
    return (
        f"{len(points)} readings, {start} to {end}: {value_text(unit_field, first.get(name))}"
        f" -> {value_text(unit_field, last.get(name))}"
    )


def human_evidence(evidence: Mapping[str, object]) -> HumanEvidence:
    """A finding's evidence as labelled lines, each ``<field>_source`` folded into its field."""
    facts: list[Line] = []
    thresholds: list[Line] = []
    blocks: list[Line] = []
    for field, value in evidence.items():
        if field.endswith("_source") and field.removesuffix("_source") in evidence:
            continue
        if field in BLOCKS:
            if value:
                blocks.append(Line(field, BLOCKS[field], str(value)))
            continue
        text = value_text(field, value)
        source = evidence.get(f"{field}_source")
        if source:
            text = f"{text} ({evidence_text(source)})"
        line = Line(field, label(field), text)
        (thresholds if is_threshold(field) else facts).append(line)
    return HumanEvidence(tuple(facts), tuple(thresholds), tuple(blocks))


def _unit(field: str) -> str:
    if field.endswith("_bytes"):
        return "bytes"
    if field.endswith("_per_s"):
        return "/s"
    if field.endswith("_ms"):
        return "ms"
    if field.endswith(("_s", "_seconds")) or field == "seconds_to_autovacuum":
        return "s"
    if field.endswith(("_fraction", "_share")):
        return "share"
    if field.endswith("_ratio"):
        return "ratio"
    return ""
