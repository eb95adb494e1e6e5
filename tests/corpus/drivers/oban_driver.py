"""Drive Oban (the Python port) through its public API: `migrate`, `enqueue`, `work`.

The connection comes from the PG* environment variables (a unix socket), as libpq reads them.
"""

import asyncio
import json
import os
import signal
import sys
from datetime import timedelta

from oban import Oban, worker
from oban.schema import install
from psycopg_pool import AsyncConnectionPool


class Noop:
    async def process(self, job: object) -> None:
        return None


# Oban's decorator, applied by call: it gives the class its `new` (the class it returns is
# Noop itself), which the type checker, without Oban installed, cannot see on `Noop`.
NOOP = worker(queue="default")(Noop)


async def main(command: str) -> None:
    workload = json.loads(os.environ.get("CORPUS_WORKLOAD", "{}"))
    async with AsyncConnectionPool("", open=False, min_size=1, max_size=8) as pool:
        if command == "migrate":
            await install(pool)
        elif command == "enqueue":
            async with Oban(pool=pool) as oban:
                jobs = [
                    NOOP.new({"n": n}, queue=queue)
                    for queue, count in workload["queues"].items()
                    for n in range(count)
                ]
                later = timedelta(hours=1)
                jobs += [
                    NOOP.new({"n": n}, scheduled_in=later) for n in range(workload["scheduled"])
                ]
                await oban.enqueue_many(jobs)
        elif command == "work":
            queues = dict.fromkeys(workload["queues"], 10)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, stop.set)
            async with Oban(pool=pool, queues=queues, stager={"interval": 0.5}):
                await stop.wait()
        else:
            raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
