"""QA304 claim-filter-not-in-index."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from qadvisor.api import (
    NOISE_MARGIN,
    Dequeue,
    Finding,
    Fix,
    FixStep,
    Index,
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
    drop_index,
    human_count,
    ident,
    judgeable_dequeues,
    plan_outline,
    qualified,
    scans,
    statement_evidence,
    statement_label,
)
from qadvisor.api.provisional import (
    CONCURRENT_BUILD_NOTE,
    IndexKey,
    existing_index,
    index_keys,
    index_predicate_columns,
    index_use,
    indexes_used,
    live_set_index,
    over_bindings,
    predicate_implies,
    single_valued,
    sort_inputs,
    stakeholder_label,
    statement_id,
    statement_queue,
    unplanned_claims,
    unplanned_note,
)

_ORDERED_SCANS = ("Index Scan", "Index Only Scan")


@dataclass(frozen=True)
class Options:
    # Rows one claim reads and throws away (EXPLAIN ANALYZE's Rows Removed by Filter, per
    # loop) before the filter costs more than an index probe.
    min_rows_removed: float = 1_000
    # Shared blocks per call (pg_stat_statements) at or above this, for a claim that returns
    # a few rows through an index, show it reads far more of the index than it returns.
    min_blocks_per_call: float = 100
    # ... judged only after this many calls.
    min_calls: int = 50
    # Counters move between runs: within this share of a threshold, info only.
    margin: float = NOISE_MARGIN
    # Where an index led by the compared column exists and the plan walks another one: rows
    # changed since the last ANALYZE, as a share of the table, below which another ANALYZE
    # would sample the same table (autovacuum_analyze_scale_factor's default), so the
    # statistics, not their age, mislead the planner.
    stale_share: float = 0.1


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "filter_column": "Column filtered, not in the index",
    "scan_index": "Index walked",
    "scan_index_keys": "Index walked: keys",
    "scan_index_cond": "Index Cond",
    "planner_rows_estimate": "Planner's row estimate for the scan",
    "index_rows": "Index entries",
    "rows_removed_per_claim": "Rows removed by filter per claim (--analyze)",
    "estimated_rows_removed_per_claim": "Rows removed per claim, as the planner estimates",
}


@check("QA304", "claim-filter-not-in-index", severity=Severity.WARNING, category="statements",
       options=Options,
       requires=("table_facts", "index_definitions", "statements", "plans"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """The claim walks an index in ORDER BY order and filters out other queues' rows.

    ## What it finds
    A dequeue statement with ORDER BY and LIMIT that compares a column with one value
    (`WHERE queue = $1 AND state = 'available'`), whose custom plan reads the queue table
    through an index in the ORDER BY's order (an Index Scan under the LIMIT, no sort) that
    does not have that column: the column's condition is the scan's `Filter`, not its
    `Index Cond`. The scan returns rows of every queue in order and discards those of the
    others until it has LIMIT rows of the claimed one. The same walk over an index without
    the queue's live column (`WHERE status = 'pending' ORDER BY id` on the primary key alone)
    discards every finished row ahead of the first waiting one.

    ## Why it matters
    How many rows a claim discards depends on where the claimed queue's rows sit in the
    order, not on the planner's estimate (which assumes they are spread evenly): a backlog
    of one queue ahead of the others makes every claim of the others read all of it, so one
    queue's backlog slows every other queue's claim, under the row locks of a claim.
    Reported in 2026: good_job (199,953 rows removed by filter per claim; an index led by
    `queue_name` took the claim from 19.6 ms to 0.05 ms), pgqueuer (864 k queued jobs over
    18 entrypoints: 32 ms and 11,450 buffers per dequeue; with an index led by the
    entrypoint, 0.74 ms and 85 buffers). An ORM's claim (`WHERE status = 'pending' ORDER BY
    id LIMIT 10 FOR UPDATE SKIP LOCKED`, the primary key its only index) walked past 2,707
    finished rows per call, 375 shared blocks per call over 277 calls, while the planner,
    taking the waiting rows to be spread evenly, expected a handful.

    ## How to fix
    `CREATE INDEX CONCURRENTLY ... (<column>, <ORDER BY columns>) WHERE <live predicate>`:
    the claim descends straight to the claimed queue's first row in order (for the live
    column, `(<ORDER BY columns>) WHERE <live predicate>`: the finished rows are not in it;
    the primary key stays). The CREATE
    INDEX step names the recorded statements the index matches. While the old index exists
    the planner may keep walking it (it estimates the compared column's rows from the whole
    table's statistics): its DROP follows, for review, unless another recorded statement
    reads it or it enforces a constraint. A claim over several
    queues at once (`queue = ANY($1)`) needs one such descent per queue: a `CROSS JOIN
    LATERAL` over the list of queues, each branch ordered and limited.

    When such an index exists already and the plan walks the other one, the planner's
    estimate of the column's rows is what misleads it, and the fix is ANALYZE, with the
    n_distinct pin as the next step if the plan still walks. Where the column is compared
    with another table's column (a lateral probe per tenant), which the planner estimates
    from n_distinct alone, and the statistics are current (an ANALYZE on record, fewer than
    `stale_share` of the rows changed since), another ANALYZE would count the same (a sample
    of a table where one tenant holds most rows sees few values): the fix says what pg_stats
    counts and gives the pin, `ALTER TABLE ... ALTER COLUMN ... SET (n_distinct = <number of
    distinct values>)` and ANALYZE, as notes with the number left for the DBA (qadvisor
    counts no rows).

    ## When it stays quiet
    The index the claim walks leads with (or has in its condition, or is partial on) the
    compared column; the scan is of a partition that holds one value of the column (a table
    partitioned by list, a partition per queue), whose rows are all the claimed queue's; the
    claim sorts instead (QA303's); `--analyze` measured fewer than
    `min_rows_removed` rows discarded. Without `--analyze`, the finding rests on what the
    server measured of the statement beside the planner's estimate of the rows a claim
    discards (LIMIT x the index's rows / the rows that pass the filter, LIMIT taken from
    pg_stat_statements' rows per call when it is a parameter): shared blocks per call at or
    above `min_blocks_per_call` after `min_calls` calls confirm it (warning, whatever the
    estimate: `fired_by` is `measured`); few blocks against an estimate past
    `min_rows_removed` is info that names the counter contradicting the estimate
    (`contradicted_by`); without counters, an estimate past the threshold is info (`fired_by`
    is `estimate`), since the planner cannot tell how the rows are ordered. Otherwise a walk
    that filters another queue's column is info (latent), and one that filters the live
    column is quiet. Values pg_stat_statements hid are bound as QA303 binds them.
    """
    for d in judgeable_dequeues(snapshot):
        stmt, parsed = d.statement, d.parsed
        if not parsed.order_by or (parsed.limit is None and not parsed.limit_is_parameter):
            continue
        if stmt.custom_plan is None:
            if not stmt.plan_error:  # a plan error was reported as a skip already
                yield Skip(f"{statement_id(stmt)}: no custom plan was made", d.queue.qualified)
            continue
        answer = over_bindings(d, lambda v: _judge(snapshot, v, options))
        if answer is not None:
            yield answer


def _mentions(text: str | None, column: str) -> bool:
    # A word of the condition, qualified or not, cast or not (``(jobs.queue)::text``).
    return text is not None and re.search(rf"(^|[\s(.]){re.escape(column)}\b", text) is not None


def _ordered_scan(d: Dequeue, plan: PlanNode, column: str) -> PlanNode | None:
    """The index scan that returns the claim's rows in order and filters ``column``."""
    table = d.table
    sorted_scans = {id(s.scan) for s in sort_inputs(plan, table.schema, table.name)}
    for node in scans(plan, table.schema, table.name):
        if node.node_type not in _ORDERED_SCANS or id(node) in sorted_scans:
            continue
        idx = next((i for i in table.indexes if i.name == node.index), None)
        if idx is None or column in idx.columns or _mentions(node.index_cond, column):
            continue
        if node.partition is not None and column in single_valued(table, node.partition):
            continue  # a partition of one queue's rows: the filter discards none for it
        if column in index_predicate_columns(idx, table):
            # A partial index on the column holds the rows its condition takes; a claim that
            # locks rows keeps that condition as a Filter, to check it again on a locked row.
            continue
        if _mentions(node.filter, column):
            return node
    return None


def _analysed(d: Dequeue, scan: PlanNode) -> PlanNode | None:
    """The --analyze plan's scan of the same index (the same plan, run)."""
    plan = d.statement.analyzed_plan
    if plan is None:
        return None
    table = d.table
    return next((n for n in scans(plan, table.schema, table.name) if n.index == scan.index), None)


def _judge(snapshot: Snapshot, d: Dequeue, options: Options) -> Finding | None:
    stmt = d.statement
    if stmt.custom_plan is None:
        return None
    for column in [*d.compared_columns(), *_live_compared(d)]:
        scan = _ordered_scan(d, stmt.custom_plan, column)
        if scan is None:
            continue
        estimate = _estimated_removed(d, stmt.custom_plan, scan)
        measured = _analysed(d, scan)
        if measured is not None and measured.rows_removed_by_filter is not None:
            removed = measured.rows_removed_by_filter
            past = at_least(removed, options.min_rows_removed, options.margin)
            if past is False:
                return None
            judged = _Judged(
                Severity.WARNING if past else Severity.INFO,
                f"--analyze measured {removed:,.0f} rows removed by filter per claim"
                + ("" if past else f", within {options.margin:.0%} of min_rows_removed"),
                "--analyze",
            )
        else:
            removed = None
            counted = _from_counters(d, options, estimate, _is_live(d, column))
            if counted is None:
                return None
            judged = counted
        return _finding(snapshot, d, column, scan, removed, estimate, judged, options)
    return None


@dataclass(frozen=True)
class _Judged:
    """The severity, what it rests on (a sentence), which figure decided it (``measured``,
    ``estimate``, ``--analyze``, or None: nothing decided, the finding is latent) and the
    counter that contradicts the estimate, when one does."""

    severity: Severity
    runtime: str
    fired_by: str | None
    contradicted_by: str | None = None


def _live_compared(d: Dequeue) -> list[str]:
    """The queue's live columns the claim compares (``status = 'pending'``): an index walk
    that filters one of them discards the rows in other states, the archive among them."""
    live = d.queue.live.columns if d.queue.live is not None else ()
    return [c for c in live if any(p.column == c for p in d.parsed.predicates)]


def _is_live(d: Dequeue, column: str) -> bool:
    return d.queue.live is not None and column in d.queue.live.columns


def _estimated_removed(d: Dequeue, plan: PlanNode, scan: PlanNode) -> float | None:
    """Rows the planner expects one claim to discard before it has LIMIT rows: it takes the
    rows that pass the filter to be spread evenly along the index, so it reads LIMIT x (rows
    in the index / rows that pass) of them. None when the index's size is not known."""
    idx = next((i for i in d.table.indexes if i.name == scan.index), None)
    rows = idx.reltuples if idx is not None and idx.reltuples > 0 else d.table.reltuples
    if rows <= 0:
        return None
    # A LIMIT pg_stat_statements hid is what the claim returned per call, when it was counted.
    limit = d.parsed.limit or d.statement.rows_per_call or _limit_rows(plan) or 1
    passing = max(scan.plan_rows, 1.0)
    return max(limit * rows / passing - limit, 0.0)


def _limit_rows(plan: PlanNode) -> float | None:
    """The rows of the plan's first Limit node: LIMIT's value as the custom plan bound it."""
    if plan.node_type == "Limit":
        return plan.plan_rows
    for child in plan.children:
        found = _limit_rows(child)
        if found is not None:
            return found
    return None


def _from_counters(
    d: Dequeue, options: Options, estimate: float | None, live: bool
) -> _Judged | None:
    """What pg_stat_statements measured of the claim, weighed with the planner's estimate:
    shared blocks per call past ``min_blocks_per_call`` after ``min_calls`` calls confirm it
    (warning, whatever the estimate); few blocks against a large estimate is info naming the
    counter that contradicts it. Without counters the estimate alone is info. None: quiet
    (a walk that filters the live column, measured and estimated short)."""
    stmt = d.statement
    blocks, calls = stmt.shared_blks_per_call, stmt.calls or 0
    enough = at_least(calls, options.min_calls, options.margin)
    many_removed = estimate is not None and at_least(
        estimate, options.min_rows_removed, options.margin
    )
    estimated = (
        f"the planner estimates {estimate:,.0f} rows removed per claim"
        if estimate is not None
        else "the planner's estimate of rows removed is unknown"
    )
    if blocks is not None and enough:
        measured = f"{blocks:,.0f} shared blocks per call over {calls:,} calls"
        many = at_least(blocks, options.min_blocks_per_call, options.margin)
        if many:
            return _Judged(
                Severity.WARNING,
                f"pg_stat_statements measured {measured} ({estimated})",
                "measured",
            )
        if many is None:
            return _Judged(
                Severity.INFO,
                f"{blocks:,.0f} shared blocks per call is within {options.margin:.0%} of "
                f"min_blocks_per_call ({options.min_blocks_per_call:g})",
                "measured",
            )
        if many_removed:
            said = f"pg_stat_statements measured {measured}"
            return _Judged(
                Severity.INFO,
                f"{estimated}, but {said}: the counter contradicts the estimate",
                "estimate",
                said,
            )
        if live:
            return None
        return _Judged(
            Severity.INFO,
            f"latent: {measured} is little today; a backlog of another queue ahead in the "
            "order raises it",
            None,
        )
    if many_removed:
        return _Judged(
            Severity.INFO,
            f"{estimated}, and nothing measured what a claim reads (run with --analyze, or "
            "with pg_stat_statements recording the statement's calls)",
            "estimate",
        )
    if live:
        return None
    return _Judged(
        Severity.INFO,
        "latent: nothing measured how many rows a claim discards (run with --analyze, or "
        "with pg_stat_statements recording the statement's calls)",
        None,
    )


def _finding(
    snapshot: Snapshot,
    d: Dequeue,
    column: str,
    scan: PlanNode,
    removed: float | None,
    estimate: float | None,
    judged: _Judged,
    options: Options,
) -> Finding:
    stmt, table = d.statement, d.table
    severity, runtime = judged.severity, judged.runtime
    plan = stmt.custom_plan
    assert plan is not None
    label = statement_label(stmt)
    limit = d.parsed.limit or "its LIMIT's rows"
    idx = next(i for i in table.indexes if i.name == scan.index)
    keys = ", ".join(c or "<expression>" for c in idx.columns)
    discards = (
        f"returns the rows of every state, the finished ones included, and discards those "
        f"its {column} condition does not take until it has {limit}"
        if _is_live(d, column)
        else f"returns the rows of every value of {column} and discards the others' until it "
        f"has {limit}"
    )
    message = (
        f"{label} filters {column} while it walks index {idx.name} ({keys}) in its ORDER BY's "
        f"order: {describe_node(scan)} {discards} (Filter: {scan.filter})"
    )
    if removed is not None:
        message += f"; each claim discarded {human_count(removed)} rows."
    else:
        message += "."
    if severity is Severity.INFO:
        message += f" Not confirmed: {runtime}."
    evidence: dict[str, object] = {
        **statement_evidence(stmt),
        "source": stmt.source,
        "statement_text": stmt.text,
        "filter_column": column,
        "custom_values": dict(stmt.custom_values),
        "scan_node": describe_node(scan),
        "scan_index": idx.name,
        "scan_index_keys": list(idx.columns),
        "scan_filter": scan.filter,
        "scan_index_cond": scan.index_cond,
        "planner_rows_estimate": scan.plan_rows,
        "index_rows": round(idx.reltuples),
        "rows_removed_per_claim": removed,
        "estimated_rows_removed_per_claim": None if estimate is None else round(estimate),
        "fired_by": judged.fired_by,
        "confirmed_by": runtime if severity is not Severity.INFO else None,
        "custom_plan": "\n".join(plan_outline(plan)),
        "table_rows": round(table.reltuples),
    }
    evidence |= {
        k: v
        for k, v in (
            ("calls", stmt.calls),
            ("mean_exec_ms", stmt.mean_exec_ms),
            ("shared_blks_per_call", stmt.shared_blks_per_call),
            ("rows_per_call", stmt.rows_per_call),
            ("analyzed_ms", stmt.analyzed_ms),
            ("contradicted_by", judged.contradicted_by),
        )
        if v is not None
    }
    return Finding(
        target=Target("statement", table.schema, table.name, statement_id(stmt)),
        severity=severity,
        message=message,
        evidence=evidence,
        explanation=(
            "An index without the live column returns every row in order, finished ones "
            "included; how many a claim throws away depends on how many finished rows come "
            "before the first waiting one, which grows with the archive."
            if _is_live(d, column)
            else "An index that does not lead with the compared column returns every queue's "
            "rows in order; how many a claim throws away depends on where its queue's rows "
            "sit, so one queue's backlog slows the claims of all the others."
        ),
        fix=_fix(snapshot, d, column, idx.name, options),
    )


def _fix(snapshot: Snapshot, d: Dequeue, column: str, scan_index: str, options: Options) -> Fix:
    table, live, stmt = d.table, d.queue.live, d.statement
    order = index_keys(d.parsed.order_by, table)
    if order is None:
        return Fix(
            notes=f"The ORDER BY is an expression: build a partial index on ({column}, that "
            "expression) under the live predicate. " + CONCURRENT_BUILD_NOTE
        )
    # The live column is the new index's predicate; another column leads its key.
    live_column = _is_live(d, column)
    keys = order if live_column else (IndexKey(column), *(k for k in order if k.column != column))
    if live is None or not predicate_implies(d.parsed.predicates, live, stmt.custom_values).implies:
        return Fix(
            notes=f"Build an index on ({', '.join(k.column for k in keys)}) under the "
            "predicate the claim's WHERE implies: the claim does not imply the queue's live "
            "predicate, so qadvisor writes none. " + CONCURRENT_BUILD_NOTE
        )
    old = next(i for i in table.indexes if i.name == scan_index)
    existing = existing_index(table, keys, live)
    if existing is not None:
        # The planner estimates a comparison with a value it sees (a literal, a bound
        # parameter in a custom plan) from the most common values; only one with another
        # table's column (a lateral probe) from n_distinct, which a pin can correct.
        unseen = any(
            o.kind == "column"
            for p in d.parsed.predicates
            if p.column == column and p.op == "="
            for o in p.operands
        )
        current = _current_statistics(table, column, options) if unseen else None
        if current is None:
            said = (
                f"Index {existing.name} already leads with {column} in this order, but the "
                f"planner walks {column}-less order instead: its estimate of {column}'s rows "
                "comes from the whole table's statistics, which may be older than the rows "
                f"({_age(table)}). Refresh them, and plan the claim again."
            )
            if unseen:
                said += (
                    f" If it still walks {old.name}, the statistics themselves mislead it (a "
                    f"sample of a table where one {column} holds most rows sees few values): "
                    f"compare pg_stats' n_distinct for {column} with the real count, and pin "
                    f"that with `{_pin(table, column)}` before another ANALYZE."
                )
            return Fix(notes=said, safety="safe", steps=(analyze(table),))
        # No step: the pin needs a number only the DBA has, and the walked index is the
        # claim's path until the pin moves it.
        return Fix(
            notes=_misestimate_note(table, column, existing.name, old.name, current),
            safety="review",
        )
    build = live_set_index(table, live, keys)
    steps, notes = _old_index(snapshot, d, column, old)
    steps[:0] = build.steps(snapshot, stmt)
    notes.insert(
        0,
        f"The claim reads {build.name} from its first waiting row in ORDER BY order: the "
        "rows in other states are not in it."
        if live_column
        else f"The claim descends {build.name} to the first row of its {column} in ORDER BY "
        "order and reads only its own queue's rows.",
    )
    return Fix(notes=" ".join(notes), safety="review", steps=tuple(steps))


def _current_statistics(table: Table, column: str, options: Options) -> str | None:
    """What pg_stats says of ``column``, when another ANALYZE would sample much the same
    table (it ran, and fewer than ``stale_share`` of the rows changed since): why the planner
    misjudges ``column``'s rows is then the statistics themselves. None when they may be stale
    or are not known."""
    stats = table.stats_of(column)
    counters = table.stats
    analyzed = _last_analyze(table)
    rows = max(table.reltuples, 0.0)
    if stats is None or analyzed is None or rows == 0 or stats.n_distinct == 0:
        return None
    if counters.n_mod_since_analyze >= options.stale_share * rows:
        return None
    distinct = stats.n_distinct if stats.n_distinct > 0 else -stats.n_distinct * rows
    per_value = rows * (1 - stats.null_frac) / max(distinct, 1.0)
    return (
        f"its statistics are current ({counters.n_mod_since_analyze:,} of about "
        f"{human_count(rows)} rows changed since the last ANALYZE, {analyzed[:16]}), so "
        f"another ANALYZE would count much the same: pg_stats counts {human_count(distinct)} "
        f"distinct {column} value(s), about {human_count(per_value)} rows each"
    )


def _last_analyze(table: Table) -> str | None:
    counters = table.stats
    return max(filter(None, (counters.last_analyze, counters.last_autoanalyze)), default=None)


def _age(table: Table) -> str:
    analyzed = _last_analyze(table)
    if analyzed is None:
        return "no ANALYZE is on record, or the role cannot see its counters"
    changed = table.stats.n_mod_since_analyze
    return f"{changed:,} rows changed since the last ANALYZE, {analyzed[:16]}"


def _pin(table: Table, column: str) -> str:
    """The n_distinct pin, its number left to the DBA (qadvisor counts no rows)."""
    return (
        f"ALTER TABLE {qualified(table.schema, table.name)} ALTER COLUMN {ident(column)} "
        f"SET (n_distinct = <number of distinct {column} values>);"
    )


def _misestimate_note(table: Table, column: str, existing: str, walked: str, current: str) -> str:
    t = qualified(table.schema, table.name)
    return (
        f"Index {existing} already leads with {column} in this order, but the planner walks "
        f"{walked} instead, and {current}. Compared with another table's column, a value it "
        f"cannot see when it plans, {column} is taken to match that many rows, so the walk "
        f"looks short; a sample of a table where one {column} holds most rows sees few "
        f"values. Tell the planner how many there are: `{_pin(table, column)}` then "
        f"`ANALYZE {t};`. The number is your application's (qadvisor counts no rows, and "
        "writes no value it did not see); the ALTER takes a SHARE UPDATE EXCLUSIVE lock, and "
        "a fixed n_distinct survives later ANALYZEs (raise it as values are added)."
    )


def _old_index(
    snapshot: Snapshot, d: Dequeue, column: str, old: Index
) -> tuple[list[FixStep], list[str]]:
    """The index the claim walks once the fix has built the one led by ``column``: kept (a
    constraint, other readers), or its DROP for review."""
    table, stmt = d.table, d.statement
    steps: list[FixStep] = []
    notes: list[str] = []
    own = statement_id(stmt)
    readers = [s for s in _claims_reading(snapshot, d) if statement_id(s) != own]
    use = index_use(snapshot, table, old.name)
    users = use.users
    if old.is_primary or old.is_unique or old.is_constraint:
        notes.append(f"{old.name} enforces a constraint and stays.")
    elif readers or users:
        listed = "; ".join(
            [statement_label(s) for s in readers[:3]] + [stakeholder_label(s) for s in users[:3]]
        )
        notes.append(
            f"{old.name} stays: other recorded statements read it ({listed}). While it exists "
            f"the planner may keep walking it, since it estimates {column}'s rows from the "
            "whole table's statistics: check the claim's plan after the build."
        )
    else:
        drop = drop_index(table.schema, old.name, partitioned=table.partition_key is not None)
        steps.append(replace(drop, kind="review"))
        unplanned = [s for s in unplanned_claims(snapshot, table) if statement_id(s) != own]
        if use.unavailable is not None:
            checked = (
                f"Whether other statements read it is unknown ({use.unavailable}): make sure "
                "no query (reports, admin pages, maintenance) needs it."
            )
        elif unplanned:
            checked = (
                f"{unplanned_note(unplanned)}: whether they read it is unknown; make sure "
                "they do not before running the DROP."
            )
        else:
            checked = (
                "No other recorded claim or statement reads it; the DROP is for review all "
                "the same, for queries pg_stat_statements did not record (reports, admin "
                "pages)."
            )
        notes.append(
            f"Drop {old.name} once the new index is built: while it exists the planner may "
            f"keep walking it, since it estimates {column}'s rows from the whole table's "
            f"statistics, archive included. {checked}"
        )
    return steps, notes


def _claims_reading(snapshot: Snapshot, d: Dequeue) -> list[Statement]:
    """The dequeue statements on the claim's table whose plans read the index it walks."""
    table = d.table
    plan = d.statement.custom_plan
    walked = set(indexes_used(plan, table.schema, table.name)) if plan is not None else set()
    found = []
    for stmt in snapshot.statements:
        on = statement_queue(snapshot, stmt)
        if on is None or on[1].qualified != table.qualified:
            continue
        plans = [p for p in (stmt.custom_plan, stmt.generic_plan) if p is not None]
        if any(walked & set(indexes_used(p, table.schema, table.name)) for p in plans):
            found.append(stmt)
    return found
