"""The exit-code table, code by code, as a pipeline meets it: each row of qadvisor.errors'
table is reached by real runs (real servers where a server is involved), and the table the
README, docs/cli.md and --help print is that one. Two rows are reached elsewhere: 3 for an
authentication the server refused (tests/test_cli.py), and 4, a bug, through a check pack whose
check raises (tests/test_third_party_pack.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qadvisor.errors import EXIT_CODES, ExitCode, exit_code_table
from qadvisor.settings.resolve import ENV_VARIABLES
from tests.collect.test_connect import silent_endpoint
from tests.conftest import TestDB
from tests.helpers import NO_SUCH_CODE, Run, build_archive_queue, default_sigint, qadvisor
from tests.test_cli import HEALTHY_CLAIM, _snapshot_file

ROOT = Path(__file__).resolve().parent.parent
BAD_INPUT, NOT_JUDGED = ExitCode.USAGE, ExitCode.NOT_JUDGED


def _env(**extra: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES} | extra


def _one_line(run: Run, code: int) -> str:
    """The run ended with ``code``, nothing on stdout and one line on stderr: that line."""
    assert run.rc == code, (run.rc, run.stderr)
    assert run.stdout == "", run.stdout[:300]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


def test_the_docs_and_help_print_the_one_table() -> None:
    table = exit_code_table()
    for page in ("README.md", "docs/cli.md"):
        assert table in (ROOT / page).read_text(), f"{page} lost the exit-code table"
    shown = " ".join(qadvisor("--help").stdout.split())
    for code, meaning in EXIT_CODES:
        assert f"{code} {' '.join(meaning.replace('`', '').split())}" in shown, code
    assert [c for c, _ in EXIT_CODES[:5]] == [str(int(c)) for c in ExitCode]


def test_0_passed_and_1_findings(db: TestDB) -> None:
    build_archive_queue(db, archive=2_000, composite=False, partial=True)
    # Every check judged the queue and found nothing: an earned pass, in CI too.
    clean = qadvisor("check", db.dsn, "--query", HEALTHY_CLAIM, env=_env(CI="true"))
    assert clean.rc == 0, clean.stdout + clean.stderr
    # Autovacuum off for the queue: QA203 warns.
    db.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    found = qadvisor("check", db.dsn, "--query", HEALTHY_CLAIM)
    assert found.rc == 1, found.stderr
    assert qadvisor("check", db.dsn, "--query", HEALTHY_CLAIM, "--fail-on", "never").rc == 0


def test_1_wins_over_3_when_a_finding_and_a_skip_both_apply(db: TestDB) -> None:
    build_archive_queue(db)
    # No claim is known: the statement checks cannot judge the queue, and QA101 finds.
    run = qadvisor("check", db.dsn, "--format", "json", "--fail-on-skip")
    assert run.report["skipped"] and run.report["findings"]
    assert run.rc == 1, run.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("check", "--bogus"), "No such option: --bogus"),
        (("check", "--fail-on", "sometimes"), "Invalid value for '--fail-on'"),
        (("check", "--statement-timeout", "5"), "--statement-timeout"),
        (("explain", NO_SUCH_CODE), f"no check '{NO_SUCH_CODE}'"),
        (("check", "dbname=app password='x' user"), "malformed DSN"),
        (("check", "host=localhost port=notaport"), "invalid port number"),
        (("check", "host=localhost port=5432 sslmode=bogus"), "invalid sslmode value"),
        (("check", "--query", "DROP TABLE jobs"), "--query 1 refused"),
        (("check", "--snapshot", "/nonexistent/s.json"), "cannot read snapshot"),
        (("check", "--query-file", "/nonexistent/q.sql"), "cannot read --query-file"),
        (("check", "--output", "json:/nonexistent/dir/r.json"), "does not exist"),
    ],
    ids=["unknown-option", "bad-value", "below-bound", "unknown-check", "malformed-dsn",
         "port", "libpq-option", "refused-query", "snapshot", "query-file", "output"],
)  # fmt: skip
def test_2_usage_or_bad_input(args: tuple[str, ...], says: str) -> None:
    run = qadvisor(*args)
    assert run.rc == BAD_INPUT, (run.rc, run.stderr)
    assert run.stdout == "" and says in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_2_a_bad_environment_value_or_config_file(tmp_path: Path) -> None:
    snap = _snapshot_file(tmp_path)
    run = qadvisor("check", "--snapshot", str(snap), env=_env(QADVISOR_FAIL_ON="sometimes"))
    assert "QADVISOR_FAIL_ON='sometimes'" in _one_line(run, BAD_INPUT)
    config = tmp_path / "qadvisor.toml"
    config.write_text("fail_on = 3\n")
    run = qadvisor("check", "--snapshot", str(snap), "--config", str(config))
    assert "fail_on must be" in _one_line(run, BAD_INPUT)


def test_2_a_table_that_does_not_exist(db: TestDB) -> None:
    run = qadvisor("check", db.dsn, "--table", "public.nope")
    assert "public.nope does not exist" in _one_line(run, BAD_INPUT)


def test_2_a_report_that_could_not_be_written(tmp_path: Path) -> None:
    snap = _snapshot_file(tmp_path)
    # A full disk: the report file, then stdout.
    run = qadvisor("check", "--snapshot", str(snap), "--output", "json:/dev/full")
    assert "No space left on device" in _one_line(run, BAD_INPUT)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "qadvisor", "check", "--snapshot", str(snap)],
            stdout=full, stderr=subprocess.PIPE, text=True, env=_env(), timeout=60,
        )  # fmt: skip
    assert proc.returncode == BAD_INPUT, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "qadvisor: error: cannot write to stdout: No space left on device"
    ]
    # A reader that is gone: the pipe's read end closed before qadvisor writes.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "qadvisor", "check", "--snapshot", str(snap)],
            stdout=write_end, stderr=subprocess.PIPE, text=True, env=_env(), timeout=60,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert proc.returncode == BAD_INPUT, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "qadvisor: error: cannot write to stdout: Broken pipe (what reads it stopped reading)"
    ]


def test_3_the_server_unreachable_or_silent() -> None:
    run = qadvisor("check", "postgresql://app@127.0.0.1:1/app?connect_timeout=3")
    assert "Connection refused" in _one_line(run, NOT_JUDGED)
    with silent_endpoint() as port:
        dsn = f"host=127.0.0.1 port={port} dbname=app user=nobody"
        run = qadvisor("check", dsn, "--connect-timeout", "1")
    assert "timeout" in _one_line(run, NOT_JUDGED)


def test_3_the_run_timeout(db: TestDB) -> None:
    # --sample keeps the session open for 5 s; the run may take 2.
    db.execute(
        "CREATE TABLE jobs (id bigint PRIMARY KEY, status text NOT NULL);"
        "CREATE INDEX jobs_queued ON jobs (id) WHERE status = 'queued'"
    )
    run = qadvisor("check", db.dsn, "--sample", "5", "--run-timeout", "2")
    assert "did not end within its bound of 2 s" in _one_line(run, NOT_JUDGED)


def test_3_when_skips_fail_the_gate_by_default_in_ci(db: TestDB, tmp_path: Path) -> None:
    # By flag and config file: tests/test_cli.py (test_fail_on_skip_refuses_a_blind_pass...).
    build_archive_queue(db, archive=2_000, composite=False, partial=True)
    # No claim known: the statement checks could not judge the queue; nothing found.
    blind = qadvisor("check", db.dsn, "--format", "json")
    assert blind.rc == 0 and blind.report["skipped"] and not blind.report["findings"]
    # Under CI the default is on, and every layer can still turn it off.
    assert qadvisor("check", db.dsn, env=_env(CI="true")).rc == NOT_JUDGED
    assert qadvisor("check", db.dsn, env=_env(CI="false")).rc == 0
    assert qadvisor("check", db.dsn, "--no-fail-on-skip", env=_env(CI="true")).rc == 0
    off = _env(CI="true", QADVISOR_FAIL_ON_SKIP="false")
    assert qadvisor("check", db.dsn, env=off).rc == 0
    config = tmp_path / "qadvisor.toml"
    config.write_text("fail_on_skip = false\n")
    assert qadvisor("check", db.dsn, "--config", str(config), env=_env(CI="1")).rc == 0
    # No queue at all is no pass either.
    db.execute("DROP TABLE jobs")
    assert qadvisor("check", db.dsn, env=_env(CI="true")).rc == NOT_JUDGED


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "term"])
def test_128_plus_the_signal_when_interrupted(db: TestDB, signum: int) -> None:
    db.execute(
        "CREATE TABLE jobs (id bigint PRIMARY KEY, status text NOT NULL);"
        "CREATE INDEX jobs_queued ON jobs (id) WHERE status = 'queued'"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "qadvisor", "check", db.dsn, "--sample", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
        preexec_fn=default_sigint,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # until its session is open and sampling
            rows = db.execute(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = 'qadvisor'"
                " AND datname = current_database()"
            )
            if rows:
                break
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert out == ""
    # A shell (and a CI runner) reads a process a signal ended as 128 + the signal.
    assert proc.returncode in (128 + signum, -signum), (proc.returncode, err)
    assert "Traceback" not in err and not re.search(r"internal error", err), err
