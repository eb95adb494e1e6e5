"""Report files and inline ignores, as a CI job meets them: one run writes the terminal
report and SARIF, JUnit and markdown files; a file that cannot be written stops the run before
anything is read from the server; ``-- qadvisor: ignore`` in a --query-file drops that
statement's findings of that code and the report says so."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from qadvisor.settings.inline_ignores import directives
from qadvisor.sql.dequeue import fingerprint
from tests.collect.test_statements_collect import CLAIM, build_claim_queue
from tests.conftest import TestDB
from tests.helpers import NO_SUCH_CODE, qadvisor
from tests.json_schemas import assert_valid_report, assert_valid_sarif, assert_valid_snapshot

# A second claim of another shape, also comparing status with a parameter (QA301 too).
OTHER = (
    "SELECT id FROM jobs WHERE status = $1 ORDER BY created_at, id LIMIT 5 FOR UPDATE SKIP LOCKED"
)


def _repo(tmp_path: Path, sql: str) -> Path:
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "claim.sql").write_text(sql)
    return tmp_path


def test_one_run_writes_the_terminal_report_and_sarif_junit_markdown(
    db: TestDB, tmp_path: Path
) -> None:
    build_claim_queue(db)
    repo = _repo(tmp_path, f"-- the worker's claims\n{CLAIM};\n\n{OTHER};\n")
    (repo / "out").mkdir()
    run = qadvisor(
        "check", db.dsn, "--query-file", "sql/claim.sql",
        "--output", "sarif:out/qadvisor.sarif", "--output", "junit:out/report.xml",
        "--output", "markdown:out/review.md", "--output", "json:out/report.json",
        cwd=repo,
    )  # fmt: skip
    assert run.rc == 1, run.stderr
    assert run.stdout.startswith("qadvisor ") and "QA301" in run.stdout  # the text report
    assert run.stderr == ""
    report = json.loads((repo / "out" / "report.json").read_text())
    assert_valid_report(report)
    keys = {f["key"] for f in report["findings"]}
    claim_key = f"QA301:public.jobs@{fingerprint(CLAIM)}"
    other_key = f"QA301:public.jobs@{fingerprint(OTHER)}"
    assert {claim_key, other_key} <= keys

    sarif = json.loads((repo / "out" / "qadvisor.sarif").read_text())
    assert_valid_sarif(sarif)
    results = {r["partialFingerprints"]["qadvisorKey/v1"]: r for r in sarif["runs"][0]["results"]}
    assert set(results) == keys
    where = {k: r["locations"][0]["physicalLocation"] for k, r in results.items()}
    # Each claim's findings are at its line of the file, relative to the repository.
    assert where[claim_key] == {"artifactLocation": {"uri": "sql/claim.sql"},
                                "region": {"startLine": 2}}  # fmt: skip
    assert where[other_key]["region"] == {"startLine": 4}
    by_key = {f["key"]: f for f in report["findings"]}
    assert by_key[claim_key]["location"] == {"path": "sql/claim.sql", "line": 2}

    suite = ET.fromstring((repo / "out" / "report.xml").read_text()).find("testsuite")
    assert suite is not None and suite.get("failures") == str(len(keys))
    md = (repo / "out" / "review.md").read_text()
    assert md.startswith(f"# qadvisor report: {db.name} on PostgreSQL")
    assert f"### QA301 generic-plan-misses-partial-index: `public.jobs@{fingerprint(CLAIM)}`" in md
    # Written whole: no temporary file is left beside them.
    assert sorted(p.name for p in (repo / "out").iterdir()) == [
        "qadvisor.sarif", "report.json", "report.xml", "review.md",
    ]  # fmt: skip


def test_an_inline_ignore_drops_that_statements_findings_of_that_code(
    db: TestDB, tmp_path: Path
) -> None:
    build_claim_queue(db)
    sql = (
        f"{CLAIM};\n\n"
        "-- qadvisor: ignore QA301 -- the driver sends the status as a literal\n"
        f"{OTHER};\n"
    )
    repo = _repo(tmp_path, sql)
    run = qadvisor("check", db.dsn, "--format", "json", "--query-file", "sql/claim.sql", cwd=repo)
    assert run.rc == 1, run.stderr
    report = run.report
    keys = {f["key"] for f in report["findings"]}
    assert f"QA301:public.jobs@{fingerprint(CLAIM)}" in keys
    assert f"QA301:public.jobs@{fingerprint(OTHER)}" not in keys
    assert report["ignored"] == [
        {"source": "sql/claim.sql:4", "line": 3, "code": "QA301", "findings": 1}
    ]
    text = qadvisor("check", db.dsn, "--query-file", "sql/claim.sql", cwd=repo).stdout
    assert "QA301 ignored on sql/claim.sql:4 (comment at sql/claim.sql:3): 1 finding" in text

    # Kept in a snapshot: checked later, the same finding stays ignored.
    snap = qadvisor("snapshot", db.dsn, "--query-file", "sql/claim.sql", "-o", "s.json", cwd=repo)
    assert snap.rc == 0, snap.stderr
    saved = json.loads((repo / "s.json").read_text())
    assert_valid_snapshot(saved)
    assert saved["inline_ignores"] == [{"source": "sql/claim.sql:4", "codes": ["QA301"], "line": 3}]
    later = qadvisor("check", "--snapshot", "s.json", "--format", "json", cwd=repo)
    assert {f["key"] for f in later.report["findings"]} == keys
    assert later.report["ignored"] == report["ignored"]


def test_an_unwritable_output_stops_the_run_before_the_server_is_read(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    # An unreachable server: had it been tried first, the error would say so.
    dsn = "postgresql://nobody@127.0.0.1:1/app?connect_timeout=2"
    cases = {
        "sarif:no/such/dir/x.sarif": "does not exist",
        f"sarif:{tmp_path}": "it is a directory",
        "pdf:x.pdf": "unknown format 'pdf'",
        "report.xml": "expected FORMAT:PATH",
    }
    if os.geteuid() != 0:  # root writes anywhere
        cases[f"junit:{locked}/r.xml"] = "is not writable"
    for spec, expected in cases.items():
        run = qadvisor("check", dsn, "--output", spec)
        assert run.rc == 2 and run.stdout == "", spec
        assert expected in run.stderr and "cannot connect" not in run.stderr, run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
    run = qadvisor("check", dsn, "--write-baseline", str(tmp_path / "nope" / "b.json"))
    assert run.rc == 2 and "--write-baseline" in run.stderr and "cannot connect" not in run.stderr


# --- the directives themselves --------------------------------------------------------------


def test_directive_on_the_line_above_and_several_codes() -> None:
    sql = (
        "-- a header\n"  # 1
        "\n"  # 2
        "-- qadvisor: ignore QA301, qa303 because the driver inlines it\n"  # 3
        "-- and another comment\n"  # 4
        "SELECT id FROM jobs\n"  # 5
        "  WHERE status = $1 FOR UPDATE SKIP LOCKED; -- qadvisor: ignore QA501\n"  # 6
        "SELECT 1 FROM jobs WHERE note = '-- qadvisor: ignore QA999';\n"  # 7
        "SELECT 2 -- qadvisor: ignore QA502\n"  # 8
        "  FROM jobs;\n"  # 9
    )
    found = [(d.statement_line, d.codes, d.line) for d in directives(sql)]
    assert found == [(5, ("QA301", "QA303"), 3), (5, ("QA501",), 6), (8, ("QA502",), 8)]


def test_a_directive_followed_by_a_blank_line_applies_to_nothing(tmp_path: Path) -> None:
    (d,) = directives("-- qadvisor: ignore QA301\n\nSELECT 1 FROM jobs FOR UPDATE;\n")
    assert d.statement_line == 0
    repo = _repo(tmp_path, "-- qadvisor: ignore QA301\n\nSELECT 1 FROM jobs FOR UPDATE;\n")
    run = qadvisor("check", "host=/nonexistent", "--query-file", "sql/claim.sql", cwd=repo)
    assert run.rc == 2 and "applies to no statement" in run.stderr
    assert "sql/claim.sql:1" in run.stderr


@pytest.mark.parametrize(
    ("directive", "expected"),
    [("-- qadvisor: ignore QA3O1", "names no check code"),
     (f"-- qadvisor: ignore {NO_SUCH_CODE}", f"'{NO_SUCH_CODE}', which no check has")],
)  # fmt: skip
def test_a_directive_naming_no_known_check_is_exit_2(
    tmp_path: Path, directive: str, expected: str
) -> None:
    repo = _repo(tmp_path, f"{directive}\nSELECT 1 FROM jobs FOR UPDATE;\n")
    run = qadvisor("check", "host=/nonexistent", "--query-file", "sql/claim.sql", cwd=repo)
    assert run.rc == 2 and expected in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
