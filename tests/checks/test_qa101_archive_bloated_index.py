"""QA101 archive-bloated-index: unit tests on snapshots, then the pathology on real servers."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qadvisor.api.provisional import (
    btree_bytes,
)
from qadvisor.demo.pgserver import LocalServer, start_server
from qadvisor.model import Finding, Severity, Skip
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import (
    Pathology,
    Run,
    assert_quiet,
    build_archive_queue,
    check,
    qadvisor,
    record_afresh,
)
from tests.narrow import present
from tests.partitioned import COMPOSITE_INDEX, DAILY_CLAIM, MAIL_CLAIM, build_by_queue, build_daily
from tests.shapes import Shape

MB = 1024 * 1024


def test_composite_index_over_the_archive_is_flagged_with_the_measured_numbers() -> None:
    # The measured case: 10 M rows, 5,000 pending, composite (status, created_at) at 310.4 MB.
    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), int(310.4 * MB))
    out = S.run("QA101", S.snapshot(S.jobs_table(indexes=(idx,))))
    assert len(out) == 1 and isinstance(out[0], Finding)
    f = out[0]
    assert f.key == "QA101:public.jobs_status_created_at_idx"
    assert f.evidence["live_rows"] == 5_000
    assert f.evidence["archive_fraction"] == 0.9995
    # A fresh partial (created_at) index on 5,000 rows: a few pages, not megabytes.
    assert 16_384 <= f.evidence["estimated_partial_bytes"] < 300_000
    assert f.fix is not None
    assert f.fix.statements == (
        "CREATE INDEX CONCURRENTLY jobs_pending_created_at_idx ON public.jobs (created_at) "
        "WHERE status = 'pending';",
        "DROP INDEX CONCURRENTLY public.jobs_status_created_at_idx;",
    )


def test_constraint_index_is_never_dropped() -> None:
    idx = S.index("jobs_status_id_key", ("status", "id"), 200 * MB, is_unique=True,
                  is_constraint=True)  # fmt: skip
    (f,) = S.run("QA101", S.snapshot(S.jobs_table(indexes=(idx,))))
    assert isinstance(f, Finding) and f.fix is not None
    assert len(f.fix.statements) == 1 and f.fix.statements[0].startswith("CREATE INDEX")
    assert "constraint" in f.fix.notes


def test_quiet_for_partial_small_or_mostly_live_indexes() -> None:
    partial = S.index("p", ("created_at",), 300 * MB, predicate="(status = 'pending'::text)")
    small = S.index("small", ("status", "created_at"), 4 * MB)
    assert_quiet(S.report("QA101", S.snapshot(S.jobs_table(indexes=(partial, small)))), "QA101")
    # Rows deleted on completion: half the table is live.
    busy = S.index("busy", ("status", "created_at"), 300 * MB)
    assert_quiet(
        S.report("QA101", S.snapshot(S.jobs_table(indexes=(busy,), pending_freq=0.5))), "QA101"
    )


def test_unreadable_pg_stats_is_a_reported_skip_not_a_guess() -> None:
    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), 300 * MB)
    table = S.jobs_table(indexes=(idx,), pending_freq=None, stats_visible=False)
    (skip,) = S.run("QA101", S.snapshot(table))
    assert isinstance(skip, Skip) and "GRANT SELECT (status) ON public.jobs" in skip.reason


def test_archive_index_found_fixed_and_gone(shape: Shape) -> None:
    db = shape.db
    build_archive_queue(db)
    run = shape.check()
    assert run.rc == 1
    (f,) = run.findings("QA101")
    assert f["target"] == {"kind": "index", "schema": shape.schema, "table": "jobs",
                           "name": "jobs_status_created_at_idx"}  # fmt: skip
    ev = f["evidence"]
    assert ev["index_bytes"] > 8 * MB
    assert 400_000 <= ev["table_rows"] <= 401_000
    # 500 live rows, estimated from pg_stats: ANALYZE samples 30,000 of 400,500 rows, so it
    # sees about 37 pending ones (standard deviation about 6); these bounds are 3.7 deviations.
    assert 200 <= ev["live_rows"] <= 800
    assert ev["archive_fraction"] > 0.99
    assert ev["size_ratio"] >= 10
    # Without pg_stat_statements nobody can know what else reads the index: the DROP is a
    # step for review, applied here as the DBA who reviewed it would.
    (drop,) = [s for s in f["fix"]["steps"] if s["sql"].startswith("DROP INDEX")]
    assert drop["kind"] == "review" and "pg_stat_statements" in f["fix"]["notes"]
    shape.apply_fix(f, review=True)
    names = {r[0] for r in db.execute("SELECT indexname FROM pg_indexes WHERE tablename='jobs'")}
    assert names == {"jobs_pkey", "jobs_pending_created_at_idx"}
    assert_quiet(shape.check(), "QA101", shape.queue)


def test_quiet_on_a_healthy_queue(shape: Shape) -> None:
    build_archive_queue(shape.db, composite=False, partial=True)
    assert_quiet(shape.check(), "QA101", shape.queue)


def test_quiet_when_rows_are_deleted_on_completion(shape: Shape) -> None:
    # Finished rows are deleted: the table is its live set, plus the few done rows the
    # cleanup has not reached yet (which also tell discovery what live means).
    build_archive_queue(shape.db, archive=2_000, live=300_000)
    run = shape.check("--table", shape.queue)
    (queue,) = run.report["queues"]
    assert queue["live_predicate"] == "status = 'pending'"
    assert_quiet(run, "QA101", shape.queue)


def test_index_led_by_the_dequeue_order_column_is_on_the_dequeue_path() -> None:
    import dataclasses

    from qadvisor.model import Statement
    from qadvisor.sql.dequeue import analyse

    idx = S.index("jobs_created_at_idx", ("created_at",), 200 * MB)
    snap = S.snapshot(S.jobs_table(indexes=(idx,)))
    # Without a known dequeue the index is just an index on created_at.
    assert_quiet(S.report("QA101", snap), "QA101")
    claim = ("SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 1 "
             "FOR UPDATE SKIP LOCKED")  # fmt: skip
    snap = dataclasses.replace(snap, statements=(Statement("--query 1", claim, analyse(claim)),))
    (f,) = S.run("QA101", snap)
    assert isinstance(f, Finding) and f.fix is not None
    assert f.fix.statements[0] == (
        "CREATE INDEX CONCURRENTLY jobs_pending_created_at_idx ON public.jobs (created_at) "
        "WHERE status = 'pending';"
    )


def test_an_index_another_claims_plan_reads_is_kept_unless_the_new_index_matches_it() -> None:
    # Two claims on the table read the bloated index today: the dequeue of pending jobs,
    # which the partial index matches, and a stager of retries (another status), which it
    # does not (the oban corpus: the fetch and the stager share one full index).
    import dataclasses

    from qadvisor.model import PlanNode, Statement
    from qadvisor.sql.dequeue import analyse

    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), 300 * MB)
    reads = PlanNode("Limit", children=(
        PlanNode("Index Scan", relation="jobs", schema="public", index=idx.name),
    ))  # fmt: skip
    claim = ("SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 1 "
             "FOR UPDATE SKIP LOCKED")  # fmt: skip
    stager = claim.replace("'pending'", "'retry'")
    snap = S.snapshot(S.jobs_table(indexes=(idx,)))

    def fix_of(*texts: str) -> tuple[str, ...]:
        stmts = tuple(
            Statement(f"--query {n}", t, analyse(t), custom_plan=reads)
            for n, t in enumerate(texts, 1)
        )
        (f,) = S.run("QA101", dataclasses.replace(snap, statements=stmts))
        assert isinstance(f, Finding) and f.fix is not None
        return (*f.fix.statements, f.fix.notes, f.fix.steps[0].note)

    *statements, notes, create_note = fix_of(claim)
    assert statements[-1] == "DROP INDEX CONCURRENTLY public.jobs_status_created_at_idx;"
    assert "Statements whose WHERE implies" in create_note and "--query 1" in create_note
    *statements, notes, create_note = fix_of(claim, stager)
    assert len(statements) == 1 and statements[0].startswith("CREATE INDEX")
    assert "jobs_status_created_at_idx is kept: the plans of 1 other claim(s)" in notes
    assert "--query 2" in notes


def test_a_claim_that_still_reads_the_old_index_beside_its_partial_one_keeps_the_finding() -> None:
    # The partial index on the live set exists, and the old one is kept for a claim whose
    # plan reads it. Quiet when the claim takes other rows (a stager of retries, by a
    # literal), or when only its generic plan passes the partial index over (QA301's: a $n
    # of pg_stat_statements may be a literal the application wrote). Not quiet when, planned
    # with its values bound, the claim of the live set still reads the old index: the partial
    # index is no evidence the dequeue left it, and nothing is to be built or dropped.
    import dataclasses

    from qadvisor.model import PlanNode, Statement
    from qadvisor.sql.dequeue import analyse

    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), 300 * MB)
    partial = S.index("jobs_pending_created_at", ("created_at",), 1 * MB,
                      predicate="(status = 'pending'::text)")  # fmt: skip

    def reading(name: str) -> PlanNode:
        return PlanNode("Limit", children=(
            PlanNode("Index Scan", relation="jobs", schema="public", index=name),
        ))  # fmt: skip

    snap = S.snapshot(S.jobs_table(indexes=(idx, partial)))
    claim = (
        "SELECT id FROM jobs WHERE status = {} ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
    )

    def judged(value: str, custom: str, generic: str | None = None) -> list[object]:
        text = claim.format(value)
        stmt = Statement("--query 1", text, analyse(text), custom_plan=reading(custom),
                         generic_plan=reading(generic) if generic else None)  # fmt: skip
        return S.run("QA101", dataclasses.replace(snap, statements=(stmt,)))

    assert judged("'retry'", idx.name) == []
    assert judged("$1", partial.name, generic=idx.name) == []
    (f,) = judged("$1", idx.name)
    assert isinstance(f, Finding) and f.fix is not None
    assert f.fix.statements == () and f.fix.steps == ()
    assert f.evidence["existing_partial_index"] == "jobs_pending_created_at"
    assert f.evidence["claims_reading_index"] == ["--query 1"]
    assert "planned with their values bound, 1 claim(s) on the live set still read" in (f.fix.notes)


def test_a_generic_plan_the_counters_say_never_ran_does_not_keep_the_index() -> None:
    # pg-boss's fetch writes its state as a literal, which pg_stat_statements shows as $2:
    # planned with it bound, the claim reads the live set's partial index; its generic plan
    # reads the bloated full index, which the server has never scanned while the claim ran.
    # The index is then not kept for that plan, and its DROP is for review with why. A scan
    # counted (or a standby, which counts its own scans only) keeps it as before.
    import dataclasses

    from qadvisor.model import PlanNode, Statement
    from qadvisor.sql.dequeue import analyse

    def reading(name: str) -> PlanNode:
        return PlanNode("Limit", children=(
            PlanNode("Index Scan", relation="jobs", schema="public", index=name),
        ))  # fmt: skip

    partial = S.index("jobs_live_idx", ("id",), 1 * MB,
                      predicate="(status = 'pending'::text)")  # fmt: skip
    text = "SELECT id FROM jobs WHERE status = $1 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"

    def judged(
        scans: int,
        standby: bool = False,
        calls: int | None = 12,
        reset: str | None = "2026-12-01T00:00:00+00:00",
        pgss: str | None = "2026-12-02T00:00:00+00:00",
    ) -> Finding:
        idx = S.index("jobs_full_idx", ("status", "created_at"), 300 * MB,
                      idx_scan=scans)  # fmt: skip
        snap = S.snapshot(S.jobs_table(indexes=(idx, partial)))
        claim = Statement("pg_stat_statements", text, analyse(text), calls=calls,
                          custom_plan=reading(partial.name),
                          generic_plan=reading(idx.name))  # fmt: skip
        server = dataclasses.replace(snap.server, is_standby=standby, stats_reset=reset)
        snap = dataclasses.replace(snap, statements=(claim,), server=server, pgss_since=pgss)
        (f,) = S.run("QA101", snap)
        assert isinstance(f, Finding) and f.fix is not None
        return f

    # The claim orders by id: a partial (created_at) index would serve no recorded statement,
    # so none is proposed; its own partial index already serves it.
    f = judged(scans=0)
    fix = present(f.fix)
    assert [s.kind for s in fix.steps] == ["review"]
    assert fix.steps[0].sql == "DROP INDEX CONCURRENTLY public.jobs_full_idx;"
    assert "jobs_pending_created_at_idx (derived from their text), so it is not proposed" in (
        fix.notes
    )
    assert f.evidence["claims_reading_index"] == []
    (label,) = f.evidence["claims_whose_generic_plan_alone_reads_index"]
    assert label.startswith("pg_stat_statements") and "(12 calls)" in label
    assert (
        "the server has not scanned jobs_full_idx since statistics were reset "
        "(2026-12-01T00:00:00+00:00) while pg_stat_statements counted 12 call(s) of them since "
        "its reset (2026-12-02T00:00:00+00:00); planned with their values bound they read "
        "jobs_live_idx"
    ) in fix.notes
    never = present(judged(scans=0, reset=None, pgss=None).fix)
    assert [s.kind for s in never.steps] == ["review"]
    assert "scanned jobs_full_idx ever (statistics never reset)" in never.notes
    # The scans counted over a shorter span than the calls (statistics reset after
    # pg_stat_statements was, or its reset unknown) cannot say the generic plan never ran.
    late = judged(scans=0, reset="2026-12-03T00:00:00+00:00")
    unknown = judged(scans=0, pgss=None)
    for kept in (judged(scans=3), judged(scans=0, standby=True), judged(scans=0, calls=None),
                 late, unknown):  # fmt: skip
        # Kept, and nothing to build: info.
        kept_fix = present(kept.fix)
        assert [s.kind for s in kept_fix.steps] == [], kept_fix.notes
        assert kept.severity == Severity.INFO
        assert "jobs_full_idx is kept: the plans of 1 other claim(s)" in kept_fix.notes
        assert "claims_whose_generic_plan_alone_reads_index" not in kept.evidence


def test_a_claim_that_could_not_be_planned_makes_the_drop_a_review() -> None:
    # The claim may read the old index today: nobody knows, unless the new partial index
    # matches its WHERE and ORDER BY (it moves there with the dequeue).
    import dataclasses

    from qadvisor.model import Statement
    from qadvisor.sql.dequeue import analyse

    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), 300 * MB)
    snap = S.snapshot(S.jobs_table(indexes=(idx,)))
    why = "not planned: canceling statement due to lock timeout"

    def drop_of(order: str) -> tuple[str, Finding]:
        text = (f"SELECT id FROM jobs WHERE status = 'pending' ORDER BY {order} LIMIT 1 "
                "FOR UPDATE SKIP LOCKED")  # fmt: skip
        stmt = Statement("pg_stat_statements", text, analyse(text), calls=9, plan_error=why)
        (f,) = S.run("QA101", dataclasses.replace(snap, statements=(stmt,)))
        assert isinstance(f, Finding) and f.fix is not None
        (drop,) = [s for s in f.fix.steps if s.sql.startswith("DROP INDEX")]
        return drop.kind, f

    kind, f = drop_of("id")
    assert kind == "review"
    (said,) = f.evidence["claims_not_planned"]
    assert said.endswith(f": {why}")
    notes = present(f.fix).notes
    assert f"1 claim(s) on the table could not be planned ({said}), so nobody knows" in notes
    assert "whether they read jobs_status_created_at_idx: the DROP is for review" in notes
    kind, f = drop_of("created_at")
    assert kind == "migration" and "claims_not_planned" not in f.evidence


def test_order_column_index_found_through_the_query_and_fixed(shape: Shape) -> None:
    db = shape.db
    build_archive_queue(db, composite=False)
    db.execute("CREATE INDEX jobs_created_at_idx ON jobs (created_at)")
    claim = (
        "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs "
        "WHERE status = 'pending' ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id"
    )
    run = shape.check("--table", shape.queue, "--query", claim)
    (f,) = run.findings("QA101")
    assert f["target"]["name"] == "jobs_created_at_idx"
    shape.apply_fix(f, review=True)  # no pg_stat_statements: the DROP is the DBA's to review
    assert_quiet(shape.check("--table", shape.queue, "--query", claim), "QA101", shape.queue)


LISTING = "SELECT id FROM jobs WHERE status = %s AND created_at < %s ORDER BY created_at LIMIT 100"
PURGE = "DELETE FROM jobs WHERE status = %s AND created_at < %s"
CLAIM = (
    "SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)


def _run_the_application(shape: Shape) -> None:
    """The claim, an admin listing of rejected jobs and their purge (rolled back), as the
    application sends them: pg_stat_statements records the listing and purge with $n."""
    with shape.db.connect() as conn:
        for _ in range(5):
            conn.execute(CLAIM)
            conn.execute(LISTING, ("rejected", "2100-01-01"))
        with conn.transaction(force_rollback=True):
            conn.execute(PURGE, ("rejected", "2000-01-01"))


def _listing_buffers(shape: Shape) -> tuple[int, str]:
    plan = shape.db.execute(
        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
        + LISTING.replace("%s", "'rejected'", 1).replace("%s", "'2100-01-01'")
    )[0][0][0]["Plan"]
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"]), str(plan)


def test_an_index_another_recorded_statement_reads_is_never_dropped(shape: Shape) -> None:
    db = shape.db
    build_archive_queue(db)
    db.execute(
        "INSERT INTO jobs (status, created_at) SELECT 'rejected', now() - interval '60 days' "
        "FROM generate_series(1, 2000); ANALYZE jobs"
    )
    shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    shape.dba.execute("SELECT pg_stat_statements_reset()")
    _run_the_application(shape)
    before, plan = _listing_buffers(shape)
    assert "jobs_status_created_at_idx" in plan  # the listing reads the composite index

    run = shape.check()
    (f,) = run.findings("QA101")
    ev, steps = f["evidence"], f["fix"]["steps"]
    assert [s["sql"].split(" ON ")[0] for s in steps if s["kind"] == "migration"] == [
        "CREATE INDEX CONCURRENTLY jobs_pending_created_at_idx"
    ]
    if shape.monitor is None:
        # Every recorded statement was planned: the listing reads the index, so it is kept.
        assert not any(s["sql"].startswith("DROP INDEX") for s in steps)
        listing, purge = ev["statements_reading_index"]  # the most called first
        assert listing.startswith("SELECT id FROM jobs WHERE status = $1") and "5 calls" in listing
        assert purge.startswith("DELETE FROM jobs WHERE status = $1") and "(1 call," in purge
        assert ev["statements_checked"] == 2 and ev["statements_not_checked"] == []
        assert "is kept" in f["fix"]["notes"]
    else:
        # The monitoring role may not plan the listing (it reads columns the role cannot):
        # nobody knows what it reads, so the DROP is for review and says why.
        (drop,) = [s for s in steps if s["sql"].startswith("DROP INDEX")]
        assert drop["kind"] == "review" and ev["statements_not_checked"]
        assert all(": not planned: " in s for s in ev["statements_not_checked"])

    (create,) = [s for s in steps if s["sql"].startswith("CREATE INDEX")]
    assert "pg_stat_statements" in create["note"] and "(5 calls" in create["note"]
    shape.apply_fix(f)  # the migrations, exactly as printed
    after, plan = _listing_buffers(shape)
    assert "jobs_status_created_at_idx" in plan and after <= before * 1.5 + 10
    # The claim the CREATE names reads the new index.
    assert "jobs_pending_created_at_idx" in str(shape.db.execute(f"EXPLAIN {CLAIM}"))
    if shape.monitor is None:
        # The dequeue has its partial index; the composite one serves the listing: quiet.
        assert_quiet(shape.check(), "QA101", shape.queue)


def test_an_index_no_recorded_statement_reads_is_dropped_as_a_migration(shape: Shape) -> None:
    build_archive_queue(shape.db)
    shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    shape.dba.execute("SELECT pg_stat_statements_reset()")
    with shape.db.connect() as conn:
        for _ in range(5):
            conn.execute(CLAIM)
    (f,) = shape.check().findings("QA101")
    (drop,) = [s for s in f["fix"]["steps"] if s["sql"].startswith("DROP INDEX")]
    assert f["evidence"]["statements_reading_index"] == []
    if shape.monitor is None:
        assert drop["kind"] == "migration"
    else:
        # Without the GRANTs planning needs, the claim is not planned, and its $1 cannot be
        # shown to match the new index: whether it reads the old one is unknown.
        assert drop["kind"] == "review" and f["evidence"]["claims_not_planned"]
    shape.apply_fix(f, review=True)
    assert_quiet(shape.check(), "QA101", shape.queue)


def test_an_index_is_never_dropped_as_a_migration_after_statements_were_evicted(
    pg_server: LocalServer, tmp_path: Path
) -> None:
    # pg_stat_statements keeps pg_stat_statements.max entries and evicts the least used when
    # more statements come: a rarely run report that reads the index may be gone from it.
    # A server of its own, since the setting needs a restart: 100 entries, its minimum.
    server = start_server(pg_server.bin_dir, tmp_path, settings={"pg_stat_statements.max": "100"})
    try:
        db = TestDB("postgres", server)
        db.execute("CREATE EXTENSION pg_stat_statements")
        build_archive_queue(db)

        def run_the_application(others: int) -> dict[str, Any]:
            db.execute("SELECT pg_stat_statements_reset()")
            with db.connect() as conn:
                # Statements of different shapes (a select list of i columns), so each is an
                # entry of its own; the claims after them, so they are the entries kept.
                for i in range(1, others + 1):
                    conn.execute(f"SELECT {', '.join(['id'] * i)} FROM jobs LIMIT 0")
                for _ in range(5):
                    conn.execute(CLAIM)
            (f,) = check(db).findings("QA101")
            return f

        f = run_the_application(150)
        (evicted,) = db.execute("SELECT dealloc FROM pg_stat_statements_info")[0]
        assert evicted > 0
        (drop,) = [s for s in f["fix"]["steps"] if s["sql"].startswith("DROP INDEX")]
        assert drop["kind"] == "review"
        said = f["evidence"]["statements_evicted"]
        assert said.startswith("pg_stat_statements has evicted its least used entries")
        assert "(pg_stat_statements.max = 100)" in said and said in f["fix"]["notes"]
        # The same application with room for every statement: the DROP is a migration again.
        f = run_the_application(20)
        (drop,) = [s for s in f["fix"]["steps"] if s["sql"].startswith("DROP INDEX")]
        assert drop["kind"] == "migration" and "statements_evicted" not in f["evidence"]
    finally:
        server.stop()


@pytest.mark.parametrize("version", ["1.8", "1.7", "1.4"])
def test_a_pg_stat_statements_that_cannot_count_evictions_is_read_and_the_drop_reviewed(
    db: TestDB, version: str
) -> None:
    # An upgrade of PostgreSQL leaves the extension at the version it had: 1.8 has neither
    # toplevel nor pg_stat_statements_info, and 1.7 (and 1.4, PostgreSQL 9.6's) calls
    # execution time total_time and has no plans. Its statements are still read (the claim
    # is found in them, with its time), and nothing says none was evicted.
    db.execute(f"CREATE EXTENSION pg_stat_statements VERSION '{version}'")
    build_archive_queue(db)
    db.execute("SELECT pg_stat_statements_reset()")
    with db.connect() as conn:
        for _ in range(5):
            conn.execute(CLAIM)
    run = check(db)
    (queue,) = run.report["queues"]
    assert "SKIP LOCKED claim(s): pg_stat_statements" in queue["reason"], queue["reason"]
    (f,) = run.findings("QA101")
    (drop,) = [s for s in f["fix"]["steps"] if s["sql"].startswith("DROP INDEX")]
    assert drop["kind"] == "review"
    assert f["evidence"]["statements_evicted"].startswith(
        f"pg_stat_statements {version} does not count the entries it evicts"
    )
    saved = qadvisor("snapshot", db.dsn, "-o", "-")
    assert saved.rc == 0, saved.stderr
    (claim,) = [
        s
        for s in json.loads(saved.stdout)["statements"]
        if s["source"] == "pg_stat_statements" and "skip locked" in s["text"].lower()
    ]
    assert claim["calls"] == 5 and claim["mean_exec_ms"] > 0, claim
    assert claim["plans_per_call"] is None, claim
    # No pg_stat_statements_info: when its calls began to be counted is unknown.
    assert json.loads(saved.stdout)["pgss_since"] is None


@pytest.mark.parametrize(
    ("ratio", "severity"),
    [(9.9, None), (10.1, Severity.INFO), (11.9, Severity.INFO), (12.1, Severity.WARNING)],
)
def test_a_size_ratio_within_the_margin_of_min_size_ratio_is_info(
    ratio: float, severity: Severity | None
) -> None:
    # 500,000 live rows of 10 M: the partial (created_at) index's estimated size sets the
    # ratio; min_size_ratio 10 with a 20 % margin: 10 to 12 times is info on every run.
    table = S.jobs_table(pending_freq=0.05)
    fresh = btree_bytes(table, ("created_at",), 500_000)
    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), int(fresh * ratio))
    snap = S.snapshot(S.jobs_table(pending_freq=0.05, indexes=(idx,)))
    S.assert_margin_answer(S.run("QA101", snap), S.run("QA101", snap), severity)


@pytest.mark.judges("QA101", reads=("plans",))
def test_a_partial_index_serves_the_live_set_only_when_something_shows_it(shape: Shape) -> None:
    # Both indexes exist; nothing has read the partial one yet (idx_scan 0) and no claim is
    # known, so nothing shows the dequeue uses it: the old index's DROP is for review.
    build_archive_queue(shape.db, partial=True)
    shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    shape.dba.execute("SELECT pg_stat_statements_reset()")
    (f,) = shape.check().findings("QA101")
    notes, ev = f["fix"]["notes"], f["evidence"]
    assert "already serves" not in notes, notes
    assert "nothing shows that a claim uses it" in notes and "idx_scan is 0" in notes
    assert ev["existing_partial_index"] == "jobs_pending_created_at"
    assert ev["existing_partial_index_use"] == "none seen"
    (drop,) = f["fix"]["steps"]
    assert drop["sql"].startswith("DROP INDEX") and drop["kind"] == "review"

    # The claim's plan reads the partial index: now it is known to serve the live set, and
    # the DROP is a migration again.
    (f,) = shape.check("--query", CLAIM).findings("QA101")
    assert (
        "jobs_pending_created_at already serves the live set: the plans of 1 claim(s)"
        in (f["fix"]["notes"])
    )
    (drop,) = f["fix"]["steps"]
    assert drop["kind"] == "migration"


# pg-boss's shape: the fetch names its queue and orders by priority, its partial index
# serves it; the full (status, queue, created_at) index is what its generic plan reads.
FETCH = (
    "SELECT id FROM jobs WHERE status = 'pending' AND queue = 'q0' "
    "ORDER BY priority DESC, created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
)


def _run_the_fetch(shape: Shape) -> None:
    """pg-boss's shape built in ``shape``, and its fetch run as the application sends it."""
    db = shape.db
    db.execute(
        """
        CREATE TABLE jobs (
            id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            status     text NOT NULL DEFAULT 'pending',
            queue      text NOT NULL DEFAULT 'q0',
            priority   int NOT NULL DEFAULT 0,
            payload    jsonb NOT NULL DEFAULT '{}',
            created_at timestamptz NOT NULL DEFAULT now()
        );
        INSERT INTO jobs (status, queue, created_at)
        SELECT 'done', 'q' || (g % 3), now() - interval '30 days' + g * interval '1 second'
          FROM generate_series(1, 400000) AS g;
        INSERT INTO jobs (status, queue, created_at)
        SELECT 'pending', 'q0', now() + g * interval '1 millisecond'
          FROM generate_series(1, 500) AS g;
        CREATE INDEX jobs_status_queue_created_at_idx ON jobs (status, queue, created_at);
        CREATE INDEX jobs_pending_fetch ON jobs (queue, priority DESC, created_at)
         WHERE status = 'pending';
        """
    )
    db.execute("VACUUM (ANALYZE) jobs")
    shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    shape.dba.execute("SELECT pg_stat_statements_reset()")
    with db.connect() as conn:
        for _ in range(5):
            conn.execute(FETCH)


