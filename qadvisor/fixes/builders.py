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

from qadvisor.derive.estimates import parse_index_predicate, part_index, same_predicate
from qadvisor.derive.predicates import operand_values, predicate_implies
from qadvisor.derive.statement_ids import statement_id
from qadvisor.derive.statement_queues import statement_label, statement_queue
from qadvisor.fixes.partitions import drop_partitioned_index, index_on_partitions
from qadvisor.model import (
    FixStep,
    Index,
    LivePredicate,
    Snapshot,
    Statement,
    StepLock,
    Table,
    live_op,
)
from qadvisor.sql.dequeue import (
    OrderItem,
    Predicate,
    StatementError,
    condition_predicates,
    disjuncts,
)
from qadvisor.sql.printing import (
    ident,
    index_name,
    index_where,
    literal,
    live_words,
    qualified,
)

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


def drop_index(schema: str, name: str, *, partitioned: bool = False) -> FixStep:
    """DROP INDEX CONCURRENTLY; of a partitioned table's index (``partitioned``), which
    PostgreSQL drops only plainly, DROP INDEX."""
    if partitioned:
        return drop_partitioned_index(schema, name)
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

    def step(
        self, snapshot: Snapshot | None = None, serves: Statement | str | None = None
    ) -> FixStep:
        """The CREATE INDEX CONCURRENTLY step; with the ``snapshot``, its note names the
        recorded statements the index serves, derived from their text, or says none does.
        ``serves`` is what the index is built for: the recorded statement whose WHERE and
        ORDER BY it was derived from (named first), or what the fix itself prints (a rewrite
        of the dequeue, which no server has recorded yet)."""
        if snapshot is None:
            return _concurrently(self.statement, CONCURRENT_BUILD_NOTE)
        said = index_users_note(snapshot, self, serves)
        return _concurrently(self.statement, f"{said} {CONCURRENT_BUILD_NOTE}")

    def steps(
        self, snapshot: Snapshot | None = None, serves: Statement | str | None = None
    ) -> tuple[FixStep, ...]:
        """The steps that build it: its CREATE INDEX CONCURRENTLY (``step``, with what it
        ``serves``); on a partitioned table, which refuses CONCURRENTLY, the index ON ONLY it
        and each partition's built CONCURRENTLY and attached (fixes.partitions)."""
        if self.table.partition_key is None:
            return (self.step(snapshot, serves),)
        keys = ", ".join(k.sql for k in self.keys)
        where = f" WHERE {self.where}" if self.where else ""

        def name(table: Table) -> str:
            return IndexFix(table, self.keys, self.where, self.words).name

        note = index_users_note(snapshot, self, serves) if snapshot is not None else ""
        return index_on_partitions(self.table, name, f"({keys}){where}", note)


def live_set_index(table: Table, live: LivePredicate, keys: Iterable[IndexKey]) -> IndexFix:
    """The index on ``keys`` under the queue's live predicate, named by the predicate's values:
    every check that proposes an index on the live rows names it so, so two fixes never build
    the same index twice under two names."""
    return IndexFix(table, tuple(keys), index_where(live), tuple(live_words(live)))


def set_rows_index(table: Table, column: str) -> IndexFix:
    """The index a comparison of ``column`` with a bound (``completed_at < $1``) can use in
    any plan: of the rows where the column is set when it may be NULL (no NULL passes the
    comparison, so the planner proves the predicate whatever the bound), of every row when
    it is NOT NULL."""
    found = table.column(column)
    if found is not None and found.not_null:
        return IndexFix(table, (IndexKey(column),))
    return IndexFix(table, (IndexKey(column),), f"{ident(column)} IS NOT NULL")


def comparable_index(table: Table, column: str) -> Index | None:
    """A valid index led by ``column`` that a comparison of it with a bound can use in any
    plan: one without a predicate, or one of the rows where ``column`` is set."""
    for idx in table.indexes:
        if idx.is_valid and idx.columns[:1] == (column,) and idx.predicate is None:
            return idx
    found = part_index(table, LivePredicate(column, "is not null"))
    return found if found is not None and found.columns[:1] == (column,) else None


