"""The databases of a fleet: those of one server (``--all-databases``), or the lines of a DSN
file (``--dsn-file``).

Each member carries the DSN qadvisor connects to it with, password included, which is never
printed, and a label that names it in every report: the database's name for a server's
databases; for a DSN file's line, the service it names, else its host, port and database
(never its user or password). A database left out before any connection (it accepts none, or
the role lacks CONNECT) is a member too, with the reason, so the report says what it did not
check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import conninfo

from qadvisor.collect.connect import ConnectError, RunBoundPassed, connect, describe, redact
from qadvisor.collect.errors import CollectError
from qadvisor.collect.queries import first_line, rows
from qadvisor.errors import InputError, QadvisorError
from qadvisor.model import NotJudgedKind
from qadvisor.settings.resolve import SessionLimits
from qadvisor.sql.printing import ident

# A DSN file holds a line per database: a platform team's hundreds fit in a few kB.
MAX_DSN_FILE_BYTES = 1024 * 1024
# A line that is a bare word is a service name of pg_service.conf.
_SERVICE = re.compile(r"[A-Za-z0-9_.@-]+")


class DsnFileError(InputError):
    """The --dsn-file cannot be read, or a line of it is no DSN; never quotes a line."""


@dataclass(frozen=True)
class Member:
    """A database to check: its label and DSN; or, left out, why."""

    label: str
    dsn: str | None  # None: left out before any connection
    left_out: NotJudgedKind | None = None
    reason: str | None = None
    grants: tuple[str, ...] = ()


def with_database(dsn: str | None, dbname: str) -> str:
    """``dsn`` (None: the libpq environment) with its database replaced by ``dbname``; the
    rest, password and service included, kept as given."""
    return conninfo.make_conninfo(dsn or "", dbname=dbname)


def server_databases(
    dsn: str | None, limits: SessionLimits, run_timeout_s: float | None = None
) -> tuple[Member, ...]:
    """The databases of the server the DSN connects to, templates left out, in order of their
    names; ConnectError or CollectError when that server cannot be asked."""
    conn = connect(dsn, limits, run_timeout_s)
    try:
        with conn:
            found = rows(conn, "databases")
    except psycopg.Error as exc:
        raise CollectError(
            f"listing the databases of {describe(dsn)} failed: {redact(first_line(exc), dsn)}"
        ) from None
    members = []
    for row in found:
        name = str(row["name"])
        if not row["allows_connections"]:
            members.append(
                Member(
                    name,
                    None,
                    "no_connections",
                    "not checked: the database accepts no connections (datallowconn is false)",
                )
            )
        elif not row["may_connect"]:
            user = str(row["user"])
            members.append(
                Member(
                    name,
                    None,
                    "no_connect_privilege",
                    f"not checked: role {user} may not connect to it (it lacks CONNECT)",
                    (f"GRANT CONNECT ON DATABASE {ident(name)} TO {ident(user)};",),
                )
            )
        else:
            members.append(Member(name, with_database(dsn, name)))
    return tuple(members)


def dsn_file(path: Path) -> tuple[Member, ...]:
    """The members a DSN file names: one DSN (keyword/value or URI) or service name a line;
    blank lines and lines starting with ``#`` are left alone. A line that is not a DSN, or
    that names a database another line names, is a DsnFileError naming its line number (the
    line itself may hold a password)."""
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_DSN_FILE_BYTES + 1)
        if len(raw) > MAX_DSN_FILE_BYTES:
            raise DsnFileError(
                f"--dsn-file {path}: larger than {MAX_DSN_FILE_BYTES // 1024} KiB, the most "
                "qadvisor reads"
            )
        text = raw.decode("utf-8")
    except OSError as exc:
        raise DsnFileError(f"cannot read --dsn-file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise DsnFileError(f"cannot read --dsn-file {path}: not UTF-8 text") from None
    members: list[Member] = []
    lines_of: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        dsn = f"service={line}" if _SERVICE.fullmatch(line) else line
        label = _label(dsn, number, path)
        if label in lines_of:
            raise DsnFileError(
                f"--dsn-file {path}: lines {lines_of[label]} and {number} name the same "
                f"database ({label})"
            )
        lines_of[label] = number
        members.append(Member(label, dsn))
    if not members:
        raise DsnFileError(f"--dsn-file {path} names no database (one DSN or service a line)")
    return tuple(members)


def _label(dsn: str, number: int, path: Path) -> str:
    """How a report names the line's database: its service, else its host and port, then
    its database, as the line gives them; never a piece of a password."""
    where = f"--dsn-file {path}: line {number}"
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        raise DsnFileError(f"{where} is not a DSN (its text withheld)") from None
    if describe(dsn).startswith("the given DSN"):
        raise DsnFileError(
            f"{where}: its user info is cut short or holds a password in its host, port or "
            "database (its text withheld); percent-encode '/', '?', '#' and '@' in a password"
        )
    host = str(params.get("host") or params.get("hostaddr") or "")
    port = str(params.get("port") or "")
    dbname = str(params.get("dbname") or "")
    start = str(params.get("service") or "") or (f"{host}:{port}" if host and port else host)
    label = "/".join(p for p in (start, dbname) if p)
    if not label:
        raise DsnFileError(
            f"{where} names neither a service, a host nor a database: every line needs one of "
            "them, so that the report can name it"
        )
    return label


def failure_kind(exc: QadvisorError) -> NotJudgedKind:
    """What kind of failure ended a member's visit."""
    if isinstance(exc, RunBoundPassed):
        return "run_timeout"
    if isinstance(exc, ConnectError):
        return "connect_failed"
    return "collect_failed"
