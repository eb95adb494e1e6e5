"""Planning dequeue statements: custom and generic plans, made in rolled-back transactions.

How they are planned (nothing is ever executed unless ``analyze`` is asked for):

Each statement is made fit to plan first (``dequeue.normalise_for_planning``: ``LIMIT $n``
gets its ``1`` back, the other parameters are renumbered without gaps). Then, in one
transaction that is rolled back (the session is read-only):

1. ``PREPARE qadvisor_stmt(types) AS <text>``; a parameter compared with a column of the queue
   table gets that column's type, the others are inferred by the server (``unknown``).
2. Representative values for the parameters: the live value of the queue's live predicate
   for its column, the most common value (pg_stats) for another column, ``now()`` for a
   timestamp, a plain non-NULL default for anything else. Recorded in ``custom_values``.
3. The custom plan: ``SET LOCAL plan_cache_mode = force_custom_plan`` and ``EXPLAIN EXECUTE``
   with those values, which plans the statement exactly as if the values were written as
   literals, without regenerating its text.
4. The generic plan: ``EXPLAIN (GENERIC_PLAN)`` of the text on PostgreSQL 16+, else
   ``SET LOCAL plan_cache_mode = force_generic_plan`` and ``EXPLAIN EXECUTE`` again.
5. ``DEALLOCATE`` (a prepared statement outlives a rollback, so it is also removed after a
   failure).

With ``analyze``: ``EXPLAIN (ANALYZE, BUFFERS)`` of what finds the claim's rows, with the
custom plan's values written as literals and every locking clause removed
(``dequeue.read_only_scan``), in a second read-only transaction that is rolled back, with a
lock timeout of ``ANALYZE_LOCK_TIMEOUT_MS``: no row is locked, written or waited for. A
statement that finds its rows in no locking SELECT (a plain ``UPDATE ... WHERE``) is not
executed, and says so.

A plan that fails (statement_timeout, lock_timeout, any error) leaves a one-line
``plan_error`` on that statement; the others are still planned.

A role that may not plan the claim whole (``Guard.plan_refusal`` returns a :class:`PlanForm`)
gets the plan of its locking level as a statement of its own (``dequeue.locking_level``):
without its locking clauses when the role lacks UPDATE on the queue table (the scan under the
claim's LockRows; index-only and parallel scans, which a row lock rules out, are switched off
so that the scan is the one the claim runs), and with its select list replaced when only that
reads columns the role may not SELECT. ``Statement.planned_as`` says so.

Names: a statement is planned under the search_path its names were resolved with
(``Statement.search_path``: ``SET LOCAL`` in the same rolled-back transaction), so an
unqualified ``FROM jobs`` means the table the application's session meant.

The values of step 2 are chosen in :mod:`qadvisor.collect.plan_values`, the other plausible
bindings of hidden values in :mod:`qadvisor.collect.plan_bindings`; this module sends the
statements.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from psycopg import sql

from qadvisor.collect.plan_bindings import hypotheses
from qadvisor.collect.plan_values import (
    MAX_TYPE_TRIES,
    TYPE_ERRORS,
    Job,
    PlanError,
    TypeInfo,
    param_value,
    parameters_of,
    prepare_type,
    types_named,
)
from qadvisor.collect.queries import Read, first_line
from qadvisor.derive.plans.explain_json import PartitionNames, parse_explain, partition_names
from qadvisor.derive.plans.reading import SORT_NODES, indexes_used
from qadvisor.derive.predicates import index_predicate_columns
from qadvisor.model import Binding, HiddenFact, PlanNode, Queue, Statement, Table
from qadvisor.sql import dequeue
from qadvisor.sql.printing import ident

Conn = psycopg.Connection[Any]

PREPARED_NAME = "qadvisor_stmt"
# The types the server gave a prepared statement's parameters; {name} is its name.
PARAMETER_TYPES_SQL = (
    "SELECT format_type(t.oid, NULL), t.typtype::text,"
    " CASE WHEN t.typbasetype <> 0 THEN format_type(t.typbasetype, NULL) END,"
    " ARRAY(SELECT e.enumlabel::text FROM pg_enum e"
    " WHERE e.enumtypid = coalesce(nullif(t.typbasetype, 0), t.oid)"
    " ORDER BY e.enumsortorder)"
    " FROM pg_prepared_statements p,"
    " unnest(p.parameter_types::oid[]) WITH ORDINALITY AS u(typ, pos)"
    " JOIN pg_type t ON t.oid = u.typ"
    " WHERE p.name = {name} ORDER BY u.pos"
)
GENERIC_PLAN_VERSION = 160000
# Partial indexes probed per statement: each probe is one EXPLAIN.
MAX_PROBES = 8
_EXPLAIN = "VERBOSE, FORMAT JSON"
# --analyze takes ACCESS SHARE on the tables it reads: it waits at most this long for one.
ANALYZE_LOCK_TIMEOUT_MS = 50
# The scan --analyze runs would count in the table's and its indexes' read counters (idx_scan,
# idx_tup_fetch, seq_scan...) as the application's reads do, and QA101 reads idx_scan as the
# application's use of an index: it runs uncounted (track_counts off for its transaction)
# where the role may set track_counts, a superuser, or from PostgreSQL 15 a role granted SET
# on it. A row back: it is off.
UNCOUNTED_SQL = (
    "SELECT set_config('track_counts', 'off', true)"
    " WHERE has_parameter_privilege('track_counts', 'SET')"
)
UNCOUNTED_SQL_14 = (
    "SELECT set_config('track_counts', 'off', true) FROM pg_roles"
    " WHERE rolname = current_user AND rolsuper"
)
PARAMETER_PRIVILEGE_VERSION = 150000


@dataclass(frozen=True)
class PlanForm:
    """What of a claim a role that may not plan it whole plans instead: its locking level
    alone, without its locking clauses (``strip_locks``: no UPDATE privilege) and with its
    select list replaced (``projection`` False: it reads columns the role may not SELECT).
    ``why`` says so in the report."""

    strip_locks: bool
    projection: bool
    why: str


# Why a statement on a queue must not be planned now (the fact that is hidden), what of it
# may be planned instead, or None: planned as written.
Refuse = Callable[[Queue, dequeue.DequeueStatement], HiddenFact | PlanForm | None]


def plan_statements(
    conn: Conn,
    statements: Sequence[Statement],
    queues: Sequence[Queue],
    tables: Sequence[Table],
    analyze: bool,
    refuse: Refuse | None = None,
) -> Read[tuple[Statement, ...]]:
    """Each statement with its custom and generic plan (and, with ``analyze``, the analyzed
    custom plan), or a ``plan_error`` saying why not. ``refuse`` says why a statement on a
    queue must not be planned now (another session's lock, a missing grant): the statement
    gets the fact's reason as its ``plan_error`` instead, nothing is sent, and the fact is in
    the read's ``hidden``, once per refused statement."""
    planner = _Planner(conn, queues, tables, analyze, refuse)
    planned = [planner.plan(s) for s in statements]
    return Read(
        tuple(stmt for stmt, _ in planned),
        hidden=tuple(fact for _, fact in planned if fact is not None),
    )


@dataclass
class _Alternative:
    """Another plausible binding of the planned text's parameters, and its plans."""

    values: list[str]
    binding: str
    custom_plan: PlanNode | None = None
    probes: dict[str, str] = field(default_factory=dict)


@dataclass
class _Result:
    values: list[str] = field(default_factory=list)  # by parameter number of the planned text
    binding: str = ""  # where the hidden values came from ("" when nothing was hypothesised)
    alternatives: list[_Alternative] = field(default_factory=list)
    custom_plan: PlanNode | None = None
    generic_plan: PlanNode | None = None
    analyzed_plan: PlanNode | None = None
    analyzed_ms: float | None = None
    probes: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


class _Planner:
    def __init__(
        self,
        conn: Conn,
        queues: Sequence[Queue],
        tables: Sequence[Table],
        analyze: bool,
        refuse: Refuse | None = None,
    ) -> None:
        self.conn = conn
        self.queues = queues
        self.tables = tables
        self.analyze = analyze
        self.refuse = refuse
        self.version = conn.info.server_version
        # A claim on a partitioned queue table is planned on it; its plan scans partitions.
        self.partitions = partition_names(tables)
        self.cache: dict[tuple[str, str, str, tuple[str, ...]], _Result] = {}

    def plan(self, stmt: Statement) -> tuple[Statement, HiddenFact | None]:
        """The statement planned, or why not; and the fact ``refuse`` hid, if it did."""
        if stmt.parsed is None or stmt.queue is None:
            return stmt, None  # not a claim on a table its names resolve to: nothing to plan
        queue = next((q for q in self.queues if q.qualified == stmt.queue), None)
        if queue is None:
            return stmt, None  # its table is not a queue of this report (--table named others)
        decided = self.refuse(queue, stmt.parsed) if self.refuse else None
        if isinstance(decided, HiddenFact):
            return replace(stmt, plan_error=decided.reason), decided
        form = decided
        source = stmt.parsed.text
        plan_text = None
        try:
            if form is not None:
                level = dequeue.locking_level(source, projection=form.projection)
                if level is None:  # the guard asks for a form only where there is a level
                    return replace(stmt, plan_error=f"not planned: {form.why}"), None
                source = level
            text, renumbered = dequeue.normalise_for_planning(source)
            planned = dequeue.analyse(text)
            if form is not None and form.strip_locks:
                plan_text = dequeue.without_locks(text)
        except dequeue.StatementError as exc:
            return replace(stmt, plan_error=f"cannot be planned: {exc}"), None
        if planned is None:
            vanished = "cannot be planned: the lock vanished in planning"
            return replace(stmt, plan_error=vanished), None
        table = _table_of(queue, self.tables)
        given = _given_types(stmt, renumbered)
        key = (plan_text or text, stmt.search_path or "", stmt.queue or "", given)
        result = self.cache.get(key)
        if result is None:
            job = Job(
                text, len(renumbered), planned, queue, table, stmt.search_path, given, plan_text
            )
            result = self._plan_text(job)
            self.cache[key] = result
        # Recorded against the statement's own parameter numbers; a LIMIT $n put back to 1
        # shows as "1". A parameter outside the level planned has no value.
        level_planned = dequeue.analyse(source) if form is not None else stmt.parsed
        own = (level_planned or stmt.parsed).parameters

        def by_own_numbers(values: list[str]) -> dict[str, str]:
            out = {str(n): "1" for n in own}
            for k, value in enumerate(values, 1):
                out[renumbered[k].lstrip("$")] = value
            return out

        custom_values = by_own_numbers(result.values)
        others = tuple(
            Binding(a.binding, by_own_numbers(a.values), a.custom_plan, dict(a.probes))
            for a in result.alternatives
            if a.custom_plan is not None
        )
        planned_stmt = replace(
            stmt,
            custom_values=custom_values if result.values or result.custom_plan else {},
            custom_plan=result.custom_plan,
            generic_plan=result.generic_plan,
            analyzed_plan=result.analyzed_plan,
            analyzed_ms=result.analyzed_ms,
            index_probes=dict(result.probes),
            plan_error="; ".join(result.errors) or None,
            binding=result.binding if result.custom_plan else "",
            other_bindings=others if result.custom_plan else (),
            planned_as=form.why if form is not None else None,
        )
        return planned_stmt, None

    def _plan_text(self, job: Job) -> _Result:
        result = _Result()
        params = parameters_of(job.planned, job.table)
        types = [
            job.given[k - 1] if job.given[k - 1] else prepare_type(params.get(k))
            for k in range(1, job.count + 1)
        ]
        prepared = False
        values: list[str] = []
        try:
            with self.conn.transaction(force_rollback=True):
                self._set_path(job.search_path)
                declared = self._prepare_typed(job.text, types)
                if job.plan_text is not None:
                    # PREPARE checks no privilege, and refuses what PostgreSQL refuses of the
                    # claim with its locks (FOR UPDATE with a window function): that verdict,
                    # and the types the server gave its parameters, are the claim's; its scan
                    # is prepared with those types.
                    prepared = True
                    types = [t.name for t in self._parameter_types()] if job.count else []
                    self._execute(
                        sql.SQL("DEALLOCATE {}").format(sql.Identifier(PREPARED_NAME)),
                        "DEALLOCATE",
                    )
                    prepared = False
                    declared = True
                    # A row lock keeps index-only and parallel scans out of the claim's plan;
                    # without it the planner could choose either for the same scan.
                    for setting in ("enable_indexonlyscan", "max_parallel_workers_per_gather"):
                        self._execute(
                            sql.SQL("SET LOCAL {} = 0").format(sql.Identifier(setting)),
                            "planning the scan without its row locks",
                        )
                    self._prepare(job.plan_text, types)
                prepared = True
                resolved = self._parameter_types() if job.count else []
                resolved += [TypeInfo("unknown")] * (job.count - len(resolved))
                values = [
                    param_value(params.get(k), resolved[k - 1], job.queue, job.table)
                    for k in range(1, job.count + 1)
                ]
                bindings = hypotheses(job, params, values)
                values, result.binding = bindings[0]
                result.values = values
                self._set_mode("force_custom_plan")
                result.custom_plan = self._explain_execute(values, "custom plan")
                for other, why in bindings[1:]:
                    alternative = _Alternative(other, why)
                    try:
                        # A savepoint: a binding the server refuses costs only itself.
                        with self.conn.transaction():
                            alternative.custom_plan = self._explain_execute(other, why)
                    except PlanError:
                        continue
                    result.alternatives.append(alternative)
                if not job.count:
                    result.generic_plan = result.custom_plan  # one plan: nothing to bind
                elif self.version >= GENERIC_PLAN_VERSION and not any(job.given) and not declared:
                    result.generic_plan = self._explain_generic(job.text)
                else:
                    # Types given beforehand (a function's variables) only PREPARE can take.
                    self._set_mode("force_generic_plan")
                    result.generic_plan = self._explain_execute(values, "generic plan")
                self._execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(PREPARED_NAME)))
                prepared = False
                # Last: the probes switch plan types off for the rest of the transaction.
                result.probes = self._probes(job, values)
                for alternative in result.alternatives:
                    alternative.probes = self._probes(job, alternative.values)
        except PlanError as exc:
            result.errors.append(str(exc))
        except psycopg.Error as exc:  # the transaction itself (BEGIN/ROLLBACK) failed
            result.errors.append(f"planning failed: {first_line(exc)}")
        finally:
            if prepared:
                self._deallocate()
        if self.analyze and result.custom_plan is not None:
            self._analyze(job, values, result)
        return result

    def _probes(self, job: Job, values: list[str]) -> dict[str, str]:
        """Ask the planner, per partial index of the queue table whose predicate names a
        column the statement filters on, whether the statement's conditions can use it
        (dequeue.index_probe: ordered by the index's key, with sequential scans, bitmap scans
        and sorts disabled, only an index with that key can serve it, and a partial one only
        when its predicate is proved)."""
        table = job.table
        if table is None:
            return {}
        filtered = {p.column for p in job.planned.predicates}
        out: dict[str, str] = {}
        for idx in table.indexes:
            if len(out) >= MAX_PROBES:
                break
            if not (idx.is_valid and idx.is_partial and idx.columns) or None in idx.columns:
                continue
            if not index_predicate_columns(idx, table) & filtered:
                continue
            if not out:
                for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                    self._execute(
                        sql.SQL("SET LOCAL {} = off").format(sql.Identifier(setting)), "probe"
                    )
            directions = idx.descending or (False,) * len(idx.columns)
            keys = [
                ident(c or "") + (" DESC" if desc else "")
                for c, desc in zip(idx.columns, directions, strict=False)
            ]
            try:
                probe = dequeue.index_probe(job.text, keys, {k: v for k, v in enumerate(values, 1)})
            except dequeue.StatementError as exc:
                out[idx.name] = f"undecided: no probe could be written ({exc})"
                continue
            if probe is None:
                continue
            try:
                # A savepoint: a probe that fails costs only its own answer.
                with self.conn.transaction():
                    data = self._fetch_json(
                        sql.SQL("EXPLAIN (FORMAT JSON) ") + _raw(probe),
                        f"probe of {idx.name}",
                        simple=True,
                    )
                    plan = _parse(data, f"probe of {idx.name}", self.partitions)[0]
            except (PlanError, psycopg.Error) as exc:
                out[idx.name] = f"undecided: the probe failed ({exc})"
                continue
            used = indexes_used(plan, table.schema, table.name)
            if idx.name in used:
                out[idx.name] = "proved"
            elif not used or any(n.node_type in SORT_NODES for n in plan.walk()):
                # With sorts disabled the planner still sorts: no index delivers the key's
                # order, so the partial index, which would, is not usable for the conditions.
                out[idx.name] = "not proved"
            else:
                out[idx.name] = f"undecided: the planner chose {used[0]}, which has the same order"
        return out

    def _set_path(self, search_path: str | None) -> None:
        if search_path is not None:
            self._execute(
                sql.SQL("SELECT set_config('search_path', {}, true)").format(
                    sql.Literal(search_path)
                ),
                "setting the application's search_path",
            )

    def _analyze(self, job: Job, values: list[str], result: _Result) -> None:
        """EXPLAIN ANALYZE of what finds the claim's rows, never of the claim: its locking
        clauses removed (dequeue.read_only_scan), in a read-only transaction with a lock
        timeout of milliseconds. So it takes no row lock, waits on no worker and makes none
        wait, and writes no counter of the table; its reads are counted only where the role
        may not switch track_counts off; an UPDATE or DELETE is never executed."""
        try:
            scan = dequeue.read_only_scan(job.text, dict(enumerate(values, 1)))
        except dequeue.StatementError as exc:
            result.errors.append(f"EXPLAIN ANALYZE not run: its read-only form failed ({exc})")
            return
        if scan is None:
            result.errors.append(
                "EXPLAIN ANALYZE not run: the statement finds its rows in no SELECT that locks "
                "them, and executing the UPDATE or DELETE itself would write"
            )
            return
        try:
            with self.conn.transaction(force_rollback=True):
                # The stricter of this bound and the session's (a role's own lock_timeout).
                self._execute(
                    sql.SQL(
                        "SELECT set_config('lock_timeout', least(nullif(setting::int, 0), {})"
                        "::text || 'ms', true) FROM pg_settings WHERE name = 'lock_timeout'"
                    ).format(sql.Literal(ANALYZE_LOCK_TIMEOUT_MS)),
                    "EXPLAIN ANALYZE",
                )
                uncounted = (
                    UNCOUNTED_SQL
                    if self.version >= PARAMETER_PRIVILEGE_VERSION
                    else UNCOUNTED_SQL_14
                )
                self._rows(sql.SQL(uncounted), "EXPLAIN ANALYZE")
                self._set_path(job.search_path)
                # The text is a SELECT printed from the statement's own tree, its parameters
                # replaced by literals this module built.
                data = self._fetch_json(
                    sql.SQL("EXPLAIN (ANALYZE, BUFFERS, {}) ").format(sql.SQL(_EXPLAIN))
                    + _raw(scan),
                    "EXPLAIN ANALYZE",
                )
                result.analyzed_plan, result.analyzed_ms = _parse(
                    data, "EXPLAIN ANALYZE", self.partitions
                )
        except PlanError as exc:
            result.errors.append(str(exc))
        except psycopg.Error as exc:
            result.errors.append(f"EXPLAIN ANALYZE failed: {first_line(exc)}")

    # Steps; each raises PlanError with a one-line reason.

    def _prepare(self, text: str, types: list[str]) -> None:
        head = sql.SQL("PREPARE {}").format(sql.Identifier(PREPARED_NAME))
        if types:
            # Type names come from format_type() of the catalog, already quoted as needed.
            head += sql.SQL("({})").format(sql.SQL(", ").join(sql.SQL(t) for t in types))
        # The statement text is the user's, checked to be one plannable statement.
        self._execute(head + sql.SQL(" AS ") + _raw(text), "PREPARE")

    def _prepare_typed(self, text: str, types: list[str]) -> bool:
        """PREPARE with the types known, the others left to the server. Where the server
        cannot type a parameter from its context alone (``attempts + CASE ... THEN $2 ELSE
        $3 END`` resolves the CASE to text; ``run_at < now() - $2`` makes $2 a timestamp)
        the application's driver or its literal had given the type: the types the error
        names are tried on the parameters left to the server, one parameter at a time, each
        attempt in a savepoint, at most MAX_TYPE_TRIES. A try the server refuses for another
        reason is a wrong guess, not the answer: a parameter in ``= ANY($1)`` on another
        table takes an array type the server infers itself, and declaring it a timestamp
        makes "op ANY/ALL (array) requires array on right side". True when a type was
        declared so (then only PREPARE can plan the text generically); the first error when
        none plans.
        """
        try:
            with self.conn.transaction():
                self._prepare(text, types)
            return False
        except PlanError as exc:
            first = exc
            if exc.sqlstate not in TYPE_ERRORS:
                raise
        tries = 0
        for k, given in enumerate(types):
            if given != "unknown":
                continue
            for candidate in types_named(str(first)):
                if tries == MAX_TYPE_TRIES:
                    raise first
                tries += 1
                attempt = [*types[:k], candidate, *types[k + 1 :]]
                try:
                    with self.conn.transaction():
                        self._prepare(text, attempt)
                    return True
                except PlanError as exc:
                    if exc.sqlstate is None:
                        raise  # not the server's refusal: a timeout, a lock
        raise first

    def _parameter_types(self) -> list[TypeInfo]:
        """The types the server resolved for the prepared statement's parameters, with the
        labels of enums and the base type of domains (a value must be one of them)."""
        rows = self._rows(
            sql.SQL(PARAMETER_TYPES_SQL).format(name=sql.Literal(PREPARED_NAME)),
            "reading parameter types",
        )
        return [
            TypeInfo(str(name), str(kind), base, tuple(labels or ()))
            for name, kind, base, labels in rows
        ]

    def _set_mode(self, mode: str) -> None:
        self._execute(sql.SQL("SET LOCAL plan_cache_mode = {}").format(sql.SQL(mode)), "SET LOCAL")

    def _explain_execute(self, values: list[str], what: str) -> PlanNode:
        data = self._fetch_json(
            sql.SQL("EXPLAIN ({}) ").format(sql.SQL(_EXPLAIN)) + _execute_call(values), what
        )
        return _parse(data, what, self.partitions)[0]

    def _explain_generic(self, text: str) -> PlanNode:
        data = self._fetch_json(
            sql.SQL("EXPLAIN (GENERIC_PLAN, {}) ").format(sql.SQL(_EXPLAIN)) + _raw(text),
            "generic plan",
            simple=True,
        )
        return _parse(data, "generic plan", self.partitions)[0]

    def _deallocate(self) -> None:
        # A failure here means it is gone with the connection, or was never made.
        with contextlib.suppress(psycopg.Error):
            self.conn.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(PREPARED_NAME)))

    # Plumbing.

    def _execute(self, query: sql.Composable, what: str = "") -> None:
        self._rows(query, what, fetch=False)

    def _fetch_json(self, query: sql.Composable, what: str, simple: bool = False) -> Any:
        rows = self._rows(query, what, simple=simple)
        if not rows:
            raise PlanError(f"{what}: EXPLAIN returned nothing")
        return rows[0][0]

    def _rows(
        self, query: sql.Composable, what: str, fetch: bool = True, simple: bool = False
    ) -> list[Any]:
        # The extended protocol (binary=True) refuses several commands in one string: a second
        # guard after dequeue.check_plannable. EXPLAIN (GENERIC_PLAN) needs the simple protocol,
        # where $n is the statement's own parameter and not one of the protocol's.
        try:
            with self.conn.cursor() as cur:
                cur.execute(query.as_bytes(self.conn), prepare=False, binary=not simple)
                return cur.fetchall() if fetch else []
        except psycopg.errors.QueryCanceled:
            raise PlanError(f"{what}: statement_timeout expired") from None
        except psycopg.errors.InsufficientPrivilege as exc:
            raise PlanError(
                f"{what}: {first_line(exc)}; EXPLAIN checks the privileges the statement "
                "would use (SELECT on each column it reads, UPDATE for a row lock: see "
                "docs/privileges.md); qadvisor's session stays read-only"
            ) from None
        except psycopg.errors.LockNotAvailable:
            raise PlanError(
                f"{what}: lock_timeout expired (another session holds a lock on the table)"
            ) from None
        except psycopg.Error as exc:
            if self.conn.closed:
                raise
            raise PlanError(f"{what} failed: {first_line(exc)}", exc.sqlstate) from None


