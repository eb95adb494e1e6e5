"""QA304 claim-filter-not-in-index: a skewed backlog on real servers, then unit tests.

One big queue's live rows sit ahead of a small queue's in the order the claim's index walks;
the small queue's claim filters its queue and reads past all of them. The planner, which
takes the queues' rows to be spread evenly, chooses that walk.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from qadvisor.api import (
    scans,
)
from qadvisor.api.provisional import (
    parse_explain,
)
from qadvisor.model import Column, ColumnStats, Finding, PlanNode, Severity, Statement, TableStats
from qadvisor.sql.dequeue import analyse
from tests import snapshots as S
from tests.checks.test_qa401_round_robin_walks_backlog import RR_BY_ID, build_trap
from tests.conftest import TestDB
from tests.helpers import Pathology, Run, assert_quiet, check, record_afresh
from tests.partitioned import MAIL_CLAIM, build_by_queue
from tests.shapes import Shape

BIG, SMALL = 40_000, 200

SMALL_SELECT = (
    "SELECT id FROM jobs WHERE queue = 'mail' AND state = 'available' "
    "ORDER BY priority, scheduled_at LIMIT 1 FOR UPDATE SKIP LOCKED"
)
SMALL_CLAIM = f"UPDATE jobs SET state = 'executing' WHERE id = ({SMALL_SELECT}) RETURNING id"


def build_skewed_queue(db: TestDB) -> None:
    """A multi-queue table: 100,000 completed jobs (a fifth of them mail), 40,000 waiting
    'default' jobs scheduled before 200 waiting 'mail' jobs, and the live-set index on the
    ORDER BY alone."""
    db.execute(
        f"""
        CREATE TABLE jobs (
            id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            queue        text        NOT NULL,
            state        text        NOT NULL DEFAULT 'available',
            priority     int         NOT NULL DEFAULT 0,
            scheduled_at timestamptz NOT NULL DEFAULT now(),
            payload      text
        );
        INSERT INTO jobs (queue, state, scheduled_at)
        SELECT CASE WHEN g % 5 = 0 THEN 'mail' ELSE 'default' END, 'completed',
               now() - interval '30 days' + g * interval '1 second'
          FROM generate_series(1, 100000) AS g;
        INSERT INTO jobs (queue, scheduled_at)
        SELECT 'default', now() - interval '1 day' + g * interval '1 second'
          FROM generate_series(1, {BIG}) AS g;
        INSERT INTO jobs (queue, scheduled_at)
        SELECT 'mail', now() + g * interval '1 second' FROM generate_series(1, {SMALL}) AS g;
        CREATE INDEX jobs_live ON jobs (priority, scheduled_at) WHERE state = 'available';
        ANALYZE jobs;
        """
    )


def found(run: Run) -> dict[str, Any]:
    hits = run.findings("QA304")
    assert len(hits) == 1, [s for s in run.report["skipped"] if s["code"] == "QA304"]
    return hits[0]


def test_a_backlog_ahead_of_the_claimed_queue_is_measured_fixed_as_printed_and_gone(
    shape: Shape,
) -> None:
    build_skewed_queue(shape.db)
    f = found(shape.check("--query", SMALL_CLAIM, "--analyze"))
    ev = f["evidence"]
    assert f["severity"] == "warning", f["message"]
    assert ev["filter_column"] == "queue" and ev["scan_index"] == "jobs_live"
    # Every 'default' row waiting ahead of the first mail row was read and thrown away.
    assert ev["rows_removed_per_claim"] == BIG
    assert ev["planner_rows_estimate"] > 100 * ev["rows_removed_per_claim"] / BIG
    build, drop = f["fix"]["steps"]
    assert build["kind"] == "migration"
    assert "(queue, priority, scheduled_at) WHERE state = 'available'" in build["sql"]
    # The old index goes too, for review: while it exists the planner, which takes mail
    # for a fifth of the live rows, may keep walking it.
    assert drop["kind"] == "review" and drop["sql"].startswith("DROP INDEX CONCURRENTLY")
    shape.apply_fix(f, review=True)
    after = shape.check("--query", SMALL_CLAIM, "--analyze")
    assert_quiet(after, "QA304", shape.queue)
    # The server's plan: the claim descends the new index by its queue.
    ((raw,),) = shape.db.execute(f"EXPLAIN (FORMAT JSON) {SMALL_SELECT}")
    plan, _ = parse_explain(raw)
    (scan,) = scans(plan, None, "jobs")
    assert scan.index == "jobs_available_queue_priority_scheduled_at_idx", scan
    assert "queue" in (scan.index_cond or "") and "queue" not in (scan.filter or "")


def test_without_a_measurement_it_is_latent(shape: Shape) -> None:
    build_skewed_queue(shape.db)
    f = found(shape.check("--query", SMALL_CLAIM))
    assert f["severity"] == "info" and "latent" in f["message"], f["message"]


def test_a_claim_on_an_index_led_by_its_queue_is_quiet(shape: Shape) -> None:
    build_skewed_queue(shape.db)
    shape.db.execute(
        "DROP INDEX jobs_live; CREATE INDEX jobs_live ON jobs (queue, priority, scheduled_at) "
        "WHERE state = 'available'; ANALYZE jobs"
    )
    assert_quiet(shape.check("--query", SMALL_CLAIM, "--analyze"), "QA304", shape.queue)


def test_a_backlog_that_does_not_hold_the_claim_up_is_quiet_when_measured(
    shape: Shape,
) -> None:
    # The mail jobs come first in the order: the claim's first row is one of them.
    build_skewed_queue(shape.db)
    shape.db.execute(
        "UPDATE jobs SET scheduled_at = scheduled_at - interval '2 days' "
        "WHERE queue = 'mail' AND state = 'available'; ANALYZE jobs"
    )
    assert_quiet(shape.check("--query", SMALL_CLAIM, "--analyze"), "QA304", shape.queue)


# An ORM's claim (psycopg2 sends its values as literals; pg_stat_statements shows $n): the
# primary key is the only index, so the claim walks it from the oldest job and discards the
# finished ones ahead of the first waiting one. ANALYZE saw a third of the rows waiting, so
# the planner expects a few rows discarded per claim; each claim finishes its jobs, so the
# walk grows with every call.
ORM_CLAIM = "SELECT id FROM jobs WHERE status = %s ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED"
ORM_DONE = "UPDATE jobs SET status = 'done' WHERE id = ANY(%s)"
ORM_DELETE = "DELETE FROM jobs WHERE id = ANY(%s)"
ORM_CALLS = 277


def build_orm_queue(db: TestDB) -> None:
    db.execute(
        """
        CREATE TABLE jobs (
            id bigserial PRIMARY KEY,
            status varchar(20) NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            payload text NOT NULL DEFAULT repeat('p', 1000)
        );
        INSERT INTO jobs (status) SELECT 'done' FROM generate_series(1, 20000);
        INSERT INTO jobs (status) SELECT 'pending' FROM generate_series(1, 10000);
        """
    )
    db.execute("VACUUM ANALYZE jobs")


def run_the_orm(dba: TestDB, db: TestDB, done: str = ORM_DONE, calls: int = ORM_CALLS) -> float:
    """The worker as the ORM runs it, recorded afresh; the claim's shared blocks per call."""
    record_afresh(dba)
    with psycopg.connect(db.dsn, cursor_factory=psycopg.ClientCursor) as conn:
        for _ in range(calls):
            with conn.transaction():
                ids = [r[0] for r in conn.execute(ORM_CLAIM, ("pending", 10))]
                conn.execute(done, (ids,))
    ((blocks,),) = dba.execute(
        "SELECT (shared_blks_hit + shared_blks_read)::float / calls FROM pg_stat_statements "
        "WHERE query LIKE 'SELECT id FROM jobs WHERE status = $1 ORDER BY id%'"
    )
    return float(blocks)


