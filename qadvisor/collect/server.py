"""One visit to a server: connect politely, collect one snapshot, close.

Every way it can fail ends as a ConnectError or CollectError whose message is one line with
no password in it, so the caller never sees a driver exception.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from qadvisor.collect.connect import connect, default_run_timeout_s, redact
from qadvisor.collect.errors import CollectError
from qadvisor.collect.snapshot import collect
from qadvisor.model import Snapshot
from qadvisor.settings.resolve import Settings


def snapshot_of(
    settings: Settings, progress: Callable[[float, float], None] | None = None
) -> Snapshot:
    """The snapshot of the database the settings' DSN names (None: the libpq environment),
    with their tables, sample, queries (planned, never executed) and session limits;
    ``progress(elapsed, total)`` is called while a sample waits."""
    dsn = settings.dsn
    sample = settings.sample_seconds
    limits = settings.limits
    run_s = limits.run_timeout_s or default_run_timeout_s(
        limits, len(settings.queries), sample or 0
    )
    conn = connect(dsn, limits, run_s)
    # Closed, not left through ``with conn``: the session is in autocommit, and the rollback a
    # with block sends on an error would fail again on a connection the bound closed, adding
    # psycopg's own warning to the run's one line.
    try:
        return collect(conn, settings.tables, sample, progress if sample else None,
                       settings.queries, settings.analyze)  # fmt: skip
    except psycopg.Error as exc:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        raise CollectError(f"reading the catalog failed: {redact(first, dsn)}") from None
    finally:
        conn.close()
