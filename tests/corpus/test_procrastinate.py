"""procrastinate (PyPI): a plain table, and a claim inside a PL/pgSQL function.

The worker calls ``procrastinate_fetch_job_v2(queues, worker_id)``; with pg_stat_statements at
its default ``track = top`` only that call is visible, and the claim lives in the function's
body: ``... WHERE jobs.status = 'todo' AND (target_queue_names IS NULL OR jobs.queue_name =
ANY(target_queue_names)) AND (jobs.scheduled_at IS NULL OR jobs.scheduled_at <= now())
ORDER BY jobs.priority DESC, jobs.id ASC LIMIT 1 FOR UPDATE OF jobs SKIP LOCKED``, served by
``procrastinate_jobs_priority_idx_v1 (priority DESC, id) WHERE status = 'todo'``. Finished jobs
stay in the table (status succeeded/failed/cancelled/aborted), with three rows each in
``procrastinate_events`` (deferred, started, succeeded), whose job_id references the job.
"""

import dataclasses

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, Live, NotClaim
from tests.corpus.library import Library, Workload

STATUSES = ("todo", "doing", "succeeded", "failed", "cancelled", "aborting", "aborted")
ARCHIVE_ROWS = 1_000_000

PROCRASTINATE = Library(
    name="procrastinate",
    env=envs.PythonEnv("procrastinate", ("procrastinate==3.10.0", "psycopg[binary]==3.3.9")),
    driver="procrastinate_driver.py",
    done_sql="SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'",
    age_sql=(
        # The archive as the worker leaves it: succeeded, one attempt, no worker any more;
        # the queues in the workload's proportions. Its status triggers fire only for 'todo'.
        # The three procrastinate_events rows each job would also have are left out: 3 M rows
        # cost 13 s here, and no check reads that table's contents.
        f"""
        INSERT INTO procrastinate_jobs (queue_name, task_name, priority, args, status, attempts)
        SELECT CASE WHEN g % 20 < 16 THEN 'default' WHEN g % 20 < 18 THEN 'emails'
                    ELSE 'reports' END,
               'noop', 0, jsonb_build_object('n', g), 'succeeded', 1
          FROM generate_series(1, {ARCHIVE_ROWS}) AS g
        """,
    ),
    workload=Workload((("default", 1600), ("emails", 200), ("reports", 100)), scheduled=100),
    rerun=Workload((("default", 320), ("emails", 50), ("reports", 30)), scheduled=40),
)

CLAIM = Claim(
    "public.procrastinate_jobs",
    ("procrastinate_fetch_job_v2", "skip locked"),
    "the claim in procrastinate_fetch_job_v2's body, which the worker calls",
)

FRESH = Codes(
    forbidden={
        "QA101": "the table is small: its indexes are far under the 8 MiB minimum",
        "QA201": "50 + 0.2 x 2,000 rows is far under the 50,000 minimum trigger",
        "QA301": "the claim's status is the literal 'todo' in the function's body",
        "QA302": "status = 'todo' implies procrastinate_jobs_priority_idx_v1's predicate",
        "QA303": "procrastinate_jobs_priority_idx_v1 (priority DESC, id) supplies the order",
    }
)
AGED = Codes(
    required={
        "QA201": "50 + 0.2 x ~1 M rows is ~200,000 dead tuples against a few hundred live rows",
    },
    forbidden={k: v for k, v in FRESH.forbidden.items() if k not in ("QA101", "QA201")},
)


class TestProcrastinate(CorpusSuite):
    library = PROCRASTINATE
    expect = Expect(
        queues={"public.procrastinate_jobs": Live("status", frozenset({"todo"}), STATUSES)},
        not_queues={
            "public.procrastinate_events": "an event log of transitions; no claim reads it",
            "public.procrastinate_workers": "worker heartbeats",
            "public.procrastinate_periodic_defers": "periodic-task bookkeeping",
        },
        claims=(CLAIM,),
        not_claims=(
            NotClaim(("for key share",), "PostgreSQL's foreign-key check run by RI triggers"),
            NotClaim(
                ("abort_requested", "for update", "status in"),
                "procrastinate_retry_job's lock of one job by its id",
            ),
            NotClaim(
                ("procrastinate_periodic_defers", "for update"),
                "periodic_defers bookkeeping, not a queue",
            ),
        ),
        codes={"fresh": FRESH, "aged": AGED},
        targets={"aged": {"QA201": "public.procrastinate_jobs"}},
        skips={
            "QA204": (
                "no finish or creation timestamp",
                "procrastinate_jobs has no timestamp but scheduled_at: procrastinate_events "
                "dates each job's changes of status, a table no claim reads",
            )
        },
    )


TRACK_ALL = dataclasses.replace(
    PROCRASTINATE,
    name="procrastinate_track_all",
    track="all",
    # The same table aged once; the clone's worker run is recorded with track = all.
    aged_from=PROCRASTINATE,
)


class TestProcrastinateTrackAll(CorpusSuite):
    """With ``track = all`` pg_stat_statements also records what runs inside the function and
    the triggers: the claim itself (toplevel false, its constants as ``$n`` but the function's
    variables ``target_queue_names`` and ``p_worker_id`` as names) and PostgreSQL's foreign-key
    check of procrastinate_events.job_id (``... FOR KEY SHARE OF x``, toplevel false)."""

    library = TRACK_ALL
    expect = TestProcrastinate.expect
