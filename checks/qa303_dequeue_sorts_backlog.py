"""QA303 dequeue-sorts-backlog."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from qadvisor.api import (
    NOISE_MARGIN,
    Dequeue,
    DequeueStatement,
    Finding,
    Fix,
    PlanNode,
    Severity,
    Skip,
    Snapshot,
    Statement,
    Table,
    Target,
    analyze,
    at_least,
    check,
    describe_node,
    human_count,
    judgeable_dequeues,
    plan_outline,
    statement_evidence,
    statement_label,
)
from qadvisor.api.provisional import (
    CONCURRENT_BUILD_NOTE,
    IndexFix,
    IndexKey,
    SortInput,
    distinct_values,
    existing_index,
    index_keys,
    live_set_index,
    over_bindings,
    parse_index_predicate,
    predicate_implies,
    predicate_text,
    predicate_words,
    sort_inputs,
    statement_id,
)


@dataclass(frozen=True)
class Options:
    # Rows a claim must read (the sort's input, or the whole table for a Seq Scan) before
    # sorting them is worth an index: below this a top-N sort is a fraction of a millisecond.
    min_rows_read: float = 1_000
    # Shared blocks per call (pg_stat_statements) at or above this, after min_calls calls,
    # for a claim whose plan sorts what its scan returns: 8 MiB read per call to return a
    # few rows is the backlog read and sorted, whatever the planner estimated (statistics
    # gathered before the backlog arrived put it low). A claim that writes its rows and
    # their index entries reads tens of blocks per row, far below this.
    min_blocks_per_call: float = 1_000
    # ... judged only after this many calls.
    min_calls: int = 50
    # Row estimates move with ANALYZE's sample: a value this share past a threshold or less
    # is reported as info, not warning, so two runs on the same database agree.
    margin: float = NOISE_MARGIN


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "analyzed_rows_read": "Rows read (EXPLAIN ANALYZE)",
    "analyzed_rows_removed_by_filter": "Rows removed by filter (EXPLAIN ANALYZE)",
    "analyzed_sort_node": "Sort node (EXPLAIN ANALYZE)",
    "limit": "LIMIT",
    "presorted_key": "Presorted key (Incremental Sort)",
    "rows_read": "Rows read",
    "first_group_rows": "Rows in the first presorted group",
    "rows_read_per_row_returned": "Rows read per row returned",
    "rows_sorted": "Rows sorted",
    "sort_key": "Sort key",
    "sort_node": "Sort node",
    "min_blocks_per_call": "Minimum shared blocks per call",
    "min_rows_read": "Minimum rows read",
}


@check("QA303", "dequeue-sorts-backlog", severity=Severity.WARNING, category="statements",
       options=Options,
       requires=("table_facts", "index_definitions", "statements", "plans"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """No index supplies the dequeue's ORDER BY, so every claim reads and sorts the backlog.

    ## What it finds
    A dequeue statement with ORDER BY and LIMIT whose custom plan (made with the live value)
    has a Sort above a scan of the queue table: a top-N heapsort over every queued row the
    scan returns, or over a sequential scan of the whole table, archive included. An
    `Incremental Sort` counts too when the first group of its presorted key is the backlog:
    it sorts that whole group before returning a row, and a key that is NULL for most
    waiting rows, sorted NULLS FIRST, puts them all in the first group, however many
    distinct values the planner counts over the table. The group is sized by `--analyze`
    when given (the rows the scan returned to the sort), else from pg_stats of the key
    (its null fraction when NULLs come first, every row when ANALYZE sampled no value, else
    the rows over its distinct values). A key of several columns (`schedule_at NULLS FIRST,
    expected_at` before `id`) is sized column by column, the shares multiplied as the
    planner would, taking the columns as independent; two columns NULL in every sampled
    row make the whole backlog one group.
    The evidence shows what pg_stat_statements measured for the statement (calls, mean
    time, shared blocks per call) beside the plan.

    ## Why it matters
    A claim wants one row (or a few). Without an index that returns rows in the ORDER BY's
    order under the dequeue's predicate, each claim reads every candidate row, sorts them and
    throws all but LIMIT away, while holding its row locks. The cost grows with the backlog:
    exactly when the queue falls behind, every claim gets slower.

    ## How to fix
    `CREATE INDEX CONCURRENTLY ... (<ORDER BY columns>) WHERE <live predicate>`: a partial
    index whose key is the ORDER BY, so the claim reads the first rows of the index and stops
    after LIMIT. For a round-robin sub-select the key starts with the tenant column; for a
    claim of one queue among several (`queue = $1`) it starts with that column, so the claim
    descends to its queue's rows instead of walking every queue's (see QA304). The
    statement's predicate must imply the index's (see QA301 / QA302).
    The CREATE INDEX step names the recorded statements whose WHERE and ORDER BY the new
    index matches, derived from their text (not a plan: the index does not exist yet), or
    says that none does; an index that an existing valid one already covers (the same
    leading keys, a predicate the new one implies) is not proposed.

    ## When it stays quiet
    An index supplies the order, or an index prefix does and the Incremental Sort's first
    group is small; the sort's input is bounded per group (a `CROSS JOIN LATERAL` whose
    branches each end in `LIMIT n` over an ordered index scan: the Sort above gets at most
    groups x n rows, whatever the inner scan's estimate; a branch with a Sort of its own
    under the LIMIT is judged as any sort); the statement has no ORDER BY or no LIMIT; the
    sort reads fewer than `min_rows_read` rows by the planner's estimate and the server
    measured fewer than `min_blocks_per_call` shared blocks per call (or the statement has
    fewer than `min_calls` calls). An Incremental Sort whose first group pg_stats cannot size
    (a presorted column never analyzed, or an expression) is a skip that says so, not a
    quiet pass: `--analyze` measures the group. A presorted key NULL mostly in the archive
    looks, to pg_stats, like one NULL in the backlog: `--analyze` measures it. The rows
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


