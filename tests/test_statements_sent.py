"""docs/safety.md lists every statement qadvisor sends: the page is generated from
qadvisor.collect.sent, and a full run on real servers (log_statement = all) sends nothing the
list lacks, and everything it lists (but a failed probe's savepoint rollback, and the
generic-plan EXPLAIN before PostgreSQL 16)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from qadvisor.collect.sent import BY_NAME, GROUPS, SENT, matching
from qadvisor.docgen.pages import SAFETY_PAGE, safety_page
from qadvisor.facts import FACTS
from tests.checks.test_qa401_round_robin_walks_backlog import RR_BY_ID, build_tenant_queue
from tests.conftest import TestDB
from tests.full_run import BACKLOG, Logged, build, full_run, logged_runs, logging_role

ROOT = Path(__file__).resolve().parents[1]
# Sent only when a probe fails, or when setting up the session meets another session's lock
# on a system catalog (tests/test_hostile.py), or by a fleet run listing a server's databases
# (tests/fleet); and EXPLAIN (GENERIC_PLAN) exists from PostgreSQL 16.
NOT_SENT_HERE = {"rollback_to_savepoint", "session_catalog_locks", "databases"}
GENERIC_PLAN_VERSION = 160000
MONITOR_GRANTS = ("SELECT, UPDATE ON jobs", "SELECT ON queue_tenants")


def test_the_safety_page_is_generated_from_the_list() -> None:
    page = ROOT / "docs" / SAFETY_PAGE
    assert page.read_text() == safety_page(), (
        "docs/safety.md is stale: run `python -m qadvisor.docgen.pages docs/checks`"
    )


def test_every_collector_sql_file_is_listed_once_and_every_fact_is_read() -> None:
    files = sorted(
        p.name.removesuffix(".sql")
        for p in resources.files("qadvisor.collect").joinpath("sql").iterdir()
        if p.name.endswith(".sql")
    )
    listed = [s.file for s in SENT if s.file is not None]
    assert sorted(listed) == files
    assert len(BY_NAME) == len(SENT)
    assert all(set(s.groups) <= GROUPS.keys() and s.groups for s in SENT)
    read = {f for s in SENT for f in s.facts}
    assert read <= FACTS.keys() and FACTS.keys() <= read, FACTS.keys() ^ read


def test_a_statement_the_list_lacks_matches_nothing() -> None:
    for text in (
        "UPDATE jobs SET status = 'done'",
        "CREATE TABLE qadvisor_x (a int)",
        "SELECT set_config('default_transaction_read_only', 'off', false)",
        "SET plan_cache_mode = force_generic_plan",  # not LOCAL: it would outlive the transaction
        "SELECT name, setting FROM pg_settings WHERE name = ANY($1); DROP TABLE jobs",
        'PREPARE "qadvisor_other" AS select 1',
        "DEALLOCATE ALL",
        "COMMIT PREPARED 'x'",
    ):
        assert matching(text) == [], text
    assert [s.name for s in matching('PREPARE "qadvisor_stmt"(text) AS select $1')] == [
        "plan_prepare"
    ]
    assert [s.name for s in matching('SAVEPOINT "_pg3_2"')] == ["savepoint"]


def _names(runs: list[Logged]) -> dict[str, int]:
    count: dict[str, int] = {}
    for run in runs:
        for text in run.statements:
            for s in matching(text):
                count[s.name] = count.get(s.name, 0) + 1
    return count


def _unlisted(runs: list[Logged]) -> list[tuple[tuple[str, ...], str]]:
    return [(r.args[:1], t) for r in runs for t in r.statements if not matching(t)]


def test_a_full_run_sends_only_what_the_page_lists_and_all_of_it(
    db: TestDB, tmp_path: Path
) -> None:
    build(db)
    runs = full_run(db, tmp_path)
    assert not _unlisted(runs), "sent but not listed in qadvisor/collect/sent.py:\n" + "\n".join(
        f"{args}: {text}" for args, text in dict.fromkeys(_unlisted(runs))
    )
    # The statements of --analyze are sent by every run with it, and by no other (the one
    # for the other majors aside).
    other_major = "analyze_uncounted_14" if db.version_num >= 150000 else "analyze_uncounted"
    only_analyze = {s.name for s in SENT if s.groups == ("analyze",)} - {other_major}
    for run in runs:
        by_run = set(_names([run]))
        if "--analyze" in run.args:
            assert only_analyze <= by_run, (run.args, only_analyze - by_run)
        else:
            assert not only_analyze & by_run, (run.args, only_analyze & by_run)
    # A snapshot file is judged without a connection.
    assert runs[-1].args[1] == "--snapshot" and runs[-1].statements == []
    # qadvisor role sends what a check sends, and asks whether its role exists.
    (role,) = [r for r in runs if r.args[0] == "role"]
    assert {"role_exists", "plan_without_row_locks", "plan_prepare"} <= set(_names([role]))
    # --sample reads the counters again: one more read of the tables per run with it.
    with_sample = [r for r in runs if "--sample" in r.args]
    for run in with_sample:
        others = next(r for r in runs if r.args[:3] == ("check", run.args[1], "--format"))
        assert _names([run])["tables"] == _names([others])["tables"] + 1, run.args

    # A monitoring role, without grants and with those docs/privileges.md names. Without
    # them nothing is sent that would fail for want of a privilege: the claim is not
    # planned, its rows not read, the tenants not counted, the recorded statements on the
    # queue table not prepared.
    monitored = []
    for grants in ((), MONITOR_GRANTS):
        with logging_role(db, monitor=True, grants=grants) as logged:
            monitored += logged_runs(logged, [("check", logged.dsn, "--format", "json",
                                               "--query", RR_BY_ID, "--analyze")])  # fmt: skip
    assert not _unlisted(monitored), _unlisted(monitored)
    bare, granted = _names(monitored[:1]), _names(monitored[1:])
    for name in ("plan_prepare", "analyze_scan", "tenant_counts_index", "stakeholder_prepare"):
        assert name not in bare and name in granted, (name, bare, granted)

    # A database that takes the other branches: no per-tenant index (the waiting rows are
    # counted from a bounded read, the rotation listed), and a search_path set for the role.
    other = TestDB(f"{db.name}_b", db.server)
    TestDB("postgres", db.server).execute(f"CREATE DATABASE {other.name}")
    try:
        build_tenant_queue(other, BACKLOG, rotation=50, tenant_index=None, done=2000)
        with logging_role(other, "search_path = public") as logged:
            more = logged_runs(logged, [("check", logged.dsn, "--format", "json",
                                         "--query", RR_BY_ID)])  # fmt: skip
    finally:
        TestDB("postgres", db.server).execute(f"DROP DATABASE {other.name} WITH (FORCE)")
    assert not _unlisted(more), _unlisted(more)
    for name in ("tenant_counts_sample", "tenant_rotation_list", "search_path_file"):
        assert name in _names(more), name
    more += monitored

    sent = _names(runs) | _names(more)
    always = {s.name for s in SENT if not s.when}
    assert always <= sent.keys(), f"listed as always sent, but not sent: {always - sent.keys()}"
    expected = (
        NOT_SENT_HERE
        | ({"plan_explain_generic"} if db.version_num < GENERIC_PLAN_VERSION else set())
        | {other_major}
    )
    assert {s.name for s in SENT} - sent.keys() == expected

    # No statement failed on the server: nothing sent that it refuses (a privilege the role
    # lacks, a recorded text PREPARE cannot take), so the server's log holds no ERROR.
    errors = [(r.args[:1], e) for r in [*runs, *more] for e in r.errors]
    assert errors == []


def test_a_recorded_statement_the_role_may_not_plan_is_not_prepared() -> None:
    from qadvisor.collect.access import TableAccess
    from qadvisor.collect.stakeholders import missing_privileges

    columns = frozenset({"id", "status", "payload"})
    full = TableAccess(1, "app", "jobs", True, True, True, columns, columns)
    assert missing_privileges("SELECT count(*) FROM jobs WHERE status = $1", full) == []
    reader = TableAccess(1, "app", "jobs", True, True, False, frozenset({"status"}), columns)
    assert missing_privileges("SELECT count(*) FROM jobs WHERE status = $1", reader) == []
    assert missing_privileges("SELECT payload FROM jobs WHERE status = $1", reader) == [
        "SELECT on payload of app.jobs"
    ]
    assert missing_privileges("DELETE FROM jobs WHERE status = $1", reader) == [
        "UPDATE on app.jobs"
    ]
    locking = "SELECT id FROM jobs WHERE status = $1 LIMIT $2 FOR UPDATE SKIP LOCKED"
    assert missing_privileges(locking, reader) == ["SELECT on id of app.jobs", "UPDATE on app.jobs"]
    nothing = TableAccess(1, "app", "jobs", False, False, False, frozenset(), columns)
    assert missing_privileges("SELECT 1 FROM jobs", nothing)[:2] == [
        "USAGE on schema app",
        "SELECT on the columns it reads of app.jobs",
    ]
