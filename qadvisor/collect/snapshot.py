"""Connection -> Snapshot: every fact the checks need, in a fixed number of queries.

The number of queries does not grow with the number of tables: discovery reads the whole
catalog in three queries, other sessions' locks and the role's privileges take one each, and
the facts of all queue tables come in one query per kind.

Nothing here waits on the application. Other sessions' locks are read first (locks.py) and
the role's privileges on the queue tables right after discovery (access.py); a query that
would wait for a lock or fail for a missing privilege is not sent, and the fact is recorded in
``Snapshot.hidden`` with the blocking pid or the exact GRANT. Every fact query runs in a
transaction of its own (the session is in autocommit): one that fails (a timeout, a lock taken
since) is recorded in ``Snapshot.unavailable`` and the rest of the snapshot is still collected.
Only a failure to read the server itself (or a lost connection) ends collection.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import psycopg

from qadvisor import discover
from qadvisor.collect import queries as q
from qadvisor.collect.access import Guard, TableAccess, read_access, unclaimed
from qadvisor.collect.errors import CollectError, TableNotFound
from qadvisor.collect.locks import ACCESS_SHARE, Locks, describe_all, read_locks
from qadvisor.collect.names import resolve_tables
from qadvisor.collect.queries import first_line, pg_stat_statements
from qadvisor.collect.statements import collect_statements, strip_prepare
from qadvisor.collect.tenants import collect_tenants
from qadvisor.model import (
    Column,
    ColumnStats,
    HorizonHolder,
    Index,
    Queue,
    RoleSetting,
    Sample,
    ServerInfo,
    Snapshot,
    Statement,
    Table,
    TableStats,
)

Conn = psycopg.Connection[Any]
T = TypeVar("T")

__all__ = ["CollectError", "TableNotFound", "collect"]


@dataclass
class Found:
    """What discovery produced, kept for the report and for the fact queries."""

    decisions: list[discover.Decision]
    statements: list[discover.LockingStatement]
    columns: list[discover.CandidateColumn]


def collect(
    conn: Conn,
    tables: Sequence[str] = (),
    sample_seconds: float | None = None,
    progress: Callable[[float, float], None] | None = None,
    queries: Sequence[tuple[str, str]] = (),
    analyze: bool = False,
) -> Snapshot:
    """Read one snapshot; with ``sample_seconds`` read the counters again after that long.

    ``queries`` are (source, SQL text) pairs given by the user: they are parsed and planned
    (EXPLAIN only; with ``analyze`` EXPLAIN ANALYZE inside a rolled-back transaction), never
    executed.
    """
    unavailable: dict[str, str] = {}
    server_row = q.rows(conn, "server")[0]
    server = ServerInfo(
        version=server_row["version"],
        version_num=server_row["version_num"],
        database=server_row["database"],
        user=server_row["user"],
        is_superuser=bool(server_row["is_superuser"]),
    )
    reads_all_stats = bool(server_row["reads_all_stats"])
    settings = {
        r["name"]: r["setting"]
        for r in _rows(conn, unavailable, "settings", "server settings", "settings")
    }
    role_settings = tuple(_role_settings(conn, unavailable))
    locks = _read(
        conn, unavailable, "locks", "other sessions' locks", lambda: read_locks(conn), Locks()
    )
    pgss = pg_stat_statements(conn, unavailable)
    found = _discover(conn, tables, pgss, locks.blocked(ACCESS_SHARE))
    relids = [d.relid for d in found.decisions]
    queues = tuple(Queue(d.schema, d.table, d.live, d.reason) for d in _sorted(found))
    no_access: dict[int, TableAccess] | None = None
    access = _read(
        conn,
        unavailable,
        "privileges",
        "the role's privileges on the queue tables",
        lambda: read_access(conn, relids),
        no_access,
    )
    guard = Guard(
        server.user,
        locks,
        access,
        {f"{d.schema}.{d.table}": d.relid for d in found.decisions},
    )
    for queue in queues:
        guard.index_definitions(queue)
    table_facts = _tables(conn, relids, locks, server.user, unavailable) if relids else []
    # Rates are measured from the moment the first counters were read.
    counters_read = time.monotonic()
    for queue in queues:
        table = next((t for t in table_facts if t.qualified == queue.qualified), None)
        guard.live_set(queue, table, found.columns)
    guard.discovery(found.columns, found.statements, queues)
    horizon = _horizon(conn, unavailable)
    guard.horizon(reads_all_stats)
    statements = collect_statements(
        conn, queues, table_facts, pgss, queries, analyze, guard.plan_refusal
    )
    _claims(queues, statements, unavailable, guard, reads_all_stats)
    tenants = collect_tenants(conn, queues, table_facts, statements, unavailable, guard)
    sample = None
    if sample_seconds and relids:
        no_sample: Sample | None = None
        sample = _read(
            conn,
            unavailable,
            "sample",
            "the second read of the counters",
            lambda: _sample(conn, relids, counters_read, sample_seconds, progress),
            no_sample,
        )
    return Snapshot(
        server=server,
        settings=settings,
        role_settings=role_settings,
        queues=queues,
        tables=tuple(table_facts),
        sample=sample,
        statements=statements,
        tenants=tenants,
        horizon=horizon,
        unavailable=unavailable,
        hidden=tuple(guard.hidden),
    )


def _sorted(found: Found) -> list[discover.Decision]:
    return sorted(found.decisions, key=lambda d: (d.schema, d.table))


def _read(
    conn: Conn,
    unavailable: dict[str, str],
    fact: str,
    what: str,
    read: Callable[[], T],
    default: T,
) -> T:
    """One fact, on its own: a failure is recorded under ``fact`` and the rest goes on; a
    lost connection ends collection."""
    try:
        return read()
    except psycopg.Error as exc:
        if conn.broken or conn.closed:
            raise
        unavailable[fact] = f"{what} could not be read: {first_line(exc)}"
        return default


def _rows(
    conn: Conn,
    unavailable: dict[str, str],
    fact: str,
    what: str,
    name: str,
    params: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The rows of one fact query (an SQL file), read on its own as :func:`_read` does."""
    empty: list[dict[str, Any]] = []
    return _read(conn, unavailable, fact, what, lambda: q.rows(conn, name, params), empty)


