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

Statements are found before discovery (collect/statements.py): pg_stat_statements, the
user's SQL and the claims inside functions, their names resolved under the application's
search_path; the claims among them are discovery's strongest evidence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from qadvisor.collect import queries as q
from qadvisor.collect import statements
from qadvisor.collect.access import Assumed, Guard, TableAccess, read_access, unclaimed
from qadvisor.collect.errors import CollectError, TableNotFound
from qadvisor.collect.functions import scan_functions
from qadvisor.collect.locks import ACCESS_SHARE, ROW_EXCLUSIVE, Locks, describe_all, read_locks
from qadvisor.collect.planner import plan_statements
from qadvisor.collect.queries import (
    Read,
    first_line,
    merged,
    read_fact,
    read_rows,
)
from qadvisor.collect.recorded import Recorded, read_recorded
from qadvisor.collect.stakeholders import missing_privileges, read_stakeholders
from qadvisor.collect.table_names import resolve_tables
from qadvisor.collect.tenants import collect_tenants
from qadvisor.derive import claims, discover, names
from qadvisor.derive.hot_updates import recorded_updates
from qadvisor.derive.partitions import sum_partitions, sum_stats
from qadvisor.derive.plans.explain_json import PartitionNames, partition_names
from qadvisor.derive.statement_queues import statement_label
from qadvisor.model import (
    Column,
    ColumnStats,
    HiddenFact,
    HorizonHolder,
    IdSequence,
    Index,
    LeftOut,
    Queue,
    Rejected,
    RoleSetting,
    Sample,
    ServerInfo,
    Snapshot,
    Stakeholder,
    Statement,
    Table,
    TableStats,
    unavailable_key,
)

Conn = psycopg.Connection[Any]

__all__ = ["CollectError", "TableNotFound", "collect"]


