"""The scanner that finds the evidence fields of a check's source (tests/render/evidence_fields.py),
on small sources: each way a field reaches evidence is seen, nothing else is."""

from __future__ import annotations

from tests.render.evidence_fields import evidence_fields


def fields(source: str) -> set[str]:
    found, elsewhere = evidence_fields([source])
    assert elsewhere == set(), elsewhere
    return found


def test_a_one_line_dict_passed_as_evidence_is_read() -> None:
    # One key per line is what a line-by-line reading would have seen; this has none.
    source = 'def run(s):\n    yield Finding(target=t, message="m", evidence={"new_field": 1})\n'
    assert fields(source) == {"new_field"}


def test_every_way_into_evidence_is_read() -> None:
    source = """
def run(snapshot):
    evidence: dict[str, object] = {"assigned": 1, "two": 2}
    evidence |= {"merged": 3}
    evidence["subscripted"] = 4
    evidence.update({"updated": 5}, by_keyword=6)
    extra = {"through_a_local": 7}
    yield Finding(evidence=evidence | extra | {"or_ed": 8})
    yield Finding(evidence={**found.evidence, **_more(), "spread_next_to": 9})
    yield Finding(evidence=dict(by_dict=10) if flag else _other_evidence(snapshot))


def _more():
    out = {"returned_by_a_called_function": 11}
    out["then_set"] = 12
    return out


def _other_evidence(snapshot):
    return {"returned_by_an_evidence_function": 13}
"""
    assert fields(source) == {
        "assigned", "two", "merged", "subscripted", "updated", "by_keyword", "through_a_local",
        "or_ed", "spread_next_to", "returned_by_a_called_function", "then_set", "by_dict",
        "returned_by_an_evidence_function",
    }  # fmt: skip


def test_keys_that_are_no_evidence_fields_are_not_read() -> None:
    source = """
OPTIONS = {"threshold": 1}


def run(snapshot):
    settings = {"not_evidence": 1}
    evidence = {"field": [{"nested_key": 1}], "other": {"inner": 2}}
    yield Finding(evidence=evidence, fix=Fix(notes={"a_fix_key": 3}))


def _helper():
    return {"returned_but_never_evidence": 4}
"""
    assert fields(source) == {"field", "other"}


def test_a_helper_defined_elsewhere_is_named_not_guessed() -> None:
    found, elsewhere = evidence_fields(
        ['def run(s):\n    yield F(evidence={**helper(s), "a": 1})\n']
    )
    assert (found, elsewhere) == ({"a"}, {"helper"})
