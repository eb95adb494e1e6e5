"""The scratch copy's statements from hand-built snapshots, and what they build on a real
server: the rows, the live set, the status values and the per-tenant counts the snapshot
measured."""

from __future__ import annotations

from dataclasses import replace

import psycopg
import pytest

from qadvisor.model import (
    Column,
    ColumnStats,
    LivePredicate,
    Queue,
    Table,
    TableStats,
    TenantCount,
    TenantFacts,
)
from qadvisor.prove.build import build
from qadvisor.prove.copy import CopyError, plan_copy
from qadvisor.prove.proofs import rounded_ratio
from qadvisor.prove.timing import time_statement
from tests import snapshots as S
from tests.conftest import TestDB

MB = 1024 * 1024
QUEUE = Queue("public", "jobs", S.PENDING, "test")
# A table vacuumed since its last claim: no dead row version for the copy to make again.
VACUUMED = TableStats(n_dead_tup=0)


def _table(reltuples: float = 10_000_000) -> Table:
    composite = S.index("jobs_status_created_at_idx", ("status", "created_at"), 300 * MB)
    pkey = S.index("jobs_pkey", ("id",), 200 * MB, is_unique=True, is_primary=True,
                   is_constraint=True)  # fmt: skip
    pkey = replace(pkey, definition="CREATE UNIQUE INDEX jobs_pkey ON public.jobs USING btree (id)")
    composite = replace(
        composite,
        definition="CREATE INDEX jobs_status_created_at_idx ON public.jobs USING btree "
        "(status, created_at)",
    )
    return S.jobs_table(reltuples=reltuples, indexes=(pkey, composite))


def test_a_large_table_is_scaled_down_with_its_live_set_whole() -> None:
    plan = plan_copy(QUEUE, _table(), None, 2_000_000)
    assert (plan.rows, plan.table_rows, plan.live) == (2_000_000, 10_000_000, 5_000)
    assert plan.scaled_down
    archive, retired, live = plan.fill
    # The 1,753,949 dead tuples the table held: the newest archive rows filled live, for the
    # build to retire after its VACUUM (their versions and index entries stay, as there).
    assert plan.dead == 1_753_949
    assert "'done'::text" in archive and "generate_series(1, 241051)" in archive
    assert "'pending'::text" in retired and "generate_series(241052, 1995000)" in retired
    assert "'pending'::text" in live and "generate_series(1995001, 2000000)" in live
    assert plan.finish[-1] == (
        "ALTER TABLE public.jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY USING INDEX jobs_pkey"
    )


def test_what_the_snapshot_cannot_say_is_refused_with_why() -> None:
    unknown = replace(QUEUE, live=None)
    with pytest.raises(CopyError, match="live set is not known"):
        plan_copy(unknown, _table(), None, 2_000_000)
    # No value outside the live set is known: the archive's rows cannot be made.
    table = replace(_table(), column_stats=())
    ranged = replace(QUEUE, live=LivePredicate("status", "<", ("5",), "test"))
    with pytest.raises(CopyError):
        plan_copy(ranged, table, None, 2_000_000)


def test_ratio_is_rounded_to_three_digits_and_none_without_an_after() -> None:
    assert rounded_ratio(9600.0, 1.2) == 8000.0
    assert rounded_ratio(0.052, 0.049) == 1.06
    assert rounded_ratio(1.0, None) is None and rounded_ratio(1.0, 0.0) is None


