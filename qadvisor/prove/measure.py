"""What ``--prove`` measures on a copy, before a fix and after it: each statement timed
(:mod:`qadvisor.prove.timing`), the queue table's index sizes, and what qadvisor's own checks
report on the copy; and how two such measurements compare."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from qadvisor.collect.queries import first_line
from qadvisor.model import ProofMeasure, Queue, Statement
from qadvisor.prove.proofs import rounded_ratio
from qadvisor.settings.resolve import Settings
from qadvisor.sql.dequeue import value_placeholder

if TYPE_CHECKING:
    from qadvisor.prove.timing import Timed

# A copy whose run of a statement is this many times apart from what the checked server's
# pg_stat_statements recorded per call does not run it as production did.
FAR_APART = 10.0


@dataclass(frozen=True)
class Verdicts:
    """What qadvisor's checks said of a copy: their findings' keys, and why a check skipped
    the queue (a proof that is not reproduced says why)."""

    keys: frozenset[str]
    skips: dict[str, str]  # check code -> the reason it skipped the queue
    # Statement text -> the values qadvisor planned it with on the copy, where the copy's
    # owner may plan all of it (a role that lacks UPDATE on the checked server plans only a
    # claim's scan, and the values of its SET are then unknown).
    values: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    # Finding key -> its message on the copy: what a fix that did not help left reported.
    messages: dict[str, str] = dataclasses.field(default_factory=dict)

    def skipped(self, code: str) -> str:
        """Why the check ``code`` skipped the copy, as a clause for a note ('' if it did
        not)."""
        why = self.skips.get(code)
        return f" ({code} skipped the copy: {why})" if why else ""

    def not_gone(self, key: str) -> str:
        """The note of a fix after which ``key`` is still reported on the copy, with what
        the copy's finding says (the DBA compares it with the checked server's)."""
        said = self.messages.get(key)
        return f"the fix did not help: {key} is still reported on the copy" + (
            f" ({said})" if said else ""
        )


@dataclass(frozen=True)
class Measured:
    node: dict[str, str]  # statement label -> main plan node
    ms: dict[str, float]
    blocks: dict[str, float]
    index_bytes: dict[str, int]  # index name (as regclass prints it) -> bytes
    verdicts: Verdicts
    notes: tuple[str, ...]


def measure(
    owner_dsn: str,
    settings: Settings,
    queue: Queue,
    statements: Sequence[Statement],
    rewrites: dict[str, str],
) -> Measured:
    """The copy at ``owner_dsn`` measured, each statement replaced by its rewrite where
    ``rewrites`` has one (keyed by the statement's text)."""
    from qadvisor.derive.statement_queues import statement_label
    from qadvisor.prove.timing import time_statement
    from qadvisor.sql import dequeue

    notes: list[str] = []
    node: dict[str, str] = {}
    ms: dict[str, float] = {}
    blocks: dict[str, float] = {}
    texts: list[tuple[str, str]] = []
    for s in statements:
        source = s.parsed.text if s.parsed else s.text
        text = rewrites.get(s.text, rewrites.get(source, source))
        text, filled = _filled(text, s.custom_values)
        if filled:
            notes.append(
                f"{statement_label(s)}: the rewrite was run with {filled}, the values qadvisor "
                "planned the statement with; the application writes its own"
            )
        texts.append(("--query", text))
    verdicts = judge(owner_dsn, settings, queue, tuple(texts))
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        for s, (_, text) in zip(statements, texts, strict=True):
            label = statement_label(s)
            try:
                planned, renumbered = dequeue.normalise_for_planning(text)
            except dequeue.StatementError as exc:
                notes.append(f"{label}: not timed: {exc}")
                continue
            numbers = [renumbered[k].lstrip("$") for k in sorted(renumbered)]
            on_copy = verdicts.values.get(text, {})
            taken = [n for n in numbers if n not in s.custom_values and n in on_copy]
            values = [s.custom_values.get(n, on_copy.get(n)) for n in numbers]
            if any(v is None for v in values):
                notes.append(f"{label}: not timed: a parameter has no value to run it with")
                continue
            if taken:
                given = ", ".join(f"${n} = {on_copy[n]}" for n in taken)
                notes.append(
                    f"{label}: run with {given}, as qadvisor's planner fills it in on the copy; "
                    "the checked server planned " + (s.planned_as or "the statement without it")
                )
            value_of = {n: str(v) for n, v in zip(numbers, values, strict=True)}
            try:
                timed = time_statement(
                    conn, planned, list(value_of.values()), s.search_path, queue.table
                )
            except psycopg.DataError as exc:
                # A value refused (class 22): the values here are filled in, the application's
                # own never seen (pg_stat_statements shows them as $n).
                kept = time_keeping_set(conn, text, value_of, s.search_path, queue.table)
                if kept is None:
                    notes.append(f"{label}: not timed: {first_line(exc)}")
                    continue
                timed, columns = kept
                notes.append(
                    f"{label}: timed with SET {', '.join(columns)} keeping the row's value: the "
                    f"copy refused a value qadvisor filled in for a parameter whose value it never "
                    f"saw ({first_line(exc)}); the row is still found, locked and written"
                )
            except psycopg.Error as exc:
                notes.append(f"{label}: not timed: {first_line(exc)}")
                continue
            node[label], ms[label], blocks[label] = timed.node, timed.ms, timed.shared_blocks
            if timed.found == 0:
                notes.append(
                    f"{label}: its scan ({timed.node}) found no row on the copy, so its figures "
                    "are of a run that took nothing: the copy's columns outside the live "
                    "predicate hold one plain value each, which its other conditions may reject"
                )
            if timed.runs == 1:
                notes.append(
                    f"{label}: timed by one run ({timed.ms / 1000:.1f} s): a statement slower "
                    "than 1 s is not run again until the plan cache chooses its plan"
                )
        index_bytes = {
            str(name): int(size)
            for name, size in conn.execute(
                "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index"
                " WHERE indrelid = %s::regclass",
                [queue.qualified],
            )
        }
    return Measured(node, ms, blocks, index_bytes, verdicts, tuple(notes))


def time_keeping_set(
    conn: psycopg.Connection[Any],
    text: str,
    value_of: dict[str, str],
    search_path: str | None,
    table: str | None,
) -> tuple[Timed, tuple[str, ...]] | None:
    """``text`` timed with the SET assignments that compute with a filled-in value keeping
    the column's value instead (:func:`qadvisor.sql.dequeue.with_set_kept`), and the columns
    so kept: first only those reading a parameter filled with the empty string (the planner's
    text for a value it has nothing to draw from), then all of them. None when the copy
    refuses every form, or no assignment computes with a parameter."""
    from qadvisor.prove.timing import time_statement
    from qadvisor.sql import dequeue

    guessed = [int(n) for n, v in value_of.items() if v == "''"]
    tried: set[str] = set()
    for numbers in ([guessed] if guessed else []) + [None]:
        rewritten = dequeue.with_set_kept(text, numbers)
        if rewritten is None or rewritten[0] in tried:
            continue
        tried.add(rewritten[0])
        try:
            planned, renumbered = dequeue.normalise_for_planning(rewritten[0])
            values = [value_of[renumbered[k].lstrip("$")] for k in sorted(renumbered)]
            return time_statement(conn, planned, values, search_path, table), rewritten[1]
        except (psycopg.DataError, dequeue.StatementError, KeyError):
            continue
    return None


def judge(
    dsn: str, settings: Settings, queue: Queue, texts: tuple[tuple[str, str], ...]
) -> Verdicts:
    """qadvisor's own checks on a copy, the queue named and its statements given as
    --query."""
    from qadvisor import engine

    checked = engine.check(
        dataclasses.replace(
            settings, dsn=dsn, snapshot_file=None, tables=(queue.qualified,), queries=texts,
            sample_seconds=None, analyze=False, baseline=None, write_baseline=None,
            outputs=(), inline_ignores=(),
        )
    )  # fmt: skip
    skips: dict[str, str] = {}
    for k in checked.skipped:
        if k.queue in (None, queue.qualified):
            skips.setdefault(k.code, k.reason)
    values = {s.text: dict(s.custom_values) for s in checked.snapshot.statements if s.custom_values}
    messages = {f.key: f.message for f in checked.findings}
    return Verdicts(frozenset(messages), skips, values, messages)


def against_counters(statement: Statement, label: str, ms: float, blocks: float) -> str | None:
    """The copy's run of ``statement`` before any fix held against what the checked server's
    pg_stat_statements recorded per call; None when it recorded neither figure. Buffers are
    the machine-independent figure, so they decide when both sides have them."""
    recorded_blocks, recorded_ms = statement.shared_blks_per_call, statement.mean_exec_ms
    pairs = [(what, theirs, ours) for what, theirs, ours in (
        ("shared buffers", recorded_blocks, blocks), ("ms", recorded_ms, ms)
    ) if theirs is not None]  # fmt: skip
    if not pairs:
        return None
    said = "; ".join(f"{_figure(theirs)} {what} there, {_figure(ours)} on the copy"
                     for what, theirs, ours in pairs)  # fmt: skip
    _, theirs, ours = pairs[0]
    apart = max(theirs, ours) / min(theirs, ours) if min(theirs, ours) > 0 else None
    note = f"{label}: per call, against the checked server's pg_stat_statements: {said}"
    if apart is not None and apart >= FAR_APART:
        note += (
            f": {apart:,.0f} times apart, so the copy does not run this statement as the "
            "checked server did, and its figures are the copy's, not production's"
        )
    return note


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _filled(text: str, values: dict[str, str]) -> tuple[str, str]:
    """A rewrite with each ``<value of $n>`` (the application's value, which qadvisor never
    saw) replaced by the value the statement was planned with, and which ones were."""
    used = []
    for n, value in sorted(values.items()):
        placeholder = value_placeholder(int(n)) if n.isdigit() else None
        if placeholder and placeholder in text:
            text = text.replace(placeholder, value)
            used.append(f"${n} = {value}")
    return text, ", ".join(used)


def compare(before: Measured, after: Measured, labels: set[str]) -> tuple[ProofMeasure, ...]:
    """The figures of the statements ``labels`` before and after, and the index bytes the fix
    changed."""
    out = []
    for label in (x for x in before.ms if x in labels):
        out.append(ProofMeasure("claim ms", label, round(before.ms[label], 3),
                                _rounded(after.ms.get(label)), rounded_ratio(before.ms[label],
                                after.ms.get(label)), before.node[label],
                                after.node.get(label)))  # fmt: skip
        out.append(ProofMeasure("shared buffers per claim", label, before.blocks[label],
                                after.blocks.get(label), rounded_ratio(before.blocks[label],
                                after.blocks.get(label))))  # fmt: skip
    # The indexes the fix removed or rebuilt against those it made or rebuilt: a REINDEX keeps
    # the name, so an index whose size changed counts on both sides.
    gone = {n: b for n, b in before.index_bytes.items() if after.index_bytes.get(n) != b}
    made = {n: b for n, b in after.index_bytes.items() if before.index_bytes.get(n) != b}
    if gone or made:
        subject = (", ".join(sorted(gone)) or "none") + " -> " + (", ".join(sorted(made)) or "none")
        old, new = sum(gone.values()), sum(made.values())
        ratio = rounded_ratio(old, new) if old else None  # a new index replaces none
        out.append(ProofMeasure("index bytes", subject, old, new, ratio))
    return tuple(out)


# A statement the fix made read this many times the shared buffers, and this many more a run,
# is said to be worse: buffers on a copy repeat from run to run, times do not.
WORSE = 2.0
WORSE_MIN_BLOCKS = 100


def made_worse(before: Measured, after: Measured, labels: set[str]) -> list[str]:
    """A note for each statement of ``labels`` that reads at least WORSE times the shared
    buffers after the fix (and WORSE_MIN_BLOCKS more): the finding may go while the claim
    gets slower, and a proof must not read as all good then."""
    out = []
    for label in (x for x in before.blocks if x in labels):
        old, new = before.blocks[label], after.blocks.get(label)
        if new is None or new < old * WORSE or new - old < WORSE_MIN_BLOCKS:
            continue
        ms = ""
        if label in after.ms:
            ms = f", {before.ms[label]:,.3g} -> {after.ms[label]:,.3g} ms"
        out.append(
            f"{label}: the fix made it worse on the copy: {new / max(old, 1):,.0f} times the "
            f"shared buffers a run ({old:,.0f} -> {new:,.0f}{ms}; plan "
            f"{before.node[label]} -> {after.node.get(label, '?')}); read the plan before "
            "applying the fix"
        )
    return out


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
