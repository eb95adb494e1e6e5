"""What the role may read and what other sessions' locks allow, decided before reading it.

The collector reads the role's privileges on the queue tables once (access.sql, by OID) and
other sessions' locks once (:mod:`qadvisor.collect.locks`). A :class:`Guard` holds both and
answers, before a query is sent, whether it can run at once; when it cannot, the fact is
recorded as a :class:`~qadvisor.model.HiddenFact` with the exact GRANT that would show it (the
role's real name, identifiers quoted) or the lock that blocks it, and the query is not sent.
Checks that require the fact then report a skip for that queue naming it.

For ``qadvisor role`` the guard decides for a role that does not hold its privileges yet
(:class:`Assumed`): the collector runs as whoever connected (a DBA), but every decision is the
one it would take as that role, and each GRANT it would ask for is recorded, so the role's
setup is what the checks themselves ask for, not a second list of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg

from qadvisor.collect import queries as q
from qadvisor.collect.locks import (
    ACCESS_SHARE,
    ROW_EXCLUSIVE,
    ROW_SHARE,
    HeldLock,
    Locks,
    describe_all,
)
from qadvisor.collect.planner import PlanForm
from qadvisor.derive import discover
from qadvisor.derive.archive_dates import dating_column, unproven_epoch_columns
from qadvisor.derive.estimates import live_index, part_index
from qadvisor.derive.hot_updates import RecordedUpdate
from qadvisor.derive.statement_queues import queues_named
from qadvisor.facts import FACTS
from qadvisor.model import HiddenFact, Queue, Statement, Table
from qadvisor.sql.dequeue import (
    DequeueStatement,
    locking_level,
    queue_columns_read,
    tables_named,
)
from qadvisor.sql.printing import ident, qualified

Conn = psycopg.Connection[Any]


@dataclass(frozen=True)
class _Plannable:
    """One text of a claim that can be planned, and what planning it needs."""

    form: PlanForm | None  # None: the statement as written
    what: str  # for a refusal's reason
    columns: frozenset[str] | None  # of the queue table, that EXPLAIN checks SELECT on
    update: bool  # EXPLAIN checks UPDATE on the queue table
    mode: str  # the table lock planning takes

    def unreadable(self, acc: TableAccess) -> list[str]:
        wanted = acc.columns if self.columns is None else self.columns & acc.columns
        return sorted(wanted - acc.readable)

    def lacks(self, acc: TableAccess) -> list[tuple[str, str]]:
        """What the role lacks to plan it: (what, grant kind) pairs."""
        table = qualified(acc.schema, acc.table)
        missing: list[tuple[str, str]] = []
        if not acc.schema_usage:
            missing.append((f"USAGE on schema {ident(acc.schema)}", "usage"))
        hidden = self.unreadable(acc)
        if not acc.any_select and (not hidden or len(hidden) == len(acc.columns)):
            missing.append((f"SELECT on {table}", "select"))
        elif hidden:
            listed = ", ".join(ident(c) for c in hidden)
            missing.append((f"SELECT on {listed} of {table}", "columns"))
        if self.update and not acc.any_update:
            missing.append((f"UPDATE on {table}", "update"))
        return missing

    def cost(self, acc: TableAccess) -> tuple[int, int]:
        return (len(self.lacks(acc)), len(self.unreadable(acc)))


def _plan_forms(parsed: DequeueStatement, acc: TableAccess | None, role: str) -> list[_Plannable]:
    """The texts of a claim this role could plan, best first: the statement as written, then
    its locking level alone (without its locks when the role lacks UPDATE), then that level
    with its select list replaced."""
    whole = _Plannable(
        None,
        "a row-locking statement",
        queue_columns_read(parsed.text, parsed.table),
        True,
        ROW_EXCLUSIVE if parsed.kind in ("update", "delete") else ROW_SHARE,
    )
    if acc is None:
        return [whole]
    strip = not acc.any_update
    out = [whole]
    for projection in (True, False):
        level = locking_level(parsed.text, projection=projection)
        if level is None:
            continue
        columns = queue_columns_read(level, acc.table)
        candidate = _Plannable(
            PlanForm(strip, projection, ""),
            "the scan that finds its rows" if strip else "its locking level",
            columns,
            not strip,
            # The claim's locking level is PREPAREd with its locks first (PostgreSQL's verdict
            # on it), which takes ROW SHARE, with or without UPDATE.
            ROW_SHARE,
        )
        out.append(replace(candidate, form=_form(candidate, whole, acc, role)))
    return out


def _form(level: _Plannable, whole: _Plannable, acc: TableAccess, role: str) -> PlanForm:
    """The form with its reason for the report."""
    assert level.form is not None
    table = qualified(acc.schema, acc.table)
    reasons = []
    if level.form.strip_locks:
        reasons.append(
            f"without its row locks: {ident(role)} lacks UPDATE on {table}, so the plan is of "
            "the scan the claim's LockRows reads"
        )
    hidden = [c for c in whole.unreadable(acc) if c not in level.unreadable(acc)]
    if hidden:
        spelled = ", ".join(ident(c) for c in hidden)
        where = "its select list" if not level.form.projection else "what it returns or assigns"
        reasons.append(
            f"{where} left out: {ident(role)} may not SELECT {spelled} of {table}, which the "
            "plan of the rows it finds does not read"
        )
    why = "its locking level alone" + (", " if reasons else "") + "; ".join(reasons)
    return replace(level.form, why=why)


@dataclass(frozen=True)
class TableAccess:
    relid: int
    schema: str
    table: str
    schema_usage: bool
    any_select: bool
    any_update: bool
    readable: frozenset[str]  # columns the role may SELECT (and see in pg_stats)
    columns: frozenset[str] = frozenset()  # every column of the table

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True)
class Asked:
    """One GRANT the guard asked for: of which fact, of which kind (qadvisor.facts), on what
    (a table, a schema, a sequence, or nothing for a role), and the statement itself."""

    fact: str
    kind: str
    schema: str
    name: str  # the table or sequence ("" for a schema or a role)
    columns: tuple[str, ...]
    statement: str


@dataclass
class Assumed:
    """The privileges a monitoring role would have, for a guard that decides as that role:
    none but what it was granted so far (pg_read_all_stats is taken as given). ``asked`` is
    every GRANT the guard asked for, in order."""

    role: str
    usage: set[str] = field(default_factory=set)  # schemas
    tables: set[tuple[str, str]] = field(default_factory=set)  # SELECT on the whole table
    columns: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    updates: set[tuple[str, str]] = field(default_factory=set)
    sequences: set[tuple[str, str]] = field(default_factory=set)
    asked: list[Asked] = field(default_factory=list)

    def access(self, real: TableAccess) -> TableAccess:
        """What the role may do with a table the connected role reads as ``real``."""
        key = (real.schema, real.table)
        readable = real.columns if key in self.tables else self.columns.get(key, set())
        return replace(
            real,
            schema_usage=real.schema in self.usage,
            any_select=key in self.tables or bool(readable),
            any_update=key in self.updates,
            readable=frozenset(readable) & real.columns,
        )

    def grant_asked(self) -> bool:
        """Take every GRANT asked for as given; whether one was new."""
        before = self._held()
        for a in self.asked:
            key = (a.schema, a.name)
            if a.kind == "usage":
                self.usage.add(a.schema)
            elif a.kind == "sequence":
                self.sequences.add(key)
            elif a.kind == "update":
                self.updates.add(key)
            elif a.columns:
                self.columns.setdefault(key, set()).update(a.columns)
            elif a.name:
                self.tables.add(key)
        return self._held() != before

    def _held(self) -> tuple[object, ...]:
        columns = {k: frozenset(v) for k, v in self.columns.items()}
        return (frozenset(self.usage), frozenset(self.tables), columns,
                frozenset(self.updates), frozenset(self.sequences))  # fmt: skip


def unclaimed(queues: Sequence[Queue], statements: Sequence[Statement]) -> list[Queue]:
    """Queues that no known row-locking statement (from pg_stat_statements or given) names:
    the statement checks cannot judge them. A statement counts for every queue table it
    names, wherever (a join that locks only the tenant row still claims from the queue)."""
    known: set[str] = set()
    for stmt in statements:
        if stmt.parsed is None:
            continue
        if stmt.queue is not None:
            known.add(stmt.queue)  # where its names resolved
            continue
        known |= {q.qualified for q in queues_named(stmt.parsed, queues)}
        for schema, name in tables_named(stmt.text):
            known |= {q.qualified for q in queues if q.table == name and schema in (None, q.schema)}
    return [q for q in queues if q.qualified not in known]


def read_access(conn: Conn, relids: Sequence[int]) -> dict[int, TableAccess]:
    """The role's privileges on these tables (access.sql), by relid."""
    if not relids:
        return {}
    return {
        int(r["relid"]): TableAccess(
            relid=int(r["relid"]),
            schema=r["schema"],
            table=r["table"],
            schema_usage=bool(r["schema_usage"]),
            any_select=bool(r["any_select"]),
            any_update=bool(r["any_update"]),
            readable=frozenset(r["readable_columns"] or ()),
            columns=frozenset(r["columns"] or ()),
        )
        for r in q.rows(conn, "access", {"relids": list(relids)})
    }


