"""Running the collector's SQL files (pg_stat_statements' one read is in recorded.py).

Each step of collection returns a :class:`Read`: what it read, and what it could not
(``unavailable``: the step's entries of ``Snapshot.unavailable``; ``hidden``: the facts the
guard kept it from reading). The snapshot is assembled from the steps' reads; no step
records anything into another's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Generic, TypeVar

import psycopg
from psycopg.rows import dict_row

from qadvisor.model import HiddenFact

Conn = psycopg.Connection[Any]
T = TypeVar("T")


@dataclass(frozen=True)
class Read(Generic[T]):
    """What one step read (``value``), and what it could not: ``unavailable`` maps a fact to
    why it could not be read, ``hidden`` holds the facts the guard kept from being read."""

    value: T
    unavailable: Mapping[str, str] = field(default_factory=dict)
    hidden: tuple[HiddenFact, ...] = ()


def merged(value: T, *reads: Read[Any]) -> Read[T]:
    """``value``, with what each of ``reads`` could not read, in their order (a fact that two
    of them could not read keeps its first place and the later reason)."""
    unavailable: dict[str, str] = {}
    for r in reads:
        unavailable.update(r.unavailable)
    return Read(value, unavailable, tuple(h for r in reads for h in r.hidden))


def read_fact(conn: Conn, fact: str, what: str, read: Callable[[], T], default: T) -> Read[T]:
    """One fact, on its own: a failure gives ``default`` and says why under ``fact``; a lost
    connection ends collection."""
    try:
        return Read(read())
    except psycopg.Error as exc:
        if conn.broken or conn.closed:
            raise
        return Read(default, {fact: f"{what} could not be read: {first_line(exc)}"})


def read_rows(
    conn: Conn, fact: str, what: str, name: str, params: dict[str, Any] | None = None
) -> Read[list[dict[str, Any]]]:
    """The rows of one fact query (an SQL file), read on its own as :func:`read_fact` does."""
    empty: list[dict[str, Any]] = []
    return read_fact(conn, fact, what, lambda: rows(conn, name, params), empty)


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