@pytest.mark.judges("QA101", reads=("plans",))
def test_an_index_only_a_generic_plan_that_never_ran_reads_is_dropped_for_review(
    shape: Shape,
) -> None:
    # The application writes its status as a literal, which pg_stat_statements shows as $1:
    # planned with it, the fetch reads its partial index; its generic plan reads the full
    # index, which the server never scanned while the fetch ran. That plan keeps no index:
    # the DROP is for review, with why; applied as printed, the finding goes.
    db = shape.db
    _run_the_fetch(shape)
    full = "jobs_status_queue_created_at_idx"
    (scans,) = db.execute(
        f"SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = '{full}'"
    )[0]
    assert scans == 0

    run = shape.check()
    (f,) = [f for f in run.findings("QA101") if f["target"]["name"] == full]
    assert f["evidence"]["claims_reading_index"] == []
    (label,) = f["evidence"]["claims_whose_generic_plan_alone_reads_index"]
    assert "(5 calls" in label
    kinds = {s["sql"].split(" ON ")[0].split(" public.")[0].split(" app.")[0]: s["kind"]
             for s in f["fix"]["steps"]}  # fmt: skip
    # A partial (queue, created_at) index would serve no recorded statement (the fetch orders
    # by priority DESC, created_at, and its own partial index serves it): none is proposed.
    assert kinds == {"DROP INDEX CONCURRENTLY": "review"}, f["fix"]["steps"]
    assert f["evidence"]["partial_index_serves"] == []
    assert "The counters say the generic plan is not what runs" in f["fix"]["notes"]
    assert "planned with their values bound they read jobs_pending_fetch" in f["fix"]["notes"]

    # Statistics reset after pg_stat_statements was: the scans are counted over a shorter
    # span than the calls and cannot say the generic plan never ran. The index is kept.
    time.sleep(1.1)  # both resets are read to the second
    shape.dba.execute("SELECT pg_stat_reset()")
    (kept,) = [g for g in shape.check().findings("QA101") if g["target"]["name"] == full]
    assert "claims_whose_generic_plan_alone_reads_index" not in kept["evidence"]
    assert not any(s["sql"].startswith("DROP") for s in kept["fix"]["steps"])
    assert f"{full} is kept: the plans of 1 other claim(s)" in kept["fix"]["notes"]
    # pg_stat_statements reset since, the fetch run again: the spans nest once more.
    time.sleep(1.1)
    shape.dba.execute("SELECT pg_stat_statements_reset()")
    with db.connect() as conn:
        for _ in range(5):
            conn.execute(FETCH)
    (f,) = [g for g in shape.check().findings("QA101") if g["target"]["name"] == full]
    assert f["evidence"]["claims_whose_generic_plan_alone_reads_index"], f["evidence"]
    shape.apply_fix(f, review=True)
    assert_quiet(shape.check(), "QA101", shape.queue)


