"""Other sessions' SQL text with its string constants masked, found by PostgreSQL's own lexer
rules.

Text qadvisor did not write (the query another session runs, in pg_stat_activity; the
statements pg_stat_statements recorded) may hold secrets in its literals: a token compared
with a column, a password given to ALTER ROLE. pg_stat_statements shows most constants as
``$n`` already, but not those of a DO block, nor, before PostgreSQL 16, those of DECLARE ...
CURSOR FOR and CREATE TABLE AS; pg_stat_activity shows them all. :func:`mask_literals`
writes each string constant as a parameter symbol, as pg_stat_statements does, so such text
reads (and plans) like the normalised text the rest of qadvisor already takes a ``$n`` of as
a value it does not know.

The constants are found as PostgreSQL's scanner (``src/backend/parser/scan.l``) finds them:
``'...'`` with ``''`` inside, ``E'...'`` with backslash escapes, ``U&'...'``, ``B'...'``,
``X'...'``, ``N'...'``, ``$tag$...$tag$``, and a string continued on the next line by
another quote; never inside a ``--`` or (nested) ``/* */`` comment, a ``"quoted name"`` or an
unquoted name such as ``a$b$c``. The other session's ``standard_conforming_strings`` is not
known (off, a plain ``'...'`` takes backslash escapes as ``E'...'`` does), so the text is read
both ways and every character either reading takes for part of a constant is masked. A
constant that does not end (text cut at ``track_activity_query_size``) is masked to the end.
Comments, names and numbers are kept: they are the statement's shape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# scan.l's {space}; {non_newline_space} is the same without the newlines.
_SPACE = frozenset(" \t\n\r\f\v")
_NEWLINE = frozenset("\n\r")
_INLINE_SPACE = frozenset(" \t\f\v")
# {ident_start}: a letter, '_' or any byte of a multibyte character; {ident_cont} adds digits
# and '$', so "a$b$c" is one name and never opens a dollar quote; {dolq_cont}, what a
# dollar-quote tag holds, is a name's characters without '$'.
# Each class is written as what it is not (the rest of ASCII): the same set as
# "[A-Za-z_\x80-\U0010ffff]", which the re module compiles in about 10 ms apiece, four of them
# at every start, where a negated ASCII class takes a tenth of a millisecond.
_NAME_START = "^\x00-@\\[-\\^`{-\x7f"
_NAME_CONT = "^\x00-#%-/:-@\\[-\\^`{-\x7f"  # _NAME_START with digits and '$'
_DOLQ_CONT = "^\x00-/:-@\\[-\\^`{-\x7f"  # _NAME_START with digits
_NAME_CHAR = re.compile(f"[{_NAME_CONT}]")
_NAME_START_CHAR = re.compile(f"[{_NAME_START}]")
_NAME_REST = re.compile(f"[{_NAME_CONT}]*")
# What can open a constant, a comment or a quoted name; every other character is skipped.
_NEXT = re.compile(r"--|/\*|['\"$]")
_TAG = re.compile(rf"\$(?:[{_NAME_START}][{_DOLQ_CONT}]*)?\$")
_PARAMETER = re.compile(r"\$([0-9]+)")
_LINE_END = re.compile(r"[\n\r]")
_NESTING = re.compile(r"/\*|\*/")
_ESCAPE_OR_QUOTE = re.compile(r"[\\']")


def _name_char(c: str) -> bool:
    return _NAME_CHAR.match(c) is not None


def _line_end(text: str, i: int) -> int:
    """Where a ``--`` comment starting at ``i`` ends: at its newline, else at the end."""
    m = _LINE_END.search(text, i)
    return m.start() if m else len(text)


def _comment_end(text: str, i: int) -> int:
    """After the ``/* */`` comment starting at ``i``; comments nest, as PostgreSQL's do."""
    depth = 0
    j = i + 2
    while (m := _NESTING.search(text, j)) is not None:
        j = m.end()
        if m.group() == "/*":
            depth += 1
        elif depth == 0:
            return j
        else:
            depth -= 1
    return len(text)


def _continued(text: str, j: int) -> int | None:
    """The quote that continues a string closed just before ``j`` ({quotecontinue}: spaces
    and ``--`` comments holding a newline, then a quote), or None."""
    n = len(text)
    while j < n:
        if text[j] in _INLINE_SPACE:
            j += 1
        elif text.startswith("--", j):
            j = _line_end(text, j)
        else:
            break
    if j >= n or text[j] not in _NEWLINE:
        return None
    j += 1
    while j < n:
        if text[j] in _SPACE:
            j += 1
        elif text.startswith("--", j):
            j = _line_end(text, j)
            if j >= n:
                return None  # a comment that is not ended by a newline continues nothing
            j += 1
        else:
            break
    return j if j < n and text[j] == "'" else None


def _string_end(text: str, i: int, escapes: bool, doubled: bool = True) -> int:
    """After the string whose text starts at ``i`` (past its opening quote); the end of the
    text when it does not close. ``escapes``: a backslash takes the next character with it
    (E'...'); ``doubled``: '' is a quote inside it (not in B'...' or X'...')."""
    n = len(text)
    while True:
        while True:
            if escapes:
                m = _ESCAPE_OR_QUOTE.search(text, i)
                i = m.start() if m else n
            else:
                i = text.find("'", i)
                i = n if i < 0 else i
            if i >= n:
                return n
            # An escaped character, or a quote written twice, stays inside.
            if text[i] == "\\" or (doubled and text.startswith("''", i)):
                i += 2
            else:
                break
        more = _continued(text, i + 1)
        if more is None:
            return i + 1
        i = more + 1


