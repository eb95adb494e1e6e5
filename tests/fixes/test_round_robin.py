"""The round-robin pattern as fixes print it (qadvisor.fixes.round_robin), on hand-built tables:
the per-tenant order, the per-tenant partial index, the rotation table's name, and the whole
fix (its steps, locks and SQL text). Pure: no server; that the printed SQL runs and is planned
as intended is proved on real servers by tests/checks/test_qa401_round_robin_walks_backlog.py.
"""

from __future__ import annotations

import dataclasses

from qadvisor.fixes.builders import CONCURRENT_BUILD_NOTE
from qadvisor.fixes.round_robin import (
    existing_tenant_index,
    rotation_name,
    round_robin_fix,
    tenant_index,
    tenant_index_sql,
    tenant_order,
)
from qadvisor.model import Column, FixStep, Index, LivePredicate, Statement, Table
from qadvisor.sql.dequeue import OrderItem
from tests import snapshots as S

QUEUED = LivePredicate("status", "in", ("queued",))
PK = S.index("jobs_pkey", ("id",), 8192, is_primary=True, is_unique=True)


def tenant_jobs(
    *indexes: Index, extra: tuple[Column, ...] = (), time_column: str | None = "enqueued_at"
) -> Table:
    columns = (
        Column("id", "bigint", True),
        Column("tenant_id", "integer", True),
        Column("status", "text", True),
        *((Column(time_column, "timestamp with time zone", True),) if time_column else ()),
        *extra,
    )
    return dataclasses.replace(S.jobs_table(), columns=columns, indexes=(PK, *indexes))


def order(*columns: str) -> tuple[OrderItem, ...]:
    return tuple(OrderItem(c) for c in columns)


# --- the per-tenant order ----------------------------------------------------------------------


def test_ordered_by_the_key_alone_the_queue_time_goes_first() -> None:
    # ORDER BY id is what the primary key supplies on its own, without the tenant.
    assert tenant_order(tenant_jobs(), "tenant_id", order("id")) == order("enqueued_at", "id")


def test_ordered_by_another_index_s_leading_columns_the_queue_time_goes_first() -> None:
    by_status = S.index("jobs_status_idx", ("status",), 8192)
    t = tenant_jobs(by_status)
    assert tenant_order(t, "tenant_id", order("status")) == order("enqueued_at", "status")
    # An index led by the tenant is the one to build, not one that already serves the order.
    tenant_led = S.index("jobs_tenant_status_idx", ("tenant_id", "status"), 8192)
    assert tenant_order(tenant_jobs(tenant_led), "tenant_id", order("status")) == order("status")
    # An invalid index serves nothing.
    broken = dataclasses.replace(by_status, is_valid=False)
    assert tenant_order(tenant_jobs(broken), "tenant_id", order("status")) == order("status")


def test_an_order_only_a_tenant_led_index_supplies_is_kept() -> None:
    t = tenant_jobs()
    kept = (OrderItem("enqueued_at"), OrderItem("id"))
    assert tenant_order(t, "tenant_id", kept) == kept
    # Already led by the queue time: nothing to put first.
    assert tenant_order(t, "tenant_id", order("enqueued_at")) == order("enqueued_at")


def test_the_tenant_itself_is_left_out_of_the_order() -> None:
    t = tenant_jobs()
    assert tenant_order(t, "tenant_id", order("tenant_id", "enqueued_at")) == order("enqueued_at")
    assert tenant_order(t, "tenant_id", order("tenant_id", "id")) == order("enqueued_at", "id")


def test_without_an_order_the_queue_time_then_the_key() -> None:
    assert tenant_order(tenant_jobs(), "tenant_id", ()) == order("enqueued_at", "id")
    assert tenant_order(tenant_jobs(time_column=None), "tenant_id", ()) == order("id")
    # The first of the known queue-time columns that the table has.
    both = tenant_jobs(extra=(Column("created_at", "timestamp with time zone"),))
    assert tenant_order(both, "tenant_id", ()) == order("enqueued_at", "id")
    run_at = tenant_jobs(time_column="run_at", extra=(Column("available_at", "timestamptz"),))
    assert tenant_order(run_at, "tenant_id", ()) == order("run_at", "id")


