"""A full run of qadvisor against one database, with what it sent read from the server's log.

`build` makes a queue that exercises every collection step: a multi-tenant backlog with a
FIFO partial index, a per-tenant index, a rotation table and finished jobs (build_tenant_queue),
a claim inside a PL/pgSQL function the application calls, the FIFO claim and a reaper recorded
in pg_stat_statements. `full_run` runs every command qadvisor has against it: `check` in every
output format, with `--sample`, `--query`, `--query-file`, `--table` and `--analyze`, and
`snapshot`, as a role of its own whose sessions alone log their statements
(``ALTER ROLE ... SET log_statement = 'all'``), so the log holds qadvisor's statements and no
other session's.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.checks.test_qa401_round_robin_walks_backlog import FIFO, RR_BY_ID, build_tenant_queue
from tests.conftest import TestDB, flush_stats
from tests.helpers import qadvisor

FORMATS = ("text", "json", "markdown", "sarif", "junit", "sql")
# 7 tenants and 325 queued jobs, the large tenant first.
BACKLOG = {1: 300, 2: 20, **dict.fromkeys(range(3, 8), 1)}
QUEUED = 325
CLAIM_FUNCTION = """
CREATE FUNCTION claim_job() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  claimed bigint;
BEGIN
  UPDATE jobs SET status = 'running', started_at = now()
   WHERE id = (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1
               FOR UPDATE SKIP LOCKED)
  RETURNING id INTO claimed;
  RETURN claimed;
END
$$;
"""
REAPER = (
    "UPDATE jobs SET status = 'queued' WHERE status = 'running' "
    "AND started_at < now() - interval '1 hour'"
)
QUERY_FILE = f"""-- the application's statements
INSERT INTO jobs (tenant_id) VALUES ($1);
{FIFO.replace("limit 1", "limit $1")};
{REAPER};
"""


def build(db: TestDB) -> None:
    """The queue, its function and its recorded statements; the application's writes rolled
    back, autovacuum off on both tables (their counters move only when someone writes)."""
    build_tenant_queue(db, BACKLOG, rotation=50, done=2000)
    db.execute(
        "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"
        "ALTER TABLE jobs SET (autovacuum_enabled = off);"
        "ALTER TABLE queue_tenants SET (autovacuum_enabled = off);" + CLAIM_FUNCTION
    )
    with db.connect() as conn:
        conn.autocommit = False
        for statement in ("SELECT claim_job()", FIFO, RR_BY_ID, REAPER,
                          "SELECT count(*) FROM jobs WHERE status = 'queued'"):  # fmt: skip
            conn.execute(statement)
            conn.rollback()
        flush_stats(conn)
        conn.commit()
    db.execute("VACUUM (ANALYZE) jobs, queue_tenants")


def runs(dsn: str, work: Path) -> list[tuple[str, ...]]:
    """Every command and option that sends something (and one that reads a snapshot file)."""
    query_file = work / "app.sql"
    query_file.write_text(QUERY_FILE)
    snapshot = work / "snapshot.json"
    out: list[tuple[str, ...]] = [("check", dsn, "--format", fmt) for fmt in FORMATS]
    out += [
        ("check", dsn, "--format", "json", "--sample", "1", "--query", RR_BY_ID,
         "--query-file", str(query_file), "--analyze", "--output", f"sarif:{work / 'r.sarif'}"),
        ("check", dsn, "--format", "json", "--table", "jobs", "--analyze"),
        ("snapshot", dsn, "-o", str(snapshot), "--sample", "1", "--query", RR_BY_ID,
         "--analyze"),
        ("role", dsn, "--query", RR_BY_ID, "--query-file", str(query_file)),
        ("check", "--snapshot", str(snapshot), "--format", "json"),
    ]  # fmt: skip
    return out


@dataclass(frozen=True)
class Logged:
    """What the server logged of one run's sessions: each statement, and each ERROR with
    the statement that caused it."""

    args: tuple[str, ...]
    statements: list[str]
    errors: list[tuple[str, str]]


_ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \S+ \[(\d+)\] ([A-Z]+):  (.*)$")
_STATEMENT = re.compile(r"^(?:statement|execute [^:]*): (.*)$", re.S)


def read_log(log: str, args: tuple[str, ...] = ()) -> Logged:
    """The statements and errors of a piece of the server log (log_statement = all; the
    default log_line_prefix, '%m [%p] ', and the stderr format, whose continuation lines
    start with a tab)."""
    entries: list[list[str]] = []
    for line in log.splitlines():
        m = _ENTRY.match(line)
        if m:
            entries.append([m.group(2), m.group(3)])
        elif line.startswith("\t") and entries:
            entries[-1][1] += "\n" + line[1:]
    statements: list[str] = []
    errors: list[tuple[str, str]] = []
    for k, (level, message) in enumerate(entries):
        found = _STATEMENT.match(message) if level == "LOG" else None
        if found:
            statements.append(found.group(1))
        elif level in ("ERROR", "FATAL", "PANIC"):
            after = entries[k + 1] if k + 1 < len(entries) else ["", ""]
            errors.append((message, after[1] if after[0] == "STATEMENT" else ""))
    return Logged(args, statements, errors)


@contextlib.contextmanager
def logging_role(
    db: TestDB, *settings: str, monitor: bool = False, grants: tuple[str, ...] = ()
) -> Iterator[TestDB]:
    """The database as a role of its own whose sessions log every statement (and take
    ``settings``, "name = value", as role settings): a superuser, or with ``monitor`` a
    member of pg_monitor given ``grants`` ("SELECT ON jobs": each GRANTed to it)."""
    from tests.shapes import RoleDB

    role = f"qadvisor_logged_{db.name}" + ("_monitor" if monitor else "")
    kind = "IN ROLE pg_monitor" if monitor else "SUPERUSER"
    db.execute(f"CREATE ROLE {role} LOGIN {kind}; ALTER ROLE {role} SET log_statement = 'all'")
    for grant in grants:
        db.execute(f"GRANT {grant} TO {role}")
    for setting in settings:
        db.execute(f"ALTER ROLE {role} IN DATABASE {db.name} SET {setting}")
    try:
        yield RoleDB(db.name, db.server, user=role)
    finally:
        db.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


def logged_runs(db: TestDB, commands: list[tuple[str, ...]]) -> list[Logged]:
    """Each command run as it is given (its DSN that of a logging role), with what the
    server logged while it ran."""
    log = db.server.log_file
    done = []
    for args in commands:
        start = log.stat().st_size
        run = qadvisor(*args)
        assert run.rc in (0, 1) and "Traceback" not in run.stderr, (args, run.stderr)
        with log.open("rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        done.append(read_log(text, args))
    return done


def full_run(db: TestDB, work: Path) -> list[Logged]:
    """Every run of `runs` as a logging role, with what the server logged of each."""
    with logging_role(db) as logged:
        return logged_runs(logged, runs(logged.dsn, work))