def test_the_copy_built_on_a_server_has_the_measured_shape(db: TestDB) -> None:
    """An enum status with two live values, a tenant column with three tenants counted and two
    idle ones in the rotation: the copy's rows are what the snapshot says."""
    columns = (
        Column("id", "bigint", True),
        Column("tenant_id", "integer", True),
        Column("state", "job_state", True, ("available", "retryable", "completed")),
        Column("inserted_at", "timestamp with time zone", True),
        Column("attempt", "integer", True),
        Column("args", "jsonb", True),
        Column("blocked", "boolean", True),
    )
    stats = (
        ColumnStats(
            "state", 0.0, 3.0, 4, ("completed", "available", "retryable"), (0.99, 0.006, 0.004)
        ),
        # pg_stats spells a boolean's values t and f (procrastinate's aged database has one).
        ColumnStats("blocked", 0.0, 1.0, 1, ("f",), (1.0,)),
    )
    table = replace(
        S.jobs_table(reltuples=100_000, pending_freq=None),
        columns=columns,
        column_stats=stats,
        indexes=(),
        stats=VACUUMED,
    )
    live = LivePredicate("state", "in", ("available", "retryable"), "test")
    queue = Queue("public", "jobs", live, "test")
    tenants = TenantFacts(
        "public", "jobs", "tenant_id",
        live_by_tenant=(TenantCount("1", 600), TenantCount("2", 300), TenantCount("3", 100)),
        idle_tenants=2,
    )  # fmt: skip
    plan = plan_copy(queue, table, tenants, 1_000_000)
    with db.connect() as conn:
        for stmt in (*plan.schema, *plan.fill, *plan.finish):
            conn.execute(stmt.encode())
    assert db.execute("SELECT count(*) FROM jobs") == [(100_000,)]
    by_state = dict(db.execute("SELECT state::text, count(*) FROM jobs GROUP BY 1"))
    assert by_state["available"] + by_state["retryable"] == plan.live == 1_000
    assert by_state["completed"] == 99_000
    live_tenants = db.execute(
        "SELECT tenant_id, count(*) FROM jobs WHERE state <> 'completed' GROUP BY 1 ORDER BY 1"
    )
    assert live_tenants == [(1, 600), (2, 300), (3, 100)]
    # The archive spreads over every tenant, the idle ones too.
    assert db.execute("SELECT count(DISTINCT tenant_id) FROM jobs") == [(5,)]
    # Arrival order: the live rows are the newest.
    newest = db.execute("SELECT state::text FROM jobs ORDER BY inserted_at DESC, id DESC LIMIT 1")
    assert newest[0][0] in ("available", "retryable")
    assert db.execute("SELECT count(DISTINCT id) FROM jobs") == [(100_000,)]
    assert db.execute("SELECT count(*) FROM jobs WHERE NOT blocked") == [(100_000,)]


def _pgboss_like(reltuples: float) -> tuple[Queue, Table]:
    """pg-boss's shape: an enum in the order of a job's life, the live set a range over it."""
    labels = ("created", "retry", "active", "completed", "cancelled", "failed")
    columns = (
        Column("id", "uuid", True),
        Column("state", "job_state", True, labels),
        Column("created_on", "timestamp with time zone", True),
    )
    stats = (
        ColumnStats("state", 0.0, 3.0, 4, ("completed", "created", "retry"), (0.98, 0.015, 0.005)),
    )
    table = replace(
        S.jobs_table(reltuples=reltuples, pending_freq=None),
        columns=columns,
        column_stats=stats,
        indexes=(),
        stats=VACUUMED,
    )
    live = LivePredicate("state", "<", ("active",), "test")
    return Queue("public", "jobs", live, "test"), table


def test_a_range_over_an_enum_is_filled_with_the_labels_it_holds(db: TestDB) -> None:
    queue, table = _pgboss_like(50_000)
    plan = plan_copy(queue, table, None, 1_000_000)
    assert plan.live == 1_000 and "SET state = 'completed'::job_state" in plan.claim
    with db.connect() as conn:
        for stmt in (*plan.schema, *plan.fill, *plan.finish):
            conn.execute(stmt.encode())
    by_state = dict(db.execute("SELECT state::text, count(*) FROM jobs GROUP BY 1"))
    assert by_state == {"created": 500, "retry": 500, "completed": 49_000}, by_state
    assert db.execute("SELECT count(*) FROM jobs WHERE state < 'active'") == [(1_000,)]


