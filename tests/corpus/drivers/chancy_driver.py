"""Drive chancy through its public API: `migrate`, `enqueue`, `work`.

The connection comes from the PG* environment variables (a unix socket), as libpq reads them.
The worker runs chancy's default plugins (leadership, pruner, recovery, metrics, workflow),
each with its default settings except how often it polls: in production they run every 60 s
for as long as the worker lives, so a short run polls every second or two to record the same
statements (the pruner's rule, its batch size and the heartbeat timeout recovery reads stay
chancy's defaults).
"""

import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta

from chancy import Chancy, Job, Queue, Worker
from chancy.plugins.leadership import Leadership
from chancy.plugins.pruner import Pruner
from chancy.plugins.recovery import Recovery

# What the process executor's children import: this file, from the driver's directory.
FUNC = "chancy_driver.noop"


def noop(n: int) -> None:
    pass


def app() -> Chancy:
    return Chancy(
        "",
        plugins=[
            Leadership(poll_interval=1, timeout=5),
            Pruner(poll_interval=2),
            Recovery(poll_interval=2),
        ],
    )


async def main(command: str) -> None:
    workload = json.loads(os.environ.get("CORPUS_WORKLOAD", "{}"))
    async with app() as chancy:
        if command == "migrate":
            await chancy.migrate()
            for queue in workload["queues"]:
                # The default executor (a process pool); eager polling fetches again as soon
                # as a job finishes instead of waiting for the next poll.
                await chancy.declare(
                    Queue(queue, concurrency=10, polling_interval=1, eager_polling=True)
                )
        elif command == "enqueue":
            n = 0
            jobs = []
            for queue, count in workload["queues"].items():
                jobs += [Job(func=FUNC, queue=queue, kwargs={"n": n + i}) for i in range(count)]
                n += count
            later = datetime.now(tz=UTC) + timedelta(hours=1)
            jobs += [
                Job(func=FUNC, queue="default", kwargs={"n": n + i}, scheduled_at=later)
                for i in range(workload["scheduled"])
            ]
            async for _ in chancy.push_many(jobs):
                pass
        elif command == "work":
            # SIGTERM stops it as a deployment's would: running jobs drain, updates flush.
            async with Worker(chancy) as worker:
                await worker.wait_for_shutdown()
        else:
            raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
