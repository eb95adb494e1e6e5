"""QA102 dead-entry-bloated-partial-index."""

from __future__ import annotations

import pytest

from qadvisor.api.provisional import (
    btree_bytes,
)
from qadvisor.model import Finding, Severity
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import Pathology, Run, assert_quiet, build_archive_queue, check
from tests.shapes import Shape

MB = 1024 * 1024
PENDING_PRED = "(status = 'pending'::text)"


def test_measured_case_38_mb_for_5000_entries() -> None:
    idx = S.index("jobs_pending_created_at", ("created_at",), int(38.2 * MB),
                  predicate=PENDING_PRED, reltuples=5_000)  # fmt: skip
    (f,) = S.run("QA102", S.snapshot(S.jobs_table(indexes=(idx,))))
    assert isinstance(f, Finding) and f.fix is not None
    assert f.evidence["index_entries"] == 5_000
    assert f.evidence["size_ratio"] > 100
    assert f.fix.statements[0] == "REINDEX INDEX CONCURRENTLY public.jobs_pending_created_at;"
    # The default vacuum trigger of a 10 M row table is the cause: its fix comes along.
    assert "autovacuum_vacuum_scale_factor = 0" in f.fix.statements[1]


def test_quiet_for_a_right_sized_partial_index() -> None:
    idx = S.index("jobs_pending_created_at", ("created_at",), 2 * MB, predicate=PENDING_PRED,
                  reltuples=50_000)  # fmt: skip
    assert_quiet(S.report("QA102", S.snapshot(S.jobs_table(indexes=(idx,)))), "QA102")


@pytest.mark.parametrize(
    ("ratio", "severity"),
    [(9.9, None), (10.1, Severity.INFO), (11.9, Severity.INFO), (12.1, Severity.WARNING)],
)
def test_a_size_ratio_within_the_margin_of_min_size_ratio_is_info(
    ratio: float, severity: Severity | None
) -> None:
    # The fresh size comes from the index's row estimate, which moves between runs:
    # min_size_ratio 10 with a 20 % margin, so 10 to 12 times is info on every run.
    fresh = btree_bytes(S.jobs_table(), ("created_at",), 100_000)
    idx = S.index("jobs_pending_created_at", ("created_at",), int(fresh * ratio),
                  predicate=PENDING_PRED, reltuples=100_000)  # fmt: skip
    snap = S.snapshot(S.jobs_table(indexes=(idx,)))
    S.assert_margin_answer(S.run("QA102", snap), S.run("QA102", snap), severity)


def churn_partial_index(db: TestDB, rounds: int, batch: int) -> None:
    # Claims move rows out of the partial index's predicate; without vacuum their entries stay.
    for _ in range(rounds):
        db.execute(
            f"""
            INSERT INTO jobs (status, created_at)
            SELECT 'pending', clock_timestamp() FROM generate_series(1, {batch});
            UPDATE jobs SET status = 'done', finished_at = now()
             WHERE id IN (SELECT id FROM jobs WHERE status = 'pending'
                           ORDER BY created_at LIMIT {batch});
            """
        )


def test_bloated_partial_index_found_reindexed_and_gone(shape: Shape) -> None:
    db = shape.db
    build_archive_queue(db, archive=50_000, composite=False, partial=True,
                        reloptions="autovacuum_enabled = false")  # fmt: skip
    churn_partial_index(db, rounds=40, batch=5_000)
    db.execute("ANALYZE jobs")
    run = shape.check()
    (f,) = run.findings("QA102")
    ev = f["evidence"]
    assert f["target"]["name"] == "jobs_pending_created_at"
    assert ev["index_bytes"] > 1 * MB
    assert ev["size_ratio"] >= 10
    assert ev["index_entries"] < 5_000
    shape.apply_fix(f)
    assert_quiet(shape.check(), "QA102", shape.queue)


def test_quiet_on_a_fresh_partial_index(shape: Shape) -> None:
    build_archive_queue(shape.db, composite=False, partial=True)
    assert_quiet(shape.check(), "QA102", shape.queue)


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_archive_queue(db, archive=50_000, composite=False, partial=True,
                        reloptions="autovacuum_enabled = false")  # fmt: skip
    churn_partial_index(db, rounds=40, batch=5_000)
    db.execute("ANALYZE jobs")
    return check(db)


FIX_PATHOLOGIES = {"bloated-partial": Pathology(frozenset({"QA102"}), _fix_pathology)}
