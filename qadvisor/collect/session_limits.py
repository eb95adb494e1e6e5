"""The lock_timeout a session starts with, before its first statement, and what holds a system
catalog when even that is not enough.

Every query reads system catalogs (pg_proc for a function, pg_statistic for any plan), and a
fresh backend has none of them cached: another session's lock on one (``VACUUM FULL
pg_proc``, ``LOCK TABLE pg_statistic``) makes the very first statement wait, before any
``set_config`` could set a lock_timeout. So qadvisor's lock_timeout travels in the
connection's startup packet (libpq's ``options``), after the DSN's own options (else
PGOPTIONS'), the stricter of the two. Startup options take precedence over ALTER ROLE and
ALTER DATABASE settings, so the role's and the database's lock_timeout is read from
pg_db_role_setting once the session is up, and the stricter one applied then.

A server-wide lock_timeout (postgresql.conf, ALTER SYSTEM) is replaced for the session as
well, and cannot be read back without the rights to read the server's configuration files:
qadvisor's own lock_timeout applies (default 1 s).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import psycopg

from qadvisor.collect.locks import query_start
from qadvisor.sql.masking import mask_literals

# PostgreSQL's time units (the base unit of lock_timeout is ms); a value without one is ms.
_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_TIME = re.compile(r"\s*(-?\d+(?:\.\d*)?|-?\.\d+)\s*(us|ms|s|min|h|d)?\s*", re.I)
# "-c lock_timeout=5s", "-clock_timeout=5s", "--lock-timeout=5s"; a backslash escapes a space.
_OPTION = re.compile(r"(?:^|\s)(?:-c\s*|--)lock[_-]timeout=((?:\\.|\S)+)", re.I)

# The lock_timeout ALTER ROLE ... [IN DATABASE] / ALTER DATABASE set for this session's role
# and database, the one PostgreSQL would apply first (role and database, role, database, all).
ROLE_LOCK_TIMEOUT_SQL = (
    "SELECT substr(c, strpos(c, '=') + 1) FROM pg_db_role_setting s, unnest(s.setconfig) c"
    " WHERE split_part(c, '=', 1) = 'lock_timeout'"
    " AND s.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))"
    " AND s.setrole IN (0, (SELECT oid FROM pg_roles WHERE rolname = session_user))"
    " ORDER BY s.setrole <> 0 DESC, s.setdatabase <> 0 DESC LIMIT 1"
)
# The locks other sessions hold on system catalogs (an OID below FirstNormalObjectId) that
# make every reader wait: read from functions only, which the planner estimates without
# pg_statistic, so it answers while that catalog itself is locked.
CATALOG_LOCKS_SQL = (
    "SELECT l.relation::regclass::text, l.mode, l.pid, a.state, left(a.query, 300)"
    " FROM pg_locks l LEFT JOIN LATERAL pg_stat_get_activity(l.pid) a ON true"
    " WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock' AND l.relation < 16384"
    " AND l.pid <> pg_backend_pid() ORDER BY 1, 3"
)


def milliseconds(text: str) -> int | None:
    """A time setting's value in ms, as PostgreSQL reads it (rounded); None when it is none."""
    m = _TIME.fullmatch(text)
    if m is None:
        return None
    return round(float(m[1]) * _UNITS_MS[(m[2] or "ms").lower()])


def startup_options(given: str | None, lock_timeout_ms: int) -> str:
    """libpq ``options`` for the session: the given ones (the DSN's, else PGOPTIONS'), then
    the stricter of their lock_timeout and ``lock_timeout_ms``, and read-only."""
    given = (given or "").strip()
    found = [milliseconds(v.replace("\\", "")) for v in _OPTION.findall(given)]
    theirs = found[-1] if found else None
    lock = min(lock_timeout_ms, theirs) if theirs is not None and theirs > 0 else lock_timeout_ms
    return f"{given} -c lock_timeout={lock} -c default_transaction_read_only=on".strip()


def role_lock_timeout(conn: psycopg.Connection[Any]) -> int | None:
    """The lock_timeout (ms) the role or the database sets for this session; None: none, or
    a catalog this role may not read (a hardened server may revoke it; qadvisor's applies)."""
    try:
        row = conn.execute(ROLE_LOCK_TIMEOUT_SQL).fetchone()
    except psycopg.errors.InsufficientPrivilege:
        return None
    return milliseconds(str(row[0])) if row is not None else None


def catalog_blockers(conn: psycopg.Connection[Any]) -> str:
    """The sessions that hold a system catalog locked, each with its lock, its state and its
    statement's start (constants masked); "" when none does, or when that cannot be read
    either."""
    try:
        rows: Sequence[tuple[Any, ...]] = conn.execute(CATALOG_LOCKS_SQL).fetchall()
    except psycopg.Error:
        return ""
    out = []
    for relation, mode, pid, state, query in rows:
        text = query_start(mask_literals(query)) if query else ""
        doing = f" ({state}: {text})" if state and text else ""
        out.append(f"pid {pid} with {mode} on {relation}{doing}")
    return "; ".join(out)
