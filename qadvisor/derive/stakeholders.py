"""Who else needs an index: the recorded statements on a queue table whose plans read it.

Pure: the collector planned each statement (qadvisor.collect.stakeholders); here a fix asks,
before it drops an index, which statements read it and which could not be checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from qadvisor.model import Snapshot, Stakeholder, Table


@dataclass(frozen=True)
class IndexUse:
    """The statements on a table checked for an index: those whose plans read it, and those
    that could not be planned (nobody knows what they read)."""

    checked: tuple[Stakeholder, ...]
    users: tuple[Stakeholder, ...]
    unknown: tuple[Stakeholder, ...]
    # Why the statements could not be read at all (no pg_stat_statements, ...), or None.
    unavailable: str | None = None
    # Why the statements read may not be all of them (pg_stat_statements evicted some), or None.
    evicted: str | None = None


def index_use(snapshot: Snapshot, table: Table, index: str) -> IndexUse:
    on_table = tuple(s for s in snapshot.stakeholders if s.queue == table.qualified)
    unavailable = snapshot.unavailable.get("stakeholders") or snapshot.unavailable.get(
        "pg_stat_statements"
    )
    return IndexUse(
        checked=tuple(s for s in on_table if s.plan_error is None),
        users=tuple(s for s in on_table if s.plan_error is None and index in s.indexes_used),
        unknown=tuple(s for s in on_table if s.plan_error is not None),
        unavailable=unavailable,
        evicted=snapshot.pgss_evicted,
    )


def stakeholder_label(s: Stakeholder, width: int = 70) -> str:
    """The start of a statement's text with what pg_stat_statements counted:
    ``DELETE FROM jobs WHERE state = $1 AND ... (1,234 calls, 0.05 ms mean)``."""
    text = " ".join(s.text.split())
    head = text[:width] + ("..." if len(text) > width else "")
    facts = []
    if s.calls is not None:
        facts.append(f"{s.calls:,} call" + ("" if s.calls == 1 else "s"))
    if s.mean_exec_ms is not None:
        facts.append(f"{s.mean_exec_ms:g} ms mean")
    return f"{head} ({', '.join(facts)})" if facts else head
