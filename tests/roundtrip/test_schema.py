"""How the round trip derives the tables a statement needs, without a server."""

from __future__ import annotations

from tests.roundtrip import run
from tests.roundtrip.run import Case, TableSpec, as_written
from tests.roundtrip.schema import function, reads, registry, type_from_name


def test_what_a_statement_reads_and_the_types_it_shows() -> None:
    r = reads(
        "WITH n AS (SELECT j.id FROM jobs j JOIN tenants t ON t.id = j.tenant_id "
        "WHERE j.status IN ('a', 'b') AND NOT j.done AND t.active AND run_at < now() - "
        "interval '1 minute' ORDER BY priority LIMIT 1 FOR UPDATE OF j SKIP LOCKED) "
        "UPDATE jobs SET locked_by = $1, attempts = attempts + 1 FROM n WHERE jobs.id = n.id"
    )
    assert r is not None
    assert r.tables == [(None, "jobs"), (None, "tenants")]  # OF j and n are no tables
    jobs, tenants = r.columns[(None, "jobs")], r.columns[(None, "tenants")]
    assert jobs["status"] == "text" and jobs["done"] == "boolean"
    assert jobs["run_at"] == "timestamptz" and jobs["attempts"] == "integer"
    assert jobs["locked_by"] is None  # SET to a parameter: its name decides
    assert tenants == {"id": None, "active": "boolean"}
    assert reads("SELECT FROM WHERE") is None


def test_a_functions_variables_are_no_columns() -> None:
    fn = function(
        "CREATE FUNCTION app.take(q text) RETURNS bigint LANGUAGE plpgsql AS $$ "
        "DECLARE r bigint; BEGIN SELECT id INTO r FROM jobs WHERE queue = q "
        "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED; RETURN r; END $$"
    )
    assert fn is not None and (fn.schema, fn.name, fn.language) == ("app", "take", "plpgsql")
    assert {"q", "r"} <= fn.variables
    found = [reads(q, fn.variables) for q in fn.statements]
    columns = next(r.columns[(None, "jobs")] for r in found if r is not None and r.tables)
    assert set(columns) == {"id", "queue"}


def test_names_suggest_types_where_nothing_else_does() -> None:
    assert [type_from_name(c) for c in ("id", "tenant_id", "run_at", "attempts", "kind")] == [
        "bigint",
        "bigint",
        "timestamptz",
        "integer",
        "text",
    ]


def test_a_typed_literal_pg_stat_statements_wrote_as_a_parameter_gets_a_literal_back() -> None:
    assert as_written("WHERE heartbeat < NOW() - INTERVAL $3 AND d = date $4") == (
        "WHERE heartbeat < NOW() - INTERVAL '5 minutes' AND d = date '2024-01-01'"
    )
    assert as_written("WHERE x = $1::interval") == "WHERE x = $1::interval"


def test_a_table_named_with_its_schema_has_one_shape_per_database() -> None:
    def case(number: int, status: str, fn: bool = False) -> Case:
        c = Case(number, f"t.py:{number}", "SELECT 1")
        c.tables = [TableSpec("app", "jobs", {"id": "bigint", "status": status}, (), "derived")]
        if fn:
            c.fn = function("CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'")
        return c

    groups = run.batches(
        [case(1, "text"), case(2, "text"), case(3, "job_state"), case(4, "text", True)]
    )
    assert [[c.number for c in g] for g in groups] == [[1, 2], [3], [4]]


def test_the_suite_defines_most_tables_its_statements_name() -> None:
    cases = run.harvest()
    assert len([c for c in cases if c.fn is None]) >= 200
    assert len([c for c in cases if c.fn is not None]) >= 8
    tables = [t for c in cases for t in c.tables]
    defined = [t for t in tables if t.where != "derived"]
    assert len(defined) >= 0.8 * len(tables), sorted(
        {t.name for t in tables} - {t.name for t in defined}
    )
    assert "job_state" in registry().types
