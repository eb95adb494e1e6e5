"""Planning the text real applications leave in pg_stat_statements (real servers).

Shapes measured on queue libraries' databases: constants numbered after the real parameters
(gaps and out-of-order numbers), ``INTERVAL $5`` where the application wrote a typed literal,
enum and domain parameters (a custom plan needs a real label, never ``''``), arrays of
parameters, and a SQL-level ``PREPARE name AS`` recorded with its statement. Each is planned,
custom and generic, or is a skip that says why.
"""

from __future__ import annotations

from qadvisor.model import Snapshot, Statement
from tests.collect.test_statements_collect import take_snapshot
from tests.conftest import TestDB, flush_stats

SCHEMA = """
CREATE TYPE job_status AS ENUM ('queued', 'picked', 'successful', 'exception');
CREATE DOMAIN queue_name AS text CHECK (VALUE <> '');
CREATE TABLE work (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entrypoint queue_name NOT NULL,
    priority int NOT NULL DEFAULT 0,
    status job_status NOT NULL DEFAULT 'queued',
    execute_after timestamptz NOT NULL DEFAULT now(),
    heartbeat timestamptz NOT NULL DEFAULT now(),
    queue_manager_id uuid,
    attempted_at timestamp
);
INSERT INTO work (entrypoint, status)
SELECT CASE WHEN g % 3 = 0 THEN 'mail' ELSE 'import' END,
       CASE WHEN g % 10 = 0 THEN 'queued' ELSE 'successful' END::job_status
  FROM generate_series(1, 20000) g;
CREATE INDEX work_queued ON work (entrypoint, priority DESC, id) WHERE status = 'queued';
ANALYZE work;
"""

# pgqueuer's claim as pg_stat_statements records it: $1..$4 are bound, $5..$7 were literals.
PGQUEUER = """\
WITH available AS (SELECT UNNEST($2::text[]) AS entrypoint),
next_queued AS (
    SELECT job.id, job.priority FROM available
    CROSS JOIN LATERAL (
        SELECT candidate.id, candidate.priority FROM work candidate
        WHERE candidate.entrypoint = available.entrypoint
          AND candidate.status = $5 AND candidate.execute_after < NOW()
        ORDER BY candidate.priority DESC, candidate.id ASC
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ) job
    ORDER BY job.priority DESC, job.id ASC
    LIMIT $1
),
next_stale AS (
    SELECT stale.id, stale.priority FROM work stale
    WHERE stale.status = $6 AND stale.entrypoint = ANY($2)
      AND stale.heartbeat < NOW() - INTERVAL $4
    ORDER BY stale.priority DESC, stale.id ASC
    FOR UPDATE SKIP LOCKED
    LIMIT $1
)
UPDATE work SET status = $7, heartbeat = NOW(), queue_manager_id = $3
WHERE id IN (SELECT id FROM next_queued UNION ALL SELECT id FROM next_stale)
RETURNING *"""

# Oban-like: the state literal in WHERE and the new state in SET both became parameters.
ENUM_IN_SET = """\
WITH locked AS (
  SELECT id FROM work WHERE status = $4 AND entrypoint = $1
  ORDER BY priority, id LIMIT $2 FOR UPDATE SKIP LOCKED
)
UPDATE work w SET status = $7, attempted_at = timezone($6, now())
FROM locked WHERE w.id = locked.id RETURNING w.id"""

PREPARED = (
    'PREPARE "claim"(text) AS SELECT id FROM work WHERE entrypoint = $1 AND status = '
    "'queued' ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED"
)


def _planned(snap: Snapshot, source: str) -> Statement:
    (stmt,) = [s for s in snap.statements if s.source == source]
    return stmt


def test_real_shapes_are_planned_custom_and_generic(db: TestDB) -> None:
    db.execute(SCHEMA)
    queries = [("--query 1", PGQUEUER), ("--query 2", ENUM_IN_SET)]
    snap = take_snapshot(db, queries)
    (q,) = snap.queues
    assert q.live is not None and q.live.values == ("queued",)
    for source in ("--query 1", "--query 2"):
        stmt = _planned(snap, source)
        assert stmt.plan_error is None, stmt.plan_error
        assert stmt.custom_plan is not None and stmt.generic_plan is not None
    pgq = _planned(snap, "--query 1")
    # The literal that became $5 was planned with the live value, the interval as an interval.
    assert pgq.custom_values["5"] == "'queued'"
    assert pgq.custom_values["1"] == "1"  # LIMIT $1 is a row count
    oban = _planned(snap, "--query 2")
    # An enum parameter no condition compares gets a real label of the enum, never ''.
    assert oban.custom_values["7"] == "'queued'" and oban.custom_values["4"] == "'queued'"


def test_a_prepare_recorded_with_its_statement_is_planned_as_the_statement(db: TestDB) -> None:
    db.execute(SCHEMA)
    db.execute("CREATE EXTENSION pg_stat_statements")
    with db.connect() as conn:
        conn.execute(PREPARED)
        for entry in ("mail", "import"):
            with conn.transaction():
                conn.execute(f"EXECUTE claim('{entry}')")
        flush_stats(conn)
    snap = take_snapshot(db)
    (stmt,) = [s for s in snap.statements if s.source == "pg_stat_statements"]
    assert not stmt.text.upper().startswith("PREPARE")
    assert stmt.plan_error is None and stmt.custom_plan is not None
    # The domain-typed column's parameter got one of its values (the most common).
    assert stmt.custom_values["1"] == "'import'"
