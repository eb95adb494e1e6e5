"""Evidence in human words with units, for the reports people read (markdown, terminal).

A check's evidence is a mapping of stable field names to raw values (``index_bytes:
66854912``): right for JSON, wrong for an incident review. Here each field gets a label and
its value a unit (``Index size | 63.8 MB``); ``<field>_source`` is folded into its field
(``Live rows | 6,051 (pg_stats of status)``); the thresholds a check compared with (its
options, ``min_*``) are set apart, as what the finding was flagged against; plans and
statements are blocks of their own.

A check declares the labels of its own fields (``check(..., labels=...)``, carried by the
report's rules); the table here holds those many checks share, the helpers of qadvisor.api
emit, and those the renderers name themselves. A field no label is known for is still shown,
its name turned into words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from qadvisor.model import Report
from qadvisor.render.values import evidence_text
from qadvisor.units import human_bytes

LABELS: Mapping[str, str] = {
    "analyzed_ms": "Run time (EXPLAIN ANALYZE)",
    "archive_rows": "Rows outside the live set",
    "sets": "Columns set",
    "stopped_by": "Not HOT because of",
    "references": "Columns it reads",
    "scans": "Index scans",
    "bytes": "Size",
    "rows": "Rows",
    "fired_by": "Decided by (measured, estimate or --analyze)",
    "index_bytes_series": "Index size over time",
    "index_growth_per_day_bytes": "Index growth a day",
    "index_growth_from": "Index growth, measured",
    "binding": "Values bound where the text hid them",
    "bindings_without_it": "Other plausible bindings, without the problem",
    "calls": "Calls",
    "confirmed_by": "Confirmed by",
    "near_threshold": "Too close to a threshold",
    "custom_plan_cost": "Custom plan cost",
    "custom_plan_scan": "Custom plan scan",
    "custom_values": "Custom plan values",
    "planned_as": "Planned as",
    "planned_with_search_path": "Planned with search_path",
    "partitions_read": "Partitions in the plans",
    "estimated_fresh_bytes": "Size once rebuilt (estimate)",
    "estimated_partial_bytes": "Partial index size (estimate)",
    "idle_tenants": "Idle tenants in the rotation",
    "index_bytes": "Index size",
    "index_definition": "Index definition",
    "index_entries": "Index entries",
    "index_predicate": "Index predicate",
    "last_autovacuum": "Last autovacuum",
    "live_rows": "Live rows",
    "live_rows_stale": "Live rows: statistics older than the changes since",
    "lock_level": "Locking level",
    "locked_tables": "Tables locked",
    "mean_exec_ms": "Mean execution time",
    "n_dead_tup": "Dead tuples",
    "order_by": "ORDER BY",
    "partial_index": "Partial index",
    "rotation_rows": "Rows in the rotation table",
    "rotation_table": "Rotation table",
    "scan_filter": "Scan filter",
    "scan_node": "Scan node",
    "shared_blks_per_call": "Shared blocks per call",
    "rows_per_call": "Rows per call",
    "size_ratio": "Size against the partial index",
    "source": "Seen in",
    "statement": "Statement",
    "table_bytes": "Table size",
    "partitions_taking_writes": "Partitions that take writes",
    "table_pages": "Table pages",
    "table_rows": "Table rows",
    "tenant_column": "Tenant column",
    "tenant_facts": "Tenant counts, notes",
    "tenants": "Tenants",
    "top_tenant": "Largest tenant",
    "top_tenant_share": "Largest tenant's share",
    "vacuum_trigger": "Vacuum trigger (dead tuples)",
    "wait_policy": "Wait policy",
    # What the finding was flagged against: the check's options.
    "latent_top_share": "Largest tenant's share for a latent finding",
    "min_index_bytes": "Minimum index size",
    "min_size_ratio": "Minimum size ratio",
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


def labels_of(report: Report, code: str) -> Mapping[str, str]:
    """The labels check ``code`` declares for its own fields (none for a check the report
    does not describe)."""
    return next((rule.labels for rule in report.rules if rule.code == code), {})


def label(field: str, own: Mapping[str, str] | None = None) -> str:
    """A field's label: the check's own (``own``), else the shared one, else its name turned
    into words (``rows_seen`` -> ``Rows seen``)."""
    known = (own or {}).get(field) or LABELS.get(field) or BLOCKS.get(field)
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


def human_evidence(
    evidence: Mapping[str, object], own: Mapping[str, str] | None = None
) -> HumanEvidence:
    """A finding's evidence as labelled lines, each ``<field>_source`` folded into its field;
    ``own``: the labels its check declares."""
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
        line = Line(field, label(field, own), text)
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
