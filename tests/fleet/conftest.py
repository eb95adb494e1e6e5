"""A server of its own with 50-odd databases, built once per major: the fleet the tests of
this folder check. It is not the session's shared server, whose databases come and go with
the other tests (--all-databases would list them).

The databases, as a platform team's server holds them:

- ``app01`` .. ``app45``: the same small, healthy queue (copies of one template, which is
  itself left out: a template is never checked);
- ``seed_archive``: the archive case of the seeds (400,000 finished jobs, a (status,
  created_at) index): QA101 and QA201 warn;
- ``seed_novacuum``: autovacuum turned off for the queue table: QA203 warns;
- ``seed_ids``: an integer id 93 % used: QA206 is critical;
- ``closed``: accepts no connections (datallowconn false);
- ``locked``: CONNECT revoked from PUBLIC, so the monitoring role may not connect;
- ``rejected``: pg_hba.conf rejects the monitoring role there;
- ``postgres``.

Checked as ``monitor``: pg_monitor and the documented GRANTs of the checks the seeds judge,
given in each database.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qadvisor.demo.pgserver import LocalServer, start_server
from tests.conftest import TestDB
from tests.helpers import build_archive_queue, qadvisor
from tests.json_schemas import assert_valid_fleet_report
from tests.shapes import documented_grants, facts_of

HEALTHY = tuple(f"app{n:02d}" for n in range(1, 46))
# Each seed database, and the checks that find something in it.
SEEDS = {
    "seed_archive": ("QA101", "QA201"),
    "seed_novacuum": ("QA203",),
    "seed_ids": ("QA206",),
}
CLOSED, LOCKED, REJECTED = "closed", "locked", "rejected"
TEMPLATE = "queue_template"
MONITOR = "monitor"
# The id the seed_ids queue has reached, of integer's 2,147,483,647.
IDS_USED = 2_000_000_000


@dataclass
class Fleet:
    server: LocalServer

    def dsn(self, dbname: str = "postgres", user: str = MONITOR) -> str:
        return self.server.dsn(dbname, user=user)

    def db(self, name: str) -> TestDB:
        return TestDB(name, self.server)

    @property
    def listed(self) -> set[str]:
        """Every database --all-databases names: all but the templates."""
        return {*HEALTHY, *SEEDS, CLOSED, LOCKED, REJECTED, "postgres"}


def copy_database(fleet: Fleet, name: str, template: str) -> None:
    """CREATE DATABASE name TEMPLATE template, which PostgreSQL refuses while any session is
    connected to the template: an autovacuum worker or a builder's session that is still
    closing is ended first, and the copy tried again."""
    admin = fleet.db("postgres")
    for attempt in range(20):
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            [template],
        )
        try:
            admin.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
            return
        except psycopg.errors.ObjectInUse:
            if attempt == 19:
                raise
            time.sleep(0.1)


def _grant(db: TestDB, codes: tuple[str, ...]) -> None:
    columns = [r[0] for r in db.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'public.jobs'::regclass "
        "AND attnum > 0 AND NOT attisdropped")]  # fmt: skip
    for statement in documented_grants(facts_of(codes), MONITOR, "public", columns, []):
        db.execute(statement)


def build(server: LocalServer) -> Fleet:
    fleet = Fleet(server)
    admin = fleet.db("postgres")
    admin.execute(f"CREATE ROLE {MONITOR} LOGIN IN ROLE pg_monitor")
    admin.execute(f"CREATE DATABASE {TEMPLATE}")
    template = fleet.db(TEMPLATE)
    template.execute("CREATE EXTENSION pg_stat_statements")
    build_archive_queue(template, archive=2_000, live=50, composite=False, partial=True)
    _grant(template, ("QA101", "QA201", "QA203", "QA204", "QA206"))
    admin.execute(f"ALTER DATABASE {TEMPLATE} IS_TEMPLATE true")
    for name in (*HEALTHY, CLOSED, LOCKED, REJECTED):
        copy_database(fleet, name, TEMPLATE)
    admin.execute(f"ALTER DATABASE {CLOSED} ALLOW_CONNECTIONS false")
    admin.execute(f"REVOKE CONNECT ON DATABASE {LOCKED} FROM PUBLIC")
    for name, codes in SEEDS.items():
        admin.execute(f"CREATE DATABASE {name}")
        db = fleet.db(name)
        db.execute("CREATE EXTENSION pg_stat_statements")
        if name == "seed_archive":
            build_archive_queue(db)
        elif name == "seed_novacuum":
            build_archive_queue(db, archive=2_000, live=50, composite=False, partial=True,
                                reloptions="autovacuum_enabled = false")  # fmt: skip
        else:
            db.execute(
                f"""
                CREATE TABLE jobs (
                    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    status text NOT NULL DEFAULT 'pending',
                    created_at timestamptz NOT NULL DEFAULT now()
                );
                CREATE INDEX jobs_pending ON jobs (created_at) WHERE status = 'pending';
                SELECT setval(pg_get_serial_sequence('jobs', 'id'), {IDS_USED});
                INSERT INTO jobs (status) SELECT CASE WHEN g % 10 = 0 THEN 'pending'
                    ELSE 'done' END FROM generate_series(1, 2000) g;
                ANALYZE jobs;
                """
            )
        _grant(db, codes)
    hba = server.data_dir / "pg_hba.conf"
    hba.write_text(f"local {REJECTED} {MONITOR} reject\n" + hba.read_text())
    admin.execute("SELECT pg_reload_conf()")
    return fleet


@pytest.fixture(scope="session")
def fleet(pg_server: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """The fleet on a server of the tested major, started once: a test that changes one of
    its databases makes a copy of its own and drops it."""
    server = start_server(pg_server.bin_dir, tmp_path_factory.mktemp(f"fleet{pg_server.port}"))
    try:
        yield build(server)
    finally:
        server.stop()


@dataclass
class FleetRun:
    """One `qadvisor check --all-databases` of the fleet: its exit code, the JSON report on
    stdout, and the same report in the other formats, written by --output in the same run."""

    rc: int
    stderr: str
    report: dict[str, Any]
    files: dict[str, Path]  # format -> file


@pytest.fixture(scope="session")
def fleet_run(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> FleetRun:
    out = tmp_path_factory.mktemp("fleet-run")
    files = {fmt: out / f"qadvisor.{fmt}" for fmt in ("openmetrics", "sarif", "junit", "text",
                                                       "markdown", "html")}  # fmt: skip
    outputs = [a for fmt, path in files.items() for a in ("--output", f"{fmt}:{path}")]
    run = qadvisor("check", "--all-databases", fleet.dsn(), "--jobs", "4", *outputs,
                   "--format", "json", timeout=600)  # fmt: skip
    assert run.stdout.startswith("{"), run.stderr
    report = json.loads(run.stdout)
    assert_valid_fleet_report(report)
    return FleetRun(run.rc, run.stderr, report, files)


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path
