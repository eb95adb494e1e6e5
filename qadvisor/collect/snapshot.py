"""Connection -> Snapshot: every fact the checks need, in a fixed number of queries.

The number of queries does not grow with the number of tables: discovery reads the whole
catalog in three queries, and the facts of all queue tables come in one query per kind.
A fact that cannot be read (missing extension, missing grant, a timeout) is recorded in
``Snapshot.unavailable`` and the rest of the snapshot is still collected.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import psycopg

from qadvisor import discover, names
from qadvisor.collect import queries as q
from qadvisor.collect import statements
from qadvisor.collect.functions import MAX_FUNCTIONS, scan_functions
from qadvisor.collect.planner import plan_statements
from qadvisor.collect.queries import first_line, function_calls, pg_stat_statements
from qadvisor.collect.tenants import collect_tenants
from qadvisor.model import (
    Column,
    ColumnStats,
    HorizonHolder,
    Index,
    LeftOut,
    Queue,
    Rejected,
    RoleSetting,
    Sample,
    ServerInfo,
    Snapshot,
    Statement,
    Table,
    TableStats,
)
from qadvisor.plans import statement_label

Conn = psycopg.Connection[Any]


class CollectError(Exception):
    """A fact every check needs could not be read; the message is safe to print."""


class TableNotFound(CollectError):
    pass


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

    scan = scan_functions(conn, pgss)
    if scan.error:
        unavailable["functions"] = scan.error
    elif scan.truncated:
        unavailable["functions"] = (
            f"only the first {MAX_FUNCTIONS} candidate functions were read for claims"
        )
    function_names = sorted({c.function.rpartition(".")[2] for c in scan.claims})
    calls = function_calls(conn, function_names, unavailable)
    early_left_out: list[LeftOut] = []
    found = statements.found_statements(pgss, queries, scan.claims, calls, early_left_out)
    catalog = _catalog(conn, statements.relation_names(found))
    server_path = _server_search_path(conn)

    def path_of(role: str | None) -> names.SearchPath:
        return names.role_search_path(role, server.database, role_settings, server_path)

    session_path = names.SearchPath(
        server.user, str(server_row["search_path"]), "qadvisor's own session"
    )
    gathered = statements.gather(found, catalog, path_of, session_path)
    rejected: list[Rejected] = []
    decisions = _discover(conn, tables, gathered.claims, rejected)
    relids = [d.relid for d in decisions]
    table_facts = _tables(conn, relids) if relids else []
    # Rates are measured from the moment the first counters were read.
    counters_read = time.monotonic()
    queues = tuple(
        Queue(d.schema, d.table, d.live, d.reason)
        for d in sorted(decisions, key=lambda d: (d.schema, d.table))
    )
    horizon = _horizon(conn, unavailable)
    judged, left_out = _on_queues(gathered, queues, rejected, explicit=bool(tables))
    left_out = early_left_out + left_out
    planned = plan_statements(conn, judged, queues, table_facts, analyze)
    tenants = collect_tenants(conn, queues, table_facts, planned, unavailable)
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
        statements=planned,
        tenants=tenants,
        horizon=horizon,
        unavailable=unavailable,
        rejected=tuple(rejected),
        left_out=tuple(left_out),
    )


def _on_queues(
    gathered: statements.Gathered,
    queues: Sequence[Queue],
    rejected: Sequence[Rejected],
    explicit: bool,
) -> tuple[list[Statement], list[LeftOut]]:
    """The claims on the report's queues, to judge; a claim on a table that was not taken
    for a queue (a clean-up of stale rows; a table --table did not name) is left out with
    the reason, like a foreign-key check."""
    names = {q.qualified for q in queues}
    why = {r.qualified: r.reason for r in rejected}
    judged, left_out = [], list(gathered.left_out)
    for stmt in gathered.statements:
        if stmt.queue is None or stmt.queue in names or stmt.source.startswith("--query"):
            judged.append(stmt)  # a --query was given on purpose: its skip says why
            continue
        reason = why.get(stmt.queue) or (
            "not named with --table" if explicit else "not taken for a queue"
        )
        left_out.append(
            LeftOut(
                statement_label(stmt), stmt.text, f"{stmt.queue} is no queue: {reason}", stmt.queue
            )
        )
    return judged, left_out


def _catalog(conn: Conn, table_names: list[str]) -> names.Catalog:
    if not table_names:
        return names.Catalog(())
    relations = []
    for r in q.rows(conn, "relations", {"names": table_names}):
        parent = (r["parent_schema"], r["parent_name"]) if r["parent_name"] else None
        keys = tuple(tuple(k.split(",")) for k in r["unique_keys"] or () if k)
        leaves = tuple((int(x[0]), x[1], x[2]) for x in r["leaves"] or ())
        relations.append(
            names.Relation(r["relid"], r["schema"], r["name"], r["kind"], parent, keys, leaves)
        )
    return names.Catalog(relations)


def _server_search_path(conn: Conn) -> str | None:
    """The search_path a role without its own setting starts with (None: PostgreSQL's)."""
    row = q.rows(conn, "search_path")[0]
    if row["source"] in ("default", "configuration file", "command line", "environment variable"):
        return str(row["setting"])
    try:
        configured = q.rows(conn, "search_path_file")
    except psycopg.Error:
        configured = []
    if configured:
        return str(configured[0]["setting"])
    return str(row["boot_val"]) if row["boot_val"] else None


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


def _candidate(r: dict[str, Any]) -> discover.CandidateColumn:
    return discover.CandidateColumn(
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


def _discover(
    conn: Conn,
    table_names: Sequence[str],
    claims: Sequence[discover.Claim],
    rejected: list[Rejected],
) -> list[discover.Decision]:
    candidates = q.rows(conn, "candidate_columns")
    claimed = sorted({c.relid for c in claims})
    if claimed:
        candidates += q.rows(conn, "claim_columns", {"relids": claimed})
    columns = [_candidate(r) for r in candidates]
    all_columns = {r["relid"]: frozenset(r["table_columns"]) for r in candidates}
    partials = [
        discover.PartialIndex(r["schema"], r["table"], r["relid"], r["index"], r["predicate"])
        for r in q.rows(conn, "partial_indexes")
    ]
    explicit: list[tuple[str, str, int]] = []
    if table_names:
        for r in q.rows(conn, "resolve_tables", {"names": list(table_names)}):
            if r["relid"] is None:
                raise TableNotFound(f"table {r['arg']} does not exist (or is not visible)")
            if r["relkind"] not in ("r", "p"):
                raise TableNotFound(f"{r['arg']} is not a table")
            if _system_schema(r["schema"]):
                name = f"{r['schema']}.{r['table']}"
                what = r["arg"] if r["arg"] == name else f"{r['arg']} ({name})"
                raise TableNotFound(f"{what} is a system catalog of PostgreSQL, not a queue table")
            explicit.append((r["schema"], r["table"], r["relid"]))
    return discover.decide(columns, partials, claims, all_columns, explicit, rejected)


def _system_schema(schema: str) -> bool:
    """PostgreSQL's own tables: the catalogs, information_schema and TOAST tables."""
    return schema in ("pg_catalog", "information_schema") or schema.startswith("pg_toast")


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
                descending=tuple(r["descending"]),
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
