"""Narrowing for tests: a value the code under test may leave out (an optional node field of a
parse tree, a row a query may not return) that the test needs present."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None, what: str = "value") -> T:
    """The value, which the test requires: a clear failure instead of an AttributeError on None."""
    assert value is not None, f"{what} is missing"
    return value
