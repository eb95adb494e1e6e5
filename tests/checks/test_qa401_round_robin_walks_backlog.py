"""QA401 round-robin-walks-backlog: unit tests on hand-built snapshots, then the measured
round-robin trap on real servers (PostgreSQL 18 and 15), fixed with the printed SQL.

``build_tenant_queue`` builds the multi-tenant queues the QA402 and QA403 tests share.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from qadvisor.api.provisional import (
    tenant_order,
)
from qadvisor.model import (
    Column,
    ColumnStats,
    Finding,
    Index,
    LivePredicate,
    PlanNode,
    Severity,
    Snapshot,
    Statement,
    Table,
    TableStats,
    TenantCount,
    TenantFacts,
)
from qadvisor.sql.dequeue import OrderItem, analyse
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import Pathology, Run, assert_quiet, check, fix_steps, qadvisor, rewrite_of
from tests.shapes import Shape

QUEUED = LivePredicate("status", "in", ("queued",), "partial index jobs_queued_fifo")

# The measured round-robin dequeue, with the sub-select ordered by id ("the natural choice").
RR_BY_ID = """\
select j.id, qt.tenant_id
from queue_tenants qt
cross join lateral (
  select id from jobs
  where tenant_id = qt.tenant_id and status = 'queued'
  order by id
  limit 1
  for update skip locked
) j
order by qt.last_served
limit 1"""
# ...and as it is fixed: ordered by what only the per-tenant index delivers.
RR_FIXED = RR_BY_ID.replace("order by id", "order by enqueued_at, id")
FIFO = (
    "select id, tenant_id from jobs where status = 'queued' order by id limit 1 "
    "for update skip locked"
)


# --- building states on a server ------------------------------------------------------------


def build_tenant_queue(
    db: TestDB,
    jobs: dict[int, int],
    *,
    rotation: int | None = None,
    tenant_index: str | None = "(tenant_id, id)",
    done: int = 0,
) -> None:
    """The measured jobs table: ``jobs`` maps tenant -> queued jobs (the large tenant first, so
    its jobs are the oldest); ``rotation`` tenants 1..N in queue_tenants (tenants without
    queued jobs never served, so first in rotation order); the FIFO index, and the
    per-tenant partial index ``tenant_index`` (None: none). ``done`` finished jobs of 20 ms
    with an index on finished_at. Analyzed."""
    db.execute(
        """
        CREATE TABLE jobs (
          id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          tenant_id int NOT NULL,
          status text NOT NULL DEFAULT 'queued',
          enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
          started_at timestamptz,
          finished_at timestamptz
        );
        CREATE INDEX jobs_queued_fifo ON jobs (id) WHERE status = 'queued';
        """
    )
    if done:
        db.execute(
            f"""
            INSERT INTO jobs (tenant_id, status, enqueued_at, started_at, finished_at)
            SELECT g % 7, 'done', now() - interval '1 hour',
                   now() - interval '1 hour' + g * interval '1 second',
                   now() - interval '1 hour' + g * interval '1 second' + interval '20 ms'
              FROM generate_series(1, {done}) g;
            CREATE INDEX jobs_finished_at_idx ON jobs (finished_at);
            """
        )
    if jobs:
        db.execute(
            "INSERT INTO jobs (tenant_id) SELECT u.t FROM unnest(%s::int[], %s::int[]) "
            "WITH ORDINALITY AS u(t, n, o), generate_series(1, u.n) ORDER BY u.o",
            [list(jobs), list(jobs.values())],
        )
    if tenant_index:
        db.execute(
            f"CREATE INDEX jobs_queued_tenant_id ON jobs {tenant_index} WHERE status = 'queued'"
        )
    if rotation is not None:
        active = ",".join(str(t) for t in jobs) or "NULL"
        db.execute(
            f"""
            CREATE TABLE queue_tenants (
              tenant_id int PRIMARY KEY,
              last_served timestamptz NOT NULL DEFAULT '-infinity'
            );
            CREATE INDEX ON queue_tenants (last_served);
            INSERT INTO queue_tenants (tenant_id, last_served)
            SELECT g, CASE WHEN g IN ({active}) THEN now() ELSE '-infinity' END
              FROM generate_series(1, {rotation}) g;
            ANALYZE queue_tenants;
            """
        )
    db.execute("ANALYZE jobs")


def build_trap(db: TestDB, n_distinct: int = 1) -> None:
    """The measured case: 100,000 queued jobs of tenant 1, one each for tenants 2-11, 1,000 tenants
    in the rotation (989 idle), the FIFO index and a partial (tenant_id, id) index.

    ANALYZE's random sample of 30,000 rows decides how many of the 10 small tenants it sees,
    and with them the plan: usually none or a few (n_distinct 1-5, the walk), now and then
    enough to tip the planner to the tenant index (8 or more, measured on 18 and 15). The
    estimate is pinned, by default to 1, what a sample without small tenants gives, so the
    test does not depend on the draw."""
    build_tenant_queue(db, {1: 100_000, **dict.fromkeys(range(2, 12), 1)}, rotation=1000)
    pin_n_distinct(db, n_distinct)


def pin_n_distinct(db: TestDB, n: int) -> None:
    """What one ANALYZE sample of the skewed backlog gives for tenant_id, made repeatable."""
    db.execute(f"ALTER TABLE jobs ALTER COLUMN tenant_id SET (n_distinct = {n})")
    db.execute("ANALYZE jobs")


def snapshot_of(db: TestDB, query: str, *args: str) -> Snapshot:
    run = qadvisor("snapshot", db.dsn, "--query", query, *args, timeout=300)
    assert run.rc == 0, run.stderr
    return Snapshot.from_dict(json.loads(run.stdout))


def split_fix(finding: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(migration statements, dequeue statements) of a printed fix: its migration steps,
    which are its ``statements``, and its rewrites."""
    ddl = [s["sql"] for s in fix_steps(finding, "migration")]
    assert ddl == finding["fix"]["statements"]
    return ddl, [s["sql"] for s in fix_steps(finding, "rewrite")]


