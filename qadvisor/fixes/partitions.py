"""Fix steps on a partitioned queue table's partitions: detaching and dropping old ones, and
the settings each partition takes for itself.

The locks are those of ALTER TABLE's page (DETACH PARTITION and its CONCURRENTLY form) and
of DROP TABLE; every lock was also read from pg_locks on PostgreSQL 18 while the statement
held it. Pure: table facts in, SQL text out.
"""

from __future__ import annotations

from collections.abc import Sequence

from qadvisor.fixes.builders import review
from qadvisor.model import FixStep, LivePredicate, Table
from qadvisor.sql.printing import literal, predicate_sql, qualified

# DETACH PARTITION ... CONCURRENTLY exists from PostgreSQL 14 (ALTER TABLE's page).
CONCURRENT_DETACH_VERSION = 140000


def _name(table: Table) -> str:
    return qualified(table.schema, table.name)


def _parent(partition: Table) -> str:
    schema, _, name = (partition.partition_of or "").partition(".")
    return qualified(schema, name)


def _listed(items: Sequence[str], indent: str) -> str:
    """Items separated by commas, four to a line past the first."""
    lines = [", ".join(items[i : i + 4]) for i in range(0, len(items), 4)]
    return f",\n{indent}".join(lines)


def _waiting_check(partitions: Sequence[Table], live: LivePredicate, then: str) -> str:
    """A DO block that stops with an error naming the first of ``partitions`` holding a
    row of the live set, and otherwise runs ``then`` (statements, or nothing)."""
    names = _listed([literal(_name(p)) for p in partitions], "    ")
    # The condition goes into format()'s string: its quotes doubled, its % signs too.
    where = predicate_sql(live).replace("'", "''").replace("%", "%%")
    lines = [
        "DO $$",
        "DECLARE",
        "  _partition regclass;",
        "  _waiting boolean;",
        "BEGIN",
        f"  FOREACH _partition IN ARRAY ARRAY[\n    {names}\n  ]::regclass[] LOOP",
        f"    EXECUTE format('SELECT EXISTS (SELECT FROM %s WHERE {where})', _partition)",
        "      INTO _waiting;",
        "    IF _waiting THEN",
        "      RAISE EXCEPTION '% holds rows waiting to be claimed: keep it', _partition;",
        "    END IF;",
        "  END LOOP;",
        *(f"  {line}" for line in then.splitlines()),
        "END",
        "$$;",
    ]
    return "\n".join(lines)


def waiting_guard(partitions: Sequence[Table], live: LivePredicate) -> FixStep:
    """Stops (an error) when one of the partitions to detach holds a waiting row: the
    statistics said none does, and a retried job may have become one since."""
    return review(
        _waiting_check(partitions, live, ""),
        "ACCESS SHARE",
        note="Reads each partition for a row of the live set (through its part of the "
        "live-set index when there is one) and raises an error naming the first that holds "
        "one: run the steps in a script that stops at an error (psql -v ON_ERROR_STOP=1), "
        "so that nothing waiting is detached.",
    )


def detach(partition: Table, *, concurrently: bool, has_default: bool) -> FixStep:
    """``ALTER TABLE parent DETACH PARTITION p``: CONCURRENTLY where it may be."""
    parent, name = _parent(partition), _name(partition)
    if concurrently:
        return review(
            f"ALTER TABLE {parent} DETACH PARTITION {name} CONCURRENTLY;",
            "SHARE UPDATE EXCLUSIVE",
            in_transaction_block=False,
            note=f"Runs in two transactions and cannot run inside a transaction block: "
            f"SHARE UPDATE EXCLUSIVE on {parent} and the partition (claims and inserts go "
            f"on), then it waits for every transaction using {parent} to end and finishes "
            "with ACCESS EXCLUSIVE on the partition alone. Interrupted, it leaves the "
            f"partition half detached: finish with ALTER TABLE {parent} DETACH PARTITION "
            f"{name} FINALIZE;",
        )
    why = (
        f"CONCURRENTLY is not allowed while {parent} has a DEFAULT partition"
        if has_default
        else "CONCURRENTLY needs PostgreSQL 14"
    )
    return review(
        f"ALTER TABLE {parent} DETACH PARTITION {name};",
        "ACCESS EXCLUSIVE",
        note=f"Takes ACCESS EXCLUSIVE on {parent}, the partition"
        + (f" and {parent}'s DEFAULT partition" if has_default else "")
        + " until its transaction ends: claims and inserts wait for it, and it waits for "
        f"every transaction on {parent} first, so set a lock_timeout (SET lock_timeout = "
        f"'5s') and run it again when it gives up ({why}).",
    )


def guarded_drop(partitions: Sequence[Table], live: LivePredicate) -> FixStep:
    """DROP TABLE of detached partitions, in one DO block that first makes sure none holds a
    waiting row (one would be out of every worker's reach once detached)."""
    names = _listed([_name(p) for p in partitions], "  ")
    return review(
        _waiting_check(partitions, live, f"DROP TABLE\n  {names};"),
        "ACCESS EXCLUSIVE",
        note="Drops the detached partitions, their rows and indexes at once (no dead tuples, "
        "nothing for autovacuum), unless one holds a waiting row: then it drops nothing and "
        "names it; attach that one again (ALTER TABLE ... ATTACH PARTITION ... FOR VALUES as "
        "it was) so that a worker can claim it. ACCESS EXCLUSIVE on the detached tables "
        "alone, which nothing reads any more.",
    )
