"""QA204 archive-without-retention."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from qadvisor.model import (
    Column,
    ColumnStats,
    Finding,
    LivePredicate,
    Sample,
    ServerInfo,
    Severity,
    Skip,
    Stakeholder,
    Table,
)
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import (
    PQ_TABLE,
    analyzed,
    assert_quiet,
    build_stale_statistics_queue,
    judged_without_its_value,
    qadvisor,
)
from tests.partitioned import DAILY_CLAIM, MAIL_CLAIM, build_by_queue, build_daily
from tests.shapes import Shape

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
PKEY = S.index("jobs_pkey", ("id",), 8192, is_primary=True, is_unique=True, is_constraint=True)


def table(
    oldest: str | None,
    *,
    column: str = "finished_at",
    reltuples: float = 1_000_000,
    pending_freq: float = 0.01,
    analyzed: datetime | None = NOW,
    indexes: tuple[object, ...] = (PKEY,),
) -> Table:
    base = S.jobs_table(reltuples=reltuples, pending_freq=pending_freq, indexes=indexes)  # type: ignore[arg-type]
    stats = (
        *base.column_stats,
        ColumnStats(column, 0.01, -0.9, 8, lower_bound=oldest),
    )
    counters = replace(base.stats, last_autoanalyze=analyzed.isoformat() if analyzed else None)
    return replace(base, column_stats=stats, stats=counters)


def judged(t: Table) -> list[object]:
    snap = S.snapshot(t)
    server = ServerInfo("18.6", 180006, "app", "monitor", collected_at=NOW.isoformat())
    return S.run("QA204", replace(snap, server=server))


def days_ago(days: float) -> str:
    return (NOW - timedelta(days=days)).strftime("%Y-%m-%d %H:%M:%S.%f")


def test_an_old_unpruned_archive_warns_with_a_key_range_delete() -> None:
    (f,) = judged(table(days_ago(40)))
    assert isinstance(f, Finding) and f.severity == Severity.WARNING
    ev = f.evidence
    assert ev["archive_rows"] == 990_000 and ev["archive_share"] == 0.99
    assert ev["dated_by"] == "finished_at" and ev["dated_by_kind"] == "finish"
    assert ev["oldest_row_age_days"] == 40.0
    assert ev["age_measured_from"] == "the table's last ANALYZE"
    assert "40 days old" in f.message
    assert f.fix is not None and f.fix.statements == ()  # for review only
    (step,) = f.fix.steps
    assert step.kind == "review" and step.in_transaction_block is False
    assert "WHERE id >= _from AND id < _from + 10000" in step.sql
    assert "AND finished_at < now() - interval '7 days';" in step.sql
    assert "COMMIT;" in step.sql


def test_stale_statistics_say_at_least_or_give_info_where_the_bound_cannot_confirm() -> None:
    # 10,000 waiting of 1 M at the last ANALYZE, 20,000 rows changed since: the archive is at
    # least what 'done''s share leaves less those 20,000.
    t = table(days_ago(40))
    some = replace(t, stats=replace(t.stats, n_mod_since_analyze=20_000))
    (f,) = judged(some)
    assert isinstance(f, Finding) and f.severity == Severity.WARNING
    assert f.evidence["archive_rows_at_least"] is True and f.evidence["archive_rows"] == 970_000
    assert "keeps its finished rows: at least 970,000 of" in f.message
    # As many rows changed since as a pruner would have deleted: the bound says nothing, and
    # only the statistics' older count says the archive is large: info, saying why.
    pruned = replace(t, stats=replace(t.stats, n_mod_since_analyze=980_000))
    (f,) = judged(pruned)
    assert isinstance(f, Finding) and f.severity == Severity.INFO
    assert "archive_rows_at_least" not in f.evidence and f.evidence["archive_rows"] == 990_000
    assert f.evidence["live_rows_stale"].startswith("980,000 rows were inserted, updated or")


def test_with_sample_the_evidence_gives_the_archive_s_growth() -> None:
    t = table(days_ago(40))
    (f,) = judged(t)
    assert isinstance(f, Finding) and f.evidence["rows_added_per_day"] is None
    later = replace(t.stats, n_tup_ins=t.stats.n_tup_ins + 3_000, n_tup_del=t.stats.n_tup_del + 600)
    snap = S.snapshot(t, sample=Sample(60.0, {"public.jobs": later}))
    server = ServerInfo("18.6", 180006, "app", "monitor", collected_at=NOW.isoformat())
    (f,) = S.run("QA204", replace(snap, server=server))
    assert isinstance(f, Finding)
    assert f.evidence["rows_added_per_day"] == (3_000 - 600) / 60 * 86400


def test_the_age_is_measured_at_the_last_analyze_not_now() -> None:
    # 10 days old today, but only 5 days old when ANALYZE last read the table: a pruner may
    # have run since; the statistics cannot say it has not.
    assert judged(table(days_ago(10), analyzed=NOW - timedelta(days=5))) == []
    (f,) = judged(table(days_ago(10), analyzed=None))
    assert isinstance(f, Finding)
    assert str(f.evidence["age_measured_from"]).startswith("when this report was collected")


def test_a_pruned_archive_is_quiet_even_a_day_past_its_retention() -> None:
    assert judged(table(days_ago(3))) == []
    assert judged(table(days_ago(8))) == []  # a daily pruner that keeps 7 days
    (f,) = judged(table(days_ago(9)))
    assert isinstance(f, Finding) and f.severity == Severity.WARNING


def test_a_mostly_live_or_small_table_is_quiet_whatever_its_age() -> None:
    assert judged(table(days_ago(40), pending_freq=0.8)) == []  # rows deleted on completion
    assert judged(table(days_ago(40), reltuples=5_000)) == []
    # Too small to hold such an archive: judged without a live set.
    small = table(days_ago(40), reltuples=5_000)
    snap = replace(S.snapshot(small, live=None), server=ServerInfo("18.6", 180006, "a", "m"))
    assert S.run("QA204", snap) == []


def test_an_archive_near_its_size_threshold_is_info() -> None:
    # 10,500 rows outside the live set: within the margin of 10,000.
    (f,) = judged(table(days_ago(40), reltuples=21_000, pending_freq=0.5))
    assert isinstance(f, Finding) and f.severity == Severity.INFO


def test_a_creation_timestamp_dates_any_row_and_leaves_a_placeholder() -> None:
    t = table(days_ago(40), column="created_at")
    t = replace(t, columns=tuple(c for c in t.columns if c.name != "finished_at"))
    undated = [s for s in t.column_stats if s.column == "created_at" and s.lower_bound is None]
    t = replace(t, column_stats=tuple(s for s in t.column_stats if s not in undated))
    (f,) = judged(t)
    assert isinstance(f, Finding) and f.severity == Severity.INFO
    assert f.evidence["dated_by_kind"] == "creation" and "row (of any state)" in f.message
    assert f.fix is not None
    assert "<condition true only for finished rows>" in f.fix.steps[0].sql


def test_without_an_integer_key_batches_take_old_rows_by_ctid() -> None:
    (f,) = judged(table(days_ago(40), indexes=()))
    assert isinstance(f, Finding) and f.fix is not None
    sql = f.fix.steps[0].sql
    assert "WHERE (ctid) IN (SELECT ctid FROM public.jobs" in sql
    assert "LIMIT 10000 FOR UPDATE SKIP LOCKED" in sql and "EXIT WHEN _deleted = 0;" in sql


def test_what_cannot_be_dated_is_a_skip() -> None:
    (s,) = judged(table("-infinity"))
    assert isinstance(s, Skip) and "not a date" in s.reason
    (s,) = judged(table(None))
    assert isinstance(s, Skip) and "ANALYZE saw no value" in s.reason
    undated = table(days_ago(40))
    undated = replace(
        undated,
        columns=(Column("id", "bigint", True), Column("status", "text", True)),
    )
    (s,) = judged(undated)
    assert isinstance(s, Skip) and "no finish or creation timestamp" in s.reason
    # Without a live predicate, the status's finished common values still bound the archive
    # (at least 'done''s share of the rows); without them, the live set is unknown.
    unlive = table(days_ago(40))
    snap = replace(S.snapshot(unlive, live=None), server=ServerInfo("18.6", 180006, "a", "m"))
    (f,) = S.run("QA204", snap)
    assert isinstance(f, Finding) and f.evidence["archive_rows_at_least"] is True
    no_status = replace(unlive, column_stats=unlive.column_stats[1:])
    assert [c.column for c in no_status.column_stats] == ["created_at", "finished_at"]
    (s,) = S.run("QA204", replace(snap, tables=(no_status,)))
    assert isinstance(s, Skip) and "live set unknown" in s.reason


# --- on real servers --------------------------------------------------------------------------

ROWS = 60_000
PENDING = 2_000


def build(shape: Shape, finished_over_days: int) -> None:
    """A queue that keeps its finished rows, their finish times spread evenly over the last
    ``finished_over_days`` days, and a small live set."""
    shape.db.execute(
        f"""
        CREATE TABLE jobs (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            status      text        NOT NULL DEFAULT 'pending',
            created_at  timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz,
            payload     text
        );
        CREATE INDEX jobs_pending ON jobs (created_at) WHERE status = 'pending';
        INSERT INTO jobs (status, created_at, finished_at, payload)
        SELECT 'done', t - interval '1 minute', t, repeat('x', 40)
          FROM (SELECT now() - (g::float8 / {ROWS - PENDING}) * interval '{finished_over_days}
                days' AS t
                  FROM generate_series(1, {ROWS - PENDING}) AS g) AS s
         ORDER BY t;
        INSERT INTO jobs (payload) SELECT 'new' FROM generate_series(1, {PENDING});
        """
    )
    analyzed(shape.db, "jobs")


def test_an_unpruned_archive_is_found_pruned_as_printed_and_gone(shape: Shape) -> None:
    build(shape, finished_over_days=60)
    run = shape.check()
    found = run.findings("QA204")
    assert len(found) == 1, [s for s in run.report["skipped"] if s["code"] == "QA204"]
    (f,) = found
    ev = f["evidence"]
    assert f["severity"] == "warning", f["message"]
    assert ev["dated_by"] == "finished_at"
    assert 55 < ev["oldest_row_age_days"] <= 60.1
    assert abs(ev["archive_rows"] - (ROWS - PENDING)) < 0.1 * ROWS
    before = shape.dba.execute("SELECT count(*) FROM " + shape.queue)[0][0]
    shape.apply_fix(f, review=True)
    left = shape.dba.execute(
        f"SELECT count(*), count(*) FILTER (WHERE status = 'pending'), "
        f"max(now() - finished_at) < interval '7 days' FROM {shape.queue}"
    )
    # About 7 of the 60 days are kept, and no job waiting to be claimed is deleted.
    ((count, pending, within),) = left
    assert pending == PENDING and within
    assert count < before * 0.2
    shape.dba.execute(f"ANALYZE {shape.queue}")
    assert_quiet(shape.check(), "QA204", shape.queue)


def test_an_archive_dated_by_the_live_predicate_s_timestamp_is_pruned_as_printed(
    shape: Shape,
) -> None:
    # pq's table (its create.sql): a job waits while dequeued_at IS NULL, no status, no
    # finish-named column, and nothing deletes a job once taken. 58,000 taken over 60 days.
    shape.db.execute(PQ_TABLE)
    shape.db.execute(
        f"""
        INSERT INTO jobs (enqueued_at, dequeued_at, q_name, data)
        SELECT t - interval '1 minute', t, 'jobs', '{{}}'
          FROM (SELECT now() - (g::float8 / {ROWS - PENDING}) * interval '60 days' AS t
                  FROM generate_series(1, {ROWS - PENDING}) AS g) AS s
         ORDER BY t;
        INSERT INTO jobs (q_name, data) SELECT 'jobs', '{{}}' FROM generate_series(1, {PENDING});
        """
    )
    analyzed(shape.db, "jobs")
    claim = (
        "SELECT * FROM jobs WHERE q_name = 'jobs' AND dequeued_at IS NULL "
        "ORDER BY schedule_at NULLS FIRST, expected_at NULLS LAST, id "
        "FOR UPDATE SKIP LOCKED LIMIT 1"
    )
    run = shape.check("--query", claim)
    (queue,) = [q for q in run.report["queues"] if f"{q['schema']}.{q['table']}" == shape.queue]
    assert queue["live_predicate"] == "dequeued_at IS NULL"
    (f,) = run.findings("QA204")
    ev = f["evidence"]
    assert f["severity"] == "warning", f["message"]
    assert ev["dated_by"] == "dequeued_at" and ev["dated_by_kind"] == "finish"
    assert 55 < ev["oldest_row_age_days"] <= 60.1
    (step,) = f["fix"]["steps"]
    assert step["kind"] == "review"
    assert "AND dequeued_at < now() - interval '7 days';" in step["sql"]
    assert "<condition" not in step["sql"]
    before = shape.dba.execute(f"SELECT count(*) FROM {shape.queue}")[0][0]
    shape.apply_fix(f, review=True)
    ((count, waiting, within),) = shape.dba.execute(
        "SELECT count(*), count(*) FILTER (WHERE dequeued_at IS NULL), "
        f"max(now() - dequeued_at) < interval '7 days' FROM {shape.queue}"
    )
    # About 7 of the 60 days are kept, and no waiting job is deleted.
    assert waiting == PENDING and within
    assert count < before * 0.2
    shape.dba.execute(f"ANALYZE {shape.queue}")
    assert_quiet(shape.check("--query", claim), "QA204", shape.queue)


def build_epoch(db: TestDB) -> None:
    """DBOS's way: times are epoch milliseconds in bigint columns; 58,000 workflows
    completed over 60 days, 2,000 waiting."""
    db.execute(
        f"""
        CREATE TABLE jobs (
            id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            status       text   NOT NULL DEFAULT 'ENQUEUED',
            created_at   bigint NOT NULL DEFAULT (extract(epoch FROM now()) * 1000)::bigint,
            completed_at bigint
        );
        CREATE INDEX jobs_in_flight ON jobs (created_at) WHERE status = 'ENQUEUED';
        INSERT INTO jobs (status, created_at, completed_at)
        SELECT 'SUCCESS', t - 60000, t
          FROM (SELECT (extract(epoch FROM now() - (g::float8 / {ROWS - PENDING})
                                                 * interval '60 days') * 1000)::bigint AS t
                  FROM generate_series(1, {ROWS - PENDING}) AS g) AS s
         ORDER BY t;
        INSERT INTO jobs (status) SELECT 'ENQUEUED' FROM generate_series(1, {PENDING});
        """
    )
    analyzed(db, "jobs")


def test_an_archive_dated_in_epoch_milliseconds_is_pruned_as_printed(shape: Shape) -> None:
    build_epoch(shape.db)
    run = shape.check()
    (f,) = run.findings("QA204")
    ev = f["evidence"]
    assert f["severity"] == "warning", f["message"]
    assert ev["dated_by"] == "completed_at" and ev["dated_by_kind"] == "finish"
    assert 55 < ev["oldest_row_age_days"] <= 60.1
    (step,) = f["fix"]["steps"]
    assert (
        "completed_at < (extract(epoch FROM now() - interval '7 days') * 1000)::bigint"
        in (step["sql"])
    )
    before = shape.dba.execute(f"SELECT count(*) FROM {shape.queue}")[0][0]
    shape.apply_fix(f, review=True)
    ((count, waiting, oldest_days),) = shape.dba.execute(
        "SELECT count(*), count(*) FILTER (WHERE status = 'ENQUEUED'), "
        "(extract(epoch FROM now()) * 1000 - min(completed_at)) / 86400000.0 "
        f"FROM {shape.queue}"
    )
    # About 7 of the 60 days are kept, and no waiting job is deleted.
    assert waiting == PENDING and oldest_days < 7
    assert count < before * 0.2
    shape.dba.execute(f"ANALYZE {shape.queue}")
    assert_quiet(shape.check(), "QA204", shape.queue)


def test_a_pruned_archive_is_quiet(shape: Shape) -> None:
    build(shape, finished_over_days=5)
    assert_quiet(shape.check(), "QA204", shape.queue)


def test_a_queue_that_deletes_on_completion_is_quiet(shape: Shape) -> None:
    # Most finished rows gone and a larger backlog: a third of the table is archive.
    build(shape, finished_over_days=60)
    shape.db.execute(
        "DELETE FROM jobs WHERE status = 'done' AND id % 10 <> 0; "
        "INSERT INTO jobs (payload) SELECT 'new' FROM generate_series(1, 10000)"
    )
    analyzed(shape.db, "jobs")
    assert_quiet(shape.check(), "QA204", shape.queue)


@contextlib.contextmanager
def status_only_monitor(db: TestDB) -> Iterator[str]:
    """The DSN of a pg_monitor role that may read the queue's status column alone."""
    db.execute("DROP ROLE IF EXISTS qa204_monitor")
    db.execute("CREATE ROLE qa204_monitor LOGIN IN ROLE pg_monitor")
    db.execute("GRANT SELECT (status) ON jobs TO qa204_monitor")
    try:
        yield db.server.dsn(db.name, user="qa204_monitor")
    finally:
        db.execute("DROP OWNED BY qa204_monitor; DROP ROLE qa204_monitor")


