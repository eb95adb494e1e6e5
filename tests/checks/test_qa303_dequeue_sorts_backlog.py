"""QA303 dequeue-sorts-backlog: unit tests on snapshots, then real servers.

On the servers a claim ordered by a column no index supplies (``ORDER BY tenant_id, id``
with only a ``(created_at) WHERE status = 'queued'`` index) sorts the whole live backlog for
each claim; the printed partial index, built as printed, makes it go.
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict

import psycopg
import pytest

from qadvisor.derive.plans.explain_json import parse_explain
from qadvisor.model import Column, ColumnStats, Finding, PlanNode, Severity, Snapshot, Statement
from qadvisor.sql.dequeue import analyse
from tests import snapshots as S
from tests.collect.test_statements_collect import build_claim_queue
from tests.conftest import TestDB
from tests.helpers import PQ_TABLE, Pathology, Run, assert_quiet, check, record_afresh
from tests.shapes import Shape

PARTIAL = S.index(
    "jobs_pending_created_at", ("created_at",), 8 * 1024 * 1024,
    predicate="(status = 'pending'::text)", reltuples=5000.0,
)  # fmt: skip
SCAN = PlanNode("Seq Scan", relation="jobs", schema="public", total_cost=230_000.0,
                plan_rows=5000, filter="(jobs.status = 'pending'::text)")  # fmt: skip
SORTED = PlanNode(
    "Limit", total_cost=230_100.0, plan_rows=1,
    children=(PlanNode("LockRows", children=(
        PlanNode("Sort", sort_key=("jobs.priority DESC", "jobs.id"), plan_rows=5000,
                 children=(SCAN,)),
    )),),
)  # fmt: skip
BY_INDEX = PlanNode("Limit", children=(dataclasses.replace(SCAN, node_type="Index Scan",
                                                          index=PARTIAL.name),))  # fmt: skip
QUERY = (
    "SELECT id FROM jobs WHERE status = 'pending' ORDER BY priority DESC, id LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)


def _snap(text: str = QUERY, plan: PlanNode = SORTED) -> Snapshot:
    table = S.jobs_table(indexes=(PARTIAL,))
    table = dataclasses.replace(table, columns=(*table.columns, Column("priority", "integer")))
    stmt = Statement("--query 1", text, parsed=analyse(text), custom_plan=plan)
    return dataclasses.replace(S.snapshot(table), statements=(stmt,))


def _findings(snap: Snapshot) -> list[Finding]:
    return [f for f in S.run("QA303", snap) if isinstance(f, Finding)]


def test_a_sort_over_a_scan_of_the_queue_is_flagged_with_the_order_by_index() -> None:
    (f,) = _findings(_snap())
    assert f.key == "QA303:public.--query 1"
    ev = f.evidence
    assert ev["rows_sorted"] == 5000 and ev["limit"] == 1
    assert ev["rows_read"] == 10_000_000  # a Seq Scan reads the archive too
    assert ev["sort_key"] == ["jobs.priority DESC", "jobs.id"]
    assert "archive included" in f.message
    assert f.fix is not None
    assert f.fix.statements == (
        "CREATE INDEX CONCURRENTLY jobs_pending_priority_id_idx ON public.jobs "
        "(priority DESC, id) WHERE status = 'pending';",
    )


class Counters(TypedDict, total=False):
    """pg_stat_statements' counters of the claim a test sets."""

    calls: int
    shared_blks_per_call: float
    rows_per_call: float


@pytest.mark.parametrize(
    ("counters", "severity"),
    [
        ({}, None),
        ({"calls": 60, "shared_blks_per_call": 2_500.0, "rows_per_call": 10.0}, Severity.WARNING),
        ({"calls": 60, "shared_blks_per_call": 1_100.0}, Severity.INFO),  # within the margin
        ({"calls": 60, "shared_blks_per_call": 40.0}, None),
        ({"calls": 10, "shared_blks_per_call": 2_500.0}, None),  # too few calls to tell
    ],
)
def test_a_sort_the_planner_puts_under_the_threshold_is_judged_on_what_was_measured(
    counters: Counters, severity: Severity | None
) -> None:
    # An index scan of the status sorted on created_at, estimated at 150 rows.
    scan = dataclasses.replace(SCAN, node_type="Index Scan", index="jobs_status", plan_rows=150)
    sort = PlanNode("Sort", sort_key=("jobs.created_at",), plan_rows=150, children=(scan,))
    plan = PlanNode("Limit", plan_rows=1, children=(PlanNode("LockRows", children=(sort,)),))
    text = "SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 10 FOR UPDATE"
    snap = _snap(text + " SKIP LOCKED", plan)
    (stmt,) = snap.statements
    snap = dataclasses.replace(snap, statements=(dataclasses.replace(stmt, **counters),))
    found = _findings(snap)
    if severity is None:
        assert found == []
        return
    (f,) = found
    assert f.severity == severity and f.evidence["fired_by"] == "measured"
    assert f.evidence["rows_sorted"] == 150 and "pg_stat_statements measured" in f.message


