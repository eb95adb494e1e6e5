"""SQL text for fixes: identifiers quoted only when PostgreSQL needs it, literals escaped."""

from __future__ import annotations

import re
from collections.abc import Iterable

from psycopg import sql

from qadvisor.model import LivePredicate

# Reserved and type/function-name keywords (PostgreSQL docs, appendix "SQL Key Words"):
# an unquoted identifier spelled like one of these fails to parse or means something else.
_KEYWORDS = frozenset(
    """
    all analyse analyze and any array as asc asymmetric authorization binary both case
    cast check collate collation column concurrently constraint create cross
    current_catalog current_date current_role current_schema current_time
    current_timestamp current_user default deferrable desc distinct do else end except
    false fetch for foreign freeze from full grant group having ilike in initially inner
    intersect into is isnull join lateral leading left like limit localtime
    localtimestamp natural not notnull null offset on only or order outer overlaps
    placing primary references returning right select session_user similar some
    symmetric system_user table tablesample then to trailing true union unique user
    using variadic verbose when where window with
    """.split()  # noqa: SIM905
)
_PLAIN = re.compile(r"^[a-z_][a-z0-9_$]*$")
MAX_IDENTIFIER = 63  # NAMEDATALEN - 1


def ident(name: str) -> str:
    """Quote an identifier only when it would not survive unquoted."""
    if _PLAIN.match(name) and name not in _KEYWORDS:
        return name
    return sql.Identifier(name).as_string(None)


def qualified(schema: str | None, name: str) -> str:
    return f"{ident(schema)}.{ident(name)}" if schema else ident(name)


def literal(value: str) -> str:
    return sql.Literal(value).as_string(None)


def array_literal(values: Iterable[str]) -> str:
    """A text array as one SQL literal, ``'{"a","b"}'``: each element double-quoted, its
    backslashes and double quotes escaped with a backslash (PostgreSQL's array input syntax),
    then the whole escaped as a string literal."""
    items = ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return literal("{" + items + "}").strip()


def predicate_sql(live: LivePredicate, alias: str | None = None) -> str:
    """The live predicate as a WHERE clause body, e.g. ``status = 'pending'``, its column
    qualified with ``alias`` when given (``NOT j.done``); ``TRUE`` for the whole table (an
    index on it is no partial one: see ``index_where``)."""
    if live.whole_table:
        return "TRUE"
    if live.op == "or":
        # Parenthesised: callers put the live predicate before AND (a round-robin's
        # sub-select, a tenant probe). Each part is one column's, with no OR of its own.
        return "(" + " OR ".join(predicate_sql(p, alias) for p in live.parts) + ")"
    col = ident(live.column) if alias is None else f"{ident(alias)}.{ident(live.column)}"
    if live.op == "is null":
        return f"{col} IS NULL"
    if live.op == "is not null":
        return f"{col} IS NOT NULL"
    if live.op == "true":
        return col
    if live.op == "false":
        return f"NOT {col}"
    if live.op in RANGE_OPS:
        return f"{col} {live.op} {literal(live.values[0])}"
    negated = live.op == "not in"
    if len(live.values) == 1:
        return f"{col} {'<>' if negated else '='} {literal(live.values[0])}"
    listed = ", ".join(literal(v) for v in live.values)
    return f"{col} {'NOT IN' if negated else 'IN'} ({listed})"


RANGE_OPS = ("<", "<=", ">", ">=")


def index_where(live: LivePredicate) -> str | None:
    """The predicate of an index on the live set, None when that index is a plain one (the
    whole table is the live set)."""
    return None if live.whole_table else predicate_sql(live)


def live_words(live: LivePredicate, limit: int = 2) -> list[str]:
    """Words for an index name from a live predicate: ``pending``, ``finished_at_null``,
    ``not_done``, ``is_available``, ``state_lt_active``; none for the whole table."""
    if live.whole_table:
        return []
    if live.op == "or":
        return [w for p in live.parts[:limit] for w in live_words(p, 1)]
    if live.op == "is null":
        return [f"{live.column}_null"]
    if live.op == "is not null":
        return [f"{live.column}_set"]
    if live.op == "true":
        return [live.column]
    if live.op == "false":
        return [f"not_{live.column}"]
    if live.op in RANGE_OPS:
        word = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge"}[live.op]
        return [f"{live.column}_{word}_{live.values[0]}"]
    prefix = "not_" if live.op == "not in" else ""
    return [prefix + v for v in live.values[:limit]]


def index_name(table: str, parts: Iterable[str], suffix: str = "idx") -> str:
    """A readable index name within PostgreSQL's 63-byte limit."""
    words = [table, *parts, suffix]
    cleaned = [re.sub(r"[^a-z0-9_]+", "_", w.lower()).strip("_") or "x" for w in words]
    name = "_".join(cleaned)
    while len(name.encode()) > MAX_IDENTIFIER and len(cleaned) > 2:
        # Shorten the longest middle part first so the table name and suffix stay readable.
        middle = range(1, len(cleaned) - 1)
        longest = max(middle, key=lambda i: len(cleaned[i]))
        if len(cleaned[longest]) <= 3:
            cleaned.pop(longest)
        else:
            cleaned[longest] = cleaned[longest][: len(cleaned[longest]) // 2]
        name = "_".join(cleaned)
    return name[:MAX_IDENTIFIER]
