"""Drive DBOS Transact through its public API: `DBOS.launch`, `DBOSClient.enqueue`, queues.

The connection comes from the PG* environment variables (a unix socket), given to DBOS as its
system database URL (SQLAlchemy over psycopg 3, which binds parameters on the server).
``DBOS.launch`` runs DBOS's own migrations into the ``dbos`` schema. Jobs are workflows
enqueued by a client, as another service of a deployment enqueues them; the worker is a DBOS
process that registered the workflow and the queues and runs them until it is stopped.
"""

import json
import os
import signal
import sys
from urllib.parse import quote

from dbos import DBOS, DBOSClient, DBOSConfig

APP = "corpus"
WORKLOAD = json.loads(os.environ.get("CORPUS_WORKLOAD", "{}"))
URL = (
    f"postgresql+psycopg://{quote(os.environ['PGUSER'])}@/{quote(os.environ['PGDATABASE'])}"
    f"?host={quote(os.environ['PGHOST'])}&port={os.environ['PGPORT']}"
)


@DBOS.step()
def double(n: int) -> int:
    return 2 * n


@DBOS.workflow()
def job(n: int) -> int:
    return double(n)


def main(command: str) -> None:
    if command == "enqueue":
        client = DBOSClient(system_database_url=URL, application_name=APP)
        n = 0
        for queue, count in WORKLOAD["queues"].items():
            for i in range(count):
                client.enqueue({"queue_name": queue, "workflow_name": "job"}, n + i)
            n += count
        for i in range(WORKLOAD["scheduled"]):
            options = {"queue_name": "default", "workflow_name": "job", "delay_seconds": 3600.0}
            client.enqueue(options, n + i)
        client.destroy()
        return
    config: DBOSConfig = {"name": APP, "system_database_url": URL}
    DBOS(config=config)
    if command == "migrate":
        DBOS.launch()
        DBOS.destroy()
    elif command == "work":
        DBOS.launch()
        # Queues are registered once DBOS runs (their settings live in its system database);
        # they poll every 0.1 s instead of 1 s, so a short run records what a long one does.
        for queue in WORKLOAD["queues"]:
            DBOS.register_queue(queue, worker_concurrency=10, polling_interval_sec=0.1)
        # SIGTERM ends the process as it ends a deployment's: DBOS recovers what was running.
        signal.pause()
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1])
