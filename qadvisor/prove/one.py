"""One finding's fix proven on a clone of the copy, at once: measured before (shared by the
table's findings), the fix's migration and review steps run as printed and its rewrites in
the statements' place, measured again."""

from __future__ import annotations

import re
from collections.abc import Sequence

import psycopg

from qadvisor.collect.queries import first_line
from qadvisor.model import Finding, Proof, Queue, Statement
from qadvisor.prove.copy import CopyPlan
from qadvisor.prove.figures import improved, reproduction, reproduction_note
from qadvisor.prove.measure import Measured, compare, made_worse, measure
from qadvisor.prove.proofs import NOTHING_MOVED, other_version
from qadvisor.settings.resolve import Settings
from qadvisor.sql.printing import qualified

# Checks judged from activity counters (dead tuples, vacuum runs, updates): a copy built from
# statistics starts with none of them.
COUNTER_CHECKS = frozenset({"QA201", "QA202", "QA205"})

# A step that writes rows (a retention's batched DELETE, in a DO block or not).
_CHANGES_ROWS = re.compile(r"\b(DELETE\s+FROM|UPDATE\s+\S+\s+SET|INSERT\s+INTO|TRUNCATE)\b", re.I)


def prove_one(
    owner_dsn: str,
    settings: Settings,
    queue: Queue,
    plan: CopyPlan,
    finding: Finding,
    statements: Sequence[Statement],
    before: Measured,
    version: str,
    checked: str,
) -> Proof:
    """``finding``'s fix on the clone at ``owner_dsn``; ``before`` is the copy measured
    without any fix."""
    from qadvisor.derive.statement_ids import statement_id
    from qadvisor.derive.statement_queues import statement_label

    assert finding.fix is not None
    ours = [s for s in statements if finding.statement_id in (None, statement_id(s))]
    mine = {statement_label(s) for s in ours}
    rewrites = {s.before: s.sql for s in finding.fix.of_kind("rewrite") if s.before}
    notes = [n for n in before.notes if _about(n, mine)]
    held = []
    for s in ours:
        label = statement_label(s)
        if label in before.timed:
            r = reproduction(s, label, before.timed[label])
            held.append(r)
            notes.append(reproduction_note(r, s.mean_exec_ms, before.timed[label].ms))
    comparable = {r.statement for r in held if r.reproduced is not False}
    reported = finding.key in before.verdicts.keys
    # A finding about a statement is reproduced only where the copy runs that statement as
    # the checked server did; a finding about a table or an index stands on its own figures
    # (its statements' ratios are still withheld where the copy did not reproduce them).
    unlike = [r.statement for r in held if r.reproduced is False] if finding.statement_id else []
    reproduced = reported and not unlike
    if not reported:
        notes.append(_not_reproduced(finding, plan, before))
    elif unlike:
        notes.append(
            f"not reproduced: the copy does not run {unlike[0]} as the checked server did "
            "(its rows or shared buffers per call are too far apart, above), so nothing is "
            "proven"
        )
    applied = [s for s in finding.fix.steps if s.kind in ("migration", "review")]
    unfilled = sorted({part for step in applied for part in step.left_to_fill})
    if unfilled:
        notes.append(
            f"not proven: the fix has a part only the DBA can write ({', '.join(unfilled)}), "
            "which qadvisor does not fill in with a guess: it was not run on the copy"
        )
        return Proof(version, checked, plan.rows, plan.table_rows, plan.scaled_down, plan.live,
                     reproduced, None, notes=tuple(notes), reproduction=tuple(held))  # fmt: skip
    try:
        with psycopg.connect(owner_dsn, autocommit=True) as conn:
            # As printed, and nothing else: an ANALYZE here would replace the statistics
            # restored from the checked table. Except after a step that changes rows (a
            # retention's DELETE): autovacuum, off on the copy, would vacuum and analyze the
            # table after it in production, and the checks judge what it leaves.
            for step in applied:
                conn.execute(step.sql.encode())
            if any(_CHANGES_ROWS.search(step.sql) for step in applied):
                conn.execute(f"VACUUM ANALYZE {qualified(queue.schema, queue.table)}".encode())
                notes.append(
                    "the fix changes rows: the copy was vacuumed and analyzed after it, as "
                    "autovacuum would do"
                )
    except psycopg.Error as exc:
        notes.append(f"not proven: the fix failed on the copy: {first_line(exc)}")
        return Proof(version, checked, plan.rows, plan.table_rows, plan.scaled_down, plan.live,
                     reproduced, None, notes=tuple(notes), reproduction=tuple(held))  # fmt: skip
    after = measure(owner_dsn, settings, queue, statements, rewrites)
    notes += [n for n in after.notes if n not in notes and _about(n, mine)]
    measures = compare(before, after, mine, comparable)
    quiet = (finding.key not in after.verdicts.keys) if reproduced else None
    gone = (quiet and improved(measures)) if reproduced else None
    if reproduced and not quiet:
        notes.append(after.verdicts.not_gone(finding.key))
    elif quiet and not gone:
        notes.append(NOTHING_MOVED)
    notes += made_worse(before, after, mine)
    notes += other_version(version, checked)
    return Proof(version, checked, plan.rows, plan.table_rows, plan.scaled_down, plan.live,
                 reproduced, gone, measures, tuple(notes), quiet, tuple(held))  # fmt: skip


def _not_reproduced(finding: Finding, plan: CopyPlan, before: Measured) -> str:
    why = (
        f"not reproduced: qadvisor's checks on the copy do not report {finding.key}, so "
        "the copy is not faithful to what the snapshot measured and nothing is proven"
        + before.verdicts.skipped(finding.code)
    )
    if plan.scaled_down:
        why += (
            f" (the copy is scaled down from {plan.table_rows:,} rows, and a check whose "
            "thresholds are sizes may not fire on it: raise --prove-rows)"
        )
    if finding.code in COUNTER_CHECKS:
        why += (
            f" ({finding.code} is judged from the table's activity counters and vacuum "
            "history, which a copy built from statistics does not have)"
        )
    return why


def _about(note: str, labels: set[str]) -> bool:
    """A note about one of the statements ``labels`` (they begin with the label)."""
    return any(note.startswith(f"{label}: ") for label in labels)
