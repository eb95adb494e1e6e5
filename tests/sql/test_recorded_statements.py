"""qadvisor.sql.recorded_statements.typed_constant_placeholder: a typed constant that
pg_stat_statements recorded as a parameter, which PREPARE refuses."""

from __future__ import annotations

import pytest

from qadvisor.sql.recorded_statements import typed_constant_placeholder


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("UPDATE jobs SET status = $1 WHERE started_at < now() - interval $3", "interval $3"),
        ("SELECT id FROM jobs WHERE run_at > DATE $12 LIMIT $1", "DATE $12"),
        ("SELECT timestamp with time zone $2", "timestamp with time zone $2"),
        ("SELECT ts AT TIME ZONE $1 FROM jobs", None),  # an expression, not a constant
        ("SELECT 1 FROM jobs WHERE note = 'interval $1'", None),  # inside a string
        ("SELECT id FROM jobs WHERE status = $1 ORDER BY id LIMIT $2", None),
        ("SELECT $1::interval", None),
    ],
)
def test_a_typed_constant_recorded_as_a_parameter_is_found(text: str, found: str | None) -> None:
    assert typed_constant_placeholder(text) == found
