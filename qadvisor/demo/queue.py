"""The demo queue: the measured case, built on an empty database.

An archive of finished jobs that grew for months, a small live set of pending jobs, a
composite (status, created_at) index on the dequeue path, default autovacuum settings, and the
dead tuples of recent claims waiting for a vacuum that the archive keeps away.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg

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
        # That UPDATE stands for past claims; pg_stat_statements shows what the workers run
        # from here on (the claim, the acknowledgement), as on a server that has been up.
        conn.execute("SELECT pg_stat_statements_reset()")
        for _ in range(CLAIMS):
            (job_id,) = conn.execute(CLAIM).fetchone() or (None,)
            conn.execute(
                "UPDATE jobs SET status = 'done', finished_at = now() WHERE id = %s", (job_id,)
            )
        # Autoanalyze would do this on its own after the churn; it does not vacuum.
        conn.execute("ANALYZE jobs")
        # Make this session's counters visible to the checking session right away.
        conn.execute("SELECT pg_stat_force_next_flush()")
