"""Dequeue statements and their plans (filled in by the statement-analysis work)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from qadvisor.model import Queue, Statement, Table

Conn = psycopg.Connection[Any]


def collect_statements(
    conn: Conn,
    queues: Sequence[Queue],
    tables: Sequence[Table],
    queries: Sequence[tuple[str, str]],
    analyze: bool,
    unavailable: dict[str, str],
) -> tuple[Statement, ...]:
    """Statements from pg_stat_statements and from ``queries`` ((source, text) pairs)."""
    return ()
