"""The monitoring role a database needs (``qadvisor role``): takes a connection (a DBA's, who
may read everything), gives the role's setup.

Nothing here lists grants by hand. The collector runs as it does for ``check``, with its guard
deciding as the monitoring role would (qadvisor.collect.access.Assumed): each fact the role
could not read is recorded with the GRANT that would show it. Those grants are taken as given
and the collection runs again, until a round asks for nothing new (a grant can show what asks
for another: a claim planned at last names the rotation table it reads).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from qadvisor.collect import queries as q
from qadvisor.collect.access import Asked, Assumed
from qadvisor.collect.snapshot import collect
from qadvisor.facts import FACTS
from qadvisor.model import RoleGrant, RoleSetup, Snapshot
from qadvisor.sql.printing import ident

Conn = psycopg.Connection[Any]

# Rounds of collection: each grant taken can show what asks for one more (a plan, then the
# rotation table it reads); three have always been enough, the fourth says when they were not.
MAX_ROUNDS = 4
# What every monitoring role is given, whatever the queues: other roles' statements in
# pg_stat_statements and their sessions' state in pg_stat_activity.
ALWAYS = ("statements", "horizon")


def monitoring_role(
    conn: Conn,
    role: str,
    tables: Sequence[str] = (),
    queries: Sequence[tuple[str, str]] = (),
) -> RoleSetup:
    """The setup of ``role`` for the queues the collector finds (or ``tables``) and the
    claims it knows (pg_stat_statements, functions, ``queries``)."""
    assumed = Assumed(role)
    snap: Snapshot | None = None
    for _ in range(MAX_ROUNDS):
        snap = collect(conn, tables, queries=queries, assumed=assumed)
        if not assumed.grant_asked():
            break
    assert snap is not None
    exists = q.rows(conn, "role_exists", {"role": role})[0]["exists"]
    return RoleSetup(
        role=role,
        database=snap.server.database,
        server_version=snap.server.version,
        create=not exists,
        queues=snap.queues,
        grants=tuple(_statements(assumed, snap.server.database)),
        # What a lock, not a privilege, kept from being read; a grant still asked for after
        # the last round (none so far) is said too.
        hidden=tuple(h for h in snap.hidden if h.blocker_pid is not None or h.grants),
    )


def _statements(assumed: Assumed, database: str) -> list[RoleGrant]:
    """One statement per grant held, the columns of a table in one, each with the facts that
    asked for it."""
    role = assumed.role
    every = assumed.asked
    out = [
        RoleGrant(FACTS["statements"].grant("read_all_stats", role), ALWAYS),
        RoleGrant(f"GRANT CONNECT ON DATABASE {ident(database)} TO {ident(role)};", ()),
    ]

    def facts(match: Any) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.fact for a in every if match(a)))

    for schema in sorted(assumed.usage):
        out.append(
            RoleGrant(
                FACTS["plans"].grant("usage", role, schema),
                facts(lambda a, s=schema: a.kind == "usage" and a.schema == s),
            )
        )
    for key in sorted(assumed.tables):
        out.append(
            RoleGrant(
                FACTS["plans"].grant("select", role, *key),
                facts(lambda a, k=key: _on(a, k) and not a.columns and a.kind != "update"),
            )
        )
    for key in sorted(assumed.columns):
        if key in assumed.tables:
            continue  # the whole table's SELECT holds them
        ordered = [c for a in every if _on(a, key) for c in a.columns]
        ordered = [c for c in ordered if c in assumed.columns[key]]
        out.append(
            RoleGrant(
                FACTS["plans"].grant("columns", role, *key, dict.fromkeys(ordered)),
                facts(lambda a, k=key: _on(a, k) and bool(a.columns)),
            )
        )
    for key in sorted(assumed.updates):
        out.append(
            RoleGrant(
                FACTS["plans"].grant("update", role, *key),
                facts(lambda a, k=key: _on(a, k) and a.kind == "update"),
            )
        )
    for key in sorted(assumed.sequences):
        out.append(
            RoleGrant(
                FACTS["id_sequences"].grant("sequence", role, *key),
                facts(lambda a, k=key: _on(a, k) and a.kind == "sequence"),
            )
        )
    return out


def _on(asked: Asked, key: tuple[str, str]) -> bool:
    return (asked.schema, asked.name) == key and asked.kind != "usage"
