"""QA203 queue-autovacuum-disabled."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from qadvisor.api import (
    Finding,
    Fix,
    FixStep,
    NoOptions,
    Severity,
    Skip,
    Snapshot,
    Table,
    Target,
    check,
    human_count,
    judgeable_queues,
    migration,
    qualified,
    table_setting,
)
from qadvisor.api.provisional import (
    writing_partitions,
)

_OFF = ("false", "off", "0", "no")


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "autovacuum_enabled": "Autovacuum enabled",
    "last_vacuum": "Last vacuum",
    "setting": "Setting",
    "partitions_autovacuum_disabled": "Partitions with autovacuum off",
    "value": "Value",
}


@check("QA203", "queue-autovacuum-disabled", severity=Severity.WARNING, category="vacuum",
       options=NoOptions,
       requires=("table_facts", "counters"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: NoOptions) -> Iterator[Finding | Skip]:
    """Autovacuum is switched off for a queue table, or for the whole server.

    ## What it finds
    The `autovacuum_enabled = false` reloption on a queue table; `autovacuum = off` or
    `track_counts = off` on the server (without the counters autovacuum cannot tell which
    tables need it).

    ## Why it matters
    A queue table turns over its live set constantly: every claim leaves a dead row version and
    a dead index entry. Without autovacuum they are removed only by a manual VACUUM (or an
    anti-wraparound vacuum, which runs even when autovacuum is off), so the table and its
    indexes bloat at the rate of the throughput.

    ## How to fix
    Reset the reloption (`ALTER TABLE ... RESET (autovacuum_enabled)`, a SHARE UPDATE
    EXCLUSIVE lock) or turn the server setting back on (`ALTER SYSTEM` then
    `pg_reload_conf()`; both settings take effect on reload). Then run VACUUM once.

    A partitioned queue table takes no reloption of its own: autovacuum runs per partition,
    and a partition that takes writes (dead tuples or rows changed since its last VACUUM or
    ANALYZE, live rows, of a table partitioned by time the present's range) and opts out
    is the finding, on the partitioned table, with the RESET for each such partition.

    ## When it stays quiet
    Autovacuum and track_counts are on and no queue table opts out; of a partitioned one, no
    partition that takes writes opts out (an old partition nothing writes any more may).
    """
    if not snapshot.queues:
        return
    queues = ", ".join(q.qualified for q in snapshot.queues)
    for setting in ("autovacuum", "track_counts"):
        value = snapshot.settings.get(setting)
        if value is None:
            yield Skip(f"setting {setting} was not collected")
        elif value == "off":
            yield Finding(
                target=Target("server", None, None, setting),
                severity=Severity.CRITICAL,
                message=(
                    f"{setting} is off on the server: dead rows of the queue tables "
                    f"({queues}) are never vacuumed automatically."
                ),
                evidence={"setting": setting, "value": value},
                explanation=(
                    "Every claim leaves dead row versions and index entries; only vacuum "
                    "removes them."
                ),
                fix=Fix(
                    notes="ALTER SYSTEM needs superuser (or the ALTER SYSTEM privilege); check "
                    "that postgresql.conf or a command-line option does not set it off again.",
                    safety="review",
                    steps=(
                        # ALTER SYSTEM's page: it cannot be executed inside a transaction block.
                        migration(
                            f"ALTER SYSTEM SET {setting} = on;", "none", in_transaction_block=False
                        ),
                        migration("SELECT pg_reload_conf();", "none"),
                    ),
                ),
            )
    for queue, table in judgeable_queues(snapshot):
        if table.partition_key is not None:
            now = snapshot.server.collected_at
            writes = writing_partitions(
                table, queue.live, datetime.fromisoformat(now) if now else None
            )
            off = [w.table for w in writes.writing if _opted_out(w.table)]
            if off:
                yield _partitions_off(table, off)
            continue
        if not _opted_out(table):
            continue
        raw = table.reloptions["autovacuum_enabled"]
        yield Finding(
            target=Target("table", table.schema, table.name, table.name),
            message=(
                f"Autovacuum is disabled on queue table {table.qualified} "
                f"(autovacuum_enabled = {raw}); {human_count(table.stats.n_dead_tup)} dead "
                "tuples wait for a manual VACUUM."
            ),
            evidence={
                "autovacuum_enabled": raw,
                "n_dead_tup": table.stats.n_dead_tup,
                "last_vacuum": table.stats.last_vacuum,
                "last_autovacuum": table.stats.last_autovacuum,
            },
            explanation="A queue table makes dead tuples at the rate of its throughput.",
            fix=Fix(
                notes=f"Run VACUUM {table.qualified} once afterwards to clear what has "
                "accumulated.",
                safety="safe",
                steps=(_reset(table),),
            ),
        )


def _opted_out(table: Table) -> bool:
    return table.reloptions.get("autovacuum_enabled", "true").lower() in _OFF


def _reset(table: Table) -> FixStep:
    return table_setting(
        f"ALTER TABLE {qualified(table.schema, table.name)} RESET (autovacuum_enabled);"
    )


def _partitions_off(table: Table, off: list[Table]) -> Finding:
    """Partitions of a partitioned queue table that take writes and opt out of autovacuum."""
    names = ", ".join(p.name for p in off)
    dead = sum(p.stats.n_dead_tup for p in off)
    return Finding(
        target=Target("table", table.schema, table.name, table.name),
        message=(
            f"Autovacuum is disabled on {len(off)} partition(s) of queue table "
            f"{table.qualified} that take writes ({names}); {human_count(dead)} dead tuples "
            "wait for a manual VACUUM there."
        ),
        evidence={
            "partitions_autovacuum_disabled": [
                f"{p.name}: autovacuum_enabled = {p.reloptions['autovacuum_enabled']}, "
                f"{p.stats.n_dead_tup:,} dead tuples, last autovacuum {p.stats.last_autovacuum}"
                for p in off
            ],
            "n_dead_tup": dead,
        },
        explanation="A queue table makes dead tuples at the rate of its throughput, in the "
        "partitions its writes land in; autovacuum vacuums each partition on its own.",
        fix=Fix(
            notes="Run VACUUM on each of them once afterwards to clear what has accumulated.",
            safety="safe",
            steps=tuple(_reset(p) for p in off),
        ),
    )
