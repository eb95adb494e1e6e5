"""--history over a real server: snapshots saved run after run while a worker churns the queue
give measured rates (dead tuples a second, rows added a day), the figures over time, and a
QA201 threshold sized from the measured rate; a snapshot of another database, or one from
before a restart, is recognised and not mixed in."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

from qadvisor.demo.pgserver import start_server
from qadvisor.units import nice_round
from tests.conftest import TestDB
from tests.helpers import Run, build_archive_queue, check, qadvisor

CLAIM = """
UPDATE jobs SET status = 'done', finished_at = now()
 WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at
              LIMIT 50 FOR UPDATE SKIP LOCKED)
"""
ENQUEUE = "INSERT INTO jobs (status) SELECT 'pending' FROM generate_series(1, 50)"


class Worker:
    """A worker in a thread of its own: enqueues 50 jobs and claims and finishes 50, again and
    again, counting the rows it changed, until stopped."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.updated = 0
        self.inserted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.is_set():
                self.inserted += conn.execute(ENQUEUE).rowcount
                self.updated += conn.execute(CLAIM).rowcount
                time.sleep(0.005)


@contextlib.contextmanager
def churning(db: TestDB) -> Iterator[Worker]:
    worker = Worker(db.dsn)
    worker.thread.start()
    try:
        yield worker
    finally:
        worker.stop.set()
        worker.thread.join(30)


def finding(run: Run, code: str) -> dict[str, Any]:
    (f,) = run.findings(code)
    return f


def saved(directory: Path) -> list[dict[str, Any]]:
    files = sorted(directory.glob("qadvisor-snapshot-*.json"))
    return [json.loads(p.read_text()) for p in files]


def jobs_stats(snapshot: dict[str, Any]) -> dict[str, Any]:
    (t,) = [t for t in snapshot["tables"] if t["name"] == "jobs"]
    stats: dict[str, Any] = t["stats"]
    return stats


def test_three_snapshots_while_a_worker_churns_measure_the_rates_and_size_the_threshold(
    db: TestDB, tmp_path: Path
) -> None:
    build_archive_queue(db)
    history = tmp_path / "history"
    runs: list[Run] = []
    with churning(db) as worker:
        time.sleep(1.5)  # the worker's first counters reach the statistics
        counted: list[tuple[float, int]] = []
        for i in range(3):
            counted.append((time.monotonic(), worker.updated))
            extra = ("--output", f"html:{tmp_path / 'page.html'}") if i == 2 else ()
            runs.append(check(db, "--history", str(history), *extra))
            time.sleep(2)
    files = saved(history)
    assert len(files) == 3
    first, last = files[0], files[-1]

    # The first run had no earlier snapshot: its threshold is the live set's, said so.
    alone = finding(runs[0], "QA201")
    assert "rates_from" not in alone["evidence"]
    assert "no rate was measured" in alone["fix"]["notes"]
    assert runs[0].report["history"]["earlier"] == []

    f = finding(runs[2], "QA201")
    ev = f["evidence"]
    assert [e["file"] for e in runs[2].report["history"]["earlier"]] == [
        p.name for p in sorted(history.glob("qadvisor-snapshot-*.json"))[:2]
    ]
    assert ev["rates_from"].endswith("(--history, 3 readings)")
    assert first["server"]["collected_at"] in ev["rates_from"]
    # The rate is the saved counters' difference over the saved clocks' interval.
    a, b = jobs_stats(first), jobs_stats(last)
    from datetime import datetime

    seconds = (
        datetime.fromisoformat(last["server"]["collected_at"])
        - datetime.fromisoformat(first["server"]["collected_at"])
    ).total_seconds()
    dead = (b["n_tup_upd"] + b["n_tup_del"]) - (a["n_tup_upd"] + a["n_tup_del"])
    assert ev["sample_seconds"] == seconds and ev["sample_dead_tuples"] == dead
    assert ev["dead_tuples_per_s"] == round(dead / seconds, 1)
    # ... and agrees with what the worker did meanwhile (its counters reach the statistics
    # up to a second late, so within a third).
    (t0, u0), (t2, u2) = counted[0], counted[2]
    truth = (u2 - u0) / (t2 - t0)
    assert abs(ev["dead_tuples_per_s"] - truth) < truth / 3, (ev["dead_tuples_per_s"], truth)
    # The threshold comes from that rate: 30 s of dead tuples, rounded to the nearest 1, 2 or
    # 5 times a power of ten, said how.
    n = ev["proposed_vacuum_trigger"]
    assert n == nice_round(max(30 * dead / seconds, 1000))[0]
    assert f"measured over {ev['rates_from']}" in f["fix"]["notes"]
    if n < ev["vacuum_trigger"]:
        (step,) = f["fix"]["steps"]
        assert f"autovacuum_vacuum_threshold = {n})" in step["sql"]
    else:
        # A fast worker on this small table reaches the trigger within 30 s: a threshold that
        # large would not vacuum sooner, so none is set.
        assert f["fix"]["steps"] == [] and "no lower than the trigger now" in f["fix"]["notes"]
    # The dead tuples and the trigger at each snapshot: the chart's series.
    points = ev["dead_tuples_series"]
    assert [p["at"] for p in points] == [s["server"]["collected_at"] for s in files]
    assert [p["dead_tuples"] for p in points] == [jobs_stats(s)["n_dead_tup"] for s in files]
    assert all(p["vacuum_trigger"] > 50_000 for p in points)
    page = (tmp_path / "page.html").read_text()
    assert "<title>Dead tuples over time</title>" in page

    # QA204: the rows the archive gains a day, measured over the same interval.
    growth = finding(runs[2], "QA204")["evidence"]
    inserted = b["n_tup_ins"] - a["n_tup_ins"]
    assert growth["rows_added_per_day"] == round(inserted / seconds * 86400)
    assert "(--history, 3 readings)" in growth["rows_added_per_day_from"]
    assert len(growth["table_rows_series"]) == 3