def test_a_fetch_the_role_may_not_plan_leaves_the_drop_to_review(shape: Shape) -> None:
    # Without the GRANTs planning needs (QA101 does not require them), the monitoring role
    # cannot plan the fetch: whether it reads the full index is unknown, so the DROP is for
    # review. The superuser plans it: its generic plan alone reads the index, never scanned.
    _run_the_fetch(shape)
    full = "jobs_status_queue_created_at_idx"
    (f,) = [f for f in shape.check().findings("QA101") if f["target"]["name"] == full]
    (drop,) = [s for s in f["fix"]["steps"] if s["sql"].startswith("DROP INDEX")]
    assert drop["kind"] == "review"
    if shape.monitor is None:
        assert f["evidence"]["claims_whose_generic_plan_alone_reads_index"]
    else:
        (said,) = f["evidence"]["claims_not_planned"]
        assert ": not planned: " in said, said
        assert f"could not be planned ({said}), so nobody knows whether" in f["fix"]["notes"]
    shape.apply_fix(f, review=True)
    assert_quiet(shape.check(), "QA101", shape.queue)


@pytest.mark.judges("QA101", reads=("plans",))
def test_a_fetch_another_sessions_lock_keeps_from_its_plan_leaves_the_drop_to_review(
    shape: Shape,
) -> None:
    # A session holds an EXCLUSIVE lock on the queue (as REFRESH ... CONCURRENTLY of a view
    # over it, or a migration, would): reads go on, the fetch's FOR UPDATE cannot be planned.
    # Whether it reads the full index is then unknown: its DROP is for review, and says why.
    _run_the_fetch(shape)
    full = "jobs_status_queue_created_at_idx"
    with shape.db.connect() as other:
        other.execute("BEGIN")
        other.execute("LOCK TABLE jobs IN EXCLUSIVE MODE")
        (f,) = [f for f in shape.check().findings("QA101") if f["target"]["name"] == full]
        other.rollback()
    (said,) = f["evidence"]["claims_not_planned"]
    assert re.search(r": not planned: pid \d+ holds ExclusiveLock on \w+\.jobs \(", said), said
    assert "claims_whose_generic_plan_alone_reads_index" not in f["evidence"]
    (drop,) = [s for s in f["fix"]["steps"] if s["sql"].startswith("DROP INDEX")]
    assert drop["kind"] == "review"
    assert f"could not be planned ({said}), so nobody knows whether" in f["fix"]["notes"]
    # The lock gone, the fetch is planned: its generic plan alone reads the index.
    (f,) = [f for f in shape.check().findings("QA101") if f["target"]["name"] == full]
    assert "claims_not_planned" not in f["evidence"]
    assert f["evidence"]["claims_whose_generic_plan_alone_reads_index"]


