"""The corpus harness fails loudly: a failing or hanging install or worker is a failed test."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.corpus import envs


def test_failing_command_fails_with_its_output() -> None:
    argv = [sys.executable, "-c", "print('no such package'); raise SystemExit(3)"]
    with pytest.raises(pytest.fail.Exception) as failed:
        envs.run(argv, what="pip install nothing")
    message = str(failed.value)
    assert "pip install nothing: exit code 3" in message
    assert "no such package" in message


def test_hanging_command_is_stopped_at_its_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match=r"did not finish within 1 s"):
        envs.run([sys.executable, "-c", "import time; time.sleep(60)"], what="npm", timeout=1)
    assert time.monotonic() - started < 30


def test_worker_that_exits_early_fails() -> None:
    argv = [sys.executable, "-c", "print('cannot connect'); raise SystemExit(1)"]
    with pytest.raises(pytest.fail.Exception) as failed:
        envs.run_until(argv, what="worker", done=lambda: False, timeout=30)
    assert "the worker exited (1) before it was done" in str(failed.value)
    assert "cannot connect" in str(failed.value)


def test_worker_never_done_fails_at_its_timeout() -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(pytest.fail.Exception, match=r"not done after 1 s"):
        envs.run_until(argv, what="worker", done=lambda: False, timeout=1)


def test_worker_is_stopped_once_done(tmp_path: Path) -> None:
    # The worker writes a file when SIGTERM reaches it: it was stopped, not killed.
    ready, flag = tmp_path / "ready", tmp_path / "stopped"
    code = (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (open({str(flag)!r}, 'w').close(), "
        "sys.exit(0)))\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "while True: time.sleep(0.05)\n"
    )
    envs.run_until([sys.executable, "-c", code], what="worker", done=ready.exists, timeout=30)
    assert flag.exists()


def test_python_finder_rejects_what_cannot_run(tmp_path: Path) -> None:
    broken = tmp_path / "python3.99"
    broken.write_text("#!/bin/sh\nexit 127\n")
    broken.chmod(0o755)
    assert envs._python_version(broken) is None
    assert envs._python_version(Path(sys.executable)) == tuple(sys.version_info[:3])
