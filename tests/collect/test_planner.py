"""qadvisor.collect.planner on real servers: plan_statements plans each claim custom and generic
in a rolled-back transaction of the read-only session, never executing it (unless asked to
EXPLAIN ANALYZE, and then rolled back), under the statement's own search_path; a plan that
cannot be made is one line of plan_error and the others are still planned; a statement the
guard refuses is not sent, and the refused fact comes back with the plans."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import replace as replace_node

import psycopg
import pytest

from qadvisor.collect.access import Guard, read_access
from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.collect.locks import Locks
from qadvisor.collect.planner import PREPARED_NAME, Refuse, plan_statements
from qadvisor.collect.queries import Read
from qadvisor.collect.snapshot import collect
from qadvisor.model import HiddenFact, PlanNode, Queue, Statement, Table
from qadvisor.sql.dequeue import DequeueStatement, analyse
from tests.conftest import TestDB
from tests.shapes import RoleDB

CLAIM = "SELECT id FROM jobs WHERE status = $1 ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
UPDATE_CLAIM = (
    "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs WHERE status = $1 "
    "ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING id"
)


def build(db: TestDB, schema: str = "public") -> None:
    """A queue of 20,000 jobs, 1 % queued, with the live-set index ``jobs_queued`` (the
    partial index on the queued rows) and one on the retried ones, analyzed."""
    db.execute(
        f"""
        CREATE SCHEMA IF NOT EXISTS {schema};
        CREATE TABLE {schema}.jobs (
            id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            status     text        NOT NULL DEFAULT 'queued',
            created_at timestamptz NOT NULL DEFAULT now()
        ) WITH (autovacuum_enabled = false);
        INSERT INTO {schema}.jobs (status, created_at)
        SELECT CASE WHEN g % 100 = 0 THEN 'queued' WHEN g % 100 = 1 THEN 'retry' ELSE 'done' END,
               now() - make_interval(secs => 20000 - g)
          FROM generate_series(1, 20000) AS g;
        CREATE INDEX jobs_queued ON {schema}.jobs (created_at) WHERE status = 'queued';
        CREATE INDEX jobs_retry ON {schema}.jobs (created_at) WHERE status = 'retry';
        ANALYZE {schema}.jobs;
        """
    )
    # Counted once the session that wrote them has reported its counters (it does so as it
    # ends, which the next session may come before): the tests that count writes start here.
    db.wait_for_stats(f"{schema}.jobs", lambda r: r["n_tup_ins"] >= 20_000)


def facts(db: TestDB, table: str = "public.jobs") -> tuple[tuple[Queue, ...], tuple[Table, ...]]:
    """The queue and its table facts, as collection reads them before planning."""
    with connect(db.dsn, SessionLimits()) as conn:
        snap = collect(conn, [table])
    return snap.queues, snap.tables


def claim(sql: str, queue: str = "public.jobs", search_path: str | None = None) -> Statement:
    """A --query statement whose names resolved to ``queue`` (under ``search_path``)."""
    parsed = analyse(sql)
    return Statement("--query 1", sql, parsed, queue=queue, search_path=search_path)


def plan(
    db: TestDB,
    statements: Sequence[Statement],
    *,
    analyze: bool = False,
    refuse: Refuse | None = None,
    limits: SessionLimits | None = None,
    table: str = "public.jobs",
) -> Read[tuple[Statement, ...]]:
    queues, tables = facts(db, table)
    with connect(db.dsn, limits or SessionLimits()) as conn:
        read = plan_statements(conn, statements, queues, tables, analyze, refuse)
        # Nothing prepared outlives planning, and the session is still read-only.
        left = "SELECT count(*) FROM pg_prepared_statements WHERE name = %s"
        assert conn.execute(left, [PREPARED_NAME]).fetchone() == (0,)
        assert conn.execute("SHOW transaction_read_only").fetchone() == ("on",)
    return read


def statuses(db: TestDB) -> list[tuple[object, ...]]:
    return db.execute("SELECT status, count(*) FROM jobs GROUP BY status ORDER BY status")


def nodes(stmt: Statement, which: str) -> list[tuple[str, str | None]]:
    root = getattr(stmt, which)
    assert root is not None, (which, stmt.plan_error)
    return [(n.node_type, n.index) for n in root.walk()]


def test_a_claim_is_planned_custom_and_generic_and_never_run(db: TestDB) -> None:
    build(db)
    before = statuses(db)
    read = plan(db, [claim(CLAIM), claim(UPDATE_CLAIM)])
    select, update = read.value
    assert read.unavailable == {} and read.hidden == ()
    for stmt in (select, update):
        assert stmt.plan_error is None, stmt.plan_error
        # The live value for the status, LIMIT 1 for the limit: the plan of a real claim.
        assert stmt.custom_values["1"] == "'queued'"
        assert ("Index Scan", "jobs_queued") in nodes(stmt, "custom_plan")
        assert stmt.generic_plan is not None and stmt.analyzed_plan is None
        # The planner was asked, per partial index, whether the conditions can use it: the
        # other one's order is the live-set index's, so the answer is no proof either way.
        assert stmt.index_probes == {
            "jobs_queued": "proved",
            "jobs_retry": "undecided: the planner chose jobs_queued, which has the same order",
        }
    assert update.custom_values["2"] == "1"
    # A bound status: the generic plan cannot choose the partial index on one value.
    assert ("Index Scan", "jobs_queued") not in nodes(select, "generic_plan")
    assert statuses(db) == before


def test_a_literal_status_is_planned_with_its_own_index(db: TestDB) -> None:
    build(db)
    sql = CLAIM.replace("$1", "'retry'")
    (stmt,) = plan(db, [claim(sql)]).value
    assert stmt.custom_values == {}
    assert ("Index Scan", "jobs_retry") in nodes(stmt, "custom_plan")
    assert nodes(stmt, "generic_plan") == nodes(stmt, "custom_plan")  # nothing to bind
    assert stmt.index_probes == {
        "jobs_queued": "undecided: the planner chose jobs_retry, which has the same order",
        "jobs_retry": "proved",
    }


def table_counters(db: TestDB) -> tuple[int, int, int]:
    """What the server counts of the writes to jobs (inserted, updated, deleted rows), aborted
    writes included."""
    (row,) = db.execute(
        "SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables"
        " WHERE relid = 'public.jobs'::regclass"
    )
    return (int(row[0]), int(row[1]), int(row[2]))


def writes_since(db: TestDB, counted: tuple[int, int, int]) -> tuple[int, int, int]:
    """The writes to jobs counted since ``counted``, read once a control write of one row,
    made and rolled back by a session that has ended since, is counted: sessions report
    their counters when they end, so the earlier ones have been counted by then."""
    with (
        psycopg.connect(db.dsn, autocommit=True) as control,
        control.transaction(force_rollback=True),
    ):
        control.execute("UPDATE jobs SET status = status WHERE id = 1")
    deadline = time.monotonic() + 10
    while True:
        now = table_counters(db)
        if now[1] > counted[1] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert now[1] > counted[1], "the control write was never counted"
    return (now[0] - counted[0], now[1] - counted[1] - 1, now[2] - counted[2])


DELETE_CLAIM = (
    "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE status = $1 ORDER BY created_at "
    "LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING id"
)
PLAIN_UPDATE = "UPDATE jobs SET status = 'running' WHERE status = $1 RETURNING id"
NO_SKIP = "SELECT id FROM jobs WHERE status = $1 ORDER BY created_at LIMIT 1 FOR UPDATE"


def test_analyze_executes_only_the_read_only_scan_of_the_claim(db: TestDB) -> None:
    build(db)
    before, counted = statuses(db), table_counters(db)
    update, delete = plan(db, [claim(UPDATE_CLAIM), claim(DELETE_CLAIM)], analyze=True).value
    for stmt in (update, delete):
        assert stmt.plan_error is None, stmt.plan_error
        assert stmt.analyzed_plan is not None and stmt.analyzed_ms is not None
        nodes_run = [n.node_type for n in stmt.analyzed_plan.walk()]
        # The scan that finds the job ran; nothing locked, updated or deleted a row.
        assert "LockRows" not in nodes_run and "ModifyTable" not in nodes_run, nodes_run
        assert stmt.analyzed_plan.actual_rows == 1
    assert statuses(db) == before
    # Not even an aborted write: the server's own counters did not move.
    assert writes_since(db, counted) == (0, 0, 0)


def test_analyze_never_executes_a_statement_that_would_write(db: TestDB) -> None:
    build(db)
    counted = table_counters(db)
    # An UPDATE that locks its rows in no SELECT is no claim qadvisor plans, and so nothing of
    # it runs either (read_only_scan would have no read-only form of it).
    (stmt,) = plan(db, [claim(PLAIN_UPDATE)], analyze=True).value
    assert stmt.parsed is None and stmt.analyzed_plan is None
    assert writes_since(db, counted) == (0, 0, 0)


def test_analyze_neither_waits_on_a_worker_nor_makes_one_wait(db: TestDB) -> None:
    build(db)
    with db.connect() as worker, db.connect() as second:
        worker.autocommit = False
        # A worker holds every queued job in its transaction; the claim has no SKIP LOCKED.
        worker.execute("SELECT id FROM jobs WHERE status = 'queued' FOR UPDATE")
        started = time.monotonic()
        (stmt,) = plan(db, [claim(NO_SKIP)], analyze=True).value
        took = time.monotonic() - started
        assert stmt.plan_error is None, stmt.plan_error
        assert stmt.analyzed_plan is not None and stmt.analyzed_plan.actual_rows == 1
        # Executing the claim itself would have waited for the worker until lock_timeout.
        second.execute("SET lock_timeout = '200ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            second.execute(NO_SKIP.replace("$1", "'queued'"))
        second.rollback()
        worker.rollback()
    assert took < 5, took
    # Nor did qadvisor's run hold a row lock another session would wait for: none is left,
    # and none was taken (no LockRows ran).
    assert db.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'tuple'") == [(0,)]


def test_a_plan_that_fails_is_one_line_and_the_others_are_planned(db: TestDB) -> None:
    build(db)
    broken = claim(CLAIM.replace("ORDER BY created_at", "ORDER BY enqueued_at"))
    first, second = plan(db, [broken, claim(CLAIM)]).value
    assert first.plan_error is not None and "\n" not in first.plan_error
    assert first.plan_error.startswith("PREPARE failed: column"), first.plan_error
    assert "enqueued_at" in first.plan_error
    assert first.custom_plan is None and first.generic_plan is None
    assert second.plan_error is None and second.custom_plan is not None


def test_a_lock_of_another_session_is_a_lock_timeout_not_a_wait(db: TestDB) -> None:
    build(db)
    with db.connect() as holder, holder.transaction():
        holder.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
        (stmt,) = plan(db, [claim(CLAIM)], limits=SessionLimits(lock_timeout_ms=100)).value
    assert stmt.plan_error == (
        "PREPARE: lock_timeout expired (another session holds a lock on the table)"
    )


def test_a_refused_statement_is_not_sent_and_its_fact_comes_back(db: TestDB) -> None:
    build(db)
    asked: list[tuple[str, str]] = []

    def refuse(queue: Queue, parsed: DequeueStatement) -> HiddenFact | None:
        asked.append((queue.qualified, parsed.table))
        if "LIMIT $2" not in parsed.text:
            return None
        return HiddenFact("plans", queue.qualified, "not planned: a test says so")

    # Planning this one would fail on the server: refused, it never gets there.
    refused = claim(UPDATE_CLAIM.replace("ORDER BY created_at", "ORDER BY enqueued_at"))
    read = plan(db, [refused, claim(CLAIM), refused], refuse=refuse)
    first, planned, again = read.value
    assert first.plan_error == again.plan_error == "not planned: a test says so"
    assert first.custom_plan is None and planned.custom_plan is not None
    # One fact per refused statement (collection keeps each fact once).
    assert read.hidden == (HiddenFact("plans", "public.jobs", "not planned: a test says so"),) * 2
    assert asked == [("public.jobs", "jobs")] * 3


def test_what_is_not_a_claim_on_a_queue_is_returned_as_it_is(db: TestDB) -> None:
    build(db)
    db.execute("CREATE TABLE other (id int PRIMARY KEY, status text)")
    unresolved = Statement(source="--query 1", text=CLAIM, parsed=analyse(CLAIM))
    unparsed = Statement(source="--query 2", text="SELECT 1", plan_error="not judged as a claim")
    elsewhere = claim(CLAIM.replace("jobs", "other"), queue="public.other")
    stmts = [unresolved, unparsed, elsewhere]
    assert plan(db, stmts).value == tuple(stmts)


def test_a_statement_is_planned_under_its_own_search_path(db: TestDB) -> None:
    # The application's role resolves "jobs" to app.jobs; qadvisor's session has no such
    # table on its search_path.
    build(db, "app")
    stmt = claim(CLAIM, queue="app.jobs", search_path="app")
    (planned,) = plan(db, [stmt], table="app.jobs").value
    assert planned.plan_error is None, planned.plan_error
    assert ("Index Scan", "jobs_queued") in nodes(planned, "custom_plan")
    (lost,) = plan(db, [claim(CLAIM, queue="app.jobs")], table="app.jobs").value
    assert lost.plan_error is not None and 'relation "jobs" does not exist' in lost.plan_error


def test_the_session_stays_read_only_when_planning_fails(db: TestDB) -> None:
    build(db)
    queues, tables = facts(db)
    with connect(db.dsn, SessionLimits()) as conn:
        broken = claim(CLAIM.replace("status = $1", "status = $1 AND nope"))
        (stmt,) = plan_statements(conn, [broken], queues, tables, analyze=True).value
        assert stmt.plan_error is not None
        # The connection is still good for the rest of collection, and still read-only.
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("CREATE TABLE t (id int)")


# --- a role without UPDATE plans the scan under the claim's LockRows ---------------------------

SCAN_SHAPES = {
    "select": CLAIM,
    "update =": UPDATE_CLAIM,
    "update in": (
        "UPDATE jobs SET status = 'running' WHERE id IN (SELECT id FROM jobs WHERE status = $1 "
        "ORDER BY created_at LIMIT 10 FOR UPDATE SKIP LOCKED) RETURNING *"
    ),
    "cte": (
        "WITH next AS (SELECT id FROM jobs WHERE status = $1 ORDER BY created_at LIMIT 5 "
        "FOR UPDATE SKIP LOCKED) UPDATE jobs SET status = 'running' FROM next "
        "WHERE jobs.id = next.id RETURNING jobs.*"
    ),
    "select *": (
        "SELECT * FROM jobs WHERE status = $1 AND created_at < now() ORDER BY created_at "
        "LIMIT 3 FOR NO KEY UPDATE SKIP LOCKED"
    ),
}


def _shape(node: PlanNode) -> tuple[object, ...]:
    """A plan subtree as its choices: node types, relations, indexes, index conditions, keys
    and estimated rows. Not its filters: a row lock keeps a partial index's implied conditions
    as a filter, to recheck a row that changed while it waited (EvalPlanQual), and a plan
    without one leaves them out; nor costs, which a LockRows node adds to. Names are taken
    without their alias (in an UPDATE the planner calls the sub-select's table ``jobs_1``), and
    ``now()`` as the printed level spells it (CURRENT_TIMESTAMP, the same function)."""

    def unaliased(text: str | None) -> str | None:
        if text is None:
            return None
        return re.sub(r"\b\w+\.", "", text).replace("CURRENT_TIMESTAMP", "now()")

    return (
        node.node_type,
        node.relation,
        node.index,
        unaliased(node.index_cond),
        tuple(unaliased(k) for k in node.sort_key),
        node.plan_rows,
        tuple(_shape(c) for c in node.children),
    )


def _without_lockrows(node: PlanNode) -> PlanNode:
    children = [_without_lockrows(c) for c in node.children]
    if node.node_type == "LockRows":
        (child,) = children
        return child
    return replace_node(node, children=tuple(children))


def test_without_update_the_plan_is_the_claim_s_own_below_its_row_locks(db: TestDB) -> None:
    """The role lacks UPDATE: each claim is planned as its locking level without its locking
    clauses, and the server's plan of that is, node for node, the plan it makes of the claim
    itself (planned by a role that may) with the LockRows node taken out, custom and generic."""
    build(db)
    role = f"{db.name}_reader"
    db.execute(
        f"CREATE ROLE {role} LOGIN IN ROLE pg_read_all_stats; GRANT SELECT ON jobs TO {role}"
    )
    try:
        reader = RoleDB(db.name, db.server, role)
        statements = [claim(sql) for sql in SCAN_SHAPES.values()]
        full = plan(db, statements).value
        queues, tables = facts(db)
        with connect(reader.dsn, SessionLimits()) as conn:
            relids = {"public.jobs": int(db.execute("SELECT 'jobs'::regclass::oid")[0][0])}
            guard = Guard(role, Locks(), read_access(conn, list(relids.values())), relids)
            read = plan_statements(conn, statements, queues, tables, False, guard.plan_refusal)
        assert read.hidden == ()
        for name, whole, scan in zip(SCAN_SHAPES, full, read.value, strict=True):
            assert whole.planned_as is None and whole.plan_error is None, name
            assert scan.plan_error is None, (name, scan.plan_error)
            assert scan.planned_as is not None and "without its row locks" in scan.planned_as
            for which in ("custom_plan", "generic_plan"):
                mine, theirs = getattr(scan, which), getattr(whole, which)
                assert mine is not None and theirs is not None
                assert not any(n.node_type == "LockRows" for n in mine.walk()), name
                below = {_shape(n) for n in _without_lockrows(theirs).walk()}
                assert _shape(mine) in below, (name, which)
            # The values bound are the claim's own, for the parameters the level has.
            assert scan.custom_values == {
                k: v for k, v in whole.custom_values.items() if k in scan.custom_values
            }
            assert scan.custom_values["1"] == "'queued'"
    finally:
        db.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")
