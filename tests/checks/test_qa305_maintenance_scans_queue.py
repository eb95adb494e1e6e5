"""QA305 maintenance-scans-queue: a reaper run by the application on a real server, seen in
pg_stat_statements, judged on its cost (not as a claim), fixed with the printed partial index;
a workers registry cleaned with SKIP LOCKED is no queue."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.conftest import TestDB
from tests.helpers import Pathology, Run, assert_quiet, check, record_afresh
from tests.narrow import present
from tests.shapes import Shape

FINISHED = 150_000
CLAIM = (
    "UPDATE jobs SET state = 'executing', attempted_at = now(), attempt = attempt + 1 "
    "WHERE id = (SELECT id FROM jobs WHERE state = 'available' ORDER BY id LIMIT 1 "
    "FOR UPDATE SKIP LOCKED) RETURNING id"
)
# An orphan reaper: jobs left 'executing' by a worker that died go back to 'available', or to
# 'discarded' when they have no attempt left.
REAPER = (
    "UPDATE jobs SET state = CASE WHEN attempt >= max_attempts THEN 'discarded' "
    "ELSE 'available' END WHERE id IN (SELECT id FROM jobs WHERE state = 'executing' "
    "AND attempted_at < now() - interval '30 minutes' FOR UPDATE SKIP LOCKED)"
)
REAPER_RUNS = 6


def _build(shape: Shape) -> None:
    build_reaper_queue(shape.db)


def build_reaper_queue(db: TestDB) -> None:
    """A jobs table of finished rows with a claim's partial index and a few orphans."""
    db.execute(
        f"""
        CREATE TABLE jobs (
            id bigserial PRIMARY KEY,
            state text NOT NULL,
            attempt int NOT NULL DEFAULT 0,
            max_attempts int NOT NULL DEFAULT 3,
            attempted_at timestamptz,
            payload text NOT NULL DEFAULT repeat('x', 60)
        );
        INSERT INTO jobs (state, attempt, attempted_at)
        SELECT 'completed', 1, now() - interval '10 days' + g * interval '1 second'
          FROM generate_series(1, {FINISHED}) AS g;
        INSERT INTO jobs (state, attempted_at)
        SELECT 'available', NULL FROM generate_series(1, 200);
        INSERT INTO jobs (state, attempt, attempted_at)
        SELECT 'executing', 1, now() - interval '2 hours' FROM generate_series(1, 5);
        CREATE INDEX jobs_available_id_idx ON jobs (id) WHERE state = 'available';
        """
    )
    db.execute("VACUUM ANALYZE jobs")


def _run_the_application(shape: Shape) -> None:
    run_the_application(shape.dba, shape.db)


def run_the_application(dba: TestDB, db: TestDB) -> None:
    """The claim and the reaper as the application runs them, recorded afresh."""
    dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    dba.execute("SELECT pg_stat_statements_reset()")
    with db.connect() as conn:
        for _ in range(5):
            conn.execute(CLAIM)
        for _ in range(REAPER_RUNS):
            conn.execute(REAPER)


def reaper_file(tmp_path: Path) -> str:
    path = tmp_path / "reaper.sql"
    path.write_text(f"-- the lifeline, as the application's code has it\n{REAPER};\n")
    return str(path)


def _reaper_findings(report: dict[str, object], code: str) -> list[dict[str, object]]:
    return [
        f
        for f in report["findings"]  # type: ignore[attr-defined]
        if f["code"] == code and "CASE WHEN attempt" in f["evidence"]["statement_text"]
    ]


