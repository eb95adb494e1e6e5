"""The CLI as a user meets it: exit codes, bad input, the JSON contract, snapshots, safety."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.collect.test_statements_collect import build_claim_queue, run_claims
from tests.conftest import TestDB, flush_stats
from tests.helpers import (
    NO_SUCH_CODE,
    assert_quiet,
    build_archive_queue,
    check,
    fix_sql,
    qadvisor,
)
from tests.json_schemas import assert_valid_snapshot

SECRET = "s3cr3t-Pa55"


def test_help_teaches_exit_codes() -> None:
    run = qadvisor("--help")
    assert run.rc == 0 and "Exit codes" in run.stdout
    run = qadvisor("check", "--help")
    assert run.rc == 0 and "--fail-on" in run.stdout and "--sample" in run.stdout


def test_version_is_the_installed_distribution_s() -> None:
    from importlib.metadata import version

    run = qadvisor("--version")
    assert run.rc == 0 and run.stdout == f"qadvisor {version('qadvisor')}\n", run.stdout


def test_explain_prints_the_docs_of_a_check() -> None:
    run = qadvisor("explain", "QA201")
    assert run.rc == 0 and "## How to fix" in run.stdout
    assert qadvisor("explain", NO_SUCH_CODE).rc == 2


def test_explain_renders_the_page_in_a_terminal() -> None:
    # On a terminal (a pty here) the page is rendered: no Markdown marks left.
    primary, secondary = pty.openpty()
    env = {**os.environ, "COLUMNS": "80", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "qadvisor", "explain", "QA201"],
        stdout=secondary, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the pty closes when the process ends
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    assert proc.wait(timeout=60) == 0
    shown = re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode())
    assert "What it finds" in shown and "How to fix" in shown
    assert not re.search(r"^\s*#+ ", shown, re.M) and "```" not in shown, shown[:500]


def test_shell_completion_completes_commands_options_values_and_codes() -> None:
    # The script --show-completion prints, sourced by bash as a user's ~/.bashrc would.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"

    def completed(*words: str) -> list[str]:
        script = (
            "source <(qadvisor --show-completion bash) && COMP_WORDS=("
            + " ".join(f"'{w}'" for w in words)
            + f") && COMP_CWORD={len(words) - 1} && _qadvisor_completion qadvisor && "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        run = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                             env={**os.environ, "PATH": path}, timeout=60)  # fmt: skip
        assert run.returncode == 0, run.stderr
        return run.stdout.split()

    assert completed("qadvisor", "ch") == ["check", "check-sql", "checks"]
    assert completed("qadvisor", "check", "--fail-on-") == ["--fail-on-skip"]
    assert completed("qadvisor", "check", "--format", "s") == ["sarif", "sql"]
    assert completed("qadvisor", "explain", "QA20") == [f"QA20{n}" for n in range(1, 7)]


@pytest.mark.parametrize(
    ("dsn", "expected", "code"),
    [
        (f"host=localhost password={SECRET} port=notaport", "port", 2),
        (f"postgresql://app:{SECRET}@127.0.0.1:1/app?connect_timeout=3", "cannot connect", 3),
        (f"dbname=app password='{SECRET}' user", "malformed DSN", 2),
    ],
)
def test_bad_dsn_or_unreachable_server_is_one_line_without_the_password(
    dsn: str, expected: str, code: int
) -> None:
    # A DSN that is bad input is 2; a server that cannot be reached, 3.
    run = qadvisor("check", dsn)
    assert run.rc == code
    assert SECRET not in run.stderr + run.stdout
    assert expected in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert "Traceback" not in run.stderr


def test_wrong_password_and_missing_database(db: TestDB) -> None:
    server = db.server
    hba = server.data_dir / "pg_hba.conf"
    line = "local all qa_pw scram-sha-256\n"
    text = hba.read_text()
    if line not in text:
        hba.write_text(line + text)
    db.execute("SELECT pg_reload_conf()")
    db.execute("DROP ROLE IF EXISTS qa_pw")
    db.execute("CREATE ROLE qa_pw LOGIN PASSWORD 'right-one'")
    wrong = (
        f"host={server.socket_dir} port={server.port} dbname={db.name} user=qa_pw password={SECRET}"
    )
    # The server refused the connection: could not connect, exit 3.
    run = qadvisor("check", wrong)
    assert run.rc == 3 and SECRET not in run.stderr
    assert "password authentication failed" in run.stderr
    missing = server.dsn("no_such_db")
    run = qadvisor("check", missing)
    assert run.rc == 3 and 'database "no_such_db" does not exist' in run.stderr


def test_missing_table_and_bad_snapshot_file(db: TestDB, tmp_path: Path) -> None:
    run = qadvisor("check", db.dsn, "--table", "public.nope")
    assert run.rc == 2 and "public.nope does not exist" in run.stderr
    not_json = tmp_path / "x.json"
    not_json.write_text("hello")
    run = qadvisor("check", "--snapshot", str(not_json))
    assert run.rc == 2 and "not a qadvisor snapshot" in run.stderr
    other_json = tmp_path / "y.json"
    other_json.write_text('{"format": 1, "server": 3}')
    run = qadvisor("check", "--snapshot", str(other_json))
    assert run.rc == 2 and "not a qadvisor snapshot" in run.stderr
    assert qadvisor("check", "--snapshot", str(tmp_path / "missing.json")).rc == 2


def _snapshot_file(tmp_path: Path) -> Path:
    from tests import snapshots as S

    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), 300 * 1024 * 1024)
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(S.snapshot(S.jobs_table(indexes=(idx,))).to_dict()))
    return path


@pytest.mark.parametrize(
    ("pattern", "closest"),
    [(NO_SUCH_CODE, "QA101"), ("QA2O1:public.jobs", "QA201"), ("qa101", "QA101")],
)
def test_an_unknown_code_to_ignore_is_one_line_naming_the_closest(
    tmp_path: Path, pattern: str, closest: str
) -> None:
    snap = _snapshot_file(tmp_path)
    assert qadvisor("check", "--snapshot", str(snap), "--ignore", "QA101").rc == 1  # QA201 left
    run = qadvisor("check", "--snapshot", str(snap), "--ignore", pattern)
    assert run.rc == 2 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert run.stderr.startswith(f"qadvisor: error: --ignore '{pattern}': ")
    assert f"the closest code is {closest}" in run.stderr
    # The same in the config file, named as such.
    config = tmp_path / "qadvisor.toml"
    config.write_text(f'ignore = ["{pattern}"]\n')
    run = qadvisor("check", "--snapshot", str(snap), "--config", str(config))
    assert run.rc == 2 and f"qadvisor.toml: ignore '{pattern}'" in run.stderr
    assert f"the closest code is {closest}" in run.stderr
    # A known code with nothing after the colon would ignore nothing either.
    run = qadvisor("check", "--snapshot", str(snap), "--ignore", "QA201:")
    assert run.rc == 2 and "names no object" in run.stderr


@pytest.mark.parametrize(
    "table", ["pg_catalog.pg_class", "pg_class", "information_schema.sql_features"]
)
def test_a_system_catalog_given_as_a_queue_is_refused(db: TestDB, table: str) -> None:
    run = qadvisor("check", db.dsn, "--table", table, "--format", "json")
    assert run.rc == 2 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "is a system catalog of PostgreSQL, not a queue table" in run.stderr


def test_json_contract_and_exit_codes(db: TestDB) -> None:
    build_archive_queue(db)
    run = check(db)
    report = run.report
    assert run.rc == 1
    assert set(report) == {"schema_version", "qadvisor_version", "server", "database",
                           "checks_run", "queues", "rejected", "left_out", "findings",
                           "skipped", "hidden", "summary", "baseline", "fixed",
                           "ignored", "maintenance", "history"}  # fmt: skip
    assert report["history"] is None  # without --history
    assert report["baseline"] is None and report["fixed"] == [] and report["ignored"] == []
    assert report["checks_run"] == sorted(report["checks_run"]) and "QA101" in report["checks_run"]
    assert report["schema_version"] == 1
    assert report["server"]["version_num"] == db.version_num
    assert report["database"] == db.name
    (queue,) = report["queues"]
    assert queue["table"] == "jobs" and queue["live_predicate"] == "status = 'pending'"
    for f in report["findings"]:
        assert set(f) == {"code", "name", "severity", "key", "target", "message", "evidence",
                          "fix", "docs", "baseline", "location", "proof", "database"}  # fmt: skip
        assert f["database"] == db.name
        assert f["baseline"] is None and f["location"] is None and f["proof"] is None
        assert f["key"].startswith(f["code"] + ":")
        assert Path(f["docs"]).name == f"{f['code']}.md"
    assert report["summary"]["warning"] == len(report["findings"])
    # The gate: warnings do not fail a critical-only gate, nor a never gate.
    assert check(db, "--fail-on", "critical").rc == 0
    assert check(db, "--fail-on", "never").rc == 0
    # The archive is a month old: QA204 warns of it too.
    assert run.codes() == {"QA101", "QA201", "QA204"}
    ignored = (
        "--ignore",
        "QA101",
        "--ignore",
        "QA201:public.jobs",
        "--ignore",
        "QA204:public.jobs",
    )
    assert check(db, *ignored).rc == 0


def test_no_format_holds_the_dsn_or_the_server_s_host(db: TestDB, tmp_path: Path) -> None:
    # docs/output-formats.md promises it; the markdown header's command held the DSN whole.
    build_archive_queue(db, archive=2_000)
    host = str(db.server.socket_dir)
    outputs = [f"{fmt}:{tmp_path / fmt}" for fmt in ("json", "markdown", "sarif", "junit", "sql")]
    run = qadvisor("check", db.dsn, "--fail-on", "never", *(a for o in outputs
                                                           for a in ("--output", o)))  # fmt: skip
    assert run.rc == 0, run.stderr
    for fmt in ("json", "markdown", "sarif", "junit", "sql"):
        text = (tmp_path / fmt).read_text()
        assert host not in text and db.dsn not in text and "host=" not in text, fmt
    header = (tmp_path / "markdown").read_text().split("**Summary:**")[0]
    assert f'- **Command:** `qadvisor check "$DSN" --fail-on never --output json:{tmp_path}' in (
        header
    )


def test_snapshot_saved_and_checked_offline(db: TestDB, tmp_path: Path) -> None:
    build_archive_queue(db)
    out = tmp_path / "s.json"
    run = qadvisor("snapshot", db.dsn, "-o", str(out))
    assert run.rc == 0, run.stderr
    online = check(db).report
    offline = qadvisor("check", "--snapshot", str(out), "--format", "json")
    assert offline.rc == 1
    assert [f["key"] for f in offline.report["findings"]] == [f["key"] for f in online["findings"]]
    saved = json.loads(out.read_text())
    assert saved["server"]["database"] == db.name
    assert_valid_snapshot(saved)


_GC_PROBE = """
import gc, json, sys
from qadvisor import cli, engine

