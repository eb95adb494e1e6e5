"""The scratch copy's statements from hand-built snapshots, and what they build on a real
server: the rows, the live set, the status values and the per-tenant counts the snapshot
measured."""

from __future__ import annotations

from dataclasses import replace

import pytest

from qadvisor.model import (
    Column,
    ColumnStats,
    LivePredicate,
    Queue,
    Table,
    TenantCount,
    TenantFacts,
)
from qadvisor.prove.copy import CopyError, plan_copy
from qadvisor.prove.proofs import rounded_ratio
from tests import snapshots as S
from tests.conftest import TestDB

MB = 1024 * 1024
QUEUE = Queue("public", "jobs", S.PENDING, "test")


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
    archive, live = plan.fill
    assert "'done'::text" in archive and "generate_series(1, 1995000)" in archive
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
    )
    stats = (
        ColumnStats(
            "state", 0.0, 3.0, 4, ("completed", "available", "retryable"), (0.99, 0.006, 0.004)
        ),
    )
    table = replace(
        S.jobs_table(reltuples=100_000, pending_freq=None),
        columns=columns,
        column_stats=stats,
        indexes=(),
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