def test_a_walk_past_finished_rows_the_estimate_misses_is_found_by_its_measured_cost(
    shape: Shape,
) -> None:
    build_orm_queue(shape.db)
    before = run_the_orm(shape.dba, shape.db)
    f = found(shape.check())
    ev = f["evidence"]
    # The planner's estimate is far under min_rows_removed; the server's counter fired it.
    assert f["severity"] == "warning", f["message"]
    assert ev["fired_by"] == "measured" and ev["filter_column"] == "status"
    assert ev["scan_index"] == "jobs_pkey" and ev["estimated_rows_removed_per_claim"] < 100
    assert ev["shared_blks_per_call"] == pytest.approx(before, rel=0.01) and before > 1000
    assert ev["calls"] == ORM_CALLS and ev["rows_per_call"] == 10
    assert "measured" in ev["confirmed_by"] and "the planner estimates" in ev["confirmed_by"]
    assert "finished ones included" in f["message"]
    (build,) = f["fix"]["steps"]
    assert build["sql"] == (
        f"CREATE INDEX CONCURRENTLY jobs_pending_id_idx ON {shape.queue} (id) "
        "WHERE status = 'pending';"
    )
    assert "pg_stat_statements" in build["note"] and "jobs_pkey enforces" in f["fix"]["notes"]

    shape.apply_fix(f)  # exactly as printed
    after = run_the_orm(shape.dba, shape.db)
    assert after < before / 10, (before, after)
    claim = ORM_CLAIM % ("'pending'", 10)
    ((raw,),) = shape.db.execute(f"EXPLAIN (FORMAT JSON) {claim}")
    plan, _ = parse_explain(raw)
    (scan,) = scans(plan, None, "jobs")
    assert scan.index == "jobs_pending_id_idx", scan
    assert_quiet(shape.check(), "QA304", shape.queue)