def test_without_a_queue_time_column_the_order_stays() -> None:
    assert tenant_order(tenant_jobs(time_column=None), "tenant_id", order("id")) == order("id")


def test_an_expression_in_the_order_leaves_it_as_written() -> None:
    current = (OrderItem("tenant_id"), OrderItem("coalesce(run_at, now())"))
    assert tenant_order(tenant_jobs(), "tenant_id", current) == current


def test_directions_are_kept() -> None:
    current = (OrderItem("id", descending=True),)
    # The primary key serves ORDER BY id DESC scanned backwards: the queue time still goes
    # first, and the key keeps its direction.
    assert tenant_order(tenant_jobs(), "tenant_id", current) == (
        OrderItem("enqueued_at"),
        OrderItem("id", descending=True),
    )


# --- the per-tenant index ----------------------------------------------------------------------


def test_the_tenant_index_is_the_tenant_then_the_order_on_the_live_rows() -> None:
    name, sql = tenant_index_sql(tenant_jobs(), QUEUED, "tenant_id", order("enqueued_at", "id"))
    assert name == "jobs_queued_tenant_id_enqueued_at_id_idx"
    assert sql == (
        "CREATE INDEX CONCURRENTLY jobs_queued_tenant_id_enqueued_at_id_idx ON public.jobs "
        "(tenant_id, enqueued_at, id) WHERE status = 'queued';"
    )
    desc = (OrderItem("priority", descending=True), OrderItem("id", nulls_first=True))
    fix = tenant_index(tenant_jobs(), QUEUED, "tenant_id", desc)
    assert fix.statement == (
        "CREATE INDEX CONCURRENTLY jobs_queued_tenant_id_priority_id_idx ON public.jobs "
        "(tenant_id, priority DESC, id NULLS FIRST) WHERE status = 'queued';"
    )
    assert fix.step() == FixStep("migration", fix.statement, "SHARE UPDATE EXCLUSIVE", False,
                                 CONCURRENT_BUILD_NOTE)  # fmt: skip


def test_an_existing_tenant_index_matches_its_keys_and_predicate_exactly() -> None:
    queued = "(status = 'queued'::text)"
    exact = S.index("mine", ("tenant_id", "enqueued_at", "id"), 8192, predicate=queued)
    longer = S.index("longer", ("tenant_id", "enqueued_at", "id", "status"), 8192, predicate=queued)
    whole = S.index("whole", ("tenant_id", "enqueued_at", "id"), 8192)
    other = S.index("other", ("tenant_id", "enqueued_at", "id"), 8192,
                    predicate="(status = 'done'::text)")  # fmt: skip
    keys = ("tenant_id", "enqueued_at", "id")
    assert existing_tenant_index(tenant_jobs(longer, whole, other), QUEUED, keys) is None
    assert existing_tenant_index(tenant_jobs(longer, exact), QUEUED, keys) is exact
    invalid = dataclasses.replace(exact, is_valid=False)
    assert existing_tenant_index(tenant_jobs(invalid), QUEUED, keys) is None


def test_the_rotation_table_is_named_after_the_queue_within_63_bytes() -> None:
    assert rotation_name(tenant_jobs()) == "jobs_tenants"
    long = dataclasses.replace(tenant_jobs(), name="j" * 60)
    assert rotation_name(long) == "j" * 55 + "_tenants"
    assert len(rotation_name(long)) == 63


# --- the whole fix -----------------------------------------------------------------------------

ROTATION = (
    "CREATE TABLE public.jobs_tenants (\n"
    "  tenant_id integer PRIMARY KEY,\n"
    "  last_served timestamptz NOT NULL DEFAULT '-infinity'\n"
    ");"
)
ROTATION_INDEX = "CREATE INDEX jobs_tenants_last_served_idx ON public.jobs_tenants (last_served);"
FILL = (
    "INSERT INTO public.jobs_tenants (tenant_id)\n"
    "SELECT DISTINCT tenant_id FROM public.jobs\n"
    " WHERE status = 'queued' AND tenant_id IS NOT NULL\n"
    "ON CONFLICT DO NOTHING;"
)
TENANT_INDEX = (
    "CREATE INDEX CONCURRENTLY jobs_queued_tenant_id_enqueued_at_id_idx ON public.jobs "
    "(tenant_id, enqueued_at, id) WHERE status = 'queued';"
)
DEQUEUE = """SELECT j.id, qt.tenant_id
FROM public.jobs_tenants qt
CROSS JOIN LATERAL (
  SELECT id FROM public.jobs
  WHERE tenant_id = qt.tenant_id AND status = 'queued'
  ORDER BY enqueued_at, id
  LIMIT 1
  FOR UPDATE SKIP LOCKED
) j
ORDER BY qt.last_served
LIMIT 1;"""