def test_a_role_that_may_not_read_the_finish_time_gets_a_skip_naming_its_grant(
    db: TestDB,
) -> None:
    build(Shape("public-superuser", db, db, db, "public", None, None, ()), finished_over_days=60)
    with status_only_monitor(db) as dsn:
        run = qadvisor("check", dsn, "--format", "json")
        assert run.rc in (0, 1), run.stderr
        assert not [f for f in run.report["findings"] if f["code"] == "QA204"]
        (skip,) = [s for s in run.report["skipped"] if s["code"] == "QA204"]
        assert skip["fact"] == "archive_age"
        assert skip["grants"] == ["GRANT SELECT (finished_at) ON public.jobs TO qa204_monitor;"]
        db.execute("GRANT SELECT (finished_at) ON jobs TO qa204_monitor")
        run = qadvisor("check", dsn, "--format", "json")
        assert [f["code"] for f in run.report["findings"]].count("QA204") == 1


def test_a_role_that_may_not_read_an_epoch_time_gets_a_skip_naming_its_grant(
    db: TestDB,
) -> None:
    # Whether an integer holds epoch time is read from its statistics, which pg_stats shows
    # only to a role that may read the column: the skip names that GRANT, not a missing
    # timestamp.
    build_epoch(db)
    with status_only_monitor(db) as dsn:
        run = qadvisor("check", dsn, "--format", "json")
        assert run.rc in (0, 1), run.stderr
        (skip,) = [s for s in run.report["skipped"] if s["code"] == "QA204"]
        assert skip["fact"] == "archive_age", skip
        assert skip["grants"] == [
            "GRANT SELECT (completed_at, created_at) ON public.jobs TO qa204_monitor;"
        ]
        db.execute("GRANT SELECT (completed_at, created_at) ON jobs TO qa204_monitor")
        run = qadvisor("check", dsn, "--format", "json")
        (f,) = [f for f in run.report["findings"] if f["code"] == "QA204"]
        assert f["evidence"]["dated_by"] == "completed_at"