def inner_scans(snap: Snapshot) -> list[PlanNode]:
    (stmt,) = snap.statements
    plan = stmt.analyzed_plan or stmt.custom_plan
    assert plan is not None, stmt.plan_error
    return [n for n in plan.walk() if n.relation == "jobs" and n.node_type != "Bitmap Index Scan"]


# --- unit tests on hand-built snapshots -------------------------------------------------------


def _index(name: str, columns: tuple[str, ...], **kw: Any) -> Index:
    return S.index(name, columns, 8 * 1024 * 1024, **kw)


FIFO_IDX = _index("jobs_queued_fifo", ("id",), predicate="(status = 'queued'::text)",
                  reltuples=100_010.0, idx_scan=990, idx_tup_read=98_910_000)  # fmt: skip
PKEY = _index("jobs_pkey", ("id",), is_primary=True, is_unique=True, is_constraint=True)
TENANT_ID_IDX = _index("jobs_queued_tenant_id", ("tenant_id", "id"),
                       predicate="(status = 'queued'::text)")  # fmt: skip


def jobs(*indexes: Index) -> Table:
    return Table(
        schema="public",
        name="jobs",
        reltuples=100_010,
        relpages=600,
        bytes=5_000_000,
        reloptions={},
        stats=TableStats(n_live_tup=100_010),
        columns=(
            Column("id", "bigint", True),
            Column("tenant_id", "integer", True),
            Column("status", "text", True),
            Column("enqueued_at", "timestamp with time zone", True),
            Column("started_at", "timestamp with time zone"),
            Column("finished_at", "timestamp with time zone"),
        ),
        indexes=indexes,
        column_stats=(
            ColumnStats("tenant_id", 0.0, 6.0, 4, ("1",), (0.9999,)),
            ColumnStats("status", 0.0, 1.0, 7, ("queued",), (1.0,)),
        ),
    )