def collect(
    conn: Conn,
    tables: Sequence[str] = (),
    sample_seconds: float | None = None,
    progress: Callable[[float, float], None] | None = None,
    queries: Sequence[tuple[str, str]] = (),
    analyze: bool = False,
    assumed: Assumed | None = None,
) -> Snapshot:
    """Read one snapshot; with ``sample_seconds`` read the counters again after that long;
    with ``assumed``, every read decided as that role would have it decided (qadvisor role).

    ``queries`` are (source, SQL text) pairs given by the user: they are parsed and planned
    (EXPLAIN only; with ``analyze`` EXPLAIN ANALYZE inside a rolled-back transaction), never
    executed.

    Each step returns what it read and what it could not (a :class:`Read`); the snapshot's
    ``unavailable`` and ``hidden`` are the steps', in the order the steps ran.
    """
    server_row = q.rows(conn, "server")[0]
    cluster = read_fact(conn, "cluster", "the cluster's system identifier",
                        lambda: q.rows(conn, "cluster")[0]["system_identifier"], None)  # fmt: skip
    server = ServerInfo(
        version=server_row["version"],
        version_num=server_row["version_num"],
        database=server_row["database"],
        user=server_row["user"],
        is_superuser=bool(server_row["is_superuser"]),
        is_standby=bool(server_row["in_recovery"]),
        collected_at=_iso(server_row["collected_at"], "microseconds"),
        stats_reset=_iso(server_row["stats_reset"]),
        system_identifier=cluster.value,
        database_oid=server_row["database_oid"],
        started_at=_iso(server_row["started_at"], "microseconds"),
    )
    reads_all_stats = bool(server_row["reads_all_stats"])
    settings = read_rows(conn, "settings", "server settings", "settings")
    role_settings = _role_settings(conn)
    locks = read_fact(conn, "locks", "other sessions' locks", lambda: read_locks(conn), Locks())
    session_path = names.SearchPath(
        server.user, str(server_row["search_path"]), "qadvisor's own session"
    )
    found = _statements(conn, queries, server.database, role_settings.value, session_path)
    gathered = found.value.gathered
    blocked = locks.value.blocked(ACCESS_SHARE)
    discovered = _discover(conn, tables, gathered.claims, blocked, server.user)
    relids = [d.relid for d in discovered.decisions]
    decisions = sorted(discovered.decisions, key=lambda d: (d.schema, d.table))
    queues = tuple(Queue(d.schema, d.table, d.live, d.reason) for d in decisions)
    no_access: dict[int, TableAccess] | None = None
    access = read_fact(
        conn,
        "privileges",
        "the role's privileges on the queue tables",
        lambda: read_access(conn, relids),
        no_access,
    )
    queue_relids = {f"{d.schema}.{d.table}": d.relid for d in decisions}
    guard = Guard(server.user, locks.value, access.value, queue_relids, assumed)
    indexes_hidden = _hidden(guard.index_definitions(queue) for queue in queues)
    table_facts = _tables(conn, relids, locks.value, server.user) if relids else Read([])
    sequences_hidden = _hidden(
        guard.id_sequences(queue, _table_of(queue, table_facts.value)) for queue in queues
    )
    # Rates are measured from the moment the first counters were read.
    counters_read = time.monotonic()
    live_hidden = _hidden(
        guard.live_set(queue, _table_of(queue, table_facts.value), discovered.columns)
        for queue in queues
    )
    discovery_hidden = _hidden(guard.discovery(discovered.columns, gathered.claims, queues))
    horizon = _horizon(conn)
    horizon_hidden = _hidden([guard.horizon(reads_all_stats)])
    judged, left_out = _on_queues(gathered, queues, discovered.rejected, explicit=bool(tables))
    maintenance, not_on_queues = _maintenance_on_queues(gathered, queues)
    planned = plan_statements(conn, judged, queues, table_facts.value, analyze, guard.plan_refusal)
    unjudged = _claims(queues, planned.value, found.value.pgss_missing, guard, reads_all_stats)
    tenants = collect_tenants(conn, queues, table_facts.value, planned.value, guard)
    stakeholders = _stakeholders(
        conn,
        queues,
        planned.value,
        found.value.path_of,
        guard,
        found.value.pgss_missing,
        found.value.recorded,
        found.value.in_bodies,
        partition_names(table_facts.value),
    )
    # What the recorded updates set may date a table's finished rows (archive_dates).
    recorded = Snapshot(
        server, {}, (), queues, tuple(table_facts.value), statements=planned.value,
        maintenance=maintenance, stakeholders=stakeholders.value,
    )  # fmt: skip
    archive_hidden = _hidden(
        guard.archive_age(queue, table, recorded_updates(recorded, table)[0])
        for queue in queues
        for table in [_table_of(queue, table_facts.value)]
        if table is not None
    )
    sample: Read[Sample | None] = Read(None)
    if sample_seconds and relids:
        sample = read_fact(
            conn,
            "sample",
            "the second read of the counters",
            lambda: _sample(conn, relids, counters_read, sample_seconds, progress),
            None,
        )
    missing = merged(
        None, cluster, settings, role_settings, locks, found, access, indexes_hidden, table_facts,
        sequences_hidden, archive_hidden,
        live_hidden, discovery_hidden, horizon, horizon_hidden, planned, unjudged, tenants,
        stakeholders, sample, _on_a_standby(server, queries),
    )  # fmt: skip
    return Snapshot(
        server=server,
        settings={r["name"]: r["setting"] for r in settings.value},
        role_settings=role_settings.value,
        queues=queues,
        tables=tuple(table_facts.value),
        sample=sample.value,
        statements=planned.value,
        tenants=tenants.value,
        horizon=horizon.value,
        unavailable=dict(missing.unavailable),
        rejected=discovered.rejected,
        left_out=(*found.value.left_out, *left_out, *not_on_queues),
        maintenance=maintenance,
        stakeholders=stakeholders.value,
        hidden=_unique(missing.hidden),
        pgss_evicted=found.value.recorded.evicted,
        pgss_since=found.value.recorded.since,
    )


