"""A dequeue statement's conditions against the queue's predicates (qadvisor.derive.predicates):
which columns a partial index's predicate names, whether the statement's conjuncts prove it,
the values a condition compares with, and the SQL text and index-name words made from them.
Pure: conditions are built by hand as the statement parser gives them."""

from __future__ import annotations

import dataclasses

import pytest

from qadvisor.derive.predicates import (
    ValueJudgement,
    index_predicate_columns,
    operand_values,
    predicate_implies,
    predicate_text,
    predicate_words,
)
from qadvisor.model import Column, LivePredicate
from qadvisor.sql.dequeue import Param, Predicate, analyse
from tests import snapshots as S


def lit(text: str) -> Param:
    return Param("literal", text)


def par(index: int) -> Param:
    return Param("parameter", f"${index}", index)


def cond(column: str, op: str, *operands: Param) -> Predicate:
    return Predicate(column, op, operands, f"{column} {op} ...")  # type: ignore[arg-type]


QUEUED = LivePredicate("status", "in", ("queued",))
OPEN = LivePredicate("status", "in", ("queued", "retry"))
UNFINISHED = LivePredicate("finished_at", "is null")


# --- the columns of a partial index's predicate ------------------------------------------------


@pytest.mark.parametrize(
    ("predicate", "columns"),
    [
        ("((status = 'pending'::text) AND (finished_at IS NULL))", {"status", "finished_at"}),
        ("(lower(status) = 'x'::text)", {"status"}),  # a function's argument, not its name
        ("(created_at::date > '2024-01-01'::date)", {"created_at"}),  # not the type's name
        ("(STATUS IS NULL)", {"status"}),  # folded as PostgreSQL folds it
        ('("Status" IS NULL)', set()),  # quoted: another column, not one of jobs
        ("(queue = 'x'::text)", set()),  # no such column in jobs
        ("(run_at < now())", set()),
        ("(status = ANY (hashed SubPlan 1))", {"status"}),  # EXPLAIN's text, read by tokens
        ("('unterminated", set()),
    ],
)
def test_the_columns_a_partial_index_predicate_names_are_columns_of_the_table(
    predicate: str, columns: set[str]
) -> None:
    index = S.index("jobs_idx", ("id",), 8192, predicate=predicate)
    assert index_predicate_columns(index, S.jobs_table()) == frozenset(columns)


def test_only_columns_the_table_has_count() -> None:
    t = dataclasses.replace(S.jobs_table(), columns=(Column("id", "bigint", True),))
    index = S.index("jobs_idx", ("id",), 8192, predicate="(status = 'x'::text)")
    assert index_predicate_columns(index, t) == frozenset()


def test_a_whole_table_index_names_no_predicate_columns() -> None:
    assert index_predicate_columns(S.index("jobs_idx", ("status",), 8192), S.jobs_table()) == (
        frozenset()
    )


# --- does a statement prove the predicate -----------------------------------------------------


def test_an_equality_or_in_list_inside_the_predicate_s_values_proves_it() -> None:
    equal = cond("status", "=", lit("'queued'"))
    assert predicate_implies([equal], QUEUED) == ValueJudgement(True, (equal,))
    assert predicate_implies([equal], OPEN).implies is True
    inside = cond("status", "in", lit("'queued'"), lit("'retry'"))
    assert predicate_implies([inside], OPEN).implies is True
    # A row with status 'retry' would be outside the index on queued rows.
    assert predicate_implies([inside], QUEUED) == ValueJudgement(False, (inside,))


def test_any_proves_it_with_an_array_literal_or_an_array_constructor() -> None:
    literal = cond("status", "any", lit("'{queued,retry}'"))
    assert predicate_implies([literal], OPEN).implies is True
    assert predicate_implies([literal], QUEUED).implies is False
    items = cond("status", "any", lit("'queued'"), lit("'retry'"))
    assert predicate_implies([items], OPEN).implies is True


