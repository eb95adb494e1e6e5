"""Ignores written in the application's SQL: ``-- qadvisor: ignore QA301`` in a --query-file.

A directive is a ``--`` comment, ``-- qadvisor: ignore CODE[, CODE...] [why]``, on a line of a
statement, or in the comment lines directly above it (no blank line between). It drops that
statement's findings of those codes; the report says how many it dropped and where. Only
comments count: the same words inside a string literal are text, not a directive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qadvisor.sql import dequeue

_DIRECTIVE = re.compile(r"--[ \t]*qadvisor:[ \t]*ignore\b(?P<rest>[^\n]*)", re.IGNORECASE)
_CODE = re.compile(r"[A-Za-z]+[0-9]+")


@dataclass(frozen=True)
class Directive:
    statement_line: int  # the line its statement starts on
    codes: tuple[str, ...]
    line: int  # the comment's own line


class DirectiveError(ValueError):
    """A directive that names no check code."""


def directives(sql: str) -> list[Directive]:
    """Every directive of a file's text, with the statement it applies to; one that applies
    to no statement (a blank line or the end of the file follows) is returned with
    ``statement_line`` 0. Raises dequeue.StatementError when the text cannot be tokenized,
    DirectiveError for a directive without a code."""
    statements, tokens = dequeue.statement_ranges(sql)
    lines = sql.split("\n")

    def line_of(offset: int) -> int:
        return sql.count("\n", 0, offset) + 1

    spans = [(line_of(a), line_of(b)) for a, b in statements]
    out = []
    for m in _DIRECTIVE.finditer(sql):
        if any(a <= m.start() <= b for a, b in tokens):
            continue  # inside a string literal, a quoted name or a dollar-quoted body
        line = line_of(m.start())
        codes = _codes(m.group("rest"))
        if not codes:
            raise DirectiveError(f"line {line}: 'qadvisor: ignore' names no check code")
        out.append(Directive(_statement_at(line, spans, lines), codes, line))
    return out


def _codes(rest: str) -> tuple[str, ...]:
    """The leading codes of the directive (``QA301, QA303``); what follows is free text."""
    codes = []
    for word in re.split(r"[,\s]+", rest.strip()):
        if not _CODE.fullmatch(word):
            break
        codes.append(word.upper())
    return tuple(dict.fromkeys(codes))


def _statement_at(line: int, spans: list[tuple[int, int]], lines: list[str]) -> int:
    for first, last in spans:
        if first <= line <= last:
            return first
    following = [first for first, _ in spans if first > line]
    if not following:
        return 0
    start = following[0]
    between = lines[line : start - 1]  # the lines after the comment, before the statement
    return 0 if any(not text.strip() for text in between) else start