def _stakeholders(
    conn: Conn,
    queues: Sequence[Queue],
    planned: Sequence[Statement],
    path_of: Callable[[str | None], names.SearchPath],
    guard: Guard,
    pgss_missing: str | None,
    recorded: Recorded,
    in_bodies: frozenset[int] = frozenset(),
    partitions: PartitionNames | None = None,
) -> Read[tuple[Stakeholder, ...]]:
    """The other recorded statements on the queue tables and the indexes they read: not the
    claims, nor the functions' row-locking statements recorded inside them (``in_bodies``)."""
    if pgss_missing is not None:
        return Read(())

    def refuse(queue: Queue, text: str) -> str | None:
        relid = guard.relids.get(queue.qualified)
        blocking = guard.locks.on_table(relid, ROW_EXCLUSIVE) if relid is not None else ()
        if blocking:
            return f"not planned: {queue.qualified} is locked by another session"
        access = guard.access.get(relid) if guard.access is not None and relid else None
        missing = missing_privileges(text, access) if access is not None else []
        if missing:
            return f"not planned: EXPLAIN needs {', '.join(missing)}, which {guard.role} lacks"
        return None

    claims = sorted({*(s.queryid for s in planned if s.queryid is not None), *in_bodies})
    try:
        read = read_stakeholders(conn, recorded, queues, claims, path_of, refuse, partitions)
    except psycopg.Error as exc:
        if conn.broken or conn.closed:
            raise
        why = f"other statements on the queue tables: {first_line(exc)}"
        return Read((), {"stakeholders": why})
    return Read(read.stakeholders, {"stakeholders": read.unavailable} if read.unavailable else {})


STANDBY = "this server is a standby (in recovery)"


def _on_a_standby(server: ServerInfo, queries: Sequence[tuple[str, str]]) -> Read[None]:
    """What a standby cannot tell: the facts that are the primary's activity, not its catalog.
    The catalog (indexes, sizes, reltuples, pg_stats) is replayed from the primary; the
    counters, pg_stat_statements and the sessions are the standby's own."""
    if not server.is_standby:
        return Read(None)
    unavailable = {
        "counters": f"{STANDBY}: its activity counters (dead tuples, vacuums, index scans) "
        "count the standby's own work, not the primary's: check the primary",
        "horizon": f"{STANDBY}: the primary's sessions and slots that hold its vacuum "
        "horizon are not visible here: check the primary",
        "stakeholders": f"{STANDBY}: its pg_stat_statements holds the statements run here, "
        "not the primary's",
    }
    if not queries:
        unavailable["statements"] = (
            f"{STANDBY}: its pg_stat_statements records only the statements run here, and no "
            "claim runs on a standby (it cannot lock rows): give the claims with --query or "
            "--query-file, or check the primary"
        )
    return Read(None, unavailable)


def _hidden(facts: Iterable[HiddenFact | None]) -> Read[None]:
    """What the guard kept from being read, as a read of its own."""
    return Read(None, hidden=tuple(f for f in facts if f is not None))


def _unique(facts: Iterable[HiddenFact]) -> tuple[HiddenFact, ...]:
    """Each hidden fact once (the first of those with the same fact, queue and reason), in
    order: two statements refused on one queue hide one fact."""
    seen: dict[tuple[str, str | None, str], HiddenFact] = {}
    for f in facts:
        seen.setdefault((f.fact, f.queue, f.reason), f)
    return tuple(seen.values())


def _table_of(queue: Queue, tables: Sequence[Table]) -> Table | None:
    return next((t for t in tables if t.qualified == queue.qualified), None)


@dataclass(frozen=True)
class _Found:
    """The statements, their names resolved and the claims among them judged."""

    gathered: statements.Gathered
    left_out: tuple[LeftOut, ...]  # functions' claims that cannot be analysed
    pgss_missing: str | None  # why pg_stat_statements could not be read
    path_of: Callable[[str | None], names.SearchPath]  # a role's search_path
    # queryids of the entries pg_stat_statements recorded inside functions that are their
    # row-locking statements (claims or left out): no other statements on the queue tables.
    in_bodies: frozenset[int]
    recorded: Recorded  # pg_stat_statements' rows of this database