def test_a_parameter_proves_it_only_once_its_value_is_known() -> None:
    bound = cond("status", "=", par(1))
    assert predicate_implies([bound], QUEUED) == ValueJudgement(None, (bound,))
    assert predicate_implies([bound], QUEUED, {"1": "'queued'"}).implies is True
    assert predicate_implies([bound], QUEUED, {"1": "'done'"}).implies is False
    assert predicate_implies([bound], QUEUED, {"2": "'queued'"}).implies is None
    array = cond("status", "any", par(2))
    assert predicate_implies([array], OPEN, {"2": "'{retry,queued}'"}).implies is True


def test_a_conjunct_that_proves_it_wins_over_an_undecided_one() -> None:
    unknown, known = cond("status", "=", par(1)), cond("status", "=", lit("'queued'"))
    assert predicate_implies([unknown, known], QUEUED).implies is True
    assert predicate_implies([unknown, cond("status", "<>", lit("'done'"))], QUEUED).implies is None


@pytest.mark.parametrize("operand", [Param("column", "j.state"), Param("expression", "lower($1)")])
def test_an_operand_whose_value_the_text_does_not_give_leaves_it_undecided(
    operand: Param,
) -> None:
    pred = cond("status", "=", operand)
    assert predicate_implies([pred], QUEUED) == ValueJudgement(None, (pred,))


@pytest.mark.parametrize(
    "pred",
    [
        cond("status", "<>", lit("'done'")),
        cond("status", "<>", lit("'queued'")),
        cond("status", "not in", lit("'done'"), lit("'failed'")),
        cond("status", ">=", lit("'queued'")),
        cond("status", "is null"),
    ],
)
def test_other_forms_never_prove_an_equality_predicate(pred: Predicate) -> None:
    assert predicate_implies([pred], QUEUED) == ValueJudgement(False, (pred,))


def test_only_is_null_proves_is_null() -> None:
    null, other = cond("finished_at", "is null"), cond("finished_at", "=", lit("'x'"))
    assert predicate_implies([other, null], UNFINISHED) == ValueJudgement(True, (other, null))
    assert predicate_implies([cond("finished_at", "is not null")], UNFINISHED).implies is False
    assert predicate_implies([other], UNFINISHED).implies is False


def test_conditions_on_other_columns_are_not_the_judgement_s_evidence() -> None:
    elsewhere = cond("queue", "=", lit("'queued'"))
    assert predicate_implies([elsewhere], QUEUED) == ValueJudgement(False, ())
    on_status = cond("status", "=", lit("'queued'"))
    assert predicate_implies([elsewhere, on_status], QUEUED).predicates == (on_status,)


# --- the values a condition compares with ---------------------------------------------------


def test_operand_values_are_the_literals_values() -> None:
    assert operand_values(cond("status", "=", lit("'queued'")), {}) == ("queued",)
    assert operand_values(cond("status", "=", lit("'queued'::job_state")), {}) == ("queued",)
    assert operand_values(cond("status", "=", lit("CAST('it''s' AS text)")), {}) == ("it's",)
    assert operand_values(cond("priority", "=", lit("-1")), {}) == ("-1",)
    assert operand_values(cond("status", "in", lit("'a'"), par(1)), {"1": "'b'"}) == ("a", "b")
    assert operand_values(cond("finished_at", "is null"), {}) == ()


def test_any_s_one_operand_is_an_array_and_its_several_are_items() -> None:
    assert operand_values(cond("s", "any", lit("'{a,\"b c\"}'")), {}) == ("a", "b c")
    assert operand_values(cond("s", "any", lit("ARRAY['a', 'b']")), {}) == ("a", "b")
    assert operand_values(cond("s", "any", par(1)), {"1": "'{x,y}'"}) == ("x", "y")
    assert operand_values(cond("s", "any", lit("'a'"), lit("'b'")), {}) == ("a", "b")
    # = ANY(ARRAY['{x,y}', 'z']): an item that looks like an array is still one value.
    assert operand_values(cond("s", "any", lit("'{x,y}'"), lit("'z'")), {}) == ("{x,y}", "z")
    # '{a,b}' compared with = is one text value, braces and all.
    assert operand_values(cond("s", "=", lit("'{a,b}'")), {}) == ("{a,b}",)


