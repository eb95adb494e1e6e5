"""QA202 vacuum-horizon-held."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from psycopg import IsolationLevel

from qadvisor.model import Finding, HorizonHolder, Severity
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import apply_fix, assert_quiet, build_archive_queue, check


def test_idle_in_transaction_and_inactive_slot() -> None:
    snap = dataclasses.replace(
        S.snapshot(S.jobs_table()),
        horizon=(
            HorizonHolder("transaction", "4242", 120_000, 900.0, "idle in transaction", "report"),
            HorizonHolder("replication slot", "old_standby", 5_000_000, None, "inactive"),
            HorizonHolder("transaction", "77", 3, 2.0, "active", "worker"),
        ),
    )
    found = [f for f in S.run("QA202", snap) if isinstance(f, Finding)]
    assert [(f.target.name, f.severity) for f in found] == [
        ("replication-slot-old_standby", Severity.CRITICAL),
        ("transaction-4242", Severity.WARNING),
    ]
    by_name = {f.target.name: f for f in found}
    fix = by_name["transaction-4242"].fix
    assert fix is not None and fix.statements == ("SELECT pg_terminate_backend(4242);",)
    slot_fix = by_name["replication-slot-old_standby"].fix
    assert slot_fix is not None
    assert slot_fix.statements == ("SELECT pg_drop_replication_slot('old_standby');",)


def test_quiet_without_holders() -> None:
    assert_quiet(S.report("QA202", S.snapshot(S.jobs_table())), "QA202")


def test_open_transaction_found_terminated_and_gone(db: TestDB, tmp_path: Path) -> None:
    build_archive_queue(db, composite=False, partial=True)
    config = tmp_path / "qadvisor.toml"
    # A real holder is minutes old; the test's is a second old, so the age limit is lowered.
    config.write_text("[options.QA202]\nmin_age_s = 0\n")
    holder = db.connect()
    holder.autocommit = False
    # A repeatable-read report keeps its snapshot (backend_xmin) while it sits idle.
    holder.isolation_level = IsolationLevel.REPEATABLE_READ
    holder.execute("SET application_name = 'long_report'")
    holder.execute("SELECT count(*) FROM jobs")
    try:
        (f,) = check(db, "--config", str(config)).findings("QA202")
        assert f["evidence"]["application_name"] == "long_report"
        assert f["evidence"]["state"] == "idle in transaction"
        apply_fix(db, f)
        assert_quiet(check(db, "--config", str(config)), "QA202")
    finally:
        holder.close()


def test_quiet_on_a_queue_without_long_transactions(db: TestDB) -> None:
    build_archive_queue(db, composite=False, partial=True)
    assert_quiet(check(db), "QA202")
