"""qadvisor.sql.recorded_statements: a typed constant that pg_stat_statements recorded as a
parameter, which PREPARE refuses; the statement's own parameters told from the constants
pg_stat_statements hid; whether a statement writes rows."""

from __future__ import annotations

import pytest

from qadvisor.sql.recorded_statements import (
    own_parameters,
    typed_constant_placeholder,
    writes_rows,
)
from tests.collect.test_planning_real_text import PGQUEUER


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


@pytest.mark.parametrize(
    ("text", "own"),
    [
        # pgqueuer's dequeue: its own $1 to $4 (batch, entrypoints, worker, heartbeat timeout)
        # in any order, the constants it writes ('queued', 'picked', ...) as $5, $6, $7.
        (PGQUEUER, 4),
        # psycopg2 sends literals: every $n is a constant, numbered in order.
        ("SELECT id FROM jobs WHERE status = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED", 0),
        # Numbers out of the order they appear in: those up to the break are the statement's.
        ("SELECT id FROM jobs WHERE status = $2 ORDER BY id LIMIT $1", 1),
        # A number used twice is no constant (each constant gets its own).
        ("SELECT id FROM jobs WHERE a = $1 AND b = $1 AND c = $2", 1),
        ("SELECT 1", 0),
    ],
)
def test_the_statements_own_parameters_are_told_from_the_constants_it_hides(
    text: str, own: int
) -> None:
    assert own_parameters(text) == own


def test_a_statement_that_writes_rows() -> None:
    assert writes_rows(PGQUEUER)  # an UPDATE in a WITH query
    assert writes_rows("WITH x AS (SELECT 1) INSERT INTO log SELECT * FROM x")
    assert not writes_rows("SELECT id FROM jobs WHERE status = $1 FOR UPDATE SKIP LOCKED")
