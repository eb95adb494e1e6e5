"""QA203 queue-autovacuum-disabled."""

from __future__ import annotations

import time

from qadvisor.model import Finding, Severity
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import apply_fix, assert_quiet, build_archive_queue, check


def test_reloption_and_server_setting() -> None:
    table = S.jobs_table(reloptions={"autovacuum_enabled": "false"})
    (f,) = S.run("QA203", S.snapshot(table))
    assert isinstance(f, Finding) and f.fix is not None
    assert f.fix.statements == ("ALTER TABLE public.jobs RESET (autovacuum_enabled);",)
    out = S.run("QA203", S.snapshot(S.jobs_table(), settings={"autovacuum": "off"}))
    assert [(x.severity, x.target.name) for x in out if isinstance(x, Finding)] == [
        (Severity.CRITICAL, "autovacuum")
    ]


def test_quiet_when_autovacuum_runs() -> None:
    assert_quiet(S.report("QA203", S.snapshot(S.jobs_table())), "QA203")


def test_table_opt_out_found_fixed_and_gone(db: TestDB) -> None:
    build_archive_queue(db, reloptions="autovacuum_enabled = false")
    (f,) = check(db).findings("QA203")
    assert f["key"] == "QA203:public.jobs"
    assert f["evidence"]["autovacuum_enabled"] == "false"
    apply_fix(db, f)
    assert_quiet(check(db), "QA203")


def test_server_wide_off_is_critical_and_fixed_by_alter_system(db: TestDB) -> None:
    build_archive_queue(db, composite=False, partial=True)
    admin = db.execute
    admin("ALTER SYSTEM SET autovacuum = off")
    admin("SELECT pg_reload_conf()")
    try:
        _wait_for_setting(db, "autovacuum", "off")
        run = check(db)
        (f,) = run.findings("QA203")
        assert f["severity"] == "critical" and f["target"]["name"] == "autovacuum"
        assert run.rc == 1
        apply_fix(db, f)
        _wait_for_setting(db, "autovacuum", "on")
        assert_quiet(check(db), "QA203")
    finally:
        admin("ALTER SYSTEM RESET autovacuum")
        admin("SELECT pg_reload_conf()")


def _wait_for_setting(db: TestDB, name: str, value: str, timeout: float = 10) -> None:
    # pg_reload_conf() only signals the postmaster; new sessions see the value a moment later.
    deadline = time.monotonic() + timeout
    while db.execute(f"SHOW {name}")[0][0] != value:
        assert time.monotonic() < deadline, f"{name} did not become {value}"
        time.sleep(0.05)
