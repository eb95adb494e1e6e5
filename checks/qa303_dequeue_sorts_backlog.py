"""QA303 dequeue-sorts-backlog."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from qadvisor.api import (
    CONCURRENT_BUILD_NOTE,
    NOISE_MARGIN,
    Dequeue,
    DequeueStatement,
    Finding,
    Fix,
    IndexFix,
    IndexKey,
    PlanNode,
    Severity,
    Skip,
    Snapshot,
    Table,
    Target,
    analyze,
    at_least,
    check,
    describe_node,
    existing_index,
    human_count,
    index_keys,
    judgeable_dequeues,
    live_set_index,
    over_bindings,
    parse_index_predicate,
    plan_outline,
    predicate_implies,
    predicate_text,
    predicate_words,
    sorts_over,
    statement_evidence,
    statement_id,
    statement_label,
)


@dataclass(frozen=True)
class Options:
    # Rows a claim must read (the sort's input, or the whole table for a Seq Scan) before
    # sorting them is worth an index: below this a top-N sort is a fraction of a millisecond.
    min_rows_read: float = 1_000
    # Row estimates move with ANALYZE's sample: a value this share past a threshold or less
    # is reported as info, not warning, so two runs on the same database agree.
    margin: float = NOISE_MARGIN


@check("QA303", "dequeue-sorts-backlog", severity=Severity.WARNING, category="statements",
       options=Options,
       requires=("table_facts", "index_definitions", "statements", "plans"))  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """No index supplies the dequeue's ORDER BY, so every claim reads and sorts the backlog.

    ## What it finds
    A dequeue statement with ORDER BY and LIMIT whose custom plan (made with the live value)
    has a Sort above a scan of the queue table: a top-N heapsort over every queued row the
    scan returns, or over a sequential scan of the whole table, archive included.

    ## Why it matters
    A claim wants one row (or a few). Without an index that returns rows in the ORDER BY's
    order under the dequeue's predicate, each claim reads every candidate row, sorts them and
    throws all but LIMIT away, while holding its row locks. The cost grows with the backlog:
    exactly when the queue falls behind, every claim gets slower.

    ## How to fix
    `CREATE INDEX CONCURRENTLY ... (<ORDER BY columns>) WHERE <live predicate>`: a partial
    index whose key is the ORDER BY, so the claim reads the first rows of the index and stops
    after LIMIT. For a round-robin sub-select the key starts with the tenant column. The
    statement's predicate must imply the index's (see QA301 / QA302).
    The CREATE INDEX step names the recorded statements whose WHERE and ORDER BY the new
    index matches, derived from their text (not a plan: the index does not exist yet), or
    says that none does; an index that an existing valid one already covers (the same
    leading keys, a predicate the new one implies) is not proposed.

    ## When it stays quiet
    An index (or an Incremental Sort on an index prefix) supplies the order; the statement
    has no ORDER BY or no LIMIT; the sort reads fewer than `min_rows_read` rows. The rows
    are the planner's estimates, which move with ANALYZE's sample: up to `margin` (20 %)
    past `min_rows_read` the finding is info, so two runs give the same severity.
    Values pg_stat_statements hid (`state = ANY($4)`) are hypotheses: each plausible binding
    (the values of a partial index whose keys supply the ORDER BY, the queue's live values)
    is planned; a sort that only some bindings have is info naming the binding (`binding`)
    and those without it.
    """
    for d in judgeable_dequeues(snapshot):
        stmt, parsed = d.statement, d.parsed
        if not parsed.order_by:
            continue
        if stmt.custom_plan is None:
            if not stmt.plan_error:  # a plan error was reported as a skip already
                yield Skip(f"{statement_id(stmt)}: no custom plan was made", d.queue.qualified)
            continue
        if parsed.limit is None and not parsed.limit_is_parameter:
            continue
        # Values pg_stat_statements hid are hypotheses: each plausible binding is judged.
        answer = over_bindings(d, lambda v: _judge(snapshot, v, options))
        if answer is not None:
            yield answer


def _judge(snapshot: Snapshot, d: Dequeue, options: Options) -> Finding | None:
    """The finding about the dequeue's custom plan, if it sorts enough rows."""
    stmt, table = d.statement, d.table
    if stmt.custom_plan is None:
        return None
    sorts = sorts_over(stmt.custom_plan, table.schema, table.name)
    if not sorts:
        return None
    sort, scan = sorts[0]
    read = _rows_read(scan, table)
    if max(read, sort.plan_rows) < options.min_rows_read:
        return None
    return _finding(snapshot, d, stmt.custom_plan, (sort, scan), read, options)


def _rows_read(scan: PlanNode, table: Table) -> float:
    """Rows the scan visits per execution: the whole table for a Seq Scan."""
    if scan.node_type == "Seq Scan":
        return max(table.reltuples, scan.plan_rows)
    return scan.plan_rows


def _finding(
    snapshot: Snapshot,
    d: Dequeue,
    custom_plan: PlanNode,
    sorted_scan: tuple[PlanNode, PlanNode],
    read: float,
    options: Options,
) -> Finding:
    """The custom plan sorts what a scan (``sorted_scan``: the sort, the scan) reads, ``read``
    rows, to return the statement's LIMIT."""
    stmt, table = d.statement, d.table
    sort, scan = sorted_scan
    name = statement_id(stmt)
    label = statement_label(stmt)
    limit = d.parsed.limit or 1
    archive = scan.node_type == "Seq Scan" or (
        scan.index is not None and not _is_partial(table, scan.index)
    )
    message = (
        f"{label} sorts {human_count(sort.plan_rows)} rows (Sort Key: "
        f"{', '.join(sort.sort_key)}) from {describe_node(scan)} to return {limit}: no index "
        f"supplies its ORDER BY under its predicate, so each claim reads "
        f"{human_count(read)} rows" + (", archive included." if archive else ".")
    )
    rows = max(read, sort.plan_rows)
    near = at_least(rows, options.min_rows_read, options.margin) is None
    if near:
        message += (
            f" The estimate is within {options.margin:.0%} of min_rows_read "
            f"({options.min_rows_read:,.0f}): info until it is clearly past it."
        )
    evidence: dict[str, object] = {
        **statement_evidence(stmt),
        "source": stmt.source,
        "statement_text": stmt.text,
        "order_by": _order_text(d.parsed),
        "limit": limit,
        "sort_node": describe_node(sort),
        "sort_key": list(sort.sort_key),
        "scan_node": describe_node(scan),
        "scan_filter": scan.filter,
        "rows_sorted": round(sort.plan_rows),
        "rows_read": round(read),
        "rows_read_per_row_returned": round(read / limit, 1),
        "custom_values": dict(stmt.custom_values),
        "custom_plan": "\n".join(plan_outline(custom_plan)),
        "custom_plan_cost": custom_plan.total_cost,
        "table_rows": round(table.reltuples),
        "min_rows_read": options.min_rows_read,
        "near_threshold": f"{rows:,.0f} rows read against {options.min_rows_read:,.0f}"
        if near
        else None,
    }
    if stmt.analyzed_plan is not None:
        analysed = sorts_over(stmt.analyzed_plan, table.schema, table.name)
        if analysed:
            a_sort, a_scan = analysed[0]
            evidence |= {
                "analyzed_rows_read": a_scan.actual_rows,
                "analyzed_rows_removed_by_filter": a_scan.rows_removed_by_filter,
                "analyzed_ms": stmt.analyzed_ms,
                "analyzed_sort_node": describe_node(a_sort),
            }
    return Finding(
        target=Target("statement", table.schema, table.name, name),
        severity=Severity.INFO if near else None,
        message=message,
        evidence=evidence,
        explanation=(
            "A claim wants the first rows in ORDER BY order; without an index in that order "
            "under the predicate, the planner reads every candidate, sorts them and keeps "
            "LIMIT. The cost grows with the backlog, just when the queue falls behind."
        ),
        fix=_fix(snapshot, d),
    )


def _order_text(parsed: DequeueStatement) -> str:
    parts = []
    for item in parsed.order_by:
        text = item.column + (" DESC" if item.descending else "")
        if item.nulls_first is not None:
            text += " NULLS FIRST" if item.nulls_first else " NULLS LAST"
        parts.append(text)
    return ", ".join(parts)


def _is_partial(table: Table, index: str) -> bool:
    return any(i.name == index and i.is_partial for i in table.indexes)


def _fix(snapshot: Snapshot, d: Dequeue) -> Fix:
    parsed, table = d.parsed, d.table
    keys = index_keys(parsed.order_by, table)
    notes: list[str] = []
    if keys is None:
        return Fix(
            notes="The ORDER BY is an expression: build a partial index on that expression under "
            "the live predicate, or order by plain columns. " + CONCURRENT_BUILD_NOTE,
        )
    if parsed.lateral is not None and table.column(parsed.lateral.inner_column) is not None:
        lead = parsed.lateral.inner_column
        if all(k.column != lead for k in keys):
            keys = (IndexKey(lead), *keys)
            notes.append(
                f"The key starts with {lead}: the round-robin sub-select descends the index "
                "once per tenant."
            )
    build, source = _build(d, keys)
    if build.where is not None:
        notes.append(f"The WHERE is {source}, so the dequeue's predicate implies it.")
    else:
        notes.append(
            "No partial predicate fits the statement's condition: the index covers the whole "
            "table and grows with the archive (see QA101)."
        )
    predicate = parse_index_predicate(build.where) if build.where else None
    existing = existing_index(table, keys, predicate) if predicate or build.where is None else None
    if existing is not None:
        return Fix(
            notes=f"Index {existing.name} already has this key and predicate but the planner "
            "still sorts: its statistics are stale or estimate the live set as large. Refresh "
            "them, and check the statement's predicate implies the index's (QA302).",
            safety="safe",
            steps=(analyze(table),),
        )
    return Fix(notes=" ".join(notes), steps=(build.step(snapshot),))


def _build(d: Dequeue, keys: tuple[IndexKey, ...]) -> tuple[IndexFix, str]:
    """The new index, with where its predicate comes from: the queue's live predicate when
    the statement implies it (named as QA101 names the same index, so that their fixes never
    build it twice), else the statement's own condition, else none."""
    stmt, table, live = d.statement, d.table, d.queue.live
    if live is not None:
        judged = predicate_implies(d.parsed.predicates, live, stmt.custom_values)
        if judged.implies:
            return live_set_index(table, live, keys), "the queue's live predicate"
        conditions = [predicate_text(p, stmt.custom_values) for p in judged.predicates]
        if judged.predicates and all(conditions):
            where = " AND ".join(c for c in conditions if c)
            words = predicate_words(judged.predicates, stmt.custom_values)
            return IndexFix(table, keys, where, tuple(words)), "the statement's own condition"
    return IndexFix(table, keys), ""
