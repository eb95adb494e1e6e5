"""What qadvisor keeps of one parsed statement: frozen, JSON-serialisable dataclasses.

:mod:`qadvisor.sql.dequeue` fills them from SQL text; the snapshot (:mod:`qadvisor.model`)
holds them, and checks read them. They live apart from the parser so that the snapshot's
types import no SQL parser: the model sits below :mod:`qadvisor.sql` in the import layers
(``pyproject.toml``), and loading a saved snapshot costs no sqlglot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MaintenanceKind = Literal["reaper", "pruner", "mover"]
MaintenanceAction = Literal["reset", "delete", "move"]

_VERB = {"reset": "resets", "delete": "deletes", "move": "moves"}


@dataclass(frozen=True)
class Maintenance:
    """What makes a row-locking statement maintenance rather than a claim."""

    kind: MaintenanceKind  # reaper (UPDATE), pruner (DELETE), mover (DELETE into an INSERT)
    action: MaintenanceAction
    age: tuple[str, ...]  # the age conditions, as SQL: "attempted_at < $1 - INTERVAL $4"
    age_columns: tuple[str, ...]  # their columns on the queue table: "attempted_at"
    conditions: tuple[str, ...]  # the other conditions on the queue table: "state = $3"
    returns: bool  # the writing statement has RETURNING
    limited: bool  # the locking level has a LIMIT
    reason: str  # one sentence: why it is maintenance
    # The columns of an age condition that is an OR (``completed_at < $1 OR failed_at <
    # $2``): the statement takes the rows of any of them, so an index serves it only when
    # each has its own (the planner combines them in a BitmapOr); () when it has none.
    age_any: tuple[str, ...] = ()

    @property
    def description(self) -> str:
        """``reaper (resets rows by age: attempted_at < $1)``."""
        what = f"by age: {', '.join(self.age)}" if self.age else "by condition"
        return f"{self.kind} ({_VERB[self.action]} rows {what})"


ParamKind = Literal["literal", "parameter", "column", "expression"]
# "any" is col = ANY(...), "true" a bare boolean column, "false" NOT column, "other" what has
# no simpler form (OR groups, functions of the column, BETWEEN, ...).
PredicateOp = Literal[
    "=", "<>", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null", "any", "true",
    "false", "other",
]  # fmt: skip
LockStrength = Literal["update", "no key update", "share", "key share"]
WaitPolicy = Literal["skip locked", "nowait"]  # None: the clause waits
StatementKind = Literal["select", "update", "delete"]
LockLevel = Literal["top", "subquery", "cte", "lateral"]


@dataclass(frozen=True)
class Param:
    """A comparison operand."""

    kind: ParamKind
    text: str  # SQL text: "'pending'", "$1", "qt.tenant_id", "CURRENT_TIMESTAMP"
    index: int | None = None  # parameter number when kind == "parameter"


@dataclass(frozen=True)
class Predicate:
    """One conjunct of the WHERE (and inner-join ON) about the queue table."""

    column: str  # unqualified column name of the queue table
    op: PredicateOp
    operands: tuple[Param, ...]
    text: str  # the conjunct as SQL


@dataclass(frozen=True)
class OrderItem:
    column: str  # unqualified column name, or the expression's SQL when not a plain column
    descending: bool = False
    nulls_first: bool | None = None  # None: PostgreSQL's default (last for ASC, first for DESC)


@dataclass(frozen=True)
class LockClause:
    strength: LockStrength
    wait_policy: WaitPolicy | None
    of: tuple[str, ...]  # FOR ... OF names resolved to table names; () when there is no OF


@dataclass(frozen=True)
class Lateral:
    """The round-robin shape: the lock sits in a LATERAL sub-select correlated on a column.

    ``FROM queue_tenants qt CROSS JOIN LATERAL (SELECT ... FROM jobs WHERE tenant_id =
    qt.tenant_id ... FOR UPDATE SKIP LOCKED) j ORDER BY qt.last_served LIMIT 1``
    """

    outer_schema: str | None
    outer_table: str  # the rotation table: queue_tenants
    inner_column: str  # column of the queue table: tenant_id (of jobs)
    outer_column: str  # column of the rotation table: tenant_id (of qt)
    outer_order_by: tuple[OrderItem, ...]  # ORDER BY of the outer select: last_served


@dataclass(frozen=True)
class JoinKey:
    """An equality of the claim's level between a queue-table column and a column of another
    table it reads there (``ON j.id = r.job_id``): whether a lock of that table's row is a
    lock of many jobs or of this job's own row depends on the keys on both sides."""

    schema: str | None  # the other table as written
    table: str
    column: str  # of the other table
    queue_column: str


@dataclass(frozen=True)
class DequeueStatement:
    text: str  # the statement as given
    kind: StatementKind  # of the main statement (WITH resolved to its body)
    schema: str | None  # the queue table; None when unqualified
    table: str
    alias: str | None
    predicates: tuple[Predicate, ...]
    order_by: tuple[OrderItem, ...]  # of the SELECT that carries the lock
    limit: int | None  # literal LIMIT / FETCH FIRST of that SELECT
    limit_is_parameter: bool
    lock: LockClause
    lock_level: LockLevel
    locked_tables: tuple[str, ...]  # every table whose rows the lock takes
    has_window: bool  # a window function where the lock applies: PostgreSQL refuses it
    lateral: Lateral | None
    parameters: tuple[int, ...]  # parameter numbers used anywhere, ascending
    # Every base table the statement reads, (schema or None, name), in order of appearance:
    # what resolving its names under a search_path has to find.
    relations: tuple[tuple[str | None, str], ...] = ()
    # Set when the statement tidies the queue table rather than claiming from it (a reaper,
    # a pruner): see qadvisor.sql.dequeue.maintenance.
    maintenance: Maintenance | None = None
    joins: tuple[JoinKey, ...] = ()  # the claim level's equalities with other tables
    # No condition chooses its rows, from the locking level down to the queue table's (join
    # equalities aside): the claim takes any row of the table.
    unconditional: bool = False
    # It takes the first rows of an order (ORDER BY ... LIMIT) and its only conditions on the
    # queue table compare a column with values (``queue_name = $1``, ``kind = ANY($2)``):
    # it picks which queue's (or key's) next rows to take, not which rows wait.
    by_value: bool = False
    # The columns whose time it waits to come (``vt <= clock_timestamp()``, a lease it pushes
    # forward): see qadvisor.sql.dequeue.maintenance.due_times.
    due: tuple[str, ...] = ()
    # False for an UPDATE or DELETE without FOR UPDATE / FOR SHARE (:func:`analyse_write`):
    # ``lock`` is then the row lock the write itself takes, and it waits.
    locking_clause: bool = True