def _statements(
    conn: Conn,
    queries: Sequence[tuple[str, str]],
    database: str,
    role_settings: Sequence[RoleSetting],
    session_path: names.SearchPath,
) -> Read[_Found]:
    """pg_stat_statements, the claims in functions (and the calls of those functions) and
    the user's statements, their names resolved under the search_path of the roles that ran
    them."""
    pgss = read_recorded(conn)
    locking = pgss.value.row_locking()
    scan = scan_functions(conn, locking)
    function_names = sorted({c.function.rpartition(".")[2] for c in scan.claims})
    found, left_out, in_bodies = statements.found_statements(
        locking, queries, scan.claims, pgss.value.calls_of(function_names), pgss.value.writing()
    )
    catalog = read_fact(
        conn,
        "statement_names",
        "the relations the statements name",
        lambda: _catalog(conn, statements.relation_names(found)),
        names.Catalog(()),
    )
    server_path = _server_search_path(conn)

    def path_of(role: str | None) -> names.SearchPath:
        return names.role_search_path(role, database, role_settings, server_path.value)

    gathered = statements.gather(found, catalog.value, path_of, session_path)
    result = _Found(
        gathered,
        tuple(left_out),
        pgss.unavailable.get("pg_stat_statements"),
        path_of,
        in_bodies,
        pgss.value,
    )
    return merged(result, pgss, Read(None, scan.unavailable), catalog, server_path)


def _claims(
    queues: Sequence[Queue],
    statements: Sequence[Statement],
    pgss_missing: str | None,
    guard: Guard,
    reads_all_stats: bool,
) -> Read[None]:
    """The queues whose claim is unknown: the statement checks cannot judge them."""
    if not statements:
        if pgss_missing:
            return Read(None, {"statements": pgss_missing})
        if queues and not reads_all_stats:
            return Read(None, hidden=tuple(guard.statements(None)))
        if queues:
            why = (
                "no dequeue statement of the queue tables in pg_stat_statements: give the "
                "application's with --query or --query-file"
            )
            return Read(None, {"statements": why})
        return Read(None)
    without = unclaimed(queues, statements)
    if pgss_missing:
        why = f"no dequeue statement of this queue was given ({pgss_missing})"
    elif not reads_all_stats:
        return Read(None, hidden=tuple(guard.statements(without)))
    else:
        why = (
            "no dequeue statement of this queue is known (in pg_stat_statements, --query "
            "or --query-file)"
        )
    return Read(None, {unavailable_key("statements", queue.qualified): why for queue in without})


def _server_search_path(conn: Conn) -> Read[str | None]:
    """The search_path a role without its own setting starts with (None: PostgreSQL's)."""
    found = read_rows(conn, "search_path", "the server's search_path", "search_path")
    if not found.value:
        return Read(None, found.unavailable)
    row = found.value[0]
    if row["source"] in ("default", "configuration file", "command line", "environment variable"):
        return Read(str(row["setting"]))
    try:
        configured = q.rows(conn, "search_path_file")
    except psycopg.Error:
        configured = []
    if configured:
        return Read(str(configured[0]["setting"]))
    return Read(str(row["boot_val"]) if row["boot_val"] else None)


def _role_settings(conn: Conn) -> Read[tuple[RoleSetting, ...]]:
    try:
        rows = q.rows(conn, "role_settings")
    except psycopg.errors.InsufficientPrivilege:
        return Read((), {"role_settings": "pg_db_role_setting is not readable by this role"})
    out = []
    for r in rows:
        name, _, value = str(r["cfg"]).partition("=")
        out.append(RoleSetting(r["database"], r["role"], name, value))
    return Read(tuple(out))


def _horizon(conn: Conn) -> Read[tuple[HorizonHolder, ...]]:
    try:
        rows = q.rows(conn, "horizon")
        (hidden,) = q.rows(conn, "horizon_hidden")
    except psycopg.Error as exc:
        return Read((), {"horizon": f"the xmin horizon could not be read: {first_line(exc)}"})
    holders = tuple(HorizonHolder(**r) for r in rows)
    if not hidden["sessions"]:
        return Read(holders)
    # Hidden, not failed: the query worked, but these rows came back without their facts.
    why = (
        f"{hidden['sessions']} session(s) of other roles hold the xmin horizon, but "
        "pg_stat_activity hides their transaction start and state from this role: "
        f"GRANT pg_read_all_stats TO {hidden['role']} (part of pg_monitor)"
    )
    return Read(holders, {"horizon_hidden": why})