def _quoted_name_end(text: str, i: int) -> int:
    """After the quoted name whose text starts at ``i`` ("" is a quote inside it)."""
    while True:
        j = text.find('"', i)
        if j < 0:
            return len(text)
        if text.startswith('""', j):
            i = j + 2
            continue
        return j + 1


def literal_spans(text: str, standard_conforming_strings: bool = True) -> list[tuple[int, int]]:
    """(start, end) of each string constant of ``text``, end exclusive, a prefix (E, B, X, N,
    U&) included; as PostgreSQL reads it with ``standard_conforming_strings`` set so."""
    return _scan(text, standard_conforming_strings)[0]


def _scan(text: str, conforming: bool) -> tuple[list[tuple[int, int]], int]:
    """The string constants' spans, and the highest ``$n`` outside them (0: none)."""
    spans: list[tuple[int, int]] = []
    top = 0
    n = len(text)
    i = 0
    while (m := _NEXT.search(text, i)) is not None:
        i = m.start()
        c = m.group()
        if c == "--":
            i = _line_end(text, i)
        elif c == "/*":
            i = _comment_end(text, i)
        elif c == "'":
            start, prefix = _prefix(text, i)
            if prefix is None:
                end = _string_end(text, i + 1, escapes=not conforming)
            else:
                end = _prefixed_end(text, prefix, i + 1, conforming)
            spans.append((start, end))
            i = end
        elif c == '"':
            i = _quoted_name_end(text, i + 1)
        elif _in_name(text, i):
            i = _NAME_REST.match(text, i).end()  # type: ignore[union-attr]
        elif (tag := _TAG.match(text, i)) is not None:
            close = text.find(tag.group(), tag.end())
            end = n if close < 0 else close + len(tag.group())
            spans.append((i, end))
            i = end
        elif (parameter := _PARAMETER.match(text, i)) is not None:
            top = max(top, int(parameter[1]))
            i = parameter.end()
        else:
            i += 1
    return spans, top


def _word_start(text: str, i: int) -> int:
    """Where the run of name characters (digits and '$' too) that ends at ``i`` starts."""
    k = i
    while k > 0 and _name_char(text[k - 1]):
        k -= 1
    return k


def _in_name(text: str, i: int) -> bool:
    """Whether the '$' at ``i`` is part of a name ("a$b$c"; "12ab$c" is 12 and a name), not
    the start of a dollar quote or a parameter ("1$a$", "$1$a$")."""
    k = _word_start(text, i)
    return any(_NAME_START_CHAR.match(ch) for ch in text[k:i])


def _prefix(text: str, i: int) -> tuple[int, str | None]:
    """Where the string whose quote is at ``i`` starts, and its prefix letter (e, b, x, n;
    u for U&), or None: a prefix is a name of its own ("typE'x'" is a name and a string)."""
    if i >= 1 and text[i - 1] in "eEbBxXnN" and _word_start(text, i - 1) == i - 1:
        return i - 1, text[i - 1].lower()
    if i >= 2 and text[i - 1] == "&" and text[i - 2] in "uU" and _word_start(text, i - 2) == i - 2:
        return i - 2, "u"
    return i, None


def _prefixed_end(text: str, prefix: str, i: int, conforming: bool) -> int:
    """After the string that starts at ``i`` behind its prefix: E'...' takes backslash
    escapes, B'...' and X'...' no doubled quotes, N'...' (a plain string after the keyword
    NCHAR) follows standard_conforming_strings, U&'...' does not."""
    if prefix == "e":
        return _string_end(text, i, escapes=True)
    if prefix in ("b", "x"):
        return _string_end(text, i, escapes=False, doubled=False)
    return _string_end(text, i, escapes=prefix == "n" and not conforming)


def _union(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def mask_literals(text: str) -> str:
    """``text`` with each string constant written as a parameter symbol numbered after the
    text's own (``$3`` where it has ``$1`` and ``$2``), under either setting of
    standard_conforming_strings; a constant the text cuts off is masked to its end."""
    # Text without a quote or a dollar-quote tag holds no constant: pg_stat_statements' own.
    if "'" not in text and ("$" not in text or _TAG.search(text) is None):
        return text
    spans, number = _scan(text, True)
    if "\\" in text:  # only a backslash reads differently with the setting off
        off, top_off = _scan(text, False)
        spans, number = _union([*spans, *off]), max(number, top_off)
    out: list[str] = []
    last = 0
    for start, end in spans:
        number += 1
        symbol = f"${number}"
        # A symbol against a name would join it ("SELECT$1" is one name).
        if start > 0 and _name_char(text[start - 1]):
            symbol = " " + symbol
        if end < len(text) and _name_char(text[end]):
            symbol += " "
        out += [text[last:start], symbol]
        last = end
    out.append(text[last:])
    return "".join(out)
