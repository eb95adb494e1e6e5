"""Which recorded updates of a queue table can be heap-only (HOT), and which index stops them.

PostgreSQL writes an updated row as a heap-only tuple, with no new index entry, only when no
column that an index references changes value (heapam.c, HeapDetermineColumnsInfo): a key
column, an expression's column, an INCLUDE column or a column of a partial index's predicate,
whatever the predicate says of the row. From PostgreSQL 16 a summarizing index (BRIN) does
not stop it. Otherwise the new version gets an entry in every index of the table whose
predicate it satisfies, and needs room on the same page besides.

Pure: the statements were recorded by pg_stat_statements (or given with --query); here their
text says which columns they set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qadvisor.derive.predicates import index_predicate_columns
from qadvisor.derive.stakeholders import stakeholder_label
from qadvisor.derive.statement_queues import statement_label, statement_queue
from qadvisor.model import Index, Snapshot, Table
from qadvisor.sql.dequeue import condition_columns
from qadvisor.sql.updates import update_targets

# PostgreSQL 16: summarizing indexes (BRIN) no longer stop a HOT update.
SUMMARIZING_FROM = 160000
_USING = re.compile(r"\sUSING\s+(\w+)\s", re.I)


@dataclass(frozen=True)
class RecordedUpdate:
    """A recorded statement that updates the queue table, and the columns it sets."""

    label: str  # where it was seen, as statement_label / stakeholder_label print it
    text: str
    columns: tuple[str, ...]
    kind: str  # "claim", "maintenance" or "statement"
    calls: int | None = None
    rows: int | None = None  # rows it updated, when pg_stat_statements counted them


def index_columns(index: Index, table: Table) -> frozenset[str]:
    """Every column of ``table`` the index references: key columns, the columns of key
    expressions, INCLUDE columns and the predicate's columns."""
    names = {c.name for c in table.columns}
    found = {c for c in index.columns if c is not None}
    found.update(index.include_columns)
    found |= index_predicate_columns(index, table)
    if None in index.columns:
        # An expression: the columns its text names (the definition after USING method).
        using = _USING.search(index.definition)
        if using is not None:
            found |= condition_columns(index.definition[using.end() :])
    return frozenset(found & names)


def stops_hot(index: Index, version_num: int) -> bool:
    """Whether a change of a column the index references makes an update non-HOT."""
    using = _USING.search(index.definition)
    method = using.group(1).lower() if using is not None else "btree"
    return not (method == "brin" and version_num >= SUMMARIZING_FROM)


def recorded_updates(snapshot: Snapshot, table: Table) -> tuple[list[RecordedUpdate], list[str]]:
    """The recorded statements that update ``table`` (claims, maintenance statements and the
    other statements on it), and the labels of those whose text did not parse (what they set
    is unknown)."""
    found: list[RecordedUpdate] = []
    unreadable: list[str] = []
    for kind, statements in (("claim", snapshot.statements), ("maintenance", snapshot.maintenance)):
        for stmt in statements:
            on = statement_queue(snapshot, stmt) if kind == "claim" else None
            queue = on[1].qualified if on is not None else stmt.queue
            if queue != table.qualified:
                continue
            columns = _sets(stmt.text, table, stmt.names)
            if columns is None:
                unreadable.append(statement_label(stmt))
            elif columns:
                found.append(
                    RecordedUpdate(statement_label(stmt), stmt.text, columns, kind, stmt.calls)
                )
    # A maintenance statement is also among the other statements on the table: once is enough.
    seen = {m.queryid for m in snapshot.maintenance if m.queryid is not None}
    for s in snapshot.stakeholders:
        if s.queue != table.qualified or s.queryid in seen:
            continue
        columns = _sets(s.text, table, {})
        if columns is None:
            unreadable.append(stakeholder_label(s))
        elif columns:
            label = stakeholder_label(s)
            found.append(RecordedUpdate(label, s.text, columns, "statement", s.calls, s.rows))
    return found, unreadable


def _sets(text: str, table: Table, names: dict[str, str]) -> tuple[str, ...] | None:
    """The columns of ``table`` the statement's UPDATEs of it set, the stored generated
    columns computed from them included; None when its text does not parse. An unqualified
    name is the table's when the statement was resolved to it."""
    targets = update_targets(text)
    if targets is None:
        return None
    columns: list[str] = []
    for t in targets:
        written = f"{t.schema}.{t.table}" if t.schema else t.table
        resolved = names.get(written)
        if resolved is not None:
            on = resolved == table.qualified
        else:
            on = t.table == table.name and t.schema in (None, table.schema)
        if on:
            columns.extend(c for c in t.columns if c not in columns)
    # A stored generated column is computed again from what the update sets.
    for c in table.columns:
        if c.generated and c.name not in columns and condition_columns(c.generated) & set(columns):
            columns.append(c.name)
    return tuple(columns)