# --- a partitioned queue ----------------------------------------------------------------------


def test_a_partitioned_queue_s_index_is_rebuilt_partition_by_partition_as_printed(
    shape: Shape,
) -> None:
    # A partition per queue, each with 30 days of finished jobs, and the article's (status,
    # created_at) index declared on the parent: every partition takes writes.
    build_by_queue(
        shape.db,
        per_queue={"default": 300_000, "mail": 30_000, "reports": 30_000},
        indexes=COMPOSITE_INDEX,
    )
    # The workers finish a job of each queue: every partition is written since its VACUUM.
    shape.db.execute(
        "UPDATE jobs SET status = 'done', finished_at = now() WHERE (queue, id) IN "
        "(SELECT queue, min(id) FROM jobs WHERE status = 'pending' GROUP BY queue)"
    )
    for partition in ("jobs_default", "jobs_mail", "jobs_reports"):  # 14 counts them late
        shape.db.wait_for_stats(partition, lambda row: row["n_tup_upd"] >= 1)
    run = shape.check("--query", MAIL_CLAIM)
    (f,) = run.findings("QA101")
    ev = f["evidence"]
    assert f["target"]["name"] == "jobs_status_created_at"
    assert ev["index_bytes"] > 8 * MB and ev["table_rows"] == 360_900
    assert sorted(ev["partitions_taking_writes"]) == ["jobs_default", "jobs_mail", "jobs_reports"]
    assert "on its 3 partition(s) that take writes" in f["message"]
    steps = f["fix"]["steps"]
    # PostgreSQL builds no index of a partitioned table CONCURRENTLY: the index ON ONLY the
    # table, each partition's built CONCURRENTLY and attached; and drops none CONCURRENTLY.
    assert steps[0]["sql"] == (
        f"CREATE INDEX jobs_pending_created_at_idx ON ONLY {shape.queue} (created_at) "
        "WHERE status = 'pending';"
    )
    builds = [s for s in steps if s["sql"].startswith("CREATE INDEX CONCURRENTLY")]
    attaches = [s for s in steps if s["sql"].startswith("ALTER INDEX")]
    assert len(builds) == len(attaches) == 3
    assert all(s["in_transaction_block"] is False for s in builds)
    (drop,) = [s for s in steps if s["sql"].startswith("DROP INDEX")]
    assert drop["sql"] == f"DROP INDEX {shape.queue}_status_created_at;"
    assert drop["lock"] == "ACCESS EXCLUSIVE" and drop["in_transaction_block"] is True
    shape.apply_fix(f, review=True)
    ((valid,),) = shape.dba.execute(
        "SELECT indisvalid FROM pg_index WHERE indexrelid = %s::regclass",
        [f"{shape.queue}_pending_created_at_idx"],
    )
    assert valid
    assert_quiet(shape.check("--query", MAIL_CLAIM), "QA101", shape.queue)


