"""Fixes a DBA pastes: the fixes of the terminal report selected and pasted into psql, on real
servers in both shapes."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.checks.test_qa101_archive_bloated_index import CLAIM as LITERAL_CLAIM
from tests.helpers import (
    ENV_VARIABLES,
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
