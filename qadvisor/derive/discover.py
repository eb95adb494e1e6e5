"""Which tables are job queues, and what makes a row live: a pure decision over catalog facts.

The strongest evidence is a claim: a row-locking statement that chooses which job to take
(``... FOR UPDATE SKIP LOCKED``, or ``ORDER BY ... LIMIT ... FOR UPDATE``) from a table, in
pg_stat_statements, in a ``--query-file`` or in a function's body. A claimed table is a queue
whatever its columns are called, and the claim's own condition on it is the live predicate:
status values, a boolean (``is_available``), ``finished_at IS NULL``, an enum range
(``state < 'active'``), or the union an OR over nullable columns takes (``(locked_at IS NULL
AND next_run_at <= $3) OR locked_at <= $4``: next_run_at or locked_at set, a waiting job or
one whose lock went stale). A claim with no condition on the table takes any row: the whole
table is its live set, unless the table's structure (below) says which rows wait. So does a
claim that waits for a time (``vt <= clock_timestamp()``, a visibility timeout it pushes
forward): a row waits until its time comes and, taken, waits again while in flight, so where
nothing marks a row finished (acknowledged rows are deleted, or moved into an archive table
no claim reads) every row is waiting or in flight. Where the
claim compares with a parameter (pg_stat_statements shows every constant as ``$n``), the
values come from the weaker evidence: a partial index on that column, a known library's
shape, the column's enum labels or most common values; a boolean's value from its partial
indexes, else from its name as status words say which status waits (``visible``,
``is_available``: true; ``processed``: false), and the reason names it. A boolean compared
with ``<>`` waits for the other value (a broker's ``visible != false``).

Without a claim, structure is the evidence: a partial index on a status whose values read as
waiting, the shape of a known library, status values some waiting and some finished. A partial
index on ``*_at IS NULL`` alone is not (soft deletes are indexed that way); of a claimed table
it can say which rows wait. A partial index on a finished state (a pruner's ``WHERE state =
'completed'``) is never the live set. When claims are known for the database, status values
alone no longer make a queue (a log of job states has them too): such a table is rejected,
with the reason.

Every decision carries its evidence, and every candidate that was not taken its reason, so a
user can see why a table was (or was not) taken for a queue.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from qadvisor.derive.estimates import boolean_literal, parse_index_predicate
from qadvisor.derive.predicates import operand_values
from qadvisor.derive.states import (
    ARCHIVE_WORDS,
    INFLIGHT_WORDS,
    LIVE_WORDS,
    not_waiting,
    status_like,
)
from qadvisor.model import LiveOp, LivePredicate, Rejected, live_op
from qadvisor.sql.dequeue import Predicate, literal_value, nullness_arms
from qadvisor.sql.printing import ident, literal, predicate_sql, qualified
from qadvisor.units import human_share

STATUS_TYPES = ("text", "character varying", "character", "smallint", "integer", "USER-DEFINED")
# Words in a nullable timestamp's name that mark a finished job: ``finished_at IS NULL`` is
# the live set; ``locked_at IS NULL`` in the same claim is a second condition, not the set.
_FINISH_WORDS = ("finish", "complet", "done", "process", "perform", "end", "succeed", "fail",
                 "discard", "cancel", "archiv")  # fmt: skip


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
    # A partitioned table: it has no rows of its own, its partitions do.
    partitioned: bool = False
    # The shares of the common values in ANALYZE's sample, in their order.
    common_freqs: tuple[float, ...] | None = None
    # pg_stats histogram bounds of a text or enum column: values ANALYZE saw too rarely to
    # count as common.
    rare_values: tuple[str, ...] | None = None
    # The column's default as pg_get_expr prints it (``'pending'::text``): a new row's value.
    default: str | None = None
    # Its CHECK constraints on this column alone, as pg_get_expr prints them.
    checks: tuple[str, ...] = ()
    # pg_stats null_frac and n_distinct: the share of the rows each rare value holds.
    null_frac: float = 0.0
    n_distinct: float = 0.0

    @property
    def is_status(self) -> bool:
        return status_like(self.column)

    @property
    def values(self) -> tuple[str, ...]:
        """Every value the catalog holds for the column (``seen_values`` says where each
        comes from)."""
        return tuple(v.value for v in seen_values(self))


@dataclass(frozen=True)
class SeenValue:
    """A value of a column the catalog holds, where it was found, and the share of the rows
    ANALYZE saw holding it (None where the evidence gives none)."""

    value: str
    source: str
    share: float | None = None


def seen_values(col: CandidateColumn) -> list[SeenValue]:
    """The values the catalog holds for a column, each once, from its first source in the
    order they are weighed: the enum's labels, the CHECK constraints that list values, the
    values ANALYZE saw (the common ones with their shares, then the histogram bounds: a value
    seen too rarely to count as common is there, sharing what the common values leave), and
    the default (the value a new row starts with)."""
    out: dict[str, SeenValue] = {}

    def add(value: str, source: str, share: float | None = None) -> None:
        out.setdefault(value, SeenValue(value, source, share))

    name = col.column
    for label in col.enum_labels or ():
        add(label, f"the enum labels of {name} ({col.type})")
    for check in col.checks:
        listed = parse_index_predicate(check)
        if listed is not None and listed.column == name and listed.op == "in":
            for value in listed.values:
                add(value, f"the CHECK constraint on {name}")
    common = col.common_values or ()
    freqs = col.common_freqs or ()
    for i, value in enumerate(common):
        add(value, f"the pg_stats common values of {name}", freqs[i] if i < len(freqs) else None)
    rare = [v for v in dict.fromkeys(col.rare_values or ()) if v not in common]
    # As the planner shares it: what the common values and NULLs leave, spread evenly over
    # the other distinct values (a negative n_distinct, a share of the rows, says no count).
    others = col.n_distinct - len(common)
    left = max(1.0 - col.null_frac - sum(freqs), 0.0) / others if others >= 1 else None
    for value in rare:
        add(value, f"the pg_stats histogram bounds of {name}", left)
    default = literal_value(col.default) if col.default else None
    if default is not None:
        add(default, f"the default of {name} (a new row's value)")
    return list(out.values())


@dataclass(frozen=True)
class PartialIndex:
    schema: str
    table: str
    relid: int
    index: str
    predicate: str
    # Its key columns in order (None for an expression); empty when it is not valid.
    keys: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class Claim:
    """A claim statement on one table, as discovery evidence."""

    relid: int
    schema: str
    table: str
    label: str  # where it was seen: "pg_stat_statements 3f9a2c1b0d (15,210 calls)"
    predicates: tuple[Predicate, ...]  # its conditions on this table
    skip_locked: bool = True
    calls: int | None = None  # pg_stat_statements calls, when seen there
    # No condition chooses among its rows (DequeueStatement.unconditional): it takes any.
    unconditional: bool = False
    # It takes the next rows of one queue or key (DequeueStatement.by_value): when none of
    # the columns it compares says which rows wait, it takes any row of that queue.
    by_value: bool = False
    order_by: tuple[str, ...] = ()  # the columns of its ORDER BY, in order
    # The columns whose time it waits to come (DequeueStatement.due): a row waits for it, is
    # taken when it comes and, taken, waits again (a visibility timeout pushed forward).
    due: tuple[str, ...] = ()
    # (column, value) its own UPDATE writes as a literal (``SET status = 'running'``): a
    # value a row takes when claimed, never one the claim waits for.
    sets: tuple[tuple[str, str], ...] = ()


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


def candidate_filter(
    claimed: Sequence[int], named: Sequence[int] = (), blocked: Sequence[int] = ()
) -> dict[str, Any]:
    """What the candidate-column query needs to leave out, on the server, the tables that
    cannot be queues: the claimed tables and those named with ``--table`` (kept whatever they
    look like), each library's columns (its live column first, so one index probe rules most
    tables out) and the status words that read as waiting; and the tables another session's
    lock keeps it from opening (``blocked``: their CHECK constraints are not read)."""
    shapes = [
        ",".join([lib.live.column, *sorted(lib.columns - {lib.live.column})]) for lib in LIBRARIES
    ]
    return {
        "claimed": list(claimed),
        "named": list(named),
        "shapes": shapes,
        "live_words": list(LIVE_WORDS),
        "blocked": list(blocked),
    }


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
    claims: list[Claim] = field(default_factory=list)
    role: str = "<role>"  # the role qadvisor reads as, for the GRANTs it names
    named: bool = False  # named with --table

    def column(self, name: str) -> CandidateColumn | None:
        return next((c for c in self.columns if c.column == name), None)

    @property
    def known_queue(self) -> bool:
        """A claim reads it or the user named it: what its structure shows is then about
        which rows wait, no longer about whether it is a queue."""
        return bool(self.claims) or self.named


def decide(
    columns: Iterable[CandidateColumn],
    partials: Iterable[PartialIndex],
    claims: Iterable[Claim],
    all_columns: dict[int, frozenset[str]] | None = None,
    explicit: Sequence[tuple[str, str, int]] = (),
    rejected: list[Rejected] | None = None,
    role: str = "<role>",
) -> list[Decision]:
    """Queue tables with their live predicate and the evidence they were taken on.

    ``explicit`` (from ``--table``) wins: those tables are queues whatever they look like,
    and discovery does not add others. ``all_columns`` maps relid to every column name, for
    recognising libraries by shape. Candidates that were not taken are appended to
    ``rejected`` with the reason.
    """
    by_table: dict[tuple[str, str], _Evidence] = defaultdict(_Evidence)

    def evidence(schema: str, table: str, relid: int) -> _Evidence:
        ev = by_table[(schema, table)]
        ev.schema, ev.table, ev.relid, ev.role = schema, table, relid, role
        return ev

    for c in columns:
        ev = evidence(c.schema, c.table, c.relid)
        if all(x.column != c.column for x in ev.columns):
            ev.columns.append(c)
    for p in partials:
        live = parse_index_predicate(p.predicate)
        if live is not None:
            evidence(p.schema, p.table, p.relid).partials.append((p, live))
    claim_list = list(claims)
    for cl in claim_list:
        evidence(cl.schema, cl.table, cl.relid).claims.append(cl)

    decisions: list[Decision] = []
    if explicit:
        for schema, table, relid in explicit:
            ev = by_table.get((schema, table)) or _Evidence(schema, table, relid, role=role)
            ev.relid, ev.named = relid, True
            live, why = _live_predicate(ev, all_columns)
            reason = "named with --table" + (f"; {why}" if why else "")
            decisions.append(Decision(schema, table, relid, live, reason))
        return decisions

    claims_known = bool(claim_list)
    for (schema, table), ev in sorted(by_table.items()):
        live, why = _live_predicate(ev, all_columns)
        signals = _signals(ev, live, claims_known)
        if ev.claims and (live is not None or _structure(ev, all_columns)):
            decisions.append(Decision(schema, table, ev.relid, live, "; ".join([*signals, why])))
            continue
        if ev.claims:
            # SKIP LOCKED on a table whose rows wait for nothing (a clean-up of stale
            # bookkeeping rows): judging it as a queue would only say "live set unknown".
            if rejected is not None:
                # A condition that could be one, whose value is not known, says so itself.
                rejected.append(Rejected(schema, table, (
                    f"{signals[0]}, but {why}" if why.startswith("the claim ") else
                    f"{signals[0]}, but no condition of the claim on {table} can be a live "
                    "predicate (a status, a boolean, IS NULL) and nothing else marks it as a "
                    "queue"
                )))  # fmt: skip
            continue
        if live is not None and signals:
            decisions.append(Decision(schema, table, ev.relid, live, "; ".join([why, *signals])))
            continue
        # A status column whose values read like no queue's (a users table's active /
        # inactive) is no candidate: listing every such table would bury the real ones.
        if rejected is not None and (ev.partials or live is not None or _hidden_status(ev)):
            rejected.append(Rejected(schema, table, _rejection(ev, live, why, claims_known)))
    return decisions


# --- the live predicate -----------------------------------------------------------------


def _live_predicate(
    ev: _Evidence, all_columns: dict[int, frozenset[str]] | None
) -> tuple[LivePredicate | None, str]:
    # 0. The claim's own condition on the table.
    # The claim workers run most says what they wait for (a stager or a dependency resolver
    # on the same table claims other states, less often).
    bare: Claim | None = None  # the most run claim that takes any row (of a queue)
    for claim in sorted(ev.claims, key=lambda c: (not c.skip_locked, -(c.calls or 0))):
        if claim.unconditional:
            bare = bare or claim
            continue
        live, why = _claim_live(ev, claim, all_columns)
        if live is not None or why:
            return live, why
        if claim.by_value or claim.due:
            # queue_name = $1 chooses whose rows, not which of them wait: every row of
            # the queue it serves is as claimable as those of an unconditional claim.
            # A row that waits for its time (vt <= now()) is taken when it comes and, in
            # flight, waits for it again: unless something marks rows finished, each is live.
            bare = bare or claim
    live, why = _structural_live(ev, all_columns)
    if live is None and bare is not None and not _hidden_status(ev):
        # It takes any row (a table a job enters when it can run and leaves when claimed),
        # and nothing in the table says which rows wait: the whole table is the live set.
        if bare.unconditional:
            source = f"claim {bare.label}; it has no condition on {ev.table}"
            said = "the claim has no condition on it"
        elif bare.due:
            waits = " AND ".join(p.text for p in bare.predicates if p.column in bare.due)
            source = f"claim {bare.label}; its condition {waits} waits for a time"
            said = (
                f"the claim's condition {waits} waits for a time, which every row reaches "
                "again while it is in flight, and nothing marks a row finished"
            )
        else:
            chooses = " AND ".join(p.text for p in bare.predicates)
            source = f"claim {bare.label}; its condition {chooses} chooses a queue"
            said = f"the claim's condition {chooses} chooses a queue, not which rows wait"
        return LivePredicate.every_row(source), f"live set: every row of {ev.table} ({said})"
    return live, why


def _structural_live(
    ev: _Evidence, all_columns: dict[int, frozenset[str]] | None
) -> tuple[LivePredicate | None, str]:
    """The live predicate the table's own structure shows, without a claim's condition."""
    # 1. A partial index on a status-like or *_at column: the schema says what live means.
    # Of a table a claim reads (or --table names), any such index; of another, only an index
    # that is itself a sign of a queue (_marks_a_queue).
    for p, live in ev.partials:
        col = ev.column(live.column)
        if col is None or not (col.is_status or live.op == "is null") or not _waiting(live):
            continue
        if ev.known_queue or _marks_a_queue(ev, live):
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
        live_values = _waiting_values(col.values)
        if not live_values:
            continue
        chosen = tuple(live_values[:1])
        live = LivePredicate(col.column, "in", chosen, f"status values of {col.column}")
        finished = sorted(v for v in col.values if v.lower() in ARCHIVE_WORDS)
        if finished:
            return live, (
                f"column {col.column} holds waiting ({', '.join(chosen)}) and finished "
                f"({', '.join(finished)}) values"
            )
    hidden = _hidden_status(ev)
    if hidden:
        return None, hidden
    unsure = [(p, lp) for p, lp in ev.partials if _live_like(ev, lp) and _waiting(lp)]
    if unsure and not ev.known_queue:
        p, lp = unsure[0]
        return None, (
            f"its partial index {p.index} on {predicate_sql(lp)} is the only sign of a queue, "
            "and a table whose rows are soft-deleted, read or published has such an index "
            "too (no claim reads it, no status value reads as waiting, no known library's "
            "shape); name it with --table to judge it as a queue"
        )
    return None, "no live predicate could be derived (no partial index, no known status values)"


def _hidden_status(ev: _Evidence) -> str:
    hidden = [c.column for c in ev.columns if c.is_status and not c.readable and not c.enum_labels]
    if not hidden:
        return ""
    return (
        f"no live predicate: the values of {hidden[0]} are hidden from this role "
        f"(pg_stats needs SELECT on the column: GRANT SELECT ({ident(hidden[0])}) ON "
        f"{qualified(ev.schema, ev.table)} TO {_role(ev.role)};)"
    )


def selects_waiting(live: LivePredicate) -> bool:
    """A partial index predicate that selects waiting rows only, none finished or running:
    the kind of index a claim is meant to use (not a pruner's or a lock index)."""
    return _waiting(live)


def _waiting(live: LivePredicate) -> bool:
    """A partial index predicate that selects waiting rows only, none finished or running
    (``status IN ('todo', 'doing')`` is a lock index: it holds the jobs workers have)."""
    if live.op != "in":
        return True
    return not any(v.lower() in ARCHIVE_WORDS | INFLIGHT_WORDS for v in live.values)


def _role(role: str) -> str:
    return role if role == "<role>" else ident(role)  # a placeholder stays as it reads


def _waiting_values(values: Iterable[str]) -> list[str]:
    """The values that read as waiting, in the order LIVE_WORDS prefers, spelled as stored
    (Django's statuses are upper case: READY)."""
    by_word = {v.lower(): v for v in values}
    return [by_word[w] for w in LIVE_WORDS if w in by_word]


def _claim_live(
    ev: _Evidence, claim: Claim, all_columns: dict[int, frozenset[str]] | None
) -> tuple[LivePredicate | None, str]:
    """The live predicate a claim waits for; ('', None) when it has no condition that can be
    one (then structure decides)."""
    ranked = sorted(
        (p for p in claim.predicates if _rank(ev, p) is not None),
        key=lambda p: _rank(ev, p) or 0,
    )
    union = _claim_union(ev, claim)
    for pred in [*ranked, None]:
        if union is not None and (pred is None or (_rank(ev, pred) or 0) > 0):
            # An OR whose arms say which columns are set in the rows it takes reads as the
            # live set before a flag or a lone IS NULL beside it: those narrow what the OR
            # takes (Agenda's disabled = FALSE holds on finished rows too), and the live
            # predicate is one condition, not their conjunction.
            taken, arms = union
            where = f"claim {claim.label}"
            return LivePredicate.any_of(taken.parts, where), (
                f"live predicate {predicate_sql(taken)} from the arms of {arms} of {where}"
            )
        if pred is None:
            break
        col = ev.column(pred.column)
        live, inferred = _claim_values(ev, pred, col, all_columns, claim)
        where = f"claim {claim.label}"
        if live is not None:
            source = where + (f"; values from {inferred}" if inferred else "")
            live = LivePredicate(live.column, live.op, live.values, source)
            text = pred.text if not inferred else f"{pred.text} with {inferred}"
            return live, f"live predicate {text} from {where}"
        return None, (
            f"the claim {claim.label} waits for {pred.text}, but the value of its parameter "
            f"is not known: {inferred}"
        )
    return None, ""


def _claim_union(ev: _Evidence, claim: Claim) -> tuple[LivePredicate, str] | None:
    """The live set of a claim's OR over nullable columns, as a union of one-column IS NULL /
    IS NOT NULL conditions, with the OR's text: ``(locked_at IS NULL AND next_run_at <= $3)
    OR locked_at <= $4`` takes rows with next_run_at set or locked_at set, never one with
    both NULL. None when no such OR separates rows (``scheduled_at IS NULL OR scheduled_at
    <= now()`` admits every row) or its union is no OR of one-column conditions."""
    for pred in claim.predicates:
        if pred.op != "other":
            continue
        arms = nullness_arms(pred.text)
        nullable = [
            name
            for name in dict.fromkeys(c for arm in arms for c, _ in arm)
            if (col := ev.column(name)) is not None and not col.not_null
        ]
        if not nullable or len(nullable) > _MAX_UNION_COLUMNS:
            continue
        rows = list(itertools.product((True, False), repeat=len(nullable)))  # True: NULL

        taken = {row for row in rows if any(_arm_holds(row, arm, nullable) for arm in arms)}
        if not taken or len(taken) == len(rows):
            continue
        terms = [
            (i, null)
            for i in range(len(nullable))
            for null in (False, True)
            if all(row in taken for row in rows if row[i] == null)
        ]
        if len(terms) < 2 or {r for r in rows for i, n in terms if r[i] == n} != taken:
            continue
        parts = tuple(
            LivePredicate(nullable[i], "is null" if null else "is not null") for i, null in terms
        )
        return LivePredicate.any_of(parts), pred.text
    return None


def _arm_holds(
    row: tuple[bool, ...], arm: tuple[tuple[str, bool], ...], columns: list[str]
) -> bool:
    """Whether a row, given by which of `columns` are NULL, meets what an arm requires of
    them (a requirement on another column narrows the arm, it does not exclude the row)."""
    return all(row[columns.index(c)] == null for c, null in arm if c in columns)


# An OR's union is read by trying every NULL / not NULL combination of its columns.
_MAX_UNION_COLUMNS = 4


def _rank(ev: _Evidence, pred: Predicate) -> int | None:
    """How strongly a claim's condition reads as its live predicate (lower is stronger)."""
    col = ev.column(pred.column)
    if col is None:
        return None
    if (col.is_status or col.enum_labels) and pred.op in (
        "=", "in", "any", "<", "<=", ">", ">=", "<>", "not in"
    ):  # fmt: skip
        return 0
    if col.type == "boolean" and pred.op in ("true", "false", "=", "<>"):
        return 1
    if pred.op == "is null" and not col.not_null:
        return 2 if any(w in col.column.lower() for w in _FINISH_WORDS) else 3
    return None


def _claim_values(
    ev: _Evidence,
    pred: Predicate,
    col: CandidateColumn | None,
    all_columns: dict[int, frozenset[str]] | None,
    claim: Claim,
) -> tuple[LivePredicate | None, str]:
    """The claim's condition as a LivePredicate, and where its values came from when they
    were not literals in the claim ('' when they were)."""
    assert col is not None
    if pred.op == "is null":
        return LivePredicate(col.column, "is null"), ""
    if pred.op in ("true", "false"):
        return LivePredicate(col.column, pred.op), ""
    literals = operand_values(pred, {})
    if col.type == "boolean" and pred.op in ("=", "<>"):
        # visible <> false waits for what visible = true does.
        flag = boolean_literal(pred)
        if flag is None and literals and literals[0].lower() in ("true", "t", "false", "f"):
            said = literals[0][0] in "tT"
            flag = "true" if said == (pred.op == "=") else "false"
        if flag is not None:
            return LivePredicate(col.column, flag), ""
        return _boolean_value(ev, col)
    op = live_op(pred.op)
    if op is None:  # _rank admits no other condition
        return None, f"{pred.text} is no live predicate"
    if literals:
        if op in ("<", "<=", ">", ">=") and len(literals) != 1:
            return None, "a range with several bounds"
        return LivePredicate(col.column, op, tuple(dict.fromkeys(literals))), ""
    if op == "in":
        written = _index_written_for(ev, col.column, claim)
        if written is not None:
            return written
    sets = frozenset(v for c, v in claim.sets if c == col.column)
    return _inferred(ev, col, op, all_columns, single=pred.op in ("=", "<>"), sets=sets)


def _index_written_for(
    ev: _Evidence, column: str, claim: Claim
) -> tuple[LivePredicate, str] | None:
    """The live values of a claim that compares ``column`` with a parameter, from the one
    valid partial index on ``column`` whose keys supply the claim's ORDER BY: the index the
    claim was written for (as the planner binds it). Its predicate may list several values
    (DBOS's ``status IN ('ENQUEUED', 'PENDING')`` for ``status = $2``): the claim binds one of
    them, and the live set is the rows that index holds. None when no such index, or several
    that disagree."""
    pinned = {p.column for p in claim.predicates if p.op == "="}
    found: dict[tuple[str, ...], str] = {}
    for p, live in ev.partials:
        if live.column != column or live.op != "in" or not live.values or not _waiting(live):
            continue
        if p.keys and keys_supply_order(p.keys, claim.order_by, pinned):
            found.setdefault(live.values, p.index)
    if len(found) != 1:
        return None
    ((values, index),) = found.items()
    return LivePredicate(column, "in", values), (
        f"partial index {index}, whose keys supply the claim's ORDER BY"
    )


def keys_supply_order(
    keys: Sequence[str | None], order: Sequence[str], pinned: Iterable[str]
) -> bool:
    """An index on ``keys`` returns rows in ``order``: its keys, after those the statement
    pins by equality (``pinned``), begin with the ORDER BY's columns. False without an
    ORDER BY."""
    if not order:
        return False
    fixed = set(pinned)
    rest = list(keys)
    while rest and rest[0] in fixed and rest[0] not in order:
        rest.pop(0)
    return rest[: len(order)] == list(order)


def _boolean_value(ev: _Evidence, col: CandidateColumn) -> tuple[LivePredicate | None, str]:
    """The value a claim's ``flag = $n`` waits for: the one the table's partial indexes on
    that flag select (``WHERE is_available``), when they agree on one."""
    found: dict[Literal["true", "false"], str] = {}
    for p, live in ev.partials:
        value = _flag(live) if live.column == col.column else None
        if value is not None:
            found.setdefault(value, p.index)
    if len(found) == 1:
        ((value, index),) = found.items()
        return LivePredicate(col.column, value), f"partial index {index}"
    if found:
        return None, (
            f"a boolean compared with a parameter, and the partial indexes on {col.column} "
            f"select both values ({', '.join(sorted(found.values()))})"
        )
    named = _flag_named(col.column)
    if named is not None:
        # As a status word says which state waits, a flag's name says which of its values
        # does: visible, available, ready when true; done, delivered, locked when false.
        return LivePredicate(col.column, named), (
            f"the name of {col.column} (a row waits while it is {named}: no partial index on "
            "it says otherwise)"
        )
    return None, (
        f"a boolean compared with a parameter, and no partial index on {col.column} says "
        "which value waits (nor does its name)"
    )


# Words of a flag's name that say a row waits while it is true (a status word that reads as
# waiting, or a message that is visible to consumers), and that it has left the queue
# while it is true (a finished or running state, a message delivered).
_WAITING_FLAG_WORDS = frozenset(LIVE_WORDS) | {"visible"}
_TAKEN_FLAG_WORDS = (
    ARCHIVE_WORDS
    | INFLIGHT_WORDS
    | {"delivered", "acked", "acknowledged", "consumed", "handled", "invisible", "hidden"}
)


def _flag_named(column: str) -> Literal["true", "false"] | None:
    """The value of a boolean whose name says when its row waits (``visible``,
    ``is_available``: true; ``processed``, ``is_done``: false); None when it says nothing or
    both."""
    words = set(column.lower().split("_")) - {"is", "has"}
    waiting, taken = bool(words & _WAITING_FLAG_WORDS), bool(words & _TAKEN_FLAG_WORDS)
    if waiting == taken:
        return None
    return "true" if waiting else "false"


def _flag(live: LivePredicate) -> Literal["true", "false"] | None:
    """ "true" or "false": the value of a boolean a partial index predicate selects."""
    if live.op in ("true", "false"):
        return live.op
    if live.op in ("in", "not in") and len(live.values) == 1:
        word = live.values[0].lower()
        if word in ("true", "t", "false", "f"):
            return "true" if (word[0] == "t") == (live.op == "in") else "false"
    return None


def _inferred(
    ev: _Evidence,
    col: CandidateColumn,
    op: LiveOp,
    all_columns: dict[int, frozenset[str]] | None,
    single: bool = False,
    sets: frozenset[str] = frozenset(),
) -> tuple[LivePredicate | None, str]:
    """Values for a claim that compares ``col`` with a parameter (``single``: one value,
    ``=`` or ``<>``, not a list; ``sets``: the values the claim itself writes to it)."""
    if op in ("in", "not in"):
        for p, live in ev.partials:
            if live.column != col.column or live.op != "in" or _waiting(live) != (op == "in"):
                continue
            if single and len(live.values) != 1:
                continue  # "state = $1" binds one value: not the stager's IN (a, b)
            return LivePredicate(col.column, op, live.values), f"partial index {p.index}"
        lib = _library(ev, all_columns)
        if lib is not None and lib.live.column == col.column and op == "in":
            return LivePredicate(col.column, "in", lib.live.values), f"the {lib.name} shape"
    seen = seen_values(col)
    if not seen:
        hidden = _hidden_status(ev)
        return None, hidden or (
            f"no partial index on {col.column}, and the catalog holds no value of it (no "
            "statistics, default, CHECK constraint or enum)"
        )
    if op == "in":
        chosen, why = waiting_value(seen, sets)
        if chosen is not None:
            return LivePredicate(col.column, "in", (chosen.value,)), why
        return None, (
            f"none of the values the catalog holds for {col.column} reads as waiting ({why})"
        )
    if op == "not in":
        finished = [v for v in seen if v.value.lower() in ARCHIVE_WORDS]
        if finished:
            sources = ", ".join(dict.fromkeys(v.source for v in finished))
            return LivePredicate(col.column, op, tuple(v.value for v in finished)), sources
    if op in ("<", "<=") and col.enum_labels:
        # An enum whose order is the life cycle: the live range ends before the first label
        # of a job that is running or finished.
        labels = col.enum_labels
        ended = INFLIGHT_WORDS | ARCHIVE_WORDS
        cut = next((i for i, v in enumerate(labels) if v.lower() in ended), None)
        if cut:
            bound = labels[cut] if op == "<" else labels[cut - 1]
            return LivePredicate(col.column, op, (bound,)), (
                f"the order of enum {col.type} (the first running or finished label is "
                f"{labels[cut]})"
            )
    return None, f"none of the values the catalog holds for {col.column} reads as waiting"


def waiting_value(
    seen: Sequence[SeenValue], sets: Iterable[str] = ()
) -> tuple[SeenValue | None, str]:
    """The value a claim that compares a column with a parameter waits for, among the values
    the catalog holds for it (``seen_values``), and where it came from; (None, why each value
    was not taken) when the evidence names none. Never a value the claim itself writes
    (``sets``), a finished or running state, or one holding ``ARCHIVE_SHARE`` of the rows: of
    the rest, the first that reads as waiting, else the default (a new row's value), else the
    only one left."""
    written = set(sets)
    marked: dict[str, str] = {}
    for v in seen:
        why = "the claim itself sets it" if v.value in written else None
        marked_as = why or not_waiting(v.value, v.share, len(seen))
        if marked_as:
            marked[v.value] = marked_as
    rest = [v for v in seen if v.value not in marked]
    waiting = _waiting_values(v.value for v in rest)
    chosen = next((v for v in rest if waiting and v.value == waiting[0]), None)
    # A value that reads as waiting is its own reason; the others say what was ruled out.
    named = chosen is not None
    if chosen is None:
        chosen = next((v for v in rest if v.source.startswith("the default of")), None)
    if chosen is None and len(rest) == 1:
        chosen = rest[0]
    ruled_out = {
        v: why for v, why in marked.items() if not named or why == "the claim itself sets it"
    }
    not_it = "; ".join(f"not {_quoted(v)}: {why}" for v, why in ruled_out.items())
    if chosen is None:
        left = [f"{_quoted(v.value)}: reads as no state" for v in rest]
        return None, "; ".join([*left, not_it] if not_it else left)
    share = f", {human_share(chosen.share)} of the rows ANALYZE saw" if chosen.share else ""
    return chosen, f"{chosen.source} ({_quoted(chosen.value)}{share}" + (
        f"; {not_it})" if not_it else ")"
    )


def _quoted(value: str) -> str:
    return literal(value).strip()


def _library(ev: _Evidence, all_columns: dict[int, frozenset[str]] | None) -> Library | None:
    names = (all_columns or {}).get(ev.relid, frozenset(c.column for c in ev.columns))
    for lib in LIBRARIES:
        if not lib.columns <= names:
            continue
        if lib.labels:
            col = ev.column(lib.live.column)
            if col is None or not lib.labels <= set(col.enum_labels or col.common_values or ()):
                continue
        return lib
    return None


# --- reasons ----------------------------------------------------------------------------


def _signals(ev: _Evidence, live: LivePredicate | None, claims_known: bool) -> list[str]:
    signals: list[str] = []
    if ev.claims:
        skip = sum(1 for c in ev.claims if c.skip_locked)
        labels = ", ".join(c.label for c in ev.claims[:3])
        more = f" and {len(ev.claims) - 3} more" if len(ev.claims) > 3 else ""
        what = "SKIP LOCKED claim" if skip == len(ev.claims) else "claim"
        signals.append(f"{len(ev.claims)} {what}(s): {labels}{more}")
    if any(c.partitioned for c in ev.columns):
        signals.append("a partitioned table, its partitions judged together as one queue")
    waiting = [
        p
        for p, lp in ev.partials
        if _waiting(lp) and _live_like(ev, lp) and (ev.known_queue or _marks_a_queue(ev, lp))
    ]
    if waiting:
        signals.append(f"{len(waiting)} partial index(es) on a live predicate")
    if live is not None and live.source.startswith("queue library"):
        signals.append(live.source.replace("queue library", "recognised as"))
    if live is not None and live.source.startswith("status values") and not claims_known:
        col = ev.column(live.column)
        if col is not None and col.indexed:
            signals.append(f"an index on {live.column}")
    return signals


def _marks_a_queue(ev: _Evidence, live: LivePredicate) -> bool:
    """A partial index that is by itself a sign of a queue, for a table no claim reads: one on
    a status column whose values read as waiting (``WHERE status = 'pending'``). Not ``*_at IS
    NULL``: soft deletes (``deleted_at``), unread messages (``read_at``) and live sessions
    (``revoked_at``) are indexed the same way, far more often than a queue's finish time,
    and a known library's finish column is recognised by its shape instead. Not a status
    whose values are no queue's (``WHERE status = 'published'``)."""
    col = ev.column(live.column)
    return (
        col is not None
        and col.is_status
        and live.op == "in"
        and _waiting(live)
        and bool(_waiting_values(live.values))
    )


def _live_like(ev: _Evidence, live: LivePredicate) -> bool:
    """A partial index predicate on a status-like column or ``*_at IS NULL``: evidence of a
    live set. A boolean (``WHERE NOT aggregated`` of a log's aggregator) is not, unless a
    claim waits on it."""
    col = ev.column(live.column)
    return live.op == "is null" or (col is not None and col.is_status)


def _structure(ev: _Evidence, all_columns: dict[int, frozenset[str]] | None) -> bool:
    """Evidence other than the claim: a status-like column, a partial index on a live
    predicate, a library's shape."""
    return (
        any(_live_like(ev, lp) for _, lp in ev.partials)
        or any(c.is_status for c in ev.columns)
        or (_library(ev, all_columns) is not None)
    )


def _rejection(ev: _Evidence, live: LivePredicate | None, why: str, claims_known: bool) -> str:
    if live is not None and claims_known and live.source.startswith("status values"):
        return f"{why}, but no known claim reads it (claims are known for other tables)"
    if live is not None:
        return f"{why}, but nothing else marks it as a queue (no claim, partial index or index)"
    pruners = [p.index for p, lp in ev.partials if not _waiting(lp)]
    if pruners:
        return (
            f"{why}; its partial index(es) {', '.join(pruners)} select finished or running "
            "rows, not waiting ones"
        )
    return why