def test_no_values_when_an_operand_is_not_a_literal_or_a_known_parameter() -> None:
    assert operand_values(cond("status", "=", par(1)), {}) is None
    assert operand_values(cond("status", "=", Param("parameter", "?", None)), {"1": "'a'"}) is None
    assert operand_values(cond("status", "in", lit("'a'"), Param("column", "j.s")), {}) is None
    assert operand_values(cond("status", "=", par(1)), {"1": "now()"}) is None


# --- SQL text and name words ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pred", "text"),
    [
        (cond("status", "=", lit("'queued'")), "status = 'queued'"),
        (cond("status", "<>", lit("'done'")), "status <> 'done'"),
        (cond("priority", ">=", lit("5")), "priority >= 5"),
        (cond("status", "in", lit("'a'"), lit("'b'")), "status IN ('a', 'b')"),
        (cond("status", "not in", lit("'a'")), "status NOT IN ('a')"),
        (cond("status", "any", lit("'{a,b}'")), "status = ANY ('{a,b}')"),
        (cond("finished_at", "is null"), "finished_at IS NULL"),
        (cond("finished_at", "is not null"), "finished_at IS NOT NULL"),
        (cond("Status", "=", lit("'x'")), "\"Status\" = 'x'"),
        (cond("order", "=", lit("1")), '"order" = 1'),  # a keyword, quoted
    ],
)
def test_a_conjunct_as_an_index_s_where_clause(pred: Predicate, text: str) -> None:
    assert predicate_text(pred) == text


def test_parameters_are_written_with_their_values() -> None:
    bound = cond("status", "in", lit("'a'"), par(2))
    assert predicate_text(bound, {"2": "'b'"}) == "status IN ('a', 'b')"
    assert predicate_text(bound) is None
    assert predicate_text(bound, {"1": "'b'"}) is None


@pytest.mark.parametrize(
    "pred",
    [
        cond("status", "=", Param("column", "j.state")),
        cond("run_at", "<=", Param("expression", "CURRENT_TIMESTAMP")),
        cond("status", "any", lit("'a'"), lit("'b'")),  # ANY over several items
        cond("status", "=", lit("'a'"), lit("'b'")),
        cond("status", "in"),
        cond("status", "other", lit("'a'")),
    ],
)
def test_what_cannot_be_written_on_the_bare_column_is_none(pred: Predicate) -> None:
    assert predicate_text(pred) is None


def test_the_text_of_a_parsed_statement_drops_its_alias() -> None:
    parsed = analyse(
        "SELECT id FROM app.jobs j WHERE j.status = 'queued' AND j.finished_at IS NULL"
        " ORDER BY j.id LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    assert parsed is not None
    assert [predicate_text(p) for p in parsed.predicates] == [
        "status = 'queued'",
        "finished_at IS NULL",
    ]


def test_index_name_words_from_the_values() -> None:
    assert predicate_words([cond("status", "=", lit("'queued'"))]) == ["queued"]
    assert predicate_words([cond("status", "<>", lit("'done'"))]) == ["not_done"]
    assert predicate_words([cond("status", "not in", lit("'done'"), lit("'failed'"))]) == [
        "not_done",
        "not_failed",
    ]
    assert predicate_words([cond("finished_at", "is null")]) == ["finished_at_null"]
    assert predicate_words([cond("status", "any", lit("'{queued,retry}'"))]) == ["queued", "retry"]
    assert predicate_words([cond("status", "=", par(1))], {"1": "'queued'"}) == ["queued"]
    # A parameter without a value, or an operand that is no literal, gives no word.
    assert (
        predicate_words([cond("status", "=", par(1)), cond("s", "=", Param("column", "x"))]) == []
    )


def test_at_most_three_words_in_the_order_of_the_conditions() -> None:
    preds = [
        cond("finished_at", "is null"),
        cond("status", "in", lit("'a'"), lit("'b'"), lit("'c'")),
        cond("queue", "=", lit("'mail'")),
    ]
    assert predicate_words(preds) == ["finished_at_null", "a", "b"]
