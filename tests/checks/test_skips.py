"""A queue a check could not judge is a skip naming that queue, never a silent all-clear.

Hand-built snapshots in which one fact a check needs is missing: each check must leave a skip
for the queue (or for the whole snapshot), so that `tests.helpers.assert_quiet` cannot pass.
"""

from __future__ import annotations

import dataclasses

import pytest

from qadvisor.model import Snapshot, Statement
from qadvisor.registry import load_checks
from qadvisor.sql.dequeue import analyse
from tests import snapshots as S
from tests.helpers import assert_quiet

CLAIM = "SELECT id FROM jobs WHERE status = $1 ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
ALL_CODES = [c.code for c in load_checks()]
# QA202 judges the database's xmin horizon and QA501-QA503 the statement's text: neither needs
# a fact of the queue table.
TABLE_CODES = [c for c in ALL_CODES if c not in ("QA202", "QA501", "QA502", "QA503")]
STATEMENT_CODES = ["QA301", "QA302", "QA303", "QA401", "QA501", "QA502", "QA503"]


def _not_judged(code: str, snap: Snapshot, queue: str = "public.jobs") -> None:
    report = S.report(code, snap)
    with pytest.raises(AssertionError, match="did not judge"):
        assert_quiet(report, code, queue)


def _with_claim(snap: Snapshot, **stmt: object) -> Snapshot:
    statement = Statement("--query 1", CLAIM, analyse(CLAIM), **stmt)  # type: ignore[arg-type]
    return dataclasses.replace(snap, statements=(statement,))


@pytest.mark.parametrize("code", TABLE_CODES)
def test_a_queue_without_table_facts_is_not_judged(code: str) -> None:
    # Discovery named the queue, but its table's facts are missing (dropped in between).
    snap = dataclasses.replace(_with_claim(S.snapshot(S.jobs_table())), tables=())
    _not_judged(code, snap)


@pytest.mark.parametrize("code", STATEMENT_CODES)
def test_a_queue_whose_claim_is_unknown_is_not_judged(code: str) -> None:
    snap = S.snapshot(S.jobs_table())
    _not_judged(code, snap)  # no statement at all
    missing = dataclasses.replace(
        snap, unavailable={"pg_stat_statements": "pg_stat_statements is not installed"}
    )
    _not_judged(code, missing)
    # A statement of another queue only: this one's claim is still unknown.
    other = "SELECT id FROM mail WHERE sent_at IS NULL LIMIT 1 FOR UPDATE SKIP LOCKED"
    mail = dataclasses.replace(S.jobs_table(), name="mail")
    two = dataclasses.replace(
        S.snapshot(S.jobs_table(), mail),
        statements=(Statement("--query 1", other, analyse(other)),),
    )
    _not_judged(code, two)


@pytest.mark.parametrize("code", ["QA301", "QA302", "QA303"])
def test_a_statement_without_its_plans_is_not_judged(code: str) -> None:
    _not_judged(code, _with_claim(S.snapshot(S.jobs_table())))


def test_a_tenant_queue_without_a_known_claim_has_no_known_rotation() -> None:
    from qadvisor.model import TenantFacts

    facts = TenantFacts("public", "jobs", "tenant_id")
    snap = dataclasses.replace(S.snapshot(S.jobs_table()), tenants=(facts,))
    _not_judged("QA402", snap)