def test_a_database_whose_datestyle_is_not_iso_is_dated_all_the_same(db: TestDB) -> None:
    build(Shape("public-superuser", db, db, db, "public", None, None, ()), finished_over_days=60)
    db.execute(f"ALTER DATABASE {db.name} SET DateStyle = 'SQL, DMY'")
    db.execute(f"ALTER DATABASE {db.name} SET TimeZone = 'Asia/Kolkata'")
    # psycopg reads timestamps in ISO form only: qadvisor's session prints them so.
    run = qadvisor("check", db.dsn, "--format", "json")
    assert run.rc == 1 and run.stderr == "", run.stderr
    (f,) = [f for f in run.report["findings"] if f["code"] == "QA204"]
    assert 55 < f["evidence"]["oldest_row_age_days"] <= 60.1, f["evidence"]


def test_the_timestamp_the_live_predicate_waits_on_dates_the_finished_rows() -> None:
    # pq's table: no status and no finish-named column; a job waits while dequeued_at IS NULL
    # and is kept once the claim sets it. dequeued_at, not enqueued_at, dates the archive.
    t = table(days_ago(40), column="dequeued_at")
    columns = [c for c in t.columns if c.name not in ("finished_at", "status")]
    t = replace(t, columns=(*columns, Column("enqueued_at", "timestamp with time zone", True),
                            Column("dequeued_at", "timestamp with time zone", False)))  # fmt: skip
    stats = [s for s in t.column_stats if s.column != "finished_at"]
    # dequeued_at NULL for the 1 % that wait; enqueued_at older (every row has one).
    t = replace(t, column_stats=(*stats, ColumnStats("enqueued_at", 0.0, -1.0, 8,
                                                     lower_bound=days_ago(41))))  # fmt: skip
    live = LivePredicate("dequeued_at", "is null", source="claim")
    found = S.run("QA204", replace(S.snapshot(t, live=live), server=ServerInfo(
        "18.6", 180006, "app", "monitor", collected_at=NOW.isoformat())))  # fmt: skip
    (f,) = found
    assert isinstance(f, Finding) and f.severity == Severity.WARNING, found
    assert f.evidence["dated_by"] == "dequeued_at" and f.evidence["dated_by_kind"] == "finish"
    assert f.evidence["dated_by_from"] == (
        "the live predicate is dequeued_at IS NULL: it is set when a row leaves the live set"
    )
    assert round(f.evidence["oldest_row_age_days"]) == 40
    assert f.fix is not None
    (step,) = f.fix.steps
    assert "AND dequeued_at < now() - interval '7 days';" in step.sql
    assert "<condition" not in step.sql
    assert step.note is not None and step.note.startswith(
        "dequeued_at is set when a row leaves the live set"
    )
    # A finish-named column still comes first.
    named = replace(t, columns=(*t.columns, Column("finished_at", "timestamp with time zone")))
    named = replace(named, column_stats=(*named.column_stats, ColumnStats(
        "finished_at", 0.01, -0.9, 8, lower_bound=days_ago(39))))  # fmt: skip
    (f,) = S.run("QA204", replace(S.snapshot(named, live=live), server=ServerInfo(
        "18.6", 180006, "app", "monitor", collected_at=NOW.isoformat())))  # fmt: skip
    assert isinstance(f, Finding) and f.evidence["dated_by"] == "finished_at"


