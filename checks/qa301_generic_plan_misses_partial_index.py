"""QA301 generic-plan-misses-partial-index."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from qadvisor.api import (
    Dequeue,
    Finding,
    Fix,
    Index,
    PlanNode,
    Predicate,
    Severity,
    Skip,
    Snapshot,
    Statement,
    StatementError,
    Table,
    Target,
    array_literal,
    check,
    describe_node,
    human_count,
    index_predicate_columns,
    indexes_used,
    judgeable_dequeues,
    literal,
    parse_index_predicate,
    plan_cache_mode,
    plan_outline,
    rewrite,
    scans,
    statement_evidence,
    statement_id,
    statement_label,
    with_literals,
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


@check("QA301", "generic-plan-misses-partial-index", severity=Severity.WARNING,
       category="statements", options=Options,
       requires=("table_facts", "index_definitions", "statements", "plans"))  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """A parameterized predicate hides the partial index from generic plans.

    ## What it finds
    A dequeue statement that compares a column of a partial index's predicate with a
    parameter (`WHERE status = $1` against `... WHERE status = 'pending'`), and whose generic
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
    Write the predicate's value into the statement as a literal (`status = 'pending'`): the
    rewritten statement is printed in full. It is application code, not a migration: change
    it where the application builds it. ORMs and drivers that bind every value need a raw SQL
    fragment for it. Do not answer with `force_custom_plan`: it replans every execution.

    ## When it stays quiet
    The predicate is written with a literal; the generic plan uses the partial index too; the
    custom plan does not use it either (see QA302 / QA303). A statement seen only in
    pg_stat_statements, whose text shows literals as `$n` too, is reported as info (latent)
    unless the server confirms it: generic plans forced where the statement runs, or runtime
    evidence (shared blocks per call near the table's size, plans/calls far below 1 with
    `pg_stat_statements.track_planning`).
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
    runtime = _runtime_evidence(stmt, table, options)
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
        f"{custom_cost:,.2f}" + (f" ({ratio:,.0f}x less)." if ratio and ratio >= 2 else ".")
    )
    if severity is Severity.CRITICAL:
        message += f" Generic plans are forced by {mode.source}."
    elif severity is Severity.INFO:
        message += (
            " Latent: pg_stat_statements shows literals as $n too, and nothing on the server "
            "shows this statement running with a generic plan."
        )
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


def _runtime_evidence(stmt: Statement, table: Table, options: Options) -> list[str]:
    """What pg_stat_statements says about how the statement actually ran."""
    out = []
    blocks = stmt.shared_blks_per_call
    if (
        blocks is not None
        and table.relpages >= options.min_table_pages
        and blocks >= options.min_blocks_fraction * table.relpages
    ):
        out.append(
            f"{blocks:,.0f} shared blocks per call against the table's {table.relpages:,} pages"
        )
    if (
        stmt.plans_per_call is not None
        and (stmt.calls or 0) >= options.min_calls
        and stmt.plans_per_call <= options.max_plans_per_call
    ):
        out.append(
            f"{stmt.plans_per_call:.3f} plans per call: executions reuse a cached generic plan"
        )
    return out


def _fix(d: Dequeue, idx: Index, columns: frozenset[str], forced: bool, source: str) -> Fix:
    stmt, queue = d.statement, d.queue
    values: dict[int, str] = {}
    target = parse_index_predicate(idx.predicate or "")
    index_values = target.values if target is not None and target.op == "in" else ()
    for pred in _parameter_predicates(d.parsed.predicates):
        if pred.column not in columns:
            continue
        params = [o.index for o in pred.operands if o.kind == "parameter" and o.index]
        for i, param in enumerate(params):
            if pred.op == "any" and index_values:
                values[param] = array_literal(index_values)
            elif index_values:
                values[param] = literal(index_values[min(i, len(index_values) - 1)])
            elif str(param) in stmt.custom_values:
                values[param] = stmt.custom_values[str(param)]
    notes = [
        f"The value is written as a literal so that every plan can prove it matches "
        f"{idx.name}'s predicate ({idx.predicate}).",
        "ORMs and drivers that bind every value (server-side prepared statements in JDBC, "
        "Npgsql, pgx, psycopg, node-postgres, Prisma, ActiveRecord...) need the literal in the "
        "SQL text itself, e.g. a raw SQL fragment, not a bound parameter. Do not answer with "
        "plan_cache_mode = force_custom_plan: that replans every execution.",
    ]
    if stmt.from_normalised_text:
        notes.append(
            "The text comes from pg_stat_statements, which shows every constant as $n: keep "
            "the other values (LIMIT, ...) as your code writes them."
        )
    if index_values and len(index_values) > 1:
        notes.append(
            f"{idx.name} covers {', '.join(index_values)}: the literal must be one of them "
            "(or the whole list with IN)."
        )
    if forced:
        notes.append(
            f"Generic plans are forced by {source}; unless something needs it, "
            "RESET it (e.g. ALTER DATABASE ... RESET plan_cache_mode) as well."
        )
    if queue.live is not None and queue.live.column not in columns:
        notes.append(f"The queue's live predicate is on {queue.live.column}.")
    try:
        rewritten = with_literals(d.parsed.text, values) if values else None
    except StatementError:
        rewritten = None
    if rewritten is None:
        notes.insert(0, f"Write {', '.join(sorted(columns))} as a literal in the statement.")
        return Fix(notes=" ".join(notes))
    return Fix(notes=" ".join(notes), steps=(rewrite(stmt, rewritten + ";"),))
