"""What timing a statement on a copy reports besides time and buffers: every run's figures, and
the rows the statement took, as pg_stat_statements counts them (real server)."""

from __future__ import annotations

import psycopg

from qadvisor.prove.timing import TIMED_RUNS, time_statement
from tests.checks.test_qa401_round_robin_walks_backlog import RR_FIXED, build_tenant_queue
from tests.conftest import TestDB

# Chancy's shape: live by state, and claimable only while attempts < max_attempts.
CLAIM = (
    "SELECT id FROM jobs WHERE state = $1 AND attempts < max_attempts"
    " ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED"
)


def test_a_claim_whose_other_conditions_reject_every_row_is_said_to_take_none(
    db: TestDB,
) -> None:
    db.execute(
        "CREATE TABLE jobs (id bigint PRIMARY KEY, state text NOT NULL, priority int NOT NULL,"
        " attempts int NOT NULL, max_attempts int NOT NULL);"
        "INSERT INTO jobs SELECT g, 'pending', g % 5, 0, 1 FROM generate_series(1, 3000) g;"
        "CREATE INDEX jobs_pending ON jobs (priority DESC, id) WHERE state = 'pending';"
        "ANALYZE jobs"
    )
    update = f"UPDATE jobs SET state = 'running' WHERE id = ({CLAIM})"
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        takes = time_statement(conn, CLAIM, ["'pending'"], None, "jobs")
        assert takes.rows == 1 and takes.runs == TIMED_RUNS == len(takes.runs_ms), takes
        # An UPDATE without RETURNING returns nothing: its rows are those it changed.
        assert time_statement(conn, update, ["'pending'"], None, "jobs").rows == 1
        # Every row has used its attempts, as a copy whose attempts column holds the archive's
        # most common value: the scan walks the live set and takes nothing.
        conn.execute("UPDATE jobs SET attempts = 1")
        none = time_statement(conn, CLAIM, ["'pending'"], None, "jobs")
        assert time_statement(conn, update, ["'pending'"], None, "jobs").rows == 0
    assert none.rows == 0 and "on jobs" in none.node, none
    assert none.shared_blocks > takes.shared_blocks


def test_a_round_robin_claim_that_probes_idle_tenants_first_takes_its_row(db: TestDB) -> None:
    # 990 idle tenants first in the rotation's order, then tenants with one job each, behind
    # an archive: the per-tenant probe returns a row in one loop of 991, which EXPLAIN rounds
    # to 0.00 rows a loop. The claim still takes its job.
    jobs = dict.fromkeys(range(2, 12), 1)
    build_tenant_queue(db, jobs, rotation=1000, tenant_index="(tenant_id, enqueued_at, id)",
                       done=50_000)  # fmt: skip
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        timed = time_statement(conn, RR_FIXED, [], None, "jobs")
    assert timed.node.startswith("Index Scan using jobs_queued_tenant_id on jobs"), timed
    assert timed.rows == 1, timed