def test_the_fix_creates_and_fills_the_rotation_builds_the_index_and_rewrites_the_claim() -> None:
    fix = round_robin_fix(tenant_jobs(), QUEUED, "tenant_id", order("id"))
    assert fix is not None
    assert [(s.kind, s.sql, s.lock, s.in_transaction_block) for s in fix.steps] == [
        ("migration", ROTATION, "none", True),
        ("migration", ROTATION_INDEX, "SHARE", True),
        ("migration", FILL, "ROW EXCLUSIVE", True),
        ("migration", TENANT_INDEX, "SHARE UPDATE EXCLUSIVE", False),
        ("rewrite", DEQUEUE, "ROW SHARE", True),
    ]
    assert fix.statements == (ROTATION, ROTATION_INDEX, FILL, TENANT_INDEX)
    assert [s.note for s in fix.steps[:3]] == [
        "A new table: it locks nothing anyone else uses.",
        "A plain CREATE INDEX: its SHARE lock is on the new jobs_tenants, still empty.",
        "ROW EXCLUSIVE on jobs_tenants; it reads jobs under ACCESS SHARE, so workers and "
        "enqueues go on.",
    ]
    rewrite = fix.steps[-1]
    assert (rewrite.before, rewrite.source) == (None, None)  # a claim qadvisor did not see
    # The notes say how the application keeps the rotation: served, and each enqueue.
    assert (
        "UPDATE public.jobs_tenants SET last_served = clock_timestamp() WHERE tenant_id = $1"
        in fix.notes
    )
    assert (
        "INSERT INTO public.jobs_tenants (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO "
        "UPDATE SET last_served = jobs_tenants.last_served" in fix.notes
    )


def test_an_existing_tenant_index_is_not_built_again() -> None:
    have = S.index("jobs_by_tenant", ("tenant_id", "enqueued_at", "id"), 8192,
                   predicate="(status = 'queued'::text)")  # fmt: skip
    fix = round_robin_fix(tenant_jobs(have), QUEUED, "tenant_id", order("id"))
    assert fix is not None
    assert fix.statements == (ROTATION, ROTATION_INDEX, FILL)
    assert [s.kind for s in fix.steps] == ["migration"] * 3 + ["rewrite"]


def test_each_claim_seen_gets_its_own_rewrite() -> None:
    seen = [
        Statement("sql/claim.sql:3", "  SELECT id FROM jobs WHERE status = 'queued' FOR UPDATE\n"),
        Statement("--query 1", "SELECT id FROM jobs LIMIT 1 FOR UPDATE SKIP LOCKED"),
    ]
    fix = round_robin_fix(tenant_jobs(), QUEUED, "tenant_id", order("id"), replaces=seen)
    assert fix is not None
    rewrites = fix.of_kind("rewrite")
    assert [(r.sql, r.before, r.source) for r in rewrites] == [
        (DEQUEUE, "SELECT id FROM jobs WHERE status = 'queued' FOR UPDATE", "sql/claim.sql:3"),
        (DEQUEUE, "SELECT id FROM jobs LIMIT 1 FOR UPDATE SKIP LOCKED", "--query 1"),
    ]


