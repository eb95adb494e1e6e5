"""Fixes a DBA pastes: ``--format sql`` applied by psql to the seed pathologies, and the fixes of
the terminal report selected and pasted into psql, on real servers in both shapes.

What the script runs as printed must make its findings go; what it leaves commented out (a
step to review first, a rewrite of the application's statement) must not have run, so those
findings stay until a person acts. A rewrite is shipped as the application would ship it: the
re-check is given the new statement in place of the old one.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from qadvisor.settings.resolve import ENV_VARIABLES
from tests.checks.test_qa101_archive_bloated_index import CLAIM as LITERAL_CLAIM
from tests.checks.test_qa401_round_robin_walks_backlog import (
    FIFO,
    RR_BY_ID,
    build_tenant_queue,
    build_trap,
)
from tests.checks.test_qa403_fifo_noisy_neighbour import EXAMPLE_JOBS
from tests.collect.test_statements_collect import CLAIM, build_claim_queue
from tests.helpers import (
    as_the_application,
    assert_quiet,
    build_archive_queue,
    qadvisor,
)
from tests.shapes import Shape

PSQL = Path("/usr/bin/psql")

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(not PSQL.exists(), reason="psql (/usr/bin/psql) is not installed"),
]


def psql(shape: Shape, script: Path) -> subprocess.CompletedProcess[str]:
    """The script run as its header says (psql, stopping at the first error), by the queue's
    owner in a DBA's session."""
    args = [str(PSQL), "-X", "-q", "-v", "ON_ERROR_STOP=1"]
    if shape.owner is not None:
        args += ["-c", f'SET ROLE "{shape.owner}"']
    args += ["-f", str(script), shape.dba.dsn]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)


