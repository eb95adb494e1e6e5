"""QA103 invalid-index-on-queue: unit tests on snapshots, then invalid indexes left on real
servers by a failed CREATE INDEX CONCURRENTLY and a failed REINDEX CONCURRENTLY, dropped with
the printed fix."""

from __future__ import annotations

import contextlib
import dataclasses

import psycopg
import pytest

from qadvisor.model import Finding
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import Pathology, Run, assert_quiet, build_archive_queue, check
from tests.shapes import Shape

MB = 1024 * 1024


def test_a_ccnew_leftover_names_the_index_it_shadows_and_points_at_qa101() -> None:
    valid = S.index("jobs_status_created_at_idx", ("status", "created_at"), 300 * MB)
    left = dataclasses.replace(
        S.index("jobs_status_created_at_idx_ccnew", ("status", "created_at"), 40 * MB),
        is_valid=False,
    )
    (f,) = S.run("QA103", S.snapshot(S.jobs_table(indexes=(valid, left))))
    assert isinstance(f, Finding) and f.key == "QA103:public.jobs_status_created_at_idx_ccnew"
    assert f.evidence["shadowed_index"] == "jobs_status_created_at_idx"
    assert f.evidence["left_by"] == "REINDEX CONCURRENTLY left its new copy"
    assert f.fix is not None and f.fix.statements == (
        "DROP INDEX CONCURRENTLY public.jobs_status_created_at_idx_ccnew;",
    )
    assert "QA101" in f.fix.notes and "pg_stat_progress_create_index" in f.fix.notes
    assert f.evidence["maintained_by_writes"] is True and "every write maintains" in f.message
    never_filled = dataclasses.replace(left, is_ready=False, bytes=0)
    (f,) = S.run("QA103", S.snapshot(S.jobs_table(indexes=(valid, never_filled))))
    assert isinstance(f, Finding) and f.evidence["maintained_by_writes"] is False
    assert f.fix is not None and "IF NOT EXISTS skips it" in f.fix.notes


def test_quiet_when_every_index_is_valid() -> None:
    valid = S.index("jobs_status_created_at_idx", ("status", "created_at"), 300 * MB)
    S_report = S.report("QA103", S.snapshot(S.jobs_table(indexes=(valid,))))
    assert_quiet(S_report, "QA103")


# --- on real servers ---------------------------------------------------------------------------


def _ready(shape: Shape, name: str) -> bool:
    (row,) = shape.db.execute(
        "SELECT x.indisready FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid"
        " WHERE c.relname = %s",
        [name],
    )
    return bool(row[0])


def _index_names(shape: Shape) -> dict[str, bool]:
    rows = shape.db.execute(
        "SELECT c.relname, x.indisvalid FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid"
        " WHERE x.indrelid = 'jobs'::regclass"
    )
    return {str(name): bool(valid) for name, valid in rows}


def test_a_failed_create_index_concurrently_found_dropped_and_gone(shape: Shape) -> None:
    build_archive_queue(shape.db, archive=50_000, live=500)
    # Two jobs created at the same instant: the unique build fails, its index stays, invalid.
    shape.db.execute("UPDATE jobs SET created_at = (SELECT created_at FROM jobs WHERE id = 1)"
                     " WHERE id = 2")  # fmt: skip
    with pytest.raises(psycopg.errors.UniqueViolation):
        shape.db.execute(
            "CREATE UNIQUE INDEX CONCURRENTLY jobs_created_at_key ON jobs (created_at)"
        )
    assert _index_names(shape)["jobs_created_at_key"] is False
    # The build failed before it filled the index: no write maintains it, and its name blocks
    # the same build run again with IF NOT EXISTS.
    assert _ready(shape, "jobs_created_at_key") is False
    shape.db.execute("CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_created_at_key ON jobs (id)")
    assert _index_names(shape)["jobs_created_at_key"] is False
    # Named with --table: QA103 reads no live set, so the monitoring role has no grant that
    # would let discovery read the status values.
    (f,) = shape.check("--table", shape.queue).findings("QA103")
    assert f["target"]["name"] == "jobs_created_at_key"
    assert f["evidence"]["left_by"] == "a CREATE INDEX CONCURRENTLY failed or was cancelled"
    assert f["evidence"]["maintained_by_writes"] is False
    assert "no write maintains it" in f["message"] and "IF NOT EXISTS" in f["message"]
    shape.apply_fix(f)
    assert "jobs_created_at_key" not in _index_names(shape)
    assert_quiet(shape.check("--table", shape.queue), "QA103", shape.queue, live=False)


