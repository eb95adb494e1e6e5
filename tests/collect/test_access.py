"""What the role may read and what other sessions' locks allow (qadvisor.collect.access), on
real servers (PostgreSQL 18 and 15).

A monitoring role (pg_monitor, a name that needs quoting) is given column and table grants of
several kinds; :func:`read_access` reads them, and each :class:`Guard` answer is checked
against PostgreSQL itself: what the guard refuses, the server refuses; the GRANT it prints,
run as printed, makes the server allow it and the guard let it through. Locks are taken by
another session, and the guard's verdicts match what ``lock_timeout`` shows would wait.

``unclaimed`` is pure and is tested on hand-built statements at the end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import psycopg
import pytest

from qadvisor.collect import queries as q
from qadvisor.collect.access import Guard, TableAccess, read_access, unclaimed
from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.collect.locks import Locks, read_locks
from qadvisor.collect.planner import PlanForm
from qadvisor.collect.snapshot import candidate_column
from qadvisor.derive import discover
from qadvisor.model import HiddenFact, Index, LivePredicate, Queue, Statement, Table, TableStats
from qadvisor.sql.dequeue import DequeueStatement, analyse, locking_level, without_locks
from tests.conftest import TestDB
from tests.shapes import RoleDB

JOB_COLUMNS = frozenset({"id", "tenant_id", "status", "created_at", "finished_at"})
QUEUED = LivePredicate("status", "in", ("queued",), "test")

SCHEMA = """
CREATE SCHEMA app;
CREATE SCHEMA hidden;
CREATE TABLE app.jobs (
    id          bigint PRIMARY KEY,
    tenant_id   integer NOT NULL,
    status      text NOT NULL,
    gone        integer,
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
ALTER TABLE app.jobs DROP COLUMN gone;
CREATE INDEX jobs_queued ON app.jobs (created_at) WHERE status = 'queued';
CREATE TABLE app.open_jobs (LIKE app.jobs INCLUDING ALL);
CREATE TABLE app.archive (LIKE app.jobs INCLUDING ALL);
CREATE TABLE app.tasks (id bigint PRIMARY KEY, state text NOT NULL);
CREATE INDEX tasks_state ON app.tasks (state);
CREATE TYPE app.job_status AS ENUM ('queued', 'done');
CREATE TABLE app.flagged (id bigint PRIMARY KEY, status app.job_status NOT NULL);
CREATE TABLE hidden.jobs (LIKE app.jobs INCLUDING ALL);
INSERT INTO app.jobs (id, tenant_id, status)
SELECT g, g % 3, CASE WHEN g % 4 = 0 THEN 'queued' ELSE 'done' END
  FROM generate_series(1, 400) AS g;
INSERT INTO app.open_jobs SELECT * FROM app.jobs;
INSERT INTO app.archive SELECT * FROM app.jobs;
INSERT INTO app.tasks SELECT g, 'ready' FROM generate_series(1, 100) AS g;
INSERT INTO app.flagged SELECT g, 'queued' FROM generate_series(1, 100) AS g;
INSERT INTO hidden.jobs SELECT * FROM app.jobs;
ANALYZE;
"""


@dataclass
class Shop:
    db: TestDB  # as the superuser, who grants
    monitor: RoleDB  # pg_monitor, USAGE on app, the grants below
    nobody: RoleDB  # nothing but CONNECT
    relids: dict[str, int]  # "schema.table" -> oid

    @property
    def role(self) -> str:
        return self.monitor.user

    def access(self, who: RoleDB | None = None) -> dict[int, TableAccess]:
        with connect((who or self.monitor).dsn, SessionLimits()) as conn:
            return read_access(conn, list(self.relids.values()))

    def guard(self, locks: Locks | None = None) -> Guard:
        return Guard(self.role, locks or Locks(), self.access(), dict(self.relids))

    def refused(self, sql: str, who: TestDB | None = None) -> str | None:
        """None when PostgreSQL lets the role run ``sql`` (rolled back) within 100 ms of lock
        waiting; else the first line of its error."""
        with psycopg.connect((who or self.monitor).dsn, autocommit=True) as conn:
            try:
                with conn.transaction(force_rollback=True):
                    conn.execute("SET LOCAL lock_timeout = '100ms'")
                    conn.execute(sql.encode())
            except psycopg.Error as exc:
                return q.first_line(exc)
        return None

    def visible_stats(self, table: str) -> set[str]:
        """The columns of ``table`` whose pg_stats row the monitoring role sees."""
        schema, name = table.split(".")
        with psycopg.connect(self.monitor.dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT attname FROM pg_stats WHERE schemaname = %s AND tablename = %s",
                [schema, name],
            ).fetchall()
        return {r[0] for r in rows}


@pytest.fixture
def shop(db: TestDB) -> Iterator[Shop]:
    role, nobody = f"{db.name} Monitor", f"{db.name}_nobody"
    db.execute(SCHEMA)
    db.execute(
        f"""
        CREATE ROLE "{role}" LOGIN IN ROLE pg_monitor;
        CREATE ROLE {nobody} LOGIN;
        GRANT USAGE ON SCHEMA app TO "{role}";
        GRANT SELECT (id, tenant_id) ON app.jobs TO "{role}";
        GRANT SELECT, UPDATE ON app.open_jobs TO "{role}";
        GRANT SELECT ON hidden.jobs TO "{role}";
        """
    )
    names = ["app.jobs", "app.open_jobs", "app.archive", "app.tasks", "app.flagged", "hidden.jobs"]
    relids = {n: int(db.execute(f"SELECT '{n}'::regclass::oid")[0][0]) for n in names}
    yield Shop(db, RoleDB(db.name, db.server, role), RoleDB(db.name, db.server, nobody), relids)
    db.execute(f'DROP OWNED BY "{role}", {nobody}; DROP ROLE "{role}", {nobody}')


@contextlib.contextmanager
def holding(db: TestDB, lock: str) -> Iterator[int]:
    """Another session in an open transaction holding ``lock`` (a LOCK TABLE ... statement);
    its pid."""
    with db.connect() as other:
        other.execute("BEGIN")
        other.execute(lock.encode())
        row = other.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        yield int(row[0])
        other.execute("ROLLBACK")


def parsed(sql: str) -> DequeueStatement:
    found = analyse(sql)
    assert found is not None, sql
    return found


def claim_on(table: str, kind: str = "select") -> tuple[DequeueStatement, str]:
    """A claim on ``table`` (parsed) and its EXPLAIN."""
    select = (
        f"SELECT id FROM {table} WHERE status = 'queued' ORDER BY created_at LIMIT 1 "
        "FOR UPDATE SKIP LOCKED"
    )
    sql = (
        select if kind == "select" else f"UPDATE {table} SET status = 'doing' WHERE id = ({select})"
    )
    return parsed(sql), f"EXPLAIN {sql}"


def queue(table: str, live: LivePredicate | None = QUEUED) -> Queue:
    schema, name = table.split(".")
    return Queue(schema, name, live, "test")


def candidates(who: RoleDB) -> list[discover.CandidateColumn]:
    """The candidate columns the collector reads, as ``who`` reads them (candidate_columns.sql),
    with every table of the shop named as ``--table`` names one: some of them have no index and
    no claim, and discovery alone would not read their columns."""
    with connect(who.dsn, SessionLimits()) as conn:
        named = conn.execute(
            "SELECT array_agg(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind = 'r' AND n.nspname IN ('app', 'hidden')"
        ).fetchone()
        assert named is not None and isinstance(named[0], list)
        rows = q.rows(conn, "candidate_columns", discover.candidate_filter([], named[0]))
    return [candidate_column(r) for r in rows]


# --- what the role may read ------------------------------------------------------------------


def test_the_privileges_read_by_oid_are_what_postgresql_enforces(shop: Shop) -> None:
    r = shop.relids
    access = shop.access()
    columns = {"app.tasks": {"id", "state"}, "app.flagged": {"id", "status"}}
    # Every column of each table, whatever the role may read of it.
    assert {name: set(access[relid].columns) for name, relid in r.items()} == {
        name: columns.get(name, JOB_COLUMNS) for name in r
    }
    access = {relid: replace(acc, columns=frozenset()) for relid, acc in access.items()}
    assert access == {
        r["app.jobs"]: TableAccess(r["app.jobs"], "app", "jobs", True, True, False,
                                   frozenset({"id", "tenant_id"})),
        r["app.open_jobs"]: TableAccess(r["app.open_jobs"], "app", "open_jobs", True, True, True,
                                        JOB_COLUMNS),
        r["app.archive"]: TableAccess(r["app.archive"], "app", "archive", True, False, False,
                                      frozenset()),
        r["app.tasks"]: TableAccess(r["app.tasks"], "app", "tasks", True, False, False,
                                    frozenset()),
        r["app.flagged"]: TableAccess(r["app.flagged"], "app", "flagged", True, False, False,
                                      frozenset()),
        # No USAGE on the schema: the table's SELECT is granted, and still unusable by name.
        r["hidden.jobs"]: TableAccess(r["hidden.jobs"], "hidden", "jobs", False, True, False,
                                      JOB_COLUMNS),
    }  # fmt: skip
    assert access[r["app.jobs"]].qualified == "app.jobs"
    for name, relid in r.items():
        acc = access[relid]
        for column in sorted(columns.get(name, JOB_COLUMNS)):
            denied = shop.refused(f"SELECT {column} FROM {name} LIMIT 1")
            assert (denied is None) == (acc.schema_usage and column in acc.readable), (name, denied)
            if denied is not None:
                assert "permission denied for" in denied
        # pg_stats shows a column to whoever may SELECT it, USAGE on the schema or not.
        assert shop.visible_stats(name) == acc.readable, name


def test_a_role_with_nothing_but_connect_reads_its_privileges_too(shop: Shop) -> None:
    access = shop.access(shop.nobody)
    assert sorted(access) == sorted(shop.relids.values())
    # PUBLIC has USAGE on no schema here but public, and no table privilege.
    assert {(a.schema_usage, a.any_select, a.any_update, a.readable) for a in access.values()} == {
        (False, False, False, frozenset())
    }
    assert (
        shop.refused("SELECT id FROM app.jobs", shop.nobody) == "permission denied for schema app"
    )


def test_no_tables_no_privileges(shop: Shop) -> None:
    with connect(shop.monitor.dsn, SessionLimits()) as conn:
        assert read_access(conn, []) == {}
        # An OID that is no table (dropped since discovery) is left out.
        assert read_access(conn, [1]) == {}


# --- planning a claim ------------------------------------------------------------------------


def explain_of(claim: DequeueStatement, form: PlanForm | HiddenFact | None) -> str:
    """The EXPLAIN the planner sends for ``claim`` in ``form`` (None: as written)."""
    if not isinstance(form, PlanForm):
        return f"EXPLAIN {claim.text}"
    level = locking_level(claim.text, projection=form.projection)
    assert level is not None
    return "EXPLAIN " + (without_locks(level) if form.strip_locks else level)


def test_a_claim_is_planned_only_with_what_explain_needs_and_the_grants_say_it(
    shop: Shop,
) -> None:
    role = '"' + shop.role + '"'
    # Neither table's UPDATE is needed: the scan under the claim's LockRows is planned, and
    # of its columns only those its conditions and ORDER BY read (its select list is left out).
    columns = f"GRANT SELECT (created_at, status) ON app.archive TO {role};"
    usage = f"GRANT USAGE ON SCHEMA hidden TO {role};"
    cases = {
        "app.archive": (f"SELECT on created_at, status of app.archive, which {role} lacks: "
                        + columns, (columns,)),
        "hidden.jobs": (f"USAGE on schema hidden, which {role} lacks: " + usage, (usage,)),
    }  # fmt: skip
    guard = shop.guard()
    for table, (needs, grants) in cases.items():
        for kind in ("select", "update"):
            claim, explain = claim_on(table, kind)
            reason = f"not planned: EXPLAIN of the scan that finds its rows needs {needs}"
            refusal = guard.plan_refusal(queue(table), claim)
            assert isinstance(refusal, HiddenFact) and refusal.reason == reason
            assert (refusal.fact, refusal.queue, refusal.blocker_pid) == ("plans", table, None)
            assert refusal.grants == grants
            assert str(shop.refused(explain)).startswith("permission denied for "), explain
    open_claim, open_explain = claim_on("app.open_jobs", "update")
    assert guard.plan_refusal(queue("app.open_jobs"), open_claim) is None  # as written
    assert shop.refused(open_explain) is None

    for _, grants in cases.values():
        for grant in grants:
            shop.db.execute(grant)  # as printed
    after = shop.guard()
    for table in cases:
        for kind in ("select", "update"):
            claim, explain = claim_on(table, kind)
            form = after.plan_refusal(queue(table), claim)
            assert isinstance(form, PlanForm) and form.strip_locks, form
            assert form.why.startswith(
                f"its locking level alone, without its row locks: {role} lacks UPDATE on {table}"
            )
            # What the planner sends in that form, the server lets the role plan; the claim
            # as written it still refuses.
            assert shop.refused(explain_of(claim, form)) is None
            assert str(shop.refused(explain)).startswith("permission denied for "), explain


def test_a_claim_reading_a_column_the_role_may_not_select_is_not_planned(shop: Shop) -> None:
    role = '"' + shop.role + '"'
    shop.db.execute(f"GRANT UPDATE ON app.jobs TO {role}")
    for kind in ("select", "update"):
        claim, explain = claim_on("app.jobs", kind)
        assert shop.refused(explain) == "permission denied for table jobs"
        refusal = shop.guard().plan_refusal(queue("app.jobs"), claim)
        # The role may read id and tenant_id: the grant names the columns the claim's locking
        # level reads beyond those, and nothing it already has.
        grant = f"GRANT SELECT (created_at, status) ON app.jobs TO {role};"
        assert isinstance(refusal, HiddenFact) and refusal.grants == (grant,), refusal
        assert refusal.reason == (
            "not planned: EXPLAIN of a row-locking statement needs SELECT on created_at, "
            f"status of app.jobs, which {role} lacks: {grant}"
        )
    shop.db.execute(grant)  # as printed
    for kind in ("select", "update"):
        claim, explain = claim_on("app.jobs", kind)
        assert shop.guard().plan_refusal(queue("app.jobs"), claim) is None
        assert shop.refused(explain) is None


def test_a_select_list_the_role_may_not_read_is_left_out_of_the_plan(shop: Shop) -> None:
    role = '"' + shop.role + '"'
    # UPDATE and the columns of the conditions, not those the claim returns.
    shop.db.execute(f"GRANT UPDATE ON app.jobs TO {role}")
    shop.db.execute(f"GRANT SELECT (status, created_at) ON app.jobs TO {role}")
    shop.db.execute(f"REVOKE SELECT (id, tenant_id) ON app.jobs FROM {role}")
    select = (
        "SELECT * FROM app.jobs WHERE status = 'queued' ORDER BY created_at LIMIT 1 "
        "FOR UPDATE SKIP LOCKED"
    )
    update = (
        f"UPDATE app.jobs SET status = 'doing' WHERE id = ({select.replace('*', 'id', 1)}) "
        "RETURNING *"
    )
    for sql in (select, update):
        claim = parsed(sql)
        form = shop.guard().plan_refusal(queue("app.jobs"), claim)
        assert isinstance(form, PlanForm), form
        assert (form.strip_locks, form.projection) == (False, False)
        assert form.why == (
            f"its locking level alone, its select list left out: {role} may not SELECT "
            "finished_at, id, tenant_id of app.jobs, which the plan of the rows it finds "
            "does not read"
        )
        assert shop.refused(f"EXPLAIN {sql}") == "permission denied for table jobs"
        assert shop.refused(explain_of(claim, form)) is None
    # A select list the ORDER BY refers to stays: nothing can be planned without it.
    aliased = parsed(
        "SELECT id AS job, created_at AS t FROM app.jobs WHERE status = 'queued' ORDER BY t "
        "LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    refusal = shop.guard().plan_refusal(queue("app.jobs"), aliased)
    assert isinstance(refusal, HiddenFact)
    assert refusal.grants == (f"GRANT SELECT (id) ON app.jobs TO {role};",)


def test_a_table_the_guard_was_not_told_of_is_planned_as_usual(shop: Shop) -> None:
    claim, _ = claim_on("app.jobs")
    guard = Guard(shop.role, Locks(), shop.access(), {})
    assert guard.plan_refusal(queue("app.jobs"), claim) is None
    # Privileges that could not be read: the statement is sent and its error kept.
    blind = Guard(shop.role, Locks(), None, dict(shop.relids))
    assert blind.plan_refusal(queue("app.archive"), claim_on("app.archive")[0]) is None


# --- reading columns through the indexes -------------------------------------------------------


def test_a_read_of_columns_the_role_may_not_select_is_refused_with_the_column_grant(
    shop: Shop,
) -> None:
    role = '"' + shop.role + '"'
    guard = shop.guard()
    jobs, hidden = shop.relids["app.jobs"], shop.relids["hidden.jobs"]
    grant = f"GRANT SELECT (status, created_at) ON app.jobs TO {role};"
    counts = guard.read_refusal(
        "tenant_counts",
        "app.jobs",
        jobs,
        ["tenant_id", "status", "created_at", "status"],
        "tenants",
    )
    assert counts == HiddenFact(
        "tenant_counts",
        "app.jobs",
        f"tenants not read: {role} lacks SELECT on status, created_at of app.jobs: {grant}",
        (grant,),
    )
    read = "SELECT tenant_id, count(*) FROM app.jobs WHERE status = 'queued' GROUP BY 1"
    assert shop.refused(read) == "permission denied for table jobs"
    assert guard.read_refusal("tenant_counts", "app.jobs", jobs, ["id", "tenant_id"], "x") is None
    assert shop.refused("SELECT id, tenant_id FROM app.jobs") is None

    usage = f"GRANT USAGE ON SCHEMA hidden TO {role};"
    rotation = guard.read_refusal("tenant_rotation", "app.jobs", hidden, ["id"], "the rotation")
    assert rotation == HiddenFact(
        "tenant_rotation",
        "app.jobs",
        f"the rotation not read: {role} lacks USAGE on schema hidden of hidden.jobs: {usage}",
        (usage,),
    )

    shop.db.execute(grant)
    shop.db.execute(usage)
    after = shop.guard()
    assert (
        after.read_refusal("tenant_counts", "app.jobs", jobs, ["status", "created_at"], "t") is None
    )
    assert after.read_refusal("tenant_rotation", "app.jobs", hidden, ["id"], "r") is None
    assert shop.refused(read) is None
    assert shop.refused("SELECT id FROM hidden.jobs") is None


def test_a_table_found_later_is_guarded_once_remembered(shop: Shop) -> None:
    tasks = shop.relids["app.tasks"]
    guard = Guard(shop.role, Locks(), {}, dict(shop.relids))
    assert guard.read_refusal("tenant_rotation", "app.jobs", tasks, ["state"], "r") is None
    with connect(shop.monitor.dsn, SessionLimits()) as conn:
        later = guard.with_access(read_access(conn, [tasks]))
    assert later.read_refusal("tenant_rotation", "app.jobs", tasks, ["state"], "r") is not None
    assert guard.read_refusal("tenant_rotation", "app.jobs", tasks, ["state"], "r") is None
    # Privileges that could not be read stay unread.
    blind = Guard(shop.role, Locks(), None, {})
    assert blind.with_access(shop.access()).access is None


# --- other sessions' locks -----------------------------------------------------------------------


def test_access_exclusive_blocks_every_read_and_the_guard_names_the_holder(shop: Shop) -> None:
    r = shop.relids
    with holding(shop.db, "LOCK TABLE app.open_jobs IN ACCESS EXCLUSIVE MODE") as pid:
        with connect(shop.monitor.dsn, SessionLimits()) as conn:
            locks = read_locks(conn)
        guard = shop.guard(locks)
        holder = f"pid {pid} holds AccessExclusiveLock on app.open_jobs (idle in transaction, "
        assert guard.index_definitions(queue("app.jobs")) is None  # not locked
        claim, explain = claim_on("app.open_jobs")
        found = [
            guard.index_definitions(queue("app.open_jobs")),
            guard.plan_refusal(queue("app.open_jobs"), claim),
            guard.read_refusal(
                "tenant_counts", "app.open_jobs", r["app.open_jobs"], ["id"], "tenants"
            ),
            guard.live_set(queue("app.open_jobs", None), jobs_table("app.open_jobs"), []),
        ]
        hidden = [h for h in found if isinstance(h, HiddenFact)]
        assert [(h.fact, h.queue, h.blocker_pid) for h in hidden] == [
            ("index_definitions", "app.open_jobs", pid),
            ("plans", "app.open_jobs", pid),
            ("tenant_counts", "app.open_jobs", pid),
            ("live_set", "app.open_jobs", pid),
        ]
        assert [h.reason.split(holder)[0] for h in hidden] == [
            "indexes not read: ",
            "not planned: ",
            "tenants not read: ",
            "live predicate unknown: the partial index predicates were not read: ",
        ]
        assert all(h.grants == () for h in hidden)
        # PostgreSQL agrees: each of these would wait.
        for sql in (explain, "SELECT pg_get_indexdef('app.open_jobs_pkey'::regclass)",
                    "SELECT id FROM app.open_jobs LIMIT 1"):  # fmt: skip
            assert shop.refused(sql) == "canceling statement due to lock timeout", sql
        # A lock wins over a missing privilege: the refusal names the lock.
        with holding(shop.db, "LOCK TABLE app.archive IN ACCESS EXCLUSIVE MODE") as other:
            with connect(shop.monitor.dsn, SessionLimits()) as conn:
                guard = shop.guard(read_locks(conn))
            refusal = guard.plan_refusal(queue("app.archive"), claim_on("app.archive")[0])
            assert isinstance(refusal, HiddenFact)
            assert refusal.reason.startswith(f"not planned: pid {other} holds")
            assert refusal.grants == ()


def test_a_share_lock_blocks_only_an_update_claim_s_plan(shop: Shop) -> None:
    # What CREATE INDEX (without CONCURRENTLY) takes.
    r = shop.relids
    with holding(shop.db, "LOCK TABLE app.open_jobs IN SHARE MODE") as pid:
        with connect(shop.monitor.dsn, SessionLimits()) as conn:
            guard = shop.guard(read_locks(conn))
        select, select_explain = claim_on("app.open_jobs")
        update, update_explain = claim_on("app.open_jobs", "update")
        assert guard.plan_refusal(queue("app.open_jobs"), select) is None
        refusal = guard.plan_refusal(queue("app.open_jobs"), update)
        assert isinstance(refusal, HiddenFact) and refusal.fact == "plans"
        assert refusal.reason.startswith(
            f"not planned: pid {pid} holds ShareLock on app.open_jobs ("
        )
        assert (
            guard.read_refusal("tenant_counts", "app.open_jobs", r["app.open_jobs"], ["id"], "t")
            is None
        )
        assert guard.index_definitions(queue("app.open_jobs")) is None
        assert shop.refused(select_explain) is None
        assert shop.refused(update_explain) == "canceling statement due to lock timeout"
        assert shop.refused("SELECT count(*) FROM app.open_jobs") is None


def test_a_lock_on_one_of_the_table_s_indexes_blocks_plans_and_reads_not_its_definitions(
    shop: Shop,
) -> None:
    shop.db.execute(f'GRANT SELECT, UPDATE ON app.jobs TO "{shop.role}"')
    # REINDEX INDEX: ACCESS EXCLUSIVE on the index, SHARE on its table.
    with holding(shop.db, "REINDEX INDEX app.jobs_queued") as pid:
        with connect(shop.monitor.dsn, SessionLimits()) as conn:
            guard = shop.guard(read_locks(conn))
        claim, explain = claim_on("app.jobs")
        refusal = guard.plan_refusal(queue("app.jobs"), claim)
        assert isinstance(refusal, HiddenFact) and refusal.fact == "plans"
        assert refusal.reason.startswith(
            f"not planned: pid {pid} holds AccessExclusiveLock on app.jobs_queued ("
        )
        assert guard.index_definitions(queue("app.jobs")) is None
        jobs = shop.relids["app.jobs"]
        read = guard.read_refusal("tenant_counts", "app.jobs", jobs, ["id"], "t")
        assert read is not None and read.fact == "tenant_counts"
        # PostgreSQL agrees: planning and reading the table open its indexes, and wait; the
        # table's size and the index's definition do not.
        assert shop.refused(explain) == "canceling statement due to lock timeout"
        assert shop.refused("SELECT id FROM app.jobs WHERE id = 1") == (
            "canceling statement due to lock timeout"
        )
        assert shop.refused("SELECT pg_table_size('app.jobs')") is None
        assert shop.refused("SELECT pg_get_indexdef('app.jobs_queued'::regclass)") is None


# --- what the snapshot lacks ----------------------------------------------------------------------


def jobs_table(name: str, *indexes: Index) -> Table:
    """The table facts of ``name`` as the collector has them (only what the guard reads)."""
    schema, table = name.split(".")
    return Table(schema, table, 400.0, 3, 65536, {}, TableStats(n_live_tup=400), (), indexes)


def live_index(reltuples: float) -> Index:
    return Index("jobs_queued", "CREATE INDEX jobs_queued ON app.jobs (created_at) WHERE ...",
                 ("created_at",), "(status = 'queued'::text)", False, False, False, True, 16384,
                 reltuples, 0, 0, 0)  # fmt: skip


def test_a_hidden_live_column_without_a_counted_index_hides_the_live_set(shop: Shop) -> None:
    role = '"' + shop.role + '"'
    grant = f"GRANT SELECT (status) ON app.jobs TO {role};"
    guard = shop.guard()
    # The partial index on the live predicate counts the live rows: no need for pg_stats.
    assert guard.live_set(queue("app.jobs"), jobs_table("app.jobs", live_index(100.0)), []) is None
    # Not counted yet (never vacuumed nor analyzed), or none: pg_stats of status, hidden.
    uncounted = guard.live_set(queue("app.jobs"), jobs_table("app.jobs", live_index(-1.0)), [])
    assert uncounted is not None
    assert (
        guard.live_set(queue("app.jobs"), jobs_table("app.jobs"), [])
        == uncounted
        == (
            HiddenFact(
                "live_set",
                "app.jobs",
                f"live set unknown: pg_stats of status is hidden from {role} (it shows a column "
                "only to roles that may read it) and no partial index on the live predicate counts "
                f"the live rows: {grant}",
                (grant,),
            )
        )
    )
    assert "status" not in shop.visible_stats("app.jobs")
    # A column the role may read: its statistics are there.
    assert guard.live_set(queue("app.open_jobs"), jobs_table("app.open_jobs"), []) is None
    assert "status" in shop.visible_stats("app.open_jobs")

    shop.db.execute(grant)
    assert "status" in shop.visible_stats("app.jobs")
    assert shop.guard().live_set(queue("app.jobs"), jobs_table("app.jobs"), []) is None


def test_an_unknown_live_predicate_behind_hidden_status_values_names_the_grant(
    shop: Shop,
) -> None:
    role = '"' + shop.role + '"'
    columns = candidates(shop.monitor)
    by_name = {(c.schema, c.table, c.column): c for c in columns}
    assert not by_name[("app", "jobs", "status")].readable
    assert by_name[("app", "open_jobs", "status")].readable
    guard = shop.guard()
    open_jobs = guard.live_set(queue("app.open_jobs", None), jobs_table("app.open_jobs"), columns)
    assert open_jobs is None
    grant = f"GRANT SELECT (status) ON app.jobs TO {role};"
    assert guard.live_set(queue("app.jobs", None), jobs_table("app.jobs"), columns) == (
        HiddenFact(
            "live_set",
            "app.jobs",
            f"live predicate unknown: the values of status are hidden from {role} (pg_stats "
            f"shows a column only to roles that may read it): {grant}",
            (grant,),
        )
    )
    # An enum's labels are in the catalog, readable by all: nothing is hidden then.
    flagged = by_name[("app", "flagged", "status")]
    assert not flagged.readable and flagged.enum_labels == ("queued", "done")
    assert guard.live_set(queue("app.flagged", None), jobs_table("app.flagged"), columns) is None


def test_tables_discovery_could_not_judge_are_named_with_the_grant(shop: Shop) -> None:
    role = '"' + shop.role + '"'
    columns = candidates(shop.monitor)
    guard = shop.guard()
    found = guard.discovery(columns, [], [queue("app.open_jobs")])
    tasks = f"GRANT SELECT (state) ON app.tasks TO {role};"
    tasks_reason = (
        f"app.tasks was not judged as a queue: the values of state are hidden from {role}: {tasks}"
    )
    # app.tasks: state is indexed. app.jobs: status is hidden but neither indexed nor claimed,
    # app.archive the same; hidden.jobs: status is readable; open_jobs is a queue already.
    assert found == [HiddenFact("discovery", None, tasks_reason, (tasks,))]
    assert shop.guard().discovery(columns, [], [queue("app.tasks")]) == []
    assert shop.visible_stats("app.tasks") == set()

    # A claim on app.jobs makes it worth judging; an unqualified one matches any schema.
    claim = discover.Claim(shop.relids["app.jobs"], "app", "jobs", "--query 1", ())
    elsewhere = discover.Claim(0, "other", "archive", "--query 2", ())
    unqualified = discover.Claim(shop.relids["app.archive"], None, "archive", "--query 3", ())  # type: ignore[arg-type]
    found = guard.discovery(columns, [claim, elsewhere, unqualified], [])
    assert sorted(h.reason.split(":")[0] for h in found) == [
        "app.archive was not judged as a queue",
        "app.jobs was not judged as a queue",
        "app.tasks was not judged as a queue",
    ]
    shop.db.execute(tasks)
    assert shop.visible_stats("app.tasks") == {"state"}
    assert shop.guard().discovery(candidates(shop.monitor), [], []) == []


def test_statements_and_the_horizon_hidden_from_a_role_without_read_all_stats(
    shop: Shop,
) -> None:
    nobody = shop.nobody
    guard = Guard(nobody.user, Locks(), shop.access(nobody), dict(shop.relids))
    read_all_stats = f"GRANT pg_read_all_stats TO {nobody.user};"
    found = [*guard.statements(None), *guard.statements([queue("app.jobs"), queue("app.tasks")])]
    statements = (
        f"no dequeue statement known: pg_stat_statements shows {nobody.user} the text of its "
        f"own statements only: {read_all_stats} (pg_monitor includes it), or give the claim "
        "with --query"
    )
    assert guard.horizon(reads_all_stats=True) is None
    horizon = (
        f"sessions of other roles show {nobody.user} their transaction ids in "
        "pg_stat_activity but not their state, type or start, so a transaction holding the "
        f"xmin horizon cannot be judged: {read_all_stats} (pg_monitor includes it)"
    )
    assert [*found, guard.horizon(reads_all_stats=False)] == [
        HiddenFact("statements", None, statements, (read_all_stats,)),
        HiddenFact("statements", "app.jobs", statements, (read_all_stats,)),
        HiddenFact("statements", "app.tasks", statements, (read_all_stats,)),
        HiddenFact("horizon", None, horizon, (read_all_stats,)),
    ]

    # What the server shows: another role's open transaction and its statement texts.
    with other_transaction(shop.db) as pid:
        assert seen(nobody, pid) == HIDDEN
        # pg_monitor includes pg_read_all_stats: the transaction is judged, its text read.
        assert seen(shop.monitor, pid) == SHOWN
        shop.db.execute(read_all_stats)
        assert seen(nobody, pid) == SHOWN


# (backend_type, state, xact_start known, a statement text of another role read)
HIDDEN = (None, None, False, False)
SHOWN = ("client backend", "idle in transaction", True, True)
CLAIM_TEXT = "%FROM app.jobs WHERE status = $1 LIMIT $2 FOR UPDATE%"


@contextlib.contextmanager
def other_transaction(db: TestDB) -> Iterator[int]:
    """The superuser's session in a transaction that holds the xmin horizon (it has an xid),
    after a claim recorded by pg_stat_statements; its pid."""
    db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    with db.connect() as other:
        other.execute("BEGIN")
        other.execute("SELECT id FROM app.jobs WHERE status = 'queued' LIMIT 1 FOR UPDATE")
        row = other.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        yield int(row[0])
        other.execute("ROLLBACK")


def seen(who: RoleDB, pid: int) -> tuple[Any, ...]:
    """What ``who`` sees of session ``pid``: what horizon.sql needs to judge a transaction, and
    whether pg_stat_statements shows it the claim's text."""
    with psycopg.connect(who.dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT backend_type, state, xact_start IS NOT NULL FROM pg_stat_activity"
            " WHERE pid = %s",
            [pid],
        ).fetchone()
        texts = conn.execute(
            "SELECT query FROM pg_stat_statements WHERE query LIKE %s", [CLAIM_TEXT]
        ).fetchall()
    assert row is not None
    return (*row, bool(texts))


def test_sessions_of_other_roles_show_what_the_horizon_record_says(shop: Shop) -> None:
    # Their transaction ids, yes; their backend type, state and start, no.
    with other_transaction(shop.db) as pid, psycopg.connect(shop.nobody.dsn) as conn:
        row = conn.execute(
            "SELECT backend_xid IS NOT NULL, backend_type, state, xact_start"
            " FROM pg_stat_activity WHERE pid = %s",
            [pid],
        ).fetchone()
    assert row == (True, None, None, None)
    nobody = Guard(shop.nobody.user, Locks(), shop.access(shop.nobody), dict(shop.relids))
    record = nobody.horizon(reads_all_stats=False)
    assert record is not None
    assert "show " + shop.nobody.user + " their transaction ids" in record.reason
    assert "but not their state, type or start" in record.reason


# --- queues without a known claim (pure) ---------------------------------------------------------

QUEUES = [queue("app.jobs"), queue("public.jobs"), queue("app.tasks"), queue("app.Mixed")]


def stmt(sql: str, **kw: Any) -> Statement:
    return Statement("--query", sql, analyse(sql), **kw)


def names(queues: list[Queue]) -> list[str]:
    return [q.qualified for q in queues]


def test_a_queue_is_claimed_by_a_statement_on_it_resolved_or_named() -> None:
    assert names(unclaimed(QUEUES, [])) == ["app.jobs", "public.jobs", "app.tasks", "app.Mixed"]
    resolved = stmt("SELECT id FROM jobs LIMIT 1 FOR UPDATE SKIP LOCKED", queue="app.jobs")
    # Its names were resolved under a search_path: public.jobs is not what it meant.
    assert names(unclaimed(QUEUES, [resolved])) == ["public.jobs", "app.tasks", "app.Mixed"]
    qualified = stmt("SELECT id FROM app.tasks LIMIT 1 FOR UPDATE SKIP LOCKED")
    assert names(unclaimed(QUEUES, [qualified])) == ["app.jobs", "public.jobs", "app.Mixed"]
    # Not resolved: an unqualified name may be the table of that name in any schema.
    loose = stmt("SELECT id FROM jobs LIMIT 1 FOR UPDATE SKIP LOCKED")
    assert names(unclaimed(QUEUES, [loose])) == ["app.tasks", "app.Mixed"]


def test_every_queue_table_a_statement_names_counts_wherever_it_is_named() -> None:
    # The lock is on the tenant row; the statement still claims from the queue it reads.
    tenant = stmt(
        "SELECT id FROM app.tenants WHERE id IN (SELECT tenant_id FROM app.tasks) "
        "LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    assert names(unclaimed(QUEUES, [tenant])) == ["app.jobs", "public.jobs", "app.Mixed"]


def test_names_fold_as_postgresql_folds_them() -> None:
    quoted = stmt('SELECT id FROM app."Mixed" LIMIT 1 FOR UPDATE SKIP LOCKED')
    assert "app.Mixed" not in names(unclaimed(QUEUES, [quoted]))
    folded = stmt("SELECT id FROM app.MIXED LIMIT 1 FOR UPDATE SKIP LOCKED")
    assert "app.Mixed" in names(unclaimed(QUEUES, [folded]))
    upper = stmt("SELECT id FROM APP.TASKS LIMIT 1 FOR UPDATE SKIP LOCKED")
    assert "app.tasks" not in names(unclaimed(QUEUES, [upper]))
    # The same for a table named elsewhere than as the claimed one.
    inner = stmt(
        "SELECT id FROM app.tenants WHERE id IN (SELECT tenant_id FROM APP.TASKS) AND id IN "
        '(SELECT tenant_id FROM app."Mixed") AND id IN (SELECT tenant_id FROM app."JOBS") '
        "LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    assert names(unclaimed(QUEUES, [inner])) == ["app.jobs", "public.jobs"]


def test_a_statement_that_was_not_parsed_claims_nothing() -> None:
    unread = Statement("--query", "SELECT id FROM app.jobs FOR UPDATE", None, queue="app.jobs")
    assert names(unclaimed(QUEUES, [unread])) == names(QUEUES)


def test_an_exclusive_lock_blocks_the_scan_of_a_role_without_update_too(shop: Shop) -> None:
    # REFRESH MATERIALIZED VIEW CONCURRENTLY's mode: it lets ACCESS SHARE through, not ROW
    # SHARE, which the PREPARE of the claim with its locks takes before its scan is planned.
    role = '"' + shop.role + '"'
    shop.db.execute(f"GRANT SELECT (created_at, status) ON app.jobs TO {role}")
    claim, _ = claim_on("app.jobs")
    assert isinstance(shop.guard().plan_refusal(queue("app.jobs"), claim), PlanForm)
    with holding(shop.db, "LOCK TABLE app.jobs IN EXCLUSIVE MODE") as pid:
        with connect(shop.monitor.dsn, SessionLimits()) as conn:
            guard = shop.guard(read_locks(conn))
        refusal = guard.plan_refusal(queue("app.jobs"), claim)
        assert isinstance(refusal, HiddenFact) and refusal.blocker_pid == pid
        # PostgreSQL agrees: PREPARE of the claim waits, the read of the columns does not.
        prepare = f"PREPARE qa_probe AS {claim.text}"
        assert shop.refused(prepare) == "canceling statement due to lock timeout"
        assert shop.refused("SELECT status FROM app.jobs LIMIT 1") is None
