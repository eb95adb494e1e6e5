"""Table names given by the user, resolved the way PostgreSQL resolves them, by catalog reads.

``--table app.jobs`` must work for a role with no USAGE on ``app`` (a ``pg_monitor`` role):
casting the name (``to_regclass``, ``::regclass``) needs USAGE, reading pg_namespace and
pg_class does not. See resolve_tables.sql for the rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from qadvisor.collect import queries as q
from qadvisor.collect.errors import TableNotFound

Conn = psycopg.Connection[Any]

_KINDS = {
    "v": "a view",
    "m": "a materialized view",
    "i": "an index",
    "I": "a partitioned index",
    "S": "a sequence",
    "f": "a foreign table",
    "c": "a composite type",
    "t": "a TOAST table",
}


@dataclass(frozen=True)
class Resolved:
    arg: str
    schema: str
    table: str
    relid: int


def resolve_tables(conn: Conn, names: Sequence[str]) -> list[Resolved]:
    """Each name as a table of this database, in order, each table once; a name that is not
    one raises TableNotFound with one line that says why."""
    try:
        rows = q.rows(conn, "resolve_tables", {"names": list(names)})
    except psycopg.errors.InvalidParameterValue as exc:
        # parse_ident's message quotes the name it refused.
        raise TableNotFound(f"--table: {q.first_line(exc)}") from None
    out: list[Resolved] = []
    for r in rows:
        found = _resolved(r)
        if all(f.relid != found.relid for f in out):
            out.append(found)
    return out


def _resolved(r: dict[str, Any]) -> Resolved:
    arg = r["arg"]
    parts = int(r["parts"])
    if parts > 3:
        raise TableNotFound(f"{arg}: improper qualified name (too many dotted names)")
    if parts == 3 and r["database"] != r["current_database"]:
        raise TableNotFound(
            f"{arg} names database {r['database']}, but qadvisor is connected to "
            f"{r['current_database']}"
        )
    if r["relid"] is None:
        raise TableNotFound(_missing(r))
    if r["relkind"] not in ("r", "p"):
        kind = _KINDS.get(r["relkind"], f"of kind {r['relkind']}")
        raise TableNotFound(f"{arg} is not a table (it is {kind})")
    return Resolved(arg, r["schema"], r["table"], int(r["relid"]))


def _missing(r: dict[str, Any]) -> str:
    arg = r["arg"]
    elsewhere = list(r["tables_so_named"] or ())
    if int(r["parts"]) > 1:
        if not r["schema_exists"]:
            return f"table {arg} does not exist (no such schema)"
        return f"table {arg} does not exist"
    text = f"table {arg} is not on the search_path ({r['search_path']})"
    if len(elsewhere) == 1:
        return f"{text}; it exists as {elsewhere[0]}: name it with its schema"
    if elsewhere:
        return (
            f"{text}; the name is ambiguous, {len(elsewhere)} schemas have such a table "
            f"({', '.join(elsewhere)}): name one with its schema"
        )
    return f"{text}, nor in any other schema"


def find_table(conn: Conn, schema: str | None, table: str) -> Resolved | None:
    """A table named in a statement (identifiers already unquoted), resolved under this
    session's search_path when unqualified; None when there is no such table."""
    name = sql.Identifier(table) if schema is None else sql.Identifier(schema, table)
    rows = q.rows(conn, "resolve_tables", {"names": [name.as_string(conn)]})
    r = rows[0] if rows else None
    if r is None or r["relid"] is None or r["relkind"] not in ("r", "p"):
        return None
    return Resolved(r["arg"], r["schema"], r["table"], int(r["relid"]))
