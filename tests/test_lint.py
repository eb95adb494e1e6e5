"""The code stays ruff- and mypy-clean: checked with the suite so CI enforces it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