def walk_plan(index: str = "jobs_queued_fifo", cond: str | None = None) -> PlanNode:
    """The measured bad plan: Limit / Nested Loop / (rotation index scan, LockRows / walk)."""
    inner = PlanNode(
        "Index Scan",
        relation="jobs",
        schema="public",
        alias="jobs",
        index=index,
        index_cond=cond,
        filter=None
        if cond
        else "((jobs.tenant_id = qt.tenant_id) AND (jobs.status = 'queued'::text))",
        plan_rows=16_668,
    )
    rotation = PlanNode("Index Scan", relation="queue_tenants", schema="public", alias="qt",
                        index="queue_tenants_last_served_idx", plan_rows=1000)  # fmt: skip
    lock = PlanNode("Limit", children=(PlanNode("LockRows", children=(inner,)),))
    return PlanNode("Limit", children=(PlanNode("Nested Loop", children=(rotation, lock)),))


def trap_facts(**kw: Any) -> TenantFacts:
    base: dict[str, Any] = {
        "schema": "public",
        "table": "jobs",
        "tenant_column": "tenant_id",
        "live_by_tenant": (
            TenantCount("1", 100_000),
            *(TenantCount(str(t), 1) for t in range(2, 12)),
        ),
        "count_cap": 100_000,
        "tenants_counted": 11,
        "rotation_schema": "public",
        "rotation_table": "queue_tenants",
        "rotation_rows": 1000,
        "idle_tenants": 989,
        "rotation_probed": 1000,
        "counts_complete": True,
    }
    return TenantFacts(**(base | kw))


def rr_snapshot(
    table: Table,
    plan: PlanNode | None,
    sql: str = RR_BY_ID,
    facts: TenantFacts | None = None,
    **stmt: Any,
) -> Snapshot:
    statement = Statement(
        source="--query 1", text=sql, parsed=analyse(sql), custom_plan=plan, **stmt
    )
    return dataclasses.replace(
        S.snapshot(table, live=QUEUED),
        statements=(statement,),
        tenants=(facts or trap_facts(),),
        unavailable={},
    )


def findings(snap: Snapshot) -> list[Finding]:
    return [f for f in S.run("QA401", snap) if isinstance(f, Finding)]


def quiet(snap: Snapshot) -> None:
    assert_quiet(S.report("QA401", snap), "QA401")


def test_the_measured_walk_is_flagged_with_the_index_and_the_rewritten_order() -> None:
    (f,) = findings(rr_snapshot(jobs(PKEY, FIFO_IDX, TENANT_ID_IDX), walk_plan()))
    assert f.key == "QA401:public.--query 1"
    assert (f.target.kind, f.target.table, f.target.name) == ("statement", "jobs", "--query 1")
    assert f.severity is Severity.WARNING
    ev = f.evidence
    assert (ev["index"], ev["index_columns"], ev["index_cond"]) == (
        "jobs_queued_fifo",
        ["id"],
        None,
    )
    assert "tenant_id = qt.tenant_id" in ev["filter"]
    assert (ev["live_rows"], ev["rotation_rows"], ev["idle_tenants"]) == (100_010, 1000, 989)
    assert (ev["n_distinct_tenant"], ev["planner_rows_per_tenant"]) == (6.0, 16_668)
    assert ev["index_tup_read_per_scan"] == 99_909
    assert "walks index jobs_queued_fifo (id)" in f.message and "989 of them idle" in f.message
    assert f.fix is not None
    (create,) = f.fix.statements
    rewritten = rewrite_of(f)
    assert create == (
        "CREATE INDEX CONCURRENTLY jobs_queued_tenant_id_enqueued_at_id_idx ON public.jobs "
        "(tenant_id, enqueued_at, id) WHERE status = 'queued';"
    )
    parsed = analyse(rewritten.rstrip(";"))
    assert parsed is not None and parsed.lateral is not None
    assert parsed.order_by == (OrderItem("enqueued_at"), OrderItem("id"))
    assert parsed.lateral.outer_order_by == (OrderItem("last_served"),)
    assert "ALTER TABLE public.jobs ALTER COLUMN tenant_id SET (n_distinct = 1000);" in f.fix.notes