def test_a_walk_past_no_finished_row_is_quiet(shape: Shape) -> None:
    # The worker deletes the jobs it finished: nothing finished lies ahead of the first
    # waiting job, measured and estimated alike. Its claims still pass over the index entries
    # of the jobs deleted since the last VACUUM (277 claims' 2,770 read 85 to 93 blocks a
    # call, within the margin of min_blocks_per_call: info); 120 claims, as between two
    # autovacuums of a 10,000-row table, read clearly fewer.
    build_orm_queue(shape.db)
    shape.db.execute("DELETE FROM jobs WHERE status = 'done'")
    shape.db.execute("VACUUM ANALYZE jobs")
    assert run_the_orm(shape.dba, shape.db, ORM_DELETE, calls=120) < 80
    assert_quiet(shape.check(), "QA304", shape.queue)


def _analyzed(db: TestDB) -> None:
    # 14's collector publishes the ANALYZE up to 500 ms later; the fix reads its time.
    db.wait_for_stats("jobs", lambda r: r["last_analyze"] is not None)


def test_an_index_led_by_the_column_that_current_statistics_pass_over_is_not_fixed_by_analyze(
    shape: Shape,
) -> None:
    # The round-robin trap: 100,000 jobs of one tenant and one each of ten others, analyzed
    # as a sample of it sees them (one tenant). The per-tenant index exists; the planner
    # walks the FIFO index because pg_stats says every row has the same tenant_id.
    db = shape.db
    build_trap(db)
    _analyzed(db)
    f = found(shape.check("--query", RR_BY_ID))
    assert f["evidence"]["scan_index"] == "jobs_queued_fifo", f["message"]
    notes, steps = f["fix"]["notes"], f["fix"]["steps"]
    assert "another ANALYZE would count much the same" in notes, notes
    assert "pg_stats counts 1 distinct tenant_id value(s)" in notes
    # No step: the pin's number is the DBA's, and the FIFO index stays the claim's path
    # until the pin moves it.
    assert steps == []
    # The server agrees that ANALYZE is no fix: after one, the claim still walks.
    shape.apply([f"ANALYZE {shape.schema}.jobs"])
    assert "QA304" in shape.check("--query", RR_BY_ID).codes()
    # The printed ALTER with the application's count in its placeholder (what the DBA
    # knows: 11 tenants have jobs), then the printed ANALYZE: the claim descends the index.
    (alter,) = re.findall(r"`(ALTER TABLE [^`]+)`", notes)
    (analyze,) = re.findall(r"`(ANALYZE [^`]+)`", notes)
    ((count,),) = db.execute("SELECT count(DISTINCT tenant_id) FROM jobs")
    shape.apply([alter.replace("<number of distinct tenant_id values>", str(count)), analyze])
    assert_quiet(shape.check("--query", RR_BY_ID), "QA304", shape.queue)


# --- unit tests on hand-built snapshots --------------------------------------------------------

