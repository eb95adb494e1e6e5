"""Masking another session's string constants: qadvisor's scanner finds the constants where
PostgreSQL's own scanner does (pglast's, the server's scan.l), and no piece of a constant
survives, whichever standard_conforming_strings the session had and wherever the text was cut.

The texts are made of the pieces that defeat a naive reading (a quote in a comment or a quoted
name, an escaped quote, a dollar quote holding quotes, a string continued on the next line);
every constant holds a secret made of the letter Z, which nothing else in the text holds.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from pglast import parser
from pglast.parser import ParseError

from qadvisor.sql import masking
from qadvisor.sql.masking import literal_spans, mask_literals
from tests.test_fuzz import FUZZ

SECRET = "Z"
_CONSTANTS = frozenset({"SCONST", "USCONST", "BCONST", "XCONST"})


def postgres_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each string constant as PostgreSQL's scanner reads ``text`` (with
    standard_conforming_strings on), end exclusive; N'...' from its N."""
    tokens = parser.scan(text)
    spans = []
    for before, token in zip([None, *tokens], tokens, strict=False):
        if token.name not in _CONSTANTS:
            continue
        start = token.start
        if (
            before is not None
            and before.name == "NCHAR"
            and before.start == before.end
            and token.start == before.end + 1
        ):
            start = before.start
        spans.append((start, token.end + 1))
    return spans