def test_seq_scan_and_primary_key_walks_are_flagged_too() -> None:
    walk_filter = "((jobs.tenant_id = qt.tenant_id) AND (jobs.status = 'queued'::text))"
    seq = PlanNode("Seq Scan", relation="jobs", schema="public", filter=walk_filter)
    plan = PlanNode("Nested Loop", children=(PlanNode("Seq Scan", relation="queue_tenants"), seq))
    (f,) = findings(rr_snapshot(jobs(PKEY), plan))
    assert f.evidence["inner_node"].startswith("Seq Scan on public.jobs")
    (f,) = findings(rr_snapshot(jobs(PKEY), walk_plan("jobs_pkey")))
    assert f.evidence["index"] == "jobs_pkey"


TIME_TENANT_IDX = _index("jobs_queued_tenant_id_enqueued_at_id_idx",
                         ("tenant_id", "enqueued_at", "id"),
                         predicate="(status = 'queued'::text)")  # fmt: skip
EVEN = trap_facts(live_by_tenant=tuple(TenantCount(str(t), 100) for t in range(1, 201)))


def test_quiet_when_the_inner_scan_descends_on_the_tenant() -> None:
    # An order only the per-tenant index supplies: the descent does not rest on the sample.
    good = walk_plan(TIME_TENANT_IDX.name, cond="(jobs.tenant_id = qt.tenant_id)")
    quiet(rr_snapshot(jobs(PKEY, FIFO_IDX, TIME_TENANT_IDX), good, sql=RR_FIXED))
    # Ordered by id (the FIFO index's order too) over an evenly spread backlog.
    good = walk_plan("jobs_queued_tenant_id", cond="(jobs.tenant_id = qt.tenant_id)")
    quiet(rr_snapshot(jobs(FIFO_IDX, TENANT_ID_IDX), good, facts=EVEN))
    heap = PlanNode("Bitmap Heap Scan", relation="jobs", schema="public",
                    index_cond="(jobs.tenant_id = qt.tenant_id)",
                    children=(PlanNode("Bitmap Index Scan", relation="jobs",
                                       index="jobs_queued_tenant_id",
                                       index_cond="(jobs.tenant_id = qt.tenant_id)"),))  # fmt: skip
    quiet(rr_snapshot(jobs(TENANT_ID_IDX), PlanNode("Nested Loop", children=(heap,))))
    # Not a round-robin statement: another check's business.
    quiet(rr_snapshot(jobs(FIFO_IDX), walk_plan(), sql=FIFO))


def test_a_descent_that_rests_on_the_sample_is_latent() -> None:
    # The measured backlog, and a sample that happened to see enough small tenants for the
    # planner to descend the (tenant_id, id) index, while ORDER BY id is the FIFO index's too.
    good = walk_plan("jobs_queued_tenant_id", cond="(jobs.tenant_id = qt.tenant_id)")
    (f,) = findings(rr_snapshot(jobs(PKEY, FIFO_IDX, TENANT_ID_IDX), good))
    assert f.severity is Severity.INFO and f.key == "QA401:public.--query 1"
    ev = f.evidence
    assert ev["latent"] is True and ev["index"] == "jobs_queued_tenant_id"
    assert (ev["order_by"], ev["order_index"]) == ("id", "jobs_pkey")
    assert (ev["top_tenant"], ev["n_distinct_tenant"], ev["tenants"]) == ("1", 6.0, 1000)
    assert "Latent" in f.message and "1 holds 100% of the 100,010 live rows" in f.message
    assert f.fix is not None
    (create,) = f.fix.statements
    rewritten = rewrite_of(f)
    assert "(tenant_id, enqueued_at, id) WHERE status = 'queued'" in create
    parsed = analyse(rewritten.rstrip(";"))
    assert parsed is not None and parsed.order_by == (OrderItem("enqueued_at"), OrderItem("id"))
    # Once pg_stats counts every tenant, the sample no longer decides.
    counted = dataclasses.replace(
        jobs(PKEY, FIFO_IDX, TENANT_ID_IDX),
        column_stats=(ColumnStats("tenant_id", 0.0, 1000.0, 4, ("1",), (0.9999,)),),
    )
    quiet(rr_snapshot(counted, good))


