"""docs/ci.md works as written: its config file and SQL file, and the exact commands of its
shell blocks and of the GitHub Actions and GitLab CI jobs, run against a real server.

The commands are read from the page, section by section, not copied here: a command changed on
the page is the command tested. Two kinds of line are not run: ``pip install`` (qadvisor is
installed already) and ``git`` (committing is not qadvisor's business). The YAML around the
commands is read for its ``run:`` steps and ``script:`` items only; GitHub's and GitLab's
runners are not emulated beyond the variables the page relies on (CI, GITHUB_ACTIONS,
GITHUB_STEP_SUMMARY, STAGING_DSN).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from qadvisor.settings.resolve import ENV_VARIABLES
from tests.collect.test_statements_collect import build_claim_queue
from tests.conftest import TestDB
from tests.json_schemas import assert_valid_sarif

PAGE = Path(__file__).resolve().parents[2] / "docs" / "ci.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_SKIPPED = ("pip install", "git ")


def _sections() -> dict[str, list[tuple[str, str]]]:
    """Heading -> its fenced blocks (language, body)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for part in re.split(r"^## ", PAGE.read_text(), flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        out[title.strip()] = _FENCE.findall(body)
    return out


def _yaml_commands(body: str) -> list[str]:
    """The shell of each ``run:`` step (one line, or a ``|`` block) and each ``script:`` item."""
    commands: list[str] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"(\s*)(?:- )?run: (.*)$", line)
        if m and m.group(2).strip() == "|":
            indent = len(m.group(1))
            i += 1
            while i < len(lines) and len(lines[i]) - len(lines[i].lstrip()) > indent:
                commands.append(lines[i].strip())
                i += 1
            continue
        if m:
            commands.append(m.group(2).strip())
        s = re.match(r"(\s*)script:\s*$", line)
        if s:
            i += 1
            while i < len(lines) and re.match(r"\s*- ", lines[i]):
                commands.append(lines[i].strip()[2:])
                i += 1
            continue
        i += 1
    return commands


def _commands(section: str, lang: str) -> list[str]:
    out = []
    for block_lang, body in _sections()[section]:
        if block_lang != lang:
            continue
        lines = _yaml_commands(body) if lang == "yaml" else body.splitlines()
        out += [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return [c for c in out if not c.startswith(_SKIPPED)]


def _block(section: str, lang: str) -> str:
    (body,) = [b for lang_, b in _sections()[section] if lang_ == lang]
    return body


def _run(command: str, repo: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES and k != "CI"}
    base.pop("GITHUB_ACTIONS", None)
    path = f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", command],
        cwd=repo, capture_output=True, text=True, timeout=180, env=base | {"PATH": path} | env,
    )  # fmt: skip


def test_the_page_has_what_the_test_runs() -> None:
    sections = _sections()
    titles = ("The repository's side", "Adopting it: the baseline", "GitHub Actions",
              "GitLab CI", "Checking the repository's dequeue SQL against staging")  # fmt: skip
    for title in titles:
        assert title in sections, sorted(sections)
    assert any(c.startswith("qadvisor check") for c in _commands("GitHub Actions", "yaml"))
    assert any(c.startswith("qadvisor check") for c in _commands("GitLab CI", "yaml"))
    assert "upload-sarif" in _block("GitHub Actions", "yaml")
    assert "junit: qadvisor.xml" in _block("GitLab CI", "yaml")


def test_the_commands_of_the_page_on_a_real_server(db: TestDB, tmp_path: Path) -> None:
    build_claim_queue(db)
    repo = tmp_path / "repo"
    (repo / "sql").mkdir(parents=True)
    (repo / "qadvisor.toml").write_text(_block("The repository's side", "toml"))
    (repo / "sql" / "dequeue.sql").write_text(_block("The repository's side", "sql"))
    summary = tmp_path / "summary.md"
    staging = {"STAGING_DSN": db.dsn}

    # Adopting: the baseline written once, from a checkout.
    for command in _commands("Adopting it: the baseline", "sh"):
        run = _run(command, repo, **staging)
        assert run.returncode == 0, (command, run.stderr)
    accepted = json.loads((repo / "qadvisor-baseline.json").read_text())["findings"]
    assert {f["code"] for f in accepted} >= {"QA203", "QA301"}
    assert "QA501" not in {f["code"] for f in accepted}  # the sweeper's is ignored inline

    # As the runners set them: CI=true makes skips fail the gate.
    github = {
        **staging,
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    commands = _commands("GitHub Actions", "yaml")

    # Nothing new: the job passes, and the accepted findings are in the report, apart.
    for command in commands:
        run = _run(command, repo, **github)
        assert run.returncode == 0, (command, run.stdout, run.stderr)
    sarif = json.loads((repo / "qadvisor.sarif").read_text())
    assert_valid_sarif(sarif)
    assert sarif["runs"][0]["results"] == []  # every finding is accepted: alerts close
    assert "## Preexisting" in summary.read_text()
    assert "QA501 ignored on sql/dequeue.sql:9 (comment at sql/dequeue.sql:8): 1 finding" in (
        summary.read_text()
    )

    # Something new on staging: generic plans forced for the database. The check step fails,
    # the files are still written, the new finding is annotated and uploaded at its line.
    db.execute(f"ALTER DATABASE {db.name} SET plan_cache_mode = force_generic_plan")
    summary.write_text("")
    results = [_run(c, repo, **github) for c in commands]
    check_run = next(r for c, r in zip(commands, results, strict=True) if "qadvisor" in c)
    assert check_run.returncode == 1, check_run.stderr
    annotation = r"^::error file=sql/dequeue.sql,line=2,title=QA301 "
    assert re.search(annotation, check_run.stdout, re.M), check_run.stdout
    assert "title=QA203" not in check_run.stdout  # accepted: not announced again
    sarif = json.loads((repo / "qadvisor.sarif").read_text())
    assert_valid_sarif(sarif)
    (result,) = sarif["runs"][0]["results"]
    assert result["ruleId"] == "QA301" and result["level"] == "error"
    assert result["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "sql/dequeue.sql"}, "region": {"startLine": 2},
    }  # fmt: skip
    assert "## Critical (1)" in summary.read_text()

    # GitLab: the JUnit report has the one new finding as its failure.
    for command in _commands("GitLab CI", "yaml"):
        run = _run(command, repo, **staging, CI="true")
        assert run.returncode == 1, (command, run.stderr)
    suite = ET.fromstring((repo / "qadvisor.xml").read_text()).find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failing = [
        c.get("classname") for c in suite.findall("testcase") if c.find("failure") is not None
    ]
    assert failing == ["QA301"]

    # The dequeue SQL against staging: the claim's finding, at its line.
    for command in _commands("Checking the repository's dequeue SQL against staging", "sh"):
        run = _run(command, repo, **staging)
        assert run.returncode == 1, (command, run.stderr)
        assert "sql/dequeue.sql:2 compares status with a parameter" in run.stdout
