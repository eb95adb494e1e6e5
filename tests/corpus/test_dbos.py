"""DBOS Transact (PyPI), over SQLAlchemy and psycopg 3: a queue in its own schema, server-side
parameters, a bound status, and a dozen partial indexes on one text status.

DBOS keeps every workflow in ``dbos.workflow_status``; a queue is the workflows whose
``queue_name`` names it. The queue runner's claim (``SystemDatabase.start_queued_workflows``,
dbos/_sys_db.py) is ``SELECT workflow_uuid FROM dbos.workflow_status WHERE queue_name = $1
AND status = $2 AND (application_version = $3 OR application_version IS NULL) AND
(application_name IN ($4) OR application_name IS NULL) ORDER BY priority, created_at LIMIT $5
FOR UPDATE SKIP LOCKED``: psycopg 3 binds every value on the server, so ``status`` is a real
parameter ('ENQUEUED'), as pg_stat_statements shows it. The index written for it is
``idx_workflow_status_in_flight_v2 (queue_name, status, priority, created_at) WHERE status IN
('ENQUEUED', 'PENDING')``; beside it, partial indexes on one state each (``DELAYED`` for
delayed workflows, ``PENDING`` for running ones) and on finished ones. A deadline sweep claims
too: ``UPDATE ... SET status = 'CANCELLED', ..., updated_at = CAST(EXTRACT(epoch FROM now()) *
1000 AS BIGINT) WHERE workflow_uuid IN (SELECT ... WHERE status IN (...) AND
workflow_deadline_epoch_ms <= $n ... FOR UPDATE SKIP LOCKED)``, whose EXTRACT field
pg_stat_statements hides as ``$n``. Times are epoch milliseconds in ``bigint`` columns,
which date its archive all the same.
Finished workflows stay in the table: the queue runner deletes none (``DBOS.delete_workflows``
does, for the ids an application passes it).
"""

import pytest

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, Live
from tests.corpus.library import Library, Observed, Workload

STATUSES = ("ENQUEUED", "PENDING", "DELAYED", "SUCCESS", "ERROR", "CANCELLED",
            "MAX_RECOVERY_ATTEMPTS_EXCEEDED")  # fmt: skip
ARCHIVE_ROWS = 1_000_000
TABLE = "dbos.workflow_status"

DBOS_LIB = Library(
    name="dbos",
    env=envs.PythonEnv("dbos", ("dbos==3.4.0", "psycopg[binary]==3.3.9")),
    driver="dbos_driver.py",
    done_sql="SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'",
    age_sql=(
        # Workflows as the queue runner leaves them: succeeded, started and completed a few
        # milliseconds after they were enqueued (epoch ms), over the last 30 days (nothing
        # deletes them), the queues in the workload's proportions; their inputs and outputs
        # (other tables) left out, as no check reads them.
        f"""
        INSERT INTO dbos.workflow_status (workflow_uuid, status, name, executor_id, created_at,
                                          updated_at, started_at_epoch_ms, completed_at,
                                          queue_name, application_name, serialization)
        SELECT gen_random_uuid()::text, 'SUCCESS', 'job', 'local', t, t + 7, t + 5, t + 7,
               CASE WHEN g % 20 < 16 THEN 'default' WHEN g % 20 < 18 THEN 'emails'
                    ELSE 'reports' END,
               'corpus', 'py_pickle'
          FROM generate_series(1, {ARCHIVE_ROWS}) AS g,
               LATERAL (SELECT (extract(epoch FROM now() - interval '30 days') * 1000)::bigint
                               + g::bigint * 2592 AS t) AS at
        """,
    ),
    workload=Workload((("default", 2000), ("emails", 200), ("reports", 100)), scheduled=50),
    rerun=Workload((("default", 320), ("emails", 50), ("reports", 30)), scheduled=20),
    # Stopped halfway: a backlog of about a thousand ENQUEUED workflows in 'default'.
    done_share=0.5,
)

CLAIM = Claim(
    TABLE,
    (
        "select dbos.workflow_status.workflow_uuid",
        "dbos.workflow_status.status = $2::varchar",
        "order by dbos.workflow_status.priority asc, dbos.workflow_status.created_at asc",
        "for update skip locked",
    ),
    "SystemDatabase.start_queued_workflows: queue_name = $1 AND status = $2 ('ENQUEUED') ... "
    "FOR UPDATE SKIP LOCKED",
)


QUIET = {
    "QA302": "status = 'ENQUEUED' implies idx_workflow_status_in_flight_v2's status IN "
    "('ENQUEUED', 'PENDING')",
    "QA303": "idx_workflow_status_in_flight_v2 (queue_name, status, priority, created_at) "
    "supplies the claim's order",
    "QA304": "idx_workflow_status_in_flight_v2 leads with queue_name, the claim's queue_name = $1",
}
# psycopg 3 binds status on the server: a generic plan could not use the in-flight index, but
# the plan cache keeps custom plans while the generic one costs hundreds of times more, and
# nothing on the server shows one running.
LATENT = {
    "QA301": "status is a real parameter; no generic plan of the claim is shown running",
}


class TestDbos(CorpusSuite):
    library = DBOS_LIB
    expect = Expect(
        # The claim binds one of the two states the index written for it holds.
        queues={TABLE: Live("status", frozenset({"ENQUEUED", "PENDING"}), STATUSES)},
        not_queues={
            "dbos.operation_outputs": "each workflow step's output",
            "dbos.workflow_events": "events a workflow sets",
            "dbos.notifications": "messages sent to workflows",
        },
        claims=(CLAIM,),
        not_claims=(),
        codes={
            "fresh": Codes(
                forbidden={
                    **QUIET,
                    "QA101": "the table is small: its indexes are far under the 8 MiB minimum",
                    "QA201": "50 + 0.2 x ~2,500 rows is far under the 50,000 minimum trigger",
                },
                info_only=LATENT,
            ),
            "aged": Codes(
                required={
                    "QA201": "50 + 0.2 x ~1 M rows is ~200,000 dead tuples against about a "
                    "thousand live ones, and DBOS sets no autovacuum reloption",
                    "QA204": "the queue runner deletes no finished workflow: 30 days of them, "
                    "dated by completed_at in epoch milliseconds",
                },
                forbidden={
                    **QUIET,
                    "QA101": "the claim reads idx_workflow_status_in_flight_v2, partial to the "
                    "in-flight states: the archive adds nothing to it",
                },
                info_only=LATENT,
            ),
        },
        targets={"aged": {"QA201": TABLE, "QA204": TABLE}},
    )

    @pytest.mark.parametrize("stage", ["aged"], indirect=True)
    def test_the_archive_is_dated_by_epoch_milliseconds(self, observed: Observed) -> None:
        # DBOS's times are bigint epoch milliseconds: completed_at dates the finished
        # workflows, and the retention DELETE compares it in milliseconds.
        (f,) = observed.check.findings("QA204")
        assert f["severity"] == "warning", f["message"]
        assert f["evidence"]["dated_by"] == "completed_at"
        assert 29 < f["evidence"]["oldest_row_age_days"] <= 30.1
        (step,) = f["fix"]["steps"]
        assert (
            "completed_at < (extract(epoch FROM now() - interval '7 days') * 1000)::bigint"
            in (step["sql"])
        )