def applied(shape: Shape, tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    """The check's JSON report and its --format sql script (one run), the script applied."""
    script = tmp_path / "fixes.sql"
    run = shape.check(*args, "--output", f"sql:{script}")
    ran = psql(shape, script)
    assert ran.returncode == 0, (ran.stdout, ran.stderr, script.read_text())
    return run.report, script.read_text()


def rewrites(report: dict[str, Any], code: str) -> list[str]:
    (f,) = [f for f in report["findings"] if f["code"] == code]
    return [s["sql"] for s in f["fix"]["steps"] if s["kind"] == "rewrite"]


def commented(script: str, sql: str) -> bool:
    """Every line of ``sql`` is in the script, commented out."""
    lines = script.splitlines()
    return all(f"-- {line}".rstrip() in lines for line in sql.rstrip().splitlines())


@pytest.mark.judges("QA101", "QA201", "QA204", reads=("plans",))
def test_the_live_set_seed_cleared_by_the_script(shape: Shape, tmp_path: Path) -> None:
    # The seed: a composite (status, created_at) index over a month of finished jobs,
    # autovacuum's trigger scaled by them, dead tuples of claims; the claim recorded by
    # pg_stat_statements, so nothing else is known to read the old index.
    build_archive_queue(shape.db)
    shape.db.execute("UPDATE jobs SET finished_at = now() WHERE id <= 20000")
    shape.db.wait_for_stats("jobs", lambda r: r["n_dead_tup"] >= 20_000)
    shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    shape.dba.execute("SELECT pg_stat_statements_reset()")
    with shape.db.connect() as conn:
        for _ in range(5):
            conn.execute(LITERAL_CLAIM)
    report, script = applied(shape, tmp_path)
    assert {"QA101", "QA201", "QA204"} <= {f["code"] for f in report["findings"]}
    after = shape.check()
    assert_quiet(after, "QA101", shape.queue)
    assert_quiet(after, "QA201", shape.queue)
    # The retention DELETE is a step to review first: commented out, not run.
    (kept,) = after.findings("QA204")
    (delete,) = [s["sql"] for s in kept["fix"]["steps"] if s["kind"] == "review"]
    assert commented(script, delete)
    before = {f["code"] for f in report["findings"]}
    assert {f["code"] for f in after.report["findings"]} & before == {"QA204"}


@pytest.mark.judges("QA301", reads=("plans",))
def test_the_generic_plan_seed_cleared_by_the_script_and_the_shipped_rewrite(
    shape: Shape, tmp_path: Path
) -> None:
    build_claim_queue(shape.db)
    shape.dba.execute(f"ALTER DATABASE {shape.dba.name} SET plan_cache_mode = force_generic_plan")
    report, script = applied(shape, tmp_path, "--query", CLAIM)
    (rewrite,) = rewrites(report, "QA301")
    assert commented(script, rewrite)  # application code: not run by the script
    # The application ships the claim as rewritten, with the value it sends.
    shipped = as_the_application(rewrite, {1: "'queued'"})
    after = shape.check("--query", shipped)
    assert_quiet(after, "QA301", shape.queue)


@pytest.mark.judges("QA403", reads=("plans",))
def test_the_noisy_neighbour_seed_cleared_by_the_script_and_the_shipped_rewrite(
    shape: Shape, tmp_path: Path
) -> None:
    # The seed: one tenant's 1,000 jobs ahead of ten tenants' 5 each, claimed in FIFO order.
    build_tenant_queue(shape.db, EXAMPLE_JOBS, tenant_index=None)
    report, script = applied(shape, tmp_path, "--query", FIFO)
    (rewrite,) = rewrites(report, "QA403")
    assert commented(script, rewrite)
    # The script made the rotation table and the per-tenant index the rewrite reads.
    made = shape.dba.execute(
        "SELECT count(*) FROM pg_class WHERE relname = 'jobs_tenants' OR relname LIKE "
        "'jobs_queued_tenant_id%'"
    )
    assert made == [(2,)], made
    after = shape.check("--query", rewrite)
    assert_quiet(after, "QA403", shape.queue)


@pytest.mark.judges("QA401", "QA402", reads=("plans",))
def test_the_round_robin_seed_cleared_by_the_script_and_the_shipped_rewrite(
    shape: Shape, tmp_path: Path
) -> None:
    # The seed's trap: 100,000 jobs of one tenant, one each for ten others, 1,000 tenants in
    # the rotation, the round-robin sub-select ordered by id, which the FIFO index supplies.
    build_trap(shape.db)
    report, script = applied(shape, tmp_path, "--query", RR_BY_ID)
    (rewrite,) = rewrites(report, "QA401")
    after = shape.check("--query", rewrite)
    assert_quiet(after, "QA401", shape.queue)
    # Pruning idle tenants is a step to review first (the enqueue must re-add its tenant):
    # commented out, so the idle tenants are still there.
    (prune,) = after.findings("QA402")
    (step,) = [s["sql"] for s in prune["fix"]["steps"] if s["kind"] == "review"]
    assert commented(script, step)


def _pasted(text: str) -> str:
    """What a user selects of each fix in the terminal report: from the line under "fix
    (...):" to the line before "docs:"."""
    blocks = re.findall(r"^fix \([^)]*\):\n(.*?)^docs: ", text, re.S | re.M)
    assert blocks, text
    return "".join(blocks)


@pytest.mark.judges("QA101", "QA201", reads=("plans",))
def test_the_terminal_s_fixes_pasted_into_psql_run_and_clear_the_seed(
    shape: Shape, tmp_path: Path
) -> None:
    build_archive_queue(shape.db)
    shape.db.execute("UPDATE jobs SET finished_at = now() WHERE id <= 20000")
    shape.db.wait_for_stats("jobs", lambda r: r["n_dead_tup"] >= 20_000)
    shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    shape.dba.execute("SELECT pg_stat_statements_reset()")
    with shape.db.connect() as conn:
        for _ in range(5):
            conn.execute(LITERAL_CLAIM)
    shape.grant()
    # A narrow terminal: each statement is longer than a line of it.
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES} | {"COLUMNS": "60"}
    run = qadvisor("check", shape.checker.dsn, "--ignore", "QA204", env=env)
    assert run.rc == 1, run.stderr
    pasted = tmp_path / "pasted.sql"
    pasted.write_text(_pasted(run.stdout))
    ran = psql(shape, pasted)
    assert ran.returncode == 0, (ran.stderr, pasted.read_text())
    after = shape.check("--ignore", "QA204")
    assert_quiet(after, "QA101", shape.queue)
    assert_quiet(after, "QA201", shape.queue)