def _judge(snapshot: Snapshot, d: Dequeue, options: Options) -> Finding | Skip | None:
    """The finding about the dequeue's custom plan, if one of its sorts sorts enough rows;
    a skip when an Incremental Sort's first group could not be sized."""
    stmt, table = d.statement, d.table
    if stmt.custom_plan is None:
        return None
    unsized: SortInput | None = None
    measured = sort_inputs(stmt.analyzed_plan, table.schema, table.name)
    for at, sorted_input in enumerate(sort_inputs(stmt.custom_plan, table.schema, table.name)):
        if sorted_input.limit is not None:
            # Every way down to the table passes a LIMIT (a LATERAL branch per group, each
            # an ordered scan that stops after n rows): the sort gets at most loops x n
            # rows, and no index on the table would shrink that.
            continue
        analysed = _same_node(sorted_input, measured, at)
        sorting = _sorting(sorted_input, analysed, table)
        if sorting is None:
            unsized = unsized or sorted_input
            continue
        if sorting.rows < options.min_rows_read:
            counted = _measured(stmt, options)
            if counted is None:
                continue
            return _finding(snapshot, d, stmt.custom_plan, sorting, options, counted)
        return _finding(snapshot, d, stmt.custom_plan, sorting, options)
    if unsized is not None:
        # Silence here would be an all-clear nobody earned: the group may be the backlog.
        return Skip(
            f"{statement_id(stmt)}: its Incremental Sort (Presorted Key: "
            f"{', '.join(unsized.sort.presorted_key)}) sorts each group of equal presorted "
            "values whole, and pg_stats does not size the first one (a column never analyzed, "
            "or an expression); --analyze measures it",
            d.queue.qualified,
        )
    return None


