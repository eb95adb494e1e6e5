"""A partitioned table's key and its partitions' bounds, as PostgreSQL prints them.

``pg_get_partkeydef`` prints a key as ``RANGE (created_at)``, ``LIST (queue)`` or ``HASH
(id)``; ``pg_get_expr(relpartbound)`` a bound as ``FOR VALUES FROM ('2026-11-08
00:00:00+00') TO ('2026-11-09 00:00:00+00')``, ``FOR VALUES IN ('mail')``, ``FOR VALUES
WITH (modulus 4, remainder 0)`` or ``DEFAULT``. Both are the server's canonical text, each
value a quoted literal (or MINVALUE / MAXVALUE), so they are read here by their grammar's
few forms rather than parsed as statements. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Strategy = Literal["range", "list", "hash"]

_KEY = re.compile(r"^\s*(RANGE|LIST|HASH)\s*\((.*)\)\s*$", re.I | re.S)
_RANGE = re.compile(r"^\s*FOR VALUES FROM \((.*)\) TO \((.*)\)\s*$", re.S)
_LIST = re.compile(r"^\s*FOR VALUES IN \((.*)\)\s*$", re.S)
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_QUOTED_NAME = re.compile(r'^"((?:[^"]|"")+)"$')
_LITERAL = re.compile(r"^'((?:[^']|'')*)'$", re.S)


@dataclass(frozen=True)
class PartitionKey:
    """How a table is partitioned: its strategy and key columns (None for an expression)."""

    strategy: Strategy
    columns: tuple[str | None, ...]


@dataclass(frozen=True)
class RangeBound:
    """A range partition's bounds on a one-column key: the text of each value as the server
    printed it, None where it is unbounded (MINVALUE, MAXVALUE). The upper bound is
    exclusive."""

    lower: str | None
    upper: str | None


def partition_key(text: str | None) -> PartitionKey | None:
    """``RANGE (created_at)`` as PartitionKey("range", ("created_at",)); None when it is not
    a key PostgreSQL prints."""
    m = _KEY.match(text or "")
    if m is None:
        return None
    strategy: Strategy = m.group(1).lower()  # type: ignore[assignment]
    return PartitionKey(strategy, tuple(_column(item) for item in _items(m.group(2))))


def range_bound(text: str | None) -> RangeBound | None:
    """The bounds of a range partition on one column; None for any other bound (a list, a
    hash, DEFAULT, or a range over several columns)."""
    m = _RANGE.match(text or "")
    if m is None:
        return None
    lower, upper = _items(m.group(1)), _items(m.group(2))
    if len(lower) != 1 or len(upper) != 1:
        return None
    return RangeBound(_value(lower[0]), _value(upper[0]))


def list_values(text: str | None) -> tuple[str | None, ...] | None:
    """The values of a list partition's bound (None for a NULL among them); None for any
    other bound."""
    m = _LIST.match(text or "")
    if m is None:
        return None
    return tuple(None if v.upper() == "NULL" else _value(v) for v in _items(m.group(1)))


def is_default(text: str | None) -> bool:
    """The DEFAULT partition: it takes every row no other partition's bound takes."""
    return (text or "").strip().upper() == "DEFAULT"


def _items(text: str) -> list[str]:
    """The comma-separated items of a list, commas inside quotes or parentheses kept."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""  # a doubled quote closes and reopens: the same to this walk
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return [item for item in items if item]


def _column(item: str) -> str | None:
    if _PLAIN_NAME.match(item):
        return item.lower()
    quoted = _QUOTED_NAME.match(item)
    return quoted.group(1).replace('""', '"') if quoted else None


def _value(item: str) -> str | None:
    """A bound value's text: a quoted literal unquoted, a number as written; None for
    MINVALUE and MAXVALUE."""
    if item.upper() in ("MINVALUE", "MAXVALUE"):
        return None
    quoted = _LITERAL.match(item)
    return quoted.group(1).replace("''", "'") if quoted else item