class Guard:
    """Privileges and locks of one snapshot. Each answer that keeps a fact from being read is
    that fact (a HiddenFact), for the step that asked to return with what it read."""

    def __init__(
        self,
        role: str,
        locks: Locks,
        access: dict[int, TableAccess] | None,
        relids: dict[str, int],
        assumed: Assumed | None = None,
    ) -> None:
        self.assumed = assumed
        self.role = assumed.role if assumed is not None else role
        self.locks = locks
        # None: the privileges could not be read; queries are then sent and their errors kept.
        self.access = self._as_assumed(access)
        self.relids = relids  # queue "schema.table" -> relid

    def _as_assumed(self, access: dict[int, TableAccess] | None) -> dict[int, TableAccess] | None:
        if self.assumed is None or access is None:
            return access
        return {relid: self.assumed.access(acc) for relid, acc in access.items()}

    def _grant(
        self,
        fact: str,
        kind: str,
        schema: str = "",
        name: str = "",
        columns: Iterable[str] = (),
    ) -> str:
        """The GRANT of ``fact`` that would show it to this role; recorded when deciding for
        an assumed role."""
        cols = tuple(columns)
        statement = FACTS[fact].grant(kind, self.role, schema, name, cols)
        # A grant of the whole table (tenant_rotation's) gives every column, whichever the
        # question was about.
        cols = cols if "{columns}" in FACTS[fact].grants[kind] else ()
        if self.assumed is not None:
            self.assumed.asked.append(Asked(fact, kind, schema, name, cols, statement))
        return statement

    # --- what is hidden ----------------------------------------------------------------------

    def _hidden(
        self,
        fact: str,
        queue: str | None,
        reason: str,
        grants: Iterable[str] = (),
        blocking: Sequence[HeldLock] = (),
    ) -> HiddenFact:
        return HiddenFact(fact, queue, reason, tuple(grants), blocking[0].pid if blocking else None)

    def _locked(self, fact: str, queue: str, what: str, blocking: Sequence[HeldLock]) -> HiddenFact:
        reason = f"{what}: {describe_all(blocking, self.role)}"
        return self._hidden(fact, queue, reason, blocking=blocking)

    # --- before reading -----------------------------------------------------------------------

    def index_definitions(self, queue: Queue) -> HiddenFact | None:
        """The queue table's index definitions, hidden when a lock blocks them (the indexes
        query leaves such a table out)."""
        relid = self.relids.get(queue.qualified)
        blocking = self.locks.on_relation(relid, ACCESS_SHARE) if relid is not None else []
        if blocking:
            return self._locked("index_definitions", queue.qualified, "indexes not read", blocking)
        return None

    def plan_refusal(self, queue: Queue, parsed: DequeueStatement) -> HiddenFact | PlanForm | None:
        """Why a statement on this queue must not be planned now (its ``reason``), what of it
        this role plans instead (a :class:`PlanForm`), or None: planned as written.

        EXPLAIN checks a statement's privileges as running it would: SELECT on each column it
        names, UPDATE for a row lock or an assignment. What the checks read is the plan of the
        claim's locking level, so a role that may not plan the statement whole plans that
        level alone: without its locking clauses when it lacks UPDATE, with its select list
        replaced when only that names columns it may not SELECT. When no form can be planned,
        the GRANTs named are those of the form that needs the fewest."""
        relid = self.relids.get(queue.qualified)
        if relid is None:
            return None
        acc = self.access.get(relid) if self.access is not None else None
        forms = _plan_forms(parsed, acc, self.role)
        chosen = next((f for f in forms if acc is None or not f.lacks(acc)), None)
        judged = chosen or min(forms, key=lambda f: f.cost(acc) if acc is not None else 0)
        blocking = self.locks.on_table(relid, judged.mode)
        if blocking:
            return self._locked("plans", queue.qualified, "not planned", blocking)
        if chosen is not None:
            return chosen.form
        assert acc is not None  # without privileges read, the first form is chosen
        missing = judged.lacks(acc)
        grants = [
            self._grant("plans", kind, acc.schema, acc.table, judged.unreadable(acc))
            for _, kind in missing
        ]
        reason = (
            f"not planned: EXPLAIN of {judged.what} needs "
            f"{', '.join(m for m, _ in missing)}, which {ident(self.role)} lacks: "
            + " ".join(grants)
        )
        return self._hidden("plans", queue.qualified, reason, grants)

    def read_refusal(
        self, fact: str, queue: str, relid: int, columns: Iterable[str], what: str
    ) -> HiddenFact | None:
        """Why ``what`` (a read of these columns of the table ``relid``, through its indexes)
        cannot run at once, recorded as ``fact`` of ``queue``; None when it can."""
        blocking = self.locks.on_table(relid, ACCESS_SHARE)
        if blocking:
            return self._locked(fact, queue, f"{what} not read", blocking)
        acc = self.access.get(relid) if self.access is not None else None
        if acc is None:
            return None
        unreadable = [c for c in dict.fromkeys(columns) if c not in acc.readable]
        grants = []
        if not acc.schema_usage:
            grants.append(self._grant(fact, "usage", acc.schema))
        if unreadable:
            grants.append(self._grant(fact, "select", acc.schema, acc.table, unreadable))
        if not grants:
            return None
        needs = []
        if not acc.schema_usage:
            needs.append(f"USAGE on schema {ident(acc.schema)}")
        if unreadable:
            needs.append(f"SELECT on {', '.join(ident(c) for c in unreadable)}")
        reason = (
            f"{what} not read: {ident(self.role)} lacks {' and '.join(needs)} of "
            f"{qualified(acc.schema, acc.table)}: " + " ".join(grants)
        )
        return self._hidden(fact, queue, reason, grants)

    def with_access(self, extra: dict[int, TableAccess]) -> Guard:
        """This guard, knowing the privileges of tables found later (a rotation table)."""
        if self.access is None:
            return self
        guard = Guard(self.role, self.locks, None, self.relids, self.assumed)
        guard.access = {**self.access, **(self._as_assumed(extra) or {})}
        return guard

    # --- after reading: what the snapshot lacks -------------------------------------------------

    def live_set(
        self,
        queue: Queue,
        table: Table | None,
        candidates: Sequence[discover.CandidateColumn],
    ) -> HiddenFact | None:
        """The queue's live set or live predicate, when the role may not see what shows it
        or a lock kept its partial index predicates from being read."""
        relid = self.relids.get(queue.qualified)
        if relid is None or table is None:
            return None
        acc = self.access.get(relid) if self.access is not None else None
        if queue.live is None:
            hidden = [
                c.column
                for c in candidates
                if c.relid == relid and c.is_status and not c.readable and not c.enum_labels
            ]
            if hidden:
                grant = self._grant("live_set", "select", table.schema, table.name, hidden[:1])
                return self._hidden(
                    "live_set",
                    queue.qualified,
                    f"live predicate unknown: the values of {ident(hidden[0])} are hidden "
                    f"from {ident(self.role)} (pg_stats shows a column only to roles that may "
                    f"read it): {grant}",
                    (grant,),
                )
            blocking = self.locks.on_relation(relid, ACCESS_SHARE)
            if blocking:
                return self._locked(
                    "live_set",
                    queue.qualified,
                    "live predicate unknown: the partial index predicates were not read",
                    blocking,
                )
            return None
        if queue.live.whole_table:
            return None  # its rows are the table's reltuples, which every role may read
        if queue.live.op == "or":
            # Each part is counted by a partial index on exactly it, or by its column's stats.
            parts = [
                p
                for p in queue.live.parts
                if (i := part_index(table, p)) is None or i.reltuples < 0
            ]
            columns = [p.column for p in parts]
        else:
            idx = live_index(table, queue.live)
            if idx is not None and idx.reltuples >= 0:
                return None
            columns = [queue.live.column]
        hidden = [c for c in columns if acc is not None and c not in acc.readable]
        if hidden:
            column = hidden[0]
            grant = self._grant("live_set", "select", table.schema, table.name, [column])
            return self._hidden(
                "live_set",
                queue.qualified,
                f"live set unknown: pg_stats of {ident(column)} is hidden from "
                f"{ident(self.role)} (it shows a column only to roles that may read it) and "
                f"no partial index on the live predicate counts the live rows: {grant}",
                (grant,),
            )
        return None

    def archive_age(
        self, queue: Queue, table: Table | None, updates: Sequence[RecordedUpdate] = ()
    ) -> HiddenFact | None:
        """The age of a queue's oldest finished row, when the role may not see the statistics
        of the timestamp that dates it (``updates``: those recorded on the table)."""
        relid = self.relids.get(queue.qualified)
        if relid is None or table is None or self.access is None:
            return None
        acc = self.access.get(relid)
        if acc is None:
            return None
        dating = dating_column(table, queue.live, updates)
        if dating is not None:
            hidden = [] if dating.name in acc.readable else [dating.name]
            what = ""
        else:
            # Whether an integer holds epoch time is told from its statistics alone.
            hidden = [c for c in unproven_epoch_columns(table) if c not in acc.readable]
            what = " (integers that may hold epoch time)"
        if not hidden:
            return None
        grant = self._grant("archive_age", "select", table.schema, table.name, hidden)
        return self._hidden(
            "archive_age",
            queue.qualified,
            f"the age of its oldest finished row is unknown: pg_stats of "
            f"{', '.join(ident(c) for c in hidden)}{what} is hidden from {ident(self.role)} "
            f"(it shows a column only to roles that may read it): {grant}",
            (grant,),
        )

    def id_sequences(self, queue: Queue, table: Table | None) -> HiddenFact | None:
        """How far a queue's id sequence has gone, when the role may read neither the sequence
        nor the id column's statistics."""
        if table is None:
            return None
        for seq in table.id_sequences:
            if seq.column_type == "bigint" and seq.data_type == "bigint":
                continue  # a range no queue uses up: how far it has gone does not matter
            bound = table.stats_of(seq.column)
            readable = seq.readable
            if self.assumed is not None:
                # The connected role's view is not the assumed one's: the sequence is read
                # only once granted, and pg_stats shows the id column only if it may read it.
                readable = (seq.schema, seq.name) in self.assumed.sequences
                acc = self.access.get(self.relids.get(queue.qualified, 0)) if self.access else None
                if acc is None or seq.column not in acc.readable:
                    bound = None
            if readable or (bound is not None and bound.upper_bound is not None):
                continue
            grant = self._grant("id_sequences", "sequence", seq.schema, seq.name)
            return self._hidden(
                "id_sequences",
                queue.qualified,
                f"the last value of {qualified(seq.schema, seq.name)} is hidden from "
                f"{ident(self.role)}, and so are the statistics of {ident(seq.column)}: {grant}",
                (grant,),
            )
        return None

    def discovery(
        self,
        candidates: Sequence[discover.CandidateColumn],
        statements: Sequence[discover.Claim],
        queues: Sequence[Queue],
    ) -> list[HiddenFact]:
        """Tables discovery could not judge because their status values are hidden: those
        with an index on the status column or row-locking statements on them."""
        taken = {q.qualified for q in queues}
        out = []
        for c in candidates:
            name = f"{c.schema}.{c.table}"
            if name in taken or not c.is_status or c.readable or c.enum_labels:
                continue
            claimed = any(s.table == c.table and s.schema in (None, c.schema) for s in statements)
            if not (c.indexed or claimed):
                continue
            grant = self._grant("discovery", "select", c.schema, c.table, [c.column])
            reason = (
                f"{qualified(c.schema, c.table)} was not judged as a queue: the values of "
                f"{ident(c.column)} are hidden from {ident(self.role)}: {grant}"
            )
            out.append(self._hidden("discovery", None, reason, (grant,)))
        return out

    def statements(self, unclaimed: Sequence[Queue] | None) -> list[HiddenFact]:
        """Queues without a known claim (None: no statement at all) while pg_stat_statements
        hides other roles' texts."""
        grant = self._grant("statements", "read_all_stats")
        reason = (
            f"no dequeue statement known: pg_stat_statements shows {ident(self.role)} the "
            f"text of its own statements only: {grant} (pg_monitor includes it), or give the "
            "claim with --query"
        )
        return [
            self._hidden("statements", queue.qualified if queue else None, reason, (grant,))
            for queue in (unclaimed if unclaimed is not None else [None])
        ]

    def horizon(self, reads_all_stats: bool) -> HiddenFact | None:
        if reads_all_stats:
            return None
        grant = self._grant("horizon", "read_all_stats")
        return self._hidden(
            "horizon",
            None,
            f"sessions of other roles show {ident(self.role)} their transaction ids in "
            "pg_stat_activity but not their state, type or start, so a transaction holding "
            f"the xmin horizon cannot be judged: {grant} (pg_monitor includes it)",
            (grant,),
        )