def test_round_robin_sub_select_gets_a_tenant_led_key() -> None:
    text = (
        "SELECT j.id FROM queue_tenants qt CROSS JOIN LATERAL (SELECT id FROM jobs "
        "WHERE tenant_id = qt.tenant_id AND status = 'pending' ORDER BY created_at LIMIT 1 "
        "FOR UPDATE SKIP LOCKED) j ORDER BY qt.last_served LIMIT 1"
    )
    snap = _snap(text)
    table = dataclasses.replace(
        snap.tables[0], columns=(*snap.tables[0].columns, Column("tenant_id", "integer"))
    )
    (f,) = _findings(dataclasses.replace(snap, tables=(table,)))
    assert f.fix is not None
    assert "(tenant_id, created_at) WHERE status = 'pending';" in f.fix.statements[0]


def test_a_claim_of_one_queue_gets_a_key_led_by_its_queue_column() -> None:
    text = (
        "SELECT id FROM jobs WHERE queue = $1 AND status = 'pending' ORDER BY priority DESC, "
        "id LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    snap = _snap(text)
    table = dataclasses.replace(
        snap.tables[0], columns=(*snap.tables[0].columns, Column("queue", "text"))
    )
    (f,) = _findings(dataclasses.replace(snap, tables=(table,)))
    assert f.fix is not None
    assert f.fix.statements == (
        "CREATE INDEX CONCURRENTLY jobs_pending_queue_priority_id_idx ON public.jobs "
        "(queue, priority DESC, id) WHERE status = 'pending';",
    )
    assert "starts with queue" in f.fix.notes


def test_quiet_when_an_index_supplies_the_order_or_the_sort_is_small() -> None:
    assert_quiet(S.report("QA303", _snap(plan=BY_INDEX)), "QA303")
    small = dataclasses.replace(
        SORTED,
        children=(PlanNode("Sort", plan_rows=50, children=(
            dataclasses.replace(SCAN, node_type="Index Scan", index="x", plan_rows=50),
        )),),
    )  # fmt: skip
    assert_quiet(S.report("QA303", _snap(plan=small)), "QA303")
    no_limit = QUERY.replace(" LIMIT 1", "")
    assert_quiet(S.report("QA303", _snap(no_limit)), "QA303")


@pytest.mark.judges("QA301", "QA302", "QA303")
def test_found_fixed_and_gone(shape: Shape) -> None:
    build_claim_queue(shape.db)
    query = (
        "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs "
        "WHERE status = 'queued' ORDER BY tenant_id, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
        "RETURNING id"
    )
    run = shape.check("--query", query)
    (f,) = run.findings("QA303")
    ev = f["evidence"]
    assert ev["rows_sorted"] >= 1000 and ev["limit"] == 1
    assert ev["sort_node"].startswith("Sort ")
    assert ev["scan_node"].startswith(("Index Scan using jobs_queued_created_at_idx", "Seq Scan"))
    assert f["fix"]["statements"] == [
        f"CREATE INDEX CONCURRENTLY jobs_queued_tenant_id_id_idx ON {shape.queue} (tenant_id, id) "
        "WHERE status = 'queued';"
    ]
    assert_quiet(run, "QA302", shape.queue)
    (step,) = f["fix"]["steps"]
    assert "--query 1" in step["note"]  # the statement it serves

    shape.apply_fix(f)
    after = shape.check("--query", query)
    for code in ("QA301", "QA302", "QA303"):
        assert_quiet(after, code, shape.queue)
    # The statement named reads the new index.
    ((raw,),) = shape.db.execute(f"EXPLAIN (FORMAT JSON) {query}")
    assert "jobs_queued_tenant_id_id_idx" in str(raw)


@pytest.mark.judges("QA303", "QA304")
def test_a_claim_of_one_queue_found_fixed_and_gone(shape: Shape) -> None:
    # chancy's shape: several queues in one table, a varchar state spelled as an OR, an
    # order no index supplies. The printed index leads with the queue: the claim descends
    # to its queue's rows (an index in ORDER BY order without it would be QA304's walk).
    shape.db.execute(
        """
        CREATE TABLE jobs (
            id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            queue      text        NOT NULL,
            state      varchar(25) NOT NULL DEFAULT 'pending',
            priority   integer     NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        INSERT INTO jobs (queue, state)
        SELECT CASE WHEN g % 10 < 8 THEN 'default' ELSE 'emails' END,
               CASE WHEN g % 20 = 0 THEN 'pending' ELSE 'succeeded' END
          FROM generate_series(1, 100000) AS g;
        CREATE INDEX jobs_queue_state_idx ON jobs (queue, state);
        ANALYZE jobs;
        """
    )
    query = (
        "SELECT id FROM jobs WHERE queue = 'default' AND (state = 'pending' OR state = "
        "'retrying') ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    run = shape.check("--query", query)
    (f,) = run.findings("QA303")
    assert f["evidence"]["rows_sorted"] >= 1000
    assert f["fix"]["statements"] == [
        f"CREATE INDEX CONCURRENTLY jobs_pending_retrying_queue_priority_id_idx ON "
        f"{shape.queue} (queue, priority DESC, id) WHERE state IN ('pending', 'retrying');"
    ]
    shape.apply_fix(f)
    after = shape.check("--query", query)
    for code in ("QA303", "QA304"):
        assert_quiet(after, code, shape.queue)


def _sorting(rows: float) -> PlanNode:
    """SORTED over an index scan (not the whole table) that returns ``rows``."""
    scan = dataclasses.replace(SCAN, node_type="Index Scan", index="x", plan_rows=rows)
    return dataclasses.replace(
        SORTED, children=(PlanNode("Sort", plan_rows=rows, children=(scan,)),)
    )


@pytest.mark.parametrize(
    ("rows", "severity"),
    [(999, None), (1_000, Severity.INFO), (1_199, Severity.INFO), (1_200, Severity.WARNING)],
)
def test_rows_read_within_the_margin_of_min_rows_read_is_info(
    rows: float, severity: Severity | None
) -> None:
    # min_rows_read 1,000, margin 20 %: an estimate that moves with ANALYZE's sample is info
    # up to 1,200 rows, and the same snapshot twice gives the same answer.
    once, again = _findings(_snap(plan=_sorting(rows))), _findings(_snap(plan=_sorting(rows)))
    S.assert_margin_answer(once, again, severity)


ENTRYPOINTS = ("default", "emails", "reports")


def _build_entrypoint_queue(shape: Shape) -> None:
    """20,000 jobs over three entrypoints, 6,000 of them queued (2,000 each) with no
    schedule_at; the finished ones each have their own. The claim's index is
    ``jobs_ep_prio_id_idx (entrypoint, priority DESC, id) WHERE status = 'queued'``."""
    shape.db.execute(
        """
        CREATE TABLE jobs (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            entrypoint    text        NOT NULL,
            priority      int         NOT NULL DEFAULT 0,
            status        text        NOT NULL DEFAULT 'queued',
            execute_after timestamptz NOT NULL DEFAULT now(),
            schedule_at   timestamptz,
            created_at    timestamptz NOT NULL DEFAULT now()
        ) WITH (autovacuum_enabled = false);
        INSERT INTO jobs (entrypoint, priority, status, execute_after, schedule_at, created_at)
        SELECT (ARRAY['default', 'emails', 'reports'])[1 + g % 3], g % 5,
               CASE WHEN g % 10 < 3 THEN 'queued' ELSE 'done' END,
               now() - interval '1 hour',
               CASE WHEN g % 10 >= 3 THEN now() - make_interval(secs => g) END,
               now() - make_interval(secs => 20000 - g)
          FROM generate_series(1, 20000) AS g;
        CREATE INDEX jobs_ep_prio_id_idx ON jobs (entrypoint, priority DESC, id)
            WHERE status = 'queued';
        ANALYZE jobs;
        """
    )


def _lateral_claim(inner_order: str) -> str:
    """pgqueuer's claim, by hand: for each entrypoint a LATERAL branch that takes its first
    10 queued jobs in ``inner_order``, then the union ordered by priority."""
    return (
        "SELECT job.id FROM unnest(ARRAY['default', 'emails', 'reports']) AS available(entrypoint) "
        "CROSS JOIN LATERAL (SELECT candidate.id, candidate.priority FROM jobs candidate "
        "WHERE candidate.entrypoint = available.entrypoint AND candidate.status = 'queued' "
        f"AND candidate.execute_after < now() ORDER BY {inner_order} LIMIT 10 "
        "FOR UPDATE SKIP LOCKED) job ORDER BY job.priority DESC, job.id LIMIT 10"
    )


def _explain(shape: Shape, query: str, analyze: bool = False) -> PlanNode:
    options = "ANALYZE, VERBOSE, FORMAT JSON" if analyze else "VERBOSE, FORMAT JSON"
    with shape.db.connect() as conn, conn.transaction(force_rollback=True):
        (row,) = conn.execute(f"EXPLAIN ({options}) {query}").fetchall()
    return parse_explain(row[0])[0]


def test_a_sort_over_per_entrypoint_lateral_limits_is_no_backlog_sort(shape: Shape) -> None:
    _build_entrypoint_queue(shape)
    claim = _lateral_claim("candidate.priority DESC, candidate.id ASC")
    # The shape that was taken for a backlog sort: a Sort above the LATERAL branches whose
    # ordered Index Scan the planner estimates at the entrypoint's whole backlog, under a
    # Limit of 10. Run, the Sort gets 3 x 10 rows.
    plan = _explain(shape, claim, analyze=True)
    sort = next(n for n in plan.walk() if n.node_type == "Sort")
    (scan,) = [n for n in sort.walk() if n.relation == "jobs"]
    assert scan.node_type == "Index Scan" and scan.index == "jobs_ep_prio_id_idx"
    assert scan.plan_rows >= 1500 and any(n.node_type == "Limit" for n in sort.walk())
    assert (scan.actual_rows or 0) <= 10 and scan.actual_loops == 3
    assert (sort.children[0].actual_rows or 0) <= 30

    for args in (("--query", claim), ("--query", claim, "--analyze")):
        assert_quiet(shape.check(*args), "QA303", shape.queue)

    # The same claim with a branch order no index supplies sorts each entrypoint's backlog
    # under the Limit: that sort is the finding, with the index that removes it.
    backlog = _lateral_claim("candidate.created_at")
    (f,) = shape.check("--query", backlog).findings("QA303")
    assert f["evidence"]["sort_key"] == ["candidate.created_at"]
    assert f["evidence"]["rows_read"] >= 1500


def test_an_incremental_sort_whose_first_group_is_the_backlog_is_a_backlog_sort(
    shape: Shape,
) -> None:
    _build_entrypoint_queue(shape)
    shape.db.execute(
        "CREATE INDEX jobs_queued_schedule_at_idx ON jobs (schedule_at NULLS FIRST) "
        "WHERE status = 'queued'; ANALYZE jobs"
    )
    claim = (
        "SELECT id FROM jobs WHERE status = 'queued' "
        "ORDER BY schedule_at NULLS FIRST, priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    # The planner takes schedule_at's groups to be small (14,000 distinct values), but every
    # waiting job has none: the first group, NULL, is the whole backlog, sorted for one row.
    plan = _explain(shape, claim, analyze=True)
    (inc,) = [n for n in plan.walk() if n.node_type == "Incremental Sort"]
    assert inc.presorted_key == ("jobs.schedule_at",)
    assert inc.children[0].actual_rows == 6000

    (f,) = shape.check("--query", claim).findings("QA303")
    ev = f["evidence"]
    assert ev["presorted_key"] == ["jobs.schedule_at"]
    assert 5000 <= ev["first_group_rows"] <= 6000, ev
    assert ev["first_group_rows_source"].startswith("pg_stats: schedule_at is NULL in ")
    assert ev["sort_node"].startswith("Incremental Sort")
    assert f["fix"]["statements"] == [
        "CREATE INDEX CONCURRENTLY jobs_queued_schedule_at_priority_id_idx ON "
        f"{shape.queue} (schedule_at NULLS FIRST, priority DESC, id) WHERE status = 'queued';"
    ]
    (measured,) = shape.check("--query", claim, "--analyze").findings("QA303")
    assert measured["evidence"]["first_group_rows"] == 6000
    assert measured["evidence"]["first_group_rows_source"].startswith("measured by --analyze")

    shape.apply_fix(f)
    assert_quiet(shape.check("--query", claim), "QA303", shape.queue)


def _incremental_snap(null_frac: float, nulls_first: bool) -> Snapshot:
    """A claim ordered by (finished_at, id) over an index on finished_at alone: an
    Incremental Sort presorted on finished_at, 5,000 rows from the scan."""
    order = "finished_at NULLS FIRST, id" if nulls_first else "finished_at, id"
    text = (
        f"SELECT id FROM jobs WHERE status = 'pending' ORDER BY {order} LIMIT 1 "
        "FOR UPDATE SKIP LOCKED"
    )
    first_key = "jobs.finished_at NULLS FIRST" if nulls_first else "jobs.finished_at"
    scan = dataclasses.replace(SCAN, node_type="Index Scan", index=PARTIAL.name)
    plan = PlanNode("Limit", children=(PlanNode(
        "Incremental Sort", sort_key=(first_key, "jobs.id"), plan_rows=5000,
        presorted_key=("jobs.finished_at",), children=(scan,),
    ),))  # fmt: skip
    snap = _snap(text, plan)
    (table,) = snap.tables
    stats = ColumnStats("finished_at", null_frac, -0.9, 8)
    table = dataclasses.replace(table, column_stats=(*table.column_stats, stats))
    return dataclasses.replace(snap, tables=(table,))


def test_an_incremental_sort_is_judged_by_the_first_group_pg_stats_gives_it() -> None:
    # NULLs first, and 1 % of 10 M rows NULL: up to all 5,000 rows the scan returns are in
    # the first group.
    (f,) = _findings(_incremental_snap(0.01, nulls_first=True))
    assert f.evidence["first_group_rows"] == 5000
    assert f.evidence["first_group_rows_source"].startswith("pg_stats: finished_at is NULL in")
    # NULLs last (or none): 9 M distinct values over 5,000 rows, groups of one row.
    assert _findings(_incremental_snap(0.01, nulls_first=False)) == []
    assert _findings(_incremental_snap(0.0, nulls_first=True)) == []


def _two_key_snap(stats: tuple[ColumnStats, ...]) -> Snapshot:
    """pq's claim: ``ORDER BY schedule_at NULLS FIRST, expected_at, id`` over an index on
    (schedule_at NULLS FIRST, expected_at): an Incremental Sort presorted on both, 5,000 rows
    from the scan. ``stats`` are the pg_stats rows the table has."""
    text = (
        "SELECT id FROM jobs WHERE status = 'pending' "
        "ORDER BY schedule_at NULLS FIRST, expected_at, id LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    scan = dataclasses.replace(SCAN, node_type="Index Scan", index=PARTIAL.name)
    plan = PlanNode("Limit", children=(PlanNode(
        "Incremental Sort", plan_rows=5000,
        sort_key=("jobs.schedule_at NULLS FIRST", "jobs.expected_at", "jobs.id"),
        presorted_key=("jobs.schedule_at", "jobs.expected_at"), children=(scan,),
    ),))  # fmt: skip
    snap = _snap(text, plan)
    (table,) = snap.tables
    table = dataclasses.replace(table, column_stats=(*table.column_stats, *stats))
    return dataclasses.replace(snap, tables=(table,))


def test_an_incremental_sort_on_two_columns_is_sized_column_by_column() -> None:
    # pq's queue: neither column was ever set, so ANALYZE sampled no value of either: the
    # first group of equal (schedule_at, expected_at) is the whole backlog, however the NULLs
    # sort (expected_at's sort last).
    never_set = (
        ColumnStats("schedule_at", 1.0, 0.0, 8),
        ColumnStats("expected_at", 1.0, 0.0, 8),
    )
    (f,) = _findings(_two_key_snap(never_set))
    assert f.severity == Severity.WARNING
    assert f.evidence["presorted_key"] == ["jobs.schedule_at", "jobs.expected_at"]
    assert f.evidence["first_group_rows"] == 5000
    source = f.evidence["first_group_rows_source"]
    assert source.startswith("pg_stats: schedule_at is NULL in every row ANALYZE sampled")
    assert "expected_at is NULL in every row ANALYZE sampled" in source
    assert source.endswith("is every one of the 5,000 rows the scan returns")
    # schedule_at NULL for the whole backlog, but expected_at nearly unique: groups of about
    # one row within it, nothing to sort.
    distinct_second = (
        ColumnStats("schedule_at", 0.5, -0.5, 8),
        ColumnStats("expected_at", 0.0, -1.0, 8),
    )
    assert _findings(_two_key_snap(distinct_second)) == []
    # Only two distinct expected_at values: half the backlog in the first group, sorted whole.
    two_values = (
        ColumnStats("schedule_at", 0.5, -0.5, 8),
        ColumnStats("expected_at", 0.0, 2.0, 8),
    )
    (f,) = _findings(_two_key_snap(two_values))
    assert f.evidence["first_group_rows"] == 2500
    assert "taken as independent" in f.evidence["first_group_rows_source"]


def test_an_incremental_sort_whose_first_group_pg_stats_cannot_size_is_a_skip() -> None:
    # expected_at was never analyzed: the group may be the backlog, and nothing says it is not.
    found = S.run("QA303", _two_key_snap((ColumnStats("schedule_at", 1.0, 0.0, 8),)))
    (skip,) = found
    assert not isinstance(skip, Finding)
    assert "pg_stats does not size the first one" in skip.reason
    assert "--analyze measures it" in skip.reason


def test_pqs_claim_sorts_its_whole_backlog_found_fixed_and_gone(shape: Shape) -> None:
    # pq's table and index (its create.sql, for queue name ''), and its claim for queue
    # 'jobs' as pq sends it (the name formatted into the text): 12,000 jobs put, 4,000 taken.
    # Neither schedule_at nor expected_at is ever set, so the index supplies both in one
    # group and the Incremental Sort sorts every waiting job by id for each claim.
    shape.db.execute(PQ_TABLE)
    shape.db.execute(
        """
        INSERT INTO jobs (q_name, data, dequeued_at)
        SELECT 'jobs', json_build_object('n', g), CASE WHEN g <= 4000 THEN now() END
          FROM generate_series(1, 12000) AS g;
        """
    )
    shape.db.execute("VACUUM ANALYZE jobs")
    claim = (
        "WITH selected AS (SELECT * FROM jobs WHERE q_name = 'jobs' AND dequeued_at IS NULL "
        "ORDER BY schedule_at NULLS FIRST, expected_at NULLS LAST, id "
        "FOR UPDATE SKIP LOCKED LIMIT 1) "
        "UPDATE jobs AS t SET dequeued_at = current_timestamp FROM selected "
        "WHERE t.id = selected.id RETURNING t.data"
    )
    plan = _explain(shape, claim, analyze=True)
    (inc,) = [n for n in plan.walk() if n.node_type == "Incremental Sort"]
    assert inc.presorted_key == ("jobs.schedule_at", "jobs.expected_at")
    assert inc.children[0].actual_rows == 8000  # every waiting job, for one claim

    run = shape.check("--query", claim)
    (f,) = run.findings("QA303")
    ev = f["evidence"]
    assert f["severity"] == "warning"
    assert ev["presorted_key"] == ["jobs.schedule_at", "jobs.expected_at"]
    assert 7000 <= ev["first_group_rows"] <= 9000, ev
    assert ev["first_group_rows_source"].endswith("rows the scan returns"), ev
    assert "expected_at is NULL in every row ANALYZE sampled" in ev["first_group_rows_source"]
    (measured,) = shape.check("--query", claim, "--analyze").findings("QA303")
    assert measured["evidence"]["first_group_rows"] == 8000
    assert f["fix"]["statements"] == [
        "CREATE INDEX CONCURRENTLY jobs_dequeued_at_null_q_name_schedule_at_expected_at_id_idx "
        f"ON {shape.queue} (q_name, schedule_at NULLS FIRST, expected_at, id) "
        "WHERE dequeued_at IS NULL;"
    ]

    shape.apply_fix(f)
    after = _explain(shape, claim, analyze=True)
    assert not [n for n in after.walk() if "Sort" in n.node_type], after
    # The claim descends the new index and stops at its first row.
    (scan,) = [n for n in after.walk() if n.node_type.endswith("Scan") and n.index
               and n.index != "jobs_pkey"]  # fmt: skip
    assert scan.index == "jobs_dequeued_at_null_q_name_schedule_at_expected_at_id_idx"
    assert scan.actual_rows == 1
    assert_quiet(shape.check("--query", claim), "QA303", shape.queue)


# A claim whose plan sorts what an index on the status returns, planned from statistics
# gathered before the backlog arrived: ANALYZE saw 100 waiting jobs, 60,000 have come since
# (autovacuum is off for the table, so no autoanalyze catches up while the test looks). The
# planner expects to sort about a hundred rows; each claim reads and sorts the backlog.
STALE_CLAIM = (
    "SELECT id FROM jobs WHERE status = %s ORDER BY created_at LIMIT %s FOR UPDATE SKIP LOCKED"
)
STALE_CALLS = 60


def build_stale_backlog(db: TestDB) -> None:
    db.execute(
        """
        CREATE TABLE jobs (
            id bigserial PRIMARY KEY,
            status text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            payload text NOT NULL DEFAULT repeat('x', 200)
        ) WITH (autovacuum_enabled = false);
        INSERT INTO jobs (status, created_at)
        SELECT 'done', now() - interval '30 days' + g * interval '1 second'
          FROM generate_series(1, 100000) AS g;
        INSERT INTO jobs (status) SELECT 'pending' FROM generate_series(1, 100);
        CREATE INDEX jobs_status_idx ON jobs (status);
        """
    )
    db.execute("VACUUM ANALYZE jobs")
    db.execute(
        "INSERT INTO jobs (status, created_at) SELECT 'pending', now() - g * interval "
        "'1 second' FROM generate_series(1, 60000) AS g"
    )


def run_stale_claims(shape: Shape) -> float:
    """The claims as the application sends them (literals, as psycopg2 does), recorded
    afresh; their shared blocks per call."""
    record_afresh(shape.dba)
    with psycopg.connect(shape.db.dsn, cursor_factory=psycopg.ClientCursor) as conn:
        for _ in range(STALE_CALLS):
            with conn.transaction():
                ids = [r[0] for r in conn.execute(STALE_CLAIM, ("pending", 10))]
                conn.execute("UPDATE jobs SET status = 'done' WHERE id = ANY(%s)", (ids,))
    ((blocks,),) = shape.dba.execute(
        "SELECT (shared_blks_hit + shared_blks_read)::float / calls FROM pg_stat_statements "
        "WHERE query LIKE 'SELECT id FROM jobs WHERE status = $1 ORDER BY created_at%'"
    )
    return float(blocks)


@pytest.mark.judges("QA303")
def test_a_sort_the_estimate_puts_small_is_found_by_its_measured_cost_fixed_and_gone(
    shape: Shape,
) -> None:
    build_stale_backlog(shape.db)
    before = run_stale_claims(shape)
    (f,) = [x for x in shape.check().report["findings"] if x["code"] == "QA303"]
    ev = f["evidence"]
    assert f["severity"] == "warning", f["message"]
    # The planner's estimate is under min_rows_read; the server's counter fired it.
    assert ev["fired_by"] == "measured" and ev["rows_sorted"] < 1000
    assert ev["shared_blks_per_call"] == pytest.approx(before, rel=0.01) and before > 1500
    assert ev["calls"] == STALE_CALLS and ev["rows_per_call"] == 10
    assert "pg_stat_statements measured" in f["message"] and "The planner estimates" in f["message"]
    (step,) = f["fix"]["steps"]
    assert step["sql"] == (
        f"CREATE INDEX CONCURRENTLY jobs_pending_created_at_idx ON {shape.queue} (created_at) "
        "WHERE status = 'pending';"
    )
    assert "pg_stat_statements" in step["note"]  # names the claim it serves
    shape.apply_fix(f)  # exactly as printed
    after = run_stale_claims(shape)
    assert after < before / 10, (before, after)
    claim = STALE_CLAIM % ("'pending'", 10)
    ((raw,),) = shape.db.execute(f"EXPLAIN (FORMAT JSON) {claim}")
    plan, _ = parse_explain(raw)
    assert "jobs_pending_created_at_idx" in str(plan) and "Sort" not in str(plan)
    assert_quiet(shape.check(), "QA303", shape.queue)


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_claim_queue(db)
    return check(
        db,
        "--query",
        "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs "
        "WHERE status = 'queued' ORDER BY tenant_id, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
        "RETURNING id",
    )


FIX_PATHOLOGIES = {"sort": Pathology(frozenset({"QA303"}), _fix_pathology)}
