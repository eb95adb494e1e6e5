"""Which table a statement's name means: resolved the way the application's session did.

pg_stat_statements keeps a statement's text as the application sent it, so ``FROM jobs`` names
whatever ``jobs`` its session found first on its search_path. qadvisor's own session has
another one. This module rebuilds the application's: the search_path its role starts with in
this database (pg_db_role_setting: role in database, then role, then database, then the
server's value), ``$user`` expanded to the role's name, and resolves names against a catalog
of the relations those names can mean. Pure: the collector reads the catalog and settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qadvisor.model import RoleSetting

# The catalog that names resolve against, and its relations: shared with function claims
# (qadvisor.sql owns them), named here too as part of this module's interface.
from qadvisor.sql.catalog import Catalog as Catalog
from qadvisor.sql.catalog import Relation as Relation
from qadvisor.sql.catalog import split_path

DEFAULT_SEARCH_PATH = '"$user", public'


@dataclass(frozen=True)
class SearchPath:
    """The search_path a role's sessions start with in this database, and where it is set."""

    role: str | None
    setting: str  # as written, e.g. '"$user", public'
    source: str  # "ALTER ROLE worker IN DATABASE app", "server", ...

    def schemas(self) -> list[str]:
        """The schemas searched, in order: ``$user`` expanded, pg_catalog first unless listed
        (PostgreSQL searches it first when the path does not name it)."""
        names = [self.role if n == "$user" else n for n in split_path(self.setting)]
        found = [n for n in names if n is not None]
        if "pg_catalog" not in found:
            found.insert(0, "pg_catalog")
        return found


def role_search_path(
    role: str | None, database: str, settings: Sequence[RoleSetting], server: str | None
) -> SearchPath:
    """The search_path of ``role`` in ``database``: the most specific ALTER ROLE / ALTER
    DATABASE setting, else the server's value (``server``; None: PostgreSQL's default)."""
    rows = [r for r in settings if r.name == "search_path"]
    order: list[tuple[str | None, str | None]] = []
    if role is not None:
        order += [(database, role), (None, role)]
    order += [(database, None)]
    for db, who in order:
        for r in rows:
            if r.database == db and r.role == who:
                return SearchPath(role, r.value, _setting_source(db, who))
    for r in rows:  # ALTER ROLE ALL SET search_path: every role, every database
        if r.database is None and r.role is None:
            return SearchPath(role, r.value, "ALTER ROLE ALL")
    if server is not None:
        return SearchPath(role, server, "server")
    return SearchPath(role, DEFAULT_SEARCH_PATH, "PostgreSQL's default")


def _setting_source(database: str | None, role: str | None) -> str:
    if role is not None and database is not None:
        return f"ALTER ROLE {role} IN DATABASE {database}"
    if role is not None:
        return f"ALTER ROLE {role}"
    return f"ALTER DATABASE {database}"


@dataclass(frozen=True)
class Resolution:
    """Where one statement's names were found."""

    tables: dict[tuple[str | None, str], Relation]  # each name as written -> the relation
    search_path: str  # the path they were resolved under, as SET LOCAL would take it
    how: str  # "search_path of role worker (ALTER ROLE worker)", "schema of queue app.jobs"


def resolve_name(
    schema: str | None, name: str, path: Sequence[str], catalog: Catalog
) -> Relation | None:
    if schema is not None:
        return catalog.get(schema, name)
    for s in path:
        found = catalog.get(s, name)
        if found is not None:
            return found
    return None


def resolve(
    names: Sequence[tuple[str | None, str]],
    paths: Sequence[SearchPath],
    catalog: Catalog,
    queue_schemas: Sequence[str] = (),
) -> tuple[list[Resolution], str | None]:
    """Resolve a statement's names (its ``relations``; the first is the queue table).

    Tried in order, the first that finds every name wins: the search_path of each role that
    ran the statement; then, when the roles' paths do not find the names (a driver that sets
    search_path itself, a pooler), each schema in ``queue_schemas`` (those of the queue tables
    of that name: a schema-per-tenant database gives one resolution per schema), each with
    ``public`` after it. Returns the resolutions and, when there is none, why.
    """
    if not names:
        return [], "the statement names no table"
    out: list[Resolution] = []
    seen: set[tuple[int, ...]] = set()

    def attempt(path: list[str], how: str) -> bool:
        tables = {}
        for schema, name in names:
            rel = resolve_name(schema, name, path, catalog)
            if rel is None:
                return False
            tables[(schema, name)] = rel
        ids = tuple(r.relid for r in tables.values())
        if ids not in seen:
            seen.add(ids)
            out.append(Resolution(tables, path_setting(path), how))
        return True

    for sp in paths:
        attempt(sp.schemas(), f"search_path of role {sp.role} ({sp.source})"
                if sp.role else f"search_path ({sp.source})")  # fmt: skip
    if out:
        return out, None
    for schema in queue_schemas:
        attempt(["pg_catalog", schema, "public"], f"schema of queue {schema}.{names[0][1]}")
    if out:
        return out, None
    tried = [f"{sp.setting!r} ({sp.source})" for sp in paths]
    missing = [
        f"{s + '.' if s else ''}{n}" for s, n in names if not catalog.named(n) or s is not None
    ]
    what = ", ".join(missing) or ", ".join(f"{s + '.' if s else ''}{n}" for s, n in names)
    return [], (
        f"relation {what} not found under the search_path"
        + (f" {' or '.join(tried)}" if tried else "")
        + (f" or the schemas {', '.join(queue_schemas)}" if queue_schemas else "")
    )


def path_setting(path: Sequence[str]) -> str:
    """Schema names as a search_path value (each quoted as an identifier)."""
    return ", ".join('"' + s.replace('"', '""') + '"' for s in path)