def test_an_integer_of_epoch_milliseconds_dates_the_archive_in_its_own_unit() -> None:
    # DBOS keeps its times as epoch milliseconds in bigint columns (completed_at): the smallest
    # value ANALYZE saw reads as a date in that unit, and the DELETE compares in it.
    ms = str(int((NOW - timedelta(days=40)).timestamp() * 1000))
    t = table(ms, column="completed_at")
    columns = [c for c in t.columns if c.name not in ("finished_at", "created_at")]
    t = replace(t, columns=(*columns, Column("completed_at", "bigint")))
    (f,) = judged(t)
    assert isinstance(f, Finding) and f.severity == Severity.WARNING, f
    assert f.evidence["dated_by"] == "completed_at"
    assert round(f.evidence["oldest_row_age_days"]) == 40
    assert "read as milliseconds since the epoch (bigint)" in str(f.evidence["oldest_row_from"])
    assert f.fix is not None
    assert (
        "AND completed_at < (extract(epoch FROM now() - interval '7 days') * 1000)::bigint;"
        in f.fix.steps[0].sql
    )
    # Seconds read as seconds; a number in neither range (a count, an id) dates nothing.
    seconds = str(int((NOW - timedelta(days=40)).timestamp()))
    (f,) = judged(replace(t, column_stats=tuple(
        replace(s, lower_bound=seconds) if s.column == "completed_at" else s
        for s in t.column_stats)))  # fmt: skip
    assert isinstance(f, Finding) and round(f.evidence["oldest_row_age_days"]) == 40
    assert "(extract(epoch FROM now() - interval '7 days'))::bigint;" in f.fix.steps[0].sql  # type: ignore[union-attr]
    (s,) = judged(replace(t, column_stats=tuple(
        replace(s, lower_bound="1234") if s.column == "completed_at" else s
        for s in t.column_stats)))  # fmt: skip
    assert isinstance(s, Skip) and "no finish or creation timestamp" in s.reason


