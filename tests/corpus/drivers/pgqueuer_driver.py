"""Drive pgqueuer through its public API over asyncpg: `migrate`, `enqueue`, `work`.

The connection comes from the PG* environment variables (a unix socket), as asyncpg reads them.
"""

import asyncio
import json
import os
import signal
import sys
from datetime import timedelta

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries


async def main(command: str) -> None:
    workload = json.loads(os.environ.get("CORPUS_WORKLOAD", "{}"))
    conn = await asyncpg.connect()
    driver = AsyncpgDriver(conn)
    if command == "migrate":
        await Queries(driver).install()
    elif command == "enqueue":
        queries = Queries(driver)
        for entrypoint, count in workload["queues"].items():
            await queries.enqueue([entrypoint] * count, [None] * count, [0] * count)
        later = workload["scheduled"]
        await queries.enqueue(
            ["default"] * later, [None] * later, [0] * later, [timedelta(hours=1)] * later
        )
    elif command == "work":
        pgq = PgQueuer(driver)
        for entrypoint in workload["queues"]:
            pgq.entrypoint(entrypoint)(noop)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, pgq.shutdown.set)
        await pgq.run(batch_size=10)
    else:
        raise SystemExit(f"unknown command {command!r}")
    await conn.close()


async def noop(job: object) -> None:
    pass


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
