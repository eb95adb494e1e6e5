"""Function bodies read into their blocks, variables and SQL sites; the token helpers (pure)."""

from __future__ import annotations

import pytest
from sqlglot import Token

from qadvisor.sql import dequeue
from qadvisor.sql.plpgsql import (
    EXPRESSION_CONTEXTS,
    BodyError,
    Variable,
    has_lock,
    is_placeholder,
    lock_at,
    mentions_lock,
    name_of,
    read_body,
    word,
)


def tokens(text: str) -> list[Token]:
    return dequeue.tokenize(text, plpgsql=True)


WANTED = Variable("wanted", "parameter", "bigint", position=1)

BODY = """#variable_conflict use_variable
<<outer>>
DECLARE
    r record;
    n integer := 0;
    c CURSOR FOR SELECT id FROM jobs FOR UPDATE;
BEGIN
    SELECT id, queue INTO STRICT r FROM jobs WHERE queue = 'a;b' FOR UPDATE SKIP LOCKED;
    IF NOT found THEN
        RETURN;
    END IF;
    <<inner>>
    DECLARE
        n bigint;
    BEGIN
        n := r.id;
        UPDATE jobs SET status = 'running' WHERE id = outer.n;
    END;
    FOR i IN 1..3 LOOP
        RAISE NOTICE 'x %', (SELECT 1 FROM jobs FOR UPDATE);
    END LOOP;
    EXECUTE format('SELECT 1 FROM %I FOR UPDATE', 'jobs');
    RETURN QUERY SELECT id FROM jobs WHERE id = wanted FOR NO KEY UPDATE;
END
"""


def test_words_and_names_of_tokens() -> None:
    found = tokens("SELECT \"Mixed\", Name, 'str', _x")
    assert [word(t) for t in found] == ["SELECT", None, None, "NAME", None, None, None, "_X"]
    assert [name_of(t) for t in found] == ["select", "Mixed", None, "name", None, None, None, "_x"]


def test_plpgsql_tokens_keep_the_words_that_start_plpgsql_statements() -> None:
    # As SQL, DECLARE and EXECUTE would swallow the rest of the text into one string token.
    assert [word(t) for t in tokens("DECLARE n int")] == ["DECLARE", "N", "INT"]
    assert [t.text for t in dequeue.tokenize("DECLARE n int")] == ["DECLARE", "n int"]
    with pytest.raises(dequeue.StatementError, match="cannot split it into tokens"):
        tokens("SELECT 'unterminated")


def test_placeholders_are_a_dollar_sign_with_its_number_attached() -> None:
    found = tokens("SELECT $1, $ 2")
    assert [is_placeholder(found, i) for i in range(len(found))] == [
        False, True, False, False, False, False,
    ]  # fmt: skip
    assert not is_placeholder(found, len(found) - 1)  # no token after the last one


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("FOR UPDATE", 2),
        ("FOR NO KEY UPDATE", 4),
        ("FOR SHARE", 2),
        ("FOR KEY SHARE", 3),
        ("FOR share IN SELECT 1 LOOP", 0),  # a loop whose variable is called share
        ("FOR r IN SELECT 1 LOOP", 0),
        ("UPDATE jobs", 0),
    ],
)
def test_lock_at_counts_the_tokens_of_a_row_locking_clause(text: str, length: int) -> None:
    assert lock_at(tokens(text), 0) == length


def test_a_lock_in_the_text_of_dynamic_sql_is_mentioned_not_had() -> None:
    dynamic = tokens("EXECUTE 'SELECT 1 FROM jobs FOR UPDATE'")
    assert not has_lock(dynamic)
    assert mentions_lock(dynamic)
    assert has_lock(tokens("SELECT 1 FROM jobs FOR KEY SHARE SKIP LOCKED"))
    # A string whose text is no SQL that can be split mentions nothing.
    assert not mentions_lock(tokens("PERFORM 'FOR UPDATE'' unterminated inside'"))


