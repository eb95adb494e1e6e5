"""QA403 fifo-noisy-neighbour."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from qadvisor.api import (
    NOISE_MARGIN,
    Finding,
    LivePredicate,
    Severity,
    Skip,
    Snapshot,
    Statement,
    Table,
    Target,
    TenantFacts,
    at_least,
    check,
    human_count,
    human_seconds,
    judgeable_queues,
    tenant_facts,
)
from qadvisor.api.provisional import (
    round_robin_fix,
    statement_id,
    statement_queue,
)

# The measured setup, used to make a per-worker estimate concrete when the mean job duration is
# unknown: 4 workers, jobs of 20 ms.
EXAMPLE_WORKERS = 4
EXAMPLE_JOB_SECONDS = 0.020
# Operators of a predicate that restricts a dequeue to one tenant (or a few).
_PER_TENANT_OPS = ("=", "in", "any")


@dataclass(frozen=True)
class Options:
    # Share of the live set held by the largest tenant before the backlog counts as skewed.
    min_top_share: float = 0.5
    # Tenants with live rows (the largest one included) before there is a neighbour to hurt.
    min_tenants: int = 2
    # The largest tenant's live rows against the median of the other tenants': an even
    # split (two tenants at 50 %) is not a noisy neighbour; the measured 1,000 vs 5 is 200x.
    min_skew: float = 5.0
    # Live rows ahead of a new job before the wait is worth reporting (measured: 1,000 jobs).
    min_backlog: int = 100
    # Live rows per tenant move between runs (a worker claims, a sample differs): a value
    # this share past a threshold or less is reported as info, so two runs agree.
    margin: float = NOISE_MARGIN


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "backlog_ahead_of_new_job": "Backlog ahead of a new job",
    "counts_complete": "Tenant counts complete",
    "estimated_wait_s_per_worker": "Wait per worker (estimate)",
    "fifo_statements": "FIFO claims",
    "mean_job_seconds": "Mean job duration",
    "round_robin_wait_s_per_worker": "Wait per worker, round robin (estimate)",
    "tenants_with_work": "Tenants with work",
    "top_tenant_rows": "Largest tenant's live rows",
    "top_to_median_ratio": "Largest to median tenant",
    "wait_formula": "Wait formula",
}


@check("QA403", "fifo-noisy-neighbour", severity=Severity.WARNING, category="tenants",
       options=Options,
       requires=("table_facts", "tenant_counts"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """A multi-tenant queue is dequeued in global order while one tenant fills the backlog.

    ## What it finds
    A queue table with a tenant column (`tenant_id`, `account_id`, ...) whose dequeue takes
    the oldest job of any tenant (no LATERAL per-tenant sub-select, no tenant predicate),
    while the live set, counted per tenant with a bounded query, is dominated by one tenant.
    Without a known dequeue statement it is reported as info.

    ## Why it matters
    FIFO orders by arrival, not by customer: a job a small tenant queues now starts after the
    whole backlog ahead of it, about backlog x mean job duration / workers. Measured with 4
    workers, 1,000 jobs of 20 ms from one tenant and five jobs each from ten small tenants a
    second later: the small tenants waited a median of 4.5 s with FIFO and 0.10-0.15 s with
    round-robin per tenant, while the large tenant finished 0.6 s later.

    ## How to fix
    Round-robin per tenant: a rotation table with one row per tenant that has work and the
    time it was last served, a dequeue that takes the longest-waiting tenant's oldest job in a
    LATERAL sub-select (the lock stays on the job, `FOR UPDATE SKIP LOCKED` in the
    sub-select), and a per-tenant partial index so that each probe is one index descent. The
    claim updates the tenant's `last_served`; the enqueue adds the tenant (see QA402).

    ## When it stays quiet
    A round-robin (LATERAL) or per-tenant dequeue statement is known for the queue; the
    largest tenant holds less than `min_top_share` of the live set, or less than `min_skew`
    times the median of the other tenants (an even split); fewer than `min_tenants` tenants
    have work; or fewer than `min_backlog` jobs are queued. A share, skew or backlog up to
    `margin` (20 %) past its threshold gives an info finding: the counts move between runs.
    """
    for queue, table in judgeable_queues(snapshot):
        facts = tenant_facts(snapshot, table.schema, table.name)
        if facts is None:
            continue
        if not facts.live_by_tenant:
            reason = next((n for n in facts.notes if "not counted" in n), facts.error)
            if reason:
                yield Skip(
                    f"{table.qualified}: live rows per tenant unknown: {reason}",
                    table.qualified,
                )
            continue
        mine = [s for s in snapshot.statements if _on(snapshot, s, table)]
        if any(s.parsed and s.parsed.lateral for s in mine):
            continue
        fifo = [s for s in mine if not _per_tenant(s, facts.tenant_column)]
        if mine and not fifo:
            continue
        counts = facts.live_by_tenant
        total = sum(c.rows for c in counts)
        tenants = max(facts.tenants_counted, len(counts))
        top = counts[0]
        share = top.rows / total if total else 0.0
        if tenants < options.min_tenants or share < options.min_top_share:
            continue
        others = sorted(c.rows for c in counts[1:])
        median = others[len(others) // 2] if others else 0
        skew = top.rows / median if median else float("inf")
        if skew < options.min_skew:
            continue
        if total < options.min_backlog:
            continue
        m = options.margin
        near = [
            f"{label} is within {m:.0%} of {name}"
            for value, limit, label, name in (
                (share, options.min_top_share, f"the top share {share:.0%}", "min_top_share"),
                (skew, options.min_skew, f"the skew {skew:,.1f}x", "min_skew"),
                (total, options.min_backlog, f"the backlog {total:,}", "min_backlog"),
            )
            if at_least(value, limit, m) is None
        ]
        yield _issue(snapshot, table, queue.live, facts, fifo, (total, tenants, share, skew), near)


def _on(snapshot: Snapshot, stmt: Statement, table: Table) -> bool:
    found = statement_queue(snapshot, stmt)
    return found is not None and (found[1].schema, found[1].name) == (table.schema, table.name)


def _per_tenant(stmt: Statement, tenant: str) -> bool:
    parsed = stmt.parsed
    return parsed is not None and any(
        p.column == tenant and p.op in _PER_TENANT_OPS for p in parsed.predicates
    )


def _issue(
    snapshot: Snapshot,
    table: Table,
    live: LivePredicate | None,
    facts: TenantFacts,
    fifo: list[Statement],
    measured: tuple[int, int, float, float],
    near: list[str],
) -> Finding:
    """``measured``: the backlog, the tenants with work, the top tenant's share and its skew;
    ``near``: those within the margin of their threshold (the finding is then info)."""
    total, tenants, share, skew = measured
    counts = facts.live_by_tenant
    top = counts[0]
    at_least_ = "" if facts.counts_complete else "at least "
    names = [statement_id(s) for s in fifo]
    how = (
        f"is dequeued in global order ({', '.join(names)})"
        if fifo
        else "has no known per-tenant dequeue (no round-robin or tenant-scoped statement was "
        "seen; give it with --query)"
    )
    mean = facts.mean_job_seconds
    if mean is not None:
        wait = total * mean
        estimate = (
            f"about {human_seconds(wait)} per worker at the measured mean of {mean * 1000:,.0f} "
            f"ms per job over {facts.duration_jobs or 0:,} recent jobs (divide by the number of "
            "workers)"
        )
    else:
        example = total * EXAMPLE_JOB_SECONDS / EXAMPLE_WORKERS
        estimate = (
            f"backlog x mean job duration / workers (the mean job duration is unknown: at "
            f"{EXAMPLE_JOB_SECONDS * 1000:.0f} ms per job and {EXAMPLE_WORKERS} workers that is "
            f"{example:,.1f} s)"
        )
    message = (
        f"{table.qualified} {how} while {facts.tenant_column} {top.tenant} holds "
        f"{at_least_}{human_count(top.rows)} of its {at_least_}{human_count(total)} live jobs "
        f"({share:.0%}) across {human_count(tenants)} tenants: a job any other tenant queues now "
        f"waits behind all {human_count(total)}, {estimate}."
    )
    evidence: dict[str, Any] = {
        "tenant_column": facts.tenant_column,
        "tenants_with_work": tenants,
        "live_rows": total,
        "counts_complete": facts.counts_complete,
        "top_tenant": top.tenant,
        "top_tenant_rows": top.rows,
        "top_tenant_share": round(share, 4),
        "top_to_median_ratio": round(skew, 1) if skew != float("inf") else None,
        "tenants": [
            {"tenant": c.tenant, "rows": c.rows, "share": round(c.rows / total, 4)}
            for c in counts[:10]
        ],
        "backlog_ahead_of_new_job": total,
        "fifo_statements": names,
        "mean_job_seconds": mean,
        "wait_formula": "backlog x mean job duration / workers",
    }
    if mean is not None:
        evidence |= {
            "estimated_wait_s_per_worker": round(total * mean, 3),
            # Round-robin: a new tenant waits for about one round of the tenants with work.
            "round_robin_wait_s_per_worker": round(tenants * mean, 3),
        }
    if facts.notes:
        evidence["tenant_facts"] = list(facts.notes)
    if near:
        evidence["near_threshold"] = "; ".join(near)
        message += f" Info: {'; '.join(near)}, so the counts may fall short on another run."
    order = fifo[0].parsed.order_by if fifo and fifo[0].parsed else ()
    return Finding(
        target=Target("table", table.schema, table.name, table.name),
        severity=None if fifo and not near else Severity.INFO,
        message=message,
        evidence=evidence,
        explanation=(
            "A FIFO dequeue orders by arrival, not by customer: one tenant's backlog delays "
            "every other tenant's jobs by the time it takes to drain it."
        ),
        fix=round_robin_fix(table, live, facts.tenant_column, order, fifo, snapshot),
    )