def test_a_reaper_that_scans_the_table_found_with_its_numbers_fixed_and_gone(
    shape: Shape, tmp_path: Path
) -> None:
    _build(shape)
    _run_the_application(shape)
    pages = int(shape.db.execute("SELECT relpages FROM pg_class WHERE relname = 'jobs'")[0][0])
    assert pages > 1024

    args = ("--query-file", reaper_file(tmp_path))
    report = shape.check(*args).report
    (m,) = [s for s in report["maintenance"] if "CASE WHEN attempt" in s["statement"]]
    assert m["kind"] == "reaper" and m["queue"] == shape.queue and m["calls"] == REAPER_RUNS
    # Not a claim: no claim check judges it, and its 'executing' is no live value.
    assert _reaper_findings(report, "QA301") == [] and _reaper_findings(report, "QA302") == []
    (queue,) = [q for q in report["queues"] if f"{q['schema']}.{q['table']}" == shape.queue]
    assert queue["live_predicate"] == "state = 'available'"

    (f,) = report_findings = [x for x in report["findings"] if x["code"] == "QA305"]
    assert report_findings
    ev = f["evidence"]
    assert ev["calls"] == REAPER_RUNS and ev["table_pages"] == pages
    assert ev["shared_blks_per_call"] >= 0.5 * pages and ev["mean_exec_ms"] > 0
    assert ev["maintenance_kind"] == "reaper"
    assert ev["age_conditions"] and "attempted_at <" in ev["age_conditions"][0]
    assert f"{REAPER_RUNS} calls" in f["message"] and "whole table" in f["message"]
    (step,) = f["fix"]["steps"]
    assert step["sql"].startswith("CREATE INDEX CONCURRENTLY jobs_executing_attempted_at_idx ON")
    assert step["sql"].endswith("(attempted_at) WHERE state = 'executing';")

    shape.apply_fix(f)  # exactly as printed
    # The reaper now reads the few rows in 'executing' (its old counters stay recorded).
    plan = shape.db.execute("EXPLAIN (FORMAT JSON) " + REAPER)[0][0][0]["Plan"]
    assert "jobs_executing_attempted_at_idx" in str(plan)
    assert_quiet(shape.check(*args), "QA305", shape.queue)


def test_a_reaper_seen_only_in_pg_stat_statements_gets_a_placeholder_never_a_guess(
    shape: Shape,
) -> None:
    _build(shape)
    _run_the_application(shape)
    report = shape.check().report
    (f,) = [x for x in report["findings"] if x["code"] == "QA305"]
    # The state is only $n in pg_stat_statements: no runnable statement with a guessed value.
    assert f["fix"]["steps"] == [] and f["fix"]["statements"] == []
    notes = f["fix"]["notes"]
    assert "<the value the application binds to $" in notes and "does not guess" in notes
    assert "'executing'" not in notes and "'available'" not in notes
    assert _reaper_findings(report, "QA301") == []


def test_quiet_on_a_healthy_queue_whose_reaper_has_its_partial_index(shape: Shape) -> None:
    _build(shape)
    shape.db.execute(
        "CREATE INDEX jobs_executing_attempted_at_idx ON jobs (attempted_at) "
        "WHERE state = 'executing'"
    )
    _run_the_application(shape)
    report = shape.check().report
    (m,) = [s for s in report["maintenance"] if "CASE WHEN attempt" in s["statement"]]
    assert m["shared_blks_per_call"] < 100  # judged on what it read: a few index pages
    assert_quiet(shape.check(), "QA305", shape.queue)


@pytest.mark.judges("QA305", "QA301")
def test_a_workers_registry_cleaned_with_skip_locked_is_no_queue(shape: Shape) -> None:
    _build(shape)
    shape.db.execute(
        "CREATE TABLE workers (id bigserial PRIMARY KEY, name text NOT NULL, "
        "last_heartbeat timestamptz NOT NULL DEFAULT now());"
        "INSERT INTO workers (name, last_heartbeat) SELECT 'w' || g, now() - g * "
        "interval '1 minute' FROM generate_series(1, 50) AS g; ANALYZE workers"
    )
    shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    shape.dba.execute("SELECT pg_stat_statements_reset()")
    with shape.db.connect() as conn:
        for _ in range(5):
            conn.execute(CLAIM)
        for _ in range(3):
            conn.execute(
                "DELETE FROM workers WHERE id IN (SELECT id FROM workers WHERE last_heartbeat"
                " < now() - interval '10 minutes' FOR UPDATE SKIP LOCKED)"
            )
    report = shape.check().report
    workers = f"{shape.schema}.workers"
    assert workers not in {f"{q['schema']}.{q['table']}" for q in report["queues"]}
    assert [s for s in report["skipped"] if s["queue"] == workers] == []
    (left,) = [o for o in report["left_out"] if o["queue"] == workers]
    assert "maintenance statement" in left["reason"] and "pruner" in left["reason"]
    # The queue itself is judged as before.
    assert_quiet(report_run := shape.check(), "QA305", shape.queue)
    assert report_run.report["maintenance"] == []