def _raw(text: str) -> sql.Composable:
    """The checked statement text, spliced in as it is (never .format()ted, so braces and
    percent signs in it mean nothing to psycopg)."""
    return sql.SQL(text)


def _execute_call(values: list[str]) -> sql.Composable:
    call = sql.SQL("EXECUTE {}").format(sql.Identifier(PREPARED_NAME))
    if values:
        # Values are SQL literals built by this module (quoted with sqltext.literal) or
        # now()/CURRENT_DATE-style expressions: never text from the statement or the user.
        call += sql.SQL("({})").format(sql.SQL(", ").join(sql.SQL(v) for v in values))
    return call


def _parse(data: Any, what: str, partitions: PartitionNames) -> tuple[PlanNode, float | None]:
    try:
        return parse_explain(data, partitions)
    except ValueError as exc:
        raise PlanError(f"{what}: {exc}") from None


# --- small helpers ----------------------------------------------------------------------------


def _table_of(queue: Queue | None, tables: Sequence[Table]) -> Table | None:
    if queue is None:
        return None
    return next((t for t in tables if (t.schema, t.name) == (queue.schema, queue.table)), None)


def _given_types(stmt: Statement, renumbered: dict[int, str]) -> tuple[str, ...]:
    """Types known beforehand (``Statement.param_types``, by the statement's own numbers),
    by the planned text's numbers; '' where unknown."""
    out = []
    for k in range(1, len(renumbered) + 1):
        n = int(renumbered[k].lstrip("$"))
        out.append(stmt.param_types[n - 1] if 0 < n <= len(stmt.param_types) else "")
    return tuple(out)


def _round(value: Any) -> float | None:
    return None if value is None else round(float(value), 3)
