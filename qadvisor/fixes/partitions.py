"""Fix steps on a partitioned queue table's partitions: detaching and dropping old ones, and
building or dropping an index of a partitioned table, which PostgreSQL does not do
CONCURRENTLY.

The locks are those of ALTER TABLE's page (DETACH PARTITION and its CONCURRENTLY form), of
CREATE INDEX's (ON ONLY, and its note on building a partitioned table's index without
locking out writes), ALTER INDEX's (ATTACH PARTITION), DROP INDEX's and DROP TABLE's; every
lock was also read from pg_locks on PostgreSQL 18 while the statement held it. Pure: table
facts in, SQL text out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from qadvisor.model import FixStep, LivePredicate, StepLock, Table
from qadvisor.sql.printing import ident, literal, predicate_sql, qualified

# DETACH PARTITION ... CONCURRENTLY exists from PostgreSQL 14 (ALTER TABLE's page).
CONCURRENT_DETACH_VERSION = 140000


def review(
    sql: str, lock: StepLock, *, in_transaction_block: bool = True, note: str = ""
) -> FixStep:
    return FixStep("review", sql, lock, in_transaction_block, note)


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


def index_on_partitions(
    table: Table, name: Callable[[Table], str], definition: str, note: str = ""
) -> tuple[FixStep, ...]:
    """An index of a partitioned table, built without locking out writes: CREATE INDEX
    CONCURRENTLY refuses a partitioned table ("cannot create index on partitioned table
    concurrently"), and CREATE INDEX's page builds it instead as the index ON ONLY the
    partitioned table (invalid until every partition's is attached), each leaf's built
    CONCURRENTLY and attached, each partitioned partition's ON ONLY and attached, parents
    first. ``name(t)`` names the index of table ``t``; ``definition`` is what follows the
    table: ``(created_at) WHERE status = 'pending'``."""
    tables = {table.qualified: table} | {p.qualified: p for p in table.partitions}

    def depth(t: Table) -> int:
        n, up = 0, t.partition_of
        while up is not None and up in tables:
            n, up = n + 1, tables[up].partition_of
        return n

    steps = [_only(table, name, definition, note)]
    for part in sorted(table.partitions, key=lambda p: (depth(p), p.schema, p.name)):
        parent = tables.get(part.partition_of or "")
        if parent is None:
            continue
        if part.partition_key is not None:
            steps.append(_only(part, name, definition))
        else:
            steps.append(
                FixStep(
                    "migration",
                    f"CREATE INDEX CONCURRENTLY {ident(name(part))} ON {_name(part)} {definition};",
                    "SHARE UPDATE EXCLUSIVE",
                    False,
                    "Builds the partition's index without blocking its writes; it cannot run "
                    "inside a transaction block, and a failed build leaves an INVALID index: "
                    "drop it and run it again.",
                )
            )
        steps.append(
            FixStep(
                "migration",
                f"ALTER INDEX {qualified(parent.schema, name(parent))} ATTACH PARTITION "
                f"{qualified(part.schema, name(part))};",
                "SHARE UPDATE EXCLUSIVE",
                True,
                "Attaches the partition's index to its partitioned table's (SHARE UPDATE "
                "EXCLUSIVE on that index, ACCESS SHARE on the tables): the partitioned "
                "table's index is valid once every partition's is attached.",
            )
        )
    return tuple(steps)


def _only(table: Table, name: Callable[[Table], str], definition: str, note: str = "") -> FixStep:
    what = "the partitioned table" if not table.partition_of else "the partitioned partition"
    return FixStep(
        "migration",
        f"CREATE INDEX {ident(name(table))} ON ONLY {_name(table)} {definition};",
        "SHARE",
        True,
        " ".join(
            p
            for p in (
                note,
                f"Creates the index on {what} alone, invalid until the index of each of its "
                "partitions is attached (the steps below); a partition created later gets "
                "one of its own. It takes a SHARE lock on it for a moment (writes wait, and "
                "it waits for the writes under way): set a lock_timeout.",
            )
            if p
        ),
    )


def drop_partitioned_index(schema: str, name: str) -> FixStep:
    """DROP INDEX of a partitioned table's index: not CONCURRENTLY, which PostgreSQL refuses
    for it ("cannot drop partitioned index concurrently")."""
    return FixStep(
        "migration",
        f"DROP INDEX {qualified(schema, name)};",
        "ACCESS EXCLUSIVE",
        True,
        "An index of a partitioned table cannot be dropped CONCURRENTLY: this takes ACCESS "
        "EXCLUSIVE on the partitioned table and every partition until its transaction ends "
        "(claims wait for it, and it waits for the transactions under way): run it at a "
        "quiet moment with a lock_timeout (SET lock_timeout = '5s'), and again if it gives up.",
    )
