"""The corpus judges live predicates by meaning: the evaluator must tell right from wrong."""

from __future__ import annotations

import pytest

from tests.corpus.expect import Live, LiveRows
from tests.corpus.library import Observed, autoanalyzed_instead, stale_tables
from tests.helpers import Run

PGBOSS = Live("state", frozenset({"created", "retry"}),
              ("created", "retry", "active", "completed", "cancelled", "failed"))  # fmt: skip
PROCRASTINATE = Live("status", frozenset({"todo"}), ("todo", "doing", "succeeded", "failed"))
DJANGO = Live("status", frozenset({"READY"}))  # varchar: no labels, only the values named
FINISHED_AT = Live("finished_at", frozenset())  # IS NULL
AVAILABLE = Live("is_available", frozenset({"true"}), ("true", "false"))  # a boolean flag
EVERY_ROW = Live.every_row()  # a claim with no condition: a job's row is deleted when claimed


@pytest.mark.parametrize(
    ("live", "printed", "right"),
    [
        (PGBOSS, "state < 'active'", True),
        (PGBOSS, "state IN ('created', 'retry')", True),
        (PGBOSS, "j.state < 'active'::pgboss.job_state AND NOT j.blocked", True),
        (PGBOSS, "(state = 'created' OR state = 'retry') AND start_after <= now()", True),
        (PGBOSS, "state = 'created'", False),
        (PGBOSS, "state <= 'active'", False),
        (PGBOSS, "state = ANY ('{created,retry,active,failed}')", False),
        (PGBOSS, "state = ANY ('{created,retry}')", True),
        (
            PGBOSS,
            "state = ANY (ARRAY['created'::pgboss.job_state, 'retry'::pgboss.job_state])",
            True,
        ),
        (PROCRASTINATE, "status = 'todo'", True),
        (
            PROCRASTINATE,
            "status = 'todo' AND (scheduled_at IS NULL OR scheduled_at <= now())",
            True,
        ),
        (PROCRASTINATE, "status IN ('todo', 'doing')", False),
        (PROCRASTINATE, "status = 'todo' OR status IS NULL", False),
        (DJANGO, "status = 'READY'", True),
        (DJANGO, "status IN ('READY', 'RUNNING')", False),
        (DJANGO, "status <> 'SUCCESSFUL'", False),
        (FINISHED_AT, "finished_at IS NULL", True),
        (FINISHED_AT, "finished_at IS NOT NULL", False),
        (FINISHED_AT, "status = 'pending'", False),
        (AVAILABLE, "is_available = true", True),
        (AVAILABLE, "jobs.is_available = true AND run_at <= now()", True),
        (AVAILABLE, "is_available", True),
        (AVAILABLE, "is_available IS TRUE", True),
        (AVAILABLE, "is_available = false", False),
        (AVAILABLE, "NOT is_available", False),
        (AVAILABLE, "is_available IS NOT TRUE", False),
        (EVERY_ROW, "TRUE", True),
        (EVERY_ROW, "(true)", True),
        (EVERY_ROW, "FALSE", False),
        (EVERY_ROW, "queue_name = 'default'", False),
        (EVERY_ROW, "finished_at IS NULL", False),
        (PGBOSS, "not sql at all (", False),
    ],
)
def test_live_predicate_judged_by_meaning(live: Live, printed: str, right: bool) -> None:
    assert live.admits(printed) is right


# Agenda: waiting (next_run_at set, not locked) or running (locked_at set); the archive has both
# NULL.
WAITING_OR_HELD = LiveRows(
    ("next_run_at", "locked_at"),
    frozenset({("set", None), ("set", "set"), (None, "set")}),
)


@pytest.mark.parametrize(
    ("printed", "right"),
    [
        ("next_run_at IS NOT NULL OR locked_at IS NOT NULL", True),
        ("NOT (next_run_at IS NULL AND locked_at IS NULL)", True),
        ("(locked_at IS NULL AND next_run_at <= $3) OR locked_at <= $4", True),
        (
            "NOT disabled AND ((locked_at IS NULL AND next_run_at <= now()) "
            "OR locked_at <= now() - interval '10 minutes')",
            True,
        ),
        ("next_run_at IS NOT NULL", False),  # misses running one-off jobs
        ("locked_at IS NULL AND next_run_at IS NOT NULL", False),  # misses the stale branch
        ("locked_at IS NULL", False),  # takes the archive
        ("NOT disabled", False),  # cannot be judged over these columns: every row
        ("next_run_at <= locked_at", False),  # two of the columns compared: not judged
    ],
)
def test_live_rows_judged_by_meaning(printed: str, right: bool) -> None:
    assert WAITING_OR_HELD.admits(printed) is right


def _stale_stage(*tables: tuple[str, int, int, int]) -> Observed:
    """A stale stage's snapshot with these queue tables: (name, ANALYZE runs, autoanalyze
    runs, rows changed since the last one)."""
    snapshot = {
        "tables": [
            {
                "schema": "public",
                "name": name,
                "stats": {"analyze_count": manual, "autoanalyze_count": auto,
                          "n_mod_since_analyze": changed},
            }
            for name, manual, auto, changed in tables
        ]
    }  # fmt: skip
    return Observed("lib_stale", Run(0, "", ""), snapshot, {})


def test_a_stale_build_that_autovacuum_analyzed_whole_is_built_again() -> None:
    raced = _stale_stage(("jobs", 0, 1, 3), ("schedules", 0, 0, 0))
    assert stale_tables(raced) == []
    assert autoanalyzed_instead(raced) == ["public.jobs"]


def test_a_stale_build_with_one_stale_table_stands() -> None:
    # One queue table still predates its changes: the stage is what the tier means, whatever
    # autovacuum did to another.
    mixed = _stale_stage(("jobs", 0, 0, 800), ("schedules", 0, 1, 0))
    assert stale_tables(mixed) == ["public.jobs"]
    assert autoanalyzed_instead(mixed) == []


def test_a_stale_build_whose_changes_went_uncounted_is_not_retried_as_a_race() -> None:
    # Nothing analyzed and nothing counted is another fault (the changes were never counted),
    # for the premise test to report, not for another build to hide.
    uncounted = _stale_stage(("jobs", 0, 0, 0))
    assert stale_tables(uncounted) == []
    assert autoanalyzed_instead(uncounted) == []
