"""One visit to a server: connect politely, collect one snapshot (or a monitoring role's
setup), close.

Every way it can fail ends as a ConnectError or CollectError whose message is one line with
no password in it, so the caller never sees a driver exception.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from qadvisor.collect.connect import connect, default_run_timeout_s, redact
from qadvisor.collect.errors import CollectError
from qadvisor.collect.role import monitoring_role
from qadvisor.collect.snapshot import collect
from qadvisor.model import RoleSetup, Snapshot
from qadvisor.settings.resolve import Settings

T = TypeVar("T")


def snapshot_of(
    settings: Settings,
    progress: Callable[[float, float], None] | None = None,
    deadline: float | None = None,
) -> Snapshot:
    """The snapshot of the database the settings' DSN names (None: the libpq environment),
    with their tables, sample, queries (planned, never executed) and session limits;
    ``progress(elapsed, total)`` is called while a sample waits. ``deadline`` (a
    time.monotonic() moment: a fleet's bound) ends the visit sooner than its own bound."""
    sample = settings.sample_seconds
    return _visit(
        settings,
        lambda conn: collect(conn, settings.tables, sample, progress if sample else None,
                             settings.queries, settings.analyze),
        deadline,
    )  # fmt: skip


def role_setup_of(settings: Settings, role: str) -> RoleSetup:
    """The setup of monitoring role ``role`` on the database the settings' DSN names, for
    their tables and queries."""
    return _visit(settings, lambda conn: monitoring_role(conn, role, settings.tables,
                                                         settings.queries))  # fmt: skip


def _visit(
    settings: Settings,
    work: Callable[[psycopg.Connection[Any]], T],
    deadline: float | None = None,
) -> T:
    dsn = settings.dsn
    limits = settings.limits
    run_s: float = limits.run_timeout_s or default_run_timeout_s(
        limits, len(settings.queries), settings.sample_seconds or 0
    )
    if deadline is not None:
        run_s = min(run_s, deadline - time.monotonic())
    conn = connect(dsn, limits, run_s)
    # Closed, not left through ``with conn``: the session is in autocommit, and the rollback a
    # with block sends on an error would fail again on a connection the bound closed, adding
    # psycopg's own warning to the run's one line.
    try:
        return work(conn)
    except psycopg.Error as exc:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        raise CollectError(f"reading the catalog failed: {redact(first, dsn)}") from None
    finally:
        conn.close()
