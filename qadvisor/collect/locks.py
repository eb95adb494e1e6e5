"""Other sessions' locks on the relations qadvisor would open, read once before it opens any.

Reading a size (``pg_table_size``, ``pg_relation_size``) or an index definition
(``pg_get_indexdef``, ``pg_get_expr``) takes ACCESS SHARE on the relation; planning a claim
takes ROW SHARE (ROW EXCLUSIVE for an UPDATE or DELETE) on the table and its indexes; a tenant
probe reads the table. Each of these waits, up to ``lock_timeout``, behind a conflicting lock
that another session holds or is waiting for (a migration's ``ALTER TABLE`` queued behind a
long transaction blocks every later reader too). :func:`read_locks` reads pg_locks once, and
the collector leaves alone every relation with such a lock: a size is estimated from
``pg_class.relpages`` instead, and a fact that needs the relation is recorded as hidden, naming
the blocking pid, its lock mode, its state and the start of its query.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg

from qadvisor.collect import queries as q
from qadvisor.facts import FACTS
from qadvisor.sql.masking import mask_literals

Conn = psycopg.Connection[Any]

ACCESS_SHARE = "AccessShareLock"
ROW_SHARE = "RowShareLock"
ROW_EXCLUSIVE = "RowExclusiveLock"

# PostgreSQL docs, "Explicit Locking", table "Conflicting Lock Modes": the held (or requested)
# modes that make a request of each mode qadvisor takes wait.
CONFLICTS = {
    ACCESS_SHARE: frozenset({"AccessExclusiveLock"}),
    ROW_SHARE: frozenset({"ExclusiveLock", "AccessExclusiveLock"}),
    ROW_EXCLUSIVE: frozenset(
        {"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"}
    ),
}

_QUERY_CHARS = 80


@dataclass(frozen=True)
class HeldLock:
    """A relation lock of another session, granted or waiting (pg_locks + pg_stat_activity)."""

    relid: int
    table_relid: int  # the relation itself, or the table of an index
    relation: str  # "schema.name"
    pid: int | None  # None: a prepared transaction
    mode: str
    granted: bool
    state: str | None = None
    query: str | None = None  # its string constants masked (qadvisor.sql.masking)
    xact_age_s: float | None = None
    waiting_for: tuple[int, ...] = ()
    # The partitioned tables the locked table is a partition of, at every level.
    partitioned_above: tuple[int, ...] = ()

    def describe(self, role: str) -> str:
        """One line for a skip: who, which lock, what it is doing."""
        who = f"pid {self.pid}" if self.pid is not None else "a prepared transaction"
        if self.granted:
            head = f"{who} holds {self.mode} on {self.relation}"
        else:
            behind = ", ".join(str(p) for p in self.waiting_for)
            head = (
                f"{who} waits for {self.mode} on {self.relation}"
                + (f" behind pid {behind}" if behind else "")
                + ", and later lock requests queue behind it"
            )
        if self.pid is None:
            return head
        if self.state is None or (self.query or "").startswith("<insufficient privilege>"):
            grant = FACTS["horizon"].grant("read_all_stats", role)
            return f"{head} (its state and query are hidden from this role: {grant})"
        parts = [self.state]
        if self.xact_age_s is not None:
            parts.append(f"transaction open {self.xact_age_s:,.0f} s")
        text = ", ".join(parts)
        start = query_start(self.query)
        return f"{head} ({text}: {start})" if start else f"{head} ({text})"


def query_start(query: str | None) -> str:
    """The start of another session's query (its constants already masked), one line."""
    if not query:
        return ""
    text = " ".join(query.split())
    return text if len(text) <= _QUERY_CHARS else text[: _QUERY_CHARS - 1].rstrip() + "…"


@dataclass(frozen=True)
class Locks:
    held: tuple[HeldLock, ...] = ()

    def on_relation(self, relid: int, mode: str) -> list[HeldLock]:
        """Locks that make a request of ``mode`` on this one relation wait."""
        conflicts = CONFLICTS[mode]
        return [h for h in self.held if h.relid == relid and h.mode in conflicts]

    def on_table(self, table_relid: int, mode: str) -> list[HeldLock]:
        """Locks that make reading or planning on the table wait: on the table itself or on
        one of its indexes (the planner opens them all with the table's lock mode), and of a
        partitioned table on its partitions and theirs."""
        conflicts = CONFLICTS[mode]
        return [
            h
            for h in self.held
            if (h.table_relid == table_relid or table_relid in h.partitioned_above)
            and h.mode in conflicts
        ]

    def blocked(self, mode: str = ACCESS_SHARE) -> list[int]:
        """Relations (tables and indexes) a request of ``mode`` would wait for."""
        conflicts = CONFLICTS[mode]
        return sorted({h.relid for h in self.held if h.mode in conflicts})


def read_locks(conn: Conn) -> Locks:
    """The conflicting relation locks of other sessions in this database (locks.sql)."""
    held = []
    for r in q.rows(conn, "locks"):
        relation = (
            f"{r['schema']}.{r['relation']}" if r["relation"] is not None else f"oid {r['relid']}"
        )
        held.append(
            HeldLock(
                relid=int(r["relid"]),
                table_relid=int(r["table_relid"]),
                relation=relation,
                pid=r["pid"],
                mode=r["mode"],
                granted=bool(r["granted"]),
                state=r["state"],
                # A literal may be a secret; the statement's shape is what a reader needs.
                query=mask_literals(r["query"]) if r["query"] is not None else None,
                xact_age_s=r["xact_age_s"],
                waiting_for=tuple(r["waiting_for"] or ()),
                partitioned_above=tuple(int(x) for x in r["partitioned_above"] or ()),
            )
        )
    return Locks(tuple(held))


def describe_all(locks: Iterable[HeldLock], role: str) -> str:
    return "; ".join(h.describe(role) for h in locks)
