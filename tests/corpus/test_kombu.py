"""kombu (PyPI), its SQLAlchemy transport over psycopg2: a broker that keeps what it delivered.

The transport's models (kombu/transport/sqlalchemy/models.py) make ``kombu_queue`` (a name per
queue) and ``kombu_message``: ``visible`` (a nullable boolean, true when SQLAlchemy inserts a
message; no server default), ``timestamp`` (set by SQLAlchemy on insert and again on every
update), ``payload``, ``version`` (SQLAlchemy's version counter) and ``queue_id``, with plain
indexes on ``visible``, on ``timestamp`` and on ``(timestamp, id)``.

A consumer's get (``Channel._get``) takes the oldest visible message of its queue with
``SELECT ... FROM kombu_message WHERE kombu_message.queue_id = %(queue_id_1)s AND
kombu_message.visible != false ORDER BY kombu_message.timestamp, kombu_message.id LIMIT
%(param_1)s FOR UPDATE``: no SKIP LOCKED, so a second consumer of the queue waits for the
first one's transaction. The session then flushes ``UPDATE kombu_message SET visible=...,
timestamp=..., version=... WHERE kombu_message.id = ... AND kombu_message.version = ...`` and
commits. Nothing deletes a delivered message (only a purge deletes, every message of a queue):
the table keeps every message ever sent. psycopg2 writes every value into the text, which
pg_stat_statements shows as ``$n``: the claim reads ``visible != $2``.
"""

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, Live
from tests.corpus.library import Library, Workload

ARCHIVE_ROWS = 1_000_000
TABLE = "public.kombu_message"

KOMBU = Library(
    name="kombu",
    env=envs.PythonEnv("kombu", ("kombu==5.7.0", "SQLAlchemy==2.1.9", "psycopg2-binary==2.9.13")),
    driver="kombu_driver.py",
    done_sql="SELECT count(*) FROM kombu_message WHERE NOT visible",
    age_sql=(
        # Messages as the transport leaves them once delivered: invisible, timestamp the
        # delivery's, version 2, the queues in the workload's proportions, over 30 days.
        f"""
        INSERT INTO kombu_message (id, visible, "timestamp", payload, version, queue_id)
        SELECT nextval('message_id_sequence'), false, t,
               json_build_object(
                   'body', encode(convert_to(json_build_object('task', 'noop', 'n', g)::text,
                                             'UTF8'), 'base64'),
                   'content-encoding', 'utf-8', 'content-type', 'application/json',
                   'headers', '{{}}'::json,
                   'properties', json_build_object(
                       'delivery_mode', 2, 'priority', 0, 'body_encoding', 'base64',
                       'delivery_info', json_build_object('exchange', q.name,
                                                          'routing_key', q.name),
                       'delivery_tag', gen_random_uuid())
               )::text,
               2, q.id
          FROM generate_series(1, {ARCHIVE_ROWS}) AS g,
               LATERAL (SELECT (now() - interval '30 days' + g * interval '2592 ms')::timestamp
                        AS t) AS at,
               LATERAL (SELECT id, name FROM kombu_queue
                         WHERE name = CASE WHEN g % 20 < 16 THEN 'celery'
                                           WHEN g % 20 < 18 THEN 'emails' ELSE 'reports' END)
                    AS q
        """,
    ),
    workload=Workload((("celery", 3000), ("emails", 300), ("reports", 100)), scheduled=0),
    rerun=Workload((("celery", 300), ("emails", 40), ("reports", 20)), scheduled=0),
)

CLAIM = Claim(
    TABLE,
    (
        "from kombu_message where kombu_message.queue_id =",
        "and kombu_message.visible !=",
        "order by kombu_message.timestamp, kombu_message.id",
        "for update",
    ),
    "Channel._get: the oldest visible message of the queue, FOR UPDATE without SKIP LOCKED",
)
VISIBLE = Live("visible", frozenset({"true"}), ("true", "false"))
LOCK = {
    "QA501": "Channel._get locks the oldest visible message with FOR UPDATE and no SKIP "
    "LOCKED: a second consumer of the queue waits for the first one's commit",
}
SMALL = {
    "QA101": "the table is small: its indexes are far under the 8 MiB minimum",
    "QA201": "50 + 0.2 x ~3,400 rows is far under the 50,000 minimum trigger",
    "QA204": "the table is small: a few thousand delivered messages, all of today",
}


class TestKombu(CorpusSuite):
    library = KOMBU
    expect = Expect(
        queues={TABLE: VISIBLE},
        not_queues={"public.kombu_queue": "queue names, the foreign-key target of messages"},
        claims=(CLAIM,),
        not_claims=(),
        codes={
            "fresh": Codes(required=LOCK, forbidden=SMALL),
            "aged": Codes(
                required={
                    **LOCK,
                    "QA201": "50 + 0.2 x ~1 M rows is ~200,000 dead tuples against a few "
                    "hundred waiting messages, and kombu sets no autovacuum reloption",
                    "QA204": "nothing in kombu deletes a delivered message: the table keeps "
                    "30 days of them, dated by the timestamp the delivery sets with visible",
                },
            ),
        },
        targets={"aged": {"QA201": TABLE, "QA204": TABLE}},
    )