@dataclass(frozen=True)
class _Discovered:
    decisions: tuple[discover.Decision, ...]
    rejected: tuple[Rejected, ...]  # tables not taken for queues, with why
    columns: tuple[discover.CandidateColumn, ...]  # the candidate columns read


def _discover(
    conn: Conn,
    table_names: Sequence[str],
    claims: Sequence[discover.Claim],
    blocked: list[int],
    role: str,
) -> _Discovered:
    claimed = sorted({c.relid for c in claims})
    explicit = []
    for t in resolve_tables(conn, table_names) if table_names else []:
        if _system_schema(t.schema):
            name = f"{t.schema}.{t.table}"
            what = t.arg if t.arg == name else f"{t.arg} ({name})"
            raise TableNotFound(f"{what} is a system catalog of PostgreSQL, not a queue table")
        explicit.append((t.schema, t.table, t.relid))
    named = [relid for _, _, relid in explicit]
    candidates = q.rows(
        conn, "candidate_columns", discover.candidate_filter(claimed, named, blocked)
    )
    columns = [candidate_column(r) for r in candidates]
    all_columns = {r["relid"]: frozenset(r["table_columns"]) for r in candidates}
    read = sorted({*all_columns, *claimed, *named})
    partials = [
        discover.PartialIndex(
            r["schema"], r["table"], r["relid"], r["index"], r["predicate"], tuple(r["keys"] or ())
        )
        for r in q.rows(conn, "partial_indexes", {"relids": read, "blocked": blocked})
    ]
    rejected: list[Rejected] = []  # filled by discover.decide as it decides
    decisions = discover.decide(columns, partials, claims, all_columns, explicit, rejected, role)
    return _Discovered(tuple(decisions), tuple(rejected), tuple(columns))


def _system_schema(schema: str) -> bool:
    """PostgreSQL's own tables: the catalogs, information_schema and TOAST tables."""
    return schema in ("pg_catalog", "information_schema") or schema.startswith("pg_toast")