def test_small_backlog_is_info_and_no_plan_is_a_skip() -> None:
    facts = trap_facts(live_by_tenant=(TenantCount("1", 300), TenantCount("2", 1)))
    (f,) = findings(rr_snapshot(jobs(FIFO_IDX), walk_plan(), facts=facts))
    assert f.severity is Severity.INFO and "still cheap" in f.message
    out = S.run("QA401", rr_snapshot(jobs(FIFO_IDX), None))
    assert [type(o).__name__ for o in out] == ["Skip"]


def test_index_and_order_already_right_then_the_statistics_are_the_fix() -> None:
    right = _index("jobs_queued_tenant_id_enqueued_at_id_idx", ("tenant_id", "enqueued_at", "id"),
                   predicate="(status = 'queued'::text)")  # fmt: skip
    fifo_by_time = _index("jobs_queued_fifo_t", ("enqueued_at", "id"),
                          predicate="(status = 'queued'::text)")  # fmt: skip
    snap = rr_snapshot(jobs(fifo_by_time, right), walk_plan("jobs_queued_fifo_t"), sql=RR_FIXED)
    (f,) = findings(snap)
    assert f.fix is not None
    assert f.fix.statements == (
        "ALTER TABLE public.jobs ALTER COLUMN tenant_id SET (n_distinct = 1000);",
        "ANALYZE public.jobs;",
    )


def test_tenant_column_without_statistics_still_gets_its_fix() -> None:
    # pg_stats has no row for tenant_id (never analyzed, or hidden from the role).
    table = dataclasses.replace(
        jobs(PKEY, FIFO_IDX, TENANT_ID_IDX),
        column_stats=(ColumnStats("status", 0.0, 1.0, 7, ("queued",), (1.0,)),),
    )
    (f,) = findings(rr_snapshot(table, walk_plan()))
    assert f.evidence["n_distinct_tenant"] is None and f.fix is not None
    assert "pg_stats has no n_distinct for tenant_id against 1,000 tenants" in f.fix.notes


def test_analyzed_plan_numbers_are_evidence() -> None:
    plan = walk_plan()
    inner = next(n for n in plan.walk() if n.relation == "jobs")
    measured = dataclasses.replace(inner, actual_loops=990, rows_removed_by_filter=99_909,
                                   shared_blocks=999_882, actual_rows=0)  # fmt: skip

    def swap(node: PlanNode) -> PlanNode:
        if node is inner:
            return measured
        return dataclasses.replace(node, children=tuple(swap(c) for c in node.children))

    snap = rr_snapshot(jobs(FIFO_IDX), swap(plan), analyzed_ms=13_839.3)
    snap = dataclasses.replace(
        snap,
        statements=(dataclasses.replace(snap.statements[0], analyzed_plan=swap(plan)),),
    )
    (f,) = findings(snap)
    assert f.evidence["actual_probes"] == 990
    assert f.evidence["rows_removed_by_filter_per_probe"] == 99_909
    assert "13,839.3 ms per dequeue" in f.message


def test_tenant_order_prefers_an_order_only_the_tenant_index_supplies() -> None:
    t = jobs(PKEY, FIFO_IDX)
    assert tenant_order(t, "tenant_id", (OrderItem("id"),)) == (
        OrderItem("enqueued_at"),
        OrderItem("id"),
    )
    assert tenant_order(t, "tenant_id", ()) == (OrderItem("enqueued_at"), OrderItem("id"))
    # Already an order no other index supplies: kept.
    kept = (OrderItem("enqueued_at"), OrderItem("id"))
    assert tenant_order(t, "tenant_id", kept) == kept
    # The tenant column in the ORDER BY is redundant under tenant_id = qt.tenant_id.
    assert tenant_order(t, "tenant_id", (OrderItem("tenant_id"), OrderItem("enqueued_at"))) == (
        OrderItem("enqueued_at"),
    )


# --- on real servers --------------------------------------------------------------------------


