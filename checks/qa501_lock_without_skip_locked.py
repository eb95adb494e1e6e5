"""QA501 lock-without-skip-locked."""

from __future__ import annotations

from collections.abc import Iterator

from qadvisor.api import (
    Finding,
    Fix,
    Severity,
    Skip,
    Snapshot,
    check,
    judgeable_locking,
    rewrite,
    statement_evidence,
    statement_label,
    statement_target,
)
from qadvisor.api.provisional import (
    with_skip_locked,
)

# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "lock_strength": "Lock strength",
}


@check(
    "QA501",
    "lock-without-skip-locked",
    severity=Severity.WARNING,
    category="locking",
    requires=("statements",),
    labels=LABELS,
)
def run(snapshot: Snapshot, options: object) -> Iterator[Finding | Skip]:
    """A dequeue statement locks rows with FOR UPDATE (or NOWAIT) but without SKIP LOCKED.

    ## What it finds
    A statement that claims queue rows with `FOR UPDATE`, `FOR NO KEY UPDATE` or `FOR SHARE`
    (at any query level: top, sub-select, CTE, LATERAL) whose locking clause waits for
    locked rows or fails on them with `NOWAIT`, instead of skipping them.

    ## Why it matters
    Every worker asks for the same first row. Without SKIP LOCKED the second worker waits
    until the first commits and then usually finds the row gone, so the workers take turns
    instead of working in parallel; with NOWAIT the second worker gets an error instead. The
    PostgreSQL documentation recommends SKIP LOCKED "to avoid lock contention with multiple
    consumers accessing a queue-like table".

    ## How to fix
    Add `SKIP LOCKED` to the locking clause (the statement is printed rewritten). If the
    clause also locks rows of another table (a tenant or rotation table), the rewrite names
    the queue table with `OF` so that only the job is locked (see QA502).

    ## When it stays quiet
    Every locking clause of the statement has SKIP LOCKED, or the statement takes no row
    lock. A queue whose dequeue statement is not known (no pg_stat_statements, no `--query`)
    is reported as skipped.
    """
    for locking in judgeable_locking(snapshot):
        stmt, parsed, job = locking.statement, locking.parsed, locking.job
        if parsed.lock.wait_policy == "skip locked":
            continue
        target = statement_target(snapshot, stmt)
        policy = parsed.lock.wait_policy
        clause = f"FOR {parsed.lock.strength.upper()}" + (" NOWAIT" if policy else "")
        consequence = (
            "a second worker gets an error instead of the next free job"
            if policy == "nowait"
            else "a second worker waits for the first one's transaction and the workers take "
            "turns instead of running in parallel"
        )
        rewritten = with_skip_locked(stmt.text, *job)
        fix = None
        if rewritten is not None:
            fix = Fix(
                notes="The rewrite is the dequeue with SKIP LOCKED (and OF the queue table when "
                "the clause locked other tables too). A worker now skips rows other workers "
                "hold and takes the next free one.",
                steps=(rewrite(stmt, rewritten + ";"),),
            )
        yield Finding(
            target=target,
            message=(
                f"{statement_label(stmt)} claims {target.table} rows with {clause} without SKIP "
                f"LOCKED: {consequence}."
            ),
            evidence={
                **statement_evidence(stmt),
                "source": stmt.source,
                "lock_strength": parsed.lock.strength,
                "wait_policy": policy or "wait",
                "lock_level": parsed.lock_level,
                "locked_tables": list(parsed.locked_tables),
                "calls": stmt.calls,
                "mean_exec_ms": stmt.mean_exec_ms,
            },
            explanation=(
                "Workers of a queue all want the same first row; only SKIP LOCKED lets each "
                "take a different one without waiting or failing."
            ),
            fix=fix,
        )