def test_the_timestamp_an_update_sets_with_the_live_flag_dates_the_rows_that_left() -> None:
    # A broker keeps delivered messages: the delivery sets visible false and timestamp to its
    # time in one UPDATE, and timestamp was the sending time of the waiting ones.
    t = table(days_ago(40), column="timestamp")
    columns = [c for c in t.columns if c.name not in ("finished_at", "created_at", "status")]
    t = replace(t, columns=(*columns, Column("visible", "boolean", False),
                            Column("timestamp", "timestamp without time zone", False)))  # fmt: skip
    flag = ColumnStats("visible", 0.0, 2, 1, ("false", "true"), (0.99, 0.01))
    t = replace(t, column_stats=(*t.column_stats, flag))
    live = LivePredicate("visible", "true", source="claim")
    delivery = Stakeholder(
        "pg_stat_statements 1a2b3c4d5e (300 calls)",
        "UPDATE jobs SET visible=$1, timestamp=$2::timestamp, version=$3 WHERE jobs.id = $4",
        "public.jobs",
        calls=300,
    )
    server = ServerInfo("18.6", 180006, "app", "monitor", collected_at=NOW.isoformat())
    snap = replace(S.snapshot(t, live=live), server=server, stakeholders=(delivery,))
    (f,) = S.run("QA204", snap)
    assert isinstance(f, Finding) and f.severity == Severity.WARNING
    assert f.evidence["dated_by"] == "timestamp" and f.evidence["dated_by_kind"] == "finish"
    assert "sets it with visible" in str(f.evidence["dated_by_from"])
    assert f.fix is not None
    (step,) = f.fix.steps
    assert "AND timestamp < now() - interval '7 days' AND (visible) IS NOT TRUE" in step.sql
    # An update that sets two timestamps with the flag leaves which one dates a row unknown;
    # one that does not set the flag says nothing of the rows that left.
    for text in (
        "UPDATE jobs SET visible=$1, timestamp=$2, started_at=$3 WHERE id = $4",
        "UPDATE jobs SET timestamp=$1 WHERE id = $2",
    ):
        wider = (*t.columns, Column("started_at", "timestamp with time zone", False))
        other = replace(delivery, text=text)
        found = S.run("QA204", replace(snap, tables=(replace(t, columns=wider),),
                                       stakeholders=(other,)))  # fmt: skip
        assert [type(x) for x in found] == [Skip], found


