"""A hot standby is recognised: the report says it is one, judges what the replayed catalog
tells (indexes, sizes, plans of a --query claim), skips what only the primary's own activity
tells (counters, the vacuum horizon, pg_stat_statements' claims) with that reason, and marks
every fix as one to run on the primary. Built on a real streaming standby of a real primary."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from qadvisor.demo.pgserver import LocalServer, _chown, _grant_traverse, _run, start_server
from qadvisor.engine import ON_THE_PRIMARY
from tests.conftest import TestDB
from tests.helpers import build_archive_queue, check

pytestmark = pytest.mark.server

CLAIM = (
    "SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)
STANDBY = "this server is a standby (in recovery)"


@pytest.fixture
def pair(pg_server: LocalServer, tmp_path: Path) -> Iterator[tuple[TestDB, TestDB]]:
    """A fresh primary with a queue that autovacuum never cleans, and its streaming standby
    (pg_basebackup -R), caught up; each as a TestDB of database ``postgres``."""
    primary = start_server(pg_server.bin_dir, tmp_path / "primary")
    try:
        db = TestDB("postgres", primary)
        db.execute("CREATE EXTENSION pg_stat_statements")
        build_archive_queue(db, reloptions="autovacuum_enabled = off")
        # Dead tuples the primary counts and a standby never sees in its own counters.
        db.execute("UPDATE jobs SET finished_at = now() WHERE id <= 20000")
        for _ in range(3):
            db.execute(CLAIM)
        base = tmp_path / "standby"
        base.mkdir()
        _chown(primary.os_user, base)
        _grant_traverse(base, primary.os_user)
        argv: list[str | Path] = [
            primary.bin_dir / "pg_basebackup", "-D", base / "data", "-R", "-X", "stream",
            "-h", primary.socket_dir, "-p", str(primary.port), "-U", "postgres", "--no-sync",
            "-c", "fast",
        ]  # fmt: skip
        code, output = _run(argv, user=primary.os_user, cwd=base, timeout=120)
        assert code == 0, output
        standby = start_server(
            pg_server.bin_dir, base, initdb=False, settings={"hot_standby": "on"}
        )
        try:
            replica = TestDB("postgres", standby)
            (lsn,) = db.execute("SELECT pg_current_wal_lsn()")[0]
            deadline = time.monotonic() + 60
            while replica.execute("SELECT pg_last_wal_replay_lsn() >= %s", [lsn]) != [(True,)]:
                assert time.monotonic() < deadline, "the standby did not catch up"
                time.sleep(0.1)
            yield db, replica
        finally:
            standby.stop()
    finally:
        primary.stop()


def test_a_standby_is_named_and_judges_only_what_it_can_know(
    pair: tuple[TestDB, TestDB],
) -> None:
    primary, standby = pair
    assert standby.execute("SELECT pg_is_in_recovery()") == [(True,)]
    on_primary = check(primary).report
    assert on_primary["server"]["is_standby"] is False
    assert {"QA101", "QA203"} <= {f["code"] for f in on_primary["findings"]}
    # The primary counts the dead tuples QA203 states; the standby's own counters hold none.
    (qa203,) = [f for f in on_primary["findings"] if f["code"] == "QA203"]
    assert qa203["evidence"]["n_dead_tup"] >= 20_000

    report = check(standby).report
    assert report["server"]["is_standby"] is True
    codes = {f["code"] for f in report["findings"]}
    # The catalog is the primary's: the archive-bloated index is there to see.
    assert "QA101" in codes
    # What only the primary's activity tells is a skip that says why, never a number of the
    # standby's own.
    assert "QA203" not in codes
    skips = {(s["code"], s["reason"].split(":")[0]) for s in report["skipped"]}
    for code in ("QA201", "QA203", "QA202"):
        assert (code, STANDBY) in skips, (code, report["skipped"])
    for code in ("QA301", "QA303", "QA501"):
        assert (code, STANDBY) in skips, (code, report["skipped"])
    # Every fix is marked as the primary's to run.
    fixes = [f["fix"] for f in report["findings"] if f.get("fix") and f["fix"]["steps"]]
    assert fixes and all(fix["notes"].startswith(ON_THE_PRIMARY) for fix in fixes)
    # The DROP of the old index cannot be checked against the primary's statements.
    (qa101,) = [f for f in report["findings"] if f["code"] == "QA101"]
    drops = [s for s in qa101["fix"]["steps"] if "DROP INDEX" in s["sql"]]
    assert drops and all(s["kind"] == "review" for s in drops)


def test_a_claim_given_to_a_standby_is_planned_there(pair: tuple[TestDB, TestDB]) -> None:
    _primary, standby = pair
    report = check(standby, "--query", CLAIM).report
    # The statements are known (given), and the plan-based checks judged the claim on the
    # replayed catalog: no skip for the statements, none for a plan that could not be made.
    assert not [s for s in report["skipped"] if s["fact"] == "statements"], report["skipped"]
    assert not [s for s in report["skipped"] if s["reason"].startswith("--query 1")]
    assert {"QA301", "QA303", "QA501"} <= set(report["checks_run"])


def test_a_standby_s_findings_are_proven_on_a_copy_and_what_it_skipped_is_not(
    pair: tuple[TestDB, TestDB],
) -> None:
    # --prove reads nothing more from the checked server than the snapshot: a standby's
    # replayed catalog and statistics are enough to relive the archive-bloated index, and
    # nothing it could not judge (counters, the vacuum trigger) gets a proof or a finding.
    _primary, standby = pair
    report = check(standby, "--prove").report
    assert report["server"]["is_standby"] is True
    by_code = {f["code"]: f for f in report["findings"]}
    assert {"QA201", "QA203"}.isdisjoint(by_code)
    proof = by_code["QA101"]["proof"]
    assert proof["reproduced"] is True and proof["finding_gone"] is True, proof["notes"]
    assert abs(proof["scale"]["rows"] - 400_500) < 5_000
    (index,) = [m for m in proof["measures"] if m["measure"] == "index bytes"]
    assert index["ratio"] >= 10
    # The fix proven is the one printed: still the primary's to run.
    assert by_code["QA101"]["fix"]["notes"].startswith(ON_THE_PRIMARY)
    skips = {(s["code"], s["reason"].split(":")[0]) for s in report["skipped"]}
    assert ("QA201", STANDBY) in skips and ("QA203", STANDBY) in skips
