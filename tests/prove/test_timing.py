"""What timing a statement on a copy reports besides time and buffers: whether its scan found
a row at all (real server)."""

from __future__ import annotations

import psycopg

from qadvisor.prove.timing import time_statement
from tests.conftest import TestDB

# Chancy's shape: live by state, and claimable only while attempts < max_attempts.
CLAIM = (
    "SELECT id FROM jobs WHERE state = $1 AND attempts < max_attempts"
    " ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED"
)


def test_a_claim_whose_other_conditions_reject_every_row_is_said_to_find_none(
    db: TestDB,
) -> None:
    db.execute(
        "CREATE TABLE jobs (id bigint PRIMARY KEY, state text NOT NULL, priority int NOT NULL,"
        " attempts int NOT NULL, max_attempts int NOT NULL);"
        "INSERT INTO jobs SELECT g, 'pending', g % 5, 0, 1 FROM generate_series(1, 3000) g;"
        "CREATE INDEX jobs_pending ON jobs (priority DESC, id) WHERE state = 'pending';"
        "ANALYZE jobs"
    )
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        takes = time_statement(conn, CLAIM, ["'pending'"], None, "jobs")
        assert takes.found == 1, takes
        # Every row has used its attempts, as a copy whose attempts column holds the archive's
        # most common value: the scan walks the live set and finds nothing.
        conn.execute("UPDATE jobs SET attempts = 1")
        none = time_statement(conn, CLAIM, ["'pending'"], None, "jobs")
    assert none.found == 0 and "on jobs" in none.node, none
    assert none.shared_blocks > takes.shared_blocks
