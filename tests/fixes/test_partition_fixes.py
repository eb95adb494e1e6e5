"""An index of a partitioned table, built and dropped as PostgreSQL allows (real servers):
no CONCURRENTLY on the partitioned table itself, so the index ON ONLY it and each
partition's built CONCURRENTLY and attached, through every level of nesting."""

from __future__ import annotations

import psycopg
import pytest

from qadvisor.api import (
    drop_index,
)
from qadvisor.api.provisional import (
    IndexKey,
    live_set_index,
)
from qadvisor.model import LivePredicate
from tests.collect.test_statements_collect import take_snapshot
from tests.conftest import TestDB
from tests.partitioned import COMPOSITE_INDEX, build_nested

PENDING = LivePredicate("status", "in", ("pending",))


def test_an_index_of_nested_partitions_is_built_as_printed_and_valid(db: TestDB) -> None:
    build_nested(db, rows=2_000, indexes=COMPOSITE_INDEX)
    # Found by its structure (status values, an index on status): no claim is needed here.
    jobs = {t.name: t for t in take_snapshot(db).tables}["jobs"]
    assert jobs.partition_key == "LIST (queue)"
    build = live_set_index(jobs, PENDING, [IndexKey("created_at")])
    steps = build.steps()
    sqls = [s.sql for s in steps]
    assert sqls[0] == (
        "CREATE INDEX jobs_pending_created_at_idx ON ONLY public.jobs (created_at) "
        "WHERE status = 'pending';"
    )
    # jobs_mail is partitioned again: its index ON ONLY it, attached before its leaves'.
    mail_only = sqls.index(
        "CREATE INDEX jobs_mail_pending_created_at_idx ON ONLY public.jobs_mail (created_at) "
        "WHERE status = 'pending';"
    )
    leaf = sqls.index(
        "CREATE INDEX CONCURRENTLY jobs_mail_new_pending_created_at_idx ON public.jobs_mail_new "
        "(created_at) WHERE status = 'pending';"
    )
    assert mail_only < leaf
    assert (
        "ALTER INDEX public.jobs_mail_pending_created_at_idx ATTACH PARTITION "
        "public.jobs_mail_new_pending_created_at_idx;"
    ) in sqls
    assert [s.lock for s in steps][:1] == ["SHARE"]
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        for sql in sqls:
            conn.execute(sql)
    ((valid, parts),) = db.execute(
        "SELECT i.indisvalid, (SELECT count(*) FROM pg_partition_tree(i.indexrelid)) "
        "FROM pg_index i WHERE i.indexrelid = 'jobs_pending_created_at_idx'::regclass"
    )
    # The root's, jobs_mail's, and the three leaves'.
    assert valid and parts == 5

    # Dropped as PostgreSQL allows a partitioned table's index to be: not CONCURRENTLY.
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="concurrently"):
        db.execute(drop_index("public", "jobs_status_created_at").sql)
    step = drop_index("public", "jobs_status_created_at", partitioned=True)
    assert step.sql == "DROP INDEX public.jobs_status_created_at;" and step.in_transaction_block
    db.execute(step.sql)
    assert db.execute("SELECT to_regclass('jobs_status_created_at')") == [(None,)]