# The cases and their neighbours: (text, what must stay of it).
HOSTILE = {
    "escape string": (r"SELECT E'\'ZZZ', 1", "SELECT $1, 1"),
    "quote in a block comment": ("SELECT /* it's */ 'ZZZ' FROM t", "SELECT /* it's */ $1 FROM t"),
    "quote in a nested comment": (
        "SELECT /* a /* it's */ b' */ 'ZZZ'",
        "SELECT /* a /* it's */ b' */ $1",
    ),
    "quoted name holding a quote": ("SELECT \"a'b\", 'ZZZ'", 'SELECT "a\'b", $1'),
    "line comment": (
        "SELECT 1 -- don't\nFROM t WHERE a = 'ZZZ'",
        "SELECT 1 -- don't\nFROM t WHERE a = $1",
    ),
    "cut off": ("SELECT * FROM t WHERE a = 'ZZZ and the rest", "SELECT * FROM t WHERE a = $1"),
    "cut off escape string": (r"SELECT E'ZZ\'ZZ", "SELECT $1"),
    "cut off dollar quote": ("DO $body$ BEGIN PERFORM 'ZZZ", "DO $1"),
    "backslash with standard_conforming_strings off": (r"SELECT 'x\'ZZZ' AS v", "SELECT $1"),
    "dollar quote holding quotes": (
        "DO $$ BEGIN PERFORM 1 FROM jobs WHERE t = 'ZZZ' FOR UPDATE; END $$",
        "DO $1",
    ),
    "tagged dollar quote": ("SELECT $a$ $$ 'x' ZZZ $a$, 2", "SELECT $1, 2"),
    "name with dollars": ("SELECT a$b$c, 'ZZZ'", "SELECT a$b$c, $1"),
    "continued string": ("SELECT 'ZZ'\n  'ZZ' AS v", "SELECT $1 AS v"),
    "prefixed strings": ("SELECT U&'Z', B'Z', X'Z', N'Z', e'Z'", "SELECT $1, $2, $3, $4, $5"),
    "after the statement's own parameters": ("SELECT $2, 'ZZZ', $1", "SELECT $2, $3, $1"),
    "against a name": ("SELECT'ZZZ'AS v", "SELECT $1 AS v"),
    "password of ALTER ROLE": (
        "ALTER ROLE app PASSWORD 'ZZZ' VALID UNTIL 'infinity'",
        "ALTER ROLE app PASSWORD $1 VALID UNTIL $2",
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_text_keeps_its_shape_and_loses_its_constants(case: str) -> None:
    text, masked = HOSTILE[case]
    assert mask_literals(text) == masked


def test_masked_text_is_stable() -> None:
    # pg_stat_statements' own text (constants already $n) comes through unchanged.
    text = "SELECT id FROM jobs WHERE status = $1 /* , ... */ ORDER BY 1 LIMIT $2 FOR UPDATE"
    assert mask_literals(text) == text
    for text, _ in HOSTILE.values():
        once = mask_literals(text)
        assert mask_literals(once) == once


# --- generated text -----------------------------------------------------------------------
_CHARS = 'ab é$-/*"\\\n;'


def _inside(alphabet: str = _CHARS) -> st.SearchStrategy[str]:
    """A constant's text: the secret, and characters that matter to a scanner around it."""
    return st.lists(st.sampled_from([*alphabet, "'", SECRET]), max_size=8).map(
        lambda cs: SECRET + "".join(cs)
    )


def _plain(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _escaped(text: str) -> str:
    # An escape string's quote written either way, and its backslashes doubled.
    return "E'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@st.composite
def _dollar(draw: st.DrawFn) -> str:
    tag = draw(st.sampled_from(["", "a", "tag_1", "é"]))
    delimiter = f"${tag}$"
    text = draw(_inside())
    assume(delimiter not in text + "$")
    return f"{delimiter}{text}{delimiter}"


def _continued(pair: tuple[str, str]) -> str:
    first, second = pair
    return f"{_plain(first)}\n  -- don't\n {_plain(second)}"


CONSTANT = st.one_of(
    _inside().map(_plain),
    _inside().map(_escaped),
    _dollar(),
    _inside().map(lambda t: "U&" + _plain(t)),
    _inside().map(lambda t: "N" + _plain(t)),
    _inside("01").map(lambda t: "B'" + t.replace("'", "") + "'"),
    _inside("0af").map(lambda t: "x'" + t.replace("'", "") + "'"),
    st.tuples(_inside(), _inside()).map(_continued),
)
OTHER = st.sampled_from(
    [
        "SELECT", "FROM jobs", "a$b$c", "U", "E", "x", "é", "$1", "$12", "12", "2.5", "=", "::",
        ",", "(", ")", "+", "-", "/", "*", ";", "\n", '"a\'b""c"', 'U&"it\'s"',
        "-- don't $$ /* \n", "/* it's /* \"x */ $$ ' */", "/**/", "--\n",
    ]
)  # fmt: skip
TEXT = st.lists(st.one_of(CONSTANT, OTHER), min_size=1, max_size=12).map(" ".join)


@FUZZ
@given(TEXT)
@example("SELECT E'\\'Z' /* it's */ 'Z'")
def test_constants_are_where_postgresql_finds_them(text: str) -> None:
    try:
        expected = postgres_spans(text)
    except ParseError:
        assume(False)  # text PostgreSQL's scanner refuses ("1E", "U&" before a quote...)
    assert literal_spans(text) == expected


@FUZZ
@given(TEXT)
def test_no_piece_of_a_constant_survives_wherever_the_text_is_cut(text: str) -> None:
    for cut in range(len(text) + 1):
        masked = mask_literals(text[:cut])
        assert SECRET not in masked, (text[:cut], masked)


# Plain strings written as a session with standard_conforming_strings = off writes them: a
# backslash escapes the next character, a quote among them.
OFF_CONSTANT = _inside().map(lambda t: "'" + t.replace("\\", "\\\\").replace("'", "\\'") + "'")


@FUZZ
@given(st.lists(st.one_of(OFF_CONSTANT, OTHER), min_size=1, max_size=12).map(" ".join))
@example(r"SELECT 'x\'Z' AS v, 'Z\\'")
def test_no_piece_survives_with_standard_conforming_strings_off(text: str) -> None:
    for cut in range(len(text) + 1):
        assert SECRET not in mask_literals(text[:cut]), text[:cut]


def test_name_classes_are_scan_l_s() -> None:
    # Written as negated ASCII classes (quick to compile); the sets are {ident_start},
    # {ident_cont} and {dolq_cont}: a letter, '_' or any non-ASCII character, then digits and
    # '$', then digits alone.
    every = "".join(map(chr, range(0x110000)))

    def start(c: str) -> bool:
        return not c.isascii() or c.isalpha() or c == "_"

    classes = {
        masking._NAME_START: start,
        masking._NAME_CONT: lambda c: start(c) or c.isdigit() or c == "$",
        masking._DOLQ_CONT: lambda c: start(c) or c.isdigit(),
    }
    for chars, wanted in classes.items():
        assert "".join(re.findall(f"[{chars}]", every)) == "".join(filter(wanted, every))
