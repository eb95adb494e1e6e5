"""Claims, not shapes, decide: three designs seen in production, on real servers.

- A "ready" table whose every row is claimable: a job is moved in when it can run and
  deleted on claim, and the claim has no condition at all. The claim makes it a queue; its
  live set is the whole table.
- A boolean flag compared with a parameter (pg_stat_statements shows the application's
  ``true`` as ``$n``): the value is the one the table's own partial index selects, and the
  report says so.
- A claim that also locks the job's 1:1 parent row (``FOR UPDATE`` without ``OF`` over a
  join on a unique ``job_id``): one row per job is no tenant lock, so QA502 stays quiet,
  while a lock of a row many jobs share still is one.

Each is run by the application, so that pg_stat_statements records it as a server shows it,
and checked with discovery alone (no ``--table``, no ``--query``).
"""

from __future__ import annotations

from typing import Any

from tests.collect.test_statements_collect import take_snapshot
from tests.conftest import TestDB, flush_stats
from tests.helpers import Run, apply_fix, assert_quiet, check, fix_sql, holding, row_locked

READY_CLAIM = (
    "SELECT id, job_id FROM ready_executions ORDER BY priority, job_id LIMIT %s "
    "FOR UPDATE SKIP LOCKED"
)
# The same claim, reading the job's queue name from its parent row: no OF, so it locks the
# jobs row too, one per ready row (job_id is unique).
READY_JOIN_CLAIM = (
    "SELECT r.id, r.job_id FROM ready_executions r JOIN jobs j ON j.id = r.job_id "
    "WHERE j.queue_name = %s ORDER BY r.priority, r.job_id LIMIT %s FOR UPDATE SKIP LOCKED"
)
# A lock of a row many ready rows share: that is a tenant lock.
READY_QUEUE_LOCK = (
    "SELECT r.id, r.job_id FROM ready_executions r JOIN queues q ON q.name = r.queue_name "
    "WHERE NOT q.paused ORDER BY r.priority, r.job_id LIMIT %s FOR UPDATE SKIP LOCKED"
)
FLAG_CLAIM = (
    "WITH j AS (SELECT id FROM jobs WHERE is_available = true AND run_at <= now() "
    "ORDER BY priority, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
    "UPDATE jobs SET is_available = false, locked_at = now(), attempts = attempts + 1 "
    "FROM j WHERE jobs.id = j.id RETURNING jobs.id"
)


def build_ready_queue(db: TestDB, ready: int = 200, polling_index: bool = True) -> None:
    """Jobs, most of them finished, and the ready rows of the ``ready`` that can run now."""
    db.execute(
        f"""
        CREATE TABLE queues (name text PRIMARY KEY, paused boolean NOT NULL DEFAULT false);
        INSERT INTO queues VALUES ('default'), ('mail');
        CREATE TABLE jobs (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            queue_name  text NOT NULL REFERENCES queues,
            class_name  text NOT NULL,
            arguments   text,
            priority    int NOT NULL DEFAULT 0,
            finished_at timestamptz,
            created_at  timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE ready_executions (
            id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            job_id     bigint NOT NULL REFERENCES jobs ON DELETE CASCADE,
            queue_name text NOT NULL,
            priority   int NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE UNIQUE INDEX ready_executions_job_id_idx ON ready_executions (job_id);
        {
            "CREATE INDEX ready_executions_polling_idx ON ready_executions (priority, job_id);"
            if polling_index
            else ""
        }
        INSERT INTO jobs (queue_name, class_name, finished_at)
        SELECT CASE WHEN g % 2 = 0 THEN 'default' ELSE 'mail' END, 'Job',
               CASE WHEN g > {ready} THEN now() END
          FROM generate_series(1, 20000) AS g;
        INSERT INTO ready_executions (job_id, queue_name, priority)
        SELECT id, queue_name, id % 3 FROM jobs WHERE finished_at IS NULL;
        ANALYZE queues, jobs, ready_executions;
        CREATE EXTENSION pg_stat_statements;
        """
    )


def run_as_the_application(db: TestDB, claim: str, *params: Any, times: int = 3) -> None:
    """Workers claim a few jobs and give the claim back (rolled back: the state stays), so
    that pg_stat_statements has the claim as the server shows it."""
    with db.connect() as conn:
        for _ in range(times):
            with conn.transaction(force_rollback=True):
                conn.execute(claim, list(params))
        flush_stats(conn)


def queue_of(run: Run, table: str) -> dict[str, Any]:
    queues = {q["table"]: q for q in run.report["queues"]}
    assert table in queues, (table, run.report["queues"], run.report["rejected"])
    found: dict[str, Any] = queues[table]
    return found


# --- a claim without a condition --------------------------------------------------------------


def test_a_claim_without_a_condition_makes_the_whole_table_its_live_set(db: TestDB) -> None:
    build_ready_queue(db)
    run_as_the_application(db, READY_CLAIM, 5)
    run = check(db)
    queue = queue_of(run, "ready_executions")
    assert queue["live_predicate"] == "TRUE"
    assert "every row" in queue["reason"] and "SKIP LOCKED claim" in queue["reason"]
    assert "(the claim has no condition on it)" in queue["reason"]
    # Judged, not skipped: no check left it (or the snapshot) unjudged.
    assert run.report["skipped"] == [] and run.report["hidden"] == []
    for code in ("QA101", "QA102", "QA201", "QA203", "QA301", "QA302", "QA303", "QA501"):
        assert_quiet(run, code, "public.ready_executions")
    # The jobs table is no queue: nothing claims it.
    assert "jobs" not in {q["table"] for q in run.report["queues"]}


