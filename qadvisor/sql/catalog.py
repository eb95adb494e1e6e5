"""What a name in SQL text can mean: the relations and types of the database, by name, and
the search_path setting that orders the schemas a name is looked up in.

The collector reads the relations some texts name (``qadvisor.collect``); the readers that
resolve names (``qadvisor.derive.names`` for statements, ``qadvisor.sql.function_claims`` for
function bodies) share these classes, each reading the facts its own collector fills in.
Nothing here parses SQL text, talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Relation:
    """A relation of the database (table, view, composite type...) that a name may mean."""

    relid: int
    schema: str
    name: str
    kind: str  # pg_class.relkind: r table, p partitioned table, v view, m, f, c composite type
    # The partitioned table it is a partition of, when it is one.
    parent: tuple[str, str] | None = None
    # Column sets of its valid, non-partial unique indexes (the primary key among them).
    unique_keys: tuple[tuple[str, ...], ...] = ()
    # Its row type as PREPARE spells it in this session (format_type), and its columns as
    # (name, format_type) in attnum order: read for function bodies, empty when not read.
    type_sql: str = ""
    columns: tuple[tuple[str, str], ...] = ()

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def is_table(self) -> bool:
        return self.kind in ("r", "p")


@dataclass(frozen=True)
class NamedType:
    """An enum, domain or other user-defined type that a name may mean."""

    schema: str
    name: str
    type_sql: str


class Catalog:
    """The relations (and other user-defined types) that some names may mean, by name."""

    def __init__(self, relations: Iterable[Relation] = (), types: Iterable[NamedType] = ()) -> None:
        self.relations = tuple(relations)
        self.types = tuple(types)
        self.by_name: dict[str, list[Relation]] = {}
        for rel in self.relations:
            self.by_name.setdefault(rel.name, []).append(rel)

    def get(self, schema: str, name: str) -> Relation | None:
        return next((r for r in self.by_name.get(name, ()) if r.schema == schema), None)

    def named(self, name: str) -> list[Relation]:
        """Every relation of that name, public first, then by schema."""
        return sorted(self.by_name.get(name, ()), key=lambda r: (r.schema != "public", r.schema))


def split_path(value: str) -> list[str]:
    """A search_path setting as its schema names, in order: quoted names unquoted as written
    (a comma inside quotes is part of the name), unquoted ones in lower case; ``"$user"``
    and ``$user`` both as ``$user``."""
    out: list[str] = []
    for raw in _split_commas(value):
        item = raw.strip()
        if not item:
            continue
        if item.startswith('"') and item.endswith('"') and len(item) >= 2:
            out.append(item[1:-1].replace('""', '"'))
        else:
            out.append(item.lower())
    return out


def _split_commas(value: str) -> list[str]:
    parts, current, quoted = [], "", False
    for ch in value:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts
