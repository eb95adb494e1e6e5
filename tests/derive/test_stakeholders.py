"""Who else needs an index: recorded statements on a queue table and the indexes they read."""

from __future__ import annotations

import dataclasses

from qadvisor.derive.stakeholders import index_use, stakeholder_label
from qadvisor.model import Stakeholder
from tests import snapshots as S

PURGE = Stakeholder(
    "pg_stat_statements", "DELETE FROM jobs\n WHERE status = $1 AND created_at < $2",
    "public.jobs", 7, 1_234, 0.05, 3.0, ("jobs_status_created_at_idx",),
)  # fmt: skip
LISTING = Stakeholder("pg_stat_statements", "SELECT count(*) FROM jobs", "public.jobs", calls=1)
DENIED = Stakeholder(
    "pg_stat_statements", "SELECT * FROM jobs WHERE id = $1", "public.jobs",
    plan_error="not planned: permission denied for table jobs",
)  # fmt: skip
ELSEWHERE = dataclasses.replace(PURGE, queue="app.jobs")


def test_the_statements_of_the_table_are_sorted_by_what_their_plans_read() -> None:
    snap = dataclasses.replace(S.snapshot(S.jobs_table()), stakeholders=(PURGE, LISTING, DENIED,
                                                                         ELSEWHERE))  # fmt: skip
    table = snap.tables[0]
    use = index_use(snap, table, "jobs_status_created_at_idx")
    assert use.checked == (PURGE, LISTING) and use.users == (PURGE,)
    assert use.unknown == (DENIED,) and use.unavailable is None
    other = index_use(snap, table, "jobs_pkey")
    assert other.users == () and other.unknown == (DENIED,)


def test_without_pg_stat_statements_nobody_knows() -> None:
    snap = dataclasses.replace(
        S.snapshot(S.jobs_table()), unavailable={"pg_stat_statements": "not installed"}
    )
    use = index_use(snap, snap.tables[0], "jobs_status_created_at_idx")
    assert use.checked == () and use.unavailable == "not installed"


def test_a_label_is_the_start_of_the_text_and_the_counters() -> None:
    assert stakeholder_label(PURGE) == (
        "DELETE FROM jobs WHERE status = $1 AND created_at < $2 (1,234 calls, 0.05 ms mean)"
    )
    assert stakeholder_label(LISTING) == "SELECT count(*) FROM jobs (1 call)"
    assert stakeholder_label(DENIED, width=10) == "SELECT * F..."
