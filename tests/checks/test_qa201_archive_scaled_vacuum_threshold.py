"""QA201 archive-scaled-vacuum-threshold."""

from __future__ import annotations

import dataclasses
import threading

import psycopg
import pytest

from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.collect.snapshot import collect
from qadvisor.engine import run_checks
from qadvisor.model import Finding, Sample, Severity, TableStats
from qadvisor.registry import load_checks
from tests import snapshots as S
from tests.conftest import TestDB, flush_stats
from tests.helpers import (
    assert_quiet,
    build_archive_queue,
    build_rare_waiting_queue,
    build_stale_statistics_queue,
    check,
    judged_without_its_value,
)
from tests.partitioned import DAILY_CLAIM, MAIL_CLAIM, build_by_queue, build_daily
from tests.shapes import Shape


def test_measured_case_default_trigger_is_two_million() -> None:
    table = S.jobs_table(stats=TableStats(n_dead_tup=1_753_949, autovacuum_count=0))
    (f,) = S.run("QA201", S.snapshot(table))
    assert isinstance(f, Finding)
    assert f.evidence["vacuum_trigger"] == 2_000_050  # 50 + 0.2 x 10 M
    assert f.evidence["n_dead_tup"] == 1_753_949
    assert f.evidence["live_rows"] == 5_000
    assert f.fix is not None
    # Without a sample: 10x the live set, rounded to a readable number.
    assert f.fix.statements == (
        "ALTER TABLE public.jobs SET (autovacuum_vacuum_scale_factor = 0, "
        "autovacuum_vacuum_threshold = 50000);",
    )


def test_the_fix_says_what_becomes_of_the_dead_tuples_already_there() -> None:
    # 1,753,949 dead tuples against the new threshold of 50,000: autovacuum's next round
    # vacuums the table, no VACUUM needs running by hand.
    (f,) = S.run("QA201", S.snapshot(S.jobs_table()))
    assert isinstance(f, Finding) and f.fix is not None
    assert "1,753,949 dead tuples already there are over it, so that round vacuums" in f.fix.notes
    assert "run VACUUM" not in f.fix.notes
    few = S.jobs_table(stats=TableStats(n_live_tup=10_000_000, n_dead_tup=20_000))
    (f,) = S.run("QA201", S.snapshot(few))
    assert isinstance(f, Finding) and f.fix is not None
    assert "20,000 dead tuples already there stay until 50,000 are reached" in f.fix.notes


def test_max_threshold_caps_the_trigger_on_18() -> None:
    table = S.jobs_table(reltuples=1_000_000_000)
    (f,) = S.run("QA201", S.snapshot(table))
    assert isinstance(f, Finding)
    assert f.evidence["vacuum_trigger"] == 100_000_000


def test_reloptions_override_settings_and_quiet_it() -> None:
    tuned = S.jobs_table(reloptions={"autovacuum_vacuum_scale_factor": "0",
                                     "autovacuum_vacuum_threshold": "50000"})  # fmt: skip
    assert_quiet(S.report("QA201", S.snapshot(tuned)), "QA201")


def test_sample_sizes_the_fix_from_the_rate_and_predicts_the_wait() -> None:
    first = TableStats(n_dead_tup=1_000_000, n_tup_upd=0, n_tup_ins=0)
    # 2,000 claims/s: one update each (pending -> done), 2,000 inserts/s by the producer.
    later = TableStats(n_dead_tup=1_020_000, n_tup_upd=20_000, n_tup_ins=20_000)
    snap = S.snapshot(
        S.jobs_table(stats=first),
        sample=Sample(seconds=10.0, tables={"public.jobs": later}),
    )
    (f,) = S.run("QA201", snap)
    assert isinstance(f, Finding) and f.fix is not None
    assert f.evidence["dead_tuples_per_s"] == 2000.0
    # (2,000,050 - 1,000,000) / (2,000 - 0.2 x 2,000) = 625 s
    assert f.evidence["seconds_to_autovacuum"] == 625
    assert "autovacuum_vacuum_threshold = 50000" in f.fix.statements[0]
    assert (
        "30 s of dead tuples at the measured 2,000 dead tuples/s is 60,000, rounded to 50,000"
        in f.fix.notes
    )
    assert f.severity is Severity.WARNING


