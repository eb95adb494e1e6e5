"""Statements pg_stat_statements recorded in text that does not plan as it stands (real
servers).

Each is run by a real client with bound parameters, so pg_stat_statements records ``$n`` for
every value and every literal. Text that names a type before a parameter (``timestamptz
$2``) or uses one where only its context types it (``attempts + CASE ... THEN $2 ...``,
``now() - $2``) is planned with the types the server infers; what still cannot be read is
left out with why, never dropped.
"""

from __future__ import annotations

from datetime import timedelta

from qadvisor.model import Snapshot, Statement
from tests.collect.test_statements_collect import take_snapshot
from tests.conftest import TestDB, flush_stats


def run_bound(db: TestDB, statement: str, params: list[object], times: int = 3) -> None:
    """The application's statement, its values bound by the driver, a few times."""
    with db.connect() as conn:
        for _ in range(times):
            with conn.transaction():
                conn.execute(statement, params)
        flush_stats(conn)


def recorded_on(snap: Snapshot, table: str = "public.jobs") -> list[Statement]:
    return [s for s in snap.statements if s.source == "pg_stat_statements" and s.queue == table]


TYPED = """
CREATE EXTENSION pg_stat_statements;
CREATE TABLE jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    state text NOT NULL DEFAULT 'pending',
    attempts int NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT now(),
    locked_at timestamptz
) WITH (autovacuum_enabled = false);
INSERT INTO jobs (state, run_at)
SELECT CASE WHEN g % 10 = 0 THEN 'pending' ELSE 'done' END, now() - make_interval(secs => g)
  FROM generate_series(1, 100000) g;
CREATE INDEX jobs_pending ON jobs (run_at) WHERE state = 'pending';
ANALYZE jobs;
"""

# What pg_stat_statements leaves of them: an addend inside CASE written as literals
# (``CASE ... THEN $2 ELSE $3 END``: the server alone resolves it to text), a delay the
# driver bound as an interval (``now() - $2``: alone, a timestamp), a typed timestamptz
# literal (``timestamptz $2``, which is not SQL).
CASE_CLAIM = (
    "UPDATE jobs SET attempts = attempts + CASE WHEN locked_at IS NULL THEN 1 ELSE 0 END, "
    "locked_at = now() WHERE id = (SELECT id FROM jobs WHERE state = %s "
    "ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
)
DELAY_CLAIM = (
    "SELECT id FROM jobs WHERE state = %s AND run_at < now() - %s "
    "ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED"
)
TYPED_LITERAL_CLAIM = (
    "SELECT id FROM jobs WHERE state = %s AND run_at > timestamptz '2000-01-01 00:00+00' "
    "ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED"
)


def test_normalised_text_is_planned_with_the_types_the_server_infers(db: TestDB) -> None:
    db.execute(TYPED)
    run_bound(db, CASE_CLAIM, ["pending"])
    run_bound(db, DELAY_CLAIM, ["pending", timedelta(seconds=1)])
    run_bound(db, TYPED_LITERAL_CLAIM, ["pending"])
    snap = take_snapshot(db)
    recorded = recorded_on(snap)
    assert len(recorded) == 3, [s.text for s in recorded]
    for stmt in recorded:
        assert stmt.plan_error is None, (stmt.text, stmt.plan_error)
        assert stmt.custom_plan is not None and stmt.generic_plan is not None
        assert "''" not in stmt.custom_values.values(), stmt.custom_values
    (typed,) = [s for s in recorded if "timestamptz" in s.text.lower()]
    assert typed.parsed is not None and "::timestamptz" in typed.text
    # The queue is known by its claims, not rejected for want of one.
    assert [q.qualified for q in snap.queues] == ["public.jobs"]
    assert not snap.rejected


def test_text_that_cannot_be_read_is_left_out_with_why(db: TestDB) -> None:
    db.execute(TYPED)
    unreadable = (
        "SELECT id FROM jobs WHERE state = %s ORDER BY run_at USING < LIMIT 1 "
        "FOR UPDATE SKIP LOCKED"
    )
    run_bound(db, unreadable, ["pending"])
    snap = take_snapshot(db)
    (o,) = [o for o in snap.left_out if "USING <" in o.text]
    assert o.source.startswith("pg_stat_statements") and "not analysed" in o.reason


# A claim that picks its queues from another table by a list the driver binds as an array
# (``q.name = ANY($1)``), before a delay it binds as an interval (``now() - $2``): the
# server types the array itself, and only the delay needs a type named.
QUEUES_BY_ARRAY_CLAIM = (
    "SELECT id FROM jobs WHERE state = %s AND attempts < 5 AND locked_at IS NULL "
    "AND run_at IN (SELECT j.run_at FROM jobs j JOIN queues q ON q.name = j.state "
    "WHERE q.name = ANY(%s)) AND run_at < now() - %s "
    "ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED"
)


def test_a_parameter_in_any_on_another_table_is_typed_by_the_server(db: TestDB) -> None:
    db.execute(TYPED)
    db.execute("CREATE TABLE queues (name text PRIMARY KEY); INSERT INTO queues VALUES ('pending')")
    run_bound(db, QUEUES_BY_ARRAY_CLAIM, ["pending", ["pending"], timedelta(seconds=1)])
    snap = take_snapshot(db)
    (stmt,) = recorded_on(snap)
    assert "ANY($2)" in stmt.text and "now() - $3" in stmt.text
    # Not "PREPARE failed: op ANY/ALL (array) requires array on right side".
    assert stmt.plan_error is None, stmt.plan_error
    assert stmt.custom_plan is not None and stmt.generic_plan is not None
