"""Fixes as typed steps, and index fixes built from a description: the one place that writes
CREATE INDEX CONCURRENTLY, its notes and index names (qadvisor.fixes.builders), and the SQL text
readers of qadvisor.sql.dequeue the fixes and estimates rely on."""

from __future__ import annotations

from dataclasses import replace

import pytest

from qadvisor.fixes.builders import (
    CONCURRENT_BUILD_NOTE,
    IndexFix,
    IndexKey,
    existing_index,
    index_keys,
    live_set_index,
    rewrite,
)
from qadvisor.model import Column, Fix, FixStep, LivePredicate, Statement, Table
from qadvisor.sql.dequeue import (
    OrderItem,
    array_values,
    condition_columns,
    literal_value,
)
from qadvisor.sql.printing import MAX_IDENTIFIER, array_literal
from tests import snapshots as S
from tests.conftest import TestDB

PENDING = LivePredicate("status", "in", ("pending",), "test")


def _table(schema: str = "public", name: str = "jobs", *columns: str) -> Table:
    cols = columns or ("id", "status", "priority", "created_at")
    return replace(S.jobs_table(), schema=schema, name=name,
                   columns=tuple(Column(c, "text") for c in cols))  # fmt: skip


# --- steps ----------------------------------------------------------------------------------


def test_statements_are_the_migration_steps_only() -> None:
    claim = Statement("--query 1", "select id from jobs for update")
    fix = Fix(
        steps=(
            FixStep("migration", "ANALYZE public.jobs;", "SHARE UPDATE EXCLUSIVE", True),
            rewrite(claim, "select id from jobs for update skip locked;"),
            FixStep("review", "SELECT pg_terminate_backend(1);", "none", True),
        )
    )
    assert fix.statements == ("ANALYZE public.jobs;",)
    (step,) = fix.of_kind("rewrite")
    assert (step.before, step.source, step.lock) == (claim.text, "--query 1", "ROW SHARE")


def test_a_fix_of_statements_alone_is_one_migration_step_each_lock_unknown() -> None:
    fix = Fix(("VACUUM public.jobs;",), "notes", "safe")
    assert fix.steps == (FixStep("migration", "VACUUM public.jobs;"),)
    assert (fix.steps[0].lock, fix.steps[0].in_transaction_block) == ("unknown", None)


def test_statements_that_contradict_the_steps_and_a_safe_rewrite_are_refused() -> None:
    step = FixStep("migration", "ANALYZE t;", "SHARE UPDATE EXCLUSIVE", True)
    with pytest.raises(ValueError, match="migration steps"):
        Fix(("VACUUM t;",), steps=(step,))
    with pytest.raises(ValueError, match="cannot be safe"):
        Fix(safety="safe", steps=(FixStep("review", "SELECT 1;", "none", True),))


# --- index fixes ----------------------------------------------------------------------------


def test_keys_keep_direction_and_a_nulls_order_that_is_not_the_default() -> None:
    table = _table()
    items = (
        OrderItem("priority", descending=True),
        OrderItem("created_at", nulls_first=True),
        OrderItem("id", descending=True, nulls_first=True),  # DESC's default: not repeated
        OrderItem("status", nulls_first=False),  # ASC's default
    )
    keys = index_keys(items, table)
    assert keys is not None
    assert [k.sql for k in keys] == [
        "priority DESC",
        "created_at NULLS FIRST",
        "id DESC",
        "status",
    ]
    assert index_keys((OrderItem("lower(name)"),), table) is None  # not a column of the table


def test_quoted_and_mixed_case_identifiers_are_quoted_and_named_in_lower_case() -> None:
    table = _table("Job Queue", "Jobs")
    fix = IndexFix(table, (IndexKey("CreatedAt", descending=True), IndexKey("select")),
                   '"State" = \'ready\'', ("ready",))  # fmt: skip
    assert fix.name == "jobs_ready_createdat_select_idx"
    assert fix.statement == (
        'CREATE INDEX CONCURRENTLY jobs_ready_createdat_select_idx ON "Job Queue"."Jobs" '
        '("CreatedAt" DESC, "select") WHERE "State" = \'ready\';'
    )
    step = fix.step()
    assert (step.kind, step.lock, step.in_transaction_block) == (
        "migration",
        "SHARE UPDATE EXCLUSIVE",
        False,
    )
    assert step.note == CONCURRENT_BUILD_NOTE and "INVALID" in step.note


def test_a_name_at_the_limit_keeps_the_table_and_the_suffix() -> None:
    table = _table("public", "a" * 40)
    keys = (IndexKey("enqueued_at_with_a_long_name"), IndexKey("another_long_column_name"))
    name = IndexFix(table, keys, "status = 'pending'", ("pending",)).name
    assert len(name.encode()) <= MAX_IDENTIFIER
    assert name.startswith("a" * 40 + "_") and name.endswith("_idx")
    exact = _table("public", "t" * (MAX_IDENTIFIER - len("_idx")))
    assert IndexFix(exact, ()).name == "t" * (MAX_IDENTIFIER - 4) + "_idx"