def test_a_whole_table_live_set_is_judged_when_it_is_unhealthy(db: TestDB) -> None:
    """The same queue with 5,000 ready jobs and no index for the claim's order, and with
    autovacuum off: both are found, and the index fix is a plain index (no WHERE TRUE)."""
    build_ready_queue(db, ready=5_000, polling_index=False)
    db.execute("ALTER TABLE ready_executions SET (autovacuum_enabled = false)")
    run_as_the_application(db, READY_CLAIM, 5)
    run = check(db)
    queue_of(run, "ready_executions")
    assert {"QA203", "QA303"} <= run.codes()
    (sorts,) = run.findings("QA303")
    (build,) = fix_sql(sorts)
    assert build == (
        "CREATE INDEX CONCURRENTLY ready_executions_priority_job_id_idx "
        "ON public.ready_executions (priority, job_id);"
    )
    apply_fix(db, sorts)
    db.execute("ANALYZE ready_executions")
    assert_quiet(check(db), "QA303", "public.ready_executions")


# --- a boolean compared with a parameter ------------------------------------------------------


def build_flag_queue(db: TestDB) -> None:
    db.execute(
        """
        CREATE TABLE jobs (
            id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            task_identifier text NOT NULL,
            payload         json,
            priority        smallint NOT NULL DEFAULT 0,
            run_at          timestamptz NOT NULL DEFAULT now(),
            attempts        smallint NOT NULL DEFAULT 0,
            locked_at       timestamptz,
            is_available    boolean NOT NULL DEFAULT true
        );
        CREATE INDEX jobs_main_index ON jobs (priority, run_at) INCLUDE (id)
            WHERE is_available = true;
        INSERT INTO jobs (task_identifier, is_available, locked_at, run_at)
        SELECT 'send_mail', g % 50 = 0, CASE WHEN g % 50 <> 0 THEN now() END,
               now() - make_interval(secs => g)
          FROM generate_series(1, 20000) AS g;
        ANALYZE jobs;
        CREATE EXTENSION pg_stat_statements;
        """
    )


def test_a_boolean_compared_with_a_parameter_takes_its_value_from_the_partial_index(
    db: TestDB,
) -> None:
    build_flag_queue(db)
    run_as_the_application(db, FLAG_CLAIM)
    # pg_stat_statements shows the application's true as a parameter.
    ((text,),) = db.execute(
        "SELECT query FROM pg_stat_statements JOIN pg_database d ON d.oid = dbid"
        " WHERE d.datname = current_database() AND query LIKE '%SKIP LOCKED%'"
    )
    assert "is_available = $" in text
    run = check(db)
    queue = queue_of(run, "jobs")
    assert queue["live_predicate"] == "is_available"
    assert "partial index jobs_main_index" in queue["reason"]
    assert "is_available = $" in queue["reason"]
    # QA301 may report the generic plan (pg_stat_statements shows true as $n): not asserted.
    for code in ("QA101", "QA201", "QA302", "QA303", "QA501"):
        assert_quiet(run, code, "public.jobs")
    # The custom plan was made with the value the index selects, which rows do hold.
    snap = take_snapshot(db)
    (stmt,) = [s for s in snap.statements if s.queue == "public.jobs"]
    assert list(stmt.custom_values.values())[:1] == ["true"], stmt.custom_values
    assert stmt.custom_plan is not None and "jobs_main_index" in str(stmt.custom_plan)
    (found,) = snap.queues
    assert found.live is not None and (found.live.column, found.live.op) == (
        "is_available",
        "true",
    )
    assert "values from partial index jobs_main_index" in found.live.source


# --- a lock of the job's own parent row -------------------------------------------------------


def test_a_lock_of_the_jobs_own_parent_row_is_no_tenant_lock(db: TestDB) -> None:
    build_ready_queue(db)
    run_as_the_application(db, READY_JOIN_CLAIM, "default", 5)
    run = check(db)
    queue_of(run, "ready_executions")
    assert_quiet(run, "QA502", "public.ready_executions")
    # It does lock the parent row, one per job: another worker takes the next job.
    with holding(db, READY_JOIN_CLAIM.replace("%s", "'default'", 1).replace("%s", "1")) as held:
        ((_, job),) = held
        assert row_locked(db, "jobs", "id", job)


def test_a_lock_of_a_row_many_jobs_share_is_still_a_tenant_lock(db: TestDB) -> None:
    build_ready_queue(db)
    run_as_the_application(db, READY_QUEUE_LOCK, 5)
    run = check(db)
    queue_of(run, "ready_executions")
    (finding,) = run.findings("QA502")
    assert finding["evidence"]["locked_tables"] == ["ready_executions", "queues"]
    assert "serialized per queues row" in finding["message"]
