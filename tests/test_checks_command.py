"""`qadvisor checks`: every installed check with what it needs, in text and JSON."""

from __future__ import annotations

import json

from qadvisor.facts import FACTS
from qadvisor.registry import load_checks
from tests.helpers import qadvisor


def test_checks_lists_every_check_in_text() -> None:
    run = qadvisor("checks")
    assert run.rc == 0 and run.stderr == ""
    header, *rows = run.stdout.splitlines()
    assert header.split()[:5] == ["code", "name", "severity", "category", "reads"]
    checks = load_checks()
    assert [r.split()[0] for r in rows] == [c.code for c in checks]
    qa101 = next(r for r in rows if r.startswith("QA101"))
    assert "archive-bloated-index" in qa101 and "warning" in qa101 and "indexes" in qa101
    assert "live_set" in qa101 and "SELECT" in qa101
    qa503 = next(r for r in rows if r.startswith("QA503"))
    assert " critical " in qa503 and "pg_read_all_stats" in qa503


def test_checks_in_json_say_what_each_needs() -> None:
    run = qadvisor("checks", "--format", "json")
    assert run.rc == 0
    data = json.loads(run.stdout)
    checks = load_checks()
    assert [d["code"] for d in data] == [c.code for c in checks]
    for d, c in zip(data, checks, strict=True):
        assert d["name"] == c.name and d["severity"] == c.severity.label
        assert d["category"] == c.category and d["summary"] == c.summary
        assert d["requires"] == list(c.requires)
        assert d["privileges"] == list(dict.fromkeys(FACTS[f].privilege for f in c.requires))
        assert d["docs"] == f"docs/checks/{c.code}.md"
    qa301 = next(d for d in data if d["code"] == "QA301")
    assert "GRANT UPDATE ON {table} TO {role};" in qa301["grants"]


def test_explain_still_prints_one_page() -> None:
    run = qadvisor("explain", "QA101")
    assert run.rc == 0 and run.stdout.startswith("# QA101 archive-bloated-index")
