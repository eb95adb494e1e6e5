"""pgqueuer (PyPI), over asyncpg: finished jobs leave the queue table for a log.

The worker's dequeue is one statement: for each entrypoint (``UNNEST($2::text[])``) a
``CROSS JOIN LATERAL`` sub-select ``WHERE candidate.entrypoint = available.entrypoint AND
candidate.status = 'queued' AND candidate.execute_after < NOW() ORDER BY candidate.priority
DESC, candidate.id ASC LIMIT n FOR UPDATE SKIP LOCKED`` (served by ``pgqueuer_ep_prio_id_idx
(entrypoint, priority DESC, id) WHERE status = 'queued'``), a second branch that takes back
``'picked'`` jobs whose heartbeat is stale, then an UPDATE to ``'picked'`` and an INSERT into
``pgqueuer_log``. The literals are pgqueuer's own (pg_stat_statements shows them as ``$5``,
``$6``, ``$7``). A finished job is deleted from ``pgqueuer`` and logged in ``pgqueuer_log``
(one row each for queued, picked, successful); ``pgqueuer_statistics`` holds aggregates. Both
have a ``status`` column of the same enum, and no claim reads either.
"""

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, Live
from tests.corpus.library import Library, Workload

STATUSES = ("queued", "picked", "successful", "exception", "canceled", "deleted", "failed")
ARCHIVE_JOBS = 340_000  # three log rows each: about 1 M rows

PGQUEUER = Library(
    name="pgqueuer",
    env=envs.PythonEnv("pgqueuer", ("pgqueuer==1.6.0", "asyncpg==0.32.0")),
    driver="pgqueuer_driver.py",
    done_sql="SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'",
    age_sql=(
        # The archive pgqueuer keeps: the log of finished jobs, three rows per job, in the
        # workload's proportions of entrypoints. The queue table itself keeps no finished row.
        f"""
        INSERT INTO pgqueuer_log (created, job_id, status, priority, entrypoint, aggregated)
        SELECT now() - interval '7 days' + g * interval '1 second' + s.n * interval '10 ms',
               -g, s.status, 0,
               CASE WHEN g % 20 < 16 THEN 'default' WHEN g % 20 < 18 THEN 'emails'
                    ELSE 'reports' END,
               true
          FROM generate_series(1, {ARCHIVE_JOBS}) AS g
         CROSS JOIN (VALUES (0, 'queued'::pgqueuer_status), (1, 'picked'),
                            (2, 'successful')) AS s(n, status)
        """,
    ),
    workload=Workload((("default", 1600), ("emails", 200), ("reports", 100)), scheduled=100),
    # Enough claims on the aged table for the plan counters to be judged (min_calls).
    rerun=Workload((("default", 1000), ("emails", 150), ("reports", 100)), scheduled=40),
    # asyncpg prepares each statement and reuses its cached plan: with plans counted, the
    # counters show that reuse, as on a production server with track_planning on.
    track_planning=True,
)

QUIET = {
    "QA101": "finished jobs are deleted from pgqueuer: the queue table has no archive",
    "QA201": "the queue table has no archive (its finished jobs live in pgqueuer_log)",
    "QA302": "candidate.status = 'queued' implies pgqueuer_ep_prio_id_idx's predicate",
}
# QA303 is left unjudged: the stale-job branch orders the 'picked' rows by priority, id with
# no index for that order (pgqueuer_picked_heartbeat_idx is on heartbeat). Those are the jobs in
# flight, bounded by the workers' concurrency, not the backlog; whether that Sort is worth a
# finding is the check's call, not something pgqueuer's code settles.
LATENT = {
    "QA301": "the status is pgqueuer's literal 'queued'; pg_stat_statements shows it as $5 "
    "(numbered after pgqueuer's own $1 to $4). asyncpg reuses the statement's cached plan, "
    "so few plans per call; under plan_cache_mode = auto that plan is the literal's, which "
    "uses the partial index, and the blocks per call are its writes (about ten rows through "
    "nine indexes, and the log), not a read of the table",
}


class TestPgqueuer(CorpusSuite):
    library = PGQUEUER
    expect = Expect(
        queues={"public.pgqueuer": Live("status", frozenset({"queued"}), STATUSES)},
        not_queues={
            "public.pgqueuer_log": "the log of every job's transitions; no claim reads it",
            "public.pgqueuer_statistics": "per-second aggregates of the log",
        },
        optional={
            "public.pgqueuer_schedules": "cron schedules, picked with FOR UPDATE SKIP LOCKED "
            "by the scheduler when next_run is due: a queue of schedules, arguably",
        },
        claims=(
            Claim(
                "public.pgqueuer",
                ("cross join lateral", "from pgqueuer candidate", "for update skip locked"),
                "the worker's dequeue (per-entrypoint LATERAL claim, then UPDATE to picked)",
            ),
        ),
        not_claims=(),
        codes={
            "fresh": Codes(forbidden=QUIET, info_only=LATENT),
            "aged": Codes(forbidden=QUIET, info_only=LATENT),
        },
    )