def test_a_plpgsql_body_is_read_into_its_sites() -> None:
    body = read_body(BODY, "plpgsql", [WANTED], "claim", variable_conflict="use_column")
    sites = [(s.context, s.line, s.as_run, s.planned, s.locks, s.dynamic) for s in body.sites]
    assert sites == [
        ("DECLARE default", 5, "0", "SELECT 0", False, False),
        ("cursor", 6, "SELECT id FROM jobs FOR UPDATE", "SELECT id FROM jobs FOR UPDATE", True,
         False),
        ("SQL statement", 8,
         "SELECT id, queue FROM jobs WHERE queue = 'a;b' FOR UPDATE SKIP LOCKED",
         "SELECT id, queue FROM jobs WHERE queue = 'a;b' FOR UPDATE SKIP LOCKED", True, False),
        ("IF condition", 9, "NOT found", "SELECT NOT found", False, False),
        ("assignment", 16, "n := r.id", "SELECT r.id", False, False),
        ("SQL statement", 17, "UPDATE jobs SET status = 'running' WHERE id = outer.n",
         "UPDATE jobs SET status = 'running' WHERE id = outer.n", False, False),
        ("FOR range", 19, "1..3", "", False, False),
        # A lock inside a statement that holds no query of its own is seen, not planned.
        ("RAISE statement", 20, "RAISE NOTICE 'x %', (SELECT 1 FROM jobs FOR UPDATE)", "", True,
         False),
        ("EXECUTE", 22, "EXECUTE format('SELECT 1 FROM %I FOR UPDATE', 'jobs')",
         "EXECUTE format('SELECT 1 FROM %I FOR UPDATE', 'jobs')", True, True),
        ("RETURN QUERY", 23, "SELECT id FROM jobs WHERE id = wanted FOR NO KEY UPDATE",
         "SELECT id FROM jobs WHERE id = wanted FOR NO KEY UPDATE", True, False),
    ]  # fmt: skip
    # Expression sites are planned as SELECT <expression>.
    for site in body.sites:
        if site.context in EXPRESSION_CONTEXTS:
            assert site.planned.startswith("SELECT ")
    # The #variable_conflict line wins over the function's setting.
    assert body.variable_conflict == "use_variable"


def test_blocks_declare_scopes_that_see_the_blocks_around_them() -> None:
    body = read_body(BODY, "plpgsql", [WANTED], "claim")
    assert body.top.label == "outer"
    assert [(s.label, list(s.names)) for s in body.top.chain()] == [
        ("outer", ["r", "n", "c"]),
        (None, ["found"]),
        ("claim", ["wanted"]),  # the parameters, labelled with the function's name
    ]
    inner = next(s for s in body.sites if s.context == "assignment").scope
    assert inner.label == "inner"
    n = inner.lookup("n")
    assert n is not None and n.declared == "bigint"  # the inner n hides the outer one
    outer = inner.labelled("outer")
    assert outer is not None and outer.names["n"].declared == "integer"
    wanted = inner.lookup("wanted")
    assert wanted is WANTED and wanted.position == 1
    assert inner.lookup("missing") is None and inner.labelled("missing") is None


def test_a_record_knows_the_query_that_fills_it_and_a_cursor_its_query() -> None:
    body = read_body(BODY, "plpgsql", [WANTED], "claim")
    claim = body.sites[2]
    r = body.top.names["r"]
    assert claim.fills == (r,)
    assert r.kind == "variable" and r.declared == "record"
    assert r.filled_by == [(claim.offset, claim)]
    assert BODY[claim.offset :].startswith("SELECT id, queue INTO STRICT r")
    c = body.top.names["c"]
    assert c.kind == "cursor" and c.cursor_query is body.sites[1]


def test_without_a_directive_the_setting_then_error_decides_conflicts() -> None:
    plain = "BEGIN PERFORM 1; END"
    configured = read_body(plain, "plpgsql", [], "f", variable_conflict="use_column")
    assert configured.variable_conflict == "use_column"
    assert read_body(plain, "plpgsql", [], "f").variable_conflict == "error"


def test_a_trigger_function_sees_new_and_old() -> None:
    body = read_body("BEGIN RETURN NEW; END", "plpgsql", [], "t", trigger=True)
    new = body.top.lookup("new")
    assert new is not None and new.kind == "special" and new.declared == "record"
    assert read_body("BEGIN RETURN 1; END", "plpgsql", [], "f").top.lookup("new") is None


def test_an_sql_body_is_its_statements_and_resolves_conflicts_to_the_column() -> None:
    body = read_body(
        "SELECT id FROM jobs WHERE queue = $1 FOR UPDATE SKIP LOCKED;\nUPDATE jobs SET n = 1",
        "sql",
        [Variable("q", "parameter", "text", position=1)],
        "f",
    )
    assert [(s.context, s.line, s.planned, s.locks) for s in body.sites] == [
        ("SQL statement", 1, "SELECT id FROM jobs WHERE queue = $1 FOR UPDATE SKIP LOCKED", True),
        ("SQL statement", 2, "UPDATE jobs SET n = 1", False),
    ]
    assert body.variable_conflict == "use_column"


def test_a_body_that_cannot_be_read_says_why() -> None:
    with pytest.raises(BodyError, match="cannot be split into tokens") as unsplit:
        read_body("BEGIN RETURN 'x; END", "plpgsql", [], "f")
    assert unsplit.value.line == 1
    with pytest.raises(BodyError, match="functions in language python are not read"):
        read_body("return 1", "python", [], "f")