def test_trigger_that_recedes_as_fast_as_dead_tuples_grow_is_critical() -> None:
    # 100 dead tuples/s against 0.2 x 1,000 inserts/s: both measured, the trigger wins.
    first = TableStats(n_dead_tup=10, n_tup_upd=0, n_tup_ins=0)
    later = TableStats(n_dead_tup=1010, n_tup_upd=1000, n_tup_ins=10_000)
    snap = S.snapshot(S.jobs_table(stats=first), sample=Sample(10.0, {"public.jobs": later}))
    (f,) = S.run("QA201", snap)
    assert isinstance(f, Finding)
    assert f.severity is Severity.CRITICAL and f.evidence["seconds_to_autovacuum"] is None
    assert "never catches up" in f.message


def test_a_sample_that_saw_no_work_keeps_the_severity_and_says_so() -> None:
    # --sample on a queue with no worker running: nothing changed, so there is no rate.
    idle = TableStats(n_dead_tup=1_753_949, n_tup_upd=500, n_tup_ins=500)
    snap = S.snapshot(S.jobs_table(stats=idle), sample=Sample(4.0, {"public.jobs": idle}))
    (f,) = S.run("QA201", snap)
    assert isinstance(f, Finding) and f.fix is not None
    assert f.severity is Severity.WARNING
    assert "never" not in f.message
    assert "The 4 s sample saw no claims: take it while workers run" in f.message
    assert f.evidence["seconds_to_autovacuum"] is None and f.evidence["sample_dead_tuples"] == 0
    assert "10x the live set" in f.fix.notes  # sized from the live set, not from a zero rate
    # A handful of claims is no rate either.
    few = dataclasses.replace(idle, n_tup_upd=537, n_tup_ins=510)
    snap = S.snapshot(S.jobs_table(stats=idle), sample=Sample(4.0, {"public.jobs": few}))
    (f,) = S.run("QA201", snap)
    assert isinstance(f, Finding) and f.severity is Severity.WARNING
    assert "saw too few claims to measure a rate (37 dead tuples)" in f.message


def test_the_fix_note_says_how_the_threshold_was_rounded() -> None:
    # 5,292 live rows: 10x is 52,920, rounded to the nearest readable 50,000 (9.4x), not up
    # to 100,000 (19x); the note says which figures give the same threshold.
    table = S.jobs_table(pending_freq=5_292 / 10_000_000)
    (f,) = S.run("QA201", S.snapshot(table))
    assert isinstance(f, Finding) and f.fix is not None
    assert f.evidence["live_rows"] == 5_292
    assert "autovacuum_vacuum_threshold = 50000" in f.fix.statements[0]
    assert (
        "10x the live set of 5,292 rows is 52,920, rounded to 50,000 (the nearest of 1, 2 and 5 "
        "times a power of ten: any figure from 31,623 to 70,710 gives it)"
    ) in f.fix.notes


@pytest.mark.parametrize("live", [4_071, 4_351, 5_123, 6_246])
def test_the_live_set_four_analyzes_of_one_table_gave_prints_one_threshold(live: int) -> None:
    # Four ANALYZEs of an unchanged table (about 5,000 jobs waiting among 2 M) estimated
    # 4,071 to 6,246 live rows: every one prints the same fix.
    table = S.jobs_table(reltuples=2_000_000, pending_freq=live / 2_000_000)
    (f,) = S.run("QA201", S.snapshot(table))
    assert isinstance(f, Finding) and f.fix is not None
    assert f.fix.statements == (
        "ALTER TABLE public.jobs SET (autovacuum_vacuum_scale_factor = 0, "
        "autovacuum_vacuum_threshold = 50000);",
    )


