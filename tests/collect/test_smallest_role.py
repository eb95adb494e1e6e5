"""The smallest role docs/privileges.md names, run as printed there, judges a queue with no
skip: every fact every check reads is visible to it, without UPDATE on the queue table and
without SELECT on the job's payload (PostgreSQL 18 and 15)."""

from __future__ import annotations

import re

import psycopg
import pytest

from qadvisor.docgen.pages import privileges_page
from qadvisor.registry import load_checks
from tests.conftest import TestDB
from tests.helpers import check
from tests.shapes import RoleDB

pytestmark = pytest.mark.server

SCHEMA = """
CREATE SCHEMA app;
CREATE TABLE app.jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id   integer     NOT NULL,
    status      text        NOT NULL DEFAULT 'queued',
    payload     jsonb       NOT NULL DEFAULT '{"secret": "s"}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz
);
CREATE TABLE app.queue_tenants (tenant_id integer PRIMARY KEY, last_served timestamptz);
INSERT INTO app.jobs (tenant_id, status, created_at, started_at, finished_at)
SELECT g % 7, 'done', now() - interval '2 days' + g * interval '1 second',
       now() - interval '2 days' + g * interval '1 second',
       now() - interval '2 days' + g * interval '2 second'
  FROM generate_series(1, 20000) AS g;
INSERT INTO app.jobs (tenant_id, created_at)
SELECT g % 7, now() + g * interval '1 millisecond' FROM generate_series(1, 300) AS g;
INSERT INTO app.queue_tenants SELECT g, now() FROM generate_series(0, 6) AS g;
CREATE INDEX jobs_queued ON app.jobs (created_at) WHERE status = 'queued';
"""

CLAIMS = (
    "SELECT * FROM app.jobs WHERE status = $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED",
    "UPDATE app.jobs SET status = 'running', started_at = now() WHERE id = (SELECT id "
    "FROM app.jobs WHERE status = $1 ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) "
    "RETURNING *",
)


def smallest_role_sql(role: str) -> str:
    """The SQL block under "The smallest role" of the generated page, for ``role``."""
    page = privileges_page(load_checks())
    section = page.split("## The smallest role", 1)[1]
    block = re.search(r"```sql\n(.*?)```", section, re.S)
    assert block is not None
    return re.sub(r"\bmonitor\b", role, block.group(1))


def test_the_smallest_role_judges_a_queue_with_no_skip(db: TestDB) -> None:
    db.execute(SCHEMA)
    db.execute("VACUUM (ANALYZE) app.jobs, app.queue_tenants")
    role = f"{db.name}_monitor"
    db.execute(smallest_role_sql(role))
    try:
        # The application's claims, with bound values, as pg_stat_statements records them.
        db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        db.execute("SELECT pg_stat_statements_reset()")
        with psycopg.connect(db.dsn, autocommit=True) as app:
            for _ in range(3):
                with app.transaction(force_rollback=True):
                    app.execute(CLAIMS[0].replace("$1", "%s").replace("$2", "%s"), ["queued", 1])
                    app.execute(CLAIMS[1].replace("$1", "%s"), ["queued"])
        monitor = RoleDB(db.name, db.server, role)
        # What the role may not do, and the server refuses: the claim as written, the payload.
        for sql in (f"EXPLAIN {CLAIMS[1]}", "SELECT payload FROM app.jobs LIMIT 1"):
            with (
                psycopg.connect(monitor.dsn, autocommit=True) as conn,
                pytest.raises(psycopg.errors.InsufficientPrivilege),
            ):
                conn.execute(sql.replace("$1", "'queued'").replace("$2", "1"))

        run = check(monitor)
        report = run.report
        queues = [f"{q['schema']}.{q['table']}" for q in report["queues"]]
        assert queues == ["app.jobs"], report["queues"]
        assert report["skipped"] == [] and report["hidden"] == [], (
            report["skipped"],
            report["hidden"],
        )
        # Both claims were judged on plans of their locking level without its row locks.
        statements = [f for f in report["findings"] if "statement" in f.get("evidence", {})]
        for finding in statements:
            assert "without its row locks" in finding["evidence"]["planned_as"], finding
    finally:
        db.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")
