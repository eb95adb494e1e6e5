"""The other statements the server recorded on the queue tables, and the indexes they read.

A fix that drops or replaces an index must not break what else runs on the table: a purge of
old rows, a reaper of stale ones, an admin listing. pg_stat_statements knows them; this module
takes those that name a queue table from the run's one read of it (:meth:`Recorded.naming`:
not claims, not qadvisor's own, the most called first, bounded), and plans each one
generically (PREPARE with the types the server infers, ``plan_cache_mode =
force_generic_plan``, EXPLAIN EXECUTE with NULLs, in a transaction that is rolled back): the
queue-table indexes its plan reads are the indexes it needs. A statement that cannot be
planned keeps the reason, so a fix can say that nobody knows.

Nothing is sent that would fail for want of a privilege (the role's access to the queue table
is read beforehand, by OID: :func:`missing_privileges`), and a prepared statement is
deallocated whatever happened, so the next one can be prepared under the same name.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from psycopg import sql

from qadvisor.collect.access import TableAccess
from qadvisor.collect.queries import Conn, first_line
from qadvisor.collect.recorded import LEADING_COMMENTS, Recorded
from qadvisor.derive.names import SearchPath
from qadvisor.derive.plans.explain_json import PartitionNames, parse_explain
from qadvisor.derive.plans.reading import indexes_used
from qadvisor.model import Queue, Stakeholder
from qadvisor.sql import dequeue
from qadvisor.sql.printing import ident
from qadvisor.sql.recorded_statements import typed_constant_placeholder

MAX_STAKEHOLDERS = 100
PREPARED = "qadvisor_stakeholder"


@dataclass(frozen=True)
class Read:
    """What was read, and why it is incomplete (None when it is not)."""

    stakeholders: tuple[Stakeholder, ...]
    unavailable: str | None = None


def read_stakeholders(
    conn: Conn,
    recorded: Recorded,
    queues: Sequence[Queue],
    claims: Iterable[int],
    search_path_of: Callable[[str | None], SearchPath],
    refuse: Callable[[Queue, str], str | None],
    partitions: PartitionNames | None = None,
) -> Read:
    """The recorded statements (other than the ``claims``' queryids) that name a queue table,
    each planned under the search_path of the role that ran it; ``refuse(queue, text)`` says
    why a statement on a queue must not be planned now (another session's lock, a privilege
    the role lacks). ``partitions``: the partitions of partitioned queue tables, whose
    indexes a plan reads as the queue table's."""
    if not queues:
        return Read(())
    names = sorted({q.table for q in queues})
    recorded_rows = recorded.naming(names, claims, MAX_STAKEHOLDERS)
    out: list[Stakeholder] = []
    for row in recorded_rows:
        out.extend(_planned(conn, row, queues, search_path_of, refuse, partitions))
    note = None
    if len(recorded_rows) >= MAX_STAKEHOLDERS:
        note = f"only the {MAX_STAKEHOLDERS} most called statements on the queue tables were read"
    return Read(tuple(out), note)


_READS = re.compile(r"(?i)(select|update|delete|with|table|values)\b")
_WRITES = re.compile(r"(?i)(update|delete)\b")


def missing_privileges(text: str, access: TableAccess) -> list[str]:
    """What the role lacks to plan ``text`` on the queue table ``access`` describes (EXPLAIN
    checks a statement's privileges as executing it would): USAGE on the schema, SELECT on
    the columns it reads, UPDATE when it writes or locks rows. Empty: nothing."""
    where = f"{ident(access.schema)}.{ident(access.table)}"
    missing = []
    if not access.schema_usage:
        missing.append(f"USAGE on schema {ident(access.schema)}")
    read = dequeue.queue_columns_read(text, access.table)
    wanted = access.columns if read is None else read & access.columns
    unreadable = sorted(wanted - access.readable)
    if unreadable or not access.any_select:
        what = ", ".join(ident(c) for c in unreadable) or "the columns it reads"
        missing.append(f"SELECT on {what} of {where}")
    writes = _WRITES.match(LEADING_COMMENTS.sub("", text))
    if not access.any_update and (writes or _locks_rows(text)):
        missing.append(f"UPDATE on {where}")
    return missing


def _locks_rows(text: str) -> bool:
    try:
        return dequeue.analyse(text) is not None
    except dequeue.StatementError:
        return True  # unknown: it may


def _planned(
    conn: Conn,
    row: dict[str, Any],
    queues: Sequence[Queue],
    search_path_of: Callable[[str | None], SearchPath],
    refuse: Callable[[Queue, str], str | None],
    partitions: PartitionNames | None,
) -> list[Stakeholder]:
    text = str(row["query"])
    role = row["roles"][0] if row["roles"] and len(row["roles"]) == 1 else None
    path = search_path_of(role)
    named = _queues_named(text, queues, path.schemas())
    if not named:
        return []
    base = Stakeholder(
        source="pg_stat_statements",
        text=text,
        queue="",
        queryid=int(row["queryid"]),
        calls=int(row["calls"]),
        rows=int(row["rows"]) if row.get("rows") is not None else None,
        mean_exec_ms=_round(row["mean_exec_ms"]),
        shared_blks_per_call=_round(row["shared_blks_per_call"]),
    )
    if not _READS.match(LEADING_COMMENTS.sub("", text)):
        return []  # an INSERT, a utility statement: it reads no index a fix could drop
    # A typed literal whose string became $n (interval $2) is the cast it means, as for the
    # claims: recovery's INTERVAL '90 SECOND' plans as $2::interval.
    planned = dequeue.typed_placeholders(text)
    try:
        dequeue.parse(planned)  # one statement, and one qadvisor may plan
    except dequeue.StatementError as exc:
        return [replace(base, queue=q.qualified, plan_error=f"not planned: {exc}") for q in named]
    typed = typed_constant_placeholder(planned)
    if typed is not None:
        why = (
            f"not planned: pg_stat_statements recorded a typed constant as a parameter "
            f"({typed}), which PREPARE cannot take"
        )
        return [replace(base, queue=q.qualified, plan_error=why) for q in named]
    out = []
    for queue in named:
        refused = refuse(queue, text)
        if refused:
            out.append(replace(base, queue=queue.qualified, plan_error=refused))
            continue
        used, error = _indexes_read(conn, planned, queue, path, partitions)
        out.append(replace(base, queue=queue.qualified, indexes_used=used, plan_error=error))
    return out


def _queues_named(text: str, queues: Sequence[Queue], path: Sequence[str]) -> list[Queue]:
    """The queue tables the statement's names mean: a qualified name as written; an
    unqualified one as the role's search_path finds it among the queues, else the one queue
    of that name when there is exactly one."""
    out: list[Queue] = []
    for schema, name in sorted(dequeue.tables_named(text), key=lambda n: (n[0] or "", n[1])):
        same = [q for q in queues if q.table == name]
        if schema is not None:
            hit = next((q for q in same if q.schema == schema), None)
        else:
            hit = next((q for s in path for q in same if q.schema == s), None)
            if hit is None and len(same) == 1:
                hit = same[0]
        if hit is not None and hit not in out:
            out.append(hit)
    return out


def _indexes_read(
    conn: Conn, text: str, queue: Queue, path: SearchPath, partitions: PartitionNames | None
) -> tuple[tuple[str, ...], str | None]:
    prepared = False
    try:
        with conn.transaction(force_rollback=True), conn.cursor() as cur:
            cur.execute("SELECT set_config('search_path', %s, true)", (path.setting,))
            cur.execute(
                sql.SQL("PREPARE {} AS ").format(sql.Identifier(PREPARED)).as_bytes(conn)
                + text.encode(),
                prepare=False,
            )
            prepared = True
            cur.execute(
                "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = %s",
                (PREPARED,),
            )
            found = cur.fetchone()
            count = int(found[0]) if found else 0
            cur.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            call = sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE {}").format(sql.Identifier(PREPARED))
            if count:
                call += sql.SQL("({})").format(sql.SQL(", ").join([sql.SQL("NULL")] * count))
            cur.execute(call)
            data = cur.fetchone()
            cur.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(PREPARED)))
            prepared = False
    except psycopg.errors.QueryCanceled:
        return (), "not planned: statement_timeout expired"
    except psycopg.errors.LockNotAvailable:
        return (), "not planned: lock_timeout expired (another session holds a lock)"
    except psycopg.Error as exc:
        if conn.closed:
            raise
        return (), f"not planned: {first_line(exc)}"
    finally:
        if prepared and not conn.closed:
            # A prepared statement outlives the rollback; gone with the connection otherwise.
            with contextlib.suppress(psycopg.Error):
                conn.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(PREPARED)))
    if data is None:
        return (), "not planned: EXPLAIN returned nothing"
    try:
        plan = parse_explain(data[0], partitions)[0]
    except ValueError as exc:
        return (), f"not planned: {exc}"
    return tuple(indexes_used(plan, queue.schema, queue.table)), None


def _round(value: Any) -> float | None:
    return None if value is None else round(float(value), 3)
