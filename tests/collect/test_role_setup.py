"""``qadvisor role``: the monitoring role's setup for the database at hand, run as printed,
then the checks run as that role: none skips for a grant it lacks. On real servers, the queues
in the application's schema, built and claimed by the application's role."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.checks.test_qa101_archive_bloated_index import CLAIM as ARCHIVE_CLAIM
from tests.checks.test_qa401_round_robin_walks_backlog import RR_BY_ID
from tests.conftest import TestDB
from tests.helpers import build_archive_queue, check, qadvisor
from tests.shapes import APP_MONITOR, APP_SCHEMA, RoleDB, Shape

PSQL = Path("/usr/bin/psql")

pytestmark = pytest.mark.skipif(not PSQL.exists(), reason="psql (/usr/bin/psql) is not installed")


def run_as_printed(db: TestDB, sql: str, tmp_path: Path) -> None:
    script = tmp_path / "role.sql"
    script.write_text(sql)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    ran = subprocess.run(
        [str(PSQL), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(script), db.dsn],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert ran.returncode == 0, (ran.stderr, sql)


def missing_grants(report: dict[str, Any]) -> list[str]:
    """Every skip and hidden fact that a GRANT would have shown."""
    return [s["reason"] for s in report["skipped"] if s["grants"]] + [
        h["reason"] for h in report["hidden"] if h["grants"]
    ]


@pytest.mark.parametrize("shape", [APP_MONITOR], indirect=True)
@pytest.mark.judges("QA101")
def test_the_printed_setup_run_as_printed_lets_every_check_judge(
    shape: Shape, tmp_path: Path
) -> None:
    build_archive_queue(shape.db)
    shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    with shape.db.connect() as conn:
        for _ in range(5):
            conn.execute(ARCHIVE_CLAIM)
    # A second queue, multi-tenant, claimed round-robin through a rotation table, in a schema
    # of its own, its id numbered by an int sequence.
    shape.dba.execute(f"CREATE SCHEMA tenants AUTHORIZATION {shape.owner}")
    tenant_db = RoleDB(shape.db.name, shape.db.server, shape.owner or "postgres")
    _in_schema(tenant_db, "tenants")
    rr = RR_BY_ID.replace("from queue_tenants", "from tenants.queue_tenants").replace(
        "select id from jobs", "select id from tenants.jobs"
    )
    args = ("--query", rr)

    printed = qadvisor("role", shape.dba.dsn, "--role", "qa_watch", *args)
    assert printed.rc == 0, printed.stderr
    sql = printed.stdout
    assert "CREATE ROLE qa_watch LOGIN;" in sql
    assert "GRANT pg_read_all_stats TO qa_watch;" in sql
    assert f"GRANT USAGE ON SCHEMA {APP_SCHEMA} TO qa_watch;" in sql
    assert "GRANT USAGE ON SCHEMA tenants TO qa_watch;" in sql
    assert "GRANT SELECT ON SEQUENCE tenants.jobs_id_seq TO qa_watch;" in sql
    assert "GRANT UPDATE" not in sql
    assert not [ln for ln in sql.splitlines() if ln.startswith("GRANT") and "payload" in ln]
    run_as_printed(shape.dba, sql, tmp_path)
    try:
        watcher = RoleDB(shape.dba.name, shape.dba.server, "qa_watch")
        run = check(watcher, *args, "--fail-on", "never")
        assert {q["table"] for q in run.report["queues"]} == {"jobs"}
        assert {q["schema"] for q in run.report["queues"]} == {APP_SCHEMA, "tenants"}
        assert missing_grants(run.report) == []
        # The DBA's view of the same: what the role does not see is only what grants cannot
        # give (nothing here).
        dba = check(shape.dba, *args, "--fail-on", "never")
        seen = {s["code"] for s in dba.report["skipped"]}
        said = "\n".join(f"{s['code']} {s['reason']}" for s in run.report["skipped"])
        assert {s["code"] for s in run.report["skipped"]} == seen, said
        # Run again, the role exists: it is granted, not created.
        again = qadvisor("role", shape.dba.dsn, "--role", "qa_watch", *args)
        assert again.rc == 0 and "CREATE ROLE" not in again.stdout
    finally:
        shape.dba.execute("DROP OWNED BY qa_watch; DROP ROLE qa_watch")


def _in_schema(db: RoleDB, schema: str) -> None:
    """The round-robin seed's queue (300 jobs of one tenant, 5 of another, 20 tenants in the
    rotation) in ``schema``, its id an int numbered by a sequence."""
    db.execute(
        f"""
        SET search_path = {schema};
        CREATE TABLE jobs (
          id serial PRIMARY KEY,
          tenant_id int NOT NULL,
          status text NOT NULL DEFAULT 'queued',
          enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
          started_at timestamptz,
          finished_at timestamptz,
          payload jsonb NOT NULL DEFAULT '{{}}'
        );
        CREATE INDEX jobs_queued_fifo ON jobs (id) WHERE status = 'queued';
        INSERT INTO jobs (tenant_id) SELECT CASE WHEN g <= 300 THEN 1 ELSE 2 END
          FROM generate_series(1, 305) g;
        CREATE TABLE queue_tenants (
          tenant_id int PRIMARY KEY,
          last_served timestamptz NOT NULL DEFAULT '-infinity'
        );
        INSERT INTO queue_tenants (tenant_id) SELECT g FROM generate_series(1, 20) g;
        ANALYZE jobs;
        ANALYZE queue_tenants;
        """
    )