# A queue whose hourly clean-up takes no row lock: it deletes the jobs completed, failed or
# cancelled more than 30 days ago, each state dated by its own column, the bounds bound by the
# driver (Sidequest's shape). The claim's partial index is the only one besides the key.
PURGE = "DELETE FROM jobs WHERE completed_at < %s OR failed_at < %s OR canceled_at < %s"
PURGE_COLUMNS = ("completed_at", "failed_at", "canceled_at")
PURGE_CLAIM = (
    "UPDATE jobs SET status = 'claimed', attempted_at = now() WHERE id IN (SELECT id FROM jobs "
    "WHERE status = %s AND available_at <= now() ORDER BY priority DESC, available_at "
    "LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id"
)
PURGE_RUNS = 6


def build_purged_queue(db: TestDB, *, indexed: bool = False) -> None:
    """29 days of finished jobs (each state dated by its own column), a day's worth past the
    30 days the clean-up keeps, and the waiting jobs."""
    db.execute(
        f"""
        CREATE TABLE jobs (
            id bigserial PRIMARY KEY,
            status text NOT NULL DEFAULT 'waiting',
            priority int NOT NULL DEFAULT 0,
            available_at timestamptz NOT NULL DEFAULT now(),
            attempted_at timestamptz,
            completed_at timestamptz,
            failed_at timestamptz,
            canceled_at timestamptz,
            payload text NOT NULL DEFAULT repeat('x', 60)
        );
        INSERT INTO jobs (status, attempted_at, completed_at)
        SELECT 'completed', t, t FROM (SELECT now() - interval '31 days'
               + g * interval '1 second' * (31 * 86400 / {FINISHED}) AS t
          FROM generate_series(1, {FINISHED}) AS g) s;
        INSERT INTO jobs (status, attempted_at, failed_at)
        SELECT 'failed', t, t FROM (SELECT now() - interval '31 days' + g * interval '1 hour'
          AS t FROM generate_series(1, 700) AS g) s;
        INSERT INTO jobs (status, canceled_at)
        SELECT 'canceled', now() - interval '31 days' + g * interval '2 hours'
          FROM generate_series(1, 350) AS g;
        INSERT INTO jobs (status) SELECT 'waiting' FROM generate_series(1, 500);
        CREATE INDEX jobs_waiting_priority_available_at_idx ON jobs (priority DESC,
            available_at) WHERE status = 'waiting';
        """
    )
    if indexed:
        for column in PURGE_COLUMNS:
            db.execute(f"CREATE INDEX ON jobs ({column}) WHERE {column} IS NOT NULL")
    db.execute("VACUUM ANALYZE jobs")


def run_the_purging_application(dba: TestDB, db: TestDB) -> None:
    """The claim and the clean-up as the application sends them, the values bound by the
    driver, recorded afresh."""
    record_afresh(dba)
    with db.connect() as conn:
        for _ in range(5):
            conn.execute(PURGE_CLAIM, ("waiting", 1))
        for _ in range(PURGE_RUNS):
            conn.execute(
                PURGE,
                [present(conn.execute("SELECT now() - interval '30 days'").fetchone())[0]] * 3,
            )


def _purge_counters(dba: TestDB) -> tuple[int, float]:
    (row,) = dba.execute(
        "SELECT calls, shared_blks_hit + shared_blks_read FROM pg_stat_statements "
        "WHERE query LIKE 'DELETE FROM jobs WHERE completed_at < $1 OR%'"
    )
    return int(row[0]), float(row[1]) / int(row[0])


