"""`qadvisor diff OLD NEW`: what changed between two runs (JSON reports or snapshots), in text,
markdown and JSON, and exit 1 when it got worse. On a real server: a printed fix applied
between two runs shows its finding gone; the other way round, it is new and the run got
worse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qadvisor.diff.compare import Side, compare
from qadvisor.diff.show import FORMATS
from qadvisor.model import Severity
from tests.conftest import TestDB
from tests.helpers import apply_fix, build_archive_queue, check, qadvisor

A = Side("old.json", "app", None, "report")
B = Side("new.json", "app", None, "report")


def finding(code: str, severity: str = "warning", **evidence: object) -> dict[str, Any]:
    return {
        "key": f"{code}:public.jobs", "code": code, "name": "n", "severity": severity,
        "message": "m", "evidence": evidence,
        "target": {"kind": "table", "schema": "public", "table": "jobs", "name": "jobs"},
    }  # fmt: skip


def report(*findings: dict[str, Any], skipped: tuple[dict[str, Any], ...] = (),
           ran: tuple[str, ...] = ("QA101", "QA201", "QA204")) -> dict[str, Any]:  # fmt: skip
    return {"findings": list(findings), "skipped": list(skipped), "checks_run": list(ran),
            "database": "app"}  # fmt: skip


def test_findings_new_gone_raised_and_the_figures_that_moved() -> None:
    old = report(finding("QA201", n_dead_tup=100_000, vacuum_trigger=441_090, min_ratio=10),
                 finding("QA204", "info", archive_rows=1_000), finding("QA101"))  # fmt: skip
    new = report(finding("QA201", n_dead_tup=110_000, vacuum_trigger=900_000, min_ratio=20),
                 finding("QA204", "warning", archive_rows=1_000))  # fmt: skip
    c = compare(old, new, A, B)
    assert [f["key"] for f in c.gone] == ["QA101:public.jobs"]
    assert [(f["key"], was) for f, was in c.severity_changed] == [("QA204:public.jobs", "info")]
    # 10 % more dead tuples is noise; the trigger doubled; a threshold is no figure.
    assert [(m.field, m.old_text, m.new_text) for m in c.moved] == [
        ("vacuum_trigger", "441,090", "900,000")]  # fmt: skip
    assert c.worse(Severity.WARNING) and not c.worse(Severity.CRITICAL)
    assert not compare(new, new, A, B).worse(Severity.INFO)


def test_a_finding_its_check_did_not_judge_again_is_not_called_gone() -> None:
    old = report(finding("QA201"), finding("QA204"))
    skip = {"code": "QA201", "queue": "public.jobs", "reason": "live set unknown: hidden"}
    new = report(skipped=(skip,), ran=("QA201",))
    c = compare(old, new, A, B)
    assert c.gone == ()
    assert [(f["key"], why) for f, why in c.not_judged] == [
        ("QA201:public.jobs", "live set unknown: hidden"),
        ("QA204:public.jobs", "QA204 did not run"),
    ]
    assert c.no_longer_judged == (("QA201", "public.jobs", "live set unknown: hidden"),)
    assert not c.worse(Severity.WARNING) and c.worse(Severity.WARNING, skips=True)
    text = FORMATS["text"](c, False)
    assert "Not judged in the new report (not called gone) (2):" in text
    assert compare(new, old, A, B).judged_again == (("QA201", "public.jobs"),)


def test_markdown_escapes_what_the_reports_say() -> None:
    new = report(finding("QA201") | {"message": "a <b>|`x`"})
    md = FORMATS["markdown"](compare(report(), new, A, B), True)
    assert "**New findings (1)**" in md and r"a \<b>\|\`x\`" in md and md.endswith("Got worse.\n")


def test_a_printed_fix_applied_between_two_runs_shows_its_finding_gone(
    db: TestDB, tmp_path: Path
) -> None:
    build_archive_queue(db)
    before = check(db)
    (qa101,) = before.findings("QA101")
    (tmp_path / "before.json").write_text(before.stdout)
    snap = qadvisor("snapshot", db.dsn, "-o", str(tmp_path / "before.snapshot"))
    assert snap.rc == 0, snap.stderr
    apply_fix(db, qa101, review=True)
    db.execute("ANALYZE jobs")
    after = check(db)
    assert not after.findings("QA101")
    (tmp_path / "after.json").write_text(after.stdout)
    assert qadvisor("snapshot", db.dsn, "-o", str(tmp_path / "after.snapshot")).rc == 0

    for a, b in (("before.json", "after.json"), ("before.snapshot", "after.snapshot")):
        run = qadvisor("diff", str(tmp_path / a), str(tmp_path / b), "--format", "json")
        assert run.rc == 0, run.stderr  # not worse
        out = json.loads(run.stdout)
        assert [f["key"] for f in out["gone"]] == [qa101["key"]]
        assert out["new_findings"] == [] and out["worse"] is False
        assert out["old"]["kind"] == ("report" if a.endswith(".json") else "snapshot")
    text = qadvisor("diff", str(tmp_path / "before.json"), str(tmp_path / "after.snapshot"))
    assert text.rc == 0 and f"Gone (judged again, not found) (1):\n  warning {qa101['key']}" in (
        text.stdout
    )
    # The other way round the fix's finding is new: it got worse.
    back = qadvisor("diff", str(tmp_path / "after.json"), str(tmp_path / "before.json"),
                    "--format", "markdown")  # fmt: skip
    assert back.rc == 1 and f"`{qa101['key']}`" in back.stdout and "Got worse." in back.stdout
    assert qadvisor("diff", str(tmp_path / "after.json"), str(tmp_path / "before.json"),
                    "--fail-on", "never").rc == 0  # fmt: skip


def test_a_file_that_is_neither_a_report_nor_a_snapshot_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"a": 1}')
    run = qadvisor("diff", str(tmp_path / "x.json"), str(tmp_path / "x.json"))
    assert run.rc == 2 and "neither a qadvisor JSON report" in run.stderr and run.stdout == ""
