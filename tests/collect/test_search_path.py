"""Statements resolved the way the application's session resolved them (real servers).

The queue lives in its own schema and the workers' role has a search_path, so
pg_stat_statements holds ``... FROM jobs ...`` unqualified. Each seed state is built twice,
in ``public`` and in ``app``, and must give the same findings with the same severity.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.checks.test_qa401_round_robin_walks_backlog import (
    FIFO,
    RR_BY_ID,
    build_tenant_queue,
    build_trap,
)
from tests.checks.test_qa403_fifo_noisy_neighbour import EXAMPLE_JOBS
from tests.collect.test_statements_collect import SELECT_CLAIM, build_claim_queue
from tests.conftest import TestDB, flush_stats
from tests.helpers import build_archive_queue, check

SCHEMAS = ["public", "app"]


@contextlib.contextmanager
def building_in(db: TestDB, schema: str) -> Iterator[None]:
    """Objects the builders create land in ``schema`` (their sessions' search_path)."""
    db.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA public")
    db.execute(f"ALTER DATABASE {db.name} SET search_path = {schema}, public")
    try:
        yield
    finally:
        db.execute(f"ALTER DATABASE {db.name} RESET search_path")


@pytest.fixture
def worker(db: TestDB) -> Iterator[str]:
    """An application role whose search_path is set on the role in this database only."""
    role = f"worker_{db.name}"
    db.execute(f"CREATE ROLE {role} LOGIN")
    yield role
    db.execute(f"DROP OWNED BY {role}")
    db.execute(f"DROP ROLE {role}")


def grant_app(db: TestDB, role: str, schema: str) -> None:
    db.execute(
        f"""
        GRANT USAGE ON SCHEMA {schema} TO {role};
        GRANT SELECT, UPDATE ON ALL TABLES IN SCHEMA {schema} TO {role};
        ALTER ROLE {role} IN DATABASE {db.name} SET search_path = {schema}, public;
        """
    )


def run_as(
    db: TestDB, role: str, sql: str, params: list[Any] | None = None, times: int = 3
) -> None:
    """The application's own session: the role's settings apply, names are unqualified."""
    with psycopg.connect(db.server.dsn(db.name, user=role), autocommit=True) as conn:
        for _ in range(times):
            with conn.transaction():
                conn.execute(sql, params)
        flush_stats(conn)


def by_code(run: Any) -> dict[str, list[tuple[str, str | None]]]:
    out: dict[str, list[tuple[str, str | None]]] = {}
    for f in run.report["findings"]:
        out.setdefault(f["code"], []).append((f["severity"], f["target"]["schema"]))
    return out


@pytest.mark.parametrize("schema", SCHEMAS)
def test_forced_generic_plans_on_a_queue_in_its_own_schema(
    db: TestDB, worker: str, schema: str
) -> None:
    with building_in(db, schema):
        build_claim_queue(db)
    grant_app(db, worker, schema)
    db.execute(f"ALTER DATABASE {db.name} SET plan_cache_mode = force_generic_plan")
    run_as(db, worker, SELECT_CLAIM, ["queued"])
    run = check(db)
    assert run.rc == 1, run.report["skipped"]
    (f,) = run.findings("QA301")
    assert f["severity"] == "critical" and f["target"]["schema"] == schema
    assert f["key"].startswith(f"QA301:{schema}.jobs@")
    ev = f["evidence"]
    assert ev["planned_with_search_path"] == f'"pg_catalog", "{schema}", "public"'
    assert not [s for s in run.report["skipped"] if "not resolved" in s["reason"]]
    (q,) = run.report["queues"]
    assert (q["schema"], q["table"]) == (schema, "jobs")


@pytest.mark.parametrize("schema", SCHEMAS)
def test_archive_index_and_vacuum_trigger_in_its_own_schema(
    db: TestDB, worker: str, schema: str
) -> None:
    with building_in(db, schema):
        build_archive_queue(db)
    grant_app(db, worker, schema)
    claim = (
        "SELECT id FROM jobs WHERE status = %s ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    run_as(db, worker, claim, ["pending"])
    got = by_code(check(db))
    assert got["QA101"] == [("warning", schema)]
    assert got["QA201"] == [("warning", schema)]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_round_robin_trap_with_idle_tenants_in_its_own_schema(
    db: TestDB, worker: str, schema: str
) -> None:
    with building_in(db, schema):
        # The application ran its dequeue while the queue was empty, then the backlog came.
        build_tenant_queue(db, {}, rotation=0)
    grant_app(db, worker, schema)
    run_as(db, worker, RR_BY_ID, times=1)
    with building_in(db, schema):
        db.execute("DROP TABLE jobs, queue_tenants")
        build_trap(db)
    run = check(db)
    got = by_code(run)
    assert {"QA401", "QA402"} <= set(got), run.report["skipped"]
    assert got["QA401"] == [("warning", schema)] and got["QA402"] == [("warning", schema)]
    (f,) = run.findings("QA402")
    assert f["evidence"]["rotation_table"] == f"{schema}.queue_tenants"


@pytest.mark.parametrize("schema", SCHEMAS)
def test_fifo_noisy_neighbour_in_its_own_schema(db: TestDB, worker: str, schema: str) -> None:
    with building_in(db, schema):
        build_tenant_queue(db, EXAMPLE_JOBS, tenant_index=None)
    grant_app(db, worker, schema)
    run_as(db, worker, FIFO, times=1)
    assert by_code(check(db))["QA403"] == [("warning", schema)]


def test_one_table_name_in_two_schemas_is_judged_in_each(db: TestDB, worker: str) -> None:
    # Schema per tenant: the driver sets search_path per session, the role has none.
    for schema in ("tenant_a", "tenant_b"):
        with building_in(db, schema):
            build_claim_queue(db)
        db.execute(f"GRANT USAGE ON SCHEMA {schema} TO {worker}")
        db.execute(f"GRANT SELECT, UPDATE ON ALL TABLES IN SCHEMA {schema} TO {worker}")
    # tenant_b's live-set index is gone: its claims sort the backlog.
    db.execute("DROP INDEX tenant_b.jobs_queued_created_at_idx")
    db.execute(
        f"ALTER ROLE {worker} IN DATABASE {db.name} SET plan_cache_mode = force_generic_plan"
    )
    with psycopg.connect(db.server.dsn(db.name, user=worker), autocommit=True) as conn:
        for schema in ("tenant_a", "tenant_b"):
            conn.execute(f"SET search_path = {schema}")
            with conn.transaction():
                conn.execute(SELECT_CLAIM, ["queued"])
        flush_stats(conn)
    run = check(db)
    got = by_code(run)
    assert got["QA301"] == [("critical", "tenant_a")], run.report["findings"]
    assert ("warning", "tenant_b") in got["QA303"]
    keys = {f["key"] for f in run.report["findings"]}
    assert len(keys) == len(run.report["findings"])  # one finding per key


def test_a_statement_whose_names_resolve_nowhere_is_a_skip_that_says_what_was_tried(
    db: TestDB, worker: str
) -> None:
    with building_in(db, "app"):
        build_claim_queue(db)
    grant_app(db, worker, "app")
    run_as(db, worker, SELECT_CLAIM, ["queued"], times=1)
    db.execute("ALTER TABLE app.jobs RENAME TO jobs_old")
    run = check(db)
    reasons = [s["reason"] for s in run.report["skipped"] if "not resolved" in s["reason"]]
    assert reasons, run.report["skipped"]
    assert "relation jobs not found under the search_path 'app, public'" in reasons[0]
    assert f"ALTER ROLE {worker} IN DATABASE {db.name}" in reasons[0]
