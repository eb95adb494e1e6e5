"""plan_cache_mode as the application's sessions start with it: whether generic plans are
forced (where a parameterized predicate hides a partial index from every execution)."""

from __future__ import annotations

from dataclasses import dataclass

from qadvisor.model import Snapshot

FORCE_GENERIC = "force_generic_plan"


@dataclass(frozen=True)
class PlanCacheMode:
    value: str | None  # None: unknown
    source: str  # where it is set, as a person would find it

    @property
    def forced_generic(self) -> bool:
        return self.value == FORCE_GENERIC


def plan_cache_mode(snapshot: Snapshot, role: str | None) -> PlanCacheMode:
    """plan_cache_mode as a session of ``role`` in this database starts with.

    pg_db_role_setting rows win over the server's value, most specific first: role in this
    database, role, this database, all roles (ALTER ROLE ALL). With ``role`` None (unknown),
    a role-level row that forces generic plans counts: it applies to any statement that role
    runs. The server value is qadvisor's own session value unless a row for qadvisor's role
    explains that. A SET in the application's session or a driver option cannot be seen here.
    """
    db = snapshot.server.database
    rows = [r for r in snapshot.role_settings if r.name == "plan_cache_mode"]

    def lookup(who: str | None) -> PlanCacheMode | None:
        order: list[tuple[str | None, str | None]] = []
        if who is not None:
            order += [(db, who), (None, who)]
        order += [(db, None), (None, None)]
        for database, rolename in order:
            for r in rows:
                if r.database == database and r.role == rolename:
                    return PlanCacheMode(r.value, _row_source(r.database, r.role, r.value))
        return None

    if role is None:
        for r in rows:
            if r.role is not None and r.value == FORCE_GENERIC:
                return PlanCacheMode(r.value, _row_source(r.database, r.role, r.value))
    found = lookup(role)
    if found is not None:
        return found
    session = snapshot.settings.get("plan_cache_mode")
    if lookup(snapshot.server.user) is not None or session is None:
        return PlanCacheMode(None, "server value unknown")
    return PlanCacheMode(session, "server (postgresql.conf, ALTER SYSTEM or the command line)")


def _row_source(database: str | None, role: str | None, value: str) -> str:
    if role is not None and database is not None:
        return f"ALTER ROLE {role} IN DATABASE {database} SET plan_cache_mode = {value}"
    if role is not None:
        return f"ALTER ROLE {role} SET plan_cache_mode = {value}"
    if database is not None:
        return f"ALTER DATABASE {database} SET plan_cache_mode = {value}"
    return f"ALTER ROLE ALL SET plan_cache_mode = {value}"
