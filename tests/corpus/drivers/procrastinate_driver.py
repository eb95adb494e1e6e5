"""Drive procrastinate through its public API: `migrate`, `enqueue`, `work`.

The connection comes from the PG* environment variables (a unix socket), as libpq reads them.
"""

import json
import os
import sys

import procrastinate

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=""))


@app.task(name="noop")
def noop(n: int) -> None:
    pass


def main(command: str) -> None:
    workload = json.loads(os.environ.get("CORPUS_WORKLOAD", "{}"))
    if command == "migrate":
        with app.open():
            app.schema_manager.apply_schema()
    elif command == "enqueue":
        with app.open():
            n = 0
            for queue, count in workload["queues"].items():
                noop.configure(queue=queue).batch_defer(*({"n": n + i} for i in range(count)))
                n += count
            later = noop.configure(queue="default", schedule_in={"hours": 1})
            later.batch_defer(*({"n": n + i} for i in range(workload["scheduled"])))
    elif command == "work":
        app.run_worker(concurrency=8, install_signal_handlers=True)
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1])
