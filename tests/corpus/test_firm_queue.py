"""firm-queue (PyPI; a port of Rails' Solid Queue on SQLAlchemy): a job is claimed by deleting it.

A job's row lives in ``firm_queue_jobs`` for good; while it waits, a row in an execution
table stands for it and is deleted when the job moves on (firm/queue/schema.py):
``scheduled_executions`` (due later) -> the dispatcher -> ``ready_executions`` (or
``blocked_executions`` while its concurrency key's semaphore is full) -> a worker ->
``claimed_executions`` -> finished (``jobs.finished_at`` set: ``preserve_finished_jobs``
defaults to true, and nothing in the library deletes finished jobs unless the application
calls ``maintenance.clear_finished``) or ``failed_executions``.

The worker's claim (claim.py, through SQLAlchemy's psycopg 3 dialect, which binds every
value server-side, so pg_stat_statements shows ``$n`` because the server saw ``$n``): with
the wildcard queue ``*``, ``SELECT id, job_id FROM firm_queue_ready_executions ORDER BY
priority, job_id LIMIT $1 FOR UPDATE SKIP LOCKED`` (no condition at all: every ready row is
claimable); with named queues, one such statement per queue with ``WHERE queue_name = $1``.
The claimed rows are inserted into ``claimed_executions`` and deleted from ready.
``index_firm_queue_poll_all (priority, job_id)`` and ``index_firm_queue_poll_by_queue
(queue_name, priority, job_id)`` serve the two.

The other row-locking statements: the dispatcher's (dispatcher.py) ``scheduled_executions
JOIN jobs ... WHERE scheduled_at <= $1 ORDER BY scheduled_at, priority, job_id LIMIT $2 FOR
UPDATE SKIP LOCKED``, served by ``index_firm_queue_dispatch_all``; a semaphore release's
promotion of the next blocked job of its key (semaphore.py) ``WHERE concurrency_key = $1
ORDER BY priority, job_id LIMIT 1 FOR UPDATE SKIP LOCKED`` and the maintenance pass's
``WHERE expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED`` on ``blocked_executions``; the
semaphore's own re-check ``SELECT id, value FROM firm_queue_semaphores WHERE key = $1 FOR
UPDATE`` (one row by its unique key, no SKIP LOCKED: it must wait); ``queues.clear``'s
``WHERE queue_name = $1 FOR UPDATE SKIP LOCKED`` on ready (every ready row of a queue, no
LIMIT, deleted with their jobs); and the supervisor's recovery of claims whose process is
gone (recovery.py): ``claimed_executions JOIN jobs ... WHERE process_id IS NOT NULL AND NOT
EXISTS (SELECT ... FROM firm_queue_processes ...) FOR UPDATE SKIP LOCKED``, at every start
and shutdown, which puts each orphan back in ready.

What that makes of the tables: ``ready_executions`` is the queue, every row of it live (the
worker's claim has no condition, or one that only chooses the queue); ``blocked_executions``
is one too, a queue per concurrency key that a release takes the next row of. ``jobs`` is
not, though the dispatcher's and the recovery's joins lock its rows as well (FOR UPDATE
without OF): they reach it by key from an execution row, no claim picks its rows by what they
hold, and its finished rows are the archive. ``claimed_executions`` holds running jobs, which
only the recovery sweep locks (no order, no LIMIT). ``scheduled_executions`` is left to
either verdict (see `optional`). ``queues.clear``'s sweep of one queue's ready rows is judged
as a claim of ready; nothing fires on it.
"""

import dataclasses

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, Live, NotClaim
from tests.corpus.library import Library, Workload

ARCHIVE_ROWS = 1_000_000
JOBS = "public.firm_queue_jobs"
READY = "public.firm_queue_ready_executions"
SCHEDULED = "public.firm_queue_scheduled_executions"
BLOCKED = "public.firm_queue_blocked_executions"
CLAIMED = "public.firm_queue_claimed_executions"

FIRM_QUEUE = Library(
    name="firm_queue",
    env=envs.PythonEnv(
        "firm-queue",
        (
            "firm-queue==1.0.0",
            "firm-core==1.0.0",
            "SQLAlchemy==2.1.9",
            "alembic==1.20.1",
            # firm-core's postgres extra: psycopg 3 (postgresql+psycopg), server-side binding.
            "psycopg[binary]==3.3.9",
        ),
    ),
    driver="firmqueue_driver.py",
    done_sql="SELECT count(*) FROM firm_queue_jobs WHERE finished_at IS NOT NULL",
    age_sql=(
        # Jobs as a worker leaves them when they succeed: the claim row deleted, finished_at
        # stamped on the job, nothing else (attempts counts failures only). The queues in the
        # workload's proportions; an email carries its concurrency key, as enqueue stores it.
        f"""
        INSERT INTO firm_queue_jobs (queue_name, class_name, arguments, priority, active_job_id,
                                     scheduled_at, finished_at, concurrency_key, attempts,
                                     created_at, updated_at)
        SELECT q.name, '__main__.' || q.job, '{{"args":[' || g || '],"kwargs":{{}}}}', 0, NULL,
               t, t + interval '40 ms', CASE WHEN q.name = 'emails'
                                             THEN '__main__.send_email/' || g % 8 END,
               0, t, t + interval '40 ms'
          FROM generate_series(1, {ARCHIVE_ROWS}) AS g,
               LATERAL (SELECT now() - interval '60 days' + g * interval '5 s' AS t) AS at,
               LATERAL (SELECT CASE WHEN g % 20 < 16 THEN 'default' WHEN g % 20 < 18
                                    THEN 'emails' ELSE 'reports' END AS name,
                               CASE WHEN g % 20 < 16 THEN 'noop' WHEN g % 20 < 18
                                    THEN 'send_email' ELSE 'report' END AS job) AS q
        """,
    ),
    workload=Workload((("default", 1600), ("emails", 200), ("reports", 100)), scheduled=100),
    rerun=Workload((("default", 320), ("emails", 50), ("reports", 30)), scheduled=40),
)

