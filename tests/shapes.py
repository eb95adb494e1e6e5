"""Where a pathology test builds its queue, which role checks it, and who applies the fix.

Every real-server pathology test of a check takes the ``shape`` fixture (tests/conftest.py),
which runs it in two shapes:

- ``public-superuser``: the queue in ``public``, built, checked and fixed by the superuser;
- ``app-monitor``: the queue in schema ``app``, built by the application's role, which owns
  the schema and whose search_path in the database is ``app`` (set with ALTER ROLE ... IN
  DATABASE), so the builders' unqualified names land there and the claims a test gives with
  ``--query`` stay unqualified, as the application writes them: qadvisor resolves them.
  It is checked as a monitoring role with ``pg_monitor`` and exactly the GRANTs
  docs/privileges.md names for the facts the judged checks read (generated from
  ``qadvisor.facts`` and the checks' ``requires``, so the docs and the tests cannot drift
  apart). A fix is applied as printed in a DBA's session that takes the application's role
  (``SET ROLE``, for the ownership DDL needs) under the DBA's own search_path, so a fix
  that names a table without its schema fails here.

The checks a test judges are those of its module (``test_qa101_...``: QA101), or those a
``@pytest.mark.judges("QA301", "QA302", reads=("plans",))`` marker names; ``reads`` adds
facts the test's own assertions need (a plan in the evidence of a check that needs none).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
import sqlglot
from psycopg import sql
from sqlglot import exp

from qadvisor.facts import FACTS
from qadvisor.registry import load_checks
from tests.conftest import TestDB
from tests.helpers import Run, check, fix_sql, plan_rewrites

PUBLIC_SUPERUSER = "public-superuser"
APP_MONITOR = "app-monitor"

APP_SCHEMA = "app"
QUEUE_TABLE = "jobs"
# The builders' column names, by what a fact reads of them (docs/privileges.md: the live
# column, the tenant column, the start and finish of a job).
LIVE_COLUMN = "status"
TENANT_COLUMN = "tenant_id"
DURATION_COLUMNS = ("started_at", "finished_at")
# What fills ``{columns}`` in a fact's column GRANT: the columns that fact reads.
COLUMNS_READ: dict[str, tuple[str, ...]] = {
    # A status column, pq's timestamp whose NULL marks a waiting job (its table has no
    # status), or a broker's visible flag.
    "live_set": (LIVE_COLUMN, "dequeued_at", "visible"),
    "discovery": (LIVE_COLUMN, "dequeued_at", "visible"),
    "tenant_counts": (TENANT_COLUMN, LIVE_COLUMN, *DURATION_COLUMNS),
    # The finish timestamp, else the creation timestamp: the builders' tables have both, but
    # pq's, which is dated by the timestamp its live predicate waits on, and DBOS's, whose
    # finish time is an integer of epoch milliseconds, and a broker's, whose delivery sets
    # its timestamp with its visible flag.
    "archive_age": ("finished_at", "created_at", "dequeued_at", "completed_at", "timestamp"),
}
# GRANTs of qadvisor.facts that pg_monitor already gives (it includes pg_read_all_stats).
GIVEN_BY_PG_MONITOR = ("read_all_stats",)


@dataclass
class RoleDB(TestDB):
    """The test database as another role sees it."""

    user: str = "postgres"

    @property
    def dsn(self) -> str:
        return self.server.dsn(self.name, user=self.user)


def facts_of(codes: Iterable[str]) -> list[str]:
    """The facts the checks ``codes`` read (their ``requires``), in the order of FACTS."""
    by_code = {c.code: c for c in load_checks()}
    unknown = [c for c in codes if c not in by_code]
    assert not unknown, f"unknown checks {unknown}"
    wanted = {f for c in codes for f in by_code[c].requires}
    return [name for name in FACTS if name in wanted]


def documented_grants(
    facts: Iterable[str],
    role: str,
    schema: str,
    columns: Sequence[str],
    reads: Sequence[str],
    queue: str = QUEUE_TABLE,
) -> list[str]:
    """The GRANTs docs/privileges.md names for these facts, filled in: ``columns`` are the
    queue table's columns (a column GRANT names those of them the fact reads), ``reads`` the
    tables the statements read (planning needs SELECT on each; a rotation table is one of
    them besides the queue table)."""
    out: list[str] = []
    for name in facts:
        fact = FACTS[name]
        for kind, template in fact.grants.items():
            if kind in GIVEN_BY_PG_MONITOR or kind in fact.only_when:
                continue  # the smallest role has neither
            if kind == "columns":
                continue  # SELECT on some columns: the narrower form of the table's SELECT
            if kind == "usage":
                out.append(fact.grant(kind, role, schema))
            elif "{columns}" in template:
                cols = [c for c in COLUMNS_READ[name] if c in columns]
                if cols:  # a table with none of them needs no column of it read
                    out.append(fact.grant(kind, role, schema, queue, cols))
            elif kind == "update":
                out.append(fact.grant(kind, role, schema, queue))
            elif kind == "sequence":
                # The builders number the queue with a serial or an identity: its sequence.
                out.append(fact.grant(kind, role, schema, f"{queue}_id_seq"))
            elif name == "tenant_rotation":
                out += [fact.grant(kind, role, schema, t) for t in reads if t != queue]
            else:
                out += [fact.grant(kind, role, schema, t) for t in dict.fromkeys([queue, *reads])]
    return list(dict.fromkeys(out))


def tables_read(args: Sequence[str]) -> list[str]:
    """Unqualified names of the tables the ``--query`` statements among ``args`` read."""
    found: dict[str, None] = {}
    for i, flag in enumerate(args[:-1]):
        if flag != "--query":
            continue
        value = args[i + 1]
        for table in sqlglot.parse_one(value, dialect="postgres").find_all(exp.Table):
            if table.name:
                found[table.name] = None
    return list(found)


@dataclass
class Shape:
    """One shape of the test database: who builds, who checks, who fixes."""

    name: str
    dba: TestDB  # the superuser
    db: TestDB  # as the application: owner of the queue tables, its search_path
    checker: TestDB  # the role qadvisor connects as
    schema: str
    owner: str | None  # the role a fix is applied as (None: the DBA's own)
    monitor: str | None  # the monitoring role that checks (None: the DBA checks)
    facts: tuple[str, ...]  # what the judged checks read

    @property
    def queue(self) -> str:
        return f"{self.schema}.{QUEUE_TABLE}"

    def check(self, *args: str) -> Run:
        """``qadvisor check --format json`` as the checking role, after the GRANTs the judged
        checks need on the tables as they are now."""
        self.grant(args)
        return check(self.checker, *args)

    def grant(self, args: Sequence[str] = ()) -> list[str]:
        """Give the monitoring role the documented GRANTs of the judged checks' facts on the
        queue table and the tables the ``--query`` statements in ``args`` read; return them."""
        if self.monitor is None:
            return []
        present = {
            r[0]
            for r in self.dba.execute(
                "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
                [self.schema],
            )
        }
        columns = [
            r[0]
            for r in self.dba.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                "AND attnum > 0 AND NOT attisdropped",
                [self.queue],
            )
        ]
        reads = [t for t in tables_read(args) if t in present]
        grants = documented_grants(self.facts, self.monitor, self.schema, columns, reads)
        for statement in grants:
            self.dba.execute(statement)
        return grants

    def apply_fix(
        self, finding: dict[str, Any], *, as_dba: bool = False, review: bool = False
    ) -> None:
        """A finding's fix exactly as printed (see `apply`): its migration steps, with
        ``review`` its review steps too (see helpers.fix_sql)."""
        self.apply(fix_sql(finding, review=review), as_dba=as_dba)

    def plan_rewrites(
        self, finding: dict[str, Any], values: Mapping[int, str] | None = None
    ) -> list[str]:
        """A finding's rewrites planned as the application would send them, ``values`` in
        their placeholders (helpers)."""
        return plan_rewrites(self.db, finding, values)

    def apply(self, statements: Iterable[str], *, as_dba: bool = False) -> None:
        """Printed statements as they are, one per call (CONCURRENTLY needs it): by the
        queue's owner, or with ``as_dba`` by the DBA (a server setting, another session's
        backend), in a session with the DBA's search_path."""
        with psycopg.connect(self.dba.dsn, autocommit=True) as conn:
            if self.owner is not None and not as_dba:
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(self.owner)))
            for statement in statements:
                conn.execute(statement)