def _claims(
    queues: Sequence[Queue],
    statements: Sequence[Statement],
    unavailable: dict[str, str],
    guard: Guard,
    reads_all_stats: bool,
) -> None:
    """Record the queues whose claim is unknown: the statement checks cannot judge them."""
    missing = unavailable.get("pg_stat_statements")
    if not statements:
        if missing:
            unavailable["statements"] = missing
        elif queues and not reads_all_stats:
            guard.statements(None)
        elif queues:
            unavailable["statements"] = (
                "no dequeue statement of the queue tables in pg_stat_statements: give the "
                "application's with --query or --query-file"
            )
        return
    without = unclaimed(queues, statements)
    if missing:
        for queue in without:
            unavailable[f"statements:{queue.qualified}"] = (
                f"no dequeue statement of this queue was given ({missing})"
            )
    elif not reads_all_stats:
        guard.statements(without)
    else:
        for queue in without:
            unavailable[f"statements:{queue.qualified}"] = (
                "no dequeue statement of this queue is known (in pg_stat_statements, --query "
                "or --query-file)"
            )


def _role_settings(conn: Conn, unavailable: dict[str, str]) -> list[RoleSetting]:
    try:
        rows = q.rows(conn, "role_settings")
    except psycopg.errors.InsufficientPrivilege:
        unavailable["role_settings"] = "pg_db_role_setting is not readable by this role"
        return []
    out = []
    for r in rows:
        name, _, value = str(r["cfg"]).partition("=")
        out.append(RoleSetting(r["database"], r["role"], name, value))
    return out


def _horizon(conn: Conn, unavailable: dict[str, str]) -> tuple[HorizonHolder, ...]:
    try:
        rows = q.rows(conn, "horizon")
    except psycopg.Error as exc:
        unavailable["horizon"] = f"the xmin horizon could not be read: {first_line(exc)}"
        return ()
    return tuple(HorizonHolder(**r) for r in rows)


def _discover(
    conn: Conn, names: Sequence[str], pgss: list[dict[str, Any]], blocked: list[int]
) -> Found:
    statements = _locking_statements(pgss)
    candidates = q.rows(conn, "candidate_columns")
    columns = [
        discover.CandidateColumn(
            schema=r["schema"],
            table=r["table"],
            relid=r["relid"],
            column=r["column"],
            type=r["type"],
            not_null=r["not_null"],
            enum_labels=tuple(r["enum_labels"]) if r["enum_labels"] is not None else None,
            indexed=r["indexed"],
            common_values=tuple(r["common_values"]) if r["common_values"] is not None else None,
            readable=r["readable"],
        )
        for r in candidates
    ]
    all_columns = {r["relid"]: frozenset(r["table_columns"]) for r in candidates}
    partials = [
        discover.PartialIndex(r["schema"], r["table"], r["relid"], r["index"], r["predicate"])
        for r in q.rows(conn, "partial_indexes", {"blocked": blocked})
    ]
    explicit = [(t.schema, t.table, t.relid) for t in resolve_tables(conn, names)] if names else []
    decisions = discover.decide(columns, partials, statements, all_columns, explicit)
    return Found(decisions, statements, columns)


def _locking_statements(pgss: list[dict[str, Any]]) -> list[discover.LockingStatement]:
    out = []
    for r in pgss:
        parsed = _statement_table(strip_prepare(str(r["query"])))
        if parsed is not None:
            schema, table, skip = parsed
            out.append(discover.LockingStatement(schema, table, skip, int(r["calls"])))
    return out


