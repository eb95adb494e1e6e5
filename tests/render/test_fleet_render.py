"""A fleet's combined report in every format, from hand-built reports (no server): each
database named in every finding, key and location; the databases not judged as lines with
their reason; the same bytes for the same fleet; names from the database escaped."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from prometheus_client import parser as text_parser
from prometheus_client.openmetrics import parser as openmetrics_parser

from qadvisor import render
from qadvisor.model import FleetMember, FleetReport, Report, ServerInfo
from qadvisor.render import openmetrics
from tests import snapshots as S
from tests.json_schemas import assert_valid_fleet_report, assert_valid_sarif

MB = 1024 * 1024
# A database may be called anything: quotes, a backslash, a newline, a slash, dots.
WEIRD = 'we"ird\\db\nname/x'


def _report(database: str) -> Report:
    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), int(310.4 * MB))
    snap = S.snapshot(S.jobs_table(indexes=(idx,)))
    snap = replace(snap, server=ServerInfo("18.6", 180006, database, "monitor"))
    report = S.report("QA101", snap)
    assert [f.code for f in report.findings] == ["QA101"]
    return report


def _fleet() -> FleetReport:
    return FleetReport(
        source="--all-databases host=db.internal port=5432 dbname=postgres",
        jobs=4,
        members=(
            FleetMember("..", _report("..")),
            FleetMember("app", _report("app")),
            FleetMember("down", None, "connect_failed", "cannot connect to host=db: refused"),
            FleetMember(
                "locked",
                None,
                "no_connect_privilege",
                "not checked: role monitor may not connect to it (it lacks CONNECT)",
                ("GRANT CONNECT ON DATABASE locked TO monitor;",),
            ),
            FleetMember(WEIRD, _report(WEIRD)),
        ),
    )


def _text(fmt: str, fleet: FleetReport) -> str:
    out = io.StringIO()
    render.write_fleet(fleet, fmt, out)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["json", "markdown", "sarif", "junit", "html", "openmetrics"])
def test_the_same_fleet_gives_the_same_bytes(fmt: str) -> None:
    assert _text(fmt, _fleet()) == _text(fmt, _fleet())


def test_json_names_the_database_in_every_finding_and_key() -> None:
    doc = json.loads(_text("json", _fleet()))
    assert_valid_fleet_report(doc)
    assert [(f["database"], f["key"]) for f in doc["findings"]] == [
        ("..", "../QA101:public.jobs_status_created_at_idx"),
        ("app", "app/QA101:public.jobs_status_created_at_idx"),
        (WEIRD, f"{WEIRD}/QA101:public.jobs_status_created_at_idx"),
    ]
    app = next(m for m in doc["databases"] if m["database"] == "app")
    # The database's own report is a run's on it alone: its keys are its own.
    assert app["report"]["findings"][0]["key"] == "QA101:public.jobs_status_created_at_idx"
    assert doc["summary"] == {"critical": 0, "warning": 3, "info": 0, "skipped": 0,
                              "not_judged": 2}  # fmt: skip


def test_text_and_markdown_put_what_was_not_judged_first() -> None:
    for fmt in ("text", "markdown"):
        text = _text(fmt, _fleet())
        down = text.index("cannot connect to host=db: refused")
        assert down < text.index("QA101"), fmt
        assert "GRANT CONNECT ON DATABASE locked TO monitor;" in text
        assert "app/public.jobs_status_created_at_idx" in text
    md = _text("markdown", _fleet())
    # Each database's report one heading level down: one title for the page.
    assert re.findall(r"^# .*", md, re.M) == ["# qadvisor fleet report"]
    assert "## qadvisor report: app on PostgreSQL 18.6" in md


def test_html_anchors_are_unique_and_names_escaped() -> None:
    page = _text("html", _fleet())
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    for href in re.findall(r'href="#([^"]+)"', page):
        assert href in ids, href
    assert "<h1>" in page and page.count("<h1>") == 1
    assert "we&quot;ird\\db" in page and WEIRD not in page


def test_sarif_places_each_result_in_its_database() -> None:
    doc = json.loads(_text("sarif", _fleet()))
    assert_valid_sarif(doc)
    (run,) = doc["runs"]
    uris = sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                  for r in run["results"])  # fmt: skip
    assert uris == [
        "postgresql/%2E%2E/public/jobs_status_created_at_idx",
        "postgresql/app/public/jobs_status_created_at_idx",
        "postgresql/we%22ird%5Cdb%0Aname%2Fx/public/jobs_status_created_at_idx",
    ]
    assert not run["invocations"][0]["executionSuccessful"]
    levels = {n["message"]["text"].split(" not judged")[0]: n["level"]
              for n in run["invocations"][0]["toolExecutionNotifications"]}  # fmt: skip
    assert levels == {"down": "error", "locked": "warning"}


def test_junit_has_a_suite_per_database() -> None:
    root = ET.fromstring(_text("junit", _fleet()))
    assert [s.attrib["name"] for s in root] == [
        "qadvisor ..", "qadvisor app", "qadvisor down", "qadvisor locked",
        f"qadvisor {WEIRD}",
    ]  # fmt: skip
    assert (root.attrib["errors"], root.attrib["failures"]) == ("1", "3")
    names = [c.attrib["name"] for c in root.iter("testcase")]
    assert "app/QA101:public.jobs_status_created_at_idx" in names
    assert len(names) == len(set(names))


def test_openmetrics_reads_back_with_both_parsers() -> None:
    text = _text("openmetrics", _fleet())
    assert text.endswith("# EOF\n")
    om = [(s.name, s.labels, s.value) for f in
          openmetrics_parser.text_string_to_metric_families(text) for s in f.samples]  # fmt: skip
    plain = [(s.name, s.labels, s.value) for f in
             text_parser.text_string_to_metric_families(text) for s in f.samples]  # fmt: skip
    assert om == plain
    judged = {s[1]["database"]: (s[2], s[1].get("reason")) for s in om
              if s[0] == "qadvisor_database_judged"}  # fmt: skip
    assert judged == {
        "..": (1, None),
        "app": (1, None),
        WEIRD: (1, None),
        "down": (0, "connect_failed"),
        "locked": (0, "no_connect_privilege"),
    }
    findings = [s for s in om if s[0] == "qadvisor_findings"]
    assert {s[1]["database"] for s in findings} == {"..", "app", WEIRD}
    assert all(s[1]["severity"] == "warning" and s[1]["table"] == "jobs" for s in findings)
    # Each family declared once, in one piece, its unit a suffix of its name.
    declared = re.findall(r"^# TYPE (\S+) gauge$", text, re.M)
    assert len(declared) == len(set(declared))
    for name, unit in re.findall(r"^# UNIT (\S+) (\S+)$", text, re.M):
        assert name.endswith(f"_{unit}")
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed (Debian: apt-get install prometheus)"
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert (lint.returncode, lint.stdout, lint.stderr) == (0, "", "")


def test_openmetrics_of_one_database_is_that_database_judged() -> None:
    text = openmetrics.render(_report("app"))
    families = {f.name for f in openmetrics_parser.text_string_to_metric_families(text)}
    assert {
        "qadvisor_database_judged",
        "qadvisor_findings",
        "qadvisor_queue_live_rows",
        "qadvisor_queue_index_bytes",
        "qadvisor_queue_vacuum_trigger_dead_tuples",
    } <= families
    assert 'qadvisor_database_judged{database="app"} 1' in text
    # A queue whose live set is unknown gets no guessed figure.
    unknown = replace(_report("app").snapshot, queues=(replace(_report("app").snapshot.queues[0],
                                                                   live=None),))  # fmt: skip
    text = openmetrics.render(replace(_report("app"), snapshot=unknown))
    assert "qadvisor_queue_live_rows" not in text and "qadvisor_queue_archive_ratio" not in text
    assert "qadvisor_queue_table_rows" in text
