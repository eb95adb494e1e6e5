"""Every fix the built-in checks print on a real server, step by step: each migration step
runs as printed, one statement per call, and each rewrite plans in place of the statement it
replaces. One pathology per check (the ones their own tests build, small), and a walk of the
registry so that a new check without one fails here."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qadvisor.registry import load_checks
from tests.checks.test_qa102_dead_entry_bloated_partial_index import churn_partial_index
from tests.checks.test_qa302_predicate_does_not_imply_index import _claim
from tests.checks.test_qa304_claim_filter_not_in_index import SMALL_CLAIM, build_skewed_queue
from tests.checks.test_qa305_maintenance_scans_queue import CLAIM as REAPER_CLAIM
from tests.checks.test_qa305_maintenance_scans_queue import (
    build_reaper_queue,
    reaper_file,
    run_the_application,
)
from tests.checks.test_qa401_round_robin_walks_backlog import (
    FIFO,
    RR_BY_ID,
    build_tenant_queue,
    build_trap,
)
from tests.checks.test_qa403_fifo_noisy_neighbour import EXAMPLE_JOBS
from tests.checks.test_qa501_lock_without_skip_locked import CTE_CLAIM
from tests.checks.test_qa502_tenant_row_lock import JOIN
from tests.checks.test_qa503_window_with_for_update import PER_TENANT_WINDOW, RANKED
from tests.collect.test_statements_collect import CLAIM, build_claim_queue
from tests.conftest import TestDB
from tests.helpers import Run, build_archive_queue, check, plan_rewrites


@dataclass(frozen=True)
class Pathology:
    codes: frozenset[str]  # the checks whose fixes it shows (others may fire too)
    build: Callable[[TestDB], Run]
    # What the application sends for the parameters a rewrite leaves to it (<value of $n>).
    values: Mapping[int, str] = field(default_factory=dict)


def _archive(db: TestDB) -> Run:
    build_archive_queue(db)
    db.execute("UPDATE jobs SET finished_at = now() WHERE id <= 20000")
    db.wait_for_stats("jobs", lambda r: r["n_dead_tup"] >= 20_000)
    return check(db)


def _autovacuum_off(db: TestDB) -> Run:
    build_archive_queue(db, archive=10_000, reloptions="autovacuum_enabled = false")
    return check(db)


def _bloated_partial(db: TestDB) -> Run:
    build_archive_queue(db, archive=50_000, composite=False, partial=True,
                        reloptions="autovacuum_enabled = false")  # fmt: skip
    churn_partial_index(db, rounds=40, batch=5_000)
    db.execute("ANALYZE jobs")
    return check(db)


def _invalid_index(db: TestDB) -> Run:
    build_archive_queue(db, archive=10_000)
    db.execute(
        "UPDATE jobs SET created_at = (SELECT created_at FROM jobs WHERE id = 1) WHERE id = 2"
    )
    with contextlib.suppress(psycopg.errors.UniqueViolation):
        db.execute("CREATE UNIQUE INDEX CONCURRENTLY jobs_created_at_key ON jobs (created_at)")
    return check(db)


def _generic_plan(db: TestDB) -> Run:
    build_claim_queue(db)
    db.execute(f"ALTER DATABASE {db.name} SET plan_cache_mode = force_generic_plan")
    return check(db, "--query", CLAIM)


def _wider_predicate(db: TestDB) -> Run:
    build_claim_queue(db)
    return check(db, "--query", _claim("status IN ('queued', 'retry')"))


def _sort(db: TestDB) -> Run:
    build_claim_queue(db)
    return check(
        db,
        "--query",
        "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs "
        "WHERE status = 'queued' ORDER BY tenant_id, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
        "RETURNING id",
    )


def _round_robin_walk(db: TestDB) -> Run:
    build_trap(db)
    return check(db, "--query", RR_BY_ID)


def _fifo(db: TestDB) -> Run:
    build_tenant_queue(db, EXAMPLE_JOBS, tenant_index=None)
    return check(db, "--query", FIFO)


def _locks(db: TestDB) -> Run:
    build_tenant_queue(db, {1: 50, 2: 50}, rotation=2)
    db.execute(
        "CREATE TABLE tenants (id int PRIMARY KEY, active bool NOT NULL DEFAULT true);"
        "INSERT INTO tenants (id) VALUES (1), (2)"
    )
    return check(
        db,
        "--query", FIFO.replace("for update skip locked", "for update nowait"),
        "--query", CTE_CLAIM,
        "--query", JOIN.format(lock="for update"),
    )  # fmt: skip


def _filtered_claim(db: TestDB) -> Run:
    build_skewed_queue(db)
    return check(db, "--query", SMALL_CLAIM, "--analyze")


def _reaper(db: TestDB) -> Run:
    build_reaper_queue(db)
    run_the_application(db, db)
    with tempfile.TemporaryDirectory() as tmp:
        # The claim as the application wrote it: pg_stat_statements' $n leaves QA301 a
        # rewrite whose values this test does not plan.
        return check(db, "--query-file", reaper_file(Path(tmp)), "--query", REAPER_CLAIM)


def _windows(db: TestDB) -> Run:
    build_tenant_queue(db, {1: 100, 2: 5, 3: 5})
    return check(db, "--query", RANKED, "--query", PER_TENANT_WINDOW)


PATHOLOGIES = {
    "archive": Pathology(frozenset({"QA101", "QA201"}), _archive),
    "autovacuum-off": Pathology(frozenset({"QA203"}), _autovacuum_off),
    "bloated-partial": Pathology(frozenset({"QA102"}), _bloated_partial),
    "invalid-index": Pathology(frozenset({"QA103"}), _invalid_index),
    "generic-plan": Pathology(frozenset({"QA301"}), _generic_plan, {1: "'queued'"}),
    "wider-predicate": Pathology(frozenset({"QA302", "QA303"}), _wider_predicate),
    "sort": Pathology(frozenset({"QA303"}), _sort),
    "round-robin-walk": Pathology(frozenset({"QA401", "QA402"}), _round_robin_walk),
    "fifo": Pathology(frozenset({"QA403"}), _fifo),
    "locks": Pathology(frozenset({"QA501", "QA502"}), _locks),
    "windows": Pathology(frozenset({"QA503"}), _windows),
    "reaper": Pathology(frozenset({"QA305"}), _reaper),
    "filtered-claim": Pathology(frozenset({"QA304"}), _filtered_claim),
}
# Checks whose fixes are review steps only (nothing here runs them: they end a session or
# delete rows once the application is changed), each run by its own test.
REVIEW_ONLY = {
    "QA202": "tests/checks/test_qa202_vacuum_horizon_held.py terminates and rolls back as printed",
    "QA402": "tests/checks/test_qa402_idle_tenants_in_rotation.py runs the prune as printed",
    "QA204": "tests/checks/test_qa204_archive_without_retention.py runs the batched DELETE "
    "as printed",
    "QA205": "tests/checks/test_qa205_claim_updates_never_hot.py drops the index as printed "
    "and sees the heartbeats go HOT",
    "QA206": "tests/checks/test_qa206_queue_id_runway.py runs the bigint migration as printed",
}


def test_every_check_has_its_fixes_walked() -> None:
    walked = set().union(*(p.codes for p in PATHOLOGIES.values()))
    codes = {c.code for c in load_checks()}
    assert codes - walked - set(REVIEW_ONLY) == set(), "a check whose fixes nothing here runs"
    assert walked | set(REVIEW_ONLY) <= codes


def _check_shape(fix: dict[str, Any]) -> None:
    migrations = [s["sql"] for s in fix["steps"] if s["kind"] == "migration"]
    assert fix["statements"] == migrations  # statements are the migrations, nothing else
    for step in fix["steps"]:
        assert step["kind"] in ("migration", "rewrite", "review")
        assert step["lock"] not in ("", "unknown"), step  # the built-in pack states its locks
        assert step["in_transaction_block"] is not None, step
        if step["kind"] == "rewrite":
            assert step["before"] and step["source"], step
        else:
            assert step["before"] is None and step["source"] is None, step
        if "CONCURRENTLY" in step["sql"] or step["sql"].startswith("ALTER SYSTEM"):
            assert step["in_transaction_block"] is False, step
    if fix["safety"] == "safe":
        assert all(s["kind"] == "migration" for s in fix["steps"])


@pytest.mark.parametrize("name", sorted(PATHOLOGIES))
def test_migrations_run_as_printed_and_rewrites_plan(db: TestDB, name: str) -> None:
    pathology = PATHOLOGIES[name]
    run = pathology.build(db)
    findings = [f for f in run.report["findings"] if f["fix"] is not None]
    shown = {f["code"] for f in findings if f["fix"]["steps"]}
    assert pathology.codes <= shown, (shown, run.report["skipped"])
    ran: list[str] = []
    # Every finding's migration first, in report order: a rewrite may read what one creates
    # (the round-robin dequeue reads the rotation table). Two checks that propose the same
    # index print the same statement, and it is built once.
    for f in findings:
        _check_shape(f["fix"])
        for step in f["fix"]["steps"]:
            if step["kind"] == "migration" and step["sql"] not in ran:
                db.execute(step["sql"])
                ran.append(step["sql"])
    planned = 0
    for f in findings:
        rewrites = [s for s in f["fix"]["steps"] if s["kind"] == "rewrite"]
        if rewrites:
            plans = plan_rewrites(db, f, pathology.values)
            assert len(plans) == len(rewrites) and all(plans)
            planned += len(plans)
    assert ran or planned
