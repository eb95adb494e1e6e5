"""The index a fix creates: an existing index that covers it is not proposed again, and its
step names the recorded statements whose own WHERE and ORDER BY it matches (derived from
their text, never claimed from a plan), or says that none does. Pure: hand-built snapshots."""

from __future__ import annotations

import dataclasses

import pytest

from qadvisor.fixes.builders import (
    IndexFix,
    IndexKey,
    covering_index,
    existing_index,
    implies,
    live_set_index,
    matching_statements,
)
from qadvisor.model import Index, LivePredicate, Snapshot, Statement, Table
from qadvisor.sql.dequeue import analyse, analyse_write
from tests import snapshots as S

PENDING = S.PENDING
CLAIM = (
    "SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)


def _in(*values: str) -> LivePredicate:
    return LivePredicate("status", "in", values)


@pytest.mark.parametrize(
    ("narrow", "wide", "expected"),
    [
        (_in("pending"), _in("pending"), True),
        (_in("pending"), _in("pending", "retry"), True),
        (_in("pending", "retry"), _in("pending"), False),
        (_in("pending"), LivePredicate("status", "not in", ("done",)), True),
        (_in("done"), LivePredicate("status", "not in", ("done",)), False),
        (
            LivePredicate("status", "not in", ("done", "failed")),
            LivePredicate("status", "not in", ("done",)),
            True,
        ),
        (
            LivePredicate("status", "not in", ("done",)),
            LivePredicate("status", "not in", ("done", "failed")),
            False,
        ),
        (_in("pending"), LivePredicate("state", "in", ("pending",)), False),
        (LivePredicate("finished_at", "is null"), LivePredicate("finished_at", "is null"), True),
    ],
)
def test_implies_for_the_simple_forms(
    narrow: LivePredicate, wide: LivePredicate, expected: bool
) -> None:
    assert implies(narrow, wide) is expected


def _table(*indexes: Index) -> Table:
    return S.jobs_table(indexes=indexes)


WIDER = S.index("jobs_open_created_at_id", ("created_at", "id"), 1 << 20,
                predicate="(status = ANY (ARRAY['pending'::text, 'retry'::text]))")  # fmt: skip
WHOLE = S.index("jobs_created_at", ("created_at",), 1 << 20)


def test_an_index_with_the_keys_as_a_prefix_and_a_wider_predicate_covers_it() -> None:
    keys = (IndexKey("created_at"),)
    assert existing_index(_table(WIDER), keys, PENDING) is WIDER
    assert covering_index(live_set_index(_table(WIDER), PENDING, keys)) is WIDER
    # Not the other way round: the index holds pending rows only, retries are not in it.
    narrow = dataclasses.replace(WIDER, predicate="(status = 'pending'::text)")
    assert existing_index(_table(narrow), keys, _in("pending", "retry")) is None
    # Keys in another order, another direction, or not a prefix: no cover.
    assert existing_index(_table(WIDER), (IndexKey("id"),), PENDING) is None
    assert existing_index(_table(WIDER), (IndexKey("created_at", True),), PENDING) is None
    # A whole-table index does not cover a partial one (the partial one is for its size and
    # for a predicate the planner can prove), and an invalid index covers nothing.
    assert covering_index(live_set_index(_table(WHOLE), PENDING, keys)) is None
    invalid = dataclasses.replace(WIDER, is_valid=False)
    assert covering_index(live_set_index(_table(invalid), PENDING, keys)) is None
    assert covering_index(IndexFix(_table(WHOLE), keys)) is WHOLE


def _snap(*texts: str, **kw: object) -> Snapshot:
    stmts = tuple(
        Statement(source=f"--query {n}", text=t, parsed=analyse(t), **kw)  # type: ignore[arg-type]
        for n, t in enumerate(texts, 1)
    )
    return dataclasses.replace(S.snapshot(_table()), statements=stmts)


def _names(snap: Snapshot, build: IndexFix) -> list[tuple[str, bool]]:
    return [(m.statement.source, m.planned_values) for m in matching_statements(snap, build)]


def test_the_statements_whose_where_and_order_by_the_new_index_matches() -> None:
    by_created = live_set_index(_table(), PENDING, (IndexKey("created_at"),))
    by_id = live_set_index(_table(), PENDING, (IndexKey("id"),))
    other_status = CLAIM.replace("'pending'", "'running'")
    backward = CLAIM.replace("ORDER BY created_at", "ORDER BY created_at DESC")
    no_order = "SELECT id FROM jobs WHERE status = 'pending' LIMIT 1 FOR UPDATE SKIP LOCKED"
    snap = _snap(CLAIM, other_status, backward, no_order)
    # Its WHERE implies the predicate and the keys give the order (a backward scan too).
    assert _names(snap, by_created) == [("--query 1", False), ("--query 3", False),
                                        ("--query 4", False)]  # fmt: skip
    # Keys that do not give the ORDER BY: only the statement without one.
    assert _names(snap, by_id) == [("--query 4", False)]
    # A leading key the statement compares with one value is passed over.
    by_status = live_set_index(_table(), PENDING, (IndexKey("status"), IndexKey("created_at")))
    assert ("--query 1", False) in _names(snap, by_status)


def test_a_parameter_matches_only_with_the_value_qadvisor_planned_and_says_so() -> None:
    bound = CLAIM.replace("'pending'", "$1")
    build = live_set_index(_table(), PENDING, (IndexKey("created_at"),))
    planned = _snap(bound, custom_values={"1": "'pending'"})
    assert _names(planned, build) == [("--query 1", True)]
    (step,) = (build.step(planned),)
    assert "--query 1 (with the values qadvisor planned its parameters with)" in step.note
    assert "derived from their text, not from a plan" in step.note
    # Planned with another value, it does not match.
    assert _names(_snap(bound, custom_values={"1": "'running'"}), build) == []


def test_a_claim_that_could_not_be_planned_may_match_and_the_note_says_so() -> None:
    # Not planned (a GRANT the role lacks): its $1 is unknown, so it may be the index's value;
    # the index is not said to serve nobody, nor to serve it for sure.
    bound = CLAIM.replace("'pending'", "$1")
    build = live_set_index(_table(), PENDING, (IndexKey("created_at"),))
    unplanned = _snap(bound)
    (match,) = matching_statements(unplanned, build)
    assert match.unbound and not match.planned_values
    assert "(if its parameter holds a value the index covers: not planned)" in (
        build.step(unplanned).note
    )
    # A maintenance statement is never planned; no value is supposed for it.
    purge = "DELETE FROM jobs WHERE status = $1 AND created_at < now() - interval '7 days'"
    snap = dataclasses.replace(
        S.snapshot(_table()),
        maintenance=(Statement("--query 1", purge, analyse_write(purge), queue="public.jobs"),),
    )
    assert matching_statements(snap, build) == ()


def test_the_statement_an_index_is_built_for_is_named_first() -> None:
    # A derivation the text matching cannot make (a predicate of several conditions) still
    # names the statement the index was built from, with the check to make.
    build = IndexFix(_table(), (IndexKey("created_at"),), "status = 'pending' AND id > 5")
    (claim,) = _snap(CLAIM).statements
    note = build.step(_snap(CLAIM), claim).note
    assert note.startswith("Built for --query 1, from its WHERE and ORDER BY: check with EXPLAIN")
    # One the matching finds too is listed once, first.
    by_created = live_set_index(_table(), PENDING, (IndexKey("created_at"),))
    snap = _snap(CLAIM, CLAIM.replace("ORDER BY created_at", "ORDER BY created_at DESC"))
    note = by_created.step(snap, snap.statements[1]).note
    assert note.startswith("Statements whose WHERE implies") and note.count("--query 2") == 1
    assert note.index("--query 2") < note.index("--query 1")


def test_the_step_says_when_no_recorded_statement_matches() -> None:
    build = live_set_index(_table(), PENDING, (IndexKey("id"),))
    step = build.step(_snap(CLAIM))
    assert step.note.startswith(f"No recorded statement's WHERE and ORDER BY match {build.name}")
    assert "CREATE INDEX CONCURRENTLY cannot run inside a transaction block" in step.note
    # Without a snapshot, the standard note alone (a pack's own index).
    assert not build.step().note.startswith("No recorded")
