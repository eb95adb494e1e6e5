"""Every value the catalog holds for a column a claim compares with a parameter is evidence
of what the claim waits for (real servers).

pg_stat_statements shows the claim's value as ``$n``. Before its queue is called "live set
unknown", discovery reads what the catalog holds for the column: the values ANALYZE saw (the
common ones, and the histogram bounds, where a value seen too rarely to count as common is),
the column's default (the value a new row starts with), its CHECK constraint, its enum
labels. A value the claim itself writes, a finished or running state, or the bulk of the
archive is never the one it waits for, and never the one its plans are made with.
"""

from __future__ import annotations

import pytest

from qadvisor.model import Snapshot, Statement
from tests.collect.test_hidden_values import recorded_on, run_bound
from tests.collect.test_statements_collect import take_snapshot
from tests.conftest import TestDB, flush_stats
from tests.helpers import build_rare_waiting_queue


def _claim(snap: Snapshot, table: str = "public.jobs") -> Statement:
    (stmt,) = recorded_on(snap, table)
    assert stmt.plan_error is None, stmt.plan_error
    assert stmt.custom_plan is not None
    return stmt


def test_a_waiting_value_too_rare_to_be_common_is_read_from_the_histogram(db: TestDB) -> None:
    # Sidequest's shape: nothing but the values ANALYZE saw names the claim's 'waiting'.
    build_rare_waiting_queue(db, db, archive=29_998)
    ((common, rare),) = db.execute(
        "SELECT most_common_vals::text, histogram_bounds::text FROM pg_stats "
        "WHERE tablename = 'jobs' AND attname = 'status'"
    )
    assert (common, rare) == ("{completed}", "{failed,waiting}")
    snap = take_snapshot(db)
    (queue,) = snap.queues
    assert queue.live is not None, queue.reason
    assert (queue.live.column, queue.live.op, queue.live.values) == ("status", "in", ("waiting",))
    assert "the pg_stats histogram bounds of status ('waiting'" in queue.live.source
    # Planned as the application runs it, with the value it waits for.
    assert _claim(snap).custom_values["1"] == "'waiting'"


NO_WAITING_ROW = """
CREATE EXTENSION pg_stat_statements;
CREATE TABLE jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status text NOT NULL {constraint},
    run_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO jobs (status, run_at)
SELECT CASE WHEN g % 100 = 0 THEN 'failed' ELSE 'done' END, now() - make_interval(secs => g)
  FROM generate_series(1, 20000) g;
ANALYZE jobs;
"""
CLAIM = "SELECT id FROM jobs WHERE status = %s ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED"


@pytest.mark.parametrize(
    ("constraint", "value", "source"),
    [
        # ANALYZE saw no waiting row (the workers had taken them all): the default says which
        # value a new row waits in.
        ("DEFAULT 'pending'", "pending", "the default of status (a new row's value)"),
        (
            "CHECK (status IN ('queued', 'running', 'done', 'failed'))",
            "queued",
            "the CHECK constraint on status",
        ),
    ],
)
def test_the_default_or_the_check_constraint_names_the_state_no_row_showed(
    db: TestDB, constraint: str, value: str, source: str
) -> None:
    db.execute(NO_WAITING_ROW.format(constraint=constraint))
    run_bound(db, CLAIM, [value])
    snap = take_snapshot(db)
    (queue,) = snap.queues
    assert queue.live is not None, queue.reason
    assert queue.live.values == (value,)
    assert f"{source} ('{value}'" in queue.live.source
    assert _claim(snap).custom_values["1"] == f"'{value}'"


def test_an_archive_value_is_never_bound_and_the_claim_says_why_it_is_not_planned(
    db: TestDB,
) -> None:
    # Nothing the catalog holds names the value the claim waits for: its plans are not made
    # with the archive's 'done' (a query the application never runs), and the report says
    # why the claim was not planned.
    db.execute(NO_WAITING_ROW.format(constraint=""))
    run_bound(db, CLAIM, ["pending"])
    snap = take_snapshot(db)
    (stmt,) = recorded_on(snap)
    assert stmt.custom_plan is None and "'done'" not in stmt.custom_values.values()
    (queue,) = snap.queues
    assert queue.live is None
    assert "none of the values the catalog holds for status reads as waiting" in queue.reason
    assert stmt.plan_error is not None
    assert "no value it waits for on status is known" in stmt.plan_error
    assert "not 'done': a finished state" in stmt.plan_error


STAGED = """
CREATE TABLE jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    state text NOT NULL,
    run_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO jobs (state, run_at)
SELECT CASE WHEN g % 10 = 0 THEN 'available' WHEN g % 10 = 1 THEN 'scheduled'
            ELSE 'completed' END, now() + make_interval(secs => g % 600)
  FROM generate_series(1, 20000) g;
ANALYZE jobs;
CREATE FUNCTION stage_jobs(p_state text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  staged integer;
BEGIN
  UPDATE jobs SET state = 'available'
   WHERE id IN (SELECT id FROM jobs WHERE state = p_state AND run_at <= now()
                 ORDER BY run_at LIMIT 100 FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS staged = ROW_COUNT;
  RETURN staged;
END
$$;
"""


def test_a_value_the_claim_itself_sets_is_not_the_value_it_waits_for(db: TestDB) -> None:
    # A stager takes scheduled jobs and makes them available: 'available' reads as waiting
    # first, but it is the state the claim moves rows into.
    db.execute(STAGED)
    with db.connect() as conn:
        conn.execute("SELECT stage_jobs('scheduled')")
        flush_stats(conn)
    snap = take_snapshot(db)
    (queue,) = snap.queues
    assert queue.live is not None, queue.reason
    assert queue.live.values == ("scheduled",)
    assert "not 'available': the claim itself sets it" in queue.live.source
    (stmt,) = [s for s in snap.statements if s.queue == "public.jobs"]
    assert stmt.plan_error is None, stmt.plan_error
    assert "'scheduled'" in stmt.custom_values.values(), stmt.custom_values
