"""--prove is bounded and cleans up after itself: it ends within the run timeout whatever the
scratch server runs, refuses a statement smuggled into a snapshot's text, and removes the
scratch server of an earlier run that was killed outright, never a live run's (real
servers)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psycopg
import pytest

from qadvisor.demo import pgserver
from qadvisor.prove.build import build
from qadvisor.prove.copy import CopyPlan
from qadvisor.prove.scratch import OWNER_FILE, PREFIX, process_start, reap_stale
from tests.conftest import TestDB
from tests.helpers import (
    build_archive_queue,
    interruptible,
    processes_under,
    qadvisor,
    wait_for_line,
)


def _snapshot(db: TestDB, tmp_path: Path) -> Path:
    build_archive_queue(db)
    saved = tmp_path / "s.json"
    snap = qadvisor("snapshot", db.dsn, "--output", str(saved))
    assert snap.rc == 0, snap.stderr
    return saved


def _smuggled(saved: Path, tail: str) -> None:
    data = json.loads(saved.read_text())
    (jobs,) = [t for t in data["tables"] if t["name"] == "jobs"]
    index = next(i for i in jobs["indexes"] if i["name"] == "jobs_status_created_at_idx")
    index["definition"] += tail
    saved.write_text(json.dumps(data))


def test_a_statement_smuggled_after_an_index_definition_is_refused(
    db: TestDB, tmp_path: Path
) -> None:
    saved = _snapshot(db, tmp_path)
    _smuggled(saved, "; SELECT pg_sleep(3000)")
    started = time.monotonic()
    run = qadvisor("check", "--snapshot", str(saved), "--prove", "--format", "json",
                   "--ignore", "QA201")  # fmt: skip
    assert run.rc == 1, run.stderr
    assert time.monotonic() - started < 120  # not 3,000 s of sleep
    (f,) = run.findings("QA101")
    (note,) = f["proof"]["notes"]
    assert "cannot be built" in note and "definition of index jobs_status_created_at_idx" in note
    assert "refused" in note


def test_the_server_refuses_to_split_a_statement_of_the_copy(db: TestDB) -> None:
    # Behind the refusal above: each statement is sent alone in the extended protocol, so a
    # ';' the pure check missed still cannot start a second statement.
    db.execute("CREATE TABLE jobs (id bigint)")
    smuggled = "CREATE INDEX jobs_id ON public.jobs (id); SELECT pg_sleep(3000)"
    plan = CopyPlan("public.jobs", (), (), (smuggled,), (), (), 0, 0, 0)
    started = time.monotonic()
    with pytest.raises(psycopg.errors.SyntaxError, match="multiple commands"):
        build(db.dsn, plan, lambda _m: None)
    assert time.monotonic() - started < 30


def test_a_proof_past_the_run_timeout_ends_there_and_says_so(db: TestDB, tmp_path: Path) -> None:
    # The vacuum proof alone drives two copies for 12 s each: a 25 s bound cannot hold every
    # proof. The run still ends near its bound, with its report, and leaves nothing behind.
    saved = _snapshot(db, tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    started = time.monotonic()
    with interruptible("check", "--snapshot", str(saved), "--prove", "--format", "json",
                       "--run-timeout", "25", scratch=scratch) as proc:  # fmt: skip
        out, err = proc.communicate(timeout=180)
    took = time.monotonic() - started
    assert proc.returncode == 1, err
    assert took < 25 + 20, (took, err)  # the bound, the server's stop and the report
    report = json.loads(out)
    notes = [n for f in report["findings"] if f["proof"] for n in f["proof"]["notes"]]
    cut = [n for n in notes if "ran out of its time" in n]
    assert cut and "the run timeout of 25 s" in cut[0], notes
    assert list(scratch.iterdir()) == [] and processes_under(scratch) == []


def test_a_killed_run_leaves_its_server_to_the_next_run_which_removes_it(
    db: TestDB, tmp_path: Path
) -> None:
    saved = _snapshot(db, tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    args = ("check", "--snapshot", str(saved), "--prove", "--format", "json")
    with (
        interruptible(*args, scratch=scratch) as killed,
        interruptible(*args, scratch=scratch) as live,
    ):
        for proc in (killed, live):
            wait_for_line(proc, "building a copy")
        left = {p for p in scratch.iterdir() if p.name.startswith(PREFIX)}
        assert len(left) == 2
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=30)
        # The killed run's server runs on; the live run's is its own.
        assert processes_under(scratch)
        said: list[str] = []
        (reaped,) = reap_stale(said.append, scratch)
        assert reaped.stopped and reaped.path in left and not reaped.path.exists()
        assert "an earlier run's scratch server left behind" in said[0]
        (kept,) = left - {reaped.path}
        assert kept.exists() and reap_stale(said.append, scratch) == []
        live.send_signal(signal.SIGINT)
        live.communicate(timeout=120)
    assert list(scratch.iterdir()) == [] and processes_under(scratch) == []


def test_only_a_marked_directory_of_a_gone_run_is_removed(tmp_path: Path) -> None:
    unmarked = tmp_path / f"{PREFIX}unmarked"  # another tool's, or a run writing its mark
    unmarked.mkdir()
    mine = tmp_path / f"{PREFIX}alive"
    mine.mkdir()
    (mine / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(),
                                               "started": process_start(os.getpid())}))  # fmt: skip
    # The same pid, but a process that started at another moment: the pid was given again.
    reused = tmp_path / f"{PREFIX}reused"
    reused.mkdir()
    (reused / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "started": "1"}))
    reaped = reap_stale(lambda _m: None, tmp_path)
    assert [r.path for r in reaped] == [reused] and not reaped[0].stopped
    assert unmarked.exists() and mine.exists() and not reused.exists()
    assert pgserver.postmaster_pid(mine / "data") is None
