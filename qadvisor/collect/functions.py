"""Claims inside PL/pgSQL and SQL functions: read from pg_proc, made plannable.

``function_claims(conn, pgss_rows)`` is what statement collection calls. ``pgss_rows`` are
pg_stat_statements rows (only their ``query`` is read); the functions read are

- those a statement calls (``SELECT ... FROM procrastinate_fetch_job_v2($1, $2)``: with the
  default ``pg_stat_statements.track = top`` only the call is recorded), matched by name,
  schema-qualified or not, and
- those whose body holds a row lock with ``SKIP LOCKED``,

of languages plpgsql and sql, in non-system schemas: at most ``MAX_FUNCTIONS`` of them, the
called ones first (one query, functions.sql). The relations and types their claims need
(``%ROWTYPE``, ``%TYPE``, composite variables, the tables of the claims) are read in a
second query (function_relations.sql). Both read only catalogs that every role may read, so
a role with nothing but ``pg_monitor`` sees the same claims.

Each returned ``FunctionClaim`` (qadvisor.sql.function_claims) is one row-locking statement of a
body: ``text`` to ``PREPARE`` with ``param_types`` (``$k`` has type ``param_types[k-1]``), or
a ``skip`` saying why it cannot be planned. A statement that pg_stat_statements recorded
inside a function (``track = all``, ``toplevel = false``) is found among them with
``recorded_statements.match_nested(text, claims)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from qadvisor.collect.queries import first_line, query_text
from qadvisor.sql.catalog import Catalog, NamedType, Relation
from qadvisor.sql.function_claims import (
    Argument,
    FunctionClaim,
    FunctionSource,
    extract,
    names_to_look_up,
    read,
)
from qadvisor.sql.recorded_statements import called_functions

Conn = psycopg.Connection[Any]

# A queue library defines a handful of functions; an application with more than this many
# candidate functions (called by a tracked statement, or holding SKIP LOCKED) is read up to
# this bound, the called ones first, and the scan says it was cut.
MAX_FUNCTIONS = 100
# Names passed to the catalog lookup, and rows it returns: enough for MAX_FUNCTIONS bodies.
MAX_NAMES = 2_000
MAX_CATALOG_ROWS = 5_000
# pg_get_function_sqlbody() and pg_proc.prosqlbody exist from PostgreSQL 14.
SQL_BODY_VERSION = 140000


@dataclass(frozen=True)
class FunctionScan:
    """What was read: the claims, the functions they came from, and whether the bound cut."""

    claims: tuple[FunctionClaim, ...]
    functions: tuple[str, ...]  # signatures of the functions read
    truncated: bool = False
    error: str | None = None  # the catalog could not be read: why (one line)

    @property
    def unavailable(self) -> dict[str, str]:
        """The scan's entry of Snapshot.unavailable: the catalog unread, or the scan cut."""
        if self.error is not None:
            return {"functions": self.error}
        if self.truncated:
            why = f"only the first {MAX_FUNCTIONS} candidate functions were read for claims"
            return {"functions": why}
        return {}


def function_claims(conn: Conn, pgss_rows: Iterable[Mapping[str, Any]]) -> list[FunctionClaim]:
    """The claims of the functions ``pgss_rows`` call and of those holding SKIP LOCKED
    (none when the catalog cannot be read: :attr:`FunctionScan.unavailable` says why)."""
    return list(scan_functions(conn, pgss_rows).claims)


def scan_functions(conn: Conn, pgss_rows: Iterable[Mapping[str, Any]]) -> FunctionScan:
    texts = [str(r["query"]) for r in pgss_rows if r.get("query")]
    called = sorted(called_functions(texts), key=lambda c: (c[0] or "", c[1]))
    try:
        rows = _function_rows(conn, called)
        truncated = len(rows) > MAX_FUNCTIONS
        sources = [_source(r) for r in rows[:MAX_FUNCTIONS]]
        readings = [read(fn) for fn in sources]
        names = sorted(names_to_look_up(readings))[:MAX_NAMES]
        catalog = _catalog(conn, names) if names else Catalog()
    except psycopg.Error as exc:
        if conn.closed:
            raise
        return FunctionScan((), (), error=f"functions could not be read: {first_line(exc)}")
    claims = [claim for reading in readings for claim in extract(reading, catalog)]
    return FunctionScan(tuple(claims), tuple(fn.signature for fn in sources), truncated)


def _function_rows(conn: Conn, called: Sequence[tuple[str | None, str]]) -> list[dict[str, Any]]:
    if conn.info.server_version >= SQL_BODY_VERSION:
        sql_body = sql.SQL(
            "CASE WHEN p.prosqlbody IS NOT NULL THEN pg_get_function_sqlbody(p.oid) END"
        )
    else:
        sql_body = sql.SQL("NULL::text")
    query = sql.SQL(query_text("functions")).format(sql_body=sql_body)
    params = {
        "schemas": [schema for schema, _ in called],
        "names": [name for _, name in called],
        "limit": MAX_FUNCTIONS + 1,
    }
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query, params)
        return cur.fetchall()


def _source(row: Mapping[str, Any]) -> FunctionSource:
    types = [str(t) for t in row["arg_types"] or ()]
    names = list(row["arg_names"] or ())
    modes = list(row["arg_modes"] or ())
    arguments = tuple(
        Argument(
            name=(names[k] or None) if k < len(names) else None,
            type=type_,
            mode=modes[k] if k < len(modes) else "i",
        )
        for k, type_ in enumerate(types)
    )
    return FunctionSource(
        schema=str(row["schema"]),
        name=str(row["name"]),
        language=str(row["language"]),
        arguments=arguments,
        return_type=str(row["return_type"]),
        body=str(row["body"] or ""),
        config=tuple(str(c) for c in row["config"] or ()),
    )


def _catalog(conn: Conn, names: Sequence[str]) -> Catalog:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            query_text("function_relations").encode(),
            {"names": list(names), "limit": MAX_CATALOG_ROWS},
        )
        rows = cur.fetchall()
    relations = []
    types = []
    for r in rows:
        if r["kind"] == "relation":
            columns = tuple(zip(r["column_names"] or (), r["column_types"] or (), strict=True))
            relations.append(
                Relation(
                    int(r["relid"]),
                    r["schema"],
                    r["name"],
                    r["relkind"],
                    type_sql=r["type_sql"],
                    columns=columns,
                )
            )
        else:
            types.append(NamedType(r["schema"], r["name"], r["type_sql"]))
    return Catalog(tuple(relations), tuple(types))