def test_a_union_of_conditions_fills_live_rows_by_the_one_holding_most(db: TestDB) -> None:
    """Agenda's shape: no status column; a job waits while next_run_at is set and runs while
    locked_at is set. Live rows meet the condition statistics say holds more rows."""
    columns = (
        Column("id", "bigint", True),
        Column("next_run_at", "timestamp with time zone"),
        Column("locked_at", "timestamp with time zone"),
    )
    stats = (
        ColumnStats("next_run_at", 0.98, -0.02, 8, (), ()),
        ColumnStats("locked_at", 0.999, -0.001, 8, (), ()),
    )
    table = replace(
        S.jobs_table(reltuples=50_000, pending_freq=None),
        columns=columns,
        column_stats=stats,
        indexes=(),
        stats=VACUUMED,
    )
    either = LivePredicate.any_of(
        (
            LivePredicate("locked_at", "is not null", (), "test"),
            LivePredicate("next_run_at", "is not null", (), "test"),
        ),
        "test",
    )
    plan = plan_copy(Queue("public", "jobs", either, "test"), table, None, 1_000_000)
    with db.connect() as conn:
        for stmt in (*plan.schema, *plan.fill, *plan.finish):
            conn.execute(stmt.encode())
    live = "locked_at IS NOT NULL OR next_run_at IS NOT NULL"
    assert plan.live == 1_050 and db.execute("SELECT count(*) FROM jobs") == [(50_000,)]
    assert db.execute(f"SELECT count(*) FROM jobs WHERE {live}") == [(1_050,)]
    assert db.execute("SELECT count(*) FROM jobs WHERE next_run_at IS NOT NULL") == [(1_050,)]
    # The churn of a vacuum proof takes live rows out of the live set: every condition false.
    with db.connect() as conn:
        conn.execute(plan.claim.replace("__K__", "10").encode())
    assert db.execute(f"SELECT count(*) FROM jobs WHERE {live}") == [(1_040,)]


def test_a_live_set_a_copy_cannot_fill_is_refused_with_what_it_is() -> None:
    queue, table = _pgboss_like(50_000)
    same = LivePredicate.any_of(
        (
            LivePredicate("state", "in", ("created",), "test"),
            LivePredicate("state", "is null", (), "test"),
        ),
        "test",
    )
    with pytest.raises(CopyError, match=r"two conditions on one column"):
        plan_copy(replace(queue, live=same), table, None, 1_000_000)
    generated = replace(
        table,
        columns=(
            *table.columns,
            Column("is_available", "boolean", True, generated="(locked_at IS NULL)"),
        ),
    )
    available = LivePredicate("is_available", "true", (), "test")
    with pytest.raises(CopyError, match=r"is_available is generated from other columns"):
        plan_copy(replace(queue, live=available), generated, None, 1_000_000)


def _claim_queue(dead: int) -> tuple[Queue, Table]:
    """5,000 waiting jobs behind 95,000 finished ones, a composite (status, created_at) index
    on the claim's path, and ``dead`` claims since the last vacuum (n_dead_tup)."""
    composite = S.index("jobs_status_created_at", ("status", "created_at"), 4 * MB)
    table = replace(
        S.jobs_table(reltuples=100_000, pending_freq=0.05, indexes=(composite,)),
        stats=TableStats(n_live_tup=100_000, n_dead_tup=dead),
    )
    return QUEUE, table


CLAIM = (
    "SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 1"
    " FOR UPDATE SKIP LOCKED"
)


