"""Drive pgmq through its Python client: `install_pgmq_from_sql`, `PGMQueue`.

The connection comes from the PG* environment variables (a unix socket). The package ships
pgmq's SQL (pgmq/sql/pgmq.sql), installed as a plain schema where the extension is not
available; ``create_queue`` makes a table per queue (``pgmq.q_<name>``, and its archive
``pgmq.a_<name>``). A consumer reads one message at a time with ``read`` (pgmq.read: the due
messages by ``vt``, locked with SKIP LOCKED, their ``vt`` pushed ahead by the visibility
timeout) and acknowledges it: the 'emails' queue's consumer archives what it has handled
(``archive``: moved into ``a_emails``), the others delete it (``delete``). One consumer
thread per queue, as a deployment runs a worker per queue.
"""

import json
import os
import signal
import sys
import threading
import time

import psycopg
from pgmq import SyncPGMQueue
from pgmq.install import install_pgmq_from_sql

WORKLOAD = json.loads(os.environ.get("CORPUS_WORKLOAD", "{}"))
DSN = (
    f"host={os.environ['PGHOST']} port={os.environ['PGPORT']} "
    f"dbname={os.environ['PGDATABASE']} user={os.environ['PGUSER']}"
)
ARCHIVED = "emails"  # the queue whose handled messages are archived, not deleted


def client() -> SyncPGMQueue:
    return SyncPGMQueue(conn_string=DSN, init_extension=False, pool_size=2)


def consume(name: str) -> None:
    queue = client()
    ack = queue.archive if name == ARCHIVED else queue.delete
    while True:
        message = queue.read(name, vt=30)
        if message is None:
            time.sleep(0.05)
            continue
        ack(name, message.msg_id)


def main(command: str) -> None:
    if command == "migrate":
        with psycopg.connect(DSN) as conn:
            install_pgmq_from_sql(conn=conn)
            conn.commit()
        queue = client()
        for name in WORKLOAD.get("queues", {}):
            queue.create_queue(name)
    elif command == "enqueue":
        queue = client()
        n = 0
        for name, count in WORKLOAD["queues"].items():
            for i in range(count):
                queue.send(name, {"task": "noop", "n": n + i})
            n += count
        for i in range(WORKLOAD["scheduled"]):
            queue.send("default", {"task": "noop", "n": n + i}, delay=3600)
    elif command == "work":
        for name in WORKLOAD["queues"]:
            threading.Thread(target=consume, args=(name,), daemon=True).start()
        # SIGTERM ends the process as it ends a deployment's worker.
        signal.pause()
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1])
