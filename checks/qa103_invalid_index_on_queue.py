"""QA103 invalid-index-on-queue."""

from __future__ import annotations

import re
from collections.abc import Iterator

from qadvisor.api import (
    Finding,
    Fix,
    Index,
    Severity,
    Skip,
    Snapshot,
    Table,
    Target,
    check,
    drop_index,
    human_bytes,
    judgeable_queues,
)

# REINDEX CONCURRENTLY names its new copy <name>_ccnew (then _ccnew1, ...) and, once swapped,
# the old one <name>_ccold: a failure between the steps leaves the invalid one behind.
_LEFTOVER = re.compile(r"^(?P<base>.+)_cc(?P<kind>new|old)\d*$")


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "left_by": "Left by",
    "maintained_by_writes": "Maintained by writes",
    "shadowed_index": "Valid index beside it",
    "shadowed_index_bytes": "Size of the valid index",
    "invalid_indexes_on_table": "Invalid indexes on the table",
}


@check("QA103", "invalid-index-on-queue", severity=Severity.WARNING,
       category="indexes", requires=("table_facts", "sizes", "index_definitions"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: object) -> Iterator[Finding | Skip]:
    """An invalid index on a queue table: no query can use it, and writes may maintain it.

    ## What it finds
    An index of a queue table with `pg_index.indisvalid = false`: what a failed or cancelled
    `CREATE INDEX CONCURRENTLY` leaves, or a `*_ccnew` / `*_ccold` copy left by a failed
    `REINDEX CONCURRENTLY`. The evidence names the valid index it shadows, when there is one
    (the same name without the suffix, or the same definition).

    ## Why it matters
    The planner never uses an invalid index. Once a concurrent build has filled it
    (`pg_index.indisready`), PostgreSQL keeps it up to date on every insert and update, so each
    claim and each completion pays for it, and its entries bloat like any other index's. A
    build that failed before that (a unique key that the rows already break) left an empty
    index no write maintains, but it holds its name: `CREATE INDEX CONCURRENTLY IF NOT
    EXISTS` run again does nothing, and the index the migration meant to add is not there. A
    scheduled `REINDEX CONCURRENTLY` that times out on a large index leaves a new `_ccnew`
    copy each time it runs: River's users found 13 of them that "come back within a day or
    two".

    ## How to fix
    `DROP INDEX CONCURRENTLY` the invalid index (it takes a SHARE UPDATE EXCLUSIVE lock, so
    reads and writes go on, and cannot run inside a transaction block). First make sure it is
    not an index still being built: a `CREATE INDEX CONCURRENTLY` in progress is invalid until
    it finishes (`pg_stat_progress_create_index` lists it). When the leftover comes from a
    periodic reindex of an index that covers the archive, the cure is QA101's partial index on
    the live set: it stays small, so nothing needs reindexing on a schedule.

    ## When it stays quiet
    Every index of the queue tables is valid.
    """
    for _queue, table in judgeable_queues(snapshot):
        invalid = [i for i in table.indexes if not i.is_valid]
        for idx in invalid:
            yield _finding(table, idx, len(invalid))


def _shadowed(table: Table, idx: Index) -> tuple[Index | None, str]:
    """The valid index the invalid one stands beside, and how it was left."""
    m = _LEFTOVER.match(idx.name)
    if m:
        base = next((i for i in table.indexes if i.name == m["base"] and i.is_valid), None)
        how = (
            "REINDEX CONCURRENTLY left its new copy"
            if m["kind"] == "new"
            else ("REINDEX CONCURRENTLY left the old index after the swap")
        )
        if base is not None:
            return base, how
    same = _shape(idx)
    twin = next((i for i in table.indexes if i.is_valid and _shape(i) == same), None)
    return twin, "a CREATE INDEX CONCURRENTLY failed or was cancelled"


def _shape(idx: Index) -> str:
    # The definition without the index's own name: two indexes built alike compare equal.
    return re.sub(r"^(CREATE (?:UNIQUE )?INDEX )\S+ ", r"\1", idx.definition)


def _finding(table: Table, idx: Index, invalid_count: int) -> Finding:
    twin, how = _shadowed(table, idx)
    notes = [
        f"{idx.name} is invalid: make sure no CREATE INDEX CONCURRENTLY or REINDEX "
        "CONCURRENTLY is still building it (SELECT * FROM pg_stat_progress_create_index) "
        "before dropping it.",
    ]
    if twin is not None and _LEFTOVER.match(idx.name):
        notes.append(
            f"If a scheduled REINDEX CONCURRENTLY of {twin.name} left it, it will leave another "
            f"each time the reindex fails; when {twin.name} covers the archive of finished "
            "jobs, QA101's partial index on the live set is the cure: it stays small, so "
            "nothing needs reindexing on a schedule."
        )
    if not idx.is_ready:
        notes.append(
            f"Its build stopped before it was filled: if the index is needed, create it again "
            f"once the cause is gone (a unique index over rows that break it fails again); a "
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS skips it while {idx.name} exists."
        )
    shadow = f", beside valid index {twin.name}" if twin is not None else ""
    cost = (
        "every write maintains it and no query can use it"
        if idx.is_ready
        else "no query can use it and no write maintains it, but it holds its name: CREATE "
        "INDEX CONCURRENTLY IF NOT EXISTS run again skips it, so the index it was to be is "
        "not there"
    )
    return Finding(
        target=Target("index", table.schema, table.name, idx.name),
        message=(
            f"Index {idx.name} on {table.qualified} is invalid ({human_bytes(idx.bytes)}"
            f"{shadow}): {cost}."
        ),
        evidence={
            "index_definition": idx.definition,
            "index_bytes": idx.bytes,
            **({"index_bytes_source": idx.bytes_source} if idx.bytes_source else {}),
            "left_by": how,
            "maintained_by_writes": idx.is_ready,
            "shadowed_index": twin.name if twin is not None else None,
            "shadowed_index_bytes": twin.bytes if twin is not None else None,
            "invalid_indexes_on_table": invalid_count,
        },
        explanation=(
            "An invalid index is never used by the planner; once its build has filled it, "
            "every insert and update maintains it: pure cost on the queue's hottest path."
        ),
        fix=Fix(
            notes=" ".join(notes),
            safety="review",
            steps=(
                drop_index(table.schema, idx.name, partitioned=table.partition_key is not None),
            ),
        ),
    )