def implies(narrow: LivePredicate, wide: LivePredicate) -> bool:
    """Every row ``narrow`` admits, ``wide`` admits too (the simple forms PostgreSQL's
    predicate test proves): the same predicate, an IN list inside another, an IN list that
    avoids a NOT IN list's values, a NOT IN list that excludes all of another's."""
    if narrow.column != wide.column:
        return False
    if same_predicate(narrow, wide):
        return True
    mine, theirs = set(narrow.values), set(wide.values)
    if narrow.op == "in" and wide.op == "in":
        return bool(mine) and mine <= theirs
    if narrow.op == "in" and wide.op == "not in":
        return bool(mine) and not mine & theirs
    if narrow.op == "not in" and wide.op == "not in":
        return theirs <= mine
    return False


def existing_index(
    table: Table,
    keys: Sequence[IndexKey],
    live: LivePredicate | None,
    *,
    exact: bool = False,
) -> Index | None:
    """A valid index of ``table`` that already covers the one ``keys`` and ``live``
    describe: its key columns start with ``keys`` (are exactly ``keys`` when ``exact``), in
    the same directions, and its predicate is implied by ``live`` (every live row is in it:
    the same predicate, or a wider IN list), or it has none when ``live`` is None. A
    whole-table index does not cover a partial one: the partial index is proposed for its
    size and for the predicate a statement can prove. NULLS order is not collected: a key
    with a non-default one never matches."""
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
        if parsed is not None and implies(live, parsed):
            return idx
    return None


def covering_index(build: IndexFix) -> Index | None:
    """A valid index of the table that already covers ``build`` (see :func:`existing_index`);
    a predicate qadvisor cannot read as one column's condition is covered only by an index
    with the same predicate text."""
    if build.where is None:
        return existing_index(build.table, build.keys, None)
    target = parse_index_predicate(build.where)
    if target is not None:
        return existing_index(build.table, build.keys, target)
    for idx in build.table.indexes:
        columns = tuple(k.column for k in build.keys)
        if idx.is_valid and idx.predicate == build.where and idx.columns[: len(columns)] == columns:
            return idx
    return None


@dataclass(frozen=True)
class IndexMatch:
    """A recorded statement whose own text the new index matches; ``planned_values`` when
    its predicate proves the index's only with the values qadvisor planned its parameters
    with (pg_stat_statements shows literals as $n); ``arm`` when the index serves one arm of
    an OR in its WHERE (``completed_at < $1``): the planner reads one index per arm and
    combines them (a BitmapOr), so each arm needs its own; ``unbound`` when it does only if a
    parameter qadvisor has no value for holds one the index covers."""

    statement: Statement
    planned_values: bool
    arm: str | None = None
    # Its predicate proves the index's only if a parameter it has no value for (the statement
    # was not planned: a GRANT the role lacks) holds one the index's predicate admits.
    unbound: bool = False


# Comparisons that no NULL passes: each implies ``column IS NOT NULL`` (PostgreSQL's
# predicate test proves it from the operator's strictness, whatever the compared value).
_STRICT = ("=", "<>", "<", "<=", ">", ">=", "in", "any", "is not null")