SCAN = PlanNode(
    "Index Scan", relation="jobs", schema="public", index="jobs_live",
    filter="((jobs.queue = 'mail'::text) AND (jobs.status = 'pending'::text))",
    plan_rows=5000, total_cost=3800,
)  # fmt: skip
PLAN = PlanNode("Limit", total_cost=1.0, children=(PlanNode("LockRows", children=(SCAN,)),))
TEXT = (
    "SELECT id FROM jobs WHERE queue = 'mail' AND status = 'pending' "
    "ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
)


def judged(**stmt: object) -> list[object]:
    live = S.index("jobs_live", ("created_at",), 8192, predicate="(status = 'pending')",
                   reltuples=45_000)  # fmt: skip
    table = S.jobs_table(indexes=(live,))
    table = replace(table, columns=(*table.columns, Column("queue", "text", True)))
    base: dict[str, object] = {
        "text": TEXT, "source": "--query 1", "custom_plan": PLAN, "parsed": analyse(TEXT),
    }  # fmt: skip
    base.update(stmt)
    snap = replace(S.snapshot(table), statements=(Statement(**base),))  # type: ignore[arg-type]
    return S.run("QA304", snap)


@pytest.mark.parametrize(
    ("counters", "severity"),
    [
        ({}, Severity.INFO),
        ({"calls": 500, "shared_blks_per_call": 480.0}, Severity.WARNING),
        ({"calls": 500, "shared_blks_per_call": 4.0}, Severity.INFO),
        ({"calls": 10, "shared_blks_per_call": 480.0}, Severity.INFO),
    ],
)
def test_counters_confirm_what_the_plan_shows(
    counters: dict[str, object], severity: Severity
) -> None:
    (f,) = judged(**counters)
    assert isinstance(f, Finding), f
    assert f.severity == severity, f.message
    assert f.evidence["filter_column"] == "queue"


def test_a_measured_small_discard_is_quiet_and_a_large_one_warns() -> None:
    small = replace(SCAN, rows_removed_by_filter=12.0, actual_rows=1.0)
    plan = replace(PLAN, children=(PlanNode("LockRows", children=(small,)),))
    assert judged(analyzed_plan=plan) == []
    large = replace(SCAN, rows_removed_by_filter=39_000.0, actual_rows=1.0)
    plan = replace(PLAN, children=(PlanNode("LockRows", children=(large,)),))
    (f,) = judged(analyzed_plan=plan)
    assert isinstance(f, Finding) and f.severity == Severity.WARNING
    assert f.evidence["rows_removed_per_claim"] == 39_000.0


def test_the_old_index_drop_names_a_claim_that_could_not_be_planned() -> None:
    # Another claim on the table has no plan (the role could not make one): whether it reads
    # jobs_live is unknown, and the note says so instead of "no other claim reads it".
    live = S.index("jobs_live", ("created_at",), 8192, predicate="(status = 'pending')",
                   reltuples=45_000)  # fmt: skip
    table = S.jobs_table(indexes=(live,))
    table = replace(table, columns=(*table.columns, Column("queue", "text", True)))
    other = TEXT.replace("queue = 'mail'", "queue = 'sms'")
    claims = [
        Statement(text=TEXT, source="--query 1", custom_plan=PLAN, parsed=analyse(TEXT)),
        Statement(text=other, source="--query 2", parsed=analyse(other),
                  plan_error="not planned: lock timeout"),
    ]  # fmt: skip

    def notes(*statements: Statement) -> str:
        found = S.run("QA304", replace(S.snapshot(table), statements=statements))
        (f,) = [f for f in found if isinstance(f, Finding)]
        assert f.fix is not None
        (drop,) = [s for s in f.fix.steps if s.sql.startswith("DROP INDEX")]
        assert drop.kind == "review"
        return f.fix.notes

    said = notes(*claims)
    assert "1 claim(s) on the table could not be planned (--query 2" in said
    assert "not planned: lock timeout): whether they read it is unknown" in said
    said = notes(claims[0])
    assert "could not be planned" not in said and "No other recorded claim" in said


def test_the_queue_in_the_index_condition_is_quiet() -> None:
    cond = replace(SCAN, index_cond="(jobs.queue = 'mail'::text)", filter=None)
    plan = replace(PLAN, children=(PlanNode("LockRows", children=(cond,)),))
    assert judged(custom_plan=plan) == []