def test_a_timestamp_the_finished_rows_no_longer_hold_dates_nothing() -> None:
    # graphile-worker's claim sets locked_at with the live column's inputs, and a failed job
    # gets it cleared again: ANALYZE sees NULL in every row, so the creation column dates them.
    t = table(days_ago(40))
    columns = [c for c in t.columns if c.name not in ("finished_at", "status")]
    t = replace(t, columns=(*columns, Column("visible", "boolean", False),
                            Column("locked_at", "timestamp with time zone", True)))  # fmt: skip
    flag = ColumnStats("visible", 0.0, 2, 1, ("false", "true"), (0.99, 0.01))
    cleared = ColumnStats("locked_at", 1.0, 0, 8, lower_bound=None)
    created = ColumnStats("created_at", 0.0, -0.9, 8, lower_bound=days_ago(40))
    others = [s for s in t.column_stats if s.column != "created_at"]
    t = replace(t, column_stats=(*others, created, flag, cleared))
    live = LivePredicate("visible", "true", source="claim")
    claim = Stakeholder(
        "pg_stat_statements 1a2b3c4d5e (300 calls)",
        "UPDATE jobs SET visible=$1, locked_at=now() WHERE jobs.id = $2",
        "public.jobs",
        calls=300,
    )
    server = ServerInfo("18.6", 180006, "app", "monitor", collected_at=NOW.isoformat())
    snap = replace(S.snapshot(t, live=live), server=server, stakeholders=(claim,))
    (f,) = S.run("QA204", snap)
    assert isinstance(f, Finding)
    assert f.evidence["dated_by"] == "created_at" and f.evidence["dated_by_kind"] == "creation"