def matching_statements(snapshot: Snapshot, build: IndexFix) -> tuple[IndexMatch, ...]:
    """The recorded statements on ``build``'s table (claims and maintenance) whose WHERE and
    ORDER BY, as parsed from their text, the index matches: their WHERE implies its predicate
    (it has none, one column's condition qadvisor reads, or ``column IS NOT NULL``, which a
    comparison of that column implies), and its keys, after the ones they compare with one
    value, give their ORDER BY (forward or backward); a statement without ORDER BY compares
    the index's first column (in its WHERE, or in one arm of an OR there), or its WHERE
    implies the index's predicate. A derivation from text, not a plan: the index does not
    exist, so no planner has chosen it."""
    target = parse_index_predicate(build.where) if build.where else None
    set_column = _set_column(build.where) if build.where else None
    if build.where is not None and target is None and set_column is None:
        return ()
    found = []
    for stmt in (*snapshot.statements, *snapshot.maintenance):
        parsed = stmt.parsed
        on = statement_queue(snapshot, stmt) if parsed is not None else None
        if parsed is None or on is None:
            continue
        if (on[1].schema, on[1].name) != (build.table.schema, build.table.name):
            continue
        match = _match(build, target, set_column, stmt, parsed.predicates, parsed.order_by)
        if match is not None:
            found.append(match)
    return tuple(found)


def _match(
    build: IndexFix,
    target: LivePredicate | None,
    set_column: str | None,
    stmt: Statement,
    predicates: Sequence[Predicate],
    order: Sequence[OrderItem],
) -> IndexMatch | None:
    planned = unbound = False
    if target is not None and not _proves(predicates, target, {}):
        if _proves(predicates, target, stmt.custom_values):
            planned = True
        elif _unplanned_claim(stmt) and _proves(
            predicates, target, _unbound_values(predicates, target, stmt)
        ):
            unbound = True
        else:
            return None
    lead = build.keys[0].column if build.keys else None
    arm = _arm_comparing(predicates, lead) if lead is not None else None
    if set_column is not None and not _compares(predicates, set_column):
        # Only an arm of an OR compares the column: the index serves that arm.
        if lead != set_column or arm is None:
            return None
        return IndexMatch(stmt, planned, arm, unbound)
    whole = IndexMatch(stmt, planned, None, unbound)
    if order:
        return whole if _supplies_order(build.keys, order, predicates) else None
    if lead is not None and _compares(predicates, lead):
        return whole
    if arm is not None:
        return IndexMatch(stmt, planned, arm, unbound)
    return whole if build.where is not None else None


def _unplanned_claim(stmt: Statement) -> bool:
    """A claim no plan was made of (a GRANT the role lacks, another session's lock): the
    values of its parameters are unknown. A maintenance statement is never planned, and what
    it selects is not what workers wait for: no value is supposed for it."""
    parsed = stmt.parsed
    return (
        parsed is not None
        and parsed.maintenance is None
        and stmt.custom_plan is None
        and stmt.generic_plan is None
    )


def _unbound_values(
    predicates: Sequence[Predicate], target: LivePredicate, stmt: Statement
) -> dict[str, str]:
    """The first value ``target`` admits, for each parameter compared with its column that
    the statement was not planned with: what the statement's predicate would hold if the
    application sent that value."""
    if target.op != "in" or not target.values:
        return {}
    value = literal(target.values[0])
    return {
        str(o.index): value
        for p in predicates
        if p.column == target.column
        for o in p.operands
        if o.kind == "parameter" and o.index is not None and str(o.index) not in stmt.custom_values
    }


def _set_column(where: str) -> str | None:
    """``completed_at`` of an index predicate ``completed_at IS NOT NULL``, else None."""
    try:
        conditions = condition_predicates(where)
    except StatementError:
        return None
    if len(conditions) == 1 and conditions[0].op == "is not null":
        return conditions[0].column
    return None


def _compares(predicates: Sequence[Predicate], column: str) -> bool:
    """A condition of the WHERE compares ``column`` in a way no NULL passes."""
    return any(p.column == column and p.op in _STRICT for p in predicates)


def _arm_comparing(predicates: Sequence[Predicate], column: str) -> str | None:
    """The arm of an OR in the WHERE (every arm a comparison of one column) that compares
    ``column`` in a way no NULL passes, as SQL; None when there is none."""
    for pred in predicates:
        if pred.op != "other":
            continue
        for arm in disjuncts(pred.text):
            if arm.column == column and arm.op in _STRICT:
                return arm.text
    return None


