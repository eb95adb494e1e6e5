"""The steps of fixes, each with the lock it takes and whether it may run in a transaction
block, written once for every check; and index fixes built from a description (table, key
columns with direction and NULLS order, predicate): the index's name, its CREATE INDEX
CONCURRENTLY statement with the standard notes, and an existing index that is the same.

The locks are those PostgreSQL's documentation gives (the "Explicit Locking" chapter and each
command's page). Pure: table facts in, SQL text out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from qadvisor.derive.estimates import parse_index_predicate, same_predicate
from qadvisor.derive.statement_queues import statement_label
from qadvisor.model import FixStep, Index, LivePredicate, Statement, StepLock, Table
from qadvisor.sql.dequeue import OrderItem
from qadvisor.sql.printing import ident, index_name, index_where, live_words, qualified

# CREATE INDEX CONCURRENTLY, DROP INDEX CONCURRENTLY and REINDEX CONCURRENTLY refuse to run
# inside a transaction block (their reference pages), and a failed concurrent build or
# rebuild leaves an INVALID index behind.
CONCURRENT_BUILD_NOTE = (
    "CREATE INDEX CONCURRENTLY cannot run inside a transaction block: run it on its own. A "
    "failed build leaves an INVALID index: drop it (DROP INDEX CONCURRENTLY) and run the "
    "CREATE again. It takes a SHARE UPDATE EXCLUSIVE lock: reads and writes go on, and it "
    "waits for transactions that started before it."
)
_CONCURRENT_DROP_NOTE = (
    "DROP INDEX CONCURRENTLY cannot run inside a transaction block: run it on its own. It "
    "takes a SHARE UPDATE EXCLUSIVE lock and waits for transactions using the index to end."
)
_REINDEX_NOTE = (
    "REINDEX CONCURRENTLY cannot run inside a transaction block; it needs PostgreSQL 12+ and "
    "about the index's fresh size in free disk space. It takes a SHARE UPDATE EXCLUSIVE lock: "
    "reads and writes go on."
)
_SETTING_NOTE = (
    "Takes a SHARE UPDATE EXCLUSIVE lock: it does not block reads or writes but waits for a "
    "running VACUUM or ANALYZE of the table; set a lock_timeout."
)
_ANALYZE_NOTE = (
    "Takes a SHARE UPDATE EXCLUSIVE lock (reads and writes go on) and reads a sample of the "
    "table: at most 300 x default_statistics_target rows (30,000 by default)."
)


# --- steps ---------------------------------------------------------------------------


def migration(
    sql: str, lock: StepLock, *, in_transaction_block: bool = True, note: str = ""
) -> FixStep:
    """A statement to run as printed (DDL, a setting)."""
    return FixStep("migration", sql, lock, in_transaction_block, note)


def review(
    sql: str, lock: StepLock, *, in_transaction_block: bool = True, note: str = ""
) -> FixStep:
    """A statement for a person to judge before running it."""
    return FixStep("review", sql, lock, in_transaction_block, note)


_REWRITE_NOTE = (
    "Ship it in place of the current statement, in the code that sends it: it is not a "
    "migration, and running it as printed would claim a job."
)


def rewrite(statement: Statement | None, after: str, note: str = "") -> FixStep:
    """``statement`` as the application should send it (None: a claim qadvisor did not see):
    a change to its code, not something to run. Like the claim it replaces, it takes ROW
    SHARE on the tables it locks rows of (SELECT ... FOR UPDATE), inside the application's
    claim transaction."""
    return FixStep(
        "rewrite",
        after,
        "ROW SHARE",
        True,
        " ".join(p for p in (_REWRITE_NOTE, note) if p),
        before=statement.text.strip() if statement is not None else None,
        source=statement_label(statement) if statement is not None else None,
    )


def drop_index(schema: str, name: str) -> FixStep:
    return _concurrently(
        f"DROP INDEX CONCURRENTLY {qualified(schema, name)};", _CONCURRENT_DROP_NOTE
    )


def reindex(schema: str, name: str) -> FixStep:
    return _concurrently(f"REINDEX INDEX CONCURRENTLY {qualified(schema, name)};", _REINDEX_NOTE)


def _concurrently(sql: str, note: str) -> FixStep:
    """A CONCURRENTLY statement: SHARE UPDATE EXCLUSIVE, outside a transaction block."""
    return migration(sql, "SHARE UPDATE EXCLUSIVE", in_transaction_block=False, note=note)


def table_setting(sql: str, note: str = "") -> FixStep:
    """``ALTER TABLE ... SET/RESET (storage parameter)`` or ``ALTER TABLE ... ALTER COLUMN
    ... SET (n_distinct = ...)``: both take SHARE UPDATE EXCLUSIVE (ALTER TABLE's page)."""
    return migration(
        sql, "SHARE UPDATE EXCLUSIVE", note=" ".join(p for p in (_SETTING_NOTE, note) if p)
    )


def analyze(table: Table) -> FixStep:
    return migration(
        f"ANALYZE {qualified(table.schema, table.name)};", "SHARE UPDATE EXCLUSIVE",
        note=_ANALYZE_NOTE,
    )  # fmt: skip


# --- index fixes ---------------------------------------------------------------------


@dataclass(frozen=True)
class IndexKey:
    """A key column of an index to build. ``nulls_first`` None: the direction's default
    (NULLS LAST ascending, NULLS FIRST descending), as CREATE INDEX and ORDER BY both take it."""

    column: str
    descending: bool = False
    nulls_first: bool | None = None

    @property
    def sql(self) -> str:
        text = ident(self.column) + (" DESC" if self.descending else "")
        if self.nulls_first is not None and self.nulls_first != self.descending:
            text += " NULLS FIRST" if self.nulls_first else " NULLS LAST"
        return text

    @property
    def plain(self) -> bool:
        """Ascending with the default NULLS order: what a plain index column is."""
        return not self.descending and self.nulls_first in (None, False)


def index_keys(items: Sequence[OrderItem], table: Table) -> tuple[IndexKey, ...] | None:
    """ORDER BY items as the keys of an index that supplies that order; None when an item is
    not a plain column of ``table`` (an expression, another table's column)."""
    keys = []
    for item in items:
        if table.column(item.column) is None:
            return None
        keys.append(IndexKey(item.column, item.descending, item.nulls_first))
    return tuple(keys)


def order_keys_sql(items: Sequence[OrderItem], table: Table) -> list[str] | None:
    """ORDER BY items as index key columns' SQL (``created_at``, ``priority DESC``), the text
    of :func:`index_keys`; None when an item is not a plain column of ``table``."""
    keys = index_keys(items, table)
    return None if keys is None else [k.sql for k in keys]


@dataclass(frozen=True)
class IndexFix:
    """A partial (or whole-table) B-tree index to build: ``where`` is its predicate as SQL,
    ``words`` name that predicate in the index's name (``pending``, ``finished_at_null``)."""

    table: Table
    keys: tuple[IndexKey, ...]
    where: str | None = None
    words: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return index_name(self.table.name, [*self.words, *(k.column for k in self.keys)])

    @property
    def statement(self) -> str:
        on = qualified(self.table.schema, self.table.name)
        keys = ", ".join(k.sql for k in self.keys)
        where = f" WHERE {self.where}" if self.where else ""
        return f"CREATE INDEX CONCURRENTLY {ident(self.name)} ON {on} ({keys}){where};"

    def step(self) -> FixStep:
        return _concurrently(self.statement, CONCURRENT_BUILD_NOTE)


def live_set_index(table: Table, live: LivePredicate, keys: Iterable[IndexKey]) -> IndexFix:
    """The index on ``keys`` under the queue's live predicate, named by the predicate's values:
    every check that proposes an index on the live rows names it so, so two fixes never build
    the same index twice under two names."""
    return IndexFix(table, tuple(keys), index_where(live), tuple(live_words(live)))


def existing_index(
    table: Table,
    keys: Sequence[IndexKey],
    live: LivePredicate | None,
    *,
    exact: bool = False,
) -> Index | None:
    """A valid index of ``table`` that is the one ``keys`` and ``live`` describe: its key
    columns start with ``keys`` (are exactly ``keys`` when ``exact``), in the same directions,
    and its predicate is ``live`` (the same column, operator and values), or it has none when
    ``live`` is None. NULLS order is not collected: a key with a non-default one never
    matches."""
    if any(k.nulls_first is not None and k.nulls_first != k.descending for k in keys):
        return None
    columns = tuple(k.column for k in keys)
    directions = tuple(k.descending for k in keys)
    for idx in table.indexes:
        if not idx.is_valid:
            continue
        if (idx.columns if exact else idx.columns[: len(columns)]) != columns:
            continue
        stored = idx.descending or (False,) * len(idx.columns)
        if tuple(stored[: len(columns)]) != directions:
            continue
        if live is None or live.whole_table:
            if idx.predicate is None:
                return idx
            continue
        parsed = parse_index_predicate(idx.predicate) if idx.predicate else None
        if parsed is not None and same_predicate(parsed, live):
            return idx
    return None
