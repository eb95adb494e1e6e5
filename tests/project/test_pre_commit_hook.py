""".pre-commit-hooks.yaml, run by pre-commit itself: a repository of the application uses the
hook from a copy of this repository (pinned to its commit, as a user pins a tag); pre-commit
installs it into an environment of its own and runs it on the commit's SQL files against a
real server. The hook fails on findings about those files' statements and on nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.collect.test_statements_collect import build_claim_queue
from tests.conftest import TestDB
from tests.project.install import outside_env, source_copy

pytestmark = [pytest.mark.server, pytest.mark.install]

BLOCKING_CLAIM = (
    "-- The worker's claim.\n"
    "SELECT id FROM jobs WHERE status = 'queued' ORDER BY created_at LIMIT 1 FOR UPDATE;\n"
)
CLAIM = (
    "-- The worker's claim.\n"
    "SELECT id FROM jobs WHERE status = 'queued' ORDER BY created_at LIMIT 1\n"
    "  FOR UPDATE SKIP LOCKED;\n"
)


def test_the_hook_fails_on_findings_about_the_commit_s_sql_files(
    db: TestDB, tmp_path: Path
) -> None:
    source = source_copy(tmp_path / "qadvisor")
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    # The queue has findings of its own (autovacuum is off for it): not the files' to fix.
    build_claim_queue(db)
    app = tmp_path / "app"
    (app / "sql").mkdir(parents=True)
    config = {"repos": [{"repo": str(source), "rev": rev,
                         "hooks": [{"id": "qadvisor", "args": ["--dsn", db.dsn]}]}]}  # fmt: skip
    (app / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    (app / "sql" / "claim.sql").write_text(BLOCKING_CLAIM)
    (app / "README").write_text("not SQL: the hook does not see it\n")
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org"]
    for args in (["init", "-q"], ["add", "-A"]):
        subprocess.run([*git, *args], cwd=app, check=True, capture_output=True)
    env = outside_env(Path(sys.executable).parent, PRE_COMMIT_HOME=str(tmp_path / "cache"))
    env.pop("CI", None)

    def pre_commit() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose"],
            cwd=app, capture_output=True, text=True, timeout=1500, env=env,
        )  # fmt: skip

    blocked = pre_commit()
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    out = blocked.stdout
    assert "QA501 lock-without-skip-locked" in out and "sql/claim.sql:2" in out, out
    assert "QA203" not in out  # the table's own finding is left to qadvisor check

    (app / "sql" / "claim.sql").write_text(CLAIM)
    passed = pre_commit()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "qadvisor (dequeue SQL against a database)" in passed.stdout
    assert os.environ.get("PRE_COMMIT_HOME") != env["PRE_COMMIT_HOME"]


def test_docs_ci_md_uses_the_hook_this_repository_declares() -> None:
    from tests.project.install import ROOT

    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    page = (ROOT / "docs" / "ci.md").read_text()
    section = page.split("## pre-commit", 1)[1].split("\n## ", 1)[0]
    example = yaml.safe_load(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    (used,) = example["repos"][0]["hooks"]
    assert used["id"] == hook["id"] and hook["entry"] == "qadvisor check-sql"
