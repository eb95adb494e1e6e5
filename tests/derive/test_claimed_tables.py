"""A claimed table is a queue, whatever its condition: real servers, claims as sent.

Each queue here is built by the application's role and worked by it as an application works
it (psycopg binding its parameters on the server, so pg_stat_statements records the claim
with every value behind ``$n``), then checked in both production shapes (tests/shapes.py).

- A visibility-timeout queue (a table per queue): a message waits until its ``vt`` passes; a
  read takes the due ones in id order with ``FOR UPDATE SKIP LOCKED`` and pushes their ``vt``
  forward; an acknowledged message is deleted, or moved into an archive table. Nothing marks
  a row finished: every row of the table is waiting or in flight.
- A broker's message table, as kombu's SQLAlchemy transport keeps it: the consumer takes the
  oldest message of its queue with ``visible != false ... ORDER BY timestamp, id LIMIT 1 FOR
  UPDATE`` (no SKIP LOCKED), then sets ``visible`` false and ``timestamp`` to the delivery
  time in a second statement; delivered messages are kept forever. The driver (psycopg2 in
  kombu; a client-side cursor here) writes every value into the text, which
  pg_stat_statements shows as ``$n``.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import flush_stats
from tests.helpers import assert_quiet
from tests.shapes import Shape

# A table per queue: the queue's messages, and the archive acknowledged ones may move to.
VT_QUEUE = """
CREATE TABLE jobs (
    msg_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    read_ct     integer NOT NULL DEFAULT 0,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    vt          timestamptz NOT NULL,
    message     jsonb
);
CREATE INDEX jobs_vt_idx ON jobs (vt);
CREATE TABLE jobs_archive (
    msg_id      bigint PRIMARY KEY,
    read_ct     integer NOT NULL DEFAULT 0,
    enqueued_at timestamptz NOT NULL,
    archived_at timestamptz NOT NULL DEFAULT now(),
    vt          timestamptz NOT NULL,
    message     jsonb
);
CREATE INDEX jobs_archive_archived_at_idx ON jobs_archive (archived_at);
"""
VT_READ = (
    "WITH due AS (SELECT msg_id FROM jobs WHERE vt <= clock_timestamp() ORDER BY msg_id "
    "LIMIT %s FOR UPDATE SKIP LOCKED) "
    "UPDATE jobs m SET vt = clock_timestamp() + %s::interval, read_ct = read_ct + 1 "
    "FROM due WHERE m.msg_id = due.msg_id RETURNING m.msg_id, m.message"
)
VT_DELETE = "DELETE FROM jobs WHERE msg_id = %s RETURNING msg_id"
VT_ARCHIVE = (
    "WITH archived AS (DELETE FROM jobs WHERE msg_id = %s "
    "RETURNING msg_id, read_ct, enqueued_at, vt, message) "
    "INSERT INTO jobs_archive (msg_id, read_ct, enqueued_at, vt, message) "
    "SELECT msg_id, read_ct, enqueued_at, vt, message FROM archived RETURNING msg_id"
)
WAITING = 3_000
ARCHIVED = 200_000


def _work(shape: Shape, ack: str, reads: int = 30) -> None:
    """The application's consumer: reads a batch, acknowledges all but the last message of
    each (left in flight, its vt pushed a minute ahead), as the application's role."""
    with psycopg.connect(shape.db.dsn, autocommit=True) as conn:
        for _ in range(reads):
            batch = conn.execute(VT_READ, (10, "1 minute")).fetchall()
            for msg_id, _message in batch[:-1]:
                conn.execute(ack, (msg_id,))
        flush_stats(conn)


