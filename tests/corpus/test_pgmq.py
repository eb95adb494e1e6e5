"""pgmq (PyPI's client, which ships pgmq's SQL): a visibility-timeout queue, a table per queue.

``pgmq.create`` makes ``pgmq.q_<name>`` (``msg_id`` identity key, ``read_ct``,
``enqueued_at``, ``last_read_at``, ``vt``, ``message``, ``headers``; an index on ``vt``) and
its archive ``pgmq.a_<name>`` (the same and ``archived_at``). A message waits until its ``vt``
passes. ``pgmq.read`` builds its claim with ``format()`` and runs it with ``EXECUTE``: ``WITH
cte AS (SELECT msg_id FROM pgmq.q_<name> WHERE vt <= clock_timestamp() AND CASE WHEN '{}' !=
'{}'::jsonb THEN (message @> '{}')::integer ELSE 1 END = 1 ORDER BY msg_id ASC LIMIT $1 FOR
UPDATE SKIP LOCKED) UPDATE pgmq.q_<name> m SET last_read_at = clock_timestamp(), vt =
clock_timestamp() + '30 seconds', read_ct = read_ct + 1 FROM cte WHERE m.msg_id = cte.msg_id
RETURNING ...``: the due messages in id order, each then in flight until its new ``vt``. An
acknowledged message is deleted (``pgmq.delete``) or moved into the archive (``pgmq.archive``,
a ``DELETE ... RETURNING`` into an ``INSERT``). Nothing in the queue's table marks a message
finished: every row waits or is in flight, and the archive is read by no claim.

The claim runs inside a function, its table named by ``format()``: pg_stat_statements records
it only with ``track = all`` (as nested statements), and the function's body names no table.
"""

from tests.corpus import envs
from tests.corpus.expect import Claim, Codes, CorpusSuite, Expect, Live
from tests.corpus.library import Library, Workload

ARCHIVE_ROWS = 1_000_000
QUEUES = ("default", "emails", "reports")

PGMQ = Library(
    name="pgmq",
    env=envs.PythonEnv("pgmq", ("pgmq==1.1.4",)),
    driver="pgmq_driver.py",
    done_sql="SELECT sum(total_messages - queue_length) FROM pgmq.metrics_all()",
    age_sql=(
        # The 'emails' queue archives what it handled: a month of its messages in a_emails,
        # numbered before the fresh run's (msg_id is its key there).
        f"""
        INSERT INTO pgmq.a_emails (msg_id, read_ct, enqueued_at, last_read_at, archived_at,
                                   vt, message)
        SELECT -g, 1, t, t + interval '1 s', t + interval '2 s', t + interval '31 s',
               jsonb_build_object('task', 'noop', 'n', g)
          FROM generate_series(1, {ARCHIVE_ROWS}) AS g,
               LATERAL (SELECT now() - g * interval '2592 ms' AS t) AS at
        """,
    ),
    workload=Workload((("default", 3000), ("emails", 300), ("reports", 100)), scheduled=50),
    rerun=Workload((("default", 300), ("emails", 40), ("reports", 20)), scheduled=10),
    # The claim is EXECUTEd inside pgmq.read: only nested statements show it.
    track="all",
)

CLAIMS = tuple(
    Claim(
        f"pgmq.q_{name}",
        (
            f"from pgmq.q_{name} where vt <= clock_timestamp()",
            "order by msg_id asc limit $1 for update skip locked",
        ),
        f"pgmq.read on {name}: the due messages by vt, their vt pushed ahead",
    )
    for name in QUEUES
)
NO_ARCHIVE = {
    "QA204": "the queue tables hold no finished message: pgmq deletes an acknowledged "
    "message or moves it into the archive table",
    "QA201": "every row of a queue table is waiting or in flight: the trigger is not "
    "scaled by an archive",
    "QA101": "every row of a queue table is live: no index covers an archive",
}


class TestPgmq(CorpusSuite):
    library = PGMQ
    expect = Expect(
        queues={f"pgmq.q_{name}": Live.every_row() for name in QUEUES},
        not_queues={
            **{
                f"pgmq.a_{name}": "the archive of acknowledged messages: no claim reads it"
                for name in QUEUES
            },
            "pgmq.meta": "the list of queues",
        },
        claims=CLAIMS,
        not_claims=(),
        codes={"fresh": Codes(forbidden=NO_ARCHIVE), "aged": Codes(forbidden=NO_ARCHIVE)},
    )
