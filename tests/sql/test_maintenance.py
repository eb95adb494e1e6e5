"""Maintenance statements recognised from their text: reapers, pruners and movers are told
from claims by what the text says (they write the table, select rows by age or delete rows
that reach no worker, and choose no next job), never by a library's names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from qadvisor.sql.dequeue import StatementError, analyse, analyse_write
from tests.collect.test_planning_real_text import ENUM_IN_SET, PGQUEUER

TESTS = Path(__file__).resolve().parents[1]

# The motivating reaper as pg_stat_statements records it: every constant is a $n.
REAPER_PGSS = (
    "UPDATE jobs SET state = CASE WHEN attempt >= max_attempts THEN $1 ELSE $2 END "
    "WHERE id IN (SELECT id FROM jobs WHERE state = $3 AND attempted_at < $4 "
    "FOR UPDATE SKIP LOCKED)"
)
MAINTENANCE = {
    "reaper, pg_stat_statements text": (REAPER_PGSS, "reaper", ("attempted_at",)),
    "reaper with literals": (
        "UPDATE jobs SET state = 'available' WHERE id IN (SELECT id FROM jobs WHERE "
        "state = 'executing' AND attempted_at < now() - interval '5 minutes' "
        "FOR UPDATE SKIP LOCKED)",
        "reaper",
        ("attempted_at",),
    ),
    "reaper returning ids, interval as a placeholder": (
        "UPDATE jobs SET state = $1 WHERE id IN (SELECT id FROM jobs WHERE state = $2 AND "
        "heartbeat < NOW() - INTERVAL $3 FOR UPDATE SKIP LOCKED) RETURNING id",
        "reaper",
        ("heartbeat",),
    ),
    "reaper with its lock in a WITH query": (
        "WITH stale AS (SELECT id FROM jobs WHERE status = 'running' AND heartbeat_at <= "
        "clock_timestamp() - make_interval(secs => $1) FOR UPDATE SKIP LOCKED) "
        "UPDATE jobs SET status = 'queued' FROM stale WHERE jobs.id = stale.id",
        "reaper",
        ("heartbeat_at",),
    ),
    "bound on the left": (
        "UPDATE jobs SET state = 'available' WHERE id IN (SELECT id FROM jobs WHERE "
        "now() - interval '1 hour' > attempted_at FOR UPDATE SKIP LOCKED)",
        "reaper",
        ("attempted_at",),
    ),
    "workers registry clean-up": (
        "DELETE FROM workers WHERE id IN (SELECT id FROM workers WHERE last_heartbeat < "
        "now() - $1 * interval '1 second' FOR UPDATE SKIP LOCKED)",
        "pruner",
        ("last_heartbeat",),
    ),
    "batched pruner by state": (
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE status = 'done' LIMIT 1000 "
        "FOR UPDATE SKIP LOCKED)",
        "pruner",
        (),
    ),
    "pruner by rank (pg-boss's instance rows)": (
        "DELETE FROM instance WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER "
        "(ORDER BY started_on DESC) AS n FROM instance) ranked WHERE n > $6 "
        "FOR UPDATE SKIP LOCKED)",
        "pruner",
        (),
    ),
    # chancy's Recovery as pg_stat_statements records it: the jobs whose worker has no fresh
    # heartbeat; the age is the workers table's, reached through the job's taken_by.
    "reaper by its worker's heartbeat (NOT EXISTS a fresh one)": (
        "WITH abandoned AS (SELECT cj.id, cj.claim_id FROM chancy_jobs cj WHERE NOT EXISTS "
        "(SELECT $1 FROM chancy_workers cw WHERE cw.worker_id = cj.taken_by AND cw.last_seen "
        ">= NOW() - $2::interval) AND cj.state = $3 FOR UPDATE OF cj SKIP LOCKED) UPDATE "
        "chancy_jobs cj SET state = $4, taken_by = $5, claim_id = $6, started_at = $7, "
        "max_attempts = max_attempts + $8 FROM abandoned WHERE cj.id = abandoned.id "
        "RETURNING cj.id, abandoned.claim_id",
        "reaper",
        (),
    ),
    "reaper by its worker's heartbeat (EXISTS a stale one), bound first": (
        "UPDATE jobs SET state = 'queued' WHERE id IN (SELECT id FROM jobs j WHERE j.state = "
        "'running' AND EXISTS (SELECT 1 FROM workers w WHERE w.id = j.worker_id AND now() - "
        "interval '1 minute' > w.heartbeat) FOR UPDATE SKIP LOCKED)",
        "reaper",
        (),
    ),
    "mover into an archive table": (
        "WITH moved AS (DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE finished_at "
        "< now() - interval '7 days' FOR UPDATE SKIP LOCKED) RETURNING *), ins AS (INSERT "
        "INTO jobs_archive SELECT * FROM moved RETURNING 1) SELECT count(*) FROM ins",
        "mover",
        ("finished_at",),
    ),
}
CLAIMS = {
    "ordered claim": "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs "
    "WHERE status = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING *",
    # Due by now: a scheduled job's run_at <= now() is what makes it waiting.
    "unordered claim of due jobs": "UPDATE jobs SET status = 'running' WHERE id IN (SELECT id "
    "FROM jobs WHERE status = 'pending' AND run_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED) "
    "RETURNING *",
    "claim of due jobs, all of them, returned": "UPDATE jobs SET status = 'running' WHERE id "
    "IN (SELECT id FROM jobs WHERE status = 'pending' AND run_at <= $1 FOR UPDATE SKIP "
    "LOCKED) RETURNING *",
    "claim that ends with an age condition": "UPDATE jobs SET status = 'running' WHERE id IN "
    "(SELECT id FROM jobs WHERE status = 'pending' AND created_at < now() - interval '1 "
    "minute' LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING *",
    "ordered re-claim of stale jobs": "UPDATE jobs SET status = 'running' WHERE id = (SELECT "
    "id FROM jobs WHERE status = 'running' AND heartbeat < now() - interval '5 minutes' "
    "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING *",
    "delete on claim": "DELETE FROM jobs WHERE id = (SELECT id FROM jobs WHERE status = "
    "'pending' LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING *",
    "a SELECT hands rows to its client": "SELECT id FROM jobs WHERE state = 'executing' AND "
    "attempted_at < now() - interval '1 hour' FOR UPDATE SKIP LOCKED",
    "an UPDATE by state only, two-step claim": "UPDATE jobs SET status = 'running', worker = "
    "$1 WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' LIMIT 10 FOR UPDATE SKIP "
    "LOCKED)",
    "a number is no age": "UPDATE jobs SET status = 'failed' WHERE id IN (SELECT id FROM jobs "
    "WHERE attempts < 5 AND status = 'pending' LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING *",
    "pgqueuer's dequeue with its stale branch": PGQUEUER,
    # Another table's recent rows as a rate limit: ordered and limited, it picks the next job.
    "claim rate-limited by recent runs of its key": "UPDATE jobs SET status = 'running' WHERE "
    "id = (SELECT id FROM jobs j WHERE status = 'pending' AND NOT EXISTS (SELECT 1 FROM runs r "
    "WHERE r.key = j.key AND r.started_at > now() - interval '1 minute') ORDER BY id LIMIT 1 "
    "FOR UPDATE SKIP LOCKED) RETURNING *",
    # A sub-select about no row of the queue (a global pause) is the same for every job.
    "claim under a global pause": "UPDATE jobs SET status = 'running' WHERE id IN (SELECT id "
    "FROM jobs WHERE status = 'pending' AND NOT EXISTS (SELECT 1 FROM pauses p WHERE "
    "p.started_at > now() - interval '1 minute') FOR UPDATE SKIP LOCKED) RETURNING *",
    # The worker's heartbeat is fresh: the jobs of live workers, not of dead ones.
    "claim of the jobs of live workers": "UPDATE jobs SET status = 'running' WHERE id IN "
    "(SELECT id FROM jobs j WHERE status = 'assigned' AND EXISTS (SELECT 1 FROM workers w "
    "WHERE w.id = j.worker_id AND w.heartbeat > now() - interval '1 minute') FOR UPDATE SKIP "
    "LOCKED) RETURNING *",
    "enum literals as parameters": ENUM_IN_SET,
}


@pytest.mark.parametrize("name", sorted(MAINTENANCE))
def test_maintenance_is_recognised_from_its_text(name: str) -> None:
    sql, kind, age_columns = MAINTENANCE[name]
    parsed = analyse(sql)
    assert parsed is not None and parsed.maintenance is not None, name
    assert parsed.maintenance.kind == kind
    assert parsed.maintenance.age_columns == age_columns
    assert parsed.maintenance.reason
    assert parsed.maintenance.description.startswith(kind)


@pytest.mark.parametrize("name", sorted(CLAIMS))
def test_claims_are_not_maintenance(name: str) -> None:
    parsed = analyse(CLAIMS[name])
    assert parsed is not None and parsed.maintenance is None, name


def test_the_reaper_keeps_its_state_condition_apart_from_its_age() -> None:
    parsed = analyse(REAPER_PGSS)
    assert parsed is not None and parsed.maintenance is not None
    m = parsed.maintenance
    assert m.age == ("attempted_at < $4",) and m.conditions == ("state = $3",)
    assert (m.action, m.returns, m.limited) == ("reset", False, False)
    assert m.description == "reaper (resets rows by age: attempted_at < $4)"


def test_a_reaper_by_another_rows_age_names_that_condition() -> None:
    parsed = analyse(MAINTENANCE["reaper by its worker's heartbeat (NOT EXISTS a fresh one)"][0])
    assert parsed is not None and parsed.maintenance is not None
    m = parsed.maintenance
    assert m.conditions == ("cj.state = $3",) and m.age_columns == ()
    assert len(m.age) == 1 and m.age[0].startswith("NOT EXISTS(") and "last_seen >=" in m.age[0]
    assert (m.action, m.returns, m.limited) == ("reset", True, False)
    assert "refer to" in m.reason


def _locking_texts() -> list[tuple[str, str]]:
    """Every string constant of the test suite that locks rows (the claims the other tests
    judge), with the file it is in."""
    found: dict[str, str] = {}
    for path in sorted(TESTS.rglob("*.py")):
        if path.name in (Path(__file__).name, "test_qa305_maintenance_scans_queue.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                low = node.value.lower()
                if " for update" in low or " for no key update" in low or " for share" in low:
                    found.setdefault(node.value, str(path.relative_to(TESTS)))
    return sorted(found.items(), key=lambda item: item[1])


# Statements of the suite that are maintenance, with why (the rest are claims or locks).
KNOWN_MAINTENANCE = {"DELETE FROM instance WHERE id IN": "pg-boss's clean-up of instance rows"}


def test_no_statement_of_the_suite_changes_from_claim_to_maintenance() -> None:
    texts = _locking_texts()
    assert len(texts) > 50  # the sweep found the suite's statements
    recognised = []
    for text, where in texts:
        try:
            parsed = analyse(text)
        except StatementError:
            continue
        if parsed is None or parsed.maintenance is None:
            continue
        if not any(text.startswith(k) for k in KNOWN_MAINTENANCE):
            recognised.append(f"{where}: {' '.join(text.split())[:120]}")
    assert recognised == []


# UPDATEs and DELETEs without a locking clause: (text, kind, age columns, the columns of an OR
# of ages). Their row locks are the write's own; what makes them maintenance is the same.
UNLOCKED = {
    # Sidequest's hourly clean-up as pg_stat_statements records it (Knex binds the bounds).
    "purge by any of three ages": (
        "DELETE FROM sidequest_jobs WHERE completed_at < $1 OR failed_at < $2 OR canceled_at < $3",
        "pruner",
        ("completed_at", "failed_at", "canceled_at"),
        ("completed_at", "failed_at", "canceled_at"),
    ),
    "purge by state and age, literals": (
        "DELETE FROM jobs WHERE state = 'completed' AND finished_at < now() - interval '7 days'",
        "pruner",
        ("finished_at",),
        (),
    ),
    "purge by state alone": ("DELETE FROM jobs WHERE state = $1", "pruner", (), ()),
    "reaper resetting stale rows, returning their ids": (
        "UPDATE jobs SET state = $1 WHERE state = $2 AND heartbeat < now() - interval "
        "'5 minutes' RETURNING id",
        "reaper",
        ("heartbeat",),
        (),
    ),
    "batched purge through a sub-select of the same table": (
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE finished_at < now() - "
        "interval '7 days' LIMIT 1000)",
        "pruner",
        ("finished_at",),
        (),
    ),
    "purge by an OR of ages under a state": (
        "DELETE FROM jobs WHERE state = $1 AND (completed_at < $2 OR failed_at <= $3)",
        "pruner",
        ("completed_at", "failed_at"),
        ("completed_at", "failed_at"),
    ),
}
NOT_MAINTENANCE = {
    "a heartbeat of one worker's jobs, no age": "UPDATE jobs SET heartbeat = now() WHERE "
    "worker_id = $1",
    "an UPDATE by state that returns its rows, no age": "UPDATE jobs SET state = $1 WHERE "
    "state = $2 RETURNING id",
    "an unlocked claim of the next job": "UPDATE jobs SET state = 'running' WHERE id = "
    "(SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1) RETURNING *",
    "a claim of due jobs that returns them": "UPDATE jobs SET state = 'running' WHERE state = "
    "'queued' AND run_at <= now() RETURNING *",
    "a DELETE of every row": "DELETE FROM jobs",
    "a row-locking purge (analyse reads it)": "DELETE FROM jobs WHERE id IN (SELECT id FROM "
    "jobs WHERE finished_at < now() - interval '7 days' FOR UPDATE SKIP LOCKED)",
    "a SELECT": "SELECT count(*) FROM jobs WHERE finished_at < $1",
}


@pytest.mark.parametrize("name", sorted(UNLOCKED))
def test_unlocked_maintenance_is_recognised_from_its_text(name: str) -> None:
    sql, kind, age_columns, age_any = UNLOCKED[name]
    assert analyse(sql) is None  # no locking clause: no claim
    parsed = analyse_write(sql)
    assert parsed is not None and parsed.maintenance is not None, name
    assert not parsed.locking_clause and parsed.lock.wait_policy is None
    m = parsed.maintenance
    assert (m.kind, m.age_columns, m.age_any) == (kind, age_columns, age_any)
    assert m.description.startswith(kind)


@pytest.mark.parametrize("name", sorted(NOT_MAINTENANCE))
def test_unlocked_writes_that_are_not_maintenance(name: str) -> None:
    assert analyse_write(NOT_MAINTENANCE[name]) is None, name


def test_the_purge_by_three_ages_is_one_age_condition_of_three_columns() -> None:
    parsed = analyse_write(UNLOCKED["purge by any of three ages"][0])
    assert parsed is not None and parsed.maintenance is not None
    m = parsed.maintenance
    assert m.age == ("completed_at < $1 OR failed_at < $2 OR canceled_at < $3",)
    assert m.conditions == () and m.reason == "it selects rows by age and returns none of them"
    assert parsed.lock.strength == "update" and parsed.table == "sidequest_jobs"
