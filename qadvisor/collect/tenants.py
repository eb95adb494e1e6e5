"""Per-tenant facts of multi-tenant queues (filled in by the tenant-analysis work)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from qadvisor.model import Queue, Statement, Table, TenantFacts

Conn = psycopg.Connection[Any]


def collect_tenants(
    conn: Conn,
    queues: Sequence[Queue],
    tables: Sequence[Table],
    statements: Sequence[Statement],
    unavailable: dict[str, str],
) -> tuple[TenantFacts, ...]:
    return ()
