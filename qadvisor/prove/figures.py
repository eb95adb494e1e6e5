"""What a proof may claim from figures measured on a copy: whether two sets of runs differ
beyond their spread, whether the copy ran a statement as the checked server did, and the
measures of a statement before and after a fix. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from qadvisor.model import ProofMeasure, ProofReproduction, Statement
from qadvisor.prove.proofs import rounded_ratio
from qadvisor.prove.timing import Timed

# A change is measured when every run after lies beyond every run before (the spread) and the
# medians differ by this factor as well: buffers repeat from run to run, and a difference of
# a few buffers in a million is no change.
MIN_CHANGE = 1.1
# The copy reproduces a statement when its rows and its shared buffers per run are within
# this factor of what the checked server's pg_stat_statements recorded per call, or apart by
# at most REPRODUCED_SLACK_BLOCKS buffers (a descent of an index and a heap page or two,
# which the copy's fresher pages may spare).
REPRODUCED_WITHIN = 3.0
REPRODUCED_SLACK_BLOCKS = 10.0


def change(before: Sequence[float], after: Sequence[float]) -> str | None:
    """``lower`` or ``higher`` when the runs after lie wholly below or above the runs before and
    their medians differ by MIN_CHANGE; ``none`` otherwise (no measurable change); None when a
    side has no run."""
    if not before or not after:
        return None
    old, new = statistics.median(before), statistics.median(after)
    if max(after) < min(before) and old >= new * MIN_CHANGE:
        return "lower"
    if min(after) > max(before) and new >= old * MIN_CHANGE:
        return "higher"
    return "none"


def _spread(runs: Sequence[float]) -> tuple[float, float] | None:
    return (min(runs), max(runs)) if len(runs) > 1 else None


def reproduction(statement: Statement, label: str, timed: Timed) -> ProofReproduction:
    """The copy's run of ``statement`` before any fix held against what the checked server
    recorded per call. Rows decide first (a claim that takes a job there and none on the copy
    runs another statement), then shared buffers, which do not depend on the machine; time
    does, and is only reported."""
    rows_there, blocks_there = statement.rows_per_call, statement.shared_blks_per_call
    rows_copy, blocks_copy = timed.rows, timed.shared_blocks
    verdicts = []
    if rows_there is not None and rows_copy is not None:
        verdicts.append(_within(rows_there, rows_copy, slack=0.5))
    if blocks_there is not None:
        verdicts.append(_within(blocks_there, blocks_copy, slack=REPRODUCED_SLACK_BLOCKS))
    verdict = all(verdicts) if verdicts else None
    return ProofReproduction(
        label, rows_there, rows_copy, blocks_there, blocks_copy, REPRODUCED_WITHIN, verdict
    )


def _within(there: float, copy: float, *, slack: float) -> bool:
    if abs(there - copy) <= slack:
        return True
    low, high = min(there, copy), max(there, copy)
    return low > 0 and high / low <= REPRODUCED_WITHIN


def reproduction_note(r: ProofReproduction, mean_ms: float | None, copy_ms: float) -> str:
    """What the proof says of a reproduction: the figures side by side, and the verdict."""
    said = []
    if r.rows_there is not None:
        said.append(f"{_figure(r.rows_there)} rows there, {_figure(r.rows_copy)} on the copy")
    if r.blocks_there is not None:
        said.append(
            f"{_figure(r.blocks_there)} shared buffers there, {_figure(r.blocks_copy)} on the copy"
        )
    if mean_ms is not None:
        said.append(f"{_figure(mean_ms)} ms there, {_figure(copy_ms)} on the copy")
    head = f"{r.statement}: per call, against the checked server's pg_stat_statements: "
    if r.reproduced is None:
        return (
            f"{r.statement}: the checked server recorded no counters for it, so the copy's "
            "cost is not held against production's"
        )
    if r.reproduced:
        return head + "; ".join(said) + f": reproduced (within {r.within:g} times)"
    return (
        head
        + "; ".join(said)
        + f": not reproduced (more than {r.within:g} times apart), so the copy does not run "
        "it as the checked server did and no ratio of its figures is claimed"
    )


def _figure(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def statement_measures(
    label: str, before: Timed, after: Timed | None, comparable: bool
) -> tuple[ProofMeasure, ProofMeasure]:
    """The time and shared buffers of a statement before and after a fix, each the median of
    its runs with their spread. A run that took no row is no figure (its time is that of
    finding nothing), and no ratio is claimed unless ``comparable`` (the copy reproduced the
    statement) and the change is measured."""

    def runs(t: Timed | None, what: str) -> tuple[float, ...]:
        if t is None or t.rows == 0:
            return ()
        return t.runs_ms if what == "ms" else t.runs_blocks

    def moved_by(what: str) -> str | None:
        return change(runs(before, what), runs(after, what)) if comparable else None

    # Buffers repeat from run to run and time does not: a claim that reads the same buffers
    # through the same scan after the fix as before it costs the same, and a time that moved
    # beyond its spread all the same moved with the machine's load between the two sets of
    # runs (seconds-long runs on a busy machine drift by more than a tenth), not with the fix.
    same_work = after is not None and after.node == before.node and moved_by("blocks") == "none"
    out = []
    for what, name in (("ms", "claim ms"), ("blocks", "shared buffers per claim")):
        old, new = runs(before, what), runs(after, what)
        moved = moved_by(what)
        if what == "ms" and same_work and moved in ("lower", "higher"):
            moved = "none"
        ratio = rounded_ratio(_median(old), _median(new)) if moved in ("lower", "higher") else None
        timing = what == "ms"
        out.append(
            ProofMeasure(
                name,
                label,
                _median(old),
                _median(new),
                ratio,
                plan_before=before.node if timing else None,
                plan_after=after.node if timing and after else None,
                before_spread=_spread(old),
                after_spread=_spread(new),
                change=moved,
            )
        )
    return out[0], out[1]


def _median(runs: Sequence[float]) -> float | None:
    return round(statistics.median(runs), 3) if runs else None


def once(measure: str, subject: str, before: float, after: float) -> ProofMeasure:
    """A figure measured once on each side (index bytes, table rows): a measured change when
    the values differ by MIN_CHANGE."""
    ratio = rounded_ratio(before, after) if before else None
    return ProofMeasure(measure, subject, before, after, ratio, change=change([before], [after]))


# The direction in which each measure shows a fix working.
BETTER = {
    "claim ms": "lower",
    "shared buffers per claim": "lower",
    "index bytes": "lower",
    "table rows": "lower",
    "dead tuples at peak": "lower",
    "autovacuum runs": "higher",
}


def improved(measures: Sequence[ProofMeasure]) -> bool:
    """A measure moved beyond its spread the way its fix means it to: what "gone" needs
    besides the check's silence."""
    return any(m.change is not None and m.change == BETTER.get(m.measure) for m in measures)
