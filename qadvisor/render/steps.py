"""How every renderer names a fix's step (what it is, the lock it takes, and where it may run),
and how the terminal report and the SQL script print it: as SQL that a copy can run.

A step is printed as lines of an SQL script. What runs as printed is a statement; everything
else is a comment: the step's heading and note, and the SQL of a rewrite of the application's
statement (application code, never to run here), of a step to review first, and of a step
that holds a part left to write (``<value of $1>``), each with why it is not run. Selecting a
whole fix in a terminal and pasting it into psql runs what may run and nothing else.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from qadvisor.model import Fix, FixStep

# A statement to run; prose (a heading, a note), wrapped behind "-- "; commented-out SQL, one
# comment per line of it, never wrapped.
LineKind = Literal["sql", "prose", "code"]
COMMENT = "-- "


@dataclass(frozen=True)
class ScriptLine:
    kind: LineKind
    text: str


def step_heading(step: FixStep) -> str:
    """``migration: SHARE UPDATE EXCLUSIVE lock, outside a transaction block``,
    ``rewrite of sql/claim.sql:12: application code, not to run``, ``review first: no
    table lock``."""
    if step.kind == "rewrite":
        where = f" of {step.source}" if step.source else ""
        return f"rewrite{where}: application code, not to run"
    lock = {"none": "no table lock", "unknown": "lock not stated"}.get(
        step.lock, f"{step.lock} lock"
    )
    place = {True: "", False: ", outside a transaction block", None: ""}[step.in_transaction_block]
    kind = "migration" if step.kind == "migration" else "review first"
    return f"{kind}: {lock}{place}"


def runs_as_printed(step: FixStep) -> bool:
    """A migration step with nothing left to write: the only kind a script runs."""
    return step.kind == "migration" and not step.left_to_fill


def statement(sql: str) -> str:
    """``sql`` ended by a semicolon, so that the next statement of a script is its own."""
    text = sql.rstrip()
    return text if text.endswith(";") else f"{text};"


def step_lines(step: FixStep) -> list[ScriptLine]:
    """The step as lines of an SQL script (see the module's docstring)."""
    out = [ScriptLine("prose", step_heading(step))]
    if step.kind == "rewrite":
        if step.before is not None:
            out += [ScriptLine("prose", "before:"), *_code(step.before)]
        out += [ScriptLine("prose", "after:"), *_code(step.sql)]
    elif step.kind == "review":
        why = "commented out: review it first (its note says what to check), then run it"
        out += [ScriptLine("prose", why), *_code(statement(step.sql))]
    elif step.left_to_fill:
        parts = ", ".join(step.left_to_fill)
        why = f"commented out: write {parts} in its place first, then run it"
        out += [ScriptLine("prose", why), *_code(statement(step.sql))]
    else:
        out.append(ScriptLine("sql", statement(step.sql)))
    if step.note:
        out.append(ScriptLine("prose", step.note))
    return out


def fix_lines(fix: Fix) -> list[ScriptLine]:
    """Every step of the fix, then its notes."""
    out = [line for step in fix.steps for line in step_lines(step)]
    if fix.notes:
        out.append(ScriptLine("prose", fix.notes))
    return out


def _code(sql: str) -> list[ScriptLine]:
    return [ScriptLine("code", line) for line in sql.rstrip().splitlines()]


def as_text(lines: list[ScriptLine], width: int) -> Iterator[str]:
    """The lines as script text: prose wrapped at ``width`` behind "-- ", commented-out SQL
    one comment per line, statements as they are."""
    for line in lines:
        if line.kind == "sql":
            yield line.text
        elif line.kind == "code":
            yield f"{COMMENT}{line.text}".rstrip()
        else:
            yield from textwrap.wrap(
                line.text,
                max(width, 40),
                initial_indent=COMMENT,
                subsequent_indent=COMMENT,
                break_long_words=False,
                break_on_hyphens=False,
            )