@pytest.mark.judges("QA401", "QA402")
def test_round_robin_trap_found_fixed_and_gone(shape: Shape) -> None:
    db = shape.db
    build_trap(db)
    # --analyze runs the walk (about 10 s): the session default of 5 s would cancel it.
    slow = ("--analyze", "--statement-timeout", "120000")
    run = shape.check("--query", RR_BY_ID, *slow)
    assert run.rc == 1
    assert {"QA401", "QA402"} <= run.codes(), (run.report["skipped"], run.report["findings"])
    (f,) = run.findings("QA401")
    ev = f["evidence"]
    assert ev["index"] == "jobs_queued_fifo" and ev["index_cond"] is None
    assert "tenant_id = qt.tenant_id" in ev["filter"]
    assert ev["live_rows"] >= 100_000 and ev["rotation_rows"] == 1000
    assert ev["idle_tenants"] == 989
    # qadvisor's conclusion, not the pin coming back: the tenants it counted in the rotation
    # against what pg_stats says, why the planner walks, and the n_distinct that fixes it.
    assert "against 1,000 tenants, so the planner expects a short walk" in f["message"]
    assert ev["planner_rows_per_tenant"] >= 10_000  # read from the plan: "tens of thousands"
    assert "SET (n_distinct = 1000);" in f["fix"]["notes"]
    assert ev["actual_probes"] == 990  # 989 idle tenants, then tenant 1 (last_served order)
    assert ev["rows_removed_by_filter_per_probe"] > 99_000
    before_ms = ev["analyzed_ms"]

    ddl, (rewritten,) = split_fix(f)
    (create,) = ddl
    assert "(tenant_id, enqueued_at, id) WHERE status = 'queued'" in create
    # It serves the rewrite (ordered as its keys), which the plan below shows reading it.
    (step,) = [s for s in f["fix"]["steps"] if s["sql"] == create]
    assert step["note"].startswith("Built for the rewrite of --query 1 this fix prints")
    shape.apply(ddl)  # as printed: no ANALYZE of its own

    # The id-ordered sub-select keeps walking even with the per-tenant index in place...
    assert "QA401" in shape.check("--query", RR_BY_ID).codes()
    # ...the rewritten one descends it.
    after = shape.check("--query", rewritten)
    assert_quiet(after, "QA401", shape.queue)
    assert "QA402" in after.codes()
    snap = snapshot_of(shape.checker, rewritten, *slow)
    (scan,) = inner_scans(snap)
    assert scan.index == "jobs_queued_tenant_id_enqueued_at_id_idx"
    assert scan.index_cond is not None and "tenant_id = qt.tenant_id" in scan.index_cond
    after_ms = snap.statements[0].analyzed_ms
    assert after_ms is not None

    # The idle tenants: prune them with the printed DO block.
    (prune,) = after.findings("QA402")
    shape.apply_fix(prune, review=True)
    assert db.execute("SELECT count(*) FROM queue_tenants") == [(11,)]
    pruned = shape.check("--query", rewritten)
    assert_quiet(pruned, "QA401", shape.queue)
    assert_quiet(pruned, "QA402", shape.queue)
    pruned_ms = snapshot_of(shape.checker, rewritten, *slow).statements[0].analyzed_ms
    assert pruned_ms is not None
    print(
        f"\nPostgreSQL {db.version_num}, {shape.name}: one round-robin dequeue, 100,000 + 10 "
        f"queued jobs: id-ordered walk with 989 idle tenants {before_ms:,.1f} ms; per-tenant "
        f"index + ORDER BY enqueued_at, id {after_ms:,.2f} ms; after pruning idle tenants "
        f"{pruned_ms:,.3f} ms"
    )
    assert after_ms * 100 < before_ms


