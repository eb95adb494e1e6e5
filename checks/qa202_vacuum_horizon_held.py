"""QA202 vacuum-horizon-held."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from qadvisor.api import (
    Finding,
    Fix,
    HorizonHolder,
    Severity,
    Skip,
    Snapshot,
    Target,
    check,
    human_count,
    human_seconds,
    literal,
    queue_tables,
    review,
)


@dataclass(frozen=True)
class Options:
    # A snapshot older than this holds back vacuum long enough to matter on a busy queue
    # (PostgreSQL docs, "Routine Vacuuming": dead rows still visible to any transaction stay).
    min_age_s: float = 300.0
    # Without a start time (slots, standbys): this many transactions behind.
    min_xmin_age: int = 1_000_000
    # Older than this, or an inactive replication slot: critical.
    critical_age_s: float = 3600.0


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "age_s": "Age",
    "application_name": "Application name",
    "kind": "Kind",
    "name": "Name",
    "queue_dead_tuples": "Dead tuples in the queue",
    "state": "State",
    "user": "User",
    "xmin_age": "xmin age (transactions)",
    "min_age_s": "Minimum age",
    "min_xmin_age": "Minimum xmin age",
}


@check("QA202", "vacuum-horizon-held", severity=Severity.WARNING, category="vacuum",
       options=Options,
       requires=("horizon",),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """A long transaction, replication slot or prepared transaction keeps dead queue rows.

    ## What it finds
    A session of this database with a snapshot open for longer than `min_age_s` (often
    "idle in transaction"), a prepared transaction, a replication slot with an `xmin`, or a
    standby with `hot_standby_feedback`, holding the xmin horizon back.

    ## Why it matters
    VACUUM removes only row versions that no snapshot can still see. While the horizon is held,
    every claim's dead row version and dead index entry stays, whatever the autovacuum
    settings: the live set stays small, but the table and its partial indexes bloat at the
    rate of the throughput, and each dequeue walks further through dead entries.

    ## How to fix
    End the holder: terminate the session (`pg_terminate_backend`), roll back or commit the
    prepared transaction, drop an abandoned slot. Then remove the cause: set
    `idle_in_transaction_session_timeout`, run long reports on a replica, monitor slots.
    Each fix ends somebody's work: the statements are printed for review, not to paste.

    ## When it stays quiet
    No transaction of this database is older than `min_age_s` and no slot or standby is
    `min_xmin_age` transactions behind. It needs `pg_read_all_stats` (part of `pg_monitor`)
    to see other roles' sessions: without it, pg_stat_activity hides their transaction start
    and state, and sessions of other roles that hold the horizon are reported as a skip that
    names the grant.
    """
    if not snapshot.queues:
        return
    if "horizon" in snapshot.unavailable:
        yield Skip(snapshot.unavailable["horizon"])
        return
    dead = {t.qualified: t.stats.n_dead_tup for _q, t in queue_tables(snapshot)}
    for h in snapshot.horizon:
        old_enough = h.age_s is not None and h.age_s >= options.min_age_s
        far_behind = h.age_s is None and (h.xmin_age or 0) >= options.min_xmin_age
        if not (old_enough or far_behind):
            continue
        critical = (h.age_s or 0) >= options.critical_age_s or (
            h.kind == "replication slot" and h.state == "inactive"
        )
        held = (
            f"for {human_seconds(h.age_s)}"
            if h.age_s is not None
            else f"{human_count(h.xmin_age or 0)} transactions behind"
        )
        who = f" ({h.application_name})" if h.application_name else ""
        yield Finding(
            target=Target("horizon", None, None, f"{_slug(h.kind)}-{h.name}"),
            severity=Severity.CRITICAL if critical else None,
            message=(
                f"{h.kind.capitalize()} {h.name}{who} has held the xmin horizon {held}"
                f" ({h.state or 'state unknown'}): dead rows of the queue tables cannot be "
                f"vacuumed ({', '.join(f'{k}: {human_count(v)} dead' for k, v in dead.items())})."
            ),
            evidence={
                "kind": h.kind,
                "name": h.name,
                "state": h.state,
                "application_name": h.application_name,
                "user": h.user,
                "age_s": round(h.age_s) if h.age_s is not None else None,
                "xmin_age": h.xmin_age,
                "queue_dead_tuples": dead,
                "min_age_s": options.min_age_s,
                "min_xmin_age": options.min_xmin_age,
            },
            explanation=(
                "VACUUM keeps every row version an open snapshot may still see; a queue makes "
                "such versions at the rate of its throughput."
            ),
            fix=_fix(h),
        )
    if "horizon_hidden" in snapshot.unavailable:
        # Sessions the role cannot see into: the holders above are judged, those are not.
        yield Skip(snapshot.unavailable["horizon_hidden"])


def _slug(kind: str) -> str:
    return kind.replace(" ", "-")


def _fix(h: HorizonHolder) -> Fix:
    if h.kind == "transaction":
        return Fix(
            notes="Ends that session and rolls back its transaction: find out what it is first "
            "(pg_stat_activity.query). To stop it recurring: ALTER ROLE ... SET "
            "idle_in_transaction_session_timeout = '5min', and keep long reports off the "
            "primary.",
            steps=(review(f"SELECT pg_terminate_backend({int(h.name)});", "none"),),
        )
    if h.kind == "prepared transaction":
        return Fix(
            notes="Or COMMIT PREPARED, if its transaction manager expects that: ask its owner. "
            "Run it in the database the transaction was prepared in.",
            steps=(
                # ROLLBACK PREPARED's page: it cannot be executed inside a transaction block.
                review(f"ROLLBACK PREPARED {literal(h.name)};", "none", in_transaction_block=False),
            ),
        )
    if h.kind == "replication slot":
        return Fix(
            notes="Only for a slot nobody consumes any more: a standby or logical consumer "
            "using it must then be rebuilt. An active slot is held by a lagging consumer: fix the "
            "consumer instead.",
            steps=(review(f"SELECT pg_drop_replication_slot({literal(h.name)});", "none"),),
        )
    return Fix(
        notes="A standby with hot_standby_feedback holds the horizon for its long queries: end "
        "them on the standby, or set max_standby_streaming_delay instead of the feedback.",
    )