def _build_vt_queue(shape: Shape, archived: int = 0) -> None:
    shape.db.execute(VT_QUEUE)
    if archived:
        # A long-lived queue's archive: every message acknowledged over 30 days.
        shape.db.execute(
            f"""
            INSERT INTO jobs_archive (msg_id, enqueued_at, archived_at, vt, message)
            SELECT -g, t, t + interval '1 second', t + interval '30 seconds', '{{}}'
              FROM (SELECT g, now() - (g::float8 / {archived}) * interval '30 days' AS t
                      FROM generate_series(1, {archived}) AS g) AS s
            """
        )
    shape.db.execute(
        f"""
        INSERT INTO jobs (vt, message)
        SELECT now() - interval '1 second', jsonb_build_object('n', g)
          FROM generate_series(1, {WAITING}) AS g;
        """
    )
    shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")


def _queues(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{q['schema']}.{q['table']}": q for q in report["queues"]}


@pytest.mark.judges("QA201", "QA204", "QA303")
@pytest.mark.parametrize("ack", ["delete", "archive"])
def test_a_visibility_timeout_queue_is_judged_as_the_queue_its_whole_table_is(
    shape: Shape, ack: str
) -> None:
    _build_vt_queue(shape, archived=ARCHIVED if ack == "archive" else 0)
    _work(shape, VT_DELETE if ack == "delete" else VT_ARCHIVE)
    shape.dba.execute(f"ANALYZE {shape.queue}; ANALYZE {shape.schema}.jobs_archive")
    run = shape.check()
    queues = _queues(run.report)
    # The read waits for vt, and nothing marks a row finished: every row is the live set.
    # The archive no claim reads is not a queue.
    assert set(queues) == {shape.queue}, run.report["rejected"]
    queue = queues[shape.queue]
    assert queue["live_predicate"] == "TRUE", queue
    assert "vt <= CLOCK_TIMESTAMP() waits for a time" in queue["reason"]
    assert not [r for r in run.report["rejected"] if r["table"] == "jobs"]
    # Judged, and nothing to say: no archive in the table to prune or to scale the vacuum
    # trigger by, and the read's order is its primary key's.
    for code in ("QA201", "QA204", "QA303"):
        assert_quiet(run, code, shape.queue)
    assert not [f for f in run.report["findings"] if f["target"]["table"] == "jobs_archive"]


# kombu's message table as its SQLAlchemy models create it, under the builders' name.
BROKER = """
CREATE TABLE job_queues (id integer PRIMARY KEY, name varchar(200) UNIQUE);
CREATE SEQUENCE message_id_sequence;
CREATE TABLE jobs (
    id        integer NOT NULL PRIMARY KEY,
    visible   boolean,
    "timestamp" timestamp without time zone,
    payload   text NOT NULL,
    version   smallint NOT NULL,
    queue_id  integer REFERENCES job_queues (id)
);
CREATE INDEX ix_jobs_visible ON jobs (visible);
CREATE INDEX ix_jobs_timestamp ON jobs ("timestamp");
CREATE INDEX ix_jobs_timestamp_id ON jobs ("timestamp", id);
INSERT INTO job_queues VALUES (1, 'celery'), (2, 'emails');
"""
BROKER_GET = (
    "SELECT jobs.id AS jobs_id, jobs.visible AS jobs_visible, jobs.timestamp AS "
    "jobs_timestamp, jobs.payload AS jobs_payload, jobs.version AS jobs_version, "
    "jobs.queue_id AS jobs_queue_id FROM jobs WHERE jobs.queue_id = %s AND "
    "jobs.visible != false ORDER BY jobs.timestamp, jobs.id LIMIT %s FOR UPDATE"
)
BROKER_DELIVERED = (
    "UPDATE jobs SET visible=%s, timestamp=%s::timestamp, version=%s "
    "WHERE jobs.id = %s AND jobs.version = %s"
)
SENT = 1_000
DELIVERED = 300_000


def _build_broker(shape: Shape, delivered: int) -> None:
    shape.db.execute(BROKER)
    if delivered:
        # Delivered over 30 days and kept: visible false, timestamp the delivery time.
        shape.db.execute(
            f"""
            INSERT INTO jobs (id, visible, "timestamp", payload, version, queue_id)
            SELECT nextval('message_id_sequence'), false,
                   (now() - ({delivered} - g)::float8 / {delivered}
                          * interval '30 days')::timestamp,
                   repeat('x', 100), 2, 1 + (g % 10 = 0)::int
              FROM generate_series(1, {delivered}) AS g
            """
        )
    shape.db.execute(
        f"""
        INSERT INTO jobs (id, visible, "timestamp", payload, version, queue_id)
        SELECT nextval('message_id_sequence'), true, now()::timestamp, repeat('y', 100), 1, 1
          FROM generate_series(1, {SENT}) AS g
        """
    )
    shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")


def _consume(shape: Shape, messages: int = 200) -> None:
    """The broker's consumer, one message per transaction, values written into the text."""
    with psycopg.connect(shape.db.dsn) as conn:
        cur = psycopg.ClientCursor(conn)
        for _ in range(messages):
            row = cur.execute(BROKER_GET, (1, 1)).fetchone()
            assert row is not None
            cur.execute(BROKER_DELIVERED, (False, "now", row[4] + 1, row[0], row[4]))
            conn.commit()
        flush_stats(conn)
        conn.commit()


@pytest.mark.judges("QA201", "QA204", "QA501")
def test_a_broker_that_keeps_delivered_messages_is_judged(shape: Shape) -> None:
    _build_broker(shape, DELIVERED)
    _consume(shape)
    shape.dba.execute(f"ANALYZE {shape.queue}")
    run = shape.check()
    (queue,) = [q for q in run.report["queues"] if q["table"] == "jobs"]
    # visible != false (pg_stat_statements: visible <> $2) waits for what visible = true does;
    # the value behind $2 is read from the flag's name, and the reason says so.
    assert queue["live_predicate"] == "visible", queue
    assert "the name of visible" in queue["reason"]
    # The claim waits for the worker that holds the oldest message.
    (lock,) = run.findings("QA501")
    assert lock["severity"] == "warning"
    # 50 + 0.2 x ~300,000 rows against about 800 waiting messages.
    (vacuum,) = run.findings("QA201")
    assert vacuum["severity"] == "warning", vacuum["message"]
    # Kept forever: dated by the timestamp the delivery sets with visible.
    (kept,) = run.findings("QA204")
    ev = kept["evidence"]
    assert kept["severity"] == "warning", kept["message"]
    assert ev["dated_by"] == "timestamp" and ev["dated_by_kind"] == "finish"
    assert "sets it with visible" in ev["dated_by_from"]
    assert 29 < ev["oldest_row_age_days"] <= 30.1
    (step,) = kept["fix"]["steps"]
    assert "AND (visible) IS NOT TRUE" in step["sql"] and "<condition" not in step["sql"]
    shape.apply_fix(vacuum)
    assert_quiet(shape.check(), "QA201", shape.queue)
    waiting = shape.dba.execute(f"SELECT count(*) FROM {shape.queue} WHERE visible")[0][0]
    shape.apply_fix(kept, review=True)
    ((left, kept_waiting, within),) = shape.dba.execute(
        "SELECT count(*), count(*) FILTER (WHERE visible), "
        f"coalesce(max(now()::timestamp - timestamp) FILTER (WHERE NOT visible), '0') "
        f"< interval '7 days' FROM {shape.queue}"
    )
    # About 7 of the 30 days of deliveries are kept, and no waiting message is deleted.
    assert kept_waiting == waiting and within
    assert left < DELIVERED * 0.3
    shape.dba.execute(f"ANALYZE {shape.queue}")
    assert_quiet(shape.check(), "QA204", shape.queue)


@pytest.mark.judges("QA201", "QA204", "QA501")
def test_a_fresh_broker_is_judged_and_only_its_lock_is_wrong(shape: Shape) -> None:
    _build_broker(shape, 0)
    _consume(shape)
    shape.dba.execute(f"ANALYZE {shape.queue}")
    run = shape.check()
    (lock,) = run.findings("QA501")
    assert lock["target"]["table"] == "jobs"
    for code in ("QA201", "QA204"):
        assert_quiet(run, code, shape.queue)