def candidate_column(r: dict[str, Any]) -> discover.CandidateColumn:
    """A row of candidate_columns.sql as discovery reads it."""
    return discover.CandidateColumn(
        schema=r["schema"],
        table=r["table"],
        relid=r["relid"],
        column=r["column"],
        type=r["type"],
        not_null=r["not_null"],
        enum_labels=tuple(r["enum_labels"]) if r["enum_labels"] is not None else None,
        indexed=r["indexed"],
        common_values=_tuple(r["common_values"]),
        readable=r["readable"],
        partitioned=bool(r.get("partitioned")),
        common_freqs=_tuple(r["common_freqs"]),
        rare_values=_tuple(r["rare_values"]),
        default=r["default"],
        checks=tuple(r["checks"] or ()),
        null_frac=r["null_frac"] or 0.0,
        n_distinct=r["n_distinct"] or 0.0,
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
    names = {q.qualified: q for q in queues}
    why = {r.qualified: r.reason for r in rejected}
    judged, left_out = [], list(gathered.left_out)
    for stmt in gathered.statements:
        queue = names.get(stmt.queue or "")
        other = claims.selects_other_rows(stmt.parsed, queue.live) if queue and stmt.parsed else ""
        if other and not stmt.source.startswith("--query"):
            left_out.append(LeftOut(statement_label(stmt), stmt.text, other, stmt.queue))
            continue
        if stmt.queue is None or queue is not None or stmt.source.startswith("--query"):
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


def _maintenance_on_queues(
    gathered: statements.Gathered, queues: Sequence[Queue]
) -> tuple[tuple[Statement, ...], list[LeftOut]]:
    """The maintenance statements of the report's queues, kept for what they cost; a
    row-locking one on another table (a workers table's clean-up of stale rows) is left out,
    saying what it is. A write without a locking clause on another table is one of the
    application's ordinary statements: nothing to say."""
    on_queues = {q.qualified for q in queues}
    kept, left_out = [], []
    for stmt in gathered.maintenance:
        if stmt.queue in on_queues:
            kept.append(stmt)
            continue
        if stmt.parsed is not None and not stmt.parsed.locking_clause:
            continue
        what = stmt.parsed.maintenance if stmt.parsed else None
        reason = f"a maintenance statement, not a claim: {what.description if what else '?'}"
        left_out.append(LeftOut(statement_label(stmt), stmt.text, reason, stmt.queue))
    return tuple(kept), left_out


def _catalog(conn: Conn, table_names: list[str]) -> names.Catalog:
    if not table_names:
        return names.Catalog(())
    relations = []
    for r in q.rows(conn, "relations", {"names": table_names}):
        parent = (r["parent_schema"], r["parent_name"]) if r["parent_name"] else None
        keys = tuple(tuple(k.split(",")) for k in r["unique_keys"] or () if k)
        relations.append(
            names.Relation(r["relid"], r["schema"], r["name"], r["kind"], parent, keys)
        )
    return names.Catalog(relations)


def _tables(conn: Conn, relids: list[int], locks: Locks, role: str) -> Read[list[Table]]:
    """Facts of the queue tables, one query per kind, each on its own: without columns or
    the table row there is no Table (``table_facts`` unavailable); without indexes or pg_stats
    the tables come without them and the read says which is missing. A partitioned queue
    table's partitions come with it (the table query reads its partition tree), their facts
    summed into its own (derive/partitions.py)."""
    blocked = locks.blocked(ACCESS_SHARE)
    params = {"relids": relids, "blocked": blocked}
    column_rows = read_rows(conn, "table_facts", "the queue tables' columns", "columns", params)
    columns: dict[int, list[Column]] = {}
    for r in column_rows.value:
        columns.setdefault(r["relid"], []).append(
            Column(
                r["column"],
                r["type"],
                r["not_null"],
                tuple(r["enum_labels"] or ()),
                r["generated"],
            )
        )
    table_rows = read_rows(
        conn, "table_facts", "the queue tables' catalog facts", "tables", params | {"sizes": True}
    )
    tree = [r["relid"] for r in table_rows.value] or relids
    index_rows = read_rows(
        conn,
        "index_definitions",
        "the queue tables' indexes",
        "indexes",
        {"relids": tree, "blocked": blocked},
    )
    indexes = _indexes(index_rows.value, locks, role)
    read = merged(None, column_rows, index_rows, table_rows)
    if "table_facts" in read.unavailable:
        return Read([], read.unavailable)
    names = {
        "schemas": [r["schema"] for r in table_rows.value],
        "tables": [r["table"] for r in table_rows.value],
    }
    stats_rows = read_rows(conn, "live_set", "pg_stats of the queue tables", "column_stats", names)
    stats: dict[tuple[str, str], list[ColumnStats]] = {}
    for r in stats_rows.value:
        stats.setdefault((r["schema"], r["table"]), []).append(
            ColumnStats(
                column=r["column"],
                null_frac=r["null_frac"],
                n_distinct=r["n_distinct"],
                avg_width=r["avg_width"],
                most_common_vals=_tuple(r["most_common_vals"]),
                most_common_freqs=_tuple(r["most_common_freqs"]),
                upper_bound=r["upper_bound"],
                lower_bound=r["lower_bound"],
                histogram_bounds=_tuple(r["histogram_bounds"]),
                correlation=r["correlation"],
            )
        )
    sequence_rows = read_rows(
        conn, "id_sequences", "the sequences of the queue tables' ids", "id_sequences", params
    )
    sequences: dict[int, list[IdSequence]] = {}
    for r in sequence_rows.value:
        sequences.setdefault(r["relid"], []).append(
            IdSequence(
                column=r["column"],
                column_type=r["column_type"],
                schema=r["schema"],
                name=r["name"],
                data_type=r["data_type"],
                max_value=int(r["max_value"]),
                increment=int(r["increment"]),
                last_value=None if r["last_value"] is None else int(r["last_value"]),
                identity=bool(r["identity"]),
                readable=bool(r["readable"]),
            )
        )
    read_tables: dict[int, Table] = {}
    below: dict[int, list[Table]] = {}
    unread: dict[int, set[str]] = {}
    for r in table_rows.value:
        relid, root = r["relid"], r["root"]
        table = Table(
            schema=r["schema"],
            name=r["table"],
            reltuples=r["reltuples"],
            relpages=r["relpages"],
            bytes=r["bytes"],
            reloptions=dict(o.split("=", 1) for o in r["reloptions"]),
            stats=_table_stats(r),
            # A partition has its partitioned table's columns.
            columns=tuple(columns.get(root, ())),
            indexes=tuple(indexes.get(relid, ())),
            column_stats=tuple(stats.get((r["schema"], r["table"]), ())),
            stats_visible=r["stats_visible"],
            bytes_source=_estimated(locks, relid, role) if r["bytes_estimated"] else None,
            id_sequences=tuple(sequences.get(relid, ())) if relid == root else (),
            partition_key=r["partition_key"],
            partition_of=r["partition_of"] if relid != root else None,
            partition_bound=r["bound"] if relid != root else None,
        )
        if relid == root:
            read_tables[relid] = table
            continue
        below.setdefault(root, []).append(table)
        if relid in blocked:
            unread.setdefault(root, set()).add(table.qualified)
    out = [
        sum_partitions(t, below[relid], unread.get(relid, set()))
        if t.partition_key is not None
        else t
        for relid, t in read_tables.items()
    ]
    return merged(out, read, stats_rows, sequence_rows)


def _indexes(rows: Sequence[dict[str, Any]], locks: Locks, role: str) -> dict[int, list[Index]]:
    """The indexes of each table (by relid); an index of a partition names the index of the
    partitioned queue table that it is a partition of, up through every level."""
    by_relid = {r["index_relid"]: r for r in rows}

    def top(r: dict[str, Any]) -> str | None:
        seen = {r["index_relid"]}
        parent = by_relid.get(r["parent_index"])
        while parent is not None and parent["parent_index"] is not None:
            if parent["parent_index"] in seen:
                break
            seen.add(parent["index_relid"])
            parent = by_relid.get(parent["parent_index"])
        return str(parent["name"]) if parent is not None else None

    indexes: dict[int, list[Index]] = {}
    for r in rows:
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
                is_ready=r["is_ready"],
                bytes=r["bytes"],
                reltuples=r["reltuples"],
                idx_scan=r["idx_scan"],
                idx_tup_read=r["idx_tup_read"],
                idx_tup_fetch=r["idx_tup_fetch"],
                include_columns=tuple(r["include_columns"]),
                descending=tuple(r["descending"] or ()),
                bytes_source=_estimated(locks, r["index_relid"], role)
                if r["bytes_estimated"]
                else None,
                partition_of=top(r) if r["parent_index"] is not None else None,
            )
        )
    return indexes


