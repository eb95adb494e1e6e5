"""A recorded statement whose filled-in value the copy refuses is still timed on it: the SET
assignment that computes with that value keeps the column's value instead (real server)."""

from __future__ import annotations

import psycopg
import pytest

from qadvisor.prove.measure import time_keeping_set
from qadvisor.prove.timing import time_statement
from qadvisor.sql import dequeue
from tests.conftest import TestDB

# Oban's producer fetch, as pg_stat_statements records it: 'UTC' shows as $4.
FETCH = (
    "WITH subset AS (SELECT id FROM jobs WHERE state = $1 ORDER BY id LIMIT $2"
    " FOR UPDATE SKIP LOCKED)"
    " UPDATE jobs AS j SET state = $3, attempted_at = timezone($4, now()),"
    " attempt = j.attempt + $5"
    " FROM subset WHERE j.id = subset.id RETURNING j.id"
)
# What qadvisor's planner fills in: '' for a text it has no column to draw from.
FILLED = {"1": "'available'", "3": "'executing'", "4": "''", "5": "1"}


def _build(db: TestDB) -> None:
    db.execute(
        "CREATE TABLE jobs (id bigint PRIMARY KEY, state text NOT NULL,"
        " attempted_at timestamp, attempt int NOT NULL DEFAULT 0);"
        "INSERT INTO jobs (id, state) SELECT g, 'available' FROM generate_series(1, 2000) g;"
        "CREATE INDEX jobs_available ON jobs (id) WHERE state = 'available';"
        "ANALYZE jobs"
    )


def test_the_copy_refuses_the_filled_in_value_and_the_kept_column_is_timed(db: TestDB) -> None:
    _build(db)
    planned, renumbered = dequeue.normalise_for_planning(FETCH)
    values = [FILLED[renumbered[k].lstrip("$")] for k in sorted(renumbered)]
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.DataError, match="time zone"):
            time_statement(conn, planned, values, None, "jobs")
        kept = time_keeping_set(conn, FETCH, FILLED, None, "jobs")
        assert kept is not None
        timed, columns = kept
        assert columns == ("attempted_at",)  # attempt + $5 computes with a value that runs
        assert timed.runs == 3 and timed.ms > 0
        assert "on jobs" in timed.node
        # Every run was rolled back: the copy's rows still wait.
        row = conn.execute("SELECT count(*) FROM jobs WHERE state = 'available'").fetchone()
        assert row == (2000,)


def test_a_refusal_no_kept_column_avoids_stays_untimed(db: TestDB) -> None:
    _build(db)
    # The refused value is in the WHERE clause: keeping SET columns cannot avoid it.
    text = "UPDATE jobs SET attempt = attempt + $1 WHERE id = $2::bigint AND state = $3"
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        assert time_keeping_set(conn, text, {"1": "1", "2": "'x'", "3": "''"}, None, "jobs") is (
            None
        )
