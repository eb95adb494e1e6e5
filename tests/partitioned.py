"""Partitioned queues on real servers: by time (a partition a day, and a DEFAULT partition)
and by list (a partition per queue), each claimed through its partitioned table.

Every builder names its tables unqualified, so in the ``app-monitor`` shape they land in the
application's schema (tests/shapes.py). The claims are written as the application sends
them, through the parent: PostgreSQL routes and locks each row in its partition.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from tests.conftest import TestDB, flush_stats

# The claim of the time-partitioned queue, as its workers send it.
DAILY_CLAIM = (
    "UPDATE jobs SET status = 'running' WHERE (id, created_at) IN ("
    "SELECT id, created_at FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 10 "
    "FOR UPDATE SKIP LOCKED) RETURNING id"
)
# The claim of the list-partitioned queue: one queue's next jobs.
LIST_CLAIM = (
    "SELECT id FROM jobs WHERE queue = %s AND status = 'pending' ORDER BY created_at LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)
# The mail queue's workers' claim.
MAIL_CLAIM = LIST_CLAIM.replace("%s", "'mail'")
QUEUES = ("default", "mail", "reports")
LIVE_INDEX = "CREATE INDEX jobs_pending ON jobs (created_at) WHERE status = 'pending';"
# An index that holds the archive too: the one the live-set article measured growing.
COMPOSITE_INDEX = "CREATE INDEX jobs_status_created_at ON jobs (status, created_at);"


def build_daily(
    db: TestDB,
    *,
    days: int = 20,
    per_day: int = 2_000,
    waiting: int = 500,
    default: bool = True,
    default_rows: int = 0,
    old_waiting: int = 0,
    indexes: str = "",
) -> None:
    """``jobs`` partitioned by day on ``created_at``: a partition for each of the last
    ``days`` days, today's and tomorrow's (``jobs_YYYYMMDD``), and with ``default`` a DEFAULT
    partition holding ``default_rows`` finished rows from before the first day. Each past day
    holds ``per_day`` finished jobs, finished a minute after they were created; today's
    partition holds ``waiting`` jobs created in the last hour. ``old_waiting`` jobs of the
    oldest day wait still (retried, never claimed since). The live-set partial index is
    declared on the parent, as the live-set article writes it, unless ``indexes`` gives the
    parent's indexes instead (SQL). Analyzed."""
    _build_analyzed(
        db,
        f"""
        CREATE TABLE jobs (
            id          bigint GENERATED ALWAYS AS IDENTITY,
            status      text        NOT NULL DEFAULT 'pending',
            payload     jsonb       NOT NULL DEFAULT '{{}}',
            created_at  timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz,
            PRIMARY KEY (id, created_at)
        ) PARTITION BY RANGE (created_at);
        DO $$
        DECLARE d date;
        BEGIN
          FOR i IN -{days}..1 LOOP
            d := current_date + i;
            EXECUTE format('CREATE TABLE %I PARTITION OF jobs FOR VALUES FROM (%L) TO (%L)',
                           'jobs_' || to_char(d, 'YYYYMMDD'), d, d + 1);
          END LOOP;
        END $$;
        {"CREATE TABLE jobs_default PARTITION OF jobs DEFAULT;" if default else ""}
        {indexes or LIVE_INDEX}
        INSERT INTO jobs (status, created_at, finished_at)
        SELECT 'done', t, t + interval '1 minute'
          FROM (SELECT current_date - {days} + (g::float8 / {per_day}) * interval '1 day' AS t
                  FROM generate_series(0, {days * per_day - 1}) AS g) AS s;
        INSERT INTO jobs (status, created_at, finished_at)
        SELECT 'done', t, t + interval '1 minute'
          FROM (SELECT current_date - {days} - 30 + (g::float8 / greatest({default_rows}, 1))
                       * interval '29 days' AS t
                  FROM generate_series(1, {default_rows}) AS g) AS s;
        UPDATE jobs SET status = 'pending', finished_at = NULL
         WHERE (id, created_at) IN (SELECT id, created_at FROM jobs
                                     WHERE created_at >= current_date - {days}
                                     ORDER BY created_at LIMIT {old_waiting});
        INSERT INTO jobs (created_at)
        SELECT now() - interval '1 hour' + g * (interval '1 hour' / {waiting})
          FROM generate_series(1, {waiting}) AS g;
        """,
    )