def _estimated(locks: Locks, relid: int, role: str) -> str:
    blocking = locks.on_relation(relid, ACCESS_SHARE)
    return "estimate: pg_class.relpages x block_size, not opened because " + describe_all(
        blocking, role
    )


def _iso(value: datetime | None, timespec: str = "seconds") -> str | None:
    # The clock of a reading to the microsecond: --history measures rates between snapshots
    # seconds apart, and tells a restart by the server's start time.
    return value.isoformat(timespec=timespec) if value is not None else None


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
    # The sizes are not needed (none is opened).
    rows = q.rows(conn, "tables", {"relids": relids, "blocked": [], "sizes": False})
    tables = {f"{r['schema']}.{r['table']}": _table_stats(r) for r in rows}
    # A partitioned queue table's counters are its leaves', as in the first read.
    leaves: dict[int, list[TableStats]] = {}
    for r in rows:
        if r["relid"] != r["root"] and r["partition_key"] is None:
            leaves.setdefault(r["root"], []).append(_table_stats(r))
    for r in rows:
        if r["relid"] == r["root"] and r["partition_key"] is not None:
            tables[f"{r['schema']}.{r['table']}"] = sum_stats(leaves.get(r["relid"], []))
    return Sample(seconds=round(measured, 3), tables=tables)
