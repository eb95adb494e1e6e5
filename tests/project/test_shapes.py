"""The GRANTs the production-shaped tests give their monitoring role (tests/shapes.py) are the
ones docs/privileges.md names: both come from qadvisor.facts and the checks' ``requires``."""

from __future__ import annotations

from pathlib import Path

from tests.checks.test_qa401_round_robin_walks_backlog import RR_BY_ID
from tests.shapes import documented_grants, facts_of, tables_read

PRIVILEGES = Path(__file__).resolve().parents[2] / "docs" / "privileges.md"
TENANT_QUEUE = ["id", "tenant_id", "status", "enqueued_at", "started_at", "finished_at"]


def test_grants_are_filled_in_from_the_facts_of_the_judged_checks() -> None:
    none = facts_of(["QA102", "QA203", "QA501"])
    assert documented_grants(none, "m", "app", TENANT_QUEUE, []) == []
    assert documented_grants(facts_of(["QA101"]), "m", "app", TENANT_QUEUE, []) == [
        "GRANT SELECT (status) ON app.jobs TO m;"
    ]
    # The tenant probes read the tenant, the live column and a job's start and finish.
    no_durations = ["id", "tenant_id", "status"]
    assert documented_grants(facts_of(["QA403"]), "m", "app", no_durations, []) == [
        "GRANT USAGE ON SCHEMA app TO m;",
        "GRANT SELECT (tenant_id, status) ON app.jobs TO m;",
    ]
    # Planning reads every table the statement reads; the rotation table is one of them.
    reads = tables_read(["--query", RR_BY_ID, "--analyze"])
    assert reads == ["queue_tenants", "jobs"]
    assert documented_grants(facts_of(["QA401"]), "m", "app", TENANT_QUEUE, reads) == [
        "GRANT USAGE ON SCHEMA app TO m;",
        "GRANT SELECT ON app.jobs TO m;",
        "GRANT SELECT ON app.queue_tenants TO m;",
    ]  # UPDATE only for a claim that locks its rows in no SELECT: the smallest role lacks it


def test_the_smallest_role_of_the_docs_grants_no_update_and_no_payload() -> None:
    # tests/collect/test_smallest_role.py runs the block on a real server: no check skips.
    section = PRIVILEGES.read_text().split("## The smallest role", 1)[1].split("```")[1]
    assert "UPDATE" not in section and "payload" not in section
    assert "GRANT SELECT ON app.jobs" not in section  # columns, not the table
