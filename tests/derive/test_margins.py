"""qadvisor.derive.margins: three answers, the middle one within the margin."""

from __future__ import annotations

import pytest

from qadvisor.derive.margins import at_least, at_most, near


@pytest.mark.parametrize(
    ("value", "expected"),
    [(79.9, False), (80.0, None), (100.0, None), (119.9, None), (120.0, True)],
)
def test_at_least_is_undecided_within_a_fifth_either_side(
    value: float, expected: bool | None
) -> None:
    assert at_least(value, 100.0) is expected
    assert near(value, 100.0) is (expected is None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.08, True), (0.081, None), (0.1, None), (0.12, None), (0.121, False)],
)
def test_at_most_is_undecided_within_a_fifth_either_side(
    value: float, expected: bool | None
) -> None:
    assert at_most(value, 0.1) is expected


def test_the_margin_is_the_callers() -> None:
    assert at_least(1.04, 1.0, 0.05) is None and at_least(1.05, 1.0, 0.05) is True
    assert at_least(5, 5, 0.0) is True and at_least(4.9, 5, 0.0) is False
