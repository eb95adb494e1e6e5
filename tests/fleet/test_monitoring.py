"""docs/monitoring.md runs: the OpenMetrics file of a 50-database run is read by the official
Prometheus client parsers (OpenMetrics and text format), passes `promtool check metrics`, and
is taken by a Pushgateway; the alert rules pass `promtool check rules`, and each fires in
`promtool test rules` on series taken from that file (and from two runs on a queue whose ids
are being used up)."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import parser as text_parser
from prometheus_client.openmetrics import parser as openmetrics_parser

from qadvisor.render.openmetrics import FAMILIES
from tests.fleet.conftest import HEALTHY, IDS_USED, SEEDS, Fleet, FleetRun, copy_database
from tests.helpers import qadvisor

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "docs" / "qadvisor.rules.yml"
DOC = ROOT / "docs" / "monitoring.md"
# The labels each family may carry: none takes unbounded values.
LABELS = {
    "qadvisor_build_info": {"version"},
    "qadvisor_database_judged": {"database", "reason"},
    "qadvisor_findings": {"database", "code", "name", "severity", "schema", "table"},
    "qadvisor_queue_index_bytes": {"database", "schema", "table", "index"},
    "qadvisor_queue_ids_left": {"database", "schema", "table", "column"},
}
QUEUE_LABELS = {"database", "schema", "table"}

Sample = tuple[str, dict[str, str], float]


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found, (
        f"{name} is not installed (Debian: apt-get install prometheus prometheus-pushgateway)"
    )
    return found


def samples(text: str) -> list[Sample]:
    return [
        (s.name, dict(s.labels), s.value)
        for family in openmetrics_parser.text_string_to_metric_families(text)
        for s in family.samples
    ]


def _canonical(sample: Sample) -> tuple[str, tuple[tuple[str, str], ...], float]:
    """A sample as Prometheus holds it: its labels in order, its value a float64 (an id count
    near 2^63 is rounded there, whatever the file says)."""
    name, labels, value = sample
    return name, tuple(sorted(labels.items())), float(value)


def test_the_rules_in_the_doc_are_the_rules_file() -> None:
    assert f"```yaml\n{RULES.read_text()}```" in DOC.read_text()
    documented = set(re.findall(r"^\| `(qadvisor_\w+)` \|", DOC.read_text(), re.M))
    assert documented == {f.name for f in FAMILIES}


def test_promtool_checks_the_rules() -> None:
    run = subprocess.run([_tool("promtool"), "check", "rules", str(RULES)], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert run.returncode == 0 and "SUCCESS: 4 rules found" in run.stdout, run.stdout + run.stderr


@pytest.mark.server
def test_the_file_is_valid_for_both_parsers_and_promtool(fleet_run: FleetRun) -> None:
    text = fleet_run.files["openmetrics"].read_text()
    assert text.endswith("# EOF\n")
    found = samples(text)
    # The Prometheus text format, as the textfile collector and the Pushgateway read it.
    as_text = [
        (s.name, dict(s.labels), s.value)
        for family in text_parser.text_string_to_metric_families(text)
        for s in family.samples
    ]
    assert sorted(map(_canonical, as_text)) == sorted(map(_canonical, found))
    lint = subprocess.run([_tool("promtool"), "check", "metrics"], input=text,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert lint.returncode == 0 and lint.stdout == "" and lint.stderr == "", (
        lint.stdout + lint.stderr
    )

    for name, labels, _ in found:
        assert set(labels) <= LABELS.get(name, QUEUE_LABELS | ({"database"})), (name, labels)
        assert "dsn" not in labels and "statement" not in labels
    report = fleet_run.report
    judged = {lab["database"]: (v, lab.get("reason")) for n, lab, v in found
              if n == "qadvisor_database_judged"}  # fmt: skip
    assert judged == {
        m["database"]: (1.0 if m["judged"] else 0.0, m["not_judged"]) for m in report["databases"]
    }
    counted: dict[tuple[str, ...], float] = {}
    for f in report["findings"]:
        key = (f["database"], f["code"], f["severity"], f["target"]["table"] or "")
        counted[key] = counted.get(key, 0) + 1
    assert {
        (lab["database"], lab["code"], lab["severity"], lab.get("table", "")): v
        for n, lab, v in found if n == "qadvisor_findings"
    } == counted  # fmt: skip
    # The queue figures agree with the findings' evidence where a check measured them.
    archive = next(f for f in report["findings"] if f["key"] == "seed_archive/QA201:public.jobs")
    figure = {(n, lab["database"]): v for n, lab, v in found if n.startswith("qadvisor_queue_")
              and "index" not in lab and "column" not in lab}  # fmt: skip
    assert figure[("qadvisor_queue_vacuum_trigger_dead_tuples", "seed_archive")] == pytest.approx(
        archive["evidence"]["vacuum_trigger"], abs=1
    )
    ids = {lab["database"]: v for n, lab, v in found if n == "qadvisor_queue_ids_left"}
    assert ids["seed_ids"] == 2**31 - 1 - IDS_USED - 2_000
    for db in HEALTHY:
        assert figure[("qadvisor_queue_live_rows", db)] > 0
        assert figure[("qadvisor_queue_archive_ratio", db)] < 1


@pytest.mark.server
def test_a_pushgateway_takes_the_file(fleet_run: FleetRun, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    gateway = subprocess.Popen(
        [_tool("prometheus-pushgateway"), f"--web.listen-address=127.0.0.1:{port}",
         f"--persistence.file={tmp_path / 'persist'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{base}/-/ready", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the Pushgateway did not start"
                time.sleep(0.2)
        # As docs/monitoring.md pushes it: PUT replaces the group.
        body = fleet_run.files["openmetrics"].read_bytes()
        put = urllib.request.Request(f"{base}/metrics/job/qadvisor/instance/db1", body,
                                     method="PUT")  # fmt: skip
        with urllib.request.urlopen(put, timeout=30) as answer:
            assert answer.status in (200, 202)
        with urllib.request.urlopen(f"{base}/metrics", timeout=30) as answer:
            exposed = answer.read().decode()
    finally:
        gateway.terminate()
        gateway.wait(30)
    pushed = [
        (s.name, dict(s.labels), s.value)
        for family in text_parser.text_string_to_metric_families(exposed)
        for s in family.samples
        if s.name.startswith("qadvisor_")
    ]
    grouped = {"job": "qadvisor", "instance": "db1"}
    ours = [(n, {**lab, **grouped}, v) for n, lab, v in samples(body.decode())]
    assert sorted(map(_canonical, pushed)) == sorted(map(_canonical, ours))


def _go_value(value: float) -> str:
    """``{{ $value }}`` as Go's template prints a float64 (%v): whole numbers below 1e21 in
    full only up to six digits, else in e-notation; the figures tested here are below."""
    assert value == int(value) and abs(value) < 1e6, value
    return str(int(value))


def _annotations(rule: dict[str, Any], labels: dict[str, str], value: float) -> dict[str, str]:
    def fill(template: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m[1], ""), template)
        return text.replace("{{ $value }}", _go_value(value))

    return {k: fill(v) for k, v in rule["annotations"].items()}


def _alert(rule: dict[str, Any], labels: dict[str, str], value: float) -> dict[str, Any]:
    """The alert promtool must see the rule fire for the series ``labels`` at ``value``."""
    return {
        "exp_labels": {**labels, **rule["labels"]},
        "exp_annotations": _annotations(rule, labels, value),
    }


def _series(name: str, labels: dict[str, str]) -> str:
    def quoted(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    return name + "{" + ",".join(f"{k}={quoted(v)}" for k, v in sorted(labels.items())) + "}"


def _metrics_of_one_run(fleet: Fleet, database: str) -> list[Sample]:
    run = qadvisor("check", fleet.dsn(database), "--format", "openmetrics")
    assert run.rc in (0, 1), run.stderr
    return samples(run.stdout)


@pytest.mark.server
def test_each_alert_rule_fires_on_series_taken_from_the_file(
    fleet: Fleet, fleet_run: FleetRun, tmp_path: Path
) -> None:
    rules = {r["alert"]: r for r in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]}
    found = samples(fleet_run.files["openmetrics"].read_text())
    report = fleet_run.report

    # Ids used up at a measured pace: a copy of seed_ids, read by qadvisor before and after
    # 10,000 more jobs, the two runs set a minute apart; the series goes on at that pace.
    burning = "ids_burning"
    admin = fleet.db("postgres")
    copy_database(fleet, burning, "seed_ids")
    try:
        before = _metrics_of_one_run(fleet, burning)
        fleet.db(burning).execute(
            "INSERT INTO jobs (status) SELECT 'done' FROM generate_series(1, 10000)"
        )
        after = _metrics_of_one_run(fleet, burning)
    finally:
        admin.execute(f"DROP DATABASE {burning} WITH (FORCE)")
    (ids_labels, first) = next((lab, v) for n, lab, v in before if n == "qadvisor_queue_ids_left")
    second = next(v for n, lab, v in after if n == "qadvisor_queue_ids_left")
    assert first - second == 10_000
    step = second - first

    series: list[dict[str, str]] = []
    tests: list[dict[str, Any]] = []

    def add(name: str, labels: dict[str, str], values: str) -> None:
        series.append({"series": _series(name, labels), "values": values})

    # 1. A new critical finding: the file's, appearing an hour into the series.
    criticals = [(lab, v) for n, lab, v in found if n == "qadvisor_findings"
                 and lab["severity"] == "critical"]  # fmt: skip
    assert [lab["database"] for lab, _ in criticals] == ["seed_ids"]
    for labels, value in criticals:
        add("qadvisor_findings", labels, f"_x59 {value:g}x180")
    others = [
        (lab, v)
        for n, lab, v in found
        if n == "qadvisor_findings" and lab["severity"] != "critical"
    ]
    for labels, value in others:
        add("qadvisor_findings", labels, f"{value:g}x240")
    rule = rules["QadvisorNewCriticalFinding"]
    fired = [_alert(rule, lab, v) for lab, v in criticals]
    tests += [
        {"eval_time": "30m", "alertname": "QadvisorNewCriticalFinding", "exp_alerts": []},
        {"eval_time": "90m", "alertname": "QadvisorNewCriticalFinding", "exp_alerts": fired},
        # An hour after it appeared it is no longer new: the rule says so once.
        {"eval_time": "3h", "alertname": "QadvisorNewCriticalFinding", "exp_alerts": []},
    ]

    # 2. The vacuum trigger, every queue's figures as the file has them, for two hours.
    wanted = {"qadvisor_queue_vacuum_trigger_dead_tuples", "qadvisor_queue_live_rows"}
    queue_figures = [(n, lab, v) for n, lab, v in found if n in wanted]
    for name, labels, value in queue_figures:
        add(name, labels, f"{value:g}x120")
    rule = rules["QadvisorVacuumTriggerSetByArchive"]
    triggers = {lab["database"]: (lab, v) for n, lab, v in queue_figures
                if n == "qadvisor_queue_vacuum_trigger_dead_tuples"}  # fmt: skip
    # The databases QA201 found the trigger set by the archive in: the rule must agree.
    qa201 = sorted(f["database"] for f in report["findings"] if f["code"] == "QA201")
    assert qa201 == ["seed_archive"] and set(SEEDS) <= set(triggers)
    fired = [_alert(rule, *triggers[db]) for db in qa201]
    tests += [
        {"eval_time": "30m", "alertname": "QadvisorVacuumTriggerSetByArchive", "exp_alerts": []},
        {"eval_time": "90m", "alertname": "QadvisorVacuumTriggerSetByArchive", "exp_alerts": fired},
    ]

    # 3. Ids running out: the burning copy's two readings and its pace; every queue of the
    # file at its one reading, unchanged (no alert).
    pace = " ".join(f"{first + step * i:.0f}" for i in range(40))
    add("qadvisor_queue_ids_left", ids_labels, pace)
    for name, labels, value in found:
        if name == "qadvisor_queue_ids_left":
            add(name, labels, f"{value:.0f}x40")
    rule = rules["QadvisorQueueIdsRunningOut"]
    fired = [_alert(rule, ids_labels, 0)]
    tests += [
        {"eval_time": "5m", "alertname": "QadvisorQueueIdsRunningOut", "exp_alerts": []},
        {"eval_time": "20m", "alertname": "QadvisorQueueIdsRunningOut", "exp_alerts": fired},
    ]

    # 4. The databases that could not be judged, as the file has them, for an hour.
    rule = rules["QadvisorDatabaseNotJudged"]
    judged = [(lab, v) for n, lab, v in found if n == "qadvisor_database_judged"]
    for labels, value in judged:
        add("qadvisor_database_judged", labels, f"{value:g}x60")
    fired = [_alert(rule, lab, v) for lab, v in judged if v == 0]
    assert sorted(a["exp_labels"]["database"] for a in fired) == sorted(
        m["database"] for m in report["databases"] if not m["judged"]
    )
    tests += [
        {"eval_time": "10m", "alertname": "QadvisorDatabaseNotJudged", "exp_alerts": []},
        {"eval_time": "40m", "alertname": "QadvisorDatabaseNotJudged", "exp_alerts": fired},
    ]

    unit = tmp_path / "qadvisor-rules-test.yml"
    unit.write_text(json.dumps({  # JSON is YAML: promtool reads it as such
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": tests}],
    }))  # fmt: skip
    run = subprocess.run([_tool("promtool"), "test", "rules", str(unit)], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    assert "SUCCESS" in run.stdout