@pytest.mark.parametrize(
    ("ratio", "severity"),
    [(9.9, None), (10.5, Severity.INFO), (11.9, Severity.INFO), (12.1, Severity.WARNING)],
)
def test_a_ratio_within_the_margin_of_min_ratio_is_info(
    ratio: float, severity: Severity | None
) -> None:
    # The trigger (2,000,050) against live rows estimated from pg_stats: min_ratio 10, margin
    # 20 %, so 10 to 12 times the live set is info on every run.
    table = S.jobs_table(pending_freq=2_000_050 / ratio / 10_000_000)
    S.assert_margin_answer(
        S.run("QA201", S.snapshot(table)), S.run("QA201", S.snapshot(table)), severity
    )


@pytest.mark.parametrize(("dead_in_10s", "critical"), [(2_500, False), (2_200, True)])
def test_a_sampled_wait_within_the_margin_of_critical_wait_is_not_critical(
    dead_in_10s: int, critical: bool
) -> None:
    # 1,000,050 dead tuples to go: 250/s is 4,000 s, 220/s 4,546 s. critical_wait_s 3,600
    # with a 20 % margin: critical only past 4,320 s.
    first = TableStats(n_dead_tup=1_000_000, n_tup_upd=0, n_tup_ins=0)
    later = TableStats(n_dead_tup=1_000_000 + dead_in_10s, n_tup_upd=dead_in_10s, n_tup_ins=0)
    snap = S.snapshot(S.jobs_table(stats=first), sample=Sample(10.0, {"public.jobs": later}))
    (f,) = S.run("QA201", snap)
    assert isinstance(f, Finding), f
    assert f.evidence["seconds_to_autovacuum"] > 3600
    assert (f.severity is Severity.CRITICAL) is critical, f.message


def test_found_fixed_and_gone(shape: Shape) -> None:
    db = shape.db
    build_archive_queue(db)
    db.execute("UPDATE jobs SET finished_at = now() WHERE id <= 30000")
    db.wait_for_stats("jobs", lambda r: r["n_dead_tup"] >= 30_000)
    run = shape.check()
    assert run.rc == 1
    (f,) = run.findings("QA201")
    ev = f["evidence"]
    assert 80_000 <= ev["vacuum_trigger"] <= 80_300  # 50 + 0.2 x ~400,500
    assert ev["n_dead_tup"] >= 30_000
    assert ev["autovacuum_vacuum_scale_factor"] == 0.2
    assert ev["settings_source"] == "server setting"
    if db.version_num >= 180000:
        assert ev["autovacuum_vacuum_max_threshold"] == 100_000_000
    else:
        assert ev["autovacuum_vacuum_max_threshold"] is None
    shape.apply_fix(f)
    (opts,) = db.execute("SELECT reloptions FROM pg_class WHERE relname = 'jobs'")[0]
    assert "autovacuum_vacuum_scale_factor=0" in opts
    assert_quiet(shape.check(), "QA201", shape.queue)


def test_sample_of_an_idle_queue_is_not_critical(shape: Shape) -> None:
    # A CI gate against an idle staging database: no worker runs while the sample is taken.
    build_archive_queue(shape.db)
    (f,) = shape.check("--sample", "1").findings("QA201")
    assert f["severity"] == "warning", f["message"]
    assert "sample saw no claims: take it while workers run" in f["message"]
    assert f["evidence"]["sample_dead_tuples"] == 0
    assert f["evidence"]["seconds_to_autovacuum"] is None


