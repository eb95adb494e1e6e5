"""Builds the scratch copy a :class:`~qadvisor.prove.copy.CopyPlan` describes, on the scratch
server: its statements in order, the churn that gives a partial index the dead entries the
checked server measured, the VACUUM, the dead row versions the checked table held, the
ANALYZE, then the checked table's column statistics."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from qadvisor.collect.queries import first_line
from qadvisor.prove.copy import CopyPlan
from qadvisor.prove.proofs import Say
from qadvisor.sql.printing import qualified

# How long the copy may churn to grow a partial index to its measured size, and by how much
# at a time.
BLOAT_BUDGET_S = 20.0
BLOAT_BATCH = 5_000


def build(dsn: str, plan: CopyPlan, say: Say) -> list[str]:
    """Builds the copy; what of the measured shape it could not give it (a column's
    statistics not restored, a bloat not reached). Each statement made of the snapshot's text
    is sent alone, in the extended protocol, which the server refuses to split: text smuggled
    after a ';' is an error, never a second statement."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for stmt in (*plan.schema, *plan.fill):
            conn.execute(stmt.encode(), binary=True)
        say(f"prove: indexes and constraints of the copy of {plan.table}")
        for stmt in plan.finish:
            conn.execute(stmt.encode(), binary=True)
        notes = _relive_bloat(conn, plan, say)
        say(f"prove: VACUUM of the copy of {plan.table}")
        conn.execute("VACUUM")
        if plan.dead:
            # After the VACUUM, as on the checked table: claims since its last vacuum, whose
            # dead versions and index entries a claim walks past.
            say(f"prove: {plan.dead:,} claims not vacuumed yet, as {plan.table} holds them")
            conn.execute(plan.claim.replace("__K__", str(plan.dead)).encode())
        say(f"prove: ANALYZE of the copy, then the checked statistics of {plan.table}")
        conn.execute("ANALYZE")
        for stmt, column in zip(plan.statistics, plan.statistics_of, strict=True):
            try:
                conn.execute(stmt.encode(), binary=True)
            except psycopg.Error as exc:
                notes.append(
                    f"the checked statistics of {column} could not be restored on the copy "
                    f"(its own ANALYZE stands): {first_line(exc)}"
                )
        return notes


def _relive_bloat(conn: psycopg.Connection[Any], plan: CopyPlan, say: Say) -> list[str]:
    """Each partial index the checked server measured larger than the copy's: the live set
    churned (live rows deleted, as many arriving) until the index has grown to that size,
    within BLOAT_BUDGET_S; the VACUUM that follows removes the dead entries and keeps the pages,
    as production's did. Rows arrive with numbers far past the copy's, so that a vacuum proof's
    later arrivals never meet them."""
    notes: list[str] = []
    next_g = 4 * plan.rows + 1
    for name, wanted in plan.bloated:
        index = f"{qualified(plan.table.split('.', 1)[0], name)}"
        size = "SELECT pg_relation_size(%s::regclass)"
        row = conn.execute(size, [index]).fetchone()
        if row is None or int(row[0]) >= wanted:
            continue
        say(f"prove: churning the live set until {name} is its measured {wanted:,} bytes")
        ends = time.monotonic() + BLOAT_BUDGET_S
        grown = int(row[0])
        while grown < wanted and time.monotonic() < ends:
            with conn.transaction():
                conn.execute(plan.retire.replace("__K__", str(BLOAT_BATCH)).encode())
                stop = next_g + BLOAT_BATCH - 1
                conn.execute(
                    plan.arrive.replace("__START__", str(next_g))
                    .replace("__STOP__", str(stop))
                    .encode()
                )
            next_g = stop + 1
            row = conn.execute(size, [index]).fetchone()
            grown = int(row[0]) if row else grown
        if grown < wanted:
            notes.append(
                f"{name} reached {grown:,} of its measured {wanted:,} bytes in "
                f"{BLOAT_BUDGET_S:.0f} s of churn on the copy"
            )
    return notes
