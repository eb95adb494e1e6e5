"""Baselines: a gate that fails on new findings only, on a real server and on snapshots.

On the server, the issue's path: findings accepted with --write-baseline pass with
--baseline; another bloated index and forced generic plans make it fail, and only those count;
fixing a baselined finding reports it as fixed. The baseline file holds identities, not
measurements, and no secret; a file that is not a baseline is one line and exit 2.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from qadvisor.model import BaselineEntry, Report, Severity, Skip, Target
from qadvisor.settings import baseline
from tests.collect.test_statements_collect import CLAIM, build_claim_queue
from tests.conftest import TestDB
from tests.helpers import as_the_application, qadvisor, rewrite_of
from tests.render.test_render import full_report

SECRET = "s3cr3t-Pa55"


def _findings_by_state(report: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"new": set(), "preexisting": set()}
    for f in report["findings"]:
        out[f["baseline"]].add(f["key"])
    return out


def test_baseline_gate_on_a_real_server(db: TestDB, tmp_path: Path) -> None:
    # Enough archive for a (status, created_at) index past QA101's 8 MiB floor.
    build_claim_queue(db, rows=400_000)
    claim = tmp_path / "claim.sql"
    claim.write_text(f"-- the worker's claim\n{CLAIM};\n")
    base = tmp_path / "b.json"
    dsn = db.dsn
    common = ("check", dsn, "--format", "json", "--query-file", str(claim))

    first = qadvisor(*common, "--write-baseline", str(base))
    assert first.rc == 1, first.stderr  # the findings are still findings
    accepted = {f["key"] for f in json.loads(first.stdout)["findings"]}
    assert {"QA203:public.jobs", f"QA301:public.jobs@{_fp()}"} <= accepted
    written = json.loads(base.read_text())
    assert written["qadvisor_baseline"] == 1 and written["database"] == db.name
    assert {f["key"] for f in written["findings"]} == accepted
    assert "evidence" not in base.read_text() and "message" not in base.read_text()

    again = qadvisor(*common, "--baseline", str(base))
    assert again.rc == 0, again.stdout
    report = again.report
    assert _findings_by_state(report) == {"new": set(), "preexisting": accepted}
    assert report["baseline"]["new"] == 0 and report["fixed"] == []

    # Two new problems: another index over the archive, and generic plans forced on the
    # database (the claim's QA301 rises from warning to critical).
    db.execute("CREATE INDEX jobs_status_created_idx ON jobs (status, created_at)")
    db.execute(f"ALTER DATABASE {db.name} SET plan_cache_mode = force_generic_plan")
    worse = qadvisor(*common, "--baseline", str(base), "--fail-on", "critical")
    assert worse.rc == 1
    states = _findings_by_state(worse.report)
    qa301 = f"QA301:public.jobs@{_fp()}"
    assert states["new"] == {"QA101:public.jobs_status_created_idx", qa301}
    assert states["preexisting"] == accepted - {qa301}
    # Only the new findings count: the critical QA301 fails the gate; without it, the new
    # warning alone does not fail --fail-on critical, whatever the preexisting ones are.
    db.execute(f"ALTER DATABASE {db.name} RESET plan_cache_mode")
    only_index = qadvisor(*common, "--baseline", str(base), "--fail-on", "critical")
    assert only_index.rc == 0, only_index.stdout
    assert _findings_by_state(only_index.report)["new"] == {"QA101:public.jobs_status_created_idx"}
    assert qadvisor(*common, "--baseline", str(base)).rc == 1  # --fail-on warning: the index

    # Fixing a baselined finding reports it as fixed: the claim rewritten as QA301 prints it
    # (the status as a literal) in the application's file.
    db.execute("DROP INDEX jobs_status_created_idx")
    printed = rewrite_of(next(f for f in worse.report["findings"] if f["key"] == qa301))
    rewrite = as_the_application(printed, {1: "'queued'"})
    claim.write_text(f"-- the worker's claim\n{rewrite}\n")
    fixed = qadvisor(*common, "--baseline", str(base))
    assert fixed.rc == 0, fixed.stdout
    assert [e["key"] for e in fixed.report["fixed"]] == [qa301]
    assert fixed.report["baseline"]["fixed"] == 1
    assert _findings_by_state(fixed.report) == {"new": set(), "preexisting": accepted - {qa301}}
    text = qadvisor("check", dsn, "--query-file", str(claim), "--baseline", str(base))
    assert "fixed since the baseline (1)" in text.stdout and qa301 in text.stdout


def _fp() -> str:
    from qadvisor.sql.dequeue import fingerprint

    return fingerprint(CLAIM)


def test_a_file_that_is_not_a_baseline_is_one_line_and_exit_2(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    from tests import snapshots as S

    snap.write_text(json.dumps(S.snapshot(S.jobs_table()).to_dict()))
    report_file = tmp_path / "report.json"
    report_file.write_text(json.dumps({"schema_version": 1, "findings": []}))
    cases = {
        "missing.json": "cannot read baseline",
        "report.json": "is not a qadvisor baseline (it is a JSON report)",
        "snap.json": "is not a qadvisor baseline (it is a snapshot)",
        "junk.json": "is not a qadvisor baseline (not JSON)",
        "future.json": "is a baseline of format 2",
        "broken.json": "findings[0]",
    }
    (tmp_path / "junk.json").write_text("{nope")
    (tmp_path / "future.json").write_text('{"qadvisor_baseline": 2, "findings": []}')
    (tmp_path / "broken.json").write_text(
        '{"qadvisor_baseline": 1, "findings": [{"key": "QA101:x", "code": "QA101", '
        '"severity": "fatal", "target": {"kind": "index"}}]}'
    )
    for name, expected in cases.items():
        run = qadvisor("check", "--snapshot", str(snap), "--baseline", str(tmp_path / name))
        assert run.rc == 2, (name, run.stdout)
        assert run.stdout == "" and expected in run.stderr, (name, run.stderr)
        assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr


def test_the_baseline_file_holds_identities_and_no_secret(tmp_path: Path) -> None:
    report = full_report()  # its snapshot holds a password in a role name and a setting
    text = baseline.dumps(report)
    assert SECRET not in text and "db.internal" not in text
    data = json.loads(text)
    assert [f["key"] for f in data["findings"]] == sorted(f.key for f in report.findings)
    assert set(data) == {"qadvisor_baseline", "qadvisor_version", "database", "server_version",
                         "findings"}  # fmt: skip
    path = tmp_path / "b.json"
    path.write_text(text)
    loaded = baseline.load(path)
    assert [e.key for e in loaded.entries] == sorted(f.key for f in report.findings)
    assert loaded.entries[0].target == next(f.target for f in report.findings
                                            if f.key == loaded.entries[0].key)  # fmt: skip


def _compare(report: Report, entries: list[BaselineEntry]) -> Report:
    def judged(e: BaselineEntry) -> bool:
        return e.code in report.checks_run and not any(s.code == e.code for s in report.skipped)

    b = baseline.Baseline("b.json", "app", "0", tuple(entries))
    return replace(report, baseline=baseline.compare(report, b, judged))


def _entry(key: str, severity: Severity, kind: str = "table") -> BaselineEntry:
    code, _, rest = key.partition(":")
    schema, _, name = rest.partition(".")
    return BaselineEntry(key, code, "x", severity, Target(kind, schema, name, name))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("recorded", "state"),
    [(Severity.CRITICAL, "preexisting"), (Severity.WARNING, "new"), (None, "new")],
)
def test_a_finding_is_new_when_unknown_or_its_severity_rose(
    recorded: Severity | None, state: str
) -> None:
    report = full_report()  # QA203:public.jobs is critical there
    entries = [_entry("QA203:public.jobs", recorded)] if recorded else []
    marked = _compare(report, entries)
    f = next(f for f in marked.findings if f.key == "QA203:public.jobs")
    assert marked.baseline_state(f) == state
    assert (f in marked.new_findings) is (state == "new")


def test_gone_is_fixed_only_where_the_check_judged_again() -> None:
    report = full_report()  # QA102 and QA201 have skips in it; QA203 ran clean of skips
    gone_judged = _entry("QA203:public.mail", Severity.WARNING)
    gone_skipped = _entry("QA102:public.jobs_pending_idx", Severity.WARNING, "index")
    gone_unrun = _entry("QA777:public.jobs", Severity.INFO)
    marked = _compare(report, [gone_judged, gone_skipped, gone_unrun])
    assert marked.baseline is not None
    assert [e.key for e in marked.baseline.fixed] == ["QA203:public.mail"]
    assert [e.key for e in marked.baseline.not_judged] == [
        "QA102:public.jobs_pending_idx",
        "QA777:public.jobs",
    ]
    assert isinstance(report.skipped[0], Skip)