def test_sample_measures_the_dead_tuple_rate(shape: Shape) -> None:
    db = shape.db
    build_archive_queue(db)
    shape.grant()
    stop = threading.Event()

    def churn() -> None:
        # A steady stream of claims: each update leaves one dead tuple.
        with psycopg.connect(db.dsn, autocommit=True) as conn:
            n = 0
            while not stop.is_set():
                # Cycle through the table: every batch must hit rows, however long it runs.
                first = (n % 2000) * 200 + 1
                conn.execute(
                    "UPDATE jobs SET finished_at = now() WHERE id BETWEEN %s AND %s",
                    (first, first + 199),
                )
                flush_stats(conn)
                n += 1

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        with connect(shape.checker.dsn, SessionLimits()) as conn:
            snap = collect(conn, sample_seconds=3)
    finally:
        stop.set()
        worker.join()
    report = run_checks(snap, [c for c in load_checks() if c.code == "QA201"])
    (f,) = report.findings
    assert f.evidence["dead_tuples_per_s"] > 0
    assert f.evidence["sample_seconds"] >= 3
    assert "30 s of dead tuples" in (f.fix.notes if f.fix else "")


def test_quiet_when_tuned_or_deleted_on_completion(shape: Shape) -> None:
    build_archive_queue(shape.db, reloptions="autovacuum_vacuum_scale_factor = 0, "
                        "autovacuum_vacuum_threshold = 50000")  # fmt: skip
    assert_quiet(shape.check(), "QA201", shape.queue)


def test_quiet_when_rows_are_deleted_on_completion(shape: Shape) -> None:
    # Finished rows are deleted (a few wait for the cleanup): the trigger, 50 + 0.2 x 302,000,
    # is over min_trigger, and it is quiet because it is a fraction of the live set.
    db = shape.db
    build_archive_queue(db, archive=2_000, live=300_000)
    ((reltuples,),) = db.execute("SELECT reltuples FROM pg_class WHERE relname = 'jobs'")
    assert 50 + 0.2 * reltuples > 50_000
    run = shape.check("--table", shape.queue)
    assert run.report["queues"][0]["live_predicate"] == "status = 'pending'"
    assert_quiet(run, "QA201", shape.queue)


def test_a_live_set_from_statistics_older_than_the_backlog_is_said_to_be_stale(
    shape: Shape,
) -> None:
    # Statistics taken with 100 pending jobs; then 2,000 more arrive and a plain VACUUM runs
    # (it refreshes the table's reltuples, not pg_stats, and leaves the partial index's count
    # as the last ANALYZE estimated it, having nothing to remove from it).
    db = shape.db
    build_archive_queue(db, live=100, composite=False, partial=True)
    db.execute("INSERT INTO jobs (status) SELECT 'pending' FROM generate_series(1, 2000)")
    db.execute("VACUUM jobs")
    # Both counts come from other messages to 14's statistics collector: wait for each.
    db.wait_for_stats(
        "jobs", lambda r: r["n_mod_since_analyze"] >= 2000 and r["last_vacuum"] is not None
    )
    (f,) = shape.check().findings("QA201")
    ev = f["evidence"]
    assert ev["live_rows"] < 1000  # the statistics' count, far under the 2,100 there are
    assert ev["live_rows_source"].startswith(
        "reltuples of partial index jobs_pending_created_at, as of the table's last VACUUM"
    )
    assert ev["live_rows_stale"].startswith("2,000 rows were inserted, updated or deleted")
    assert "The live set is an estimate: 2,000 rows were" in f["fix"]["notes"]
    # Judged on at most the ~100 rows not finished at the ANALYZE and the 2,000 since.
    assert 2000 <= ev["live_rows_at_most"] <= 2300, ev["live_rows_at_most_from"]
    assert "at least" in f["message"] and ev["trigger_to_live_ratio"] >= 30

    db.execute("ANALYZE jobs")
    # 14's collector takes the ANALYZE's reset of the count in its own time, and a reader
    # there takes a statistics file up to 500 ms old: wait for the reset.
    db.wait_for_stats(
        "jobs", lambda r: r["n_mod_since_analyze"] == 0 and r["last_analyze"] is not None
    )
    (f,) = shape.check().findings("QA201")
    ev = f["evidence"]
    assert 1000 <= ev["live_rows"] <= 3500 and "live_rows_stale" not in ev
    assert "The live set is an estimate" not in f["fix"]["notes"]


# --- a partitioned queue ----------------------------------------------------------------------


