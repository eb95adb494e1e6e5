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

from datetime import UTC, datetime

from qadvisor.model import Snapshot, Statement
from tests.collect.test_hidden_values import recorded_on, run_bound
from tests.collect.test_statements_collect import take_snapshot
from tests.conftest import TestDB, flush_stats
from tests.helpers import analyzed

# Sidequest's jobs table as its migrations make it (varchar state, no default, no index on
# it), 29 days of completed jobs, one failed and one waiting. The state's statistics target
# makes ANALYZE read every row, so its result is the same every time: a value held by one
# row is no common value, and two such values make the histogram ({failed,waiting}), as a
# sample of a larger table shows values it saw once or twice.
SIDEQUEST = """
CREATE EXTENSION pg_stat_statements;
CREATE TABLE sidequest_jobs (
    id bigserial PRIMARY KEY,
    queue varchar(255) NOT NULL,
    state varchar(255) NOT NULL,
    script varchar(255) NOT NULL DEFAULT 'jobs.js',
    class varchar(255) NOT NULL DEFAULT 'Job',
    args jsonb NOT NULL DEFAULT '[]',
    attempt integer NOT NULL DEFAULT 0,
    inserted_at timestamptz NOT NULL DEFAULT now(),
    available_at timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    failed_at timestamptz,
    canceled_at timestamptz,
    claimed_by varchar(255),
    claimed_at timestamptz
);
CREATE INDEX sidequest_jobs_queue_index ON sidequest_jobs (queue);
INSERT INTO sidequest_jobs (queue, state, inserted_at, available_at, completed_at)
SELECT 'default', 'completed', t, t, t + interval '1 second'
  FROM generate_series(1, {archive}) AS g,
       LATERAL (SELECT now() - interval '29 days' + g * interval '2 seconds' AS t) AS at;
INSERT INTO sidequest_jobs (queue, state, failed_at) VALUES ('default', 'failed', now());
INSERT INTO sidequest_jobs (queue, state) VALUES ('default', 'waiting');
ALTER TABLE sidequest_jobs ALTER COLUMN state SET STATISTICS 10000;
"""

# Its claim (claimPendingJob, through Knex): every value bound by the driver.
SIDEQUEST_CLAIM = (
    'select * from "sidequest_jobs" where "state" = %s and "queue" = %s '
    'and "available_at" <= %s order by "inserted_at" asc limit %s for update skip locked'
)


def sidequest(db: TestDB, archive: int = 29_998) -> None:
    """Sidequest's table, its statistics, and its claim run a few times."""
    db.execute(SIDEQUEST.format(archive=archive))
    analyzed(db, "sidequest_jobs")
    run_bound(db, SIDEQUEST_CLAIM, ["waiting", "default", datetime.now(UTC), 10])


def _claim(snap: Snapshot, table: str = "public.jobs") -> Statement:
    (stmt,) = recorded_on(snap, table)
    assert stmt.plan_error is None, stmt.plan_error
    assert stmt.custom_plan is not None
    return stmt


def test_a_waiting_value_too_rare_to_be_common_is_read_from_the_histogram(db: TestDB) -> None:
    sidequest(db)
    ((common, rare),) = db.execute(
        "SELECT most_common_vals::text, histogram_bounds::text FROM pg_stats "
        "WHERE tablename = 'sidequest_jobs' AND attname = 'state'"
    )
    assert (common, rare) == ("{completed}", "{failed,waiting}")
    snap = take_snapshot(db)
    (queue,) = snap.queues
    assert queue.live is not None, queue.reason
    assert (queue.live.column, queue.live.op, queue.live.values) == ("state", "in", ("waiting",))
    assert "the pg_stats histogram bounds of state ('waiting'" in queue.live.source
    stmt = _claim(snap, "public.sidequest_jobs")
    # Planned as the application runs it, with the value it waits for.
    assert stmt.custom_values["1"] == "'waiting'", stmt.custom_values


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


def test_the_default_is_the_state_a_new_row_waits_in(db: TestDB) -> None:
    # ANALYZE saw no waiting row (the workers had taken them all): the default says which
    # value a new row waits in.
    db.execute(NO_WAITING_ROW.format(constraint="DEFAULT 'pending'"))
    run_bound(db, CLAIM, ["pending"])
    snap = take_snapshot(db)
    (queue,) = snap.queues
    assert queue.live is not None, queue.reason
    assert queue.live.values == ("pending",)
    assert "the default of status (a new row's value) ('pending'" in queue.live.source
    assert _claim(snap).custom_values["1"] == "'pending'"


def test_a_check_constraint_lists_the_states(db: TestDB) -> None:
    states = "CHECK (status IN ('queued', 'running', 'done', 'failed'))"
    db.execute(NO_WAITING_ROW.format(constraint=states))
    run_bound(db, CLAIM, ["queued"])
    snap = take_snapshot(db)
    (queue,) = snap.queues
    assert queue.live is not None, queue.reason
    assert queue.live.values == ("queued",)
    assert "the CHECK constraint on status ('queued'" in queue.live.source
    assert _claim(snap).custom_values["1"] == "'queued'"


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
