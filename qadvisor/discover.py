"""Which tables are job queues, and what makes a row live: a pure decision over catalog facts.

The collector gathers candidate columns, partial index predicates and locking statements for
the whole database in a few queries; this module decides. Every decision carries a reason that
the report prints, so a user can see why a table was (or was not) taken for a queue.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from qadvisor.estimates import parse_index_predicate
from qadvisor.model import LivePredicate

# Status values that mean "waiting to be claimed", in the order they are preferred.
LIVE_WORDS = (
    "pending", "queued", "available", "ready", "todo", "new", "enqueued", "waiting",
    "scheduled", "created", "retry", "retryable", "runnable", "open",
)  # fmt: skip
# Status values of finished rows: the archive.
ARCHIVE_WORDS = frozenset(
    """
    done completed complete succeeded success successful finished failed failure
    cancelled canceled discarded archived dead expired aborted processed error errored
    """.split()  # noqa: SIM905
)
STATUS_TYPES = ("text", "character varying", "character", "smallint", "integer", "USER-DEFINED")


@dataclass(frozen=True)
class CandidateColumn:
    schema: str
    table: str
    relid: int
    column: str
    type: str
    not_null: bool
    enum_labels: tuple[str, ...] | None
    indexed: bool
    common_values: tuple[str, ...] | None
    # pg_stats shows a column only to roles that may SELECT it.
    readable: bool = True

    @property
    def is_status(self) -> bool:
        name = self.column.lower()
        return name.endswith(("status", "state", "statename"))

    @property
    def values(self) -> tuple[str, ...]:
        return self.enum_labels or self.common_values or ()


@dataclass(frozen=True)
class PartialIndex:
    schema: str
    table: str
    relid: int
    index: str
    predicate: str


@dataclass(frozen=True)
class LockingStatement:
    schema: str | None
    table: str
    skip_locked: bool
    calls: int


@dataclass(frozen=True)
class Library:
    """A well-known queue library, recognised by the shape of its table, not its name."""

    name: str
    columns: frozenset[str]
    labels: frozenset[str]  # enum labels the status column must have (empty: any)
    live: LivePredicate


LIBRARIES = (
    Library("Oban", frozenset({"state", "queue", "worker", "args", "scheduled_at"}),
            frozenset({"available", "executing", "retryable", "completed", "discarded"}),
            LivePredicate("state", "in", ("available",), "queue library Oban")),
    Library("River", frozenset({"state", "queue", "kind", "args", "scheduled_at"}),
            frozenset({"available", "running", "retryable", "completed", "discarded"}),
            LivePredicate("state", "in", ("available",), "queue library River")),
    Library("procrastinate", frozenset({"status", "queue_name", "task_name", "args"}),
            frozenset({"todo", "doing", "succeeded", "failed"}),
            LivePredicate("status", "in", ("todo",), "queue library procrastinate")),
    Library("pg-boss", frozenset({"state", "name", "data", "startafter"}),
            frozenset({"created", "retry", "active", "completed"}),
            LivePredicate("state", "in", ("created", "retry"), "queue library pg-boss")),
    Library("GoodJob", frozenset({"finished_at", "performed_at", "scheduled_at", "queue_name",
                                  "active_job_id"}), frozenset(),
            LivePredicate("finished_at", "is null", (), "queue library GoodJob")),
    Library("Que", frozenset({"finished_at", "expired_at", "run_at", "job_class"}), frozenset(),
            LivePredicate("finished_at", "is null", (), "queue library Que")),
)  # fmt: skip


@dataclass(frozen=True)
class Decision:
    schema: str
    table: str
    relid: int
    live: LivePredicate | None
    reason: str


@dataclass
class _Evidence:
    schema: str = ""
    table: str = ""
    relid: int = 0
    columns: list[CandidateColumn] = field(default_factory=list)
    partials: list[tuple[PartialIndex, LivePredicate]] = field(default_factory=list)
    statements: list[LockingStatement] = field(default_factory=list)


def decide(
    columns: Iterable[CandidateColumn],
    partials: Iterable[PartialIndex],
    statements: Iterable[LockingStatement],
    all_columns: dict[int, frozenset[str]] | None = None,
    explicit: Sequence[tuple[str, str, int]] = (),
) -> list[Decision]:
    """Queue tables with their live predicate and the reason they were taken.

    ``explicit`` (from ``--table``) wins: those tables are queues whatever they look like,
    and discovery does not add others. ``all_columns`` maps relid to every column name, for
    recognising libraries by shape.
    """
    by_table: dict[tuple[str, str], _Evidence] = defaultdict(_Evidence)
    for c in columns:
        ev = by_table[(c.schema, c.table)]
        ev.schema, ev.table, ev.relid = c.schema, c.table, c.relid
        ev.columns.append(c)
    for p in partials:
        live = parse_index_predicate(p.predicate)
        if live is None:
            continue
        ev = by_table[(p.schema, p.table)]
        ev.schema, ev.table, ev.relid = p.schema, p.table, p.relid
        ev.partials.append((p, live))
    stmt_by_name: dict[str, list[LockingStatement]] = defaultdict(list)
    for s in statements:
        stmt_by_name[s.table].append(s)
    for (schema, table), ev in by_table.items():
        ev.statements = [s for s in stmt_by_name.get(table, []) if s.schema in (None, schema)]

    decisions: list[Decision] = []
    if explicit:
        for schema, table, relid in explicit:
            ev = by_table.get((schema, table)) or _Evidence(schema, table, relid)
            ev.relid = relid
            live, why = _live_predicate(ev, all_columns)
            reason = "named with --table" + (f"; {why}" if why else "")
            decisions.append(Decision(schema, table, relid, live, reason))
        return decisions

    for (schema, table), ev in sorted(by_table.items()):
        live, why = _live_predicate(ev, all_columns)
        signals = _signals(ev, live)
        if live is None or not signals:
            continue
        decisions.append(Decision(schema, table, ev.relid, live, "; ".join([why, *signals])))
    return decisions


def _live_column(ev: _Evidence, name: str) -> CandidateColumn | None:
    return next((c for c in ev.columns if c.column == name), None)


def _live_predicate(
    ev: _Evidence, all_columns: dict[int, frozenset[str]] | None
) -> tuple[LivePredicate | None, str]:
    # 1. A partial index on a status-like or *_at column: the schema says what live means.
    for p, live in ev.partials:
        col = _live_column(ev, live.column)
        if col is not None and (col.is_status or live.op == "is null"):
            return (
                LivePredicate(live.column, live.op, live.values, f"partial index {p.index}"),
                f"live predicate from partial index {p.index}",
            )
    # 2. The shape of a well-known library.
    lib = _library(ev, all_columns)
    if lib is not None:
        return lib.live, f"shape of a {lib.name} table"
    # 3. Status values that read like a queue's: some waiting, some finished.
    for col in ev.columns:
        if not col.is_status:
            continue
        values = set(col.values)
        live_values = tuple(w for w in LIVE_WORDS if w in values)
        if not live_values:
            continue
        chosen = live_values[:1]
        live = LivePredicate(col.column, "in", chosen, f"status values of {col.column}")
        finished = sorted(values & ARCHIVE_WORDS)
        if finished:
            return live, (
                f"column {col.column} holds waiting ({', '.join(chosen)}) and finished "
                f"({', '.join(finished)}) values"
            )
        # No archive (rows deleted on completion): the locking statements say it is a queue.
        if ev.statements:
            return live, f"column {col.column} holds waiting ({', '.join(chosen)}) values"
    hidden = [c.column for c in ev.columns if c.is_status and not c.readable and not c.enum_labels]
    if hidden:
        return None, (
            f"no live predicate: the values of {hidden[0]} are hidden from this role "
            f"(pg_stats needs SELECT on the column: GRANT SELECT ({hidden[0]}) ON "
            f"{ev.schema}.{ev.table} TO <role>)"
        )
    return None, "no live predicate could be derived (no partial index, no known status values)"


def _library(ev: _Evidence, all_columns: dict[int, frozenset[str]] | None) -> Library | None:
    names = (all_columns or {}).get(ev.relid, frozenset(c.column for c in ev.columns))
    for lib in LIBRARIES:
        if not lib.columns <= names:
            continue
        if lib.labels:
            col = _live_column(ev, lib.live.column)
            if col is None or not lib.labels <= set(col.enum_labels or col.common_values or ()):
                continue
        return lib
    return None


def _signals(ev: _Evidence, live: LivePredicate | None) -> list[str]:
    signals: list[str] = []
    if ev.partials:
        signals.append(f"{len(ev.partials)} partial index(es) on a live predicate")
    skip = sum(1 for s in ev.statements if s.skip_locked)
    if skip:
        signals.append(f"{skip} SKIP LOCKED statement(s) in pg_stat_statements")
    elif ev.statements:
        signals.append(f"{len(ev.statements)} row-locking statement(s) in pg_stat_statements")
    if live is not None and live.source.startswith("queue library"):
        signals.append(live.source.replace("queue library", "recognised as"))
    if live is not None and live.source.startswith("status values"):
        col = _live_column(ev, live.column)
        if col is not None and col.indexed:
            signals.append(f"an index on {live.column}")
    return signals
