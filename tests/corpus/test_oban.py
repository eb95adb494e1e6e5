"""Oban, the Python port (PyPI; Python >= 3.12): partial indexes on finished states only.

The producer's fetch (``oban/queries/fetch_jobs.sql``): ``WITH locked_jobs AS (SELECT
priority, scheduled_at, id FROM oban_jobs WHERE state = 'available' AND queue = %(queue)s
ORDER BY priority ASC, scheduled_at ASC, id ASC LIMIT %(demand)s FOR UPDATE SKIP LOCKED)
UPDATE oban_jobs ... SET state = 'executing'``. It is served by the non-partial
``oban_jobs_state_queue_priority_scheduled_at_id_index (state, queue, priority,
scheduled_at, id)``. The partial indexes are the stager's (``WHERE state IN ('scheduled',
'retryable')``, for ``stage_jobs.sql``, which moves due jobs to 'available') and the pruner's
(``WHERE state = 'completed'`` / ``'cancelled'`` / ``'discarded'``): none of them is the live
set. The installer sets ``autovacuum_vacuum_scale_factor = 0.02`` on the table.
"""

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, Live
from tests.corpus.library import Library, Workload

STATES = (
    "available",
    "scheduled",
    "suspended",
    "executing",
    "retryable",
    "completed",
    "discarded",
    "cancelled",
)
ARCHIVE_ROWS = 1_000_000

OBAN = Library(
    name="oban",
    env=envs.PythonEnv("oban", ("oban==0.7.0", "psycopg[binary]==3.3.9"), min_python=(3, 12)),
    driver="oban_driver.py",
    done_sql="SELECT count(*) FROM oban_jobs WHERE state = 'completed'",
    age_sql=(
        # Completed jobs as the producer leaves them, within the pruner's default max_age of a
        # day (so a pruner run during the second worker run does not delete them).
        f"""
        INSERT INTO oban_jobs (state, queue, worker, attempt, args, attempted_by,
                               inserted_at, scheduled_at, attempted_at, completed_at)
        SELECT 'completed',
               CASE WHEN g % 20 < 16 THEN 'default' WHEN g % 20 < 18 THEN 'emails'
                    ELSE 'reports' END,
               '__main__.Noop', 1, jsonb_build_object('n', g),
               ARRAY['corpus.1', gen_random_uuid()::text],
               t, t, t + interval '5 ms', t + interval '7 ms'
          FROM generate_series(1, {ARCHIVE_ROWS}) AS g,
               LATERAL (SELECT timezone('UTC', now()) - interval '20 hours'
                               + g * interval '60 ms' AS t) AS at
        """,
    ),
    workload=Workload((("default", 1600), ("emails", 200), ("reports", 100)), scheduled=100),
    rerun=Workload((("default", 320), ("emails", 50), ("reports", 30)), scheduled=40),
)

QUIET = {
    "QA302": "the partial indexes are the pruner's and the stager's, not the claim's",
    "QA303": "the (state, queue, priority, scheduled_at, id) index supplies the claim's order",
}
# The stager binds its states (state = ANY($4)), which are planned from the staging index's
# predicate: its generic plan would miss that index, and nothing on the server shows it
# running one (a handful of calls, custom plans far cheaper), so QA301 is latent at most.
LATENT = {"QA301": "the stager's generic plan is latent: the plan cache keeps custom plans"}
INDEX = "public.oban_jobs_state_queue_priority_scheduled_at_id_index"


class TestOban(CorpusSuite):
    library = OBAN
    expect = Expect(
        queues={"public.oban_jobs": Live("state", frozenset({"available"}), STATES)},
        not_queues={
            "public.oban_producers": "producer registry",
            "public.oban_leaders": "leader election",
        },
        claims=(
            Claim(
                "public.oban_jobs",
                (
                    "with locked_jobs",
                    "public.oban_jobs",
                    "and queue =",
                    "order by priority asc, scheduled_at asc, id asc",
                    "for update skip locked",
                ),
                "the producer's fetch_jobs (state = 'available' AND queue = ...)",
            ),
        ),
        not_claims=(),
        codes={
            "fresh": Codes(
                forbidden={
                    **QUIET,
                    "QA101": "the table is small: its indexes are far under the 8 MiB minimum",
                    "QA201": "the table is small, and its scale factor is 0.02",
                },
                info_only=LATENT,
            ),
            "aged": Codes(
                required={
                    "QA101": "the (state, queue, priority, scheduled_at, id) index has no "
                    "WHERE and holds ~1 M completed jobs for a live set of a few hundred",
                },
                forbidden={
                    **QUIET,
                    "QA201": "Oban sets autovacuum_vacuum_scale_factor = 0.02: 50 + 0.02 x "
                    "~1 M = ~20,000 dead tuples, under the 50,000 minimum trigger",
                },
                info_only=LATENT,
            ),
        },
        targets={"aged": {"QA101": INDEX}},
    )