def _measured(stmt: Statement, options: Options) -> tuple[str, bool] | None:
    """What pg_stat_statements measured of a claim whose plan sorts fewer rows than
    ``min_rows_read`` by the planner's estimate, when it reads ``min_blocks_per_call`` shared
    blocks per call or more after ``min_calls`` calls: (the sentence that says so, whether it
    is within the margin of the threshold). None when it did not measure that much."""
    blocks, calls = stmt.shared_blks_per_call, stmt.calls or 0
    if blocks is None or not at_least(calls, options.min_calls, options.margin):
        return None
    many = at_least(blocks, options.min_blocks_per_call, options.margin)
    if many is False:
        return None
    rows = f" returning {stmt.rows_per_call:,.0f} rows" if stmt.rows_per_call is not None else ""
    return (
        f"pg_stat_statements measured {blocks:,.0f} shared blocks per call{rows} over "
        f"{calls:,} calls"
    ), many is None


@dataclass(frozen=True)
class _Sorting:
    """What one claim sorts: ``rows`` (the whole input of a Sort, or an Incremental Sort's
    first group), ``read`` (what the scan visits), and where the numbers come from."""

    node: SortInput
    analysed: SortInput | None
    rows: float
    read: float
    group_source: str | None = None  # an Incremental Sort's first group: how it was sized


def _same_node(node: SortInput, measured: list[SortInput], at: int) -> SortInput | None:
    """The --analyze plan's node for ``node`` (the same plan run): the one at the same place
    with the same type and key, else the first with that type and key."""
    same = [
        m
        for m in measured
        if m.sort.node_type == node.sort.node_type and m.sort.sort_key == node.sort.sort_key
    ]
    if at < len(measured) and measured[at] in same:
        return measured[at]
    return same[0] if same else None


def _sorting(node: SortInput, analysed: SortInput | None, table: Table) -> _Sorting | None:
    if not node.incremental:
        read = _rows_read(node.scan, table)
        return _Sorting(node, analysed, max(read, node.sort.plan_rows), read)
    group = _first_group(node, analysed, table)
    if group is None:
        return None
    rows, source = group
    return _Sorting(node, analysed, rows, rows, source)


def _first_group(
    node: SortInput, analysed: SortInput | None, table: Table
) -> tuple[float, str] | None:
    """Rows in the first group of an Incremental Sort's presorted key, all of which it sorts
    before returning a row, and how that is known: measured by --analyze (the rows the scan
    returned), else from pg_stats of the key's columns; None when neither tells.

    The planner takes every group to be of average size; a key NULL for most waiting rows,
    sorted NULLS FIRST, puts the backlog in one first group. A key of several columns (pq's
    ``schedule_at NULLS FIRST, expected_at`` before ``id``) has for first group the rows
    where each column holds its first value: the share of each column's first group,
    multiplied, taking the columns as independent (the planner's own assumption)."""
    if analysed is not None and analysed.scan.actual_rows is not None:
        rows = analysed.scan.actual_rows * (analysed.scan.actual_loops or 1)
        return rows, (
            f"measured by --analyze: the scan returned {rows:,.0f} rows to the Incremental "
            "Sort for one claim"
        )
    sort = node.sort
    presorted = sort.presorted_key
    if not presorted or len(sort.sort_key) < len(presorted):
        return None
    scan_rows = node.scan.plan_rows
    groups = [_column_group(k, table, scan_rows) for k in sort.sort_key[: len(presorted)]]
    if any(g is None for g in groups):
        return None
    known = [g for g in groups if g is not None]
    if len(known) == 1:
        return known[0].rows, f"pg_stats: {known[0].text}, {known[0].consequence(scan_rows)}"
    parts = "; ".join(g.text for g in known)
    columns = ", ".join(g.column for g in known)
    if all(g.every_row for g in known):
        return scan_rows, (
            f"pg_stats: {parts}; so the first group of equal {columns} is every one of the "
            f"{human_count(scan_rows)} rows the scan returns"
        )
    share = math.prod(g.rows / scan_rows for g in known) if scan_rows > 0 else 0.0
    rows = share * scan_rows
    return rows, (
        f"pg_stats: {parts}; taken as independent, the first group of equal {columns} holds "
        f"about {human_count(rows)} of the {human_count(scan_rows)} rows the scan returns"
    )


