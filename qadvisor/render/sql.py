"""The fixes as one SQL migration script (``--format sql``), for a DBA to read and then run with
psql.

Every fix step of the report, finding by finding in report order, each under a comment that
names the finding: what runs as printed is a statement; a step to review first, a rewrite of
the application's statement and a step holding a part left to write are commented out, with
why (qadvisor.render.steps). A statement two findings share runs once. Statements that may run
in a transaction block and follow each other in one fix run in one (``BEGIN`` ... ``COMMIT``),
so a fix half applied is rolled back; a statement that may not (``CREATE INDEX CONCURRENTLY``,
``ALTER SYSTEM``) runs on its own. The script starts with a ``SET lock_timeout``: a DDL that
waits behind a long transaction holds every claim queued behind its lock request. Same report
in, same bytes out: no time, no host.
"""

from __future__ import annotations

from typing import TextIO

from qadvisor import __version__
from qadvisor.model import Finding, Report
from qadvisor.render.steps import (
    ScriptLine,
    as_text,
    runs_as_printed,
    statement,
    step_lines,
)
from qadvisor.render.verdict import not_judged_lines

WIDTH = 100
# How long each statement waits for its lock. A common choice for migrations on a busy
# database, not a measure of this one: the script says so and the DBA sets theirs.
LOCK_TIMEOUT = "5s"


def render(report: Report) -> str:
    snap = report.snapshot
    fixed = [f for f in report.findings if f.fix is not None]
    body: list[str] = []
    seen: set[str] = set()
    counts = {"run": 0, "commented": 0}
    for f in fixed:
        body += ["", *_finding(f, report, seen, counts)]
    standby = " (a standby: run it on its primary)" if snap.server.is_standby else ""
    # Every line the report's own text reaches is a comment, through as_text: a name that
    # holds a line break cannot end it.
    said = [
        f"qadvisor {__version__}: the fixes for database {snap.server.database} on "
        f"PostgreSQL {snap.server.version}{standby}.",
        f"{_count(len(fixed), 'finding')} with a fix: {_count(counts['run'], 'statement')} to "
        f"run as printed, {_count(counts['commented'], 'step')} commented out.",
        *(f"{line}." for line in not_judged_lines(report)),
    ]
    if report.skipped:
        said.append("What those checks could not see has no fix here.")
    said += [
        "Read it before you run it. Run it with psql, stopping at the first error: psql -v "
        'ON_ERROR_STOP=1 -f FILE "$DSN". Never as one transaction (psql --single-transaction): '
        "CREATE INDEX CONCURRENTLY cannot run in a transaction block. Statements that are "
        "commented out are for you to judge: uncomment one once its reason is settled.",
        f"Each statement waits at most {LOCK_TIMEOUT} for its lock ({LOCK_TIMEOUT} is a common "
        "choice, not a measure of this database: set your own). A DDL that waited longer "
        "behind a long transaction would hold every claim queued behind it. A statement that "
        "timed out can run again; a CREATE INDEX CONCURRENTLY that did leaves an INVALID "
        "index: drop it (DROP INDEX CONCURRENTLY) first.",
    ]
    head = [line for text in said for line in as_text([ScriptLine("prose", text)], WIDTH)]
    head.append(f"SET lock_timeout = '{LOCK_TIMEOUT}';")
    if not fixed:
        body = ["", "-- No finding has a fix."]
    return "\n".join(head + body) + "\n"


def _finding(f: Finding, report: Report, seen: set[str], counts: dict[str, int]) -> list[str]:
    assert f.fix is not None
    accepted = ", in the baseline" if report.baseline_state(f) == "preexisting" else ""
    title = f"{f.code} {f.name}: {f.target.key_part} ({f.rating.label}{accepted})"
    lines = [ScriptLine("prose", title), ScriptLine("prose", f.message)]
    if not f.fix.steps:
        lines.append(ScriptLine("prose", "nothing to run: read the notes"))
    # Which steps run here: those that run as printed, each statement once in the script.
    runs: list[bool] = []
    for step in f.fix.steps:
        sql = statement(step.sql)
        runs.append(runs_as_printed(step) and sql not in seen)
        if runs[-1]:
            seen.add(sql)
    # A run of statements that may share a transaction block shares one.
    block = [r and s.in_transaction_block is True for r, s in zip(runs, f.fix.steps, strict=True)]
    for i, step in enumerate(f.fix.steps):
        grouped = block[i] and (_at(block, i - 1) or _at(block, i + 1))
        if grouped and not _at(block, i - 1):
            lines.append(ScriptLine("sql", "BEGIN;"))
        if runs[i]:
            counts["run"] += 1
            lines += step_lines(step)
        elif runs_as_printed(step):
            first = statement(step.sql).splitlines()[0]
            lines.append(ScriptLine("prose", f"already run above: {first}"))
        else:
            counts["commented"] += 1
            lines += step_lines(step)
        if grouped and not _at(block, i + 1):
            lines.append(ScriptLine("sql", "COMMIT;"))
    if f.fix.notes:
        lines.append(ScriptLine("prose", f.fix.notes))
    return list(as_text(lines, WIDTH))


def _at(flags: list[bool], i: int) -> bool:
    return 0 <= i < len(flags) and flags[i]


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def write(report: Report, out: TextIO) -> None:
    out.write(render(report))