def test_a_table_partitioned_by_day_is_judged_by_the_partitions_that_take_writes(
    shape: Shape,
) -> None:
    # 300,000 finished rows over 20 days and the (status, created_at) index over all of them
    # (over 8 MiB summed), but the writes land in today's partition, whose part is small.
    build_daily(shape.db, days=20, per_day=15_000, waiting=500, indexes=COMPOSITE_INDEX)
    ((size,),) = shape.dba.execute(
        "SELECT sum(pg_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = %s::regclass",
        [f"{shape.queue.rpartition('.')[0]}.jobs_status_created_at"],
    )
    assert size > 8 * MB
    assert_quiet(shape.check("--query", DAILY_CLAIM), "QA101", shape.queue)


# A queue whose (status, mtime) index serves its purge and its reaper, neither of which takes
# a row lock, both reading rows no worker waits for; the claim has its own partial index.
TIDY_CLAIM = (
    "SELECT id FROM jobs WHERE status = %s ORDER BY priority DESC, id LIMIT %s "
    "FOR UPDATE SKIP LOCKED"
)
TIDY_PURGE = (
    "DELETE FROM jobs WHERE status IN ('done', 'failed') AND mtime < now() - interval '30 days'"
)
TIDY_REAPER = (
    "UPDATE jobs SET status = 'queued' WHERE status = 'running' "
    "AND mtime < now() - interval '10 minutes'"
)