@dataclass(frozen=True)
class _ColumnGroup:
    """The rows of the scan in the first group of one presorted column, and why."""

    column: str
    rows: float
    text: str
    up_to: bool  # the rows are a bound: the column's NULLs may lie outside the scan
    every_row: bool = False  # ANALYZE sampled no value: one group, whatever NULLS FIRST/LAST

    def consequence(self, scan_rows: float) -> str:
        if self.every_row:
            return (
                f"so the first group is every one of the {human_count(scan_rows)} rows the "
                "scan returns"
            )
        if self.up_to:
            return (
                f"so the first group holds up to {human_count(self.rows)} of the "
                f"{human_count(scan_rows)} rows the scan returns"
            )
        return f"so the first group holds about {human_count(self.rows)} of them"


def _column_group(key: str, table: Table, scan_rows: float) -> _ColumnGroup | None:
    """The first group of one presorted column (``key`` as the Sort Key prints it), from
    pg_stats: its NULLs when they sort first and outnumber an average group, every row when
    ANALYZE sampled no value, else the average group over its distinct values."""
    column = _plain_column(key.split(" ", 1)[0])
    stats = table.stats_of(column) if column is not None else None
    if column is None or stats is None:
        return None
    if stats.null_frac >= 1.0:
        return _ColumnGroup(
            column,
            scan_rows,
            f"{column} is NULL in every row ANALYZE sampled (the table has "
            f"{human_count(table.reltuples)} rows)",
            up_to=False,
            every_row=True,
        )
    distinct = distinct_values(table, column)
    if distinct is None:
        return None
    groups = max(distinct + (1 if stats.null_frac > 0 else 0), 1.0)
    average = scan_rows / groups
    first = key.upper()
    nulls_first = "NULLS FIRST" in first or (" DESC" in first and "NULLS LAST" not in first)
    nulls = stats.null_frac * max(table.reltuples, 0.0)
    if nulls_first and min(nulls, scan_rows) > average:
        return _ColumnGroup(
            column,
            min(nulls, scan_rows),
            f"{column} is NULL in {stats.null_frac:.1%} of the table's "
            f"{human_count(table.reltuples)} rows and NULLs sort first",
            up_to=True,
        )
    return _ColumnGroup(
        column,
        average,
        f"{distinct:,.0f} distinct values of {column} over the {human_count(scan_rows)} rows "
        "the scan returns",
        up_to=False,
    )


def _plain_column(key: str) -> str | None:
    """The column of a sort key as EXPLAIN VERBOSE prints it (``jobs.schedule_at``)."""
    name = key.rsplit(".", 1)[-1]
    return name if name.isidentifier() and name.islower() else None


def _rows_read(scan: PlanNode, table: Table) -> float:
    """Rows the scan visits per execution: the whole table for a Seq Scan."""
    if scan.node_type == "Seq Scan":
        return max(table.reltuples, scan.plan_rows)
    return scan.plan_rows