def test_a_purge_without_a_row_lock_that_reads_the_whole_table_found_fixed_and_gone(
    shape: Shape, tmp_path: Path
) -> None:
    build_purged_queue(shape.db)
    run_the_purging_application(shape.dba, shape.db)
    pages = int(shape.db.execute("SELECT relpages FROM pg_class WHERE relname = 'jobs'")[0][0])
    calls, before = _purge_counters(shape.dba)
    assert calls == PURGE_RUNS and before >= 0.9 * pages > 1024  # a Seq Scan every run

    report = shape.check().report
    (m,) = [s for s in report["maintenance"] if s["statement"].startswith("DELETE FROM jobs")]
    assert m["kind"] == "pruner" and m["queue"] == shape.queue and m["calls"] == PURGE_RUNS
    (f,) = [x for x in report["findings"] if x["code"] == "QA305"]
    ev = f["evidence"]
    assert ev["calls"] == PURGE_RUNS and ev["table_pages"] == pages
    assert ev["shared_blks_per_call"] == pytest.approx(before, abs=1)
    assert ev["age_conditions"] == ["completed_at < $1 OR failed_at < $2 OR canceled_at < $3"]
    # One index per arm of the OR, each on the rows where its column is set, each naming the
    # statement it serves (the arm it serves).
    steps = f["fix"]["steps"]
    assert [s["sql"] for s in steps] == [
        f"CREATE INDEX CONCURRENTLY jobs_{c}_idx ON {shape.queue} ({c}) WHERE {c} IS NOT NULL;"
        for c in PURGE_COLUMNS
    ]
    for step, column in zip(steps, PURGE_COLUMNS, strict=True):
        assert f"(the arm {column} < $" in step["note"] and "pg_stat_statements" in step["note"]
    assert "BitmapOr" in f["fix"]["notes"]
    # Given in the application's SQL file, it is the file's statement, at its line, with the
    # counters pg_stat_statements has for it.
    sql_file = tmp_path / "cleanup.sql"
    sql_file.write_text("-- hourly\n" + PURGE.replace("%s", "$1", 1).replace("%s", "$2", 1)
                        .replace("%s", "$3") + ";\n")  # fmt: skip
    (g,) = shape.check("--query-file", str(sql_file)).findings("QA305")
    assert g["evidence"]["statement"] == f"{sql_file}:2" and g["evidence"]["calls"] == PURGE_RUNS

    shape.apply_fix(f)  # exactly as printed
    # The clean-up as the application sends it reads the few rows that aged since, through
    # the three indexes, not the table.
    shape.db.execute(
        "INSERT INTO jobs (status, completed_at) SELECT 'completed', now() - interval "
        "'31 days' FROM generate_series(1, 20)"
    )
    run_the_purging_application(shape.dba, shape.db)
    calls, after = _purge_counters(shape.dba)
    assert calls == PURGE_RUNS and after < 0.01 * pages, (before, after)
    cut = "now() - interval '30 days'"
    plan = shape.db.execute(f"EXPLAIN (FORMAT JSON) {PURGE % (cut, cut, cut)}")[0][0][0]["Plan"]
    assert "BitmapOr" in str(plan)
    assert all(f"jobs_{c}_idx" in str(plan) for c in PURGE_COLUMNS)
    assert_quiet(shape.check(), "QA305", shape.queue)


def test_quiet_on_a_purge_without_a_row_lock_that_has_its_indexes(shape: Shape) -> None:
    build_purged_queue(shape.db, indexed=True)
    # It ran before: what it keeps removing each run is the few rows that aged since.
    shape.db.execute(PURGE % (("now() - interval '30 days'",) * 3))
    run_the_purging_application(shape.dba, shape.db)
    pages = int(shape.db.execute("SELECT relpages FROM pg_class WHERE relname = 'jobs'")[0][0])
    report = shape.check().report
    (m,) = [s for s in report["maintenance"] if s["statement"].startswith("DELETE FROM jobs")]
    # Judged on what it read: the indexes and the pages of the rows it removed last time.
    assert m["shared_blks_per_call"] < 0.1 * pages
    assert_quiet(shape.check(), "QA305", shape.queue)


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_reaper_queue(db)
    run_the_application(db, db)
    with tempfile.TemporaryDirectory() as tmp:
        # The claim as the application wrote it: pg_stat_statements' $n leaves QA301 a
        # rewrite whose values this test does not plan.
        return check(db, "--query-file", reaper_file(Path(tmp)), "--query", CLAIM)


FIX_PATHOLOGIES = {"reaper": Pathology(frozenset({"QA305"}), _fix_pathology)}
