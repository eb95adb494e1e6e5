"""How every renderer names a fix's step: what it is, the lock it takes, and where it may run."""

from __future__ import annotations

from qadvisor.model import FixStep


def step_heading(step: FixStep) -> str:
    """``migration: SHARE UPDATE EXCLUSIVE lock, outside a transaction block``,
    ``rewrite of sql/claim.sql:12: application code, not to run``, ``review first: no
    table lock``."""
    if step.kind == "rewrite":
        where = f" of {step.source}" if step.source else ""
        return f"rewrite{where}: application code, not to run"
    lock = {"none": "no table lock", "unknown": "lock not stated"}.get(
        step.lock, f"{step.lock} lock"
    )
    place = {True: "", False: ", outside a transaction block", None: ""}[step.in_transaction_block]
    kind = "migration" if step.kind == "migration" else "review first"
    return f"{kind}: {lock}{place}"