def test_a_partitioned_queue_is_judged_partition_by_partition(shape: Shape) -> None:
    # A partition per queue: "default" keeps 300,000 finished jobs, the others 20,000 each,
    # 300 waiting in each. Autovacuum of jobs_default waits for 50 + 0.2 x 300,300 dead
    # tuples, 200x its live rows; the small partitions' triggers are under 50,000.
    build_by_queue(shape.db, per_queue={"default": 300_000, "mail": 20_000, "reports": 20_000})
    run = shape.check("--query", MAIL_CLAIM)
    (f,) = run.findings("QA201")
    ev = f["evidence"]
    assert f["target"]["table"] == "jobs" and ev["partition"] == "jobs_default"
    # 300 live rows, as ANALYZE estimates them for the partition's part of the index from a
    # sample of 30,000 of its 300,300 rows: about 30 pending ones seen (standard deviation
    # about 5.5, 55 rows); these bounds are 3.6 deviations.
    assert 60_000 <= ev["vacuum_trigger"] <= 60_200 and 100 <= ev["live_rows"] <= 500
    assert [p.split(":")[0] for p in ev["partitions_judged"]] == ["jobs_default"]
    assert len(ev["partitions_taking_writes"]) == 3
    assert "1 of the 3 partitions that take writes wait for the archive" in f["message"]
    # The setting goes on the partition: the partitioned table takes none (18 says so, the
    # majors before it know no such parameter of a partitioned table).
    (step,) = f["fix"]["steps"]
    assert step["sql"].startswith(f"ALTER TABLE {shape.queue}_default SET (")
    assert "takes no storage parameters" in f["fix"]["notes"]
    refused = (psycopg.errors.WrongObjectType, psycopg.errors.InvalidParameterValue)
    with pytest.raises(refused, match=r"partitioned table|unrecognized parameter"):
        shape.apply([step["sql"].replace(f"{shape.queue}_default", shape.queue)])
    shape.apply_fix(f)
    assert_quiet(shape.check("--query", MAIL_CLAIM), "QA201", shape.queue)


def test_a_table_partitioned_by_day_is_not_judged_by_its_whole_archive(shape: Shape) -> None:
    # 300,000 finished rows over 20 days and 500 waiting today: summed, the trigger would be
    # 50 + 0.2 x 300,500, 120x the live set; each partition's is 3,050 at most.
    build_daily(shape.db, days=20, per_day=15_000, waiting=500)
    assert_quiet(shape.check("--query", DAILY_CLAIM), "QA201", shape.queue)


def test_a_waiting_value_only_the_histogram_holds_is_found_fixed_and_gone(shape: Shape) -> None:
    # A Sidequest-shaped queue (a varchar status with no default and no index on it, bound by
    # the driver): pg_stats holds its waiting value in the histogram alone.
    build_rare_waiting_queue(shape.db, shape.dba)
    run = shape.check()
    (queue,) = run.report["queues"]
    assert queue["live_predicate"] == "status = 'waiting'", queue["reason"]
    assert "the pg_stats histogram bounds of status ('waiting'" in queue["reason"]
    (f,) = run.findings("QA201")
    assert f["severity"] == "warning", f["message"]
    assert 60_000 <= f["evidence"]["vacuum_trigger"] <= 60_100  # 50 + 0.2 x 300,000
    assert f["evidence"]["live_rows"] <= 2
    shape.apply_fix(f)
    assert_quiet(shape.check(), "QA201", shape.queue)


