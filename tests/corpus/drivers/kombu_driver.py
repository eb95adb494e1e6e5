"""Drive kombu's SQLAlchemy transport through kombu's public API: `Connection.SimpleQueue`.

The broker URL is built from the PG* environment variables (a unix socket) for SQLAlchemy's
psycopg2 dialect. The transport creates its two tables (``kombu_queue``, ``kombu_message``)
with SQLAlchemy's ``create_all`` when a channel first opens; ``put`` inserts a message,
``get`` is the transport's ``_get`` (the oldest visible message of the queue, locked with
``FOR UPDATE``, then marked invisible) and ``ack`` does nothing more: a delivered message
stays in the table. One consumer thread per queue, each with a connection of its own, as a
deployment runs a worker per queue.
"""

import json
import os
import signal
import sys
import threading
from queue import Empty

from kombu import Connection

WORKLOAD = json.loads(os.environ.get("CORPUS_WORKLOAD", "{}"))
URL = (
    f"sqla+postgresql+psycopg2://{os.environ['PGUSER']}@/{os.environ['PGDATABASE']}"
    f"?host={os.environ['PGHOST']}&port={os.environ['PGPORT']}"
)


def consume(name: str) -> None:
    with Connection(URL) as conn:
        queue = conn.SimpleQueue(name)
        while True:
            try:
                message = queue.get(timeout=1)
            except Empty:
                continue
            message.ack()


def main(command: str) -> None:
    if command == "migrate":
        with Connection(URL) as conn:
            for name in WORKLOAD.get("queues", {}):
                conn.SimpleQueue(name).close()
    elif command == "enqueue":
        n = 0
        with Connection(URL) as conn:
            for name, count in WORKLOAD["queues"].items():
                queue = conn.SimpleQueue(name)
                for i in range(count):
                    queue.put({"task": "noop", "n": n + i})
                queue.close()
                n += count
    elif command == "work":
        for name in WORKLOAD["queues"]:
            threading.Thread(target=consume, args=(name,), daemon=True).start()
        # SIGTERM ends the process as it ends a deployment's worker.
        signal.pause()
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1])
