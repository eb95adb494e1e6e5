"""QA503 window-with-for-update."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from qadvisor.api import (
    Finding,
    Fix,
    Severity,
    Skip,
    Snapshot,
    Statement,
    Table,
    check,
    judgeable_locking,
    qualified,
    rewrite,
    statement_evidence,
    statement_label,
    statement_target,
    tenant_facts,
)
from qadvisor.api.provisional import (
    KeyNotReturned,
    round_robin_fix,
    window_partitions,
    with_lock_outside,
)

# A PARTITION BY column that names a tenant: the window picks one job per tenant.
_TENANT = re.compile(
    r"(^|_)(tenant|account|customer|org|organi[sz]ation|workspace|team|project|company|client|"
    r"merchant|shop|store)(_id)?$"
)


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "partition_by": "PARTITION BY",
    "plan_error": "Planning error",
}


@check(
    "QA503",
    "window-with-for-update",
    severity=Severity.CRITICAL,
    category="locking",
    requires=("statements",),
    labels=LABELS,
)
def run(snapshot: Snapshot, options: object) -> Iterator[Finding | Skip]:
    """FOR UPDATE at the same query level as a window function: PostgreSQL refuses it.

    ## What it finds
    A dequeue statement whose locking clause applies to a query level with a window function,
    directly (`SELECT ..., row_number() OVER (...) ... FOR UPDATE`) or through a derived table
    the lock is pushed into (`SELECT ... FROM (SELECT ..., row_number() OVER (...) rn ...) x
    WHERE rn = 1 FOR UPDATE`).

    ## Why it matters
    PostgreSQL raises "FOR UPDATE is not allowed with window functions": the statement fails
    every time it runs. It is the obvious way to write "each tenant's first job"
    (`row_number() OVER (PARTITION BY tenant_id ...)`), and the documentation says FOR UPDATE
    "cannot be specified with WINDOW".

    ## How to fix
    For one job per tenant, use the round-robin LATERAL: a rotation table and a per-tenant
    sub-select that carries the lock (the fix prints the DDL and the statement). Otherwise
    compute the window in a sub-select of WHERE and lock at the outer level, which PostgreSQL
    accepts: `SELECT * FROM jobs WHERE id IN (SELECT id FROM (<the windowed query>) w) FOR
    UPDATE SKIP LOCKED` (a locked row is then skipped, not replaced by the next one).

    ## When it stays quiet
    No window function sits at a level the lock applies to: windows in a WHERE or select-list
    sub-select, or in a derived table that `FOR UPDATE OF` leaves out, are accepted. A queue
    whose dequeue statement is not known is reported as skipped.
    """
    for locking in judgeable_locking(snapshot):
        stmt, parsed, job = locking.statement, locking.parsed, locking.job
        if not parsed.has_window:
            continue
        table = next(
            (t for t in snapshot.tables if t.name == job[1] and job[0] in (None, t.schema)), None
        )
        queue = None
        if table is not None:
            queue = next(
                (q for q in snapshot.queues if (q.schema, q.table) == (table.schema, table.name)),
                None,
            )
        partition = list(window_partitions(stmt.text))
        facts = tenant_facts(snapshot, table.schema, table.name) if table else None
        tenant = next(
            (
                c
                for c in partition
                if (facts is not None and c == facts.tenant_column) or _TENANT.search(c)
            ),
            None,
        )
        fix: Fix | None = None
        evidence: dict[str, Any] = {
            **statement_evidence(stmt),
            "source": stmt.source,
            "lock_level": parsed.lock_level,
            "locked_tables": list(parsed.locked_tables),
            "partition_by": partition,
            "plan_error": stmt.plan_error,
        }
        if tenant is not None and table is not None and queue is not None:
            fix = round_robin_fix(table, queue.live, tenant, parsed.order_by, (stmt,), snapshot)
            if fix is not None:
                fix = Fix(
                    notes=f"The window picks one job per {tenant}: the round-robin LATERAL does "
                    "that with the lock on the job. " + fix.notes,
                    safety=fix.safety,
                    steps=fix.steps,
                )
        if fix is None:
            fix = _wrapped_fix(stmt, table, job)
        yield Finding(
            target=statement_target(snapshot, stmt),
            message=(
                f"{statement_label(stmt)} takes a row lock at a query level with a window "
                "function: "
                'PostgreSQL refuses it ("FOR UPDATE is not allowed with window functions"), so '
                "the statement fails every time it runs."
            ),
            evidence=evidence,
            explanation=(
                "Row locks and window functions cannot share a query level: the lock must sit "
                "where single rows of the queue table are read."
            ),
            fix=fix,
        )


def _wrapped_fix(stmt: Statement, table: Table | None, job: tuple[str | None, str]) -> Fix:
    """``SELECT * FROM queue WHERE pk IN (SELECT pk FROM (<windowed query, unlocked>) w) FOR
    UPDATE SKIP LOCKED`` for a top-level SELECT that returns the key; else a template."""
    queue = qualified(job[0], job[1])
    pk = table.primary_key if table is not None else ()
    template = (
        "Compute the window in a sub-select of WHERE and lock at the outer level: "
        f"`SELECT * FROM {queue} WHERE <key> IN (SELECT <key> FROM (<the windowed query "
        "without FOR UPDATE>) w) FOR UPDATE SKIP LOCKED`."
    )
    try:
        text = with_lock_outside(stmt.text, queue, pk)
    except KeyNotReturned:
        return Fix(notes=template + f" The statement must return the key ({', '.join(pk)}).")
    if text is None:
        return Fix(notes=template)
    return Fix(
        notes="The window "
        "runs in a sub-select of WHERE, a query level the lock does not reach, and the lock "
        "takes the chosen rows at the outer level. A row another worker holds is skipped, not "
        "replaced by the next candidate; if one job per tenant is the aim, the round-robin "
        "LATERAL of QA403 is the better shape.",
        steps=(rewrite(stmt, text + ";"),),
    )