def test_the_dead_versions_the_table_held_are_made_again_after_the_vacuum(db: TestDB) -> None:
    # The demo: 200,000 claims since the last vacuum left their entries at the head of the
    # composite index's pending range, where each claim walks past them (797 buffers a claim
    # there). A copy built and vacuumed fresh has none, and its claim read 22.
    queue, table = _claim_queue(dead=20_000)
    plan = plan_copy(queue, table, None, 1_000_000)
    assert plan.dead == 20_000
    build(db.dsn, plan, lambda _m: None)
    assert db.execute("SELECT status, count(*) FROM jobs GROUP BY 1 ORDER BY 1") == [
        ("done", 95_000), ("pending", 5_000)
    ]  # fmt: skip
    db.wait_for_stats("jobs", lambda r: r["n_dead_tup"] >= 19_000)
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        walked = time_statement(conn, CLAIM, [], None, "jobs")
        conn.execute("VACUUM jobs")
        vacuumed = time_statement(conn, CLAIM, [], None, "jobs")
    assert walked.rows == vacuumed.rows == 1
    assert walked.shared_blocks > 10 * vacuumed.shared_blocks, (walked, vacuumed)


def test_the_other_columns_follow_their_statistics(db: TestDB) -> None:
    # Chancy's claim takes a job only while attempts < max_attempts: with each column one
    # plain value (its most common), the copy's claim found nothing to take.
    columns = (
        Column("id", "bigint", True),
        Column("status", "text", True),
        Column("attempts", "integer", True),
        Column("max_attempts", "integer", True),
        Column("kind", "text", True),
        Column("finished_at", "timestamp with time zone"),
    )
    stats = (
        ColumnStats("status", 0.0, 2.0, 5, ("done", "pending"), (0.95, 0.05)),
        ColumnStats("attempts", 0.0, 6.0, 4, ("1", "0"), (0.6, 0.3),
                    histogram_bounds=("2", "3", "5"), correlation=0.1),
        ColumnStats("max_attempts", 0.0, 1.0, 4, ("1",), (1.0,), correlation=1.0),
        ColumnStats("kind", 0.0, -0.5, 6, ("email", "sms"), (0.5, 0.2),
                    histogram_bounds=("a", "m", "z"), correlation=0.0),
        ColumnStats("finished_at", 0.05, -0.95, 8, None, None, correlation=0.99,
                    histogram_bounds=("2026-01-01 00:00:00+00", "2026-02-01 00:00:00+00")),
    )  # fmt: skip
    table = replace(
        S.jobs_table(reltuples=100_000, pending_freq=None),
        columns=columns, column_stats=stats, stats=VACUUMED,
    )  # fmt: skip
    plan = plan_copy(QUEUE, table, None, 1_000_000)
    with db.connect() as conn:
        for stmt in (*plan.schema, *plan.fill, *plan.finish):
            conn.execute(stmt.encode())

    def share(where: str) -> float:
        return float(db.execute(f"SELECT avg(({where})::int) FROM jobs")[0][0])

    assert abs(share("attempts = 1") - 0.6) < 0.02 and abs(share("attempts = 0") - 0.3) < 0.02
    assert 0.05 < share("attempts BETWEEN 2 AND 5") < 0.15
    assert share("max_attempts = 1") == 1.0
    assert abs(share("kind = 'email'") - 0.5) < 0.02 and share("kind > 'sms'") > 0.05
    # The most common value of a column is not all its rows: a claim of the jobs with an
    # attempt left finds them.
    assert abs(share("attempts < max_attempts") - 0.3) < 0.02
    # A correlated column's NULLs are its newest rows: the waiting jobs have no finish time.
    assert abs(share("finished_at IS NULL") - 0.05) < 0.001
    assert db.execute(
        "SELECT count(*) FROM jobs WHERE status = 'pending' AND finished_at IS NOT NULL"
    ) == [(0,)]
    # Spread between the histogram's bounds, in the rows' order.
    first, last = db.execute(
        "SELECT min(finished_at)::date::text, max(finished_at)::date::text FROM jobs"
    )[0]
    assert (first, last) == ("2026-01-01", "2026-01-31")
    in_order = (
        "SELECT count(*) FROM (SELECT finished_at < lag(finished_at) OVER (ORDER BY id) AS back"
        " FROM jobs) AS s WHERE back"
    )
    assert db.execute(in_order) == [(0,)]
