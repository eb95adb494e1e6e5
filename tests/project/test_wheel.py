"""The wheel: built from the repository's files, installed into a fresh virtual environment,
run from a directory that is not the checkout against a real server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TestDB
from tests.helpers import build_archive_queue
from tests.project.install import ROOT, fresh_venv, outside_env, pip, source_copy

pytestmark = [pytest.mark.server, pytest.mark.install]


def test_the_built_wheel_installs_and_checks_a_server_from_outside_the_checkout(
    db: TestDB, tmp_path: Path
) -> None:
    source = source_copy(tmp_path / "source")
    # As a user would build it from a clone: pip wheel, in an isolated build environment.
    built = pip(fresh_venv(tmp_path / "build-env"), "wheel", str(source), "--no-deps",
                "-w", str(tmp_path / "dist"), cwd=tmp_path)  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("qadvisor-*.whl")
    # What runs from the installed wheel alone: the collector's SQL files are package data.
    listed = subprocess.run(["unzip", "-Z1", str(wheel)], capture_output=True, text=True).stdout
    assert "qadvisor/collect/sql/tables.sql" in listed.splitlines()
    assert not any(n.startswith(("tests/", "docs/")) for n in listed.splitlines())

    bin_dir = fresh_venv(tmp_path / "user-env")
    installed = pip(bin_dir, "install", str(wheel), cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = outside_env(bin_dir)

    def qadvisor(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["qadvisor", *args], cwd=elsewhere, capture_output=True,
                              text=True, timeout=300, env=env)  # fmt: skip

    where = subprocess.run(
        ["python", "-c", "import qadvisor, checks; print(qadvisor.__file__, checks.__file__)"],
        cwd=elsewhere, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert str(ROOT) not in where.stdout and str(tmp_path / "user-env") in where.stdout

    build_archive_queue(db)
    run = qadvisor("check", db.dsn, "--format", "json")
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert {"QA101", "QA201"} <= {f["code"] for f in report["findings"]}
    assert len(report["checks_run"]) >= 20  # the built-in pack, through its entry point
    page = qadvisor("explain", "QA101")
    assert page.returncode == 0 and "## How to fix" in page.stdout
    script = qadvisor("check", db.dsn, "--format", "sql", "--fail-on", "never")
    assert script.returncode == 0 and "CREATE INDEX CONCURRENTLY" in script.stdout
