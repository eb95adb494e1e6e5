"""A monitoring role's setup (``qadvisor role``) as the SQL a DBA runs, each statement under a
comment saying what it shows and which checks read it."""

from __future__ import annotations

from typing import TextIO

from qadvisor.facts import FACTS
from qadvisor.model import RoleSetup
from qadvisor.render.steps import ScriptLine, as_text
from qadvisor.sql.printing import ident

WIDTH = 100


def render(setup: RoleSetup) -> str:
    role = ident(setup.role)
    queues = ", ".join(q.qualified for q in setup.queues) or "none"
    said = [
        f"The monitoring role {setup.role} for qadvisor on database {setup.database} "
        f"(PostgreSQL {setup.server_version}): what every installed check needs to judge the "
        f"{len(setup.queues)} queue table(s) qadvisor found there ({queues}), and no more.",
        "Run it as a superuser, or as a role with CREATEROLE that holds these privileges "
        "with the grant option (the tables' owner). It grants no UPDATE and no job payload; "
        "qadvisor's sessions stay read-only whatever a role is granted. Check as this role "
        "with the same --table, --query and --query-file as this run.",
    ]
    if not setup.queues:
        said.append(
            "No queue table was found: name them with --table, or give the claims with "
            "--query or --query-file, and run qadvisor role again."
        )
    lines = [ScriptLine("prose", text) for text in said]
    if setup.create:
        lines += [
            ScriptLine("sql", f"CREATE ROLE {role} LOGIN;"),
            ScriptLine("prose", f"Its password apart from this file (psql: \\password {role})."),
        ]
    for grant in setup.grants:
        if grant.facts:
            readers = f" (read by {', '.join(grant.checks)})" if grant.checks else ""
            shows = "; ".join(FACTS[f].title for f in grant.facts)
            note = f"Shows {shows}{readers}."
        else:
            note = "Lets it connect (PUBLIC holds CONNECT unless it was revoked)."
        lines.append(ScriptLine("prose", note))
        lines.append(ScriptLine("sql", grant.statement))
    for h in setup.hidden:
        where = f"{h.queue}: " if h.queue else ""
        lines.append(ScriptLine("prose", f"Not a matter of grants: {where}{h.reason}"))
    return "\n".join(as_text(lines, WIDTH)) + "\n"


def write(setup: RoleSetup, out: TextIO) -> None:
    out.write(render(setup))
