"""Connection -> Snapshot: every fact the checks need, in a fixed number of queries.

The number of queries does not grow with the number of tables: discovery reads the whole
catalog in three queries, and the facts of all queue tables come in one query per kind.
A fact that cannot be read (missing extension, missing grant, a timeout) is recorded in
``Snapshot.unavailable`` and the rest of the snapshot is still collected.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from qadvisor import discover
from qadvisor.collect import queries as q
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
    Table,
    TableStats,
)

Conn = psycopg.Connection[Any]


class CollectError(Exception):
    """A fact every check needs could not be read; the message is safe to print."""


class TableNotFound(CollectError):
    pass


@dataclass
class Found:
    """What discovery produced, kept for the report and for the fact queries."""

    decisions: list[discover.Decision]
    statements: list[discover.LockingStatement]


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
    settings = {r["name"]: r["setting"] for r in q.rows(conn, "settings")}
    role_settings = tuple(_role_settings(conn, unavailable))
    pgss = pg_stat_statements(conn, unavailable)
    found = _discover(conn, tables, pgss)
    relids = [d.relid for d in found.decisions]
    table_facts = _tables(conn, relids) if relids else []
    # Rates are measured from the moment the first counters were read.
    counters_read = time.monotonic()
    queues = tuple(
        Queue(d.schema, d.table, d.live, d.reason)
        for d in sorted(found.decisions, key=lambda d: (d.schema, d.table))
    )
    horizon = _horizon(conn, unavailable)
    statements = collect_statements(conn, queues, table_facts, pgss, queries, analyze)
    tenants = collect_tenants(conn, queues, table_facts, statements, unavailable)
    sample = None
    if sample_seconds and relids:
        sample = _sample(conn, relids, counters_read, sample_seconds, progress)
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
        (hidden,) = q.rows(conn, "horizon_hidden")
    except psycopg.Error as exc:
        unavailable["horizon"] = f"the xmin horizon could not be read: {first_line(exc)}"
        return ()
    if hidden["sessions"]:
        # Hidden, not failed: the query worked, but these rows came back without their facts.
        unavailable["horizon_hidden"] = (
            f"{hidden['sessions']} session(s) of other roles hold the xmin horizon, but "
            "pg_stat_activity hides their transaction start and state from this role: "
            f"GRANT pg_read_all_stats TO {hidden['role']} (part of pg_monitor)"
        )
    return tuple(HorizonHolder(**r) for r in rows)


def _discover(conn: Conn, names: Sequence[str], pgss: list[dict[str, Any]]) -> Found:
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
        for r in q.rows(conn, "partial_indexes")
    ]
    explicit: list[tuple[str, str, int]] = []
    if names:
        for r in q.rows(conn, "resolve_tables", {"names": list(names)}):
            if r["relid"] is None:
                raise TableNotFound(f"table {r['arg']} does not exist (or is not visible)")
            if r["relkind"] not in ("r", "p"):
                raise TableNotFound(f"{r['arg']} is not a table")
            if _system_schema(r["schema"]):
                name = f"{r['schema']}.{r['table']}"
                what = r["arg"] if r["arg"] == name else f"{r['arg']} ({name})"
                raise TableNotFound(f"{what} is a system catalog of PostgreSQL, not a queue table")
            explicit.append((r["schema"], r["table"], r["relid"]))
    decisions = discover.decide(columns, partials, statements, all_columns, explicit)
    return Found(decisions, statements)


def _system_schema(schema: str) -> bool:
    """PostgreSQL's own tables: the catalogs, information_schema and TOAST tables."""
    return schema in ("pg_catalog", "information_schema") or schema.startswith("pg_toast")


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


def _tables(conn: Conn, relids: list[int]) -> list[Table]:
    params = {"relids": relids}
    columns: dict[int, list[Column]] = {}
    for r in q.rows(conn, "columns", params):
        columns.setdefault(r["relid"], []).append(
            Column(r["column"], r["type"], r["not_null"], tuple(r["enum_labels"] or ()))
        )
    indexes: dict[int, list[Index]] = {}
    for r in q.rows(conn, "indexes", params):
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
            )
        )
    table_rows = q.rows(conn, "tables", params)
    names = {
        "schemas": [r["schema"] for r in table_rows],
        "tables": [r["table"] for r in table_rows],
    }
    stats: dict[tuple[str, str], list[ColumnStats]] = {}
    for r in q.rows(conn, "column_stats", names):
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
            )
        )
    return out


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
        for r in q.rows(conn, "tables", {"relids": relids})
    }
    return Sample(seconds=round(measured, 3), tables=tables)