def judged(node: pytest.Item) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(checks, extra facts) a test judges: its ``judges`` marker, else its module's check."""
    marker = node.get_closest_marker("judges")
    if marker is not None:
        return tuple(marker.args), tuple(marker.kwargs.get("reads", ()))
    module = getattr(node, "module", None)
    m = re.match(r"test_qa(\d{3})_", (module.__name__.rpartition(".")[2] if module else ""))
    assert m, f"{node.nodeid}: mark it with @pytest.mark.judges(...) to say what it judges"
    return (f"QA{m.group(1)}",), ()


@contextlib.contextmanager
def open_shape(name: str, db: TestDB, node: pytest.Item) -> Iterator[Shape]:
    assert name in (PUBLIC_SUPERUSER, APP_MONITOR), name
    codes, extra = judged(node)
    unknown = [f for f in extra if f not in FACTS]
    assert not unknown, f"{node.nodeid}: unknown facts {unknown}"
    facts = tuple(dict.fromkeys([*facts_of(codes), *extra]))
    if name == PUBLIC_SUPERUSER:
        yield Shape(name, db, db, db, "public", None, None, facts)
        return
    app, monitor = f"{db.name}_app", f"{db.name}_monitor"
    db.execute(
        f"""
        CREATE ROLE {app} LOGIN;
        CREATE ROLE {monitor} LOGIN IN ROLE pg_monitor;
        CREATE SCHEMA {APP_SCHEMA} AUTHORIZATION {app};
        ALTER ROLE {app} IN DATABASE {db.name} SET search_path = {APP_SCHEMA};
        """
    )
    try:
        yield Shape(
            name,
            db,
            RoleDB(db.name, db.server, app),
            RoleDB(db.name, db.server, monitor),
            APP_SCHEMA,
            app,
            monitor,
            facts,
        )
    finally:
        # Sessions the test left open (a holder it never closed) would keep the roles.
        db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE usename = ANY(%s) AND pid <> pg_backend_pid()",
            [[app, monitor]],
        )
        # A lock left behind (a prepared transaction of a failed test) fails, never hangs.
        db.execute(f"SET lock_timeout = '10s'; DROP OWNED BY {app}, {monitor}")
        db.execute(f"DROP ROLE {app}, {monitor}")