seen = []
judge = engine.judge

def probe(*args, **kwargs):
    seen.append([gc.isenabled(), gc.get_freeze_count()])
    return judge(*args, **kwargs)

engine.judge = probe
sys.argv = ["qadvisor", "check", "--snapshot", sys.argv[1], "--format", "json"]
try:
    cli.main()
except SystemExit:
    pass
print(json.dumps(seen), file=sys.stderr)
"""


def test_a_check_runs_with_the_cyclic_collector_on_and_its_imports_left_out() -> None:
    # main() holds the collector off while a command imports, and must hand it back before
    # the work: a long run (--sample, --prove) makes garbage that only the collector frees.
    fixture = Path(__file__).parent / "fixtures" / "snapshot-f24dd57.json"
    run = subprocess.run(
        [sys.executable, "-c", _GC_PROBE, str(fixture)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    seen = json.loads(run.stderr.strip().splitlines()[-1])
    assert len(seen) == 1, run.stderr
    enabled, frozen = seen[0]
    assert enabled and frozen > 10_000, seen


def test_session_is_read_only_and_named(db: TestDB) -> None:
    from qadvisor.collect.connect import SessionLimits, connect

    with connect(db.dsn, SessionLimits(statement_timeout_ms=1234, lock_timeout_ms=56)) as conn:
        row = conn.execute(
            "SELECT current_setting('default_transaction_read_only'),"
            " current_setting('statement_timeout'), current_setting('lock_timeout'),"
            " current_setting('application_name')"
        ).fetchone()
        assert row == ("on", "1234ms", "56ms", "qadvisor")
        with pytest.raises(Exception, match="read-only transaction"):
            conn.execute("CREATE TABLE should_not_exist (x int)")


def test_role_without_pg_stats_gets_a_skip_not_a_guess(db: TestDB) -> None:
    build_archive_queue(db)
    db.execute("DROP ROLE IF EXISTS qa_monitor")
    db.execute("CREATE ROLE qa_monitor LOGIN IN ROLE pg_monitor")
    dsn = db.server.dsn(db.name, user="qa_monitor")
    run = qadvisor("check", dsn, "--table", "public.jobs", "--format", "json")
    assert run.rc in (0, 1), run.stderr
    codes = {f["code"] for f in run.report["findings"]}
    assert "QA101" not in codes and "QA201" not in codes
    reasons = {s["code"]: s["reason"] for s in run.report["skipped"]}
    assert "GRANT SELECT (status) ON public.jobs" in reasons["QA101"]
    db.execute("GRANT SELECT (status) ON jobs TO qa_monitor")
    run = qadvisor("check", dsn, "--table", "public.jobs", "--format", "json")
    assert {"QA101", "QA201"} <= {f["code"] for f in run.report["findings"]}
    db.execute("DROP OWNED BY qa_monitor")


def test_no_queue_found_says_so(db: TestDB) -> None:
    db.execute("CREATE TABLE customers (id int primary key, name text)")
    run = qadvisor("check", db.dsn)
    assert run.rc == 0
    assert "No queue tables found" in run.stdout and "No problems found" not in run.stdout
    # A gate that refuses a blind pass: nothing was judged.
    assert qadvisor("check", db.dsn, "--fail-on-skip").rc == 3


HEALTHY_CLAIM = (
    "SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)


def test_fail_on_skip_refuses_a_blind_pass_and_lets_an_earned_one_through(
    db: TestDB, tmp_path: Path
) -> None:
    build_archive_queue(db, archive=2_000, composite=False, partial=True)
    # Every check judged the queue (the claim is given): an earned all-clear.
    clean = check(db, "--query", HEALTHY_CLAIM, "--fail-on-skip")
    assert clean.rc == 0 and clean.report["findings"] == [] and clean.report["skipped"] == []
    text = qadvisor("check", db.dsn, "--query", HEALTHY_CLAIM, "--fail-on-skip")
    assert text.rc == 0 and "No problems found on the queue tables." in text.stdout
    # Without the claim the statement checks cannot judge it: a skip, so not an all-clear.
    blind = check(db)
    assert blind.rc == 0 and blind.report["findings"] == [] and blind.report["skipped"]
    assert blind.report["summary"]["skipped"] == len(blind.report["skipped"])
    text = qadvisor("check", db.dsn)
    assert text.rc == 0 and "No problems found" not in text.stdout
    assert "Not an all-clear" in text.stdout
    assert qadvisor("check", db.dsn, "--fail-on-skip").rc == 3
    assert qadvisor("check", db.dsn, "--fail-on-skip", "--fail-on", "never").rc == 3
    cfg = tmp_path / "qadvisor.toml"
    cfg.write_text("fail_on_skip = true\n")
    assert qadvisor("check", db.dsn, "--config", str(cfg)).rc == 3
    assert check(db, "--config", str(cfg), "--no-fail-on-skip").rc == 0
    junit = qadvisor("check", db.dsn, "--format", "junit")
    assert junit.rc == 0 and 'skipped="0"' not in junit.stdout


def test_measured_state_reports_both_then_nothing_after_the_printed_fixes(db: TestDB) -> None:
    build_archive_queue(db)
    db.execute("UPDATE jobs SET finished_at = now() WHERE id <= 20000")
    db.wait_for_stats("jobs", lambda r: r["n_dead_tup"] >= 20_000)
    # The archive is a month old, which QA204 judges; its fix deletes it (its own tests walk
    # that): here the archive stays, and so does QA204, left out.
    run = check(db, "--ignore", "QA204")
    assert run.rc == 1
    assert run.codes() == {"QA101", "QA201"}
    for finding in run.report["findings"]:
        assert finding["fix"]["statements"], finding["code"]
        # Without pg_stat_statements nobody knows what else reads the old index: its DROP is
        # a step for review, run here as the DBA who reviewed it would.
        for statement in fix_sql(finding, review=True):
            db.execute(statement)
    # Nothing but the printed statements: no VACUUM or ANALYZE the fixes do not print.
    after = check(db, "--ignore", "QA204")
    assert_quiet(after, "QA101")
    assert_quiet(after, "QA201")
    assert after.rc == 0 and after.report["findings"] == []


def test_verbose_lists_a_statement_left_out_with_why(db: TestDB) -> None:
    build_claim_queue(db, rows=20_000, pgss=True)
    run_claims(db)
    with db.connect() as conn, conn.transaction():
        conn.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", [1])
        flush_stats(conn)
    brief = " ".join(qadvisor("check", db.dsn).stdout.split())
    assert "1 row-locking statement(s) not judged as claims" in brief, brief
    assert "locks one row by its key" not in brief
    listed = " ".join(qadvisor("check", db.dsn, "--verbose").stdout.split())
    assert "SELECT id FROM jobs WHERE id = $1 FOR UPDATE" in listed, listed
    assert "locks one row by its key (id = $1)" in listed
    assert "not judged as claims: --verbose" not in listed


def test_a_query_that_is_no_claim_is_a_skip_not_a_lock_finding(db: TestDB) -> None:
    # Locking one known row by its key is right to wait: QA501 has nothing to say about it,
    # and the statements it was given do not tell how the queue is claimed.
    build_claim_queue(db, rows=20_000)
    run = check(db, "--query", "SELECT id FROM jobs WHERE id = $1 FOR UPDATE")
    assert run.findings("QA501") == []
    reasons = [s["reason"] for s in run.report["skipped"] if s["code"] == "QA501"]
    assert any("--query 1: not judged as a claim: it locks one row by its key" in r
               for r in reasons), reasons  # fmt: skip
