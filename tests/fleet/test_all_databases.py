"""`qadvisor check --all-databases` on a server of 50-odd databases (tests/fleet/conftest.py):
every database reported, the ones it could not judge as lines with their reason, the database
named in every finding and key, one report in every format, the exit code from the worst."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from qadvisor.settings.resolve import ENV_VARIABLES
from tests.fleet.conftest import (
    CLOSED,
    HEALTHY,
    IDS_USED,
    LOCKED,
    MONITOR,
    REJECTED,
    SEEDS,
    TEMPLATE,
    Fleet,
    FleetRun,
    write_lines,
)
from tests.helpers import Run, qadvisor
from tests.json_schemas import assert_valid_fleet_report, assert_valid_report, assert_valid_sarif

pytestmark = pytest.mark.server


def checked(*args: str) -> tuple[Run, dict[str, Any]]:
    run = qadvisor("check", *args, "--format", "json", timeout=300)
    assert run.stdout.startswith("{"), run.stderr
    report = json.loads(run.stdout)
    assert_valid_fleet_report(report)
    return run, report


def by_database(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["database"]: m for m in report["databases"]}


def test_every_database_is_reported_the_refusals_as_lines_and_the_exit_code_is_the_worst(
    fleet: Fleet, fleet_run: FleetRun
) -> None:
    run, report, files = fleet_run, fleet_run.report, fleet_run.files
    # One database was refused by the server (pg_hba.conf), and the seeds have warnings: the
    # findings win (exit 1), as on one database (qadvisor.errors), and the report of all the
    # others is on stdout all the same.
    assert run.rc == 1, run.stderr
    members = by_database(report)
    assert set(members) == fleet.listed  # the template and template0/1 are left out
    assert TEMPLATE not in members and "template1" not in members
    assert report["fleet"] == {
        "source": report["fleet"]["source"], "jobs": 4, "databases": len(fleet.listed),
        "judged": len(fleet.listed) - 3, "not_judged": 3,
    }  # fmt: skip
    assert "user=" not in report["fleet"]["source"]

    closed, locked, rejected = members[CLOSED], members[LOCKED], members[REJECTED]
    assert closed["not_judged"] == "no_connections" and closed["report"] is None
    assert "datallowconn is false" in closed["reason"]
    assert locked["not_judged"] == "no_connect_privilege"
    assert locked["grants"] == [f"GRANT CONNECT ON DATABASE {LOCKED} TO {MONITOR};"]
    assert rejected["not_judged"] == "connect_failed"
    assert "pg_hba.conf rejects connection" in rejected["reason"]

    # Each judged database's report is the report a run on it alone prints.
    for name in {*HEALTHY, *SEEDS, "postgres"}:
        member = members[name]
        assert member["judged"] and member["not_judged"] is None, member["reason"]
        assert_valid_report(member["report"])
        assert member["report"]["database"] == name
    for name in HEALTHY:
        own = members[name]["report"]
        assert [q["table"] for q in own["queues"]] == ["jobs"], name
        assert own["findings"] == [], (name, own["findings"])
    for name in ("app07", "seed_archive"):
        alone = qadvisor("check", fleet.dsn(name), "--format", "json")
        assert alone.rc in (0, 1), alone.stderr
        assert members[name]["report"] == json.loads(alone.stdout), name

    # The seeds' findings, each naming its database, in its key too.
    found = {(f["database"], f["code"]): f for f in report["findings"]}
    assert set(found) == {(db, code) for db, codes in SEEDS.items() for code in codes}
    archive = found[("seed_archive", "QA101")]
    assert archive["key"] == "seed_archive/QA101:public.jobs_status_created_at_idx"
    assert found[("seed_ids", "QA206")]["severity"] == "critical"
    assert found[("seed_ids", "QA206")]["evidence"]["ids_used"] == IDS_USED + 2_000
    assert report["findings"][0]["severity"] == "critical"  # sorted, worst first
    own_keys = {f["key"] for f in members["seed_archive"]["report"]["findings"]}
    assert own_keys == {"QA101:public.jobs_status_created_at_idx", "QA201:public.jobs"}
    assert report["summary"] == {
        "critical": 1, "warning": 3, "info": 0, "not_judged": 3,
        "skipped": sum(len(m["report"]["skipped"]) for m in members.values() if m["report"]),
    }  # fmt: skip

    # The same run, the other formats.
    sarif = json.loads(files["sarif"].read_text())
    assert_valid_sarif(sarif)
    (sarif_run,) = sarif["runs"]
    fingerprints = {r["partialFingerprints"]["qadvisorKey/v1"] for r in sarif_run["results"]}
    assert fingerprints == {f["key"] for f in report["findings"]}
    assert not sarif_run["invocations"][0]["executionSuccessful"]
    notes = [
        n["message"]["text"] for n in sarif_run["invocations"][0]["toolExecutionNotifications"]
    ]
    assert any(n.startswith(f"{REJECTED} not judged: ") for n in notes)
    junit = ET.parse(files["junit"]).getroot()
    suites = {s.attrib["name"]: s for s in junit}
    assert set(suites) == {f"qadvisor {name}" for name in fleet.listed}
    assert junit.attrib["errors"] == "1" and junit.attrib["failures"] == "4"
    assert suites[f"qadvisor {REJECTED}"].find("testcase/error") is not None
    names = {c.attrib["name"] for c in suites["qadvisor seed_archive"].iter("testcase")}
    assert "seed_archive/QA101:public.jobs_status_created_at_idx" in names
    text = files["text"].read_text()
    for name in (CLOSED, LOCKED, REJECTED):
        assert re.search(rf"^  {name}: ", text, re.M), text[:3000]
    assert "seed_archive/public.jobs_status_created_at_idx" in text
    assert "Not an all-clear: 3 databases could not be judged" in text


def test_the_exit_code_is_the_worst_of_the_databases(fleet: Fleet, tmp_path: Path) -> None:
    def dsn_file(*names: str) -> Path:
        return write_lines(tmp_path / f"{'-'.join(names)}.dsn", [fleet.dsn(n) for n in names])

    healthy, _ = checked("--dsn-file", str(dsn_file("app01", "app02")))
    assert healthy.rc == 0, healthy.stderr
    warned, report = checked("--dsn-file", str(dsn_file("app01", "seed_archive")))
    assert warned.rc == 1 and [f["code"] for f in report["findings"]] == ["QA101", "QA201"]
    gate, _ = checked("--dsn-file", str(dsn_file("seed_archive")), "--fail-on", "critical")
    assert gate.rc == 0
    critical, _ = checked("--dsn-file", str(dsn_file("seed_ids")), "--fail-on", "critical")
    assert critical.rc == 1
    # A database that refuses the connection is not judged (exit 3) whatever --fail-on says;
    # one that accepts none (datallowconn false) too, when a DSN file names it.
    rejected, _ = checked("--dsn-file", str(dsn_file("app01", REJECTED)), "--fail-on", "never")
    assert rejected.rc == 3
    refused, report = checked("--dsn-file", str(dsn_file("app01", CLOSED)))
    assert refused.rc == 3
    label = f"{fleet.server.socket_dir}:{fleet.server.port}/{CLOSED}"
    closed = by_database(report)[label]
    assert closed["not_judged"] == "connect_failed"
    assert "not currently accepting connections" in closed["reason"]


def test_progress_is_shown_on_a_terminal_only(fleet: Fleet, tmp_path: Path) -> None:
    args = ["check", "--dsn-file", str(write_lines(tmp_path / "two.dsn",
            [fleet.dsn("app01"), fleet.dsn("app02")])), "--format", "json"]  # fmt: skip
    piped = qadvisor(*args)
    assert piped.rc == 0 and "checking databases" not in piped.stderr
    assert piped.stderr == "", piped.stderr
    # stderr a terminal, stdout a pipe: the bar is drawn on stderr, the report stays clean.
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES} | {"COLUMNS": "100"}
    with subprocess.Popen([sys.executable, "-m", "qadvisor", *args], stdout=subprocess.PIPE,
                          stderr=follower, env=env) as proc:  # fmt: skip
        os.close(follower)
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
        assert proc.stdout is not None
        out = proc.stdout.read()
        assert proc.wait(120) == 0
    os.close(leader)
    assert b"checking databases" in drawn, drawn
    assert_valid_fleet_report(json.loads(out))
