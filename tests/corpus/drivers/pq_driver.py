"""Drive pq through its public API: `PQ.create`, its task decorator, `Queue.work`.

The connection comes from the PG* environment variables (a unix socket), as libpq reads them.
`pq.tasks` is pq's own worker: a task is a function registered with ``@queue.task()``;
calling it puts a job (its path, arguments and retry settings as the job's JSON), and
``queue.work()`` takes jobs one by one with pq's claim and runs them. pq has one worker loop
per queue and connection, so each queue gets a thread with a connection of its own, as a
deployment runs one worker process per queue.
"""

import json
import os
import signal
import sys
import threading
from datetime import timedelta

import psycopg2
from pq.tasks import PQ

WORKLOAD = json.loads(os.environ.get("CORPUS_WORKLOAD", "{}"))
QUEUES = {name: PQ(psycopg2.connect(""))[name] for name in WORKLOAD.get("queues", {})}


def _noop(job_id: int, n: int) -> None:
    pass


# One task per queue, registered at import: the worker finds a job's function by the path the
# put wrote (this module's, run as a script: __main__).
TASKS = {name: queue.task()(_noop) for name, queue in QUEUES.items()}


def main(command: str) -> None:
    if command == "migrate":
        PQ(psycopg2.connect("")).create()
    elif command == "enqueue":
        n = 0
        for name, count in WORKLOAD["queues"].items():
            for i in range(count):
                TASKS[name](n + i)
            n += count
        for i in range(WORKLOAD["scheduled"]):
            TASKS["default"](n + i, _schedule_at=timedelta(hours=1))
    elif command == "work":
        for queue in QUEUES.values():
            threading.Thread(target=queue.work, daemon=True).start()
        # SIGTERM ends the process as it ends a deployment's worker: a job taken is done.
        signal.pause()
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1])
