"""pq (PyPI), over psycopg2: no status column, a prepared claim whose ORDER BY ends in id.

``PQ.create`` (pq/create.sql) makes one table, ``queue``, for every queue: a job is waiting
while ``dequeued_at IS NULL`` and is done once the claim sets it; nothing deletes it. Its two
partial indexes are made for the queue named '' (``PQ.create`` formats the default queue's
name into them): ``priority_idx_ (schedule_at NULLS FIRST, expected_at NULLS LAST, q_name)
WHERE dequeued_at IS NULL AND q_name = ''`` and ``priority_idx_no_`` on the same key ``WHERE
dequeued_at IS NULL AND q_name != ''``, which every named queue's claim reads.

The claim (``Queue._pull_item``) is a server-side prepared statement (pq's ``@prepared``:
``PREPARE ... AS`` once per connection, then ``EXECUTE``), with the queue's name formatted
into its text as a literal: ``WITH selected AS (SELECT * FROM queue WHERE q_name = '<name>'
AND dequeued_at IS NULL ORDER BY schedule_at NULLS FIRST, expected_at NULLS LAST, id FOR
UPDATE SKIP LOCKED LIMIT 1), updated AS (UPDATE queue AS t SET dequeued_at =
current_timestamp FROM selected WHERE t.id = selected.id AND (t.schedule_at <= now() OR
t.schedule_at IS NULL) ...)``. pg_stat_statements shows the PREPARE's text with every literal
as ``$n``. A job put without ``schedule_at`` or ``expected_at`` (pq's default) has neither,
so the index supplies both as one group of NULLs, and the Incremental Sort above it sorts
every waiting job of the queue by id for each claim.
"""

import pytest

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, Live
from tests.corpus.library import Library, Observed, Workload

ARCHIVE_ROWS = 1_000_000
TABLE = "public.queue"

PQ = Library(
    name="pq",
    env=envs.PythonEnv("pq", ("pq==1.9.1", "psycopg2-binary==2.9.13")),
    driver="pq_driver.py",
    done_sql="SELECT count(*) FROM queue WHERE dequeued_at IS NOT NULL",
    age_sql=(
        # Jobs as pq.tasks leaves them: dequeued (pq keeps them), never scheduled, the task's
        # JSON; the queues in the workload's proportions, over the last 30 days (nothing in
        # pq deletes a job, so the table holds every job since the queue was created).
        f"""
        INSERT INTO queue (enqueued_at, dequeued_at, q_name, data)
        SELECT t, t + interval '5 ms',
               CASE WHEN g % 20 < 16 THEN 'default' WHEN g % 20 < 18 THEN 'emails'
                    ELSE 'reports' END,
               json_build_object('function', '__main__._noop', 'args', json_build_array(g),
                                 'kwargs', '{{}}'::json, 'retried', 0, 'retry_in', '30s',
                                 'max_retries', 0)
          FROM generate_series(1, {ARCHIVE_ROWS}) AS g,
               LATERAL (SELECT now() - interval '30 days' + g * interval '2592 ms' AS t) AS at
        """,
    ),
    workload=Workload((("default", 4000), ("emails", 400), ("reports", 200)), scheduled=100),
    rerun=Workload((("default", 320), ("emails", 50), ("reports", 30)), scheduled=40),
    # Stopped halfway, the worker leaves about 2,000 waiting jobs in 'default' (the small
    # queues' threads finish theirs first): what each of its claims sorts (QA303).
    done_share=0.5,
)

CLAIM = Claim(
    TABLE,
    (
        "with selected as",
        "order by schedule_at nulls first, expected_at nulls last, id",
        "for update skip locked",
    ),
    "Queue._pull_item: q_name = '<name>' AND dequeued_at IS NULL ... FOR UPDATE SKIP LOCKED, "
    "then UPDATE to set dequeued_at",
)

SORTS = {
    "QA303": "priority_idx_no_ supplies only schedule_at, expected_at of ORDER BY "
    "schedule_at NULLS FIRST, expected_at NULLS LAST, id, and both are NULL for every job "
    "pq.tasks puts: each claim sorts its queue's whole backlog by id",
}
LATENT = {
    "QA301": "pq formats the queue's name into the prepared claim as a literal; "
    "pg_stat_statements shows it as $n",
}
SMALL = {
    "QA101": "the table is small: its indexes are far under the 8 MiB minimum",
    "QA201": "50 + 0.2 x ~5,000 rows is far under the 50,000 minimum trigger",
}


class TestPq(CorpusSuite):
    library = PQ
    expect = Expect(
        queues={TABLE: Live("dequeued_at", frozenset())},
        not_queues={},
        claims=(CLAIM,),
        not_claims=(),
        codes={
            "fresh": Codes(required=SORTS, forbidden=SMALL, info_only=LATENT),
            "aged": Codes(
                required={
                    **SORTS,
                    "QA201": "50 + 0.2 x ~1 M rows is ~200,000 dead tuples against a few "
                    "thousand live ones, and pq sets no autovacuum reloption",
                    "QA204": "nothing in pq deletes a dequeued job: the table keeps 30 days "
                    "of them, dated by dequeued_at, the timestamp its claim waits on",
                },
                forbidden={
                    "QA101": "pq's two indexes are partial to dequeued_at IS NULL: the "
                    "archive adds nothing to them",
                },
                info_only=LATENT,
            ),
        },
        targets={"aged": {"QA201": TABLE, "QA204": TABLE}},
    )

    @pytest.mark.parametrize("stage", ["aged"], indirect=True)
    def test_the_archive_is_dated_by_the_timestamp_the_claim_waits_on(
        self, observed: Observed
    ) -> None:
        # pq has no finish-named column: dequeued_at, which the claim sets, dates the jobs
        # taken, and the retention DELETE needs no condition only the application knows.
        (f,) = observed.check.findings("QA204")
        assert f["severity"] == "warning", f["message"]
        assert f["evidence"]["dated_by"] == "dequeued_at"
        assert 29 < f["evidence"]["oldest_row_age_days"] <= 30.1
        (step,) = f["fix"]["steps"]
        assert "AND dequeued_at < now() - interval '7 days';" in step["sql"]
        assert "<condition" not in step["sql"]