def _statement_table(text: str) -> tuple[str | None, str, bool] | None:
    from qadvisor import dequeue

    try:
        stmt = dequeue.analyse(text)
    except dequeue.StatementError:
        return None
    if stmt is None:
        return None
    return stmt.schema, stmt.table, stmt.lock.wait_policy == "skip locked"


def _tables(
    conn: Conn, relids: list[int], locks: Locks, role: str, unavailable: dict[str, str]
) -> list[Table]:
    """Facts of the queue tables, one query per kind, each on its own: without columns or
    the table row there is no Table (``table_facts`` unavailable); without indexes or pg_stats
    the tables come without them and the fact is recorded."""
    blocked = locks.blocked(ACCESS_SHARE)
    params = {"relids": relids, "blocked": blocked}
    columns: dict[int, list[Column]] = {}
    for r in _rows(
        conn, unavailable, "table_facts", "the queue tables' columns", "columns", params
    ):
        columns.setdefault(r["relid"], []).append(
            Column(r["column"], r["type"], r["not_null"], tuple(r["enum_labels"] or ()))
        )
    indexes: dict[int, list[Index]] = {}
    for r in _rows(
        conn, unavailable, "index_definitions", "the queue tables' indexes", "indexes", params
    ):
        indexes.setdefault(r["relid"], []).append(
            Index(
                name=r["name"],
                definition=r["definition"],
                columns=tuple(r["columns"]),
                predicate=r["predicate"],
                is_unique=r["is_unique"],
                is_primary=r["is_primary"],
                is_constraint=r["is_constraint"],
                is_valid=r["is_valid"],
                bytes=r["bytes"],
                reltuples=r["reltuples"],
                idx_scan=r["idx_scan"],
                idx_tup_read=r["idx_tup_read"],
                idx_tup_fetch=r["idx_tup_fetch"],
                include_columns=tuple(r["include_columns"]),
                bytes_source=_estimated(locks, r["index_relid"], role)
                if r["bytes_estimated"]
                else None,
            )
        )
    table_rows = _rows(
        conn, unavailable, "table_facts", "the queue tables' catalog facts", "tables", params
    )
    if "table_facts" in unavailable:
        return []
    names = {
        "schemas": [r["schema"] for r in table_rows],
        "tables": [r["table"] for r in table_rows],
    }
    stats: dict[tuple[str, str], list[ColumnStats]] = {}
    for r in _rows(
        conn, unavailable, "live_set", "pg_stats of the queue tables", "column_stats", names
    ):
        stats.setdefault((r["schema"], r["table"]), []).append(
            ColumnStats(
                column=r["column"],
                null_frac=r["null_frac"],
                n_distinct=r["n_distinct"],
                avg_width=r["avg_width"],
                most_common_vals=_tuple(r["most_common_vals"]),
                most_common_freqs=_tuple(r["most_common_freqs"]),
            )
        )
    out = []
    for r in table_rows:
        relid = r["relid"]
        out.append(
            Table(
                schema=r["schema"],
                name=r["table"],
                reltuples=r["reltuples"],
                relpages=r["relpages"],
                bytes=r["bytes"],
                reloptions=dict(o.split("=", 1) for o in r["reloptions"]),
                stats=_table_stats(r),
                columns=tuple(columns.get(relid, ())),
                indexes=tuple(indexes.get(relid, ())),
                column_stats=tuple(stats.get((r["schema"], r["table"]), ())),
                stats_visible=r["stats_visible"],
                bytes_source=_estimated(locks, relid, role) if r["bytes_estimated"] else None,
            )
        )
    return out


def _estimated(locks: Locks, relid: int, role: str) -> str:
    blocking = locks.on_relation(relid, ACCESS_SHARE)
    return "estimate: pg_class.relpages x block_size, not opened because " + describe_all(
        blocking, role
    )


def _tuple(value: list[Any] | None) -> tuple[Any, ...] | None:
    return tuple(value) if value is not None else None


_COUNTERS = [f for f in TableStats.__dataclass_fields__]


def _table_stats(row: dict[str, Any]) -> TableStats:
    values: dict[str, Any] = {}
    for name in _COUNTERS:
        v = row.get(name)
        if isinstance(v, datetime):
            v = v.isoformat(timespec="seconds")
        if v is not None:
            values[name] = v
    return TableStats(**values)


def _sample(
    conn: Conn,
    relids: list[int],
    start: float,
    seconds: float,
    progress: Callable[[float, float], None] | None,
) -> Sample:
    # Counters are read again from a new transaction; autocommit gives each query its own
    # snapshot of the statistics.
    while (elapsed := time.monotonic() - start) < seconds:
        if progress:
            progress(elapsed, seconds)
        time.sleep(min(0.25, seconds - elapsed))
    if progress:
        progress(seconds, seconds)
    measured = time.monotonic() - start
    tables = {
        f"{r['schema']}.{r['table']}": _table_stats(r)
        # The sizes are not needed: every table counts as blocked, so none is opened.
        for r in q.rows(conn, "tables", {"relids": relids, "blocked": relids})
    }
    return Sample(seconds=round(measured, 3), tables=tables)
