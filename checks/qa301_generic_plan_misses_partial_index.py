"""QA301 generic-plan-misses-partial-index."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from qadvisor.api import (
    NOISE_MARGIN,
    Dequeue,
    Finding,
    Fix,
    Index,
    PlanNode,
    Severity,
    Skip,
    Snapshot,
    Statement,
    Table,
    Target,
    at_least,
    at_most,
    check,
    describe_node,
    human_count,
    judgeable_dequeues,
    literal,
    plan_outline,
    rewrite,
    scans,
    statement_evidence,
    statement_label,
)
from qadvisor.api.provisional import (
    Predicate,
    StatementError,
    index_predicate_columns,
    indexes_used,
    own_parameters,
    parse_index_predicate,
    plan_cache_mode,
    statement_id,
    value_placeholder,
    with_placeholders,
    writes_rows,
)


@dataclass(frozen=True)
class Options:
    # pg_stat_statements text only: shared blocks read per call at or above this share of the
    # table's pages show that claims read the table, not the small partial index.
    min_blocks_fraction: float = 0.5
    # ... judged only on tables of at least this many pages (8 MiB): below that a full read
    # and an index probe are too close to tell apart.
    min_table_pages: int = 1024
    # plans/calls at or below this (pg_stat_statements.track_planning = on) shows a cached
    # generic plan: a custom plan is made anew for every execution.
    max_plans_per_call: float = 0.1
    # ... judged only after this many calls (auto mode plans the first five custom anyway).
    min_calls: int = 50
    # Under plan_cache_mode = auto PostgreSQL keeps a generic plan only when its estimated
    # cost is not above the average custom plan's (plancache.c, choose_custom_plan); this
    # margin covers the difference between our custom plan and the application's average.
    # A cached plan that costs more than this many times the custom plan is one the server
    # would not have kept, unless the application's session forces generic plans.
    auto_keeps_generic_up_to: float = 1.1
    # A table of at least this many pages is read in full far beyond what an index probe
    # reads (a few pages), so blocks per call can tell which of the two plans ran.
    min_pages_to_tell: int = 32
    # The counters above (blocks and plans per call, calls, the table's pages) move between
    # two runs: a value within this share of its threshold confirms nothing and contradicts
    # nothing, so the finding stays info both times instead of flipping.
    margin: float = NOISE_MARGIN
    # ... and the two plans' estimated costs move with ANALYZE's sample: a cost ratio within
    # this share of auto_keeps_generic_up_to is neither (a tighter margin: equal costs, the
    # common case of a kept generic plan, must still confirm).
    cost_margin: float = 0.05


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "analyzed_custom_ms": "Run time of the custom plan (EXPLAIN ANALYZE)",
    "contradicted_by": "Contradicted by",
    "from_pg_stat_statements": "From pg_stat_statements",
    "generic_plan_cost": "Generic plan cost",
    "generic_plan_scan": "Generic plan scan",
    "generic_to_custom_cost_ratio": "Generic to custom plan cost",
    "parameter_columns": "Columns compared with a parameter",
    "plan_cache_mode": "plan_cache_mode",
    "plans_per_call": "Plans per call",
    "role": "Role",
}


@check("QA301", "generic-plan-misses-partial-index", severity=Severity.WARNING,
       category="statements", options=Options,
       requires=("table_facts", "index_definitions", "statements", "plans"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """A parameterized predicate hides the partial index from generic plans.

    ## What it finds
    A dequeue statement that compares a column of a partial index's predicate with a
    parameter (`WHERE status = $1` against `... WHERE status = 'pending'`; a list bound as
    parameters, `status = ANY($1)` or `status IN ($1, $2)`, as Ecto and many ORMs send it,
    the same way), and whose generic
    plan, made on the server (`EXPLAIN (GENERIC_PLAN)` on PostgreSQL 16+, `PREPARE` +
    `plan_cache_mode = force_generic_plan` in a rolled-back transaction before), does not use
    that index while the custom plan, made with the live value, does.

    ## Why it matters
    PostgreSQL uses a partial index only when it can prove at planning time that the query's
    WHERE implies the index predicate. A generic plan is made without knowing `$1`, so it
    cannot, and falls back to a scan of the whole table (archive included) or another index.
    Measured on PostgreSQL 17 with 5,000 pending jobs among 10 M rows: forcing generic plans
    took claims from 11,752/s to 7.2/s (1,635x slower) and the partial index's scan counter
    stayed at 0. In the default `auto` mode 40 of 40 runs stayed on custom plans, so the trap
    springs when `plan_cache_mode = force_generic_plan` is set for the server, the database or
    the role (critical), or when a driver or pooler makes the choice (warning).

    ## How to fix
    Write the predicate's value into the statement as a literal (`status = 'pending'`; for a
    list bound as parameters, `status IN ('pending', 'retry')` or `status = ANY(ARRAY[...])`,
    which the planner proves a partial index's predicate from as well): the rewritten
    statement is printed in full, with `<value of $1>` where the application's own
    value goes. qadvisor never writes the value itself: pg_stat_statements and bound
    parameters show it only as `$n`, and the value a partial index covers is not always the
    one the application sends (a reaper sends `'running'` to a table whose partial index holds
    `'pending'`); the notes say which values the index covers. The placeholder is not SQL, so
    the statement cannot be shipped before it is filled. It is application code, not a
    migration: change it where the application builds it. ORMs and drivers that bind every
    value need a raw SQL fragment for it. Do not answer with `force_custom_plan`: it replans
    every execution.

    ## When it stays quiet
    The predicate is written with a literal; the generic plan uses the partial index too; the
    custom plan does not use it either (see QA302 / QA303). A statement seen only in
    pg_stat_statements, whose text shows literals as `$n` too, is reported as info (latent)
    unless the server confirms it: generic plans forced where the statement runs, or runtime
    evidence (shared blocks per call near the table's size, plans/calls far below 1 with
    `pg_stat_statements.track_planning`). Few plans per call confirm it only when they agree
    with the plan cache's rule: under `auto` PostgreSQL keeps a generic plan only when its
    estimated cost is not above the custom plans' average, so a cached plan far costlier than
    the custom one was not chosen by the server; unless the blocks per call show the whole
    table read (a session that forces generic plans), the counters contradict the finding (the
    application's value is likely a literal pg_stat_statements shows as `$n`): it stays info
    and says which counter disagrees. Every finding from pg_stat_statements shows the
    statement's measured calls, time and blocks per call beside its plans.

    Blocks per call count everything the statement touched, its writes included: before they
    are read as a read of the table, what its writes can account for is set aside (each row
    it writes, pg_stat_statements' rows per call, is a heap page and an entry in each of the
    table's indexes, up to four pages each). pgqueuer's dequeue on a database its workers
    aged touched 389 blocks per call on a 39-page table, writing about ten rows through nine
    indexes and its log: those blocks are its writes, not a generic plan reading the table.
    What tells a literal from a parameter is how pg_stat_statements numbers the constants it
    hides: after the statement's own parameters, once each, in the order they appear. A `$n`
    numbered among the statement's own (`$1` to `$k` below a break in that order, or used
    twice) is a parameter the application binds; then few plans per call show that a generic
    plan of this very text is reused, and they confirm the finding. One numbered after them
    (pgqueuer's `status = $5` after its own `$1` to `$4`) may be a constant the application
    wrote; the evidence says so where the counters contradict the finding.

    The counters move between two runs on an unchanged database, so each threshold has a
    margin (`margin`, 20 %; `cost_margin`, 5 %, for the plans' cost ratio): a counter within
    it of its threshold (plans per call between 0.08 and 0.12, blocks per call between 0.4
    and 0.6 of the table's pages, a table of 26 to 38 pages, a cost ratio between 1.045 and
    1.155) neither confirms nor contradicts, and the finding stays info, saying which
    counter was too close to call.
    """
    for d in judgeable_dequeues(snapshot):
        stmt, table = d.statement, d.table
        if stmt.custom_plan is None or stmt.generic_plan is None:
            if not stmt.plan_error:  # a plan error was reported as a skip already
                yield Skip(f"{statement_id(stmt)}: no custom and generic plan", d.queue.qualified)
            continue
        bound = _parameter_predicates(d.parsed.predicates)
        if not bound:
            continue
        plans = (stmt.custom_plan, stmt.generic_plan)
        custom_used = indexes_used(stmt.custom_plan, table.schema, table.name)
        generic_used = indexes_used(stmt.generic_plan, table.schema, table.name)
        for idx in table.indexes:
            if not (idx.is_valid and idx.is_partial):
                continue
            columns = index_predicate_columns(idx, table) & {p.column for p in bound}
            if columns and idx.name in custom_used and idx.name not in generic_used:
                yield _finding(snapshot, d, plans, idx, columns, options)
                break


def _parameter_predicates(predicates: tuple[Predicate, ...]) -> list[Predicate]:
    return [p for p in predicates if any(o.kind == "parameter" for o in p.operands)]


def _finding(
    snapshot: Snapshot,
    d: Dequeue,
    plans: tuple[PlanNode, PlanNode],
    idx: Index,
    columns: frozenset[str],
    options: Options,
) -> Finding:
    """The statement's custom plan (``plans``: custom, generic) uses the partial index, its
    generic plan cannot: ``columns`` are compared with a parameter."""
    stmt, table = d.statement, d.table
    custom_plan, generic_plan = plans
    name = statement_id(stmt)
    label = statement_label(stmt)
    mode = plan_cache_mode(snapshot, stmt.role)
    runtime, contradicted, near = _runtime_evidence(
        stmt, table, options, _compared_parameters(d, columns)
    )
    if mode.forced_generic:
        severity = Severity.CRITICAL
        confirmed = f"plan_cache_mode = force_generic_plan ({mode.source})"
    elif not stmt.from_normalised_text or runtime:
        severity = Severity.WARNING
        confirmed = "; ".join(runtime) if runtime else "statement text given by the user"
    else:
        severity = Severity.INFO
        confirmed = ""
    column_list = ", ".join(sorted(columns))
    custom_scan = _scan_line(custom_plan, table)
    generic_scan = _scan_line(generic_plan, table)
    custom_cost, generic_cost = custom_plan.total_cost, generic_plan.total_cost
    ratio = generic_cost / custom_cost if custom_cost > 0 else None
    message = (
        f"{label} compares {column_list} with a parameter, so its generic plan cannot use "
        f"partial index {idx.name} ({idx.predicate}): it reads {generic_scan}, total cost "
        f"{generic_cost:,.2f}, where the custom plan uses the index, total cost "
        f"{custom_cost:,.2f}"
    )
    # The costs are the planner's estimates: a ratio beside counters that say the application
    # does not run the generic plan would read as a measured slowdown, so it is left out then.
    shown = ratio and ratio >= 2 and not (severity is Severity.INFO and contradicted)
    message += f" (an estimated {ratio:,.0f}x less)." if shown else "."
    if severity is Severity.CRITICAL:
        message += f" Generic plans are forced by {mode.source}."
    elif severity is Severity.INFO and contradicted:
        message += (
            " Not confirmed: the server's counters say the application does not run this "
            f"plan ({'; '.join(contradicted)})."
        )
    elif severity is Severity.INFO:
        message += (
            " Latent: pg_stat_statements shows literals as $n too, and nothing on the server "
            "shows this statement running with a generic plan."
        )
        if near:
            message += (
                " Too close to a threshold to confirm or contradict: " + "; ".join(near) + "."
            )
    if stmt.from_normalised_text and stmt.calls:
        message += f" Measured: {_measured(stmt)}."
    evidence: dict[str, object] = {
        **statement_evidence(stmt),
        "source": stmt.source,
        "statement_text": stmt.text,
        "role": stmt.role,
        "parameter_columns": sorted(columns),
        "partial_index": idx.name,
        "index_predicate": idx.predicate,
        "custom_values": dict(stmt.custom_values),
        "custom_plan": "\n".join(plan_outline(custom_plan)),
        "custom_plan_cost": custom_cost,
        "custom_plan_scan": custom_scan,
        "generic_plan": "\n".join(plan_outline(generic_plan)),
        "generic_plan_cost": generic_cost,
        "generic_plan_scan": generic_scan,
        "generic_to_custom_cost_ratio": round(ratio, 1) if ratio else None,
        "plan_cache_mode": mode.value,
        "plan_cache_mode_source": mode.source,
        "from_pg_stat_statements": stmt.from_normalised_text,
        "confirmed_by": confirmed or None,
        "contradicted_by": "; ".join(contradicted) or None,
        "near_threshold": "; ".join(near) or None,
        "table_rows": round(table.reltuples),
        "table_pages": table.relpages,
    }
    if stmt.from_normalised_text:
        evidence |= {
            "calls": stmt.calls,
            "mean_exec_ms": stmt.mean_exec_ms,
            "shared_blks_per_call": stmt.shared_blks_per_call,
            "plans_per_call": stmt.plans_per_call,
        }
    if stmt.analyzed_ms is not None:
        evidence["analyzed_custom_ms"] = stmt.analyzed_ms
    return Finding(
        target=Target("statement", table.schema, table.name, name),
        severity=severity,
        message=message,
        evidence=evidence,
        explanation=(
            "A partial index is usable only when the planner proves the WHERE implies its "
            "predicate; with a parameter it can do so only for a custom plan, which knows "
            f"the value. A generic plan of this statement reads {human_count(table.reltuples)} "
            "rows' worth of table or index instead."
        ),
        fix=_fix(d, idx, columns, mode.forced_generic, mode.source),
    )


def _scan_line(plan: PlanNode, table: Table) -> str:
    found = scans(plan, table.schema, table.name)
    return describe_node(found[0]) if found else describe_node(plan)


def _compared_parameters(d: Dequeue, columns: frozenset[str]) -> list[int]:
    """The numbers of the parameters the statement compares with ``columns``."""
    return sorted(
        {
            o.index
            for pred in _parameter_predicates(d.parsed.predicates)
            if pred.column in columns
            for o in pred.operands
            if o.kind == "parameter" and o.index
        }
    )


def _write_blocks(stmt: Statement, table: Table) -> float:
    """Shared blocks per call the statement's own writes can account for: each row it
    writes (pg_stat_statements' rows per call) is a heap page and an entry in each of the
    table's indexes, each reached by a descent of up to WRITE_DESCENT pages. 0 for a
    statement that writes nothing (its row locks mark pages its scan read already), or whose
    rows per call are not known."""
    if stmt.rows_per_call is None or not writes_rows(stmt.text):
        return 0.0
    return stmt.rows_per_call * (len(table.indexes) + 1) * WRITE_DESCENT


# Pages a write reads to place one index entry or row version: a B-tree of up to three levels
# above its leaf (millions of entries) and the leaf itself.
WRITE_DESCENT = 4


def _runtime_evidence(
    stmt: Statement, table: Table, options: Options, compared: list[int]
) -> tuple[list[str], list[str], list[str]]:
    """What pg_stat_statements says about how the statement actually ran: the counters that
    confirm a generic plan misses the index, those that contradict it, and those too close
    to a threshold to say either (within the margin: neither confirmed nor contradicted).

    Shared blocks per call count everything the statement touched: what its writes can
    account for is set aside before they are read as a read of the table (pgqueuer's dequeue
    touched 389 blocks per call on a 39-page table, writing about ten rows through nine
    indexes and a log). ``compared`` are the parameters compared with the partial index's
    columns: one numbered among the statement's own (:func:`own_parameters`) is no constant
    pg_stat_statements hid."""
    confirms: list[str] = []
    contradicts: list[str] = []
    near: list[str] = []
    m = options.margin
    blocks = stmt.shared_blks_per_call
    pages = table.relpages
    writes = _write_blocks(stmt, table)
    read = None if blocks is None else max(blocks - writes, 0.0)
    reads = None if read is None else at_least(read, options.min_blocks_fraction * pages, m)
    own = own_parameters(stmt.text) if stmt.from_normalised_text else None
    bound = own is not None and bool(compared) and any(n <= own for n in compared)
    hidden = own is not None and bool(compared) and all(n > own for n in compared)
    placeholders = ", ".join(f"${n}" for n in compared)
    numbered = (
        f"{placeholders} numbered after the statement's own $1 to ${own}, as pg_stat_statements "
        "numbers the constants it hides"
        if hidden and own
        else f"{placeholders} numbered as pg_stat_statements numbers the constants it hides"
        if hidden
        else ""
    )
    unwritten = (
        f" (its writes of {stmt.rows_per_call:g} rows per call through the table's "
        f"{len(table.indexes)} indexes account for up to {writes:,.0f})"
        if writes
        else ""
    )
    if blocks is not None and reads is None and pages >= options.min_pages_to_tell * (1 - m):
        near.append(
            f"{blocks:,.0f} shared blocks per call is within {m:.0%} of "
            f"{options.min_blocks_fraction:g} x the table's {pages:,} pages"
        )
    big = at_least(pages, options.min_table_pages, m)
    if reads and big:
        confirms.append(
            f"{blocks:,.0f} shared blocks per call{unwritten} against the table's {pages:,} pages"
        )
    if stmt.plans_per_call is None:
        return confirms, contradicts, near
    ppc = f"{stmt.plans_per_call:.3f} plans per call"
    enough = at_least(stmt.calls or 0, options.min_calls, m)
    few = at_most(stmt.plans_per_call, options.max_plans_per_call, m)
    if enough is None:
        near.append(f"{stmt.calls:,} calls is within {m:.0%} of {options.min_calls:,}")
    if few is None:
        near.append(f"{ppc} is within {m:.0%} of {options.max_plans_per_call:g}")
    if not (enough and few):
        return confirms, contradicts, near
    assert stmt.custom_plan is not None and stmt.generic_plan is not None
    custom, generic = stmt.custom_plan.total_cost, stmt.generic_plan.total_cost
    ratio = generic / custom if custom > 0 else float("inf")
    keeps = at_most(ratio, options.auto_keeps_generic_up_to, options.cost_margin)
    tell = at_least(pages, options.min_pages_to_tell, m)
    if keeps:
        confirms.append(f"{ppc}: executions reuse a cached generic plan")
    elif bound:
        # A parameter the application binds: the plan cached is a generic plan of this very
        # text, and no generic plan of it can use the partial index.
        confirms.append(
            f"{ppc}: executions reuse a cached plan, and {placeholders} is among the "
            f"statement's own parameters ($1 to ${own}: pg_stat_statements numbers the "
            "constants it hides after them), so that plan is generic; plan_cache_mode = auto "
            f"would not have kept one that costs {ratio:,.0f}x the custom plan, so the "
            "application's session forces it"
        )
    elif reads and tell:
        confirms.append(
            f"{ppc} and {blocks:,.0f} shared blocks per call{unwritten} (the table has "
            f"{pages:,} pages): a cached generic plan that reads the table, which "
            "plan_cache_mode = auto would not have kept, so the application's session forces it"
        )
    elif keeps is False and (blocks is None or reads is False or tell is False):
        seen = f"{blocks:,.0f} shared blocks per call" if blocks is not None else "no blocks"
        contradicts.append(
            f"{ppc} shows a cached plan, but plan_cache_mode = auto keeps a generic plan only "
            f"when it costs no more than the custom plans, and this one costs {ratio:,.0f}x "
            f"more; {seen}{unwritten} against the table's {pages:,} pages is what the index "
            "plan reads: the application's statement is likely not the one planned here (a "
            "literal that pg_stat_statements shows as $n"
            + (f": {numbered}" if numbered else "")
            + ")"
        )
    elif keeps is None:
        near.append(
            f"the generic plan's cost, {ratio:,.2f}x the custom plan's, is within "
            f"{options.cost_margin:.0%} of {options.auto_keeps_generic_up_to:g}x"
        )
    else:
        near.append(
            f"the table's {pages:,} pages are within {m:.0%} of {options.min_pages_to_tell:,}"
        )
    return confirms, contradicts, near


def _measured(stmt: Statement) -> str:
    parts = [f"{stmt.calls:,} calls"]
    if stmt.mean_exec_ms is not None:
        parts.append(f"{stmt.mean_exec_ms:g} ms")
    if stmt.shared_blks_per_call is not None:
        parts.append(f"{stmt.shared_blks_per_call:,.0f} shared blocks")
    return f"{parts[0]}, " + " and ".join(parts[1:]) + " per call" if len(parts) > 1 else parts[0]


def _fix(d: Dequeue, idx: Index, columns: frozenset[str], forced: bool, source: str) -> Fix:
    stmt, queue = d.statement, d.queue
    # Every parameter compared with the index predicate's columns: its value reached qadvisor
    # only as $n (pg_stat_statements, a bound parameter of the user's text, a function's
    # variable), so the rewrite names where the application's value goes and writes none.
    numbers = sorted(
        {
            o.index
            for pred in _parameter_predicates(d.parsed.predicates)
            if pred.column in columns
            for o in pred.operands
            if o.kind == "parameter" and o.index
        }
    )
    target = parse_index_predicate(idx.predicate or "")
    index_values = target.values if target is not None and target.op == "in" else ()
    places = ", ".join(value_placeholder(n) for n in numbers)
    notes = [
        f"Write the value your application sends in place of {places}, as a literal, so that "
        f"every plan can prove it matches {idx.name}'s predicate ({idx.predicate}).",
        "qadvisor writes no value into a rewrite that it did not see in the statement's own "
        "text: here it saw only the parameter.",
    ]
    if index_values:
        covered = " or ".join(literal(v) for v in index_values)
        notes.append(
            f"{idx.name} serves rows whose {', '.join(sorted(columns))} is {covered}: a literal "
            "it covers keeps the index usable; any other value does not."
        )
    arrays = sorted(
        {p.column for p in _parameter_predicates(d.parsed.predicates)
         if p.op == "any" and p.column in columns}
    )  # fmt: skip
    if arrays:
        example = f" (ARRAY[{', '.join(literal(v) for v in index_values)}])" if index_values else ""
        notes.append(
            f"For {', '.join(arrays)} = ANY(...) the literal is an array{example}, or, for a "
            "single value, the plain comparison (= 'value'): the planner proves a partial "
            "index's predicate from a constant array as from a list of equalities."
        )
    notes.append(
        "ORMs and drivers that bind every value (server-side prepared statements in JDBC, "
        "Npgsql, pgx, psycopg, node-postgres, Prisma, ActiveRecord...) need the literal in the "
        "SQL text itself, e.g. a raw SQL fragment, not a bound parameter. Do not answer with "
        "plan_cache_mode = force_custom_plan: that replans every execution."
    )
    if stmt.from_normalised_text:
        notes.append(
            "The text comes from pg_stat_statements, which shows every constant as $n: keep "
            "the other values (LIMIT, ...) as your code writes them."
        )
    if forced:
        notes.append(
            f"Generic plans are forced by {source}; unless something needs it, "
            "RESET it (e.g. ALTER DATABASE ... RESET plan_cache_mode) as well."
        )
    live_columns = queue.live.columns if queue.live is not None else ()
    if live_columns and not set(live_columns) & set(columns):
        notes.append(f"The queue's live predicate is on {', '.join(live_columns)}.")
    try:
        rewritten = with_placeholders(d.parsed.text, numbers) if numbers else None
    except StatementError:
        rewritten = None
    if rewritten is None:
        notes.insert(0, f"Write {', '.join(sorted(columns))} as a literal in the statement.")
        return Fix(notes=" ".join(notes))
    return Fix(notes=" ".join(notes), steps=(rewrite(stmt, rewritten + ";"),))
