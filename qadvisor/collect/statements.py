"""Dequeue statements and their plans: from pg_stat_statements and from --query/--query-file.

Where they come from:

- pg_stat_statements (when installed and preloaded): one bounded query for all statements
  of this database that lock rows, kept when the locked table is a discovered queue. Their
  text is normalised (every constant is ``$n``), so ``from_normalised_text`` is set.
- The user's statements, already split by the CLI into (source, text) pairs. A ``--query``
  was checked to be one plannable statement; statements of a ``--query-file`` that are not
  row-locking dequeues are left alone (a repository's SQL file holds migrations too).

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

With ``analyze``: ``EXPLAIN (ANALYZE, BUFFERS)`` of the custom form in a second transaction
that is switched to READ WRITE and always rolled back.

A plan that fails (statement_timeout, lock_timeout, any error) leaves a one-line
``plan_error`` on that statement; the others are still planned.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from psycopg import sql

from qadvisor import dequeue
from qadvisor.collect.queries import first_line
from qadvisor.model import Column, LivePredicate, PlanNode, Queue, Statement, Table
from qadvisor.plans import parse_explain, queues_named
from qadvisor.sqltext import literal

Conn = psycopg.Connection[Any]

PREPARED_NAME = "qadvisor_stmt"
GENERIC_PLAN_VERSION = 160000
_EXPLAIN = "VERBOSE, FORMAT JSON"

# pg_stat_statements keeps a SQL-level PREPARE with its statement: "PREPARE s(text) AS ...".
_PREPARE_PREFIX = re.compile(
    r"^\s*PREPARE\s+(?:\"(?:[^\"]|\"\")+\"|[A-Za-z_][A-Za-z0-9_$]*)\s*"
    r"(?:\((?:[^()]|\([^()]*\))*\))?\s*AS\s+",
    re.IGNORECASE,
)
_LOCKING_WORDS = re.compile(r"\bfor\s+(no\s+key\s+)?update\b|\bfor\s+(key\s+)?share\b", re.I)


def collect_statements(
    conn: Conn,
    queues: Sequence[Queue],
    tables: Sequence[Table],
    pgss: Sequence[dict[str, Any]],
    queries: Sequence[tuple[str, str]],
    analyze: bool,
    refuse: Callable[[Queue, dequeue.DequeueStatement], str | None] | None = None,
) -> tuple[Statement, ...]:
    """Statements from pg_stat_statements rows (``queries.pg_stat_statements``) and from
    ``queries`` ((source, text) pairs), each with its custom and generic plan (and, with
    ``analyze``, the analyzed custom plan). ``refuse`` says why a statement on a queue must
    not be planned now (another session's lock, a missing grant): it gets that as its
    ``plan_error`` instead."""
    found = [*_from_pg_stat_statements(pgss, queues), *_from_queries(queries)]
    planner = _Planner(conn, queues, tables, analyze, refuse)
    return tuple(planner.plan(s) for s in found)


# --- finding them ---------------------------------------------------------------------------


def _from_pg_stat_statements(
    rows: Sequence[dict[str, Any]], queues: Sequence[Queue]
) -> list[Statement]:
    out = []
    for r in rows:
        text = strip_prepare(str(r["query"]))
        try:
            parsed = dequeue.analyse(text)
        except dequeue.StatementError:
            continue
        if parsed is None or _queue_of(parsed, queues) is None:
            continue
        calls = int(r["calls"])
        roles = [str(x) for x in r["roles"] or () if x is not None]
        plans = r["plans"]
        out.append(
            Statement(
                source="pg_stat_statements",
                text=text,
                parsed=parsed,
                from_normalised_text=True,
                queryid=int(r["queryid"]),
                role=roles[0] if len(roles) == 1 else None,
                calls=calls,
                mean_exec_ms=_round(r["mean_exec_ms"]),
                shared_blks_per_call=_round(r["shared_blks_per_call"]),
                plans_per_call=_round(int(plans) / calls)
                if r["track_planning"] and plans is not None
                else None,
            )
        )
    return out


def strip_prepare(text: str) -> str:
    m = _PREPARE_PREFIX.match(text)
    return text[m.end() :] if m else text


def _from_queries(queries: Sequence[tuple[str, str]]) -> list[Statement]:
    out = []
    for source, text in queries:
        from_file = not source.startswith("--query")
        try:
            parsed = dequeue.analyse(text)
        except dequeue.StatementError as exc:
            # A file holds DDL and data changes too: only something that looks like a
            # dequeue is worth a note.
            if not from_file or _LOCKING_WORDS.search(text):
                out.append(Statement(source, text, plan_error=str(exc)))
            continue
        if parsed is None:
            if not from_file:
                out.append(
                    Statement(
                        source,
                        text,
                        plan_error="takes no row lock (FOR UPDATE / FOR SHARE): "
                        "not a dequeue statement",
                    )
                )
            continue
        out.append(Statement(source, text, parsed=parsed))
    return out


def _queue_of(parsed: dequeue.DequeueStatement, queues: Sequence[Queue]) -> Queue | None:
    return next(iter(queues_named(parsed, queues)), None)


def _table_of(queue: Queue | None, tables: Sequence[Table]) -> Table | None:
    if queue is None:
        return None
    return next((t for t in tables if (t.schema, t.name) == (queue.schema, queue.table)), None)


# --- planning -------------------------------------------------------------------------------


class PlanError(Exception):
    """One step of planning failed; the message is one line, safe to print."""


@dataclass
class _Result:
    values: list[str] = field(default_factory=list)  # by parameter number of the planned text
    custom_plan: PlanNode | None = None
    generic_plan: PlanNode | None = None
    analyzed_plan: PlanNode | None = None
    analyzed_ms: float | None = None
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Param:
    """What a parameter of the planned text is compared with."""

    column: Column | None
    op: str | None


class _Planner:
    def __init__(
        self,
        conn: Conn,
        queues: Sequence[Queue],
        tables: Sequence[Table],
        analyze: bool,
        refuse: Callable[[Queue, dequeue.DequeueStatement], str | None] | None = None,
    ) -> None:
        self.conn = conn
        self.queues = queues
        self.tables = tables
        self.analyze = analyze
        self.refuse = refuse
        self.version = conn.info.server_version
        self.cache: dict[str, _Result] = {}

    def plan(self, stmt: Statement) -> Statement:
        if stmt.parsed is None:
            return stmt
        queue = _queue_of(stmt.parsed, self.queues)
        refused = self.refuse(queue, stmt.parsed) if self.refuse and queue else None
        if refused:
            return replace(stmt, plan_error=refused)
        try:
            text, renumbered = dequeue.normalise_for_planning(stmt.parsed.text)
            planned = dequeue.analyse(text)
        except dequeue.StatementError as exc:
            return replace(stmt, plan_error=f"cannot be planned: {exc}")
        if planned is None:
            return replace(stmt, plan_error="cannot be planned: the lock vanished in planning")
        result = self.cache.get(text)
        if result is None:
            result = self._plan_text(text, len(renumbered), planned)
            self.cache[text] = result
        # Recorded against the statement's own parameter numbers; a LIMIT $n put back to 1
        # shows as "1".
        custom_values = {str(n): "1" for n in stmt.parsed.parameters}
        for k, value in enumerate(result.values, 1):
            custom_values[renumbered[k].lstrip("$")] = value
        return replace(
            stmt,
            custom_values=custom_values if result.values or result.custom_plan else {},
            custom_plan=result.custom_plan,
            generic_plan=result.generic_plan,
            analyzed_plan=result.analyzed_plan,
            analyzed_ms=result.analyzed_ms,
            plan_error="; ".join(result.errors) or None,
        )

    def _plan_text(self, text: str, count: int, planned: dequeue.DequeueStatement) -> _Result:
        result = _Result()
        queue = _queue_of(planned, self.queues)
        table = _table_of(queue, self.tables)
        params = _parameters(planned, table)
        types = [_prepare_type(params.get(k)) for k in range(1, count + 1)]
        prepared = False
        values: list[str] = []
        try:
            with self.conn.transaction(force_rollback=True):
                self._prepare(text, types)
                prepared = True
                resolved = self._parameter_types() if count else []
                resolved += ["unknown"] * (count - len(resolved))
                values = [
                    _value(params.get(k), resolved[k - 1], queue, table)
                    for k in range(1, count + 1)
                ]
                result.values = values
                self._set_mode("force_custom_plan")
                result.custom_plan = self._explain_execute(values, "custom plan")
                if not count:
                    result.generic_plan = result.custom_plan  # one plan: nothing to bind
                elif self.version >= GENERIC_PLAN_VERSION:
                    result.generic_plan = self._explain_generic(text)
                else:
                    self._set_mode("force_generic_plan")
                    result.generic_plan = self._explain_execute(values, "generic plan")
                self._execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(PREPARED_NAME)))
                prepared = False
        except PlanError as exc:
            result.errors.append(str(exc))
        except psycopg.Error as exc:  # the transaction itself (BEGIN/ROLLBACK) failed
            result.errors.append(f"planning failed: {first_line(exc)}")
        finally:
            if prepared:
                self._deallocate()
        if self.analyze and result.custom_plan is not None:
            self._analyze(text, types, values, result)
        return result

    def _analyze(self, text: str, types: list[str], values: list[str], result: _Result) -> None:
        prepared = False
        try:
            with self.conn.transaction(force_rollback=True):
                # The session is read-only; EXPLAIN ANALYZE runs the statement (it locks and
                # updates rows), so this one transaction is read-write and rolled back.
                self._execute(sql.SQL("SET TRANSACTION READ WRITE"), "EXPLAIN ANALYZE")
                self._prepare(text, types)
                prepared = True
                self._set_mode("force_custom_plan")
                data = self._fetch_json(
                    sql.SQL("EXPLAIN (ANALYZE, BUFFERS, {}) ").format(sql.SQL(_EXPLAIN))
                    + _execute_call(values),
                    "EXPLAIN ANALYZE",
                )
                result.analyzed_plan, result.analyzed_ms = _parse(data, "EXPLAIN ANALYZE")
                self._execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(PREPARED_NAME)))
                prepared = False
        except PlanError as exc:
            result.errors.append(str(exc))
        except psycopg.Error as exc:
            result.errors.append(f"EXPLAIN ANALYZE failed: {first_line(exc)}")
        finally:
            if prepared:
                self._deallocate()

    # Steps; each raises PlanError with a one-line reason.

    def _prepare(self, text: str, types: list[str]) -> None:
        head = sql.SQL("PREPARE {}").format(sql.Identifier(PREPARED_NAME))
        if types:
            # Type names come from format_type() of the catalog, already quoted as needed.
            head += sql.SQL("({})").format(sql.SQL(", ").join(sql.SQL(t) for t in types))
        # The statement text is the user's, checked to be one plannable statement.
        self._execute(head + sql.SQL(" AS ") + _raw(text), "PREPARE")

    def _parameter_types(self) -> list[str]:
        rows = self._rows(
            sql.SQL(
                "SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = {}"
            ).format(sql.Literal(PREPARED_NAME)),
            "reading parameter types",
        )
        return [str(t) for t in rows[0][0]] if rows and rows[0][0] is not None else []

    def _set_mode(self, mode: str) -> None:
        self._execute(sql.SQL("SET LOCAL plan_cache_mode = {}").format(sql.SQL(mode)), "SET LOCAL")

    def _explain_execute(self, values: list[str], what: str) -> PlanNode:
        data = self._fetch_json(
            sql.SQL("EXPLAIN ({}) ").format(sql.SQL(_EXPLAIN)) + _execute_call(values), what
        )
        return _parse(data, what)[0]

    def _explain_generic(self, text: str) -> PlanNode:
        data = self._fetch_json(
            sql.SQL("EXPLAIN (GENERIC_PLAN, {}) ").format(sql.SQL(_EXPLAIN)) + _raw(text),
            "generic plan",
            simple=True,
        )
        return _parse(data, "generic plan")[0]

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
                f"{what}: {first_line(exc)}; EXPLAIN of a row-locking statement needs the "
                "privilege the statement would use (UPDATE on the queue table, e.g. "
                "GRANT UPDATE ON <table> TO <role>); qadvisor's session stays read-only"
            ) from None
        except psycopg.errors.LockNotAvailable:
            raise PlanError(
                f"{what}: lock_timeout expired (another session holds a lock on the table)"
            ) from None
        except psycopg.Error as exc:
            if self.conn.closed:
                raise
            raise PlanError(f"{what} failed: {first_line(exc)}") from None


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


def _parse(data: Any, what: str) -> tuple[PlanNode, float | None]:
    try:
        return parse_explain(data)
    except ValueError as exc:
        raise PlanError(f"{what}: {exc}") from None


# --- parameters and their values -------------------------------------------------------------


def _parameters(planned: dequeue.DequeueStatement, table: Table | None) -> dict[int, _Param]:
    """Parameter number -> the queue-table column it is compared with (first comparison)."""
    out: dict[int, _Param] = {}
    for pred in planned.predicates:
        column = table.column(pred.column) if table is not None else None
        for operand in pred.operands:
            if operand.kind == "parameter" and operand.index and operand.index not in out:
                out[operand.index] = _Param(column, pred.op)
    return out


def _prepare_type(param: _Param | None) -> str:
    if param is None or param.column is None or param.op in ("other", None):
        return "unknown"
    if param.op == "any":
        return f"{param.column.type}[]"
    return param.column.type


_INTEGER = {"smallint", "integer", "bigint", "oid"}
_NUMERIC = {"numeric", "real", "double precision", "money"}
_TEXT = {"text", "character varying", "character", "name", "citext", "bpchar", "varchar"}


def _base_type(type_name: str) -> str:
    return re.sub(r"\(.*?\)", "", type_name).strip()


def _default(type_name: str, column: Column | None = None) -> str:
    """A plain, non-NULL value of the type."""
    base = _base_type(type_name)
    if base.endswith("[]"):
        return "'{}'"
    if base in _INTEGER or base in _NUMERIC:
        return "1"
    if base == "boolean":
        return "true"
    if base.startswith("timestamp"):
        return "now()"
    if base == "date":
        return "CURRENT_DATE"
    if base.startswith("time"):
        return "LOCALTIME"
    if base == "interval":
        return "'1 minute'"
    if base == "uuid":
        return "'00000000-0000-0000-0000-000000000000'"
    if base in ("json", "jsonb"):
        return "'{}'"
    if column is not None and column.enum_labels:
        return literal(column.enum_labels[0])
    return "''"


def _value(
    param: _Param | None, resolved_type: str, queue: Queue | None, table: Table | None
) -> str:
    """A representative literal for one parameter (SQL text)."""
    column = param.column if param is not None else None
    if column is None or param is None or table is None:
        return _default(resolved_type)
    op = param.op or "="
    live = queue.live if queue is not None else None
    if live is not None and live.column == column.name and live.op == "in" and live.values:
        if op in ("=", "in"):
            return _lit(live.values[0])
        if op == "any":
            return _array_literal(live.values)
        if op in ("<>", "not in"):
            other = _non_live_value(column, table, live)
            if other is not None:
                return _lit(other)
    base = _base_type(column.type)
    if base.startswith("timestamp") or base == "date":
        return _default(column.type)
    stats = table.stats_of(column.name)
    mcv = stats.most_common_vals if stats is not None else None
    if mcv:
        return _array_literal(mcv[:1]) if op == "any" else _lit(mcv[0])
    if op == "any":
        return "'{}'" if not column.enum_labels else _array_literal(column.enum_labels[:1])
    return _default(column.type, column)


def _non_live_value(column: Column, table: Table, live: LivePredicate) -> str | None:
    stats = table.stats_of(column.name)
    for value in (stats.most_common_vals or ()) if stats is not None else ():
        if value not in live.values:
            return value
    return next((v for v in column.enum_labels if v not in live.values), None)


def _lit(value: str) -> str:
    return literal(value).strip()


def _array_literal(values: Sequence[str]) -> str:
    items = ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return _lit("{" + items + "}")


# --- small helpers ----------------------------------------------------------------------------


def _round(value: Any) -> float | None:
    return None if value is None else round(float(value), 3)