def test_a_reindex_that_timed_out_leaves_a_ccnew_found_and_dropped(shape: Shape) -> None:
    build_archive_queue(shape.db, archive=50_000, live=500)
    # A worker's open transaction holds its row lock; REINDEX CONCURRENTLY waits for it to
    # end, its lock_timeout expires, and the new copy it had built stays behind, invalid.
    with shape.db.connect() as worker:
        worker.execute("BEGIN")
        worker.execute("UPDATE jobs SET status = 'running' WHERE id = 400")
        with shape.db.connect() as dba, pytest.raises(psycopg.errors.LockNotAvailable):
            dba.execute("SET lock_timeout = '300ms'")
            dba.execute("REINDEX INDEX CONCURRENTLY jobs_status_created_at_idx")
        worker.execute("ROLLBACK")
    assert _index_names(shape)["jobs_status_created_at_idx_ccnew"] is False
    (f,) = shape.check("--table", shape.queue).findings("QA103")
    assert f["target"]["name"] == "jobs_status_created_at_idx_ccnew"
    ready = _ready(shape, "jobs_status_created_at_idx_ccnew")
    assert f["evidence"]["maintained_by_writes"] is ready
    assert f["evidence"]["shadowed_index"] == "jobs_status_created_at_idx"
    assert "QA101" in f["fix"]["notes"]
    shape.apply_fix(f)
    assert "jobs_status_created_at_idx_ccnew" not in _index_names(shape)
    assert_quiet(shape.check("--table", shape.queue), "QA103", shape.queue, live=False)


def test_a_build_cancelled_once_filled_is_maintained_by_every_write(shape: Shape) -> None:
    build_archive_queue(shape.db, archive=50_000, live=500)
    # A session's old snapshot: CREATE INDEX CONCURRENTLY has built and filled the index and
    # waits for that snapshot before marking it valid; its lock_timeout ends the wait.
    with shape.db.connect() as reader:
        reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        reader.execute("SELECT 1 FROM pg_class LIMIT 1")
        with shape.db.connect() as dba, pytest.raises(psycopg.errors.LockNotAvailable):
            dba.execute("SET lock_timeout = '500ms'")
            dba.execute("CREATE INDEX CONCURRENTLY jobs_run_at_idx ON jobs (created_at)")
        reader.execute("ROLLBACK")
    assert _index_names(shape)["jobs_run_at_idx"] is False
    assert _ready(shape, "jobs_run_at_idx") is True
    (f,) = shape.check("--table", shape.queue).findings("QA103")
    assert f["evidence"]["maintained_by_writes"] is True
    assert "every write maintains it" in f["message"]
    shape.apply_fix(f)
    assert "jobs_run_at_idx" not in _index_names(shape)
    assert_quiet(shape.check("--table", shape.queue), "QA103", shape.queue, live=False)


def test_quiet_on_a_healthy_queue(shape: Shape) -> None:
    build_archive_queue(shape.db, composite=False, partial=True)
    assert_quiet(shape.check("--table", shape.queue), "QA103", shape.queue, live=False)


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_archive_queue(db, archive=10_000)
    db.execute(
        "UPDATE jobs SET created_at = (SELECT created_at FROM jobs WHERE id = 1) WHERE id = 2"
    )
    with contextlib.suppress(psycopg.errors.UniqueViolation):
        db.execute("CREATE UNIQUE INDEX CONCURRENTLY jobs_created_at_key ON jobs (created_at)")
    return check(db)


FIX_PATHOLOGIES = {"invalid-index": Pathology(frozenset({"QA103"}), _fix_pathology)}