# --- a partitioned queue ----------------------------------------------------------------------


def _partitions(shape: Shape) -> dict[str, int]:
    """The queue table's leaf partitions and how many rows wait in each."""
    rows = shape.dba.execute(
        f"SELECT tableoid::regclass::text, count(*) FILTER (WHERE status = 'pending') "
        f"FROM {shape.queue} GROUP BY 1"
    )
    named = shape.dba.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = %s::regclass",
        [shape.queue],
    )
    waiting = {name.rpartition(".")[2]: n for name, n in rows}
    return {name: waiting.get(name, 0) for (name,) in named}


def test_a_table_partitioned_by_day_drops_its_old_partitions_as_printed(shape: Shape) -> None:
    # 20 days of finished jobs a partition a day, 500 waiting today, and 3,000 older finished
    # rows in the DEFAULT partition (outside every range).
    build_daily(shape.db, days=20, per_day=2_000, waiting=500, default_rows=3_000)
    run = shape.check("--query", DAILY_CLAIM)
    (queue,) = run.report["queues"]
    assert queue["table"] == "jobs"
    (f,) = run.findings("QA204")
    ev = f["evidence"]
    assert f["severity"] == "warning", f["message"]
    assert ev["partitioned_by"] == "created_at" and ev["partitions_kept"] == []
    before = _partitions(shape)
    old = sorted(ev["partitions_to_drop"])
    # The days whose range ended 7 days before the check or earlier: 13 of the 20.
    assert len(old) == 13 and set(old) < set(before) and old[0] == min(before)
    assert "jobs_default" not in old and "13 of its partitions hold only rows" in f["message"]
    assert ev["waiting_rows_judged_by"] == [
        "reltuples of each partition's part of partial index jobs_pending"
    ]
    steps = f["fix"]["steps"]
    assert [s["kind"] for s in steps] == ["review"] * 16 + ["migration"]
    detaches = [s for s in steps if "DETACH PARTITION" in s["sql"]]
    # A DEFAULT partition rules CONCURRENTLY out: the plain form, and its lock, said.
    assert len(detaches) == 13 and all(s["lock"] == "ACCESS EXCLUSIVE" for s in detaches)
    assert all("CONCURRENTLY" not in s["sql"] for s in detaches)
    assert "CONCURRENTLY is not allowed while" in detaches[0]["note"]
    assert steps[-2]["sql"].count(f"DELETE FROM {shape.queue}_default") == 1
    assert steps[-1]["sql"] == f"ANALYZE {shape.queue};"

    shape.apply_fix(f, review=True)
    after = _partitions(shape)
    assert set(after) == set(before) - set(old)
    # Every waiting job is still there; the DEFAULT partition's old rows are gone.
    assert sum(after.values()) == sum(before.values()) == 500
    ((left,),) = shape.dba.execute(f"SELECT count(*) FROM {shape.queue}_default")
    assert left == 0
    assert_quiet(shape.check("--query", DAILY_CLAIM), "QA204", shape.queue)