def _proves(predicates: Sequence[Predicate], target: LivePredicate, values: dict[str, str]) -> bool:
    """A conjunct proves ``target``: the forms predicate_implies reads, or a condition that
    is, as one column's predicate, the same or narrower (``status <> 'done'`` for an index
    ``WHERE status <> 'done'``, which the planner proves as the same clause)."""
    if predicate_implies(predicates, target, values).implies:
        return True
    for pred in predicates:
        op = live_op(pred.op)
        if pred.column != target.column or op is None:
            continue
        got = operand_values(pred, values)
        if got is not None and implies(LivePredicate(pred.column, op, got), target):
            return True
    return False


def _supplies_order(
    keys: Sequence[IndexKey], order: Sequence[OrderItem], predicates: Sequence[Predicate]
) -> bool:
    """The keys give ``order`` (forward or backward) once the leading keys that
    ``predicates`` compare with one value are passed over; True for no ORDER BY."""
    if not order:
        return True
    fixed = {p.column for p in predicates if p.op == "=" and len(p.operands) == 1}
    rest = list(keys)
    while rest and rest[0].column in fixed and all(o.column != rest[0].column for o in order):
        rest.pop(0)
    if len(rest) < len(order):
        return False
    pairs = list(zip(rest, order, strict=False))
    if any(k.column != o.column for k, o in pairs):
        return False
    forward = all(k.descending == o.descending for k, o in pairs)
    backward = all(k.descending != o.descending for k, o in pairs)
    if not (forward or backward):
        return False

    # NULLS order: the key's (the default unless given) must be the item's, or all reversed.
    same = [
        _nulls_first(k.descending, k.nulls_first) == _nulls_first(o.descending, o.nulls_first)
        for k, o in pairs
    ]
    return all(same) if forward else not any(same)


def _nulls_first(descending: bool, given: bool | None) -> bool:
    return descending if given is None else given


def index_users_note(
    snapshot: Snapshot, build: IndexFix, serves: Statement | str | None = None
) -> str:
    """The sentence a CREATE INDEX step adds: which recorded statements the new index serves,
    derived from their text (never claimed from a plan: the index does not exist yet), or
    that none does; ``serves`` (see :meth:`IndexFix.step`) is named first."""
    matches = matching_statements(snapshot, build)
    built_for = ""
    if isinstance(serves, Statement):
        mine = statement_id(serves)
        if all(statement_id(m.statement) != mine for m in matches):
            built_for = (
                f"Built for {statement_label(serves)}, from its WHERE and ORDER BY. "
                if matches
                else f"Built for {statement_label(serves)}, from its WHERE and ORDER BY: "
                "check with EXPLAIN once it is built that its plan reads it."
            )
        else:
            matches = (
                *(m for m in matches if statement_id(m.statement) == mine),
                *(m for m in matches if statement_id(m.statement) != mine),
            )
    elif serves is not None:
        built_for = f"Built for {serves}. "
    if not matches:
        return built_for.rstrip() or (
            f"No recorded statement's WHERE and ORDER BY match {build.name} (derived from "
            "their text, not from a plan): check with EXPLAIN that the statement it is for "
            "uses it once it is built."
        )
    listed = "; ".join(
        statement_label(m.statement)
        + (" (with the values qadvisor planned its parameters with)" if m.planned_values else "")
        + (" (if its parameter holds a value the index covers: not planned)" if m.unbound else "")
        + (f" (the arm {m.arm} of its OR)" if m.arm is not None else "")
        for m in matches[:5]
    )
    more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
    return built_for + (
        f"Statements whose WHERE implies {build.name}'s predicate and whose conditions or "
        f"ORDER BY its keys serve: {listed}{more}. This is derived from their text, not from a "
        "plan (the index does not exist yet): check with EXPLAIN once it is built."
    )