def test_another_database_and_a_restart_are_not_mixed_in(db: TestDB, tmp_path: Path) -> None:
    server = start_server(db.server.bin_dir, tmp_path / "pg")
    try:
        for name in ("one", "two"):
            with psycopg.connect(server.dsn(), autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {name}")
        other = TestDB("two", server)
        mine = TestDB("one", server)
        build_archive_queue(mine, archive=20_000, live=50)
        build_archive_queue(other, archive=20_000, live=50)
        history = tmp_path / "history"
        first = check(mine, "--history", str(history))
        assert first.report["history"] == {
            "directory": str(history), "earlier": [], "not_mixed_in": []}  # fmt: skip
        there = check(other, "--history", str(history)).report["history"]
        assert there["earlier"] == []
        ((file, reason),) = [(m["file"], m["reason"]) for m in there["not_mixed_in"]]
        assert reason.startswith("another database (one, OID ")
        again = check(mine, "--history", str(history)).report["history"]
        assert [e["file"] for e in again["earlier"]] == [file]
        assert [m["reason"][:16] for m in again["not_mixed_in"]] == ["another database"]

        server.stop()
        server = start_server(db.server.bin_dir, tmp_path / "pg", initdb=False)
        mine = TestDB("one", server)
        after = check(mine, "--history", str(history)).report["history"]
        assert after["earlier"] == []
        restarted = [m for m in after["not_mixed_in"] if "restarted" in m["reason"]]
        assert len(restarted) == 2, after["not_mixed_in"]
        assert all(m["reason"].startswith("the server restarted since") for m in restarted)
    finally:
        server.stop()


def test_history_goes_with_a_server_only_and_keeps_what_it_is_told(
    db: TestDB, tmp_path: Path
) -> None:
    build_archive_queue(db, archive=20_000, live=50)
    history = tmp_path / "history"
    for _ in range(3):
        check(db, "--history", str(history), "--history-keep", "2")
    assert len(list(history.glob("qadvisor-snapshot-*.json"))) == 2
    saved_one = sorted(history.glob("*.json"))[0]
    refused = qadvisor("check", "--snapshot", str(saved_one), "--history", str(history))
    assert refused.rc == 2 and "--history" in refused.stderr
    (tmp_path / "file").write_text("")
    bad = qadvisor("check", db.dsn, "--history", str(tmp_path / "file"))
    assert bad.rc == 2 and "it is not a directory" in bad.stderr and bad.stdout == ""
