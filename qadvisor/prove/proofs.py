"""What every part of ``--prove`` says a proof with: a proof that could not be made, the
ratio of two figures, the version the figures were measured on."""

from __future__ import annotations

import math
from collections.abc import Callable

from qadvisor.model import Proof
from qadvisor.prove.copy import CopyPlan

# Progress lines for the person waiting (stderr; the command line decides where they go).
Say = Callable[[str], None]

# The check went quiet, but nothing it is about changed measurably: not a proof.
NOTHING_MOVED = (
    "not proven gone: the check no longer reports it on the copy, but no measure moved beyond "
    "its spread the way the fix means it to (no measurable change)"
)


def not_proven(
    checked: str, why: str, *, version: str = "", plan: CopyPlan | None = None, table_rows: int = 0
) -> Proof:
    """A proof that was not made, and why: the copy could not be built or the scratch server
    failed (``plan`` gives the copy's scale when it was planned), or the fix is about no queue
    table."""
    if plan is None:
        return Proof(version, checked, 0, table_rows, False, 0, False, None, notes=(why,))
    return Proof(version, checked, plan.rows, plan.table_rows, plan.scaled_down, plan.live,
                 False, None, notes=(why,))  # fmt: skip


def rounded_ratio(before: float | None, after: float | None) -> float | None:
    """before / after to three significant digits; None when either is missing or after is
    zero."""
    if before is None or after is None or after <= 0:
        return None
    r = before / after
    digits = 3 - math.floor(math.log10(abs(r))) - 1 if r else 0
    return round(r, max(digits, 0))


def other_version(version: str, checked: str) -> list[str]:
    """The note a proof measured on another major than the checked server's carries."""
    if version.split(".")[0] == checked.split(".")[0]:
        return []
    return [f"measured on PostgreSQL {version}; the checked server runs {checked}"]