def build_by_queue(
    db: TestDB,
    *,
    per_queue: int | Mapping[str, int] = 20_000,
    waiting: int = 300,
    indexes: str = "",
) -> None:
    """``jobs`` partitioned by list on ``queue``, a partition per queue of QUEUES: each holds
    ``per_queue`` finished jobs of the last 30 days (or the number it maps the queue to)
    and ``waiting`` jobs to claim. The live-set partial index is declared on the parent,
    unless ``indexes`` gives the parent's indexes instead (SQL). Analyzed."""
    sizes = per_queue if isinstance(per_queue, Mapping) else dict.fromkeys(QUEUES, per_queue)
    partitions = "\n".join(
        f"CREATE TABLE jobs_{q} PARTITION OF jobs FOR VALUES IN ('{q}');" for q in QUEUES
    )
    finished = "\nUNION ALL\n".join(
        f"SELECT '{q}', now() - (g::float8 / {n}) * interval '30 days' "
        f"FROM generate_series(1, {n}) AS g"
        for q, n in sizes.items()
    )
    _build_analyzed(
        db,
        f"""
        CREATE TABLE jobs (
            id          bigint GENERATED ALWAYS AS IDENTITY,
            queue       text        NOT NULL,
            status      text        NOT NULL DEFAULT 'pending',
            created_at  timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz,
            PRIMARY KEY (queue, id)
        ) PARTITION BY LIST (queue);
        {partitions}
        {indexes or LIVE_INDEX}
        INSERT INTO jobs (queue, status, created_at, finished_at)
        SELECT q, 'done', t, t + interval '1 minute' FROM ({finished}) AS s(q, t);
        INSERT INTO jobs (queue)
        SELECT q FROM unnest(ARRAY{list(QUEUES)}) AS q, generate_series(1, {waiting});
        """,
    )


def build_nested(db: TestDB, *, rows: int = 8_000, indexes: str = "") -> None:
    """``jobs`` partitioned by list on ``queue``, its mail partition partitioned again by
    range on ``created_at`` (an old range and a DEFAULT partition), the other queues in the
    DEFAULT partition: ``rows`` jobs, a tenth pending, half old. The live-set partial index
    on the parent, unless ``indexes`` gives the parent's indexes instead. Analyzed."""
    _build_analyzed(
        db,
        f"""
        CREATE TABLE jobs (
            id bigint GENERATED ALWAYS AS IDENTITY,
            queue text NOT NULL,
            status text NOT NULL DEFAULT 'pending',
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (queue, id, created_at)
        ) PARTITION BY LIST (queue);
        CREATE TABLE jobs_mail PARTITION OF jobs FOR VALUES IN ('mail')
            PARTITION BY RANGE (created_at);
        CREATE TABLE jobs_mail_old PARTITION OF jobs_mail
            FOR VALUES FROM (MINVALUE) TO ('2026-01-01');
        CREATE TABLE jobs_mail_new PARTITION OF jobs_mail DEFAULT;
        CREATE TABLE jobs_other PARTITION OF jobs DEFAULT;
        {indexes or LIVE_INDEX}
        INSERT INTO jobs (queue, status, created_at)
        SELECT CASE WHEN g % 2 = 0 THEN 'mail' ELSE 'other' END,
               CASE WHEN g % 10 = 0 THEN 'pending' ELSE 'done' END,
               CASE WHEN g % 4 < 2 THEN timestamptz '2025-06-01' ELSE now() END
          FROM generate_series(1, {rows}) g;
        """,
    )


def _build_analyzed(db: TestDB, sql: str) -> None:
    """Run the builder's ``sql``, then VACUUM (ANALYZE) jobs in the same session. Its
    counters reach the statistics before the ANALYZE does: on PostgreSQL 14 a session that
    ends sends them as it exits, which may be after another session's ANALYZE, and then every
    row built counts as changed since it (n_mod_since_analyze), as if the statistics were
    stale. Then waits until every partition's statistics show the ANALYZE: on 14 the
    statistics collector takes them in a moment after the command returns, and a check run
    before that reads partitions never analyzed with every row changed."""
    with db.connect() as conn:
        conn.execute(sql)
        flush_stats(conn)
        conn.execute("VACUUM (ANALYZE) jobs")
    unsettled = """
        SELECT count(*) FROM pg_stat_user_tables s
          JOIN pg_partition_tree('jobs') t ON t.relid = s.relid
         WHERE t.isleaf AND (s.n_mod_since_analyze > 0
               OR coalesce(s.last_analyze, s.last_autoanalyze) IS NULL)
    """
    deadline = time.monotonic() + 10
    while db.execute(unsettled)[0][0]:
        if time.monotonic() > deadline:
            raise AssertionError("the partitions' statistics do not show the ANALYZE after 10 s")
        time.sleep(0.1)


def run_claims(db: TestDB, claim: str, times: int = 5, params: list[object] | None = None) -> None:
    """The workers' claim, ``times`` over, each rolled back (the rows stay waiting): what
    pg_stat_statements records of it."""
    with db.connect() as conn:
        for _ in range(times):
            with conn.transaction(force_rollback=True):
                conn.execute(claim, params)
        flush_stats(conn)