LATERAL = (
    "SELECT j.id FROM queue_names qn CROSS JOIN LATERAL (SELECT id FROM jobs "
    "WHERE queue = qn.name AND status = 'pending' ORDER BY created_at LIMIT 1 "
    "FOR UPDATE SKIP LOCKED) j LIMIT 1"
)
LATERAL_SCAN = replace(SCAN, filter="((jobs.queue = qn.name) AND (jobs.status = 'pending'::text))")
LATERAL_PLAN = PlanNode(
    "Limit", total_cost=1.0, children=(PlanNode("LockRows", children=(LATERAL_SCAN,)),)
)


def _with_queue_index(text: str, changed: int, analyzed: str | None) -> list[object]:
    """The claim ``text`` walks jobs_live while jobs_queue_live (queue, created_at) exists;
    pg_stats counts 1 queue; ``changed`` rows since the ANALYZE of ``analyzed``."""
    live = S.index("jobs_live", ("created_at",), 8192, predicate="(status = 'pending')",
                   reltuples=45_000)  # fmt: skip
    by_queue = S.index("jobs_queue_live", ("queue", "created_at"), 8192,
                       predicate="(status = 'pending')", reltuples=45_000)  # fmt: skip
    table = S.jobs_table(
        indexes=(live, by_queue),
        stats=TableStats(n_live_tup=10_000_000, n_mod_since_analyze=changed, last_analyze=analyzed),
    )
    table = replace(
        table,
        columns=(*table.columns, Column("queue", "text", True)),
        column_stats=(*table.column_stats, ColumnStats("queue", 0.0, 1.0, 5)),
    )
    plan = LATERAL_PLAN if text == LATERAL else PLAN
    stmt = Statement(text=text, source="--query 1", custom_plan=plan, parsed=analyse(text))
    return S.run("QA304", replace(S.snapshot(table), statements=(stmt,)))


@pytest.mark.parametrize(
    ("changed", "analyzed", "refresh"),
    [
        (1_000, "2026-12-01T10:00:00+00:00", False),  # current: ANALYZE would count the same
        (999_999, "2026-12-01T10:00:00+00:00", False),  # under 10 % of 10 M rows
        (1_000_000, "2026-12-01T10:00:00+00:00", True),  # a tenth changed: refresh first
        (0, None, True),  # no ANALYZE on record
    ],
)
def test_analyze_is_the_fix_only_when_the_statistics_may_be_stale(
    changed: int, analyzed: str | None, refresh: bool
) -> None:
    (f,) = _with_queue_index(LATERAL, changed, analyzed)
    assert isinstance(f, Finding) and f.fix is not None
    steps = [s.sql for s in f.fix.steps]
    assert steps == (["ANALYZE public.jobs;"] if refresh else []), steps
    # Either way the fix names the pin qadvisor cannot fill in, never a number of its own.
    assert "SET (n_distinct = <number of distinct queue values>);" in f.fix.notes
    if not refresh:
        assert (
            "pg_stats counts 1 distinct queue value(s), about 10,000,000 rows each" in f.fix.notes
        )


def test_a_value_the_planner_sees_is_estimated_from_common_values_not_n_distinct() -> None:
    # queue = 'mail': the planner reads 'mail' among the most common values, which a pin of
    # n_distinct does not change; ANALYZE stays the fix, with no pin offered.
    (f,) = _with_queue_index(TEXT, 1_000, "2026-12-01T10:00:00+00:00")
    assert isinstance(f, Finding) and f.fix is not None
    assert [s.sql for s in f.fix.steps] == ["ANALYZE public.jobs;"]
    assert "n_distinct" not in f.fix.notes


def test_a_partition_per_queue_discards_no_other_queue_s_rows(shape: Shape) -> None:
    # Partitioned by list on queue: the claim's partition holds the mail queue's rows alone,
    # so walking its part of the live-set index in created_at order filters queue in vain.
    build_by_queue(shape.db, per_queue=20_000, waiting=300)
    claim = MAIL_CLAIM
    # The server's plan: the mail partition's part of jobs_pending, walked in order, the
    # queue a Filter (what QA304 looks for on a table that holds every queue).
    ((raw,),) = shape.db.execute(f"EXPLAIN (FORMAT JSON) {claim}")
    plan, _ = parse_explain(raw)
    (scan,) = [n for n in plan.walk() if n.relation is not None]
    assert scan.node_type == "Index Scan" and scan.relation == "jobs_mail", scan
    assert "queue" in (scan.filter or "") and "queue" not in (scan.index_cond or "")
    assert_quiet(shape.check("--query", claim), "QA304", shape.queue)