def test_a_partition_that_holds_waiting_rows_is_never_dropped(shape: Shape) -> None:
    # The oldest day still holds 5 jobs waiting (retried, never claimed since).
    build_daily(shape.db, days=20, per_day=2_000, waiting=500, default=False, old_waiting=5)
    run = shape.check("--query", DAILY_CLAIM)
    (f,) = run.findings("QA204")
    ev = f["evidence"]
    before = _partitions(shape)
    oldest = min(before)
    (kept,) = ev["partitions_kept"]
    assert kept.startswith(f"{oldest}: 5 rows wait in it")
    assert oldest not in ev["partitions_to_drop"] and len(ev["partitions_to_drop"]) == 12
    # No DEFAULT partition: each partition is detached CONCURRENTLY, outside a transaction.
    detaches = [s for s in f["fix"]["steps"] if "DETACH PARTITION" in s["sql"]]
    assert all(s["sql"].endswith(" CONCURRENTLY;") for s in detaches)
    assert all(s["in_transaction_block"] is False for s in detaches)
    assert f"Kept although older than the cutoff: {oldest} (5 rows wait" in f["fix"]["notes"]

    # A job of a partition to drop waits again by the time the fix runs (a retry): the
    # first step stops the script, naming it, and nothing is detached.
    (victim,) = [p for p in sorted(before) if p != oldest][:1]
    shape.dba.execute(
        f"UPDATE {shape.schema}.{victim} SET status = 'pending' "
        f"WHERE id = (SELECT min(id) FROM {shape.schema}.{victim})"
    )
    with pytest.raises(psycopg.errors.RaiseException, match=f"{victim} holds rows waiting"):
        shape.apply_fix(f, review=True)
    assert _partitions(shape) == {**before, victim: 1}
    shape.dba.execute(f"UPDATE {shape.schema}.{victim} SET status = 'done'")

    shape.apply_fix(f, review=True)
    after = _partitions(shape)
    assert oldest in after and after[oldest] == 5 and len(after) == len(before) - 12
    # The finding stays while the oldest partition's jobs wait, and says why.
    (again,) = shape.check("--query", DAILY_CLAIM).findings("QA204")
    assert again["evidence"]["partitions_to_drop"] == []
    assert again["evidence"]["partitions_kept"][0].startswith(f"{oldest}: 5 rows wait in it")


def test_a_table_partitioned_by_queue_is_pruned_through_the_parent(shape: Shape) -> None:
    # A partition per queue, each with 30 days of finished jobs: none can go whole.
    build_by_queue(shape.db, per_queue=20_000, waiting=300)
    run = shape.check("--query", MAIL_CLAIM)
    (f,) = run.findings("QA204")
    assert f["severity"] == "warning", f["message"]
    assert "partitions_to_drop" not in f["evidence"]
    (step,) = f["fix"]["steps"]
    assert f"DELETE FROM {shape.queue}\n" in step["sql"]
    assert "WHERE (queue, id) IN (SELECT queue, id FROM" in step["sql"]
    shape.apply_fix(f, review=True)
    ((count, waiting),) = shape.dba.execute(
        f"SELECT count(*), count(*) FILTER (WHERE status = 'pending') FROM {shape.queue}"
    )
    assert waiting == 900 and count < 0.3 * 60_900
    shape.dba.execute(f"ANALYZE {shape.queue}")
    assert_quiet(shape.check("--query", MAIL_CLAIM), "QA204", shape.queue)


def test_a_partitioned_queue_that_keeps_a_few_days_is_quiet(shape: Shape) -> None:
    build_daily(shape.db, days=5, per_day=4_000, waiting=500)
    assert_quiet(shape.check("--query", DAILY_CLAIM), "QA204", shape.queue)


def test_statistics_that_predate_the_waiting_rows_still_date_the_archive(shape: Shape) -> None:
    # ANALYZE saw only finished jobs (29 days of them); 500 waiting ones arrived since, and
    # nothing the catalog holds names the value the claim waits for. The finished common
    # values still say how much of the table is archive, at least.
    build_stale_statistics_queue(shape.db, shape.dba)
    f = judged_without_its_value(shape.check(), "QA204")
    ev = f["evidence"]
    assert ev["archive_rows_at_least"] is True and ev["archive_rows"] >= 299_000
    assert f["message"].startswith(f"Queue table {shape.queue} keeps its finished rows: at least")
    assert ev["dated_by"] == "finished_at" and 28 < ev["oldest_row_age_days"] <= 29.1
    shape.apply_fix(f, review=True)
    left = shape.dba.execute(
        f"SELECT count(*), count(*) FILTER (WHERE status = 'waiting') FROM {shape.queue}"
    )
    # About 7 of the 29 days are kept, and no waiting job is deleted.
    ((count, waiting),) = left
    assert waiting == 500 and count < 0.3 * 300_000
    shape.dba.execute(f"ANALYZE {shape.queue}")
    assert_quiet(shape.check(), "QA204", shape.queue, live=False)


# Its fixes are review steps only (they end a session or delete rows once the application
# is changed): tests/fixes/test_fix_steps.py runs none of them, this module does.
FIX_REVIEW_ONLY = {"QA204": "runs the batched DELETE as printed"}