def test_a_sample_that_gave_the_good_plan_is_latent_and_the_fix_makes_it_stick(
    shape: Shape,
) -> None:
    # The same skewed backlog, analyzed by a sample that saw all 11 tenants with work: the
    # id-ordered sub-select descends the (tenant_id, id) index today.
    db = shape.db
    build_trap(db, n_distinct=11)
    shape.grant(["--query", RR_BY_ID])
    assert inner_scans(snapshot_of(shape.checker, RR_BY_ID))[0].index == "jobs_queued_tenant_id"
    (f,) = shape.check("--query", RR_BY_ID).findings("QA401")
    assert f["severity"] == "info" and f["evidence"]["latent"] is True
    assert f["evidence"]["order_index"] in ("jobs_pkey", "jobs_queued_fifo")
    ddl, (rewritten,) = split_fix(f)
    assert ddl == [
        f"CREATE INDEX CONCURRENTLY jobs_queued_tenant_id_enqueued_at_id_idx ON {shape.queue} "
        "(tenant_id, enqueued_at, id) WHERE status = 'queued';"
    ]
    # Latent indeed: the next sample, one without small tenants, makes the statement walk.
    pin_n_distinct(db, 1)
    assert inner_scans(snapshot_of(shape.checker, RR_BY_ID))[0].index == "jobs_queued_fifo"
    # The printed fix holds whatever the sample: the rewrite descends the new index with
    # either estimate.
    shape.apply(ddl)
    for n in (1, 11):
        pin_n_distinct(db, n)
        assert_quiet(shape.check("--query", rewritten), "QA401", shape.queue)
        (scan,) = inner_scans(snapshot_of(shape.checker, rewritten))
        assert scan.index == "jobs_queued_tenant_id_enqueued_at_id_idx", n


def test_evenly_spread_backlog_does_not_reproduce_the_walk(shape: Shape) -> None:
    # Same tables, 100 jobs each for 1,000 tenants: the planner knows tenants are small and
    # descends the (tenant_id, id) index even with the sub-select ordered by id.
    build_tenant_queue(shape.db, dict.fromkeys(range(1, 1001), 100), rotation=1000)
    assert_quiet(shape.check("--query", RR_BY_ID), "QA401", shape.queue)


def test_statistics_fix_runs_as_printed_and_the_walk_is_gone(shape: Shape) -> None:
    # Index and order already right: the per-tenant index (tenant_id, enqueued_at, id) and a
    # sub-select ordered by enqueued_at, id. A FIFO index in that same order lets the planner
    # walk it when pg_stats says there is one tenant: then the statistics are the fix.
    db = shape.db
    build_tenant_queue(db, {1: 100_000, **dict.fromkeys(range(2, 12), 1)}, rotation=1000,
                       tenant_index="(tenant_id, enqueued_at, id)")  # fmt: skip
    db.execute("CREATE INDEX jobs_queued_by_time ON jobs (enqueued_at, id) WHERE status = 'queued'")
    db.execute("ALTER TABLE jobs ALTER COLUMN tenant_id SET (n_distinct = 1)")
    db.execute("ANALYZE jobs")
    (f,) = shape.check("--query", RR_FIXED).findings("QA401")
    assert f["evidence"]["index"] == "jobs_queued_by_time"
    assert f["fix"]["statements"] == [
        f"ALTER TABLE {shape.queue} ALTER COLUMN tenant_id SET (n_distinct = 1000);",
        f"ANALYZE {shape.queue};",
    ]
    assert "SHARE UPDATE EXCLUSIVE" in f["fix"]["notes"]
    shape.apply_fix(f)
    assert_quiet(shape.check("--query", RR_FIXED), "QA401", shape.queue)
    (scan,) = inner_scans(snapshot_of(shape.checker, RR_FIXED))
    assert scan.index == "jobs_queued_tenant_id"
    assert scan.index_cond is not None and "tenant_id = qt.tenant_id" in scan.index_cond


@pytest.mark.parametrize(
    ("live", "severity"), [(999, Severity.INFO), (1_199, Severity.INFO), (1_200, Severity.WARNING)]
)
def test_a_backlog_within_the_margin_of_min_backlog_rows_is_info(
    live: int, severity: Severity
) -> None:
    # min_backlog_rows 1,000 with a 20 % margin: up to 1,200 live rows the walk is info on
    # every run, whichever side of 1,000 the count fell this time.
    facts = trap_facts(live_by_tenant=(TenantCount("1", live - 1), TenantCount("2", 1)))
    snap = rr_snapshot(jobs(FIFO_IDX), walk_plan(), facts=facts)
    (f,) = findings(snap)
    assert findings(snap) == [f]
    assert f.severity is severity, f.message
    assert ("still cheap" in f.message) == (severity is Severity.INFO)


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_trap(db)
    return check(db, "--query", RR_BY_ID)


FIX_PATHOLOGIES = {"round-robin-walk": Pathology(frozenset({"QA401", "QA402"}), _fix_pathology)}