# The primary key walked in ORDER BY order, the live column filtered: ANALYZE saw a third of
# the 30,000 rows waiting, so the planner expects to discard 2 rows per claim of 1.
PK = S.index("jobs_pkey", ("id",), 8192, is_primary=True, is_unique=True, reltuples=30_000)
PK_SCAN = PlanNode(
    "Index Scan", relation="jobs", schema="public", index="jobs_pkey",
    filter="((jobs.status)::text = 'pending'::text)", plan_rows=10_000, total_cost=3800,
)  # fmt: skip
PK_TEXT = "SELECT id FROM jobs WHERE status = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED"


def walk(scan: PlanNode = PK_SCAN, **counters: object) -> list[object]:
    table = replace(S.jobs_table(reltuples=30_000), indexes=(PK,))
    plan = PlanNode("Limit", plan_rows=1, children=(PlanNode("LockRows", children=(scan,)),))
    stmt = Statement(
        "pg_stat_statements", PK_TEXT, parsed=analyse(PK_TEXT), custom_plan=plan,
        custom_values={"1": "'pending'", "2": "1"}, **counters,  # type: ignore[arg-type]
    )  # fmt: skip
    return S.run("QA304", replace(S.snapshot(table), statements=(stmt,)))


def test_a_walk_that_filters_the_live_column_is_judged_on_the_counters_beside_the_estimate() -> (
    None
):
    (f,) = walk(calls=277, shared_blks_per_call=375.0, rows_per_call=10.0)
    assert isinstance(f, Finding) and f.severity == Severity.WARNING, f
    # LIMIT is a parameter: the rows per call are the claim's 10; 10 x 30,000 / 10,000 - 10.
    assert f.evidence["fired_by"] == "measured" and f.evidence["filter_column"] == "status"
    assert f.evidence["estimated_rows_removed_per_claim"] == 20
    # Measured little and estimated little: quiet, whatever the estimate of other walks.
    assert walk(calls=277, shared_blks_per_call=4.0, rows_per_call=10.0) == []
    # Not measured: quiet when the estimate is small, info naming the estimate when not.
    assert walk() == []
    few = replace(PK_SCAN, plan_rows=5.0)  # ANALYZE saw 5 waiting rows of 30,000
    (f,) = walk(few)
    assert isinstance(f, Finding) and f.severity == Severity.INFO
    assert f.evidence["fired_by"] == "estimate" and "contradicted_by" not in f.evidence
    # A large estimate the counters contradict: info that names the counter.
    (f,) = walk(few, calls=277, shared_blks_per_call=4.0)
    assert isinstance(f, Finding) and f.severity == Severity.INFO
    assert f.evidence["contradicted_by"].startswith("pg_stat_statements measured 4 shared")


def test_a_partial_index_on_the_live_column_is_no_walk_past_finished_rows() -> None:
    # The claim keeps its condition as a Filter over a partial index on it (to check a
    # locked row again): every row the index holds passes.
    partial = S.index("jobs_pending_id_idx", ("id",), 8192, predicate="((status)::text = "
                      "'pending'::text)", reltuples=10_000)  # fmt: skip
    table = replace(S.jobs_table(reltuples=30_000), indexes=(PK, partial))
    scan = replace(PK_SCAN, index=partial.name)
    plan = PlanNode("Limit", plan_rows=1, children=(PlanNode("LockRows", children=(scan,)),))
    stmt = Statement(
        "pg_stat_statements", PK_TEXT, parsed=analyse(PK_TEXT), custom_plan=plan,
        calls=277, shared_blks_per_call=375.0,
    )  # fmt: skip
    assert S.run("QA304", replace(S.snapshot(table), statements=(stmt,))) == []


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_skewed_queue(db)
    return check(db, "--query", SMALL_CLAIM, "--analyze")


FIX_PATHOLOGIES = {"filtered-claim": Pathology(frozenset({"QA304"}), _fix_pathology)}
