"""--table names resolved as PostgreSQL resolves them, by catalog reads, on real servers: a role
with pg_monitor and no USAGE on the schema can name ``app.jobs``; case folding, quoting,
qadvisor's own search_path, and one clear line for a name that is missing or ambiguous."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.collect.errors import TableNotFound
from qadvisor.collect.table_names import find_table, resolve_tables
from tests.conftest import TestDB
from tests.helpers import qadvisor


@pytest.fixture
def monitor(db: TestDB) -> Iterator[str]:
    """A pg_monitor role without USAGE on the schemas below; its DSN."""
    role = f"{db.name}_names"
    db.execute(
        f"""
        CREATE ROLE {role} LOGIN IN ROLE pg_monitor;
        CREATE SCHEMA app;
        CREATE SCHEMA "Tenant 42";
        CREATE TABLE app.jobs (id int PRIMARY KEY, status text);
        CREATE TABLE "Tenant 42".jobs (id int);
        CREATE TABLE "Tenant 42"."Mixed" (id int);
        CREATE VIEW app.jobs_view AS SELECT * FROM app.jobs;
        CREATE TABLE public.events (id int);
        """
    )
    yield db.server.dsn(db.name, user=role)
    db.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


def _resolve(dsn: str, *names: str) -> list[tuple[str, str]]:
    with connect(dsn, SessionLimits()) as conn:
        return [(t.schema, t.table) for t in resolve_tables(conn, names)]


def _refused(dsn: str, name: str) -> str:
    with connect(dsn, SessionLimits()) as conn, pytest.raises(TableNotFound) as err:
        resolve_tables(conn, [name])
    return str(err.value)


def test_names_resolve_without_usage_on_the_schema(db: TestDB, monitor: str) -> None:
    with connect(monitor, SessionLimits()) as conn:
        usage = conn.execute(
            "SELECT has_schema_privilege(oid, 'USAGE') FROM pg_namespace WHERE nspname = 'app'"
        ).fetchone()
    assert usage == (False,)
    assert _resolve(monitor, "app.jobs", "APP.JOBS", '"Tenant 42".jobs', '"Tenant 42"."Mixed"') == [
        ("app", "jobs"),
        ("Tenant 42", "jobs"),
        ("Tenant 42", "Mixed"),
    ]  # the same table named twice is taken once
    assert _resolve(monitor, f"{db.name}.app.jobs", "events") == [
        ("app", "jobs"),
        ("public", "events"),
    ]


def test_a_name_that_is_not_one_table_is_one_clear_line(db: TestDB, monitor: str) -> None:
    assert _refused(monitor, "app.nope") == "table app.nope does not exist"
    assert _refused(monitor, "nope.jobs") == "table nope.jobs does not exist (no such schema)"
    # Unqualified: looked up along qadvisor's own search_path only, as PostgreSQL does.
    ambiguous = _refused(monitor, "jobs")
    assert ambiguous.startswith("table jobs is not on the search_path (pg_catalog, public)")
    assert 'ambiguous, 2 schemas have such a table ("Tenant 42".jobs, app.jobs)' in ambiguous
    assert _refused(monitor, "Mixed").endswith("nor in any other schema")  # folds to mixed
    assert _refused(monitor, '"Mixed"').endswith('it exists as "Tenant 42"."Mixed": name it '
                                                 "with its schema")  # fmt: skip
    assert _refused(monitor, "app.jobs_view") == "app.jobs_view is not a table (it is a view)"
    assert _refused(monitor, "app.jobs_pkey") == "app.jobs_pkey is not a table (it is an index)"
    assert _refused(monitor, "other.app.jobs") == (
        f"other.app.jobs names database other, but qadvisor is connected to {db.name}"
    )
    assert "too many dotted names" in _refused(monitor, "a.b.c.d")
    assert _refused(monitor, "app..jobs").startswith("--table: string is not a valid identifier")


def test_the_cli_takes_the_name_and_refuses_a_missing_one_in_one_line(
    db: TestDB, monitor: str
) -> None:
    run = qadvisor("check", monitor, "--table", "app.jobs", "--format", "json")
    assert run.rc in (0, 1), run.stderr
    assert [(q["schema"], q["table"]) for q in run.report["queues"]] == [("app", "jobs")]
    run = qadvisor("check", monitor, "--table", "jobs")
    assert run.rc == 2 and len(run.stderr.strip().splitlines()) == 1
    assert "qadvisor: error: table jobs is not on the search_path" in run.stderr


def test_a_statement_s_table_is_found_the_same_way(db: TestDB, monitor: str) -> None:
    with connect(monitor, SessionLimits()) as conn:
        found = find_table(conn, "Tenant 42", "Mixed")
        assert found is not None and (found.schema, found.table) == ("Tenant 42", "Mixed")
        assert find_table(conn, None, "events") is not None
        assert find_table(conn, None, "jobs") is None  # not on the search_path
        assert find_table(conn, "app", "jobs_view") is None