def test_statistics_that_predate_the_waiting_rows_judge_on_a_bound(shape: Shape) -> None:
    # ANALYZE saw only finished jobs; 500 waiting ones arrived since. Nothing the catalog
    # holds names the value the claim waits for, but the finished common values say at most
    # how many rows were not finished then, and the 500 rows changed since bound the rest.
    build_stale_statistics_queue(shape.db, shape.dba)
    f = judged_without_its_value(shape.check(), "QA201")
    ev = f["evidence"]
    assert ev["live_rows"] is None
    assert 500 <= ev["live_rows_at_most"] <= 600, ev["live_rows_at_most_from"]
    assert "the finished common values of status (completed" in ev["live_rows_at_most_from"]
    assert ev["trigger_to_live_ratio"] >= 100  # 60,050 / at most ~520
    assert "at least" in f["message"] and "the statistics cannot count them now" in f["message"]
    shape.apply_fix(f)
    # The fixed trigger is under min_trigger: quiet before the live set is weighed.
    assert_quiet(shape.check(), "QA201", shape.queue, live=False)


@pytest.mark.judges("QA201")
def test_analyzing_an_unchanged_table_again_prints_the_same_fix(db: TestDB) -> None:
    # The archive-index seed's shape: 2 M finished jobs and 5,000 waiting. Each ANALYZE
    # samples 30,000 rows and estimates the live set anew (about 75 waiting rows in the
    # sample: a fifth up or down); the printed threshold stays where it is.
    build_archive_queue(db, archive=2_000_000, live=5_000)
    fixes, live = set(), set()
    for _ in range(5):
        db.execute("ANALYZE jobs")
        (f,) = check(db).findings("QA201")
        fixes.add(tuple(f["fix"]["statements"]))
        live.add(f["evidence"]["live_rows"])
    assert len(live) > 1, f"every ANALYZE estimated the same live set ({live}): nothing moved"
    assert fixes == {
        (
            "ALTER TABLE public.jobs SET (autovacuum_vacuum_scale_factor = 0, "
            "autovacuum_vacuum_threshold = 50000);",
        )
    }, sorted(live)


def test_no_threshold_is_proposed_that_would_not_vacuum_sooner() -> None:
    # 200,000 dead tuples/s: 30 s of them is 6,000,000 (5,000,000 as rounded), above today's
    # trigger of 2,000,050 (0.2 x 10 M rows + 50). Setting it would make autovacuum rarer: no
    # step, info.
    first = TableStats(n_dead_tup=0, n_tup_upd=0, n_tup_ins=0)
    later = TableStats(n_dead_tup=2_000_000, n_tup_upd=2_000_000, n_tup_ins=1_000)
    snap = S.snapshot(S.jobs_table(stats=first), sample=Sample(10.0, {"public.jobs": later}))
    (f,) = S.run("QA201", snap)
    assert isinstance(f, Finding) and f.fix is not None
    assert f.severity is Severity.INFO and f.fix.steps == ()
    assert "no lower than the trigger now (2,000,050 dead tuples)" in f.fix.notes
    assert f.evidence["proposed_vacuum_trigger"] == 5_000_000  # sized, not set


def test_a_partition_s_threshold_that_would_not_vacuum_sooner_is_not_set() -> None:
    # A partition per queue; the default one holds 10 M rows (trigger 2,000,050) and its
    # worker makes 200,000 dead tuples/s: 30 s of them, 5,000,000 as rounded, is above its
    # trigger. Set, it would make autovacuum rarer: no step, info.
    first = TableStats(n_dead_tup=10, n_tup_upd=10, n_tup_ins=0)
    later = TableStats(n_dead_tup=2_000_010, n_tup_upd=2_000_010, n_tup_ins=1_000)
    base = S.jobs_table(stats=first)
    part = dataclasses.replace(base, name="jobs_default", partition_of="public.jobs",
                               partition_bound="DEFAULT")  # fmt: skip
    parent = dataclasses.replace(base, partition_key="LIST (queue)", partitions=(part,))
    snap = S.snapshot(parent, sample=Sample(10.0, {"public.jobs_default": later}))
    (f,) = S.run("QA201", snap)
    assert isinstance(f, Finding) and f.fix is not None, f
    assert f.severity is Severity.INFO and f.fix.steps == ()
    assert "jobs_default: threshold 5,000,000" in f.fix.notes
    assert "is no lower than its trigger now (2,000,050): not set" in f.fix.notes
