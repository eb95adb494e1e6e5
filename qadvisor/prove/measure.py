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
from qadvisor.prove.figures import once, statement_measures
from qadvisor.settings.resolve import Settings
from qadvisor.sql.dequeue import value_placeholder

if TYPE_CHECKING:
    from qadvisor.prove.timing import Timed


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
    timed: dict[str, Timed]  # statement label -> its runs
    index_bytes: dict[str, int]  # index name (as regclass prints it) -> bytes
    verdicts: Verdicts
    notes: tuple[str, ...]
    table_rows: float | None = None  # the queue table's reltuples


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

    notes: list[str] = []
    timings: dict[str, Timed] = {}
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
            ready = runnable(s, text, verdicts.values.get(text, {}))
            if isinstance(ready, str):
                notes.append(f"{label}: not timed: {ready}")
                continue
            planned, value_of, filled_in = ready
            notes += filled_in
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
            timings[label] = timed
            if timed.rows == 0:
                notes.append(
                    f"{label}: took no row on the copy ({timed.node}), so its timing is of a run "
                    "that found nothing to take and is not a figure"
                )
            if not timed.warmed:
                notes.append(
                    f"{label}: timed by its first {timed.runs} runs ({timed.ms / 1000:.1f} s "
                    "median): a statement slower than 1 s is not run again until the plan "
                    "cache chooses its plan"
                )
        index_bytes = {
            str(name): int(size)
            for name, size in conn.execute(
                "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index"
                " WHERE indrelid = %s::regclass",
                [queue.qualified],
            )
        }
        reltuples = conn.execute(
            "SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [queue.qualified]
        ).fetchone()
    table_rows = float(reltuples[0]) if reltuples else None
    return Measured(timings, index_bytes, verdicts, tuple(notes), table_rows)


def runnable(
    s: Statement, text: str, on_copy: dict[str, str]
) -> tuple[str, dict[str, str], list[str]] | str:
    """``text`` (``s`` or its rewrite) as it is prepared on the copy, each parameter's value
    (the one ``s`` was planned with, else the one qadvisor's planner gave it on the copy:
    ``on_copy``), and a note for the values taken from the copy; or why it cannot run."""
    from qadvisor.derive.statement_queues import statement_label
    from qadvisor.sql import dequeue

    try:
        planned, renumbered = dequeue.normalise_for_planning(text)
    except dequeue.StatementError as exc:
        return str(exc)
    numbers = [renumbered[k].lstrip("$") for k in sorted(renumbered)]
    taken = [n for n in numbers if n not in s.custom_values and n in on_copy]
    values = [s.custom_values.get(n, on_copy.get(n)) for n in numbers]
    if any(v is None for v in values):
        return "a parameter has no value to run it with"
    notes = []
    if taken:
        given = ", ".join(f"${n} = {on_copy[n]}" for n in taken)
        notes.append(
            f"{statement_label(s)}: run with {given}, as qadvisor's planner fills it in on the "
            "copy; the checked server planned " + (s.planned_as or "the statement without it")
        )
    return planned, {n: str(v) for n, v in zip(numbers, values, strict=True)}, notes


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


def compare(
    before: Measured, after: Measured, labels: set[str], comparable: set[str]
) -> tuple[ProofMeasure, ...]:
    """The figures of the statements ``labels`` before and after (a ratio only for those in
    ``comparable``: the copy reproduced them), the index bytes the fix changed, and the
    table's rows when the fix changed them."""
    out: list[ProofMeasure] = []
    for label in (x for x in before.timed if x in labels):
        out += statement_measures(
            label, before.timed[label], after.timed.get(label), label in comparable
        )
    # The indexes the fix removed or rebuilt against those it made or rebuilt: a REINDEX keeps
    # the name, so an index whose size changed counts on both sides.
    gone = {n: b for n, b in before.index_bytes.items() if after.index_bytes.get(n) != b}
    made = {n: b for n, b in after.index_bytes.items() if before.index_bytes.get(n) != b}
    if gone or made:
        subject = (", ".join(sorted(gone)) or "none") + " -> " + (", ".join(sorted(made)) or "none")
        out.append(once("index bytes", subject, sum(gone.values()), sum(made.values())))
    old, new = before.table_rows, after.table_rows
    if old is not None and new is not None and round(old) != round(new):
        out.append(once("table rows", "the queue table", round(old), round(new)))
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
    for label in (x for x in before.timed if x in labels):
        was, now = before.timed[label], after.timed.get(label)
        if now is None:
            continue
        old, new = was.shared_blocks, now.shared_blocks
        if new < old * WORSE or new - old < WORSE_MIN_BLOCKS:
            continue
        out.append(
            f"{label}: the fix made it worse on the copy: {new / max(old, 1):,.0f} times the "
            f"shared buffers a run ({old:,.0f} -> {new:,.0f}, {was.ms:,.3g} -> {now.ms:,.3g} "
            f"ms; plan {was.node} -> {now.node}); read the plan before applying the fix"
        )
    return out
