"""Which row-locking statements are claims: the ones that choose which job to take.

A queue's workers claim with ``... FOR UPDATE SKIP LOCKED`` (or, without SKIP LOCKED, with an
``ORDER BY ... LIMIT`` that picks the next job). Other statements lock rows too, and judging
them as dequeues gives wrong findings:

- PostgreSQL's own foreign-key checks, run by RI triggers for every insert into a referencing
  table: ``SELECT 1 FROM ONLY "public"."jobs" x WHERE "id" OPERATOR(pg_catalog.=) $1 FOR KEY
  SHARE OF x`` (pg_stat_statements records them as nested, toplevel = false);
- a lock of one known row by its key after the claim (``WHERE id = $1 FOR UPDATE``), where
  waiting is right and SKIP LOCKED would be wrong;
- a statement that locks rows without choosing among them (no SKIP LOCKED, no ORDER BY, no
  LIMIT, no condition that could select waiting jobs).

Pure: the unique keys come from the catalog, collected beforehand.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from qadvisor.derive.predicates import operand_values
from qadvisor.model import LivePredicate
from qadvisor.sql.dequeue import DequeueStatement
from qadvisor.sql.printing import predicate_sql

# The spelling PostgreSQL's RI triggers use (ri_triggers.c builds it with OPERATOR(...)).
# pg_stat_statements shows its constant 1 as $n, and records it as toplevel when the
# referencing INSERT came over the extended protocol, so the text is the reliable marker.
_RI_SHAPE = re.compile(r"^\s*SELECT\s+(?:1|\$\d+)\s+FROM\s+ONLY\s", re.IGNORECASE)
_QUALIFIED_OPERATOR = re.compile(r"OPERATOR\s*\(\s*pg_catalog\.", re.IGNORECASE)


@dataclass(frozen=True)
class Judgement:
    is_claim: bool
    reason: str  # why it is, or is not, judged as a claim


def judge(
    parsed: DequeueStatement,
    unique_keys: Sequence[Sequence[str]] = (),
    toplevel: bool | None = None,
) -> Judgement:
    """Is this row-locking statement a claim on its queue table?

    ``unique_keys`` are the column sets of the queue table's unique indexes; ``toplevel`` is
    pg_stat_statements' flag (None when unknown).
    """
    text = parsed.text
    if _RI_SHAPE.match(text) and _QUALIFIED_OPERATOR.search(text):
        return Judgement(False, "is a foreign-key check run by PostgreSQL's RI triggers")
    if toplevel is False and parsed.lock.strength == "key share" and not parsed.order_by:
        return Judgement(False, "is a nested FOR KEY SHARE lookup (a foreign-key check)")
    key = _key_lookup(parsed, unique_keys)
    if parsed.lock.wait_policy == "skip locked":
        if key:
            return Judgement(True, f"locks the row with {key} if it is free (SKIP LOCKED)")
        return Judgement(True, "locks with SKIP LOCKED")
    if key:
        return Judgement(False, f"locks one row by its key ({key}): waiting for it is right")
    if parsed.order_by or parsed.limit is not None or parsed.limit_is_parameter:
        return Judgement(True, "chooses a job with ORDER BY / LIMIT")
    return Judgement(
        False, "locks rows without choosing among them (no SKIP LOCKED, ORDER BY or LIMIT)"
    )


def _key_lookup(parsed: DequeueStatement, unique_keys: Sequence[Sequence[str]]) -> str:
    """The condition that pins one row by a unique key ('' when there is none)."""
    pinned = {
        p.column: p.text
        for p in parsed.predicates
        if p.op == "=" and p.operands and p.operands[0].kind in ("parameter", "literal")
    }
    for key in unique_keys:
        if key and all(c in pinned for c in key):
            return " AND ".join(pinned[c] for c in key)
    return ""


def selects_other_rows(parsed: DequeueStatement, live: LivePredicate | None) -> str:
    """Why a claim does not take waiting jobs of its queue ('' when it may): its literal
    condition on the live column admits none of the live values (pg-boss's dependency
    resolver locks ``state = 'completed'`` parents with SKIP LOCKED). A condition with a
    parameter may admit them: pg_stat_statements text cannot say."""
    if live is None or live.op not in ("in", "not in"):
        return ""
    for pred in parsed.predicates:
        if pred.column != live.column or pred.op not in ("=", "in", "any"):
            continue
        values = operand_values(pred, {})
        if not values:
            continue
        admitted = (
            set(values) & set(live.values) if live.op == "in" else set(values) - set(live.values)
        )
        if not admitted:
            return f"it locks rows with {pred.text}, none of them waiting ({predicate_sql(live)})"
    return ""
