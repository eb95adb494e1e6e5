"""Claims whose values pg_stat_statements hides, bound from the evidence (real servers).

A value qadvisor does not know is a hypothesis: it is bound from the evidence for its column
(the partial index whose keys supply the ORDER BY, the live predicate, most common values,
enum labels), never with a value no row holds; the plausible bindings are planned, a check
warns only when every one has the problem, and a finding names the binding it saw.
"""

from __future__ import annotations

from datetime import UTC, datetime

from qadvisor.model import Finding, Severity, Snapshot, Statement
from tests import snapshots as S
from tests.collect.test_hidden_values import recorded_on, run_bound
from tests.collect.test_statements_collect import take_snapshot
from tests.conftest import TestDB

VARCHAR_QUEUE = """
CREATE EXTENSION pg_stat_statements;
CREATE TABLE jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue varchar(64) NOT NULL,
    state varchar(16) NOT NULL DEFAULT 'pending',
    priority int NOT NULL DEFAULT 0,
    attempts int NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT now(),
    locked_at timestamptz,
    payload text
) WITH (autovacuum_enabled = false);
INSERT INTO jobs (queue, state, priority, run_at)
SELECT CASE WHEN g % 4 = 0 THEN 'mail' ELSE 'default' END,
       CASE WHEN g % 100 < 3 THEN 'pending' WHEN g % 100 = 3 THEN 'retrying' ELSE 'done' END,
       g % 5, now() - make_interval(secs => g)
  FROM generate_series(1, 200000) g;
CREATE INDEX jobs_live ON jobs (queue, run_at) WHERE state IN ('pending', 'retrying');
ANALYZE jobs;
"""

# The claim of the issue: the two states in an OR, on a varchar column.
OR_CLAIM = (
    "SELECT id FROM jobs WHERE queue = %s AND (state = %s OR state = %s) AND run_at <= %s "
    "ORDER BY priority DESC, id LIMIT %s FOR UPDATE SKIP LOCKED"
)


def _results(snap: Snapshot, code: str) -> list[object]:
    return S.run(code, snap)


def _findings(snap: Snapshot, code: str, statement: Statement) -> list[Finding]:
    return [
        f
        for f in _results(snap, code)
        if isinstance(f, Finding) and f.evidence.get("statement_text") == statement.text
    ]


def test_an_or_of_hidden_states_is_bound_to_the_partial_index_values(db: TestDB) -> None:
    db.execute(VARCHAR_QUEUE)
    run_bound(db, OR_CLAIM, ["default", "pending", "retrying", datetime.now(UTC), 1])
    snap = take_snapshot(db)
    (stmt,) = recorded_on(snap)
    assert "$" in stmt.text  # the values are hidden
    assert stmt.plan_error is None, stmt.plan_error
    # Bound from the evidence, never a value no row holds.
    bound = set(stmt.custom_values.values())
    assert "''" not in bound
    assert {"'pending'", "'retrying'"} <= bound
    # The planner proves the partial index's predicate with those values: QA302 is quiet.
    assert _findings(snap, "QA302", stmt) == []
    # The claim sorts its ~4,500 live rows of the queue: QA303 says so, naming the binding.
    (f,) = _findings(snap, "QA303", stmt)
    assert f.severity is Severity.WARNING
    assert "pending" in str(f.evidence["binding"]) and "retrying" in str(f.evidence["binding"])


OBAN = """
CREATE EXTENSION pg_stat_statements;
CREATE TYPE oban_job_state AS ENUM
    ('available', 'scheduled', 'executing', 'retryable', 'completed', 'discarded', 'cancelled');
CREATE TABLE oban_jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    state oban_job_state NOT NULL DEFAULT 'available',
    queue text NOT NULL DEFAULT 'default',
    worker text NOT NULL DEFAULT 'W',
    priority int NOT NULL DEFAULT 0,
    attempt int NOT NULL DEFAULT 0,
    scheduled_at timestamp NOT NULL DEFAULT timezone('utc', now()),
    attempted_at timestamp
) WITH (autovacuum_enabled = false);
INSERT INTO oban_jobs (state, queue, scheduled_at)
SELECT CASE WHEN g % 100 < 5 THEN 'available' WHEN g % 100 < 7 THEN 'scheduled'
            WHEN g % 100 = 7 THEN 'retryable' ELSE 'completed' END::oban_job_state,
       'default', timezone('utc', now()) - make_interval(secs => g)
  FROM generate_series(1, 200000) g;
CREATE INDEX oban_jobs_state_queue_priority_scheduled_at_id_index
    ON oban_jobs (state, queue, priority, scheduled_at, id);
CREATE INDEX oban_jobs_staging_index ON oban_jobs (scheduled_at, id)
    WHERE state IN ('scheduled', 'retryable');
ANALYZE oban_jobs;
"""

OBAN_FETCH = (
    "WITH subset AS (SELECT id FROM oban_jobs WHERE state = 'available' AND queue = %s "
    "ORDER BY priority, scheduled_at, id LIMIT %s FOR UPDATE SKIP LOCKED) "
    "UPDATE oban_jobs o SET state = 'executing', attempted_at = timezone('UTC', now()), "
    "attempt = o.attempt + 1 FROM subset WHERE o.id = subset.id RETURNING o.id"
)
OBAN_STAGE = (
    "WITH subset AS (SELECT id FROM oban_jobs WHERE state = ANY(%s) "
    "AND queue = ANY(%s) AND scheduled_at <= %s ORDER BY scheduled_at, id LIMIT %s "
    "FOR UPDATE SKIP LOCKED) "
    "UPDATE oban_jobs o SET state = 'available' FROM subset WHERE o.id = subset.id "
    "RETURNING o.id"
)


def test_a_stager_is_planned_with_the_states_its_own_partial_index_names(db: TestDB) -> None:
    db.execute(OBAN)
    # The workers' fetch runs far more often than the stager: the live values are its.
    run_bound(db, OBAN_FETCH, ["default", 10], times=30)
    now = datetime.now(UTC).replace(tzinfo=None)
    run_bound(db, OBAN_STAGE, [["scheduled", "retryable"], ["default"], now, 5000])
    snap = take_snapshot(db)
    (stager,) = [s for s in recorded_on(snap, "public.oban_jobs") if "ANY" in s.text]
    assert stager.plan_error is None, stager.plan_error
    # The first binding is the one the index that supplies its ORDER BY names.
    assert stager.queue == "public.oban_jobs" and snap.queues[0].live is not None
    assert snap.queues[0].live.values == ("available",)
    states_bound = stager.custom_values["1"]  # state = ANY($1)
    assert "scheduled" in states_bound and "retryable" in states_bound, stager.custom_values
    assert "oban_jobs_staging_index" in stager.binding
    # No warning of a sort the application never runs; a binding that has one is info,
    # named.
    (f,) = _findings(snap, "QA303", stager)
    assert f.severity is Severity.INFO, f.message
    assert "available" in f.evidence["binding"]
    assert "oban_jobs_staging_index" in f.evidence["bindings_without_it"][0]
