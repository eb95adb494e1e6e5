"""--prove on the seed states built on a real server: the finding comes back on the scratch
copy, goes with the printed fix, and the figures move the way the seeds measured (direction
and rough size, never absolute times). The scratch server is the embedded PostgreSQL 18
whatever the checked server runs; a proof on another version says so."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.checks.test_qa102_dead_entry_bloated_partial_index import churn_partial_index
from tests.checks.test_qa401_round_robin_walks_backlog import (
    FIFO,
    RR_BY_ID,
    build_tenant_queue,
    build_trap,
)
from tests.checks.test_qa403_fifo_noisy_neighbour import EXAMPLE_JOBS
from tests.collect.test_statements_collect import CLAIM, SELECT_CLAIM, build_claim_queue
from tests.conftest import TestDB, flush_stats
from tests.helpers import (
    assert_interrupted_cleanly,
    build_archive_queue,
    check,
    interruptible,
    qadvisor,
    wait_for_line,
)
from tests.shapes import APP_MONITOR, Shape


def proof_of(run_report: dict[str, Any], code: str) -> dict[str, Any]:
    (f,) = [f for f in run_report["findings"] if f["code"] == code]
    assert f["proof"] is not None, f
    proof: dict[str, Any] = f["proof"]
    return proof


def measure(proof: dict[str, Any], what: str) -> dict[str, Any]:
    (m,) = [m for m in proof["measures"] if m["measure"] == what][:1]
    return m


# The archive queue's claim, as a worker sends it.
ARCHIVE_CLAIM = (
    "SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)

# The archive queue is also QA201's seed, whose proof drives churn for half a minute: the tests
# about other proofs leave it out.
NO_VACUUM_PROOF = ("--ignore", "QA201")


def test_archive_index_proven_tens_of_times_smaller_and_gone(db: TestDB) -> None:
    build_archive_queue(db)
    report = check(db, "--prove", *NO_VACUUM_PROOF).report
    proof = proof_of(report, "QA101")
    assert proof["reproduced"] is True and proof["finding_gone"] is True, proof["notes"]
    assert proof["server_version"].startswith("18")
    differs = [n for n in proof["notes"] if n.startswith("measured on PostgreSQL 18")]
    assert bool(differs) == (db.version_num // 10000 != 18)
    assert proof["scale"]["scaled_down"] is False
    assert abs(proof["scale"]["rows"] - 400_500) < 5_000
    index = measure(proof, "index bytes")
    assert index["subject"].startswith("jobs_status_created_at_idx -> ")
    assert "jobs_pending_created_at_idx" in index["subject"]
    assert index["ratio"] >= 10  # the seed: tens of times smaller
    # The other finding with a fix is judged from counters the copy does not have: said so.
    for f in report["findings"]:
        if f["proof"] and not f["proof"]["reproduced"]:
            assert any("not reproduced" in n for n in f["proof"]["notes"])


def test_a_copy_scaled_down_says_so_and_keeps_the_live_set(db: TestDB) -> None:
    build_archive_queue(db)
    run = check(db, "--prove", "--prove-rows", "100000", *NO_VACUUM_PROOF)
    proof = proof_of(run.report, "QA101")
    assert proof["scale"]["scaled_down"] is True and proof["scale"]["rows"] == 100_000
    assert proof["scale"]["table_rows"] > 390_000
    # The live set whole (the snapshot's estimate of 500 rows), the archive shortened.
    assert 200 <= proof["scale"]["live_rows"] <= 800
    # QA101's thresholds are sizes: the 8 MB the index must reach is not reached on a quarter
    # of the rows, and the proof says so instead of claiming the fix.
    assert proof["reproduced"] is False and proof["finding_gone"] is None
    (note,) = [n for n in proof["notes"] if n.startswith("not reproduced")]
    assert "scaled down from" in note and "--prove-rows" in note


def build_forced_generic_claims(db: TestDB) -> None:
    """The claim queue under a database-wide force_generic_plan, its claim run as the
    application runs it: prepared on the server (so the forced generic plan is what runs) and
    recorded by pg_stat_statements."""
    build_claim_queue(db, pgss=True)
    db.execute(f"ALTER DATABASE {db.name} SET plan_cache_mode = force_generic_plan")
    with db.connect() as conn:
        for _ in range(3):
            with conn.transaction():
                conn.execute(CLAIM.replace("$1", "%s"), ["queued"], prepare=True)
        flush_stats(conn)


def test_generic_plan_miss_proven_from_seq_scan_to_the_partial_index(db: TestDB) -> None:
    # The proof holds the copy against the claim's counters in pg_stat_statements.
    build_forced_generic_claims(db)
    report = check(db, "--prove").report
    proof = proof_of(report, "QA301")
    assert proof["reproduced"] is True and proof["finding_gone"] is True, proof["notes"]
    (held,) = [n for n in proof["notes"] if "against the checked server's pg_stat_statements" in n]
    assert held.startswith("pg_stat_statements ") and " shared buffers there, " in held
    # The same generic plan on the same number of rows: the copy reads what production read.
    assert "times apart" not in held, held
    claim = measure(proof, "claim ms")
    # Timed as the application runs it, under the database's forced generic plan.
    assert "jobs_queued_created_at_idx" not in (claim["plan_before"] or "")
    assert "jobs_queued_created_at_idx" in (claim["plan_after"] or "")
    buffers = measure(proof, "shared buffers per claim")
    assert buffers["ratio"] is not None and buffers["ratio"] > 10


@pytest.mark.judges("QA301", reads=("statements",))
@pytest.mark.parametrize("shape", [APP_MONITOR], indirect=True)
def test_a_queue_in_its_own_schema_checked_by_a_monitoring_role_is_proven(shape: Shape) -> None:
    # The queue in schema app behind the application role's search_path, its claim recorded
    # as that role runs it (unqualified, prepared), checked by a pg_monitor role with the
    # documented GRANTs while the application holds a claimed row in an open transaction.
    build_claim_queue(shape.db)
    shape.dba.execute("CREATE EXTENSION pg_stat_statements")
    shape.dba.execute(f"ALTER DATABASE {shape.dba.name} SET plan_cache_mode = force_generic_plan")
    claim = CLAIM.replace("$1", "%s")
    with shape.db.connect() as app, shape.db.connect() as holder:
        for _ in range(3):
            with app.transaction():
                app.execute(claim, ["queued"], prepare=True)
        flush_stats(app)
        with holder.transaction():
            holder.execute(SELECT_CLAIM, ["queued"])
            report = shape.check("--prove").report
    proof = proof_of(report, "QA301")
    assert proof["reproduced"] is True and proof["finding_gone"] is True, proof["notes"]
    claim_ms = measure(proof, "claim ms")
    assert claim_ms["subject"].startswith("pg_stat_statements ")
    assert "jobs_queued_created_at_idx" in (claim_ms["plan_after"] or "")
    assert [n for n in proof["notes"] if "against the checked server's pg_stat_statements" in n]
    # The monitoring role may not plan the UPDATE whole, so the value of its SET (a constant
    # pg_stat_statements hid behind $2) comes from qadvisor's planner on the copy, said.
    (filled,) = [n for n in proof["notes"] if "as qadvisor's planner fills it in" in n]
    assert "run with $2 = " in filled and "lacks UPDATE" in filled


def test_a_saved_snapshot_is_proven_with_no_server_but_the_scratch_one(
    db: TestDB, tmp_path: Path
) -> None:
    build_archive_queue(db)
    saved = tmp_path / "s.json"
    snap = qadvisor("snapshot", db.dsn, "--output", str(saved))
    assert snap.rc == 0, snap.stderr
    direct = proof_of(check(db, "--prove", *NO_VACUUM_PROOF).report, "QA101")
    run = qadvisor(
        "check", "--snapshot", str(saved), "--prove", "--format", "json", *NO_VACUUM_PROOF
    )
    assert run.rc == 1, run.stderr
    offline = proof_of(run.report, "QA101")
    for key in ("reproduced", "finding_gone", "scale", "server_version"):
        assert offline[key] == direct[key]
    assert measure(offline, "index bytes")["subject"] == measure(direct, "index bytes")["subject"]


def test_proving_sends_nothing_more_to_the_checked_server(db: TestDB) -> None:
    build_archive_queue(db)
    db.execute("CREATE EXTENSION pg_stat_statements")
    sent = (
        "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_database d"
        " ON d.oid = s.dbid WHERE d.datname = current_database()"
    )

    def calls_of(*args: str) -> int:
        before = int(db.execute(sent)[0][0])
        check(db, *args)
        return int(db.execute(sent)[0][0]) - before - 1  # less this count's own read

    plain = calls_of(*NO_VACUUM_PROOF)
    assert calls_of("--prove", *NO_VACUUM_PROOF) == plain


def test_round_robin_trap_proven_from_seconds_to_about_a_millisecond(db: TestDB) -> None:
    # The seed: 100,000 queued jobs of one tenant, one each for ten others, 1,000 tenants in
    # the rotation (989 idle), tenant_id's n_distinct as one ANALYZE sample gets it (1): the
    # copy needs the rotation table, and the statistics restored, to walk as production does.
    # The application ran its claim once: qadvisor reads it from pg_stat_statements, with its
    # constants as $n, and what it cost there.
    build_trap(db)
    db.execute("CREATE EXTENSION pg_stat_statements")
    with db.connect() as conn:
        with conn.transaction():
            assert conn.execute(RR_BY_ID).fetchone() is not None
        flush_stats(conn)
    # Each of the claim's runs walks a million buffers: seconds, a minute on a busy machine.
    run = qadvisor("check", db.dsn, "--format", "json", "--prove", "--statement-timeout",
                   "120000", "--run-timeout", "2400", timeout=2_500)  # fmt: skip
    assert run.rc == 1, run.stderr
    proof = proof_of(run.report, "QA401")
    assert proof["reproduced"] is True and proof["finding_gone"] is True, proof["notes"]
    # The copy's claim takes its job, before and after, reading what the server's did.
    (held,) = proof["reproduction"]
    assert held["reproduced"] is True and held["rows_there"] == held["rows_copy"] == 1, held
    claim = measure(proof, "claim ms")
    assert claim["before"] > 100 * claim["after"], claim  # seconds against about a millisecond
    assert claim["change"] == "lower" and claim["ratio"] >= 100
    assert claim["before_spread"][0] > 100 * claim["after_spread"][1]
    assert claim["plan_before"] == "Index Scan using jobs_queued_fifo on jobs"
    assert claim["plan_after"].startswith("Index Scan using jobs_queued_tenant_id_enqueued_at")
    assert not [n for n in proof["notes"] if "took no row" in n], proof["notes"]
    assert measure(proof, "index bytes")["subject"].startswith("none -> ")
    # pg_stat_statements shows the status as $n, so QA301 asks for it as a literal: a rewrite
    # that changes nothing this walk costs. The check falls quiet, and the proof does not call
    # that gone (it read 5,548 -> 5,483 ms, "finding_gone": true).
    same = proof_of(run.report, "QA301")
    assert same["check_quiet"] is True and same["finding_gone"] is False, same["notes"]
    assert [n for n in same["notes"] if n.startswith("not proven gone: the check no longer")]
    buffers = measure(same, "shared buffers per claim")
    assert buffers["before"] > 100_000, same
    # Each run walks the backlog (seconds): on a loaded machine one may pass the copy's 60 s
    # statement timeout, and the proof then says it was not timed.
    assert buffers["change"] == "none" or buffers["after"] is None, same


def test_fifo_noisy_neighbour_quiet_with_the_round_robin_rewrite_but_nothing_measured(
    db: TestDB,
) -> None:
    # QA403's fix is about fairness (which tenant waits), which no figure of a proof measures:
    # the check falls quiet with the round-robin rewrite, and the proof says that nothing
    # it measured changed the way it would have to for "gone".
    build_tenant_queue(db, EXAMPLE_JOBS, tenant_index=None)
    proof = proof_of(check(db, "--query", FIFO, "--prove").report, "QA403")
    assert proof["reproduced"] is True and proof["check_quiet"] is True, proof["notes"]
    assert proof["finding_gone"] is False
    assert [n for n in proof["notes"] if n.startswith("not proven gone: the check no longer")]
    claim = measure(proof, "claim ms")
    # The rewrite takes the claim's place: it reads the rotation table the fix made.
    assert claim["plan_before"].endswith(" on jobs") and claim["plan_after"] is not None


def test_archive_scaled_vacuum_trigger_proven_in_compressed_time(db: TestDB) -> None:
    # The seed: autovacuum's trigger scales with the archive (50 + 0.2 x 400,500 rows), so
    # the dead tuples of claims pile up; the fix gives the table a fixed trigger.
    build_archive_queue(db)
    db.execute("UPDATE jobs SET finished_at = now() WHERE id <= 30000")
    db.wait_for_stats("jobs", lambda r: r["n_dead_tup"] >= 30_000)
    proof = proof_of(check(db, "--query", ARCHIVE_CLAIM, "--prove").report, "QA201")
    assert proof["reproduced"] is True and proof["finding_gone"] is True, proof["notes"]
    runs = measure(proof, "autovacuum runs")
    assert runs["before"] == 0 and runs["after"] >= 1
    dead = measure(proof, "dead tuples at peak")
    assert dead["before"] > dead["after"]
    (driven,) = [n for n in proof["notes"] if n.startswith("driven for")]
    assert "no measured rate (no --sample)" in driven and "autovacuum_naptime = 1s" in driven
    # Not one peak but both copies' readings, from the same start: the 30,000 dead tuples the
    # checked table held, the same churn, each copy's trigger (0.2 x 400,500 + 50 without the
    # fix), and the claim timed beside them.
    series = {s["copy"]: s for s in proof["series"]}
    assert sorted(series) == ["with the fix", "without the fix"], proof["series"]
    without, fixed = series["without the fix"], series["with the fix"]
    start = without["points"][0]
    assert start["seconds"] == 0 and 29_000 <= start["dead_tuples"] < 31_000, start
    assert fixed["points"][0]["dead_tuples"] == start["dead_tuples"], fixed["points"][0]
    assert without["dead_per_s"] == fixed["dead_per_s"] > 0
    assert abs(without["trigger"] - 80_150) < 1_000 and fixed["trigger"] < without["trigger"]
    for s in (without, fixed):
        seconds = [p["seconds"] for p in s["points"]]
        assert seconds == sorted(seconds) and seconds[-1] >= 10, seconds
        assert max(p["dead_tuples"] for p in s["points"]) <= dead["before"]
        timed = [p["claim_ms"] for p in s["points"] if p["claim_ms"] is not None]
        assert len(timed) >= 5 and all(ms > 0 for ms in timed), s["points"]
    assert {p["autovacuum_runs"] for p in without["points"]} == {0}
    assert fixed["points"][-1]["autovacuum_runs"] == runs["after"]


@pytest.mark.parametrize(
    ("signum", "times"),
    [(signal.SIGINT, 1), (signal.SIGTERM, 1), (signal.SIGINT, 2)],
    ids=["ctrl-c", "term", "ctrl-c-twice"],
)
def test_an_interrupted_proof_leaves_no_server_and_no_files(
    db: TestDB, tmp_path: Path, signum: int, times: int
) -> None:
    build_archive_queue(db)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with interruptible("check", db.dsn, "--prove", "--format", "json", scratch=scratch) as proc:
        assert proc.stderr is not None
        wait_for_line(proc, "building a copy")
        assert list(scratch.iterdir()), "the scratch server's files are not under TMPDIR"
        proc.send_signal(signum)
        if times == 2:
            # The impatient user's second Ctrl-C, while the scratch server is being stopped:
            # it must not cut the cleanup short.
            for line in proc.stderr:
                if "stopping the scratch server" in line:
                    proc.send_signal(signum)
                    break
            else:
                raise AssertionError("the interrupted proof never stopped its scratch server")
        out, err = proc.communicate(timeout=60)
    assert_interrupted_cleanly(proc, out, err, signum, scratch)


def test_a_crafted_snapshot_reaches_nothing_past_the_scratch_databases(
    db: TestDB, tmp_path: Path
) -> None:
    # A snapshot is a file someone hands over: its index definitions become SQL on the
    # scratch server. A statement smuggled into one (reading a server file) is refused before
    # anything runs, and the proof says the copy cannot be built.
    build_archive_queue(db)
    saved = tmp_path / "s.json"
    assert qadvisor("snapshot", db.dsn, "--output", str(saved)).rc == 0
    data = json.loads(saved.read_text())
    (jobs,) = [t for t in data["tables"] if t["name"] == "jobs"]
    index = next(i for i in jobs["indexes"] if i["name"] == "jobs_status_created_at_idx")
    index["definition"] += "; CREATE TABLE leaked AS SELECT pg_read_file('PG_VERSION') AS f"
    saved.write_text(json.dumps(data))
    run = qadvisor("check", "--snapshot", str(saved), "--prove", "--format", "json",
                   *NO_VACUUM_PROOF)  # fmt: skip
    assert run.rc == 1, run.stderr
    proof = proof_of(run.report, "QA101")
    assert proof["reproduced"] is False and proof["finding_gone"] is None
    (note,) = proof["notes"]
    assert "cannot be built" in note and "jobs_status_created_at_idx" in note
    assert "is not what the catalog prints: refused" in note


def test_dead_entry_bloated_partial_index_relived_on_the_copy_and_reindexed(db: TestDB) -> None:
    # The seed: 40 rounds of 5,000 claims through the live set with autovacuum off leave the
    # partial index on 500 live rows at megabytes of dead entries. A fresh copy has none, so
    # it churns its live set until the index has the measured size; the REINDEX then shrinks it.
    build_archive_queue(db, archive=50_000, composite=False, partial=True,
                        reloptions="autovacuum_enabled = false")  # fmt: skip
    churn_partial_index(db, rounds=40, batch=5_000)
    db.execute("ANALYZE jobs")
    proof = proof_of(check(db, "--prove", *NO_VACUUM_PROOF).report, "QA102")
    assert proof["reproduced"] is True and proof["finding_gone"] is True, proof["notes"]
    index = measure(proof, "index bytes")
    assert index["subject"] == "jobs_pending_created_at -> jobs_pending_created_at"
    assert index["ratio"] >= 10


def test_a_fix_with_a_part_only_the_dba_can_write_is_not_run_and_says_so(db: TestDB) -> None:
    # Jobs dated only by created_at: QA204's retention must also say which rows are finished,
    # which qadvisor leaves to the DBA rather than guess; the proof must not run it half-written.
    db.execute(
        """
        CREATE TABLE jobs (
            id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            status     text        NOT NULL DEFAULT 'pending',
            created_at timestamptz NOT NULL DEFAULT now()
        );
        INSERT INTO jobs (status, created_at)
        SELECT 'done', now() - interval '30 days' + g * interval '1 second'
          FROM generate_series(1, 200000) AS g;
        INSERT INTO jobs (status) SELECT 'pending' FROM generate_series(1, 500);
        CREATE INDEX jobs_pending ON jobs (created_at) WHERE status = 'pending';
        ANALYZE jobs
        """
    )
    run = check(db, "--prove", "--ignore", "QA201")
    (f,) = run.findings("QA204")
    assert "<condition true only for finished rows>" in f["fix"]["steps"][0]["sql"]
    proof = f["proof"]
    assert proof["finding_gone"] is None, proof["notes"]
    (said,) = [n for n in proof["notes"] if n.startswith("not proven: the fix has a part")]
    assert "(<condition true only for finished rows>)" in said, said


def test_an_archive_as_old_as_the_checked_one_proves_the_retention(db: TestDB) -> None:
    # 400,000 finished jobs over 30 days: the copy's timestamps reach back as far as the
    # checked table's oldest (pg_stats), so QA204's archive age comes back on it, and the
    # printed retention (a batched DELETE of rows finished over 7 days ago) makes it go.
    build_archive_queue(db)
    proof = proof_of(check(db, "--prove", *NO_VACUUM_PROOF).report, "QA204")
    assert proof["reproduced"] is True and proof["finding_gone"] is True, proof["notes"]
    assert "the fix changes rows: the copy was vacuumed and analyzed after it" in " ".join(
        proof["notes"]
    )
