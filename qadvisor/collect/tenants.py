"""Per-tenant facts of multi-tenant queues, from a few bounded queries per queue table.

For each queue table with a tenant column (the inner column of a round-robin LATERAL dequeue,
the column of a per-tenant predicate, or a column named like ``tenant_id``):

- live rows per tenant: through a partial index led by the tenant column when there is one (a
  skip scan finds the tenants, at most ``COUNT_CAP`` rows are counted per tenant), otherwise
  from the first ``SCAN_CAP`` live rows read through an index that reaches the live set;
  with no such index nothing is counted (that would read the archive);
- the rotation table of a round-robin dequeue: its size and its idle tenants, by a NOT EXISTS
  probe per rotation row when the per-tenant index makes each probe one descent, otherwise by
  comparing the rotation's tenants with the live tenants counted above;
- the mean run time of the most recently finished jobs, when the table has start and finish
  timestamps and an index led by the finish column makes reading them cheap.

Every query runs in its own read-only transaction with seq scans disabled (``SET LOCAL``), so
a plan that would read the archive becomes an index plan or fails on statement_timeout; a
failure is kept in ``TenantFacts.error`` (and the read's ``unavailable``) and the rest goes
on. Before reading, the collector's guard says whether the role may read the columns involved
and whether another session's lock would make the read wait: then nothing is read, and the
fact is returned as hidden, with the GRANT or the lock. The rotation table is found by a
catalog lookup (its name resolved along the session's search_path) and its privileges read by
OID. The number of queries is fixed per queue table (at most six), however many tenants there
are.
Identifiers are composed with psycopg.sql; the live predicate is rendered by
qadvisor.sql.printing.predicate_sql, which quotes its identifiers and literals.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from qadvisor.collect.access import Guard, read_access
from qadvisor.collect.locks import ACCESS_SHARE
from qadvisor.collect.queries import Read, query_text
from qadvisor.collect.table_names import Resolved, find_table
from qadvisor.derive.estimates import parse_index_predicate, same_predicate
from qadvisor.model import (
    Column,
    HiddenFact,
    Index,
    LivePredicate,
    Queue,
    Statement,
    Table,
    TenantCount,
    TenantFacts,
    unavailable_key,
)
from qadvisor.sql.dequeue import Lateral
from qadvisor.sql.printing import predicate_sql, qualified

Conn = psycopg.Connection[Any]

# At most this many live rows are counted per tenant (through the per-tenant index).
COUNT_CAP = 100_000
# At most this many tenants are counted, and listed in TenantFacts.live_by_tenant.
TENANT_LIMIT = 200
# Without a per-tenant index: at most this many live rows are read to count tenants.
SCAN_CAP = 200_000
# At most this many rotation rows are checked for idleness.
ROTATION_LIMIT = 50_000
# The mean job duration is taken over this many most recently finished jobs.
DURATION_JOBS = 1_000

# Column names taken for a tenant, in order of preference (exact names, lower case).
TENANT_COLUMNS = (
    "tenant_id", "account_id", "customer_id", "org_id", "organization_id", "organisation_id",
    "workspace_id", "team_id", "project_id", "company_id", "client_id", "merchant_id",
    "shop_id", "store_id", "tenant", "account", "customer", "organization", "workspace",
)  # fmt: skip
_TENANT_LIKE = re.compile(r"(^|_)tenant(_|$)")
# (start, finish) column pairs of a job's run, most common first (Oban: attempted_at /
# completed_at, GoodJob: performed_at / finished_at).
DURATION_COLUMNS = (
    ("started_at", "finished_at"), ("started_at", "completed_at"), ("started_at", "ended_at"),
    ("started_at", "done_at"), ("attempted_at", "completed_at"), ("performed_at", "finished_at"),
    ("locked_at", "finished_at"), ("claimed_at", "finished_at"), ("picked_at", "finished_at"),
    ("run_at", "finished_at"),
)  # fmt: skip


@cache
def _query(name: str) -> str:
    text = query_text(name)
    # Leading comments document the placeholders; psycopg would read them as placeholders.
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


def collect_tenants(
    conn: Conn,
    queues: Sequence[Queue],
    tables: Sequence[Table],
    statements: Sequence[Statement],
    guard: Guard | None = None,
) -> Read[tuple[TenantFacts, ...]]:
    """TenantFacts for each queue table that has a tenant column; a queue's error is also
    its entry of ``unavailable`` for the queue."""
    out = []
    unavailable = {}
    hidden: list[HiddenFact] = []
    for queue in queues:
        table = next((t for t in tables if (t.schema, t.name) == (queue.schema, queue.table)), None)
        if table is None:
            continue
        mine = [s for s in statements if statement_on(s, queue)]
        tenant = tenant_column(table, mine)
        if tenant is None:
            continue
        collector = _Collector(conn, queue, table, tenant, mine, guard)
        facts = collector.run()
        if facts.error:
            unavailable[unavailable_key("tenants", queue.qualified)] = facts.error
        out.append(facts)
        hidden += collector.hidden
    return Read(tuple(out), unavailable, tuple(hidden))


def statement_on(stmt: Statement, queue: Queue) -> bool:
    """The statement dequeues from this queue table: the one its names resolved to (an
    unresolved, unqualified name matches any schema)."""
    p = stmt.parsed
    if p is None:
        return False
    if stmt.queue is not None:
        return stmt.queue == queue.qualified
    return p.table == queue.table and p.schema in (None, queue.schema)


def tenant_column(table: Table, statements: Iterable[Statement]) -> str | None:
    """The tenant column of a queue table, or None when it has none."""
    names = {c.name for c in table.columns}
    for stmt in statements:
        lateral = stmt.parsed.lateral if stmt.parsed else None
        if lateral is not None and lateral.inner_column in names:
            return lateral.inner_column
    for name in TENANT_COLUMNS:
        if name in names:
            return name
    return next((c.name for c in table.columns if _TENANT_LIKE.search(c.name.lower())), None)


def tenant_index(table: Table, tenant: str, live: LivePredicate) -> Index | None:
    """A valid partial index on the live predicate whose first key is the tenant column (a
    plain one when the whole table is the live set)."""
    for idx in table.indexes:
        if not (idx.is_valid and idx.columns and idx.columns[0] == tenant):
            continue
        if live.whole_table:
            if idx.predicate is None:
                return idx
            continue
        if not idx.predicate:
            continue
        parsed = parse_index_predicate(idx.predicate)
        if parsed is not None and same_predicate(parsed, live):
            return idx
    return None


def live_set_index(table: Table, live: LivePredicate) -> Index | None:
    """An index that reaches the live rows without the archive: a partial index on the live
    predicate, or one led by the live column; when the whole table is the live set there is
    no archive to avoid, and any plain index reaches it."""
    for idx in table.indexes:
        if not idx.is_valid:
            continue
        if live.whole_table:
            if idx.predicate is None:
                return idx
            continue
        if idx.predicate:
            parsed = parse_index_predicate(idx.predicate)
            if parsed is not None and same_predicate(parsed, live):
                return idx
        elif idx.columns and idx.columns[0] == live.column:
            return idx
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Collector:
    def __init__(
        self,
        conn: Conn,
        queue: Queue,
        table: Table,
        tenant: str,
        statements: list[Statement],
        guard: Guard | None = None,
    ) -> None:
        self.conn = conn
        self.guard = guard
        self.queue = queue
        self.table = table
        self.tenant = tenant
        self.statements = statements
        self.hidden: list[HiddenFact] = []  # what the guard kept from being read
        self.errors: list[str] = []
        self.notes: list[str] = []
        self.counts: list[TenantCount] = []
        self.complete: bool | None = None
        self.cap: int | None = None
        self.all_tenants: set[str] | None = None  # every tenant with live rows, when known
        self.tenants_seen: int | None = None  # tenants seen, when more than are listed

    def run(self) -> TenantFacts:
        refused = self._refusal()
        if refused:
            return TenantFacts(
                schema=self.table.schema,
                table=self.table.name,
                tenant_column=self.tenant,
                notes=(f"live rows per tenant not counted: {refused}",),
            )
        facts: dict[str, Any] = {}
        if self.queue.live is None:
            self.notes.append("live rows per tenant not counted: no live predicate is known")
        else:
            self._count(self.queue.live)
            facts |= self._rotation(self.queue.live)
        facts |= self._durations()
        return TenantFacts(
            schema=self.table.schema,
            table=self.table.name,
            tenant_column=self.tenant,
            live_by_tenant=tuple(self.counts),
            count_cap=self.cap,
            tenants_counted=self.tenants_seen or len(self.counts),
            error="; ".join(self.errors) or None,
            counts_complete=self.complete,
            notes=tuple(self.notes),
            **facts,
        )

    # --- helpers -------------------------------------------------------------------------

    def _refusal(self) -> str | None:
        """Why the queue table cannot be read now (a missing grant, another session's lock)."""
        relid = self.guard.relids.get(self.queue.qualified) if self.guard else None
        if self.guard is None or relid is None:
            return None
        columns = [self.tenant]
        if self.queue.live is not None:
            columns += self.queue.live.columns
        durations = self._duration_columns()
        if durations is not None and durations[2] is not None:  # read only through an index
            columns += durations[:2]
        return self._refused(
            self.guard.read_refusal(
                "tenant_counts", self.queue.qualified, relid, columns, "live rows per tenant"
            )
        )

    def _refused(self, fact: HiddenFact | None) -> str | None:
        """The reason of a fact the guard hid (kept to return with the facts), or None."""
        if fact is None:
            return None
        self.hidden.append(fact)
        return fact.reason

    def _ident(self) -> dict[str, sql.Composable]:
        live = self.queue.live
        return {
            "queue": sql.Identifier(self.table.schema, self.table.name),
            "tenant": sql.Identifier(self.tenant),
            "live": sql.SQL(predicate_sql(live) if live else "true"),
        }

    def _fetch(
        self,
        what: str,
        name: str,
        params: dict[str, Any],
        settings: Sequence[str] = ("enable_seqscan",),
        **idents: sql.Composable,
    ) -> list[dict[str, Any]] | None:
        """Run one bounded query in a read-only transaction of its own; None on error."""
        query = sql.SQL(_query(name)).format(**(self._ident() | idents))
        try:
            with self.conn.transaction(), self.conn.cursor(row_factory=dict_row) as cur:
                for setting in settings:
                    cur.execute(sql.SQL("SET LOCAL {} = off").format(sql.Identifier(setting)))
                cur.execute(query, params)
                return cur.fetchall()
        except psycopg.Error as exc:
            self.errors.append(f"{what} of {self.table.qualified}: {_first_line(exc)}")
            return None

    # --- live rows per tenant --------------------------------------------------------------

    def _count(self, live: LivePredicate) -> None:
        by_tenant = tenant_index(self.table, self.tenant, live)
        if by_tenant is not None:
            self._count_by_index(by_tenant)
            return
        reach = live_set_index(self.table, live)
        if reach is None:
            self.notes.append(
                f"live rows per tenant not counted: no index of {self.table.qualified} reaches "
                f"the live set ({predicate_sql(live)}) without reading the archive"
            )
            return
        self._count_by_sample(reach)

    def _count_by_index(self, idx: Index) -> None:
        rows = self._fetch(
            "live rows per tenant",
            "tenant_counts_index",
            {"tenants": TENANT_LIMIT + 1, "cap": COUNT_CAP},
            settings=("enable_seqscan", "enable_bitmapscan"),
        )
        if rows is None:
            return
        truncated = len(rows) > TENANT_LIMIT
        if truncated:
            # The first TENANT_LIMIT + 1 tenants in key order, then sorted: drop the smallest.
            rows = rows[:TENANT_LIMIT]
        self.cap = COUNT_CAP
        self.counts = [TenantCount(str(r["tenant"]), int(r["n"])) for r in rows]
        capped = [c.tenant for c in self.counts if c.rows >= COUNT_CAP]
        self.complete = not truncated and not capped
        if not truncated:
            self.all_tenants = {c.tenant for c in self.counts}
        note = (
            f"live rows counted per tenant through index {idx.name}, at most {COUNT_CAP:,} "
            "per tenant"
        )
        if truncated:
            note += f"; only the first {TENANT_LIMIT:,} tenants (in {self.tenant} order)"
        if capped:
            note += f"; {len(capped)} tenant(s) reached the cap (they have at least that many)"
        self.notes.append(note)

    def _count_by_sample(self, idx: Index) -> None:
        rows = self._fetch(
            "live rows per tenant",
            "tenant_counts_sample",
            {"tenants": TENANT_LIMIT, "scan": SCAN_CAP},
            settings=("enable_seqscan", "enable_bitmapscan"),
        )
        if rows is None:
            return
        self.cap = SCAN_CAP
        self.counts = [TenantCount(str(r["tenant"]), int(r["n"])) for r in rows]
        seen = int(rows[0]["rows_seen"]) if rows else 0
        tenants = int(rows[0]["tenants_seen"]) if rows else 0
        self.tenants_seen = tenants
        read_all = seen < SCAN_CAP
        self.complete = read_all and tenants <= TENANT_LIMIT
        if self.complete:
            self.all_tenants = {c.tenant for c in self.counts}
        note = (
            f"live rows counted by reading the live set through index {idx.name} "
            f"(no partial index led by {self.tenant})"
        )
        if not read_all:
            note += (
                f"; only the first {SCAN_CAP:,} live rows were read, so the counts are a "
                "sample of a larger live set"
            )
        if tenants > TENANT_LIMIT:
            note += f"; {tenants:,} tenants seen, the largest {TENANT_LIMIT:,} listed"
        self.notes.append(note)

    # --- rotation table ---------------------------------------------------------------------

    def _rotation(self, live: LivePredicate) -> dict[str, Any]:
        stmt = next((s for s in self.statements if s.parsed and s.parsed.lateral), None)
        lateral = stmt.parsed.lateral if stmt is not None and stmt.parsed else None
        if stmt is None or lateral is None:
            return {}
        # The rotation table the application's session meant: where the statement's names
        # resolved (qadvisor's own search_path may find another table of that name, or none).
        written = (
            f"{lateral.outer_schema}.{lateral.outer_table}"
            if lateral.outer_schema
            else lateral.outer_table
        )
        schema, _, table = stmt.names.get(written, written).rpartition(".")
        lateral = replace(lateral, outer_schema=schema or lateral.outer_schema, outer_table=table)
        facts: dict[str, Any] = {
            "rotation_schema": lateral.outer_schema,
            "rotation_table": lateral.outer_table,
        }
        found = self._rotation_table(lateral)
        if found is None:
            return facts
        facts |= {"rotation_schema": found.schema, "rotation_table": found.table}
        facts |= self._rotation_shape(found.relid)
        facts["rotation_tenant_column"] = lateral.outer_column
        idents: dict[str, sql.Composable] = {
            "rotation": sql.Identifier(found.schema, found.table),
            "rotation_tenant": sql.Identifier(lateral.outer_column),
        }
        params = {"limit": ROTATION_LIMIT, "rotation_oid": found.relid}
        by_tenant = tenant_index(self.table, self.tenant, live)
        if by_tenant is not None:
            # One descent of the per-tenant index per rotation row.
            rows = self._fetch(
                "idle tenants",
                "tenant_rotation_probe",
                params,
                settings=("enable_seqscan", "enable_bitmapscan"),
                **idents,
            )
        else:
            rows = self._fetch(
                "rotation table", "tenant_rotation_list", params, settings=(), **idents
            )
        if not rows:
            return facts
        row = rows[0]
        facts["rotation_schema"] = row["schema"]
        facts["rotation_table"] = row["table"]
        if row["tenants"] is not None:
            listed = [str(t) for t in row["tenants"]]
            probed = len(listed)
            idle: int | None = None
            if self.all_tenants is not None:
                idle = sum(1 for t in listed if t not in self.all_tenants)
                self.notes.append(
                    f"idle tenants found by comparing {row['table']} with the live tenants "
                    f"counted (no partial index led by {self.tenant} to probe)"
                )
            else:
                self.notes.append(
                    f"idle tenants of {row['table']} not counted: without a partial index led "
                    f"by {self.tenant} each probe would walk the live set, and the live tenants "
                    "could not all be counted"
                )
        else:
            probed = int(row["probed"])
            idle = int(row["idle"])
            index = by_tenant.name if by_tenant else "?"
            self.notes.append(
                f"idle tenants probed with one descent of index {index} per rotation row"
            )
        reltuples = float(row["reltuples"])
        if probed < ROTATION_LIMIT:
            rotation_rows = probed  # read them all: exact
        else:
            rotation_rows = max(probed, round(reltuples))
            self.notes.append(
                f"only the first {ROTATION_LIMIT:,} of about {rotation_rows:,} rows of "
                f"{row['table']} were checked for idle tenants"
            )
        facts |= {"rotation_rows": rotation_rows, "idle_tenants": idle, "rotation_probed": probed}
        return facts

    def _rotation_shape(self, relid: int) -> dict[str, Any]:
        """The rotation table's columns and index definitions (catalog reads; the indexes of
        a table another session holds a conflicting lock on are not read)."""
        blocked = self.guard.locks.blocked(ACCESS_SHARE) if self.guard is not None else []
        params = {"relids": [relid], "blocked": blocked}
        try:
            with self.conn.cursor(row_factory=dict_row) as cur:
                cur.execute(query_text("columns").encode(), params)
                columns = tuple(
                    Column(r["column"], r["type"], r["not_null"], tuple(r["enum_labels"] or ()),
                           r["generated"])
                    for r in cur.fetchall()
                )  # fmt: skip
                cur.execute(query_text("indexes").encode(), params)
                indexes = tuple(str(r["definition"]) for r in cur.fetchall())
        except psycopg.Error as exc:
            if self.conn.broken or self.conn.closed:
                raise
            self.errors.append(f"rotation table's columns: {_first_line(exc)}")
            return {}
        return {"rotation_columns": columns, "rotation_indexes": indexes}

    def _rotation_table(self, lateral: Lateral) -> Resolved | None:
        """The rotation table, found in the catalog; None (with the reason kept) when it is
        missing, or the role may not read it, or another session's lock is on it."""
        shown = qualified(lateral.outer_schema, lateral.outer_table)
        try:
            found = find_table(self.conn, lateral.outer_schema, lateral.outer_table)
            if found is not None and self.guard is not None:
                self.guard = self.guard.with_access(read_access(self.conn, [found.relid]))
        except psycopg.Error as exc:
            self.errors.append(f"rotation table {shown}: {_first_line(exc)}")
            return None
        if found is None:
            self.errors.append(f"rotation table {shown} not found (or not a table)")
            return None
        if self.guard is not None:
            refused = self._refused(
                self.guard.read_refusal(
                    "tenant_rotation",
                    self.queue.qualified,
                    found.relid,
                    [lateral.outer_column],
                    f"rotation table {qualified(found.schema, found.table)}",
                )
            )
            if refused:
                self.notes.append(f"idle tenants not counted: {refused}")
                return None
        return found

    # --- job durations ----------------------------------------------------------------------

    def _duration_columns(self) -> tuple[str, str, Index | None] | None:
        """(start, finish) columns of a job's run and the index led by finish (None: none)."""
        cols = {c.name: c for c in self.table.columns}
        for started, finished in DURATION_COLUMNS:
            a, b = cols.get(started), cols.get(finished)
            if a is None or b is None:
                continue
            if not (a.type.startswith("timestamp") and b.type.startswith("timestamp")):
                continue
            idx = next(
                (
                    i
                    for i in self.table.indexes
                    if i.is_valid and i.predicate is None and i.columns[:1] == (finished,)
                ),
                None,
            )
            return started, finished, idx
        return None

    def _durations(self) -> dict[str, Any]:
        found = self._duration_columns()
        if found is not None:
            started, finished, idx = found
            if idx is None:
                self.notes.append(
                    f"mean job duration not measured: no index led by {finished} makes reading "
                    "the most recently finished jobs cheap"
                )
                return {}
            rows = self._fetch(
                "mean job duration",
                "tenant_durations",
                {"jobs": DURATION_JOBS},
                settings=("enable_seqscan", "enable_sort", "enable_bitmapscan"),
                started=sql.Identifier(started),
                finished=sql.Identifier(finished),
            )
            if not rows or not rows[0]["jobs"]:
                return {}
            jobs = int(rows[0]["jobs"])
            self.notes.append(
                f"mean job duration over the {jobs:,} most recently finished jobs "
                f"({finished} - {started}, read through index {idx.name})"
            )
            return {"mean_job_seconds": float(rows[0]["mean_s"]), "duration_jobs": jobs}
        return {}
