"""Margins on thresholds that read noisy counters.

pg_stat_statements' calls, plans and blocks, the statistics' row estimates and the costs the
planner derives from them move between two runs on an unchanged database (a sample of
ANALYZE, a plan made again, a call counted since). A check that compares one of them with a
threshold answers three ways: clearly past it (beyond ``threshold x (1 + margin)``), clearly
short of it (below ``threshold x (1 - margin)``), or within the margin, where the check gives
its conservative answer (info, not confirmed) whichever side of the threshold the value fell
on this time. Pure.
"""

from __future__ import annotations

# The margin every check uses unless its options say otherwise: a fifth of the threshold
# either way (row estimates from a 30,000-row sample and per-call averages of a busy
# statement move by a few percent between runs; a fifth leaves room for a counter's reset).
NOISE_MARGIN = 0.2


def at_least(value: float, threshold: float, margin: float = NOISE_MARGIN) -> bool | None:
    """Is ``value`` at least ``threshold``? True when it is beyond the margin
    (``>= threshold x (1 + margin)``), False when it is clearly short of it
    (``< threshold x (1 - margin)``), None when it is within the margin: too close to tell."""
    if value >= threshold * (1 + margin):
        return True
    if value < threshold * (1 - margin):
        return False
    return None


def at_most(value: float, threshold: float, margin: float = NOISE_MARGIN) -> bool | None:
    """Is ``value`` at most ``threshold``? True when it is clearly below
    (``<= threshold x (1 - margin)``), False when it is beyond the margin above
    (``> threshold x (1 + margin)``), None when it is within the margin."""
    if value <= threshold * (1 - margin):
        return True
    if value > threshold * (1 + margin):
        return False
    return None


def near(value: float, threshold: float, margin: float = NOISE_MARGIN) -> bool:
    """``value`` is within the margin of ``threshold`` (either side)."""
    return at_least(value, threshold, margin) is None