WORKER_CLAIM = Claim(
    READY,
    ("from firm_queue_ready_executions order by", "limit", "for update skip locked"),
    "claim.py claim_ready with the wildcard queue: ORDER BY priority, job_id LIMIT n, no WHERE",
)
QUEUE_CLAIM = Claim(
    READY,
    (
        "from firm_queue_ready_executions where",
        "queue_name =",
        "order by",
        "limit",
        "for update skip locked",
    ),
    "claim.py claim_ready per named queue: WHERE queue_name = $1 ORDER BY priority, job_id LIMIT n",
)
PROMOTE = Claim(
    BLOCKED,
    (
        "from firm_queue_blocked_executions where",
        "concurrency_key =",
        "order by",
        "for update skip locked",
    ),
    "semaphore.py promote_one: the next blocked job of a released key, LIMIT 1",
)
NOT_CLAIMS = (
    NotClaim(
        ("from firm_queue_semaphores", "for update"),
        "semaphore.acquire's re-check of one semaphore row by its unique key",
    ),
    NotClaim(
        ("firm_queue_claimed_executions join firm_queue_jobs", "not (exists"),
        "recovery.py: claims of processes that are gone, put back in ready",
    ),
)

SMALL = {
    "QA101": "the execution tables hold a few thousand rows at most: their indexes are far "
    "under the 8 MiB minimum",
    "QA201": "a few thousand rows pass through each execution table: 50 + 0.2 x that is far "
    "under the minimum trigger",
}
QUIET = {
    "QA204": "an execution row is deleted when its job moves on: no queue table keeps "
    "finished rows (finished jobs stay in firm_queue_jobs, which no claim reads)",
    "QA205": "no claim updates a queue table's rows: they are inserted and deleted",
    "QA301": "no partial index on any queue table: a generic plan has nothing to miss",
    "QA302": "no partial index on any queue table",
    "QA303": "index_firm_queue_poll_all (priority, job_id), poll_by_queue (queue_name, "
    "priority, job_id), dispatch_all (scheduled_at, priority, job_id) and blocked_for_release "
    "(concurrency_key, priority, job_id) supply each claim's order",
    "QA403": "queue names are no tenants",
}


# The wildcard claim has no condition; promote_one's concurrency_key leads
# blocked_for_release, which supplies its order.
NO_FILTER = {"QA304": "no claim filters a column outside the index that supplies its order"}
# Per named queue, a claim of a queue the statistics put at most of the table's rows (the
# binding of $1 is a hypothesis from its most common values) is planned on poll_all with a
# Filter, poll_by_queue (queue_name, priority, job_id) serving it as well: a latent cost that
# pg_stat_statements' blocks per call do not confirm on a table of a hundred rows.
LATENT_FILTER = {
    "QA304": "WHERE queue_name = $1: planned on index_firm_queue_poll_all (priority, job_id) "
    "with a Filter for the queue most of the rows belong to; not confirmed by its counters"
}


def _expect(claims: tuple[Claim, ...], filters: Codes) -> Expect:
    return Expect(
        queues={
            READY: Live.every_row(),
            BLOCKED: Live.every_row(),
        },
        not_queues={
            JOBS: "every job's row, for good: claims reach it only by its key from an "
            "execution row (the dispatcher's and the recovery's joins), never pick its rows; "
            "its finished rows are the archive",
            CLAIMED: "running jobs; only the recovery of dead processes' claims locks them",
            "public.firm_queue_failed_executions": "failed jobs' errors",
            "public.firm_queue_semaphores": "concurrency counters, locked one by its key",
            "public.firm_queue_pauses": "paused queue names",
            "public.firm_queue_processes": "process heartbeats",
            "public.firm_queue_recurring_tasks": "cron definitions",
            "public.firm_queue_recurring_executions": "cron runs, for deduplication",
        },
        optional={
            SCHEDULED: "every row waits for its time, and the dispatcher takes the due ones "
            "(scheduled_at <= $1): a queue by meaning, but a comparison of a time with a "
            "parameter reads the same as a clean-up's age cut-off, so leaving it out is "
            "defensible",
        },
        claims=claims,
        not_claims=NOT_CLAIMS,
        codes={
            "fresh": Codes(
                forbidden={**SMALL, **QUIET, **filters.forbidden}, info_only=filters.info_only
            ),
            "aged": Codes(
                forbidden={**SMALL, **QUIET, **filters.forbidden}, info_only=filters.info_only
            ),
        },
    )


class TestFirmQueue(CorpusSuite):
    library = FIRM_QUEUE
    expect = _expect((WORKER_CLAIM, PROMOTE), Codes(forbidden=NO_FILTER))


NAMED_QUEUES = dataclasses.replace(
    FIRM_QUEUE,
    name="firm_queue_named",
    extra_env={"CORPUS_FIRM_QUEUES": "default,emails,reports"},
    # The same tables aged once; the clone's workers poll named queues.
    aged_from=FIRM_QUEUE,
)


class TestFirmQueueNamedQueues(CorpusSuite):
    """Workers polling named queues: one claim per queue, ``WHERE queue_name = $1``, a
    condition that picks a queue's rows and says nothing about which rows wait."""

    library = NAMED_QUEUES
    expect = _expect((QUEUE_CLAIM, PROMOTE), Codes(info_only=LATENT_FILTER))
