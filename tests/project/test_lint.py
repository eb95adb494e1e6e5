"""The code stays ruff- and mypy-clean and keeps its import contracts: checked with the suite
so CI enforces it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    assert found, f"{name} is not installed: pip install -e '.[test]'"
    return found


def test_ruff() -> None:
    run = subprocess.run([_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_ruff_format() -> None:
    run = subprocess.run([_tool("ruff"), "format", "--check", "."], cwd=ROOT, capture_output=True,
                         text=True)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr


def test_mypy() -> None:
    run = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_mypy_checks_the_tests_and_the_code_strictly(tmp_path: Path) -> None:
    """`mypy` with the project's configuration, on a tree of three tiny packages: the code
    under qadvisor/ and checks/ must be annotated; under tests/ an unannotated helper passes,
    but its body is still checked."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    unannotated = "def helper(n):\n    return n + 1\n"
    wrong = "def wrong(n):\n    text: str = 1\n    return text\n"
    for package in ("qadvisor", "checks", "tests"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(unannotated)
    (tmp_path / "tests" / "wrong.py").write_text(wrong)
    run = subprocess.run([_tool("mypy"), "--no-incremental"], cwd=tmp_path, capture_output=True,
                         text=True)  # fmt: skip
    errors = sorted(line.split(":")[0] for line in run.stdout.splitlines() if ": error:" in line)
    assert errors == [
        str(Path("checks/__init__.py")),
        str(Path("qadvisor/__init__.py")),
        str(Path("tests/wrong.py")),
    ], run.stdout + run.stderr


def test_import_contracts() -> None:
    run = subprocess.run([_tool("lint-imports"), "--no-cache", "--no-logo"], cwd=ROOT,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr


# For each contract of pyproject.toml, one import that breaks it: the contracts are not
# vacuous, and the rule each one states is the rule it checks.
BREAKS = {
    "checks-through-the-api": ("checks/qa101_archive_bloated_index.py",
                               "from qadvisor import units"),
    "checks-parse-no-sql-and-connect-nowhere": ("checks/qa503_window_with_for_update.py",
                                                "import sqlglot"),
    "sql-text-has-one-owner": ("qadvisor/fixes/builders.py", "from sqlglot import exp"),
    "only-qadvisor-sql-imports-sqlglot": ("qadvisor/collect/access.py", "import sqlglot"),
    "checks-are-independent": ("checks/qa502_tenant_row_lock.py",
                               "from checks.qa501_lock_without_skip_locked import run"),
    "judging-never-collects": ("qadvisor/model.py", "import qadvisor.collect.snapshot"),
    "renderers-see-the-report": ("qadvisor/render/sarif.py", "from qadvisor.registry import Check"),
    "only-collection-talks-to-postgresql": ("qadvisor/engine.py", "import psycopg"),
    "command-line-through-the-engine": ("qadvisor/cli.py",
                                        "from qadvisor.collect.server import snapshot_of"),
    "the-core-knows-no-check": ("qadvisor/docgen/pages.py", "import checks"),
    "only-the-chart-module-draws": ("qadvisor/render/markdown.py", "import leather"),
    "the-pipeline-imports-downward": ("qadvisor/derive/statement_queues.py",
                                      "from qadvisor.registry import Skip"),
}  # fmt: skip


def test_every_contract_has_a_break() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    ids = [c["id"] for c in config["tool"]["importlinter"]["contracts"]]
    assert sorted(ids) == sorted(BREAKS)


@pytest.mark.parametrize("contract", sorted(BREAKS))
def test_a_contract_fails_when_broken(tmp_path: Path, contract: str) -> None:
    for package in ("qadvisor", "checks"):
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    path, line = BREAKS[contract]
    assert (tmp_path / path).is_file(), f"{path} is no module of the tree: the break tests nothing"
    with (tmp_path / path).open("a") as module:
        module.write(f"\n{line}\n")
    run = subprocess.run(
        [_tool("lint-imports"), "--no-cache", "--no-logo", "--contract", contract],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},  # the copy, not the installed tree
    )
    assert run.returncode == 1 and "BROKEN" in run.stdout, run.stdout + run.stderr