def test_the_live_set_index_is_named_by_the_predicate_whichever_check_builds_it() -> None:
    table = _table()
    keys = (IndexKey("created_at"),)
    assert live_set_index(table, PENDING, keys).name == "jobs_pending_created_at_idx"
    null = LivePredicate("finished_at", "is null", (), "test")
    assert live_set_index(table, null, keys).name == "jobs_finished_at_null_created_at_idx"
    other = LivePredicate("status", "not in", ("done", "failed"), "test")
    fix = live_set_index(table, other, keys)
    assert fix.where == "status NOT IN ('done', 'failed')"
    assert fix.name == "jobs_not_done_not_failed_created_at_idx"


def test_an_existing_index_matches_columns_directions_and_predicate() -> None:
    pending = "(status = 'pending'::text)"
    asc = S.index("jobs_pending_created", ("created_at",), 0, predicate=pending)
    desc = S.index("jobs_pending_created_desc", ("created_at",), 0, predicate=pending,
                   descending=(True,))  # fmt: skip
    whole = S.index("jobs_created", ("created_at", "id"), 0)
    table = S.jobs_table(indexes=(asc, desc, whole))
    assert existing_index(table, [IndexKey("created_at")], PENDING) == asc
    assert existing_index(table, [IndexKey("created_at", True)], PENDING) == desc
    assert existing_index(table, [IndexKey("created_at")], None) == whole  # a prefix
    assert existing_index(table, [IndexKey("created_at")], None, exact=True) is None
    # A NULLS order that is not the default is not collected: never taken as the same.
    assert existing_index(table, [IndexKey("created_at", nulls_first=True)], PENDING) is None


# --- SQL text -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [("queued",), ("a,b", 'say "hi"'), ("back\\slash", "it's"), ("NULL", " padded ")],
    ids=["plain", "comma-quote", "backslash", "null-word"],
)
def test_array_literals_read_back_as_their_values(values: tuple[str, ...]) -> None:
    assert array_values(array_literal(values)) == values


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("'queued'", "queued"),
        ("'it''s'", "it's"),
        ("E'a\\\\b'", "a\\b"),
        ("'queued'::job_status", "queued"),
        ("CAST('queued' AS job_status)", "queued"),
        ("-42", "-42"),
        ("(1.5)", "1.5"),
        ("$1", None),
        ("status", None),
        ("'a' || 'b'", None),
    ],
)
def test_literal_values(text: str, value: str | None) -> None:
    assert literal_value(text) == value


def test_array_values_of_the_forms_the_catalog_and_statements_use() -> None:
    assert array_values("ARRAY['a'::text, 'b'::text]") == ("a", "b")
    assert array_values("'{queued,retry}'::text[]") == ("queued", "retry")
    assert array_values("'{}'") == ()
    assert array_values("'{a,NULL}'") is None  # a NULL item compares with nothing
    assert array_values("'{{a},{b}}'") is None
    assert array_values("'queued'") is None


def test_condition_columns_are_names_not_values_types_or_functions() -> None:
    text = (
        "((tenant_id = qt.tenant_id) AND ((status)::text = 'tenant_id'::job_status) "
        'AND ("Odd Col" IS NULL) AND (lower(name) = CAST(kind AS text)))'
    )
    assert condition_columns(text) == {"tenant_id", "status", "Odd Col", "name", "kind"}


# --- on real servers ------------------------------------------------------------------------


def test_edge_case_index_fixes_build_and_supply_their_order(db: TestDB) -> None:
    db.execute(
        'CREATE SCHEMA "Job Queue";'
        'CREATE TABLE "Job Queue"."Jobs" (id bigint PRIMARY KEY, "State" text NOT NULL, '
        '"CreatedAt" timestamptz, "select" int);'
        'INSERT INTO "Job Queue"."Jobs" SELECT g, CASE WHEN g % 100 = 0 THEN \'ready\' '
        "ELSE 'done' END, now() - g * interval '1 s', g % 7 FROM generate_series(1, 20000) g;"
        'ANALYZE "Job Queue"."Jobs"'
    )
    table = _table("Job Queue", "Jobs", "id", "State", "CreatedAt", "select")
    items = (OrderItem("CreatedAt", nulls_first=True), OrderItem("select"))
    keys = index_keys(items, table)
    assert keys is not None
    fix = IndexFix(table, keys, "\"State\" = 'ready'", ("ready",))
    db.execute(fix.statement)
    (name,) = db.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'Job Queue' AND indexname LIKE '%idx'"
    )[0]
    assert name == fix.name
    plan = "\n".join(
        r[0]
        for r in db.execute(
            'EXPLAIN SELECT id FROM "Job Queue"."Jobs" WHERE "State" = \'ready\' '
            'ORDER BY "CreatedAt" NULLS FIRST, "select" LIMIT 1'
        )
    )
    assert fix.name in plan and "Sort" not in plan, plan
    long = IndexFix(table, (IndexKey("CreatedAt"),), None, ("x" * 80,))
    db.execute(long.statement)
    names = {r[0] for r in db.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'Jobs'")}
    assert long.name in names and len(long.name) <= MAX_IDENTIFIER  # not truncated by the server


def test_array_literals_are_read_by_the_server_as_their_values(db: TestDB) -> None:
    # Backslashes and double quotes inside a quoted array item are escaped with a backslash;
    # unescaped, 'a\b' would come back as 'ab' (PostgreSQL's array input syntax).
    values = ["queued", "a,b", 'say "hi"', "back\\slash", "it's", "NULL", " padded "]
    ((got,),) = db.execute(f"SELECT {array_literal(values)}::text[]")
    assert got == values