def test_names_are_quoted_and_a_table_without_a_primary_key_is_claimed_by_ctid() -> None:
    t = dataclasses.replace(
        tenant_jobs(time_column=None),
        schema="Tenant Jobs",
        columns=(Column("Tenant", "uuid", True), Column("status", "text", True)),
        indexes=(),
    )
    fix = round_robin_fix(t, LivePredicate("status", "not in", ("done",)), "Tenant", ())
    assert fix is not None
    assert fix.steps[0].sql == (
        'CREATE TABLE "Tenant Jobs".jobs_tenants (\n'
        '  "Tenant" uuid PRIMARY KEY,\n'
        "  last_served timestamptz NOT NULL DEFAULT '-infinity'\n"
        ");"
    )
    assert fix.steps[-1].sql == (
        'SELECT j.ctid, qt."Tenant"\n'
        'FROM "Tenant Jobs".jobs_tenants qt\n'
        "CROSS JOIN LATERAL (\n"
        '  SELECT ctid FROM "Tenant Jobs".jobs\n'
        """  WHERE "Tenant" = qt."Tenant" AND status <> 'done'\n"""
        "  LIMIT 1\n"
        "  FOR UPDATE SKIP LOCKED\n"
        ") j\n"
        "ORDER BY qt.last_served\n"
        "LIMIT 1;"
    )  # no order to keep: no ORDER BY in the sub-select
    assert fix.steps[3].sql == (
        'CREATE INDEX CONCURRENTLY jobs_not_done_tenant_idx ON "Tenant Jobs".jobs ("Tenant") '
        "WHERE status <> 'done';"
    )


def test_a_tenant_column_the_table_lacks_is_typed_bigint_and_descending_order_is_kept() -> None:
    t = tenant_jobs()
    fix = round_robin_fix(t, QUEUED, "account_id", (OrderItem("enqueued_at", descending=True),))
    assert fix is not None
    assert "  account_id bigint PRIMARY KEY,\n" in fix.steps[0].sql
    assert "  ORDER BY enqueued_at DESC\n" in fix.steps[-1].sql


def test_no_fix_without_a_live_predicate() -> None:
    assert round_robin_fix(tenant_jobs(), None, "tenant_id", order("id")) is None


def test_a_claim_with_a_bound_status_gets_a_placeholder_not_the_live_value() -> None:
    # The claim says status = $1: its value reached qadvisor only as $1, so the rewrite
    # names where it goes and writes no 'queued' the application's statement does not have.
    # A claim that spells the status keeps its own spelling (an IN list here).
    from qadvisor.sql.dequeue import analyse

    bound = "SELECT id FROM jobs WHERE status = $1 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    listed = bound.replace("= $1", "IN ('queued', 'retry')")
    seen = [Statement("--query 1", bound, analyse(bound)),
            Statement("--query 2", listed, analyse(listed))]  # fmt: skip
    fix = round_robin_fix(tenant_jobs(), QUEUED, "tenant_id", order("id"), replaces=seen)
    assert fix is not None
    first, second = fix.of_kind("rewrite")
    assert "WHERE tenant_id = qt.tenant_id AND status = <value of $1>\n" in first.sql
    assert "'queued'" not in first.sql and "<value of $n>" in first.note
    assert "AND status IN ('queued', 'retry')\n" in second.sql
    # The per-tenant index stays on the live predicate: that is a migration, not the claim.
    assert "WHERE status = 'queued';" in fix.statements[-1]


def test_a_whole_table_live_set_adds_no_condition_and_a_plain_index() -> None:
    every = LivePredicate.every_row("claim --query 1; it has no condition on jobs")
    order = (OrderItem("enqueued_at"),)
    name, sql = tenant_index_sql(tenant_jobs(), every, "tenant_id", order)
    assert sql == (f"CREATE INDEX CONCURRENTLY {name} ON public.jobs (tenant_id, enqueued_at);")
    assert name == "jobs_tenant_id_enqueued_at_idx"
    plain = S.index(name, ("tenant_id", "enqueued_at"), 8192)
    assert existing_tenant_index(tenant_jobs(plain), every, ("tenant_id", "enqueued_at")) == plain
    fix = round_robin_fix(tenant_jobs(plain), every, "tenant_id", order)
    assert fix is not None
    text = "\n".join(s.sql for s in fix.steps)
    assert "TRUE" not in text and "WHERE" in text  # the tenant's own conditions stay
    assert " WHERE tenant_id IS NOT NULL" in text and "WHERE tenant_id = qt.tenant_id\n" in text
    assert "CREATE INDEX CONCURRENTLY" not in text  # the plain index already serves it
