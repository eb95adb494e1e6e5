"""Drive Django's task framework with the django-tasks-db backend: `migrate`, `enqueue`, `work`.

The database is PostgreSQL through psycopg, on the unix socket named by the PG* environment
variables. CORPUS_DJANGO_BINDING=server turns on psycopg's server-side binding (Django's
``server_side_binding`` option), which changes the statement text PostgreSQL sees.
"""

import importlib
import json
import os
import sys
from datetime import timedelta

import django
from django.conf import settings

if not settings.configured:
    options = (
        {"server_side_binding": True} if os.environ.get("CORPUS_DJANGO_BINDING") == "server" else {}
    )
    settings.configure(
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "HOST": os.environ["PGHOST"],
                "PORT": os.environ["PGPORT"],
                "USER": os.environ["PGUSER"],
                "NAME": os.environ["PGDATABASE"],
                "OPTIONS": options,
            }
        },
        INSTALLED_APPS=["django_tasks_db"],
        TASKS={
            "default": {
                "BACKEND": "django_tasks_db.DatabaseBackend",
                "QUEUES": list(
                    json.loads(os.environ.get("CORPUS_WORKLOAD", "{}")).get("queues", ["default"])
                ),
            }
        },
        USE_TZ=True,
    )
    django.setup()

from django.core.management import call_command
from django.db import transaction
from django.tasks import task
from django.utils import timezone


@task()
def noop(n: int) -> None:
    pass


def main(command: str) -> None:
    workload = json.loads(os.environ.get("CORPUS_WORKLOAD", "{}"))
    if command == "migrate":
        call_command("migrate", verbosity=0)
    elif command == "enqueue":
        with transaction.atomic():
            for queue, count in workload["queues"].items():
                for n in range(count):
                    noop.using(queue_name=queue).enqueue(n)
            later = noop.using(run_after=timezone.now() + timedelta(hours=1))
            for n in range(workload["scheduled"]):
                later.enqueue(n)
    elif command == "work":
        call_command(
            "db_worker",
            queue_name="*",
            interval=0.2,
            startup_delay=False,
            reload=False,
            verbosity=0,
        )
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    # Re-imported under its module name so the tasks' paths ("django_driver.noop") resolve in
    # the worker, which imports them by path (the driver's folder, which Python puts first on
    # sys.path for a script, holds it).
    importlib.import_module("django_driver").main(sys.argv[1])
