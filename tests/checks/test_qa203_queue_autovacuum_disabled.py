"""QA203 queue-autovacuum-disabled."""

from __future__ import annotations

import time

import pytest

from qadvisor.model import Finding, Severity
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import Pathology, Run, assert_quiet, build_archive_queue, check
from tests.partitioned import DAILY_CLAIM, MAIL_CLAIM, build_by_queue, build_daily
from tests.shapes import Shape


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


# No claim and no partial index: the table is found by its status values alone, which a
# monitoring role sees only with discovery's GRANT (docs/privileges.md).
@pytest.mark.judges("QA203", reads=("discovery",))
def test_table_opt_out_found_fixed_and_gone(shape: Shape) -> None:
    build_archive_queue(shape.db, reloptions="autovacuum_enabled = false")
    (f,) = shape.check().findings("QA203")
    assert f["key"] == f"QA203:{shape.queue}"
    assert f["evidence"]["autovacuum_enabled"] == "false"
    shape.apply_fix(f)
    assert_quiet(shape.check(), "QA203", shape.queue)


def test_server_wide_off_is_critical_and_fixed_by_alter_system(shape: Shape) -> None:
    db = shape.db
    build_archive_queue(db, composite=False, partial=True)
    admin = shape.dba.execute
    admin("ALTER SYSTEM SET autovacuum = off")
    admin("SELECT pg_reload_conf()")
    try:
        _wait_for_setting(db, "autovacuum", "off")
        run = shape.check()
        (f,) = run.findings("QA203")
        assert f["severity"] == "critical" and f["target"]["name"] == "autovacuum"
        assert run.rc == 1
        shape.apply_fix(f, as_dba=True)
        _wait_for_setting(db, "autovacuum", "on")
        assert_quiet(shape.check(), "QA203", shape.queue)
    finally:
        admin("ALTER SYSTEM RESET autovacuum")
        admin("SELECT pg_reload_conf()")


def _wait_for_setting(db: TestDB, name: str, value: str, timeout: float = 10) -> None:
    # pg_reload_conf() only signals the postmaster; new sessions see the value a moment later.
    deadline = time.monotonic() + timeout
    while db.execute(f"SHOW {name}")[0][0] != value:
        assert time.monotonic() < deadline, f"{name} did not become {value}"
        time.sleep(0.05)


# --- a partitioned queue ----------------------------------------------------------------------


def test_a_partition_that_takes_writes_and_opts_out_is_found_fixed_and_gone(
    shape: Shape,
) -> None:
    # A partition per queue; the mail queue's partition opts out, and its workers write.
    build_by_queue(shape.db, per_queue=5_000, waiting=100)
    shape.db.execute("ALTER TABLE jobs_mail SET (autovacuum_enabled = false)")
    shape.db.execute(
        "UPDATE jobs SET status = 'done', finished_at = now() "
        "WHERE queue = 'mail' AND status = 'pending' AND id % 2 = 0"
    )
    (f,) = shape.check("--query", MAIL_CLAIM).findings("QA203")
    assert f["key"] == f"QA203:{shape.queue}"
    (off,) = f["evidence"]["partitions_autovacuum_disabled"]
    assert off.startswith("jobs_mail: autovacuum_enabled = false")
    (step,) = f["fix"]["steps"]
    assert step["sql"] == f"ALTER TABLE {shape.queue}_mail RESET (autovacuum_enabled);"
    shape.apply_fix(f)
    assert_quiet(shape.check("--query", MAIL_CLAIM), "QA203", shape.queue)


def test_an_old_partition_nothing_writes_may_opt_out(shape: Shape) -> None:
    build_daily(shape.db, days=10, per_day=500, waiting=100)
    ((oldest,),) = shape.db.execute("SELECT 'jobs_' || to_char(current_date - 10, 'YYYYMMDD')")
    shape.db.execute(f"ALTER TABLE {oldest} SET (autovacuum_enabled = false)")
    assert_quiet(shape.check("--query", DAILY_CLAIM), "QA203", shape.queue)


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_archive_queue(db, archive=10_000, reloptions="autovacuum_enabled = false")
    return check(db)


FIX_PATHOLOGIES = {"autovacuum-off": Pathology(frozenset({"QA203"}), _fix_pathology)}