def build_tidied_queue(db: TestDB) -> None:
    db.execute(
        """
        CREATE TABLE jobs (
            id bigserial PRIMARY KEY,
            status text NOT NULL DEFAULT 'queued',
            priority int NOT NULL DEFAULT 0,
            mtime timestamptz NOT NULL DEFAULT now(),
            payload text NOT NULL DEFAULT ''
        );
        INSERT INTO jobs (status, mtime)
        SELECT CASE WHEN g % 50 = 0 THEN 'failed' ELSE 'done' END,
               now() - interval '29 days' + g * interval '5 seconds'
          FROM generate_series(1, 400000) AS g;
        INSERT INTO jobs (status, mtime) SELECT 'running', now() - interval '1 hour'
          FROM generate_series(1, 20);
        INSERT INTO jobs (status) SELECT 'queued' FROM generate_series(1, 300);
        CREATE INDEX jobs_status_mtime_idx ON jobs (status, mtime);
        CREATE INDEX jobs_queued_priority_id_idx ON jobs (priority DESC, id)
            WHERE status = 'queued';
        """
    )
    db.execute("VACUUM ANALYZE jobs")


def test_an_index_its_readers_need_for_rows_outside_the_live_set_is_theirs(
    shape: Shape,
) -> None:
    build_tidied_queue(shape.db)
    record_afresh(shape.dba)
    with psycopg.connect(shape.db.dsn, cursor_factory=psycopg.ClientCursor) as conn:
        for _ in range(5):
            with conn.transaction():
                conn.execute(TIDY_CLAIM, ("queued", 1))
        for _ in range(3):
            with conn.transaction(force_rollback=True):
                conn.execute(TIDY_PURGE)
                conn.execute(TIDY_REAPER)
    for statement in (TIDY_PURGE, TIDY_REAPER):  # both read the index on the server
        assert "jobs_status_mtime_idx" in str(shape.db.execute(f"EXPLAIN {statement}"))

    report = shape.check().report
    kinds = sorted(m["kind"] for m in report["maintenance"])
    assert kinds == ["pruner", "reaper"]  # no row lock, read all the same
    (f,) = [x for x in report["findings"] if x["code"] == "QA101"]
    assert f["target"]["name"] == "jobs_status_mtime_idx"
    # The partial (mtime) index on the live rows serves no recorded statement: not proposed.
    assert not [s for s in f["fix"]["steps"] if s["sql"].startswith("CREATE INDEX")]
    assert f["evidence"]["partial_index_serves"] == [] and "not proposed" in f["fix"]["notes"]
    if shape.monitor is not None:
        # The monitoring role may not plan an UPDATE or a DELETE (EXPLAIN checks UPDATE
        # privilege): nobody knows what they read, so the DROP is for review and says why.
        (drop,) = f["fix"]["steps"]
        assert drop["kind"] == "review" and len(f["evidence"]["statements_not_checked"]) == 2
        return
    # Not bloated by the archive: it indexes what its readers ask for. Info, nothing to build
    # or drop.
    assert f["severity"] == "info", f["message"]
    readers = f["evidence"]["readers_outside_live_set"]
    assert len(readers) == 2 and any("pruner" in r for r in readers)
    assert any("reaper" in r for r in readers)
    assert "it indexes what they ask for" in f["message"]
    assert f["fix"]["steps"] == [] and "stays" in f["fix"]["notes"]


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_archive_queue(db)
    db.execute("UPDATE jobs SET finished_at = now() WHERE id <= 20000")
    db.wait_for_stats("jobs", lambda r: r["n_dead_tup"] >= 20_000)
    return check(db)


FIX_PATHOLOGIES = {"archive": Pathology(frozenset({"QA101", "QA201"}), _fix_pathology)}
