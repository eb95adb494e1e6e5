"""Drive firm-queue through its public API: `migrate`, `enqueue`, `work`.

The connection comes from the PG* environment variables (a unix socket): SQLAlchemy's
psycopg dialect with an empty URL lets libpq read them. `migrate` runs the library's bundled
Alembic migrations; `work` runs its fork supervisor as a deployment does (two worker
processes and a dispatcher, which also runs the concurrency maintenance), polling the queues
named in CORPUS_FIRM_QUEUES (default ``*``, every queue).
"""

import json
import os
import random
import sys
from datetime import timedelta
from pathlib import Path

import firm.queue as fq
from alembic import command
from alembic.config import Config
from firm.queue import queues as fq_queues
from firm.queue.supervisor import DispatcherConfig, ForkSupervisor, SupervisorConfig, WorkerConfig

URL = "postgresql+psycopg://"
runtime = fq.configure(URL)


@fq.job(queue="default")
def noop(n: int) -> None:
    pass


# Two at a time per key: the rest of a key's jobs wait in blocked_executions, and each
# finish promotes the next (semaphore release, then the blocked row taken SKIP LOCKED).
@fq.job(queue="emails", concurrency={"key": lambda n: n % 8, "to": 2})
def send_email(n: int) -> None:
    pass


# A fifth of the runs fail: the retry goes to scheduled_executions a second later, and the
# dispatcher moves it back to ready; one in a hundred or so fails all three attempts.
@fq.job(queue="reports", attempts=3, backoff=1.0)
def report(n: int) -> None:
    if random.random() < 0.2:
        raise RuntimeError("report source unavailable")


@fq.job(queue="abandoned")
def abandoned(n: int) -> None:
    pass


JOBS = {"default": noop, "emails": send_email, "reports": report}


def main(cmd: str) -> None:
    workload = json.loads(os.environ.get("CORPUS_WORKLOAD", "{}"))
    if cmd == "migrate":
        config = Config()
        config.set_main_option("script_location", str(Path(fq.__file__).parent / "migrations"))
        config.set_main_option("sqlalchemy.url", URL)
        command.upgrade(config, "head")
    elif cmd == "enqueue":
        n = 0
        for queue, count in workload["queues"].items():
            for i in range(count):
                JOBS[queue].enqueue(n + i)
            n += count
        for i in range(workload["scheduled"]):
            noop.enqueue_in(timedelta(hours=1), n + i)
        # An operator discards a queue's backlog: queues.clear takes its ready rows
        # FOR UPDATE SKIP LOCKED and deletes them with their jobs.
        for i in range(20):
            abandoned.enqueue(i)
        fq_queues.clear(runtime, "abandoned")
    elif cmd == "work":
        queues = tuple(os.environ.get("CORPUS_FIRM_QUEUES", "*").split(","))
        worker = WorkerConfig(queues=queues, threads=8, poll_interval=0.1)
        config = SupervisorConfig(
            workers=[worker, worker], dispatchers=[DispatcherConfig(poll_interval=1.0)]
        )
        ForkSupervisor(runtime, config).start()  # until SIGTERM: drain, recover, deregister
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main(sys.argv[1])
