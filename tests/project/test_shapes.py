"""The GRANTs the production-shaped tests give their monitoring role (tests/shapes.py) are the
ones docs/privileges.md names: both come from qadvisor.facts and the checks' ``requires``."""

from __future__ import annotations

import re
from pathlib import Path

from qadvisor.registry import load_checks
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
        "GRANT UPDATE ON app.jobs TO m;",
    ]


def test_the_monitoring_role_of_the_docs_is_what_every_check_needs() -> None:
    # docs/privileges.md, "A monitoring role": the GRANTs for a round-robin queue, with a
    # table's SELECT standing for the column SELECTs on it.
    section = PRIVILEGES.read_text().split("## A monitoring role", 1)[1]
    documented = [
        line.split("--")[0].strip() for line in section.splitlines() if line.startswith("GRANT")
    ]
    every = facts_of([c.code for c in load_checks()])
    generated = documented_grants(every, "monitor", "app", TENANT_QUEUE, ["jobs", "queue_tenants"])
    whole = {m.group(1) for g in generated if (m := re.match(r"GRANT SELECT ON (\S+) TO", g))}
    folded = [
        g
        for g in generated
        if not (m := re.match(r"GRANT SELECT \(.*\) ON (\S+) TO", g)) or m.group(1) not in whole
    ]
    assert sorted(documented) == sorted(folded)
