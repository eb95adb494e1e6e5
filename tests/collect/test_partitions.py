"""A claim on a partitioned table: its leaf partitions are the queue tables (real servers).

Autovacuum, sizes, indexes and statistics belong to the partitions, so each leaf is judged on
its own, with the claim that names the parent planned for each.
"""

from __future__ import annotations

from tests.conftest import TestDB, flush_stats
from tests.helpers import assert_quiet, check

CLAIM = (
    "SELECT id FROM jobs WHERE queue = $1 AND status = 'pending' ORDER BY created_at LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)


def test_the_leaves_of_a_claimed_partitioned_table_are_its_queues(db: TestDB) -> None:
    db.execute(
        """
        CREATE EXTENSION pg_stat_statements;
        CREATE TABLE jobs (
            id bigint GENERATED ALWAYS AS IDENTITY,
            queue text NOT NULL,
            status text NOT NULL DEFAULT 'pending',
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (queue, id)
        ) PARTITION BY LIST (queue);
        CREATE TABLE jobs_default PARTITION OF jobs FOR VALUES IN ('default');
        CREATE TABLE jobs_mail PARTITION OF jobs FOR VALUES IN ('mail');
        CREATE INDEX jobs_pending ON jobs (created_at) WHERE status = 'pending';
        INSERT INTO jobs (queue, status)
        SELECT CASE WHEN g % 4 = 0 THEN 'mail' ELSE 'default' END,
               CASE WHEN g % 10 = 0 THEN 'pending' ELSE 'done' END
          FROM generate_series(1, 20000) g;
        ANALYZE jobs;
        """
    )
    with db.connect() as conn:
        for queue in ("default", "mail"):
            with conn.transaction():
                conn.execute(CLAIM.replace("$1", "%s"), [queue])
        flush_stats(conn)
    run = check(db)
    queues = {f"{q['schema']}.{q['table']}": q for q in run.report["queues"]}
    assert set(queues) == {"public.jobs_default", "public.jobs_mail"}, run.report["rejected"]
    for name in queues:
        assert queues[name]["live_predicate"] == "status = 'pending'"
        assert "a partition of public.jobs, which the claim names" in queues[name]["reason"]
        # The claim was planned for each leaf: the statement checks judged them. The literal
        # 'pending' shows as $n in pg_stat_statements, so QA301 can only call it latent.
        assert_quiet(run, "QA303", name)
        (latent,) = [f for f in run.findings("QA301") if f["target"]["table"] == name[7:]]
        assert latent["severity"] == "info" and "Latent" in latent["message"]

    rejected = {f"{r['schema']}.{r['table']}": r["reason"] for r in run.report["rejected"]}
    assert "its partitions are judged as the queue tables" in rejected["public.jobs"]
