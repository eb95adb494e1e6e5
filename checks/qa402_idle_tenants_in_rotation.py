"""QA402 idle-tenants-in-rotation."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from qadvisor.api import (
    Finding,
    Fix,
    LivePredicate,
    Severity,
    Skip,
    Snapshot,
    Statement,
    Table,
    Target,
    TenantFacts,
    check,
    human_count,
    ident,
    judgeable_queues,
    qualified,
    review,
    tenant_facts,
)
from qadvisor.api.provisional import (
    Lateral,
    predicate_sql,
    statement_queue,
)

# Measured: 10,000 idle tenants cost 10.5 ms per dequeue against 0.15 ms with only
# active tenants, 989 cost 1.17 ms: about one microsecond per idle tenant, each probe being
# one descent of the per-tenant index (a walk of the backlog costs far more, see QA401).
SECONDS_PER_IDLE_PROBE = (10.5e-3 - 0.15e-3) / 10_000


@dataclass(frozen=True)
class Options:
    # Idle tenants (rotation rows with nothing live) before they are worth pruning: at the
    # measured ~1 us per probe, 100 idle tenants add about 0.1 ms to every dequeue.
    min_idle_tenants: int = 100
    # ...and they must be at least this share of the rotation table.
    min_idle_fraction: float = 0.5


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "active_tenants": "Tenants with work",
    "estimate_basis": "Estimate based on",
    "estimated_ms_per_dequeue": "Time per dequeue (estimate)",
    "idle_fraction": "Idle share of the rotation",
    "rotation_rows_checked": "Rotation rows checked per dequeue",
    "min_idle_fraction": "Minimum idle share",
    "min_idle_tenants": "Minimum idle tenants",
}


@check("QA402", "idle-tenants-in-rotation", severity=Severity.WARNING, category="tenants",
       options=Options,
       requires=("table_facts", "statements", "tenant_counts", "tenant_rotation"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """The rotation table of a round-robin dequeue holds many tenants with nothing queued.

    ## What it finds
    The outer table of a round-robin LATERAL dequeue (`queue_tenants`) in which many rows
    name a tenant that has no live job, counted with a bounded probe per rotation row that
    descends the per-tenant index (never a scan of the archive).

    ## Why it matters
    An idle tenant is never served, so its "last served" time stays the oldest and every
    dequeue probes it first: one index probe per idle tenant per dequeue. Measured: 10,000
    idle tenants cost 10.5 ms per dequeue against 0.15 ms with only active tenants; 989 cost
    1.17 ms. If the sub-select walks the backlog (QA401), each idle tenant costs a walk of
    the whole backlog instead.

    ## How to fix
    Keep only tenants with queued work in the rotation. Run the printed prune periodically: it
    locks each idle row `FOR UPDATE SKIP LOCKED` and re-checks it with a fresh snapshot before
    deleting. Every enqueue adds its tenant in the same transaction as the job with `INSERT
    ... ON CONFLICT (tenant) DO UPDATE`, which locks the row (`DO NOTHING` does not): a job
    enqueued while the prune runs either holds the row (the prune skips it), committed before
    the re-check (the re-check sees it), or waits for the prune and inserts the row again.

    ## When it stays quiet
    Fewer than `min_idle_tenants` idle rows, or less than `min_idle_fraction` of the rotation
    table; the queue's known dequeue statements are not round-robin. The rotation table is
    found through the statement, so a queue whose dequeue is not known at all, or whose idle
    tenants could not be counted cheaply, is reported as skipped.
    """
    for queue, table in judgeable_queues(snapshot):
        facts = tenant_facts(snapshot, table.schema, table.name)
        if facts is None:
            continue  # no tenant column: no per-tenant rotation
        if facts.rotation_table is None:
            if not any(_dequeues(snapshot, s, table) for s in snapshot.statements):
                yield Skip(
                    f"{table.qualified}: no dequeue statement of this queue is known, so "
                    "neither is a round-robin rotation table (give it with --query)",
                    table.qualified,
                )
            continue
        if facts.idle_tenants is None or facts.rotation_rows is None:
            reason = next((n for n in facts.notes if "idle tenants" in n), facts.error)
            yield Skip(
                f"{table.qualified}: idle tenants unknown: {reason or 'not collected'}",
                table.qualified,
            )
            continue
        idle, rows = facts.idle_tenants, facts.rotation_rows
        probed = facts.rotation_probed or rows
        if idle < options.min_idle_tenants or idle / max(probed, 1) < options.min_idle_fraction:
            continue
        lateral = _lateral(snapshot, table, facts)
        yield _issue(table, queue.live, facts, lateral, idle, rows, probed, options)


def _dequeues(snapshot: Snapshot, stmt: Statement, table: Table) -> bool:
    found = statement_queue(snapshot, stmt)
    return found is not None and (found[1].schema, found[1].name) == (table.schema, table.name)


def _lateral(snapshot: Snapshot, table: Table, facts: TenantFacts) -> Lateral | None:
    for stmt in snapshot.statements:
        lateral = stmt.parsed.lateral if stmt.parsed else None
        found = statement_queue(snapshot, stmt)
        if (
            lateral is not None
            and found is not None
            and (found[1].schema, found[1].name) == (table.schema, table.name)
            and lateral.outer_table == facts.rotation_table
        ):
            return lateral
    return None


def _issue(
    table: Table,
    live: LivePredicate | None,
    facts: TenantFacts,
    lateral: Lateral | None,
    idle: int,
    rows: int,
    probed: int,
    options: Options,
) -> Finding:
    assert facts.rotation_table is not None
    rotation = qualified(facts.rotation_schema, facts.rotation_table)
    share = idle / max(probed, 1)
    cost_ms = idle * SECONDS_PER_IDLE_PROBE * 1000
    capped = probed < rows
    message = (
        f"{human_count(idle)} of the {human_count(probed)} tenants "
        + ("checked " if capped else "")
        + f"in {rotation} ({share:.0%}) have nothing queued in {table.qualified}: every "
        f"round-robin dequeue probes them before it reaches a tenant with work, about "
        f"{cost_ms:,.2f} ms per dequeue at one index descent each, far more if each probe "
        "walks the backlog (QA401)."
    )
    evidence: dict[str, Any] = {
        "rotation_table": rotation,
        "rotation_rows": rows,
        "rotation_rows_checked": probed,
        "idle_tenants": idle,
        "active_tenants": probed - idle,
        "idle_fraction": round(share, 4),
        "estimated_ms_per_dequeue": round(cost_ms, 3),
        "estimate_basis": "about 1 us per idle tenant per dequeue (measured: 10,000 idle tenants "
        "10.5 ms vs 0.15 ms with only active tenants)",
        "tenant_column": facts.tenant_column,
        "min_idle_tenants": options.min_idle_tenants,
        "min_idle_fraction": options.min_idle_fraction,
    }
    if facts.notes:
        evidence["tenant_facts"] = list(facts.notes)
    return Finding(
        target=Target("table", facts.rotation_schema, facts.rotation_table, facts.rotation_table),
        message=message,
        evidence=evidence,
        explanation=(
            "An idle tenant is never served, so it stays first in the rotation order and is "
            "probed again by every dequeue."
        ),
        fix=_fix(table, live, facts, lateral, rotation),
    )


def _fix(
    table: Table,
    live: LivePredicate | None,
    facts: TenantFacts,
    lateral: Lateral | None,
    rotation: str,
) -> Fix | None:
    if live is None:
        return None
    outer = lateral.outer_column if lateral else facts.tenant_column
    inner = facts.tenant_column
    queue = qualified(table.schema, table.name)
    queued = f"SELECT 1 FROM {queue} j WHERE j.{ident(inner)} = qt.{ident(outer)}" + (
        "" if live.whole_table else f" AND {predicate_sql(live, 'j')}"
    )
    prune = (
        "DO $prune$\n"
        "DECLARE\n"
        "  r record;\n"
        "BEGIN\n"
        "  -- Lock each idle rotation row, skipping rows an enqueue holds right now.\n"
        "  FOR r IN\n"
        f"    SELECT qt.{ident(outer)} AS tenant FROM {rotation} qt\n"
        f"     WHERE NOT EXISTS ({queued})\n"
        "       FOR UPDATE SKIP LOCKED\n"
        "  LOOP\n"
        "    -- Re-check with a new snapshot: a job committed since the first look keeps its row.\n"
        f"    DELETE FROM {rotation} qt\n"
        f"     WHERE qt.{ident(outer)} = r.tenant\n"
        f"       AND NOT EXISTS ({queued});\n"
        "  END LOOP;\n"
        "END\n"
        "$prune$;"
    )
    keep = outer
    if lateral is not None and lateral.outer_order_by:
        first = lateral.outer_order_by[0].column
        if first != outer and all(ch.isalnum() or ch == "_" for ch in first):
            keep = first
    # The no-op update only has to lock the row; a non-key column takes the lighter
    # FOR NO KEY UPDATE lock, which does not wait for workers holding FOR KEY SHARE.
    source = ident(facts.rotation_table or "") if keep != outer else "EXCLUDED"
    enqueue = (
        f"INSERT INTO {rotation} ({ident(outer)}) VALUES ($1) ON CONFLICT ({ident(outer)}) "
        f"DO UPDATE SET {ident(keep)} = {source}.{ident(keep)}"
    )
    notes = (
        "Run the prune periodically (say every minute; it is one transaction: each DELETE in "
        "a DO block takes a new snapshot under READ COMMITTED). It is safe against the enqueue "
        "race only if every enqueue, in the same transaction as its INSERT of the job, runs "
        f"`{enqueue};` (with the tenant as $1). ON CONFLICT DO UPDATE locks the existing "
        "rotation row until the enqueue commits; DO NOTHING would not, and a job enqueued "
        "between the prune's check and its delete would lose its tenant's row and never be "
        "served. With the lock, the prune skips rows an enqueue holds, its re-check sees jobs "
        "committed before it, and an enqueue that comes later waits for the prune and inserts "
        "the row again. The NOT EXISTS probes should descend the per-tenant index (QA401)."
    )
    # A review step, not a migration: it is safe against the enqueue race only once every
    # enqueue upserts its tenant's row as the notes say, a change to the application.
    step = review(
        prune, "ROW EXCLUSIVE",
        note=f"Deletes rotation rows: ROW EXCLUSIVE on {rotation} and a row lock on each row "
        f"it removes; it reads {queue} under ACCESS SHARE.",
    )  # fmt: skip
    return Fix(notes=notes, steps=(step,))
