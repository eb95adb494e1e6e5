"""QA401 round-robin-walks-backlog."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from qadvisor.api import (
    NOISE_MARGIN,
    Dequeue,
    Finding,
    Fix,
    FixStep,
    Index,
    LivePredicate,
    PlanNode,
    Severity,
    Skip,
    Snapshot,
    Table,
    Target,
    TenantFacts,
    analyze,
    at_least,
    check,
    describe_node,
    human_count,
    ident,
    judgeable_dequeues,
    live_rows,
    qualified,
    rewrite,
    scans,
    statement_evidence,
    statement_label,
    table_setting,
    tenant_facts,
)
from qadvisor.api.provisional import (
    IndexKey,
    Lateral,
    OrderItem,
    StatementError,
    condition_columns,
    distinct_values,
    existing_tenant_index,
    statement_id,
    tenant_index,
    tenant_order,
    with_order_by,
)


@dataclass(frozen=True)
class Options:
    # Below this many live rows the walk costs little yet (measured: with 1,000 queued jobs
    # both plans took 1.1 ms); the finding is then "info", a plan that breaks as the backlog grows.
    min_backlog_rows: int = 1_000
    # Row estimates move with ANALYZE's sample: a value this share past a threshold or less
    # is reported as info, not warning, so two runs on the same database agree.
    margin: float = NOISE_MARGIN
    # A descent of the per-tenant index is latent when another index supplies the sub-select's
    # ORDER BY and the largest tenant holds at least this share of the live rows: ANALYZE's
    # sample then sees few of the other tenants, and which plan wins depends on how many
    # (measured on the 100,000 + 10 job backlog: n_distinct 1-5 gave the walk, 8 or more the
    # descent, on 18 and 15).
    latent_top_share: float = 0.5


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "actual_probes": "Probes run (EXPLAIN ANALYZE)",
    "filter": "Filter",
    "index": "Index",
    "index_columns": "Index columns",
    "index_cond": "Index condition",
    "index_idx_scan": "Index scans",
    "index_idx_tup_read": "Index entries read",
    "index_tup_read_per_scan": "Index entries read per scan",
    "inner_node": "Inner plan node",
    "latent": "Latent",
    "n_distinct_tenant": "Tenants in pg_stats (n_distinct)",
    "order_index": "Index giving the order",
    "order_index_columns": "Its columns",
    "planner_rows_per_tenant": "Planner's rows per tenant",
    "rows_removed_by_filter_per_probe": "Rows removed by filter per probe",
    "shared_blocks": "Shared blocks",
}


@check("QA401", "round-robin-walks-backlog", severity=Severity.WARNING, category="tenants",
       options=Options,
       requires=("table_facts", "index_definitions", "statements", "plans"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """The per-tenant sub-select of a round-robin dequeue walks the backlog.

    ## What it finds
    A round-robin dequeue (`FROM queue_tenants qt CROSS JOIN LATERAL (SELECT ... FROM jobs
    WHERE tenant_id = qt.tenant_id ... FOR UPDATE SKIP LOCKED)`) whose plan reads the queue
    table inside the LATERAL with a Seq Scan, or through an index not led by the tenant column
    (the FIFO index, the primary key) with the tenant as a Filter, instead of an Index Cond on
    the tenant column.

    ## Why it matters
    The sub-select runs once per tenant probed. A walk of the FIFO index stops at the
    tenant's first job: quick for the large tenant, the whole backlog for a small tenant, and
    the whole backlog for nothing for a tenant with no job queued. With a skewed backlog the
    ANALYZE sample sees 1-5 tenants, so the planner expects tens of thousands of rows per
    tenant and expects the walk to stop early. Measured: 100,000 queued jobs of one tenant,
    ten small tenants, 989 idle tenants in the rotation: about 10 s per dequeue and a million
    buffer reads, against 1.17 ms once each probe was one descent of a per-tenant index.

    A plan that descends the per-tenant index today can still be one sample away from the
    walk: when another index supplies the sub-select's ORDER BY and the backlog is skewed,
    the planner's choice rests on how many small tenants ANALYZE happened to see (on that
    backlog, an n_distinct of 1-5 gave the walk, 8 or more the descent). That case is
    reported as info (latent), with the same fix.

    ## How to fix
    Create the per-tenant partial index `(tenant_id, <order columns>) WHERE <live predicate>`
    (`CONCURRENTLY`) and order the sub-select by columns only that index supplies
    (`ORDER BY enqueued_at, id`): an id-ordered sub-select keeps walking the FIFO index even
    when a `(tenant_id, id)` index exists. Complementary: tell the planner how many tenants
    there are, `ALTER TABLE ... ALTER COLUMN tenant_id SET (n_distinct = N)` and ANALYZE.

    ## When it stays quiet
    The inner scan has the tenant column in its Index Cond (a descent of a tenant-led index)
    and no index that is not led by the tenant column supplies the sub-select's ORDER BY, or
    the largest tenant holds less than `latent_top_share` of the live rows, or pg_stats
    counts as many distinct tenants as there are; the statement has no LATERAL per-tenant
    sub-select. A statement without a plan is reported as skipped. Fewer live rows than
    `min_backlog_rows`, or up to `margin` (20 %) more (an estimate that moves between runs),
    make the finding info.
    """
    for d in judgeable_dequeues(snapshot):
        stmt, table, lateral = d.statement, d.table, d.parsed.lateral
        if lateral is None:
            continue
        plan = stmt.analyzed_plan or stmt.custom_plan
        if plan is None:
            if not stmt.plan_error:
                yield Skip(f"{statement_label(stmt)}: no plan was made", d.queue.qualified)
            continue
        walk = walking_scan(plan, table, lateral.inner_column)
        facts = tenant_facts(snapshot, table.schema, table.name)
        if walk is not None:
            yield _walk(snapshot, d, lateral, walk, facts, options)
            continue
        latent = _latent(snapshot, d, lateral.inner_column, plan, facts, options)
        if latent is not None:
            yield latent


def mentions(text: str | None, column: str) -> bool:
    """The condition text (EXPLAIN's) refers to the column."""
    if not text:
        return False
    try:
        return column in condition_columns(text)
    except StatementError:
        return False


def walking_scan(plan: PlanNode, table: Table, tenant: str) -> tuple[PlanNode, Index | None] | None:
    """The first scan of the queue table that does not descend on the tenant column."""
    for node in scans(plan, table.schema, table.name):
        if node.node_type == "Bitmap Index Scan":
            continue  # judged through its Bitmap Heap Scan (whose Recheck Cond is index_cond)
        if mentions(node.index_cond, tenant):
            continue
        index_node = node
        if node.node_type == "Bitmap Heap Scan":
            index_node = next((n for n in node.walk() if n.index is not None), node)
        idx = next((i for i in table.indexes if i.name == index_node.index), None)
        return node, idx
    return None


def descending_scan(plan: PlanNode, table: Table, tenant: str) -> PlanNode | None:
    """The first scan of the queue table that descends on the tenant column."""
    for node in scans(plan, table.schema, table.name):
        if node.node_type != "Bitmap Index Scan" and mentions(node.index_cond, tenant):
            return node
    return None


def other_order_index(table: Table, tenant: str, order: Sequence[OrderItem]) -> Index | None:
    """A valid index not led by the tenant column whose leading keys are the sub-select's
    ORDER BY columns: the planner may walk it in that order instead of descending per tenant."""
    cols = tuple(o.column for o in order if o.column != tenant)
    if not cols:
        return None
    for idx in table.indexes:
        if idx.is_valid and idx.columns[:1] != (tenant,) and idx.columns[: len(cols)] == cols:
            return idx
    return None


def n_distinct_sql(table: Table, tenant: str, n: int) -> str:
    return (
        f"ALTER TABLE {qualified(table.schema, table.name)} ALTER COLUMN {ident(tenant)} "
        f"SET (n_distinct = {n});"
    )


def tenant_count(facts: TenantFacts | None) -> int | None:
    """How many tenants there are, as best known: the rotation table, else those counted."""
    if facts is None:
        return None
    known = [n for n in (facts.rotation_rows, facts.tenants_counted) if n]
    return max(known) if known else None


def backlog(
    table: Table, live: LivePredicate | None, facts: TenantFacts | None
) -> tuple[int | None, str]:
    """Live rows and where the number comes from."""
    if facts is not None and facts.live_by_tenant:
        total = sum(c.rows for c in facts.live_by_tenant)
        exact = "counted" if facts.counts_complete else "counted (at least; counts were capped)"
        return total, exact
    est = live_rows(table, live)
    return (round(est.rows), est.source) if est.rows is not None else (None, est.source)


def _walk(
    snapshot: Snapshot,
    d: Dequeue,
    lateral: Lateral,
    walk: tuple[PlanNode, Index | None],
    facts: TenantFacts | None,
    options: Options,
) -> Finding:
    """The sub-select ``lateral`` of the statement walks the backlog (``walk``: the scan and
    its index) with the tenant as a Filter."""
    stmt, table, live = d.statement, d.table, d.queue.live
    tenant = lateral.inner_column
    node, idx = walk
    name = statement_id(stmt)
    label = statement_label(stmt)
    rows, rows_source = backlog(table, live, facts)
    tenants = tenant_count(facts)
    n_distinct = distinct_values(table, tenant)
    how = (
        "reads it with a Seq Scan"
        if node.node_type == "Seq Scan"
        else f"walks index {idx.name if idx else node.index}"
        + (f" ({', '.join(str(c) for c in idx.columns)})" if idx else "")
    )
    rotation = facts.rotation_table if facts and facts.rotation_table else lateral.outer_table
    message = (
        f"The round-robin sub-select of {label} {how} on {table.qualified} with {tenant} as a "
        f"Filter, instead of descending an index led by {tenant}: each tenant probed walks the "
        "backlog until it meets one of its jobs"
    )
    if rows is not None:
        message += f", the whole {human_count(rows)} live rows for a tenant with nothing queued"
    if facts is not None and facts.rotation_rows is not None:
        idle = facts.idle_tenants
        message += f"; {rotation} has {human_count(facts.rotation_rows)} tenants" + (
            f", {human_count(idle)} of them idle" if idle is not None else ""
        )
    message += "."
    if n_distinct is not None and tenants and tenants > n_distinct:
        message += (
            f" pg_stats sees {n_distinct:g} distinct {tenant} values against {tenants:,} "
            "tenants, so the planner expects a short walk."
        )
    if stmt.analyzed_ms is not None:
        message += f" Measured with --analyze: {stmt.analyzed_ms:,.1f} ms per dequeue."
    evidence: dict[str, Any] = {
        **statement_evidence(stmt),
        "inner_node": describe_node(node),
        "index": idx.name if idx else node.index,
        "index_columns": list(idx.columns) if idx else None,
        "index_cond": node.index_cond,
        "filter": node.filter,
        "planner_rows_per_tenant": round(node.plan_rows),
        "live_rows": rows,
        "live_rows_source": rows_source,
        "tenant_column": tenant,
        "n_distinct_tenant": n_distinct,
        "rotation_table": rotation,
        "rotation_rows": facts.rotation_rows if facts else None,
        "idle_tenants": facts.idle_tenants if facts else None,
    }
    if idx is not None:
        evidence |= {
            "index_entries": round(idx.reltuples),
            "index_idx_scan": idx.idx_scan,
            "index_idx_tup_read": idx.idx_tup_read,
            "index_tup_read_per_scan": round(idx.idx_tup_read / idx.idx_scan)
            if idx.idx_scan and idx.idx_tup_read is not None
            else None,
        }
    if node.actual_loops is not None:
        evidence |= {
            "actual_probes": round(node.actual_loops),
            "rows_removed_by_filter_per_probe": node.rows_removed_by_filter,
            "shared_blocks": node.shared_blocks,
            "analyzed_ms": stmt.analyzed_ms,
        }
    if facts is not None and facts.notes:
        evidence["tenant_facts"] = list(facts.notes)
    severity = None
    if rows is not None and not at_least(rows, options.min_backlog_rows, options.margin):
        # Up to the margin past min_backlog_rows too: the live rows are an estimate.
        severity = Severity.INFO
        message += (
            f" With {human_count(rows)} live rows it is still cheap; it grows with the backlog."
        )
    return Finding(
        target=Target("statement", table.schema, table.name, name),
        severity=severity,
        message=message,
        evidence=evidence,
        explanation=(
            "A skewed backlog makes the ANALYZE sample see only a few tenants, so the planner "
            "expects thousands of rows per tenant and a short walk of the FIFO order; for "
            "small and idle tenants the walk is the whole backlog, once per tenant probed."
        ),
        fix=_fix(snapshot, d, tenant, tenants, n_distinct),
    )


def _latent(
    snapshot: Snapshot,
    d: Dequeue,
    tenant: str,
    plan: PlanNode,
    facts: TenantFacts | None,
    options: Options,
) -> Finding | None:
    """The descent of today's plan, when it rests on the ANALYZE sample: another index supplies
    the sub-select's order, the backlog is skewed and pg_stats undercounts the tenants."""
    stmt, parsed, table = d.statement, d.parsed, d.table
    other = other_order_index(table, tenant, parsed.order_by)
    descent = descending_scan(plan, table, tenant)
    if other is None or descent is None or facts is None or len(facts.live_by_tenant) < 2:
        return None
    counts = facts.live_by_tenant
    total = sum(c.rows for c in counts)
    top = counts[0]
    share = top.rows / total if total else 0.0
    tenants = tenant_count(facts)
    n_distinct = distinct_values(table, tenant)
    if share < options.latent_top_share or tenants is None:
        return None
    if n_distinct is not None and n_distinct >= tenants:
        return None
    name = statement_id(stmt)
    order = ", ".join(o.column + (" DESC" if o.descending else "") for o in parsed.order_by)
    seen = (
        f"pg_stats sees {n_distinct:g} distinct {tenant} values against {tenants:,} tenants"
        if n_distinct is not None
        else f"pg_stats has no n_distinct for {tenant} ({tenants:,} tenants)"
    )
    message = (
        f"The round-robin sub-select of {name} descends index {descent.index} on "
        f"{table.qualified} today, but the plan rests on the ANALYZE sample: its ORDER BY "
        f"{order} is also the order of index {other.name}, {tenant} {top.tenant} holds "
        f"{share:.0%} of the {human_count(total)} live rows, and {seen}, so the planner "
        f"expects {human_count(descent.plan_rows)} rows per tenant. Latent: a sample that sees "
        f"fewer of the small tenants turns the plan into a walk of {other.name} for every "
        "tenant probed."
    )
    evidence: dict[str, Any] = {
        "statement": name,
        "latent": True,
        "inner_node": describe_node(descent),
        "index": descent.index,
        "index_cond": descent.index_cond,
        "order_by": order,
        "order_index": other.name,
        "order_index_columns": list(other.columns),
        "planner_rows_per_tenant": round(descent.plan_rows),
        "live_rows": total,
        "top_tenant": top.tenant,
        "top_tenant_share": round(share, 4),
        "tenant_column": tenant,
        "n_distinct_tenant": n_distinct,
        "tenants": tenants,
        "rotation_rows": facts.rotation_rows,
        "latent_top_share": options.latent_top_share,
    }
    if facts.notes:
        evidence["tenant_facts"] = list(facts.notes)
    return Finding(
        target=Target("statement", table.schema, table.name, name),
        severity=Severity.INFO,
        message=message,
        evidence=evidence,
        explanation=(
            "With a skewed backlog the ANALYZE sample sees a handful of tenants, and how many "
            "decides between a descent of the per-tenant index and a walk of the index that "
            "supplies the ORDER BY: an order only the per-tenant index supplies takes the "
            "choice away from the sample."
        ),
        fix=_fix(snapshot, d, tenant, tenants, n_distinct),
    )


def _fix(
    snapshot: Snapshot, d: Dequeue, tenant: str, tenants: int | None, n_distinct: float | None
) -> Fix | None:
    stmt, parsed, table, live = d.statement, d.parsed, d.table, d.queue.live
    notes: list[str] = []
    steps: list[FixStep] = []
    order = tenant_order(table, tenant, parsed.order_by)
    if live is None:
        return None
    keys = (tenant, *(o.column for o in order))
    existing = existing_tenant_index(table, live, keys)
    if existing is None:
        index = tenant_index(table, live, tenant, order)
        # Ordered as the index, the statement is the rewrite below, not the one recorded.
        serves = (
            stmt
            if tuple(order) == tuple(parsed.order_by)
            else f"the rewrite of {statement_label(stmt)} this fix prints, ordered as its keys"
        )
        steps.extend(index.steps(snapshot, serves))
        notes.append(
            f"Index {index.name} is keyed by the tenant, then the sub-select's order, on the "
            "live rows only."
        )
    else:
        notes.append(f"Index {existing.name} already has the per-tenant key and order.")
    if tuple(order) != tuple(parsed.order_by):
        items = [IndexKey(o.column, o.descending, o.nulls_first).sql for o in order]
        try:
            rewritten = with_order_by(stmt.text, items)
        except StatementError:
            rewritten = None
        if rewritten is not None:
            steps.append(rewrite(stmt, rewritten + ";"))
            notes.append(
                f"The rewrite is the dequeue with the sub-select ordered by {', '.join(items)}. "
                "The current order is one another index supplies, so the planner would keep "
                "walking that index even with the per-tenant index in place."
            )
    n = tenants if tenants and (n_distinct is None or tenants > n_distinct) else None
    alter = n_distinct_sql(table, tenant, n) if n else None
    counted = (
        f"pg_stats counts {n_distinct:g} distinct {tenant} values"
        if n_distinct is not None
        else f"pg_stats has no n_distinct for {tenant}"
    )
    cost = (
        "The ALTER takes a SHARE UPDATE EXCLUSIVE lock (reads and writes go on) and counts from "
        "the next ANALYZE, which reads a sample of at most 300 x default_statistics_target "
        "rows (30,000 by default) under the same lock; a fixed n_distinct survives later "
        "ANALYZEs (raise it as tenants are added)."
    )
    if not steps and alter is not None:
        # Index and order already right: the statistics are what mislead the planner.
        steps += [table_setting(alter), analyze(table)]
        notes.append(f"{counted} against {n:,} tenants. {cost}")
    elif alter is not None:
        notes.append(
            f"Complementary: {counted} against {n:,} tenants, which is why the planner expects "
            f"a short walk. `{alter}` followed by `ANALYZE {qualified(table.schema, table.name)};` "
            f"corrects its estimate. {cost}"
        )
    if not steps:
        notes.append(
            "No mechanical fix: check that the sub-select's WHERE names the live predicate "
            "as the per-tenant index does, and that its ORDER BY is that index's order."
        )
    return Fix(notes=" ".join(notes), steps=tuple(steps))
