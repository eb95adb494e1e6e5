"""Regenerate docs/images/incident-page.png, the picture of the incident page in the README.

Builds the demo queue (``qadvisor demo --keep``: an archive of finished jobs, a composite index
on the dequeue path, default autovacuum settings) on a throwaway PostgreSQL 18, runs a worker
that enqueues and claims jobs, checks the database three times a few seconds apart with
``--history`` (so QA201 sizes its threshold from the measured rate and draws dead tuples over
time), writes the third run's incident page, opens it in headless Chromium (Debian's
``chromium``) and takes a screenshot of its top. Everything it starts it stops.

Run it from the repository root, in the test environment (it uses the tests' browser client)::

    .venv/bin/python tools/incident_page_screenshot.py            # about a minute
    .venv/bin/python tools/incident_page_screenshot.py --keep-page /tmp/page.html
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser import open_page  # noqa: E402 -- the repository's own test client

OUT = ROOT / "docs" / "images" / "incident-page.png"
CLAIM = """
UPDATE jobs SET status = 'done', finished_at = now()
 WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at
              LIMIT 50 FOR UPDATE SKIP LOCKED)
"""
ENQUEUE = "INSERT INTO jobs (status) SELECT 'pending' FROM generate_series(1, 50)"


def _qadvisor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qadvisor", *args], capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def _work(dsn: str, stop: threading.Event) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        while not stop.is_set():
            conn.execute(ENQUEUE)
            conn.execute(CLAIM)
            time.sleep(0.005)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500_000, help="finished jobs in the archive")
    parser.add_argument("--keep-page", type=Path, help="also keep the page at this path")
    args = parser.parse_args()
    demo = _qadvisor("demo", "--keep", "--rows", str(args.rows), "--format", "json")
    dsn_said = re.search(r"qadvisor check '([^']+)'", demo.stderr)
    stop_said = re.search(r"Stop it with: (.+)", demo.stderr)
    if demo.returncode not in (0, 1) or not dsn_said or not stop_said:
        sys.exit(f"the demo did not start: {demo.stderr.strip()[-500:]}")
    dsn = dsn_said.group(1)
    try:
        with tempfile.TemporaryDirectory(prefix="qadvisor-page-") as scratch:
            history, page = Path(scratch) / "history", Path(scratch) / "page.html"
            stop = threading.Event()
            worker = threading.Thread(target=_work, args=(dsn, stop), daemon=True)
            worker.start()
            try:
                time.sleep(1.5)
                for i in range(3):
                    out = ("--output", f"html:{page}") if i == 2 else ()
                    run = _qadvisor("check", dsn, "--history", str(history), "--format", "json",
                                    "--fail-on", "never", *out)  # fmt: skip
                    if run.returncode != 0:
                        sys.exit(f"qadvisor check failed: {run.stderr.strip()}")
                    time.sleep(3)
            finally:
                stop.set()
                worker.join(30)
            if args.keep_page:
                args.keep_page.write_text(page.read_text())
            with open_page(page) as opened:
                if opened.errors or opened.requests != [opened.url]:
                    sys.exit(f"the page misbehaved: {opened.errors} {opened.requests}")
                png = opened.screenshot(width=1000, height=1500)
            OUT.parent.mkdir(parents=True, exist_ok=True)
            OUT.write_bytes(png)
            print(f"{OUT.relative_to(ROOT)}: {len(png):,} bytes")
    finally:
        subprocess.run(shlex.split(stop_said.group(1)), capture_output=True, timeout=120)


if __name__ == "__main__":
    main()