def _finding(
    snapshot: Snapshot,
    d: Dequeue,
    custom_plan: PlanNode,
    sorting: _Sorting,
    options: Options,
    measured: tuple[str, bool] | None = None,
) -> Finding:
    """The custom plan sorts what a scan reads (``sorting``) to return the statement's LIMIT;
    ``measured``: the server's counters, not the planner's estimate, put it past the
    threshold (what they say, whether it is near the threshold)."""
    stmt, table = d.statement, d.table
    sort, scan, read = sorting.node.sort, sorting.node.scan, sorting.read
    name = statement_id(stmt)
    label = statement_label(stmt)
    limit = d.parsed.limit or 1
    archive = scan.node_type == "Seq Scan" or (
        scan.index is not None and not _is_partial(table, scan.index)
    )
    if sorting.group_source is None:
        message = (
            f"{label} sorts {human_count(sort.plan_rows)} rows (Sort Key: "
            f"{', '.join(sort.sort_key)}) from {describe_node(scan)} to return {limit}: no "
            f"index supplies its ORDER BY under its predicate, so each claim reads "
            f"{human_count(read)} rows" + (", archive included." if archive else ".")
        )
    else:
        presorted = ", ".join(sort.presorted_key)
        message = (
            f"{label} sorts about {human_count(sorting.rows)} rows per claim to return "
            f"{limit}: {describe_node(scan)} supplies only {presorted} of its ORDER BY "
            f"(Incremental Sort, Sort Key: {', '.join(sort.sort_key)}), and the first group "
            f"of equal {presorted} is sorted whole before a row comes out "
            f"({sorting.group_source})."
        )
    rows = sorting.rows
    if measured is not None:
        said, near = measured
        message += (
            f" The planner estimates {human_count(rows)} rows, under min_rows_read "
            f"({options.min_rows_read:,.0f}), but {said}: the claim reads far more than the "
            "estimate (statistics older than the backlog put it low)."
        )
        if near:
            message += (
                f" Within {options.margin:.0%} of min_blocks_per_call "
                f"({options.min_blocks_per_call:,.0f}): info until it is clearly past it."
            )
        fired_by = "measured"
    else:
        near = at_least(rows, options.min_rows_read, options.margin) is None
        if near:
            message += (
                f" The estimate is within {options.margin:.0%} of min_rows_read "
                f"({options.min_rows_read:,.0f}): info until it is clearly past it."
            )
        by_analyze = sorting.group_source is not None and sorting.analysed is not None
        fired_by = "--analyze" if by_analyze else "estimate"
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
        "rows_sorted": round(sort.plan_rows if sorting.group_source is None else rows),
        "rows_read": round(read),
        "rows_read_per_row_returned": round(read / limit, 1),
        "custom_values": dict(stmt.custom_values),
        "custom_plan": "\n".join(plan_outline(custom_plan)),
        "custom_plan_cost": custom_plan.total_cost,
        "table_rows": round(table.reltuples),
        "min_rows_read": options.min_rows_read,
        "near_threshold": (
            f"{rows:,.0f} rows read against {options.min_rows_read:,.0f}"
            if measured is None
            else f"{stmt.shared_blks_per_call:,.0f} shared blocks per call against "
            f"{options.min_blocks_per_call:,.0f}"
        )
        if near
        else None,
        "fired_by": fired_by,
        **({"min_blocks_per_call": options.min_blocks_per_call} if measured else {}),
    }
    if sorting.group_source is not None:
        evidence |= {
            "presorted_key": list(sort.presorted_key),
            "first_group_rows": round(rows),
            "first_group_rows_source": sorting.group_source,
        }
    # What the claim cost as it ran, beside the plan that explains it.
    evidence |= {
        k: v
        for k, v in (
            ("calls", stmt.calls),
            ("mean_exec_ms", stmt.mean_exec_ms),
            ("shared_blks_per_call", stmt.shared_blks_per_call),
            ("rows_per_call", stmt.rows_per_call),
        )
        if v is not None
    }
    analysed = sorting.analysed
    if analysed is not None:
        evidence |= {
            "analyzed_rows_read": analysed.scan.actual_rows,
            "analyzed_rows_removed_by_filter": analysed.scan.rows_removed_by_filter,
            "analyzed_ms": stmt.analyzed_ms,
            "analyzed_sort_node": describe_node(analysed.sort),
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
    else:
        # queue = $1: the claim reads one queue's rows. Led by that column, the index gives
        # them in ORDER BY order; without it, the claim would walk every queue's rows in
        # that order and throw the others' away (QA304).
        lead_with = [c for c in d.compared_columns() if all(k.column != c for k in keys)]
        if lead_with:
            keys = (*(IndexKey(c) for c in lead_with), *keys)
            notes.append(
                f"The key starts with {', '.join(lead_with)}, which the claim compares with "
                "one value: it descends to that value's rows and reads them in ORDER BY order."
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
    return Fix(notes=" ".join(notes), steps=build.steps(snapshot, d.statement))


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
