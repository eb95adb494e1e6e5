"""Running the collector's SQL files, and the one read of pg_stat_statements they share."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

Conn = psycopg.Connection[Any]


@cache
def query_text(name: str) -> str:
    return resources.files("qadvisor.collect").joinpath(f"sql/{name}.sql").read_text()


def rows(conn: Conn, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query_text(name).encode(), params)
        return cur.fetchall()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def pg_stat_statements(conn: Conn, unavailable: dict[str, str]) -> list[dict[str, Any]]:
    """Row-locking statements of this database (statement_pgss.sql), read once per snapshot.

    Discovery uses them to find queue tables, statement analysis to plan them. A missing or
    unreadable extension is recorded in ``unavailable`` and gives no rows.
    """
    found = rows(conn, "pgss_schema")
    if not found:
        unavailable["pg_stat_statements"] = "pg_stat_statements is not installed in this database"
        return []
    # pg_stat_statements 1.9 (PostgreSQL 14) added toplevel.
    toplevel = "bool_or(toplevel)" if conn.info.server_version >= 140000 else "true"
    query = sql.SQL(query_text("statement_pgss")).format(
        pgss=sql.Identifier(found[0]["schema"], "pg_stat_statements"),
        toplevel=sql.SQL(toplevel),
    )
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query)
            return cur.fetchall()
    except psycopg.Error as exc:
        unavailable["pg_stat_statements"] = f"pg_stat_statements is not readable: {first_line(exc)}"
        return []


def function_calls(
    conn: Conn, names: list[str], unavailable: dict[str, str]
) -> list[dict[str, Any]]:
    """pg_stat_statements rows that call one of the functions ``names`` (function_calls.sql);
    none when the extension is missing (already recorded by pg_stat_statements())."""
    if not names or "pg_stat_statements" in unavailable:
        return []
    found = rows(conn, "pgss_schema")
    if not found:
        return []
    query = sql.SQL(query_text("function_calls")).format(
        pgss=sql.Identifier(found[0]["schema"], "pg_stat_statements")
    )
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query, {"names": names})
            return cur.fetchall()
    except psycopg.Error as exc:
        unavailable["function_calls"] = (
            f"calls of claiming functions could not be read: {first_line(exc)}"
        )
        return []
