"""action.yml, run as GitHub's runner runs a composite action: its steps in order, each
``run:`` in ``bash --noprofile --norc -eo pipefail`` with the runner's variables (RUNNER_TEMP,
GITHUB_ACTION_PATH, GITHUB_PATH, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, GITHUB_ACTIONS, CI),
``${{ }}`` expressions evaluated, ``if:`` conditions applied (a step after a failed one runs
only if its condition asks for it). A ``uses:`` step (code scanning's upload) is not run: the
test checks what it would be given. The expressions the action may use are the few the small
evaluator here knows; any other fails the test, so nothing is skipped unseen.

The action installs qadvisor from its own checkout (a copy of this repository's files) into a
fresh environment, so this test builds and installs it: minutes on a loaded machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import TestDB
from tests.helpers import build_archive_queue
from tests.json_schemas import assert_valid_sarif
from tests.project.install import ROOT, outside_env, source_copy
from tests.test_cli import HEALTHY_CLAIM

pytestmark = [pytest.mark.server, pytest.mark.install]

_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}", re.S)
_STATUS = re.compile(r"\b(success|failure|cancelled|always)\(\)")


@dataclass
class Job:
    """One run of the action in a job: where it runs, what it was given, what it did."""

    action: Path
    workspace: Path
    temp: Path
    inputs: dict[str, str]
    env: dict[str, str]
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    path: list[str] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    uses: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    failed_at: str | None = None

    @property
    def summary(self) -> Path:
        return self.temp / "step-summary.md"

    def evaluate(self, expression: str) -> Any:
        """A GitHub expression of the few forms the action uses."""

        def value(name: str) -> str:
            if name.startswith("inputs."):
                return self.inputs[name.removeprefix("inputs.")]
            m = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", name)
            assert m, f"action.yml uses an expression this test does not know: {name}"
            return self.outputs.get(m.group(1), {}).get(m.group(2), "")

        text = re.sub(
            r"hashFiles\(([^)]*)\)",
            lambda m: repr("hash" if (self.workspace / value(m.group(1).strip())).is_file()
                           else ""),
            expression,
        )  # fmt: skip
        text = _STATUS.sub(
            lambda m: repr({"success": self.failed_at is None, "failure": self.failed_at
                            is not None, "cancelled": False, "always": True}[m.group(1)]),
            text,
        )  # fmt: skip
        text = re.sub(r"\b(inputs\.[\w-]+|steps\.[\w-]+\.outputs\.[\w-]+)", lambda m: repr(
            value(m.group(1))), text)  # fmt: skip
        text = text.replace("&&", " and ").replace("||", " or ")
        text = re.sub(r"!(?!=)", " not ", text)
        return eval(text, {"__builtins__": {}}, {})

    def substitute(self, text: str) -> str:
        return _EXPRESSION.sub(lambda m: str(self.evaluate(m.group(1))), text)

    def runs(self, step: dict[str, Any]) -> bool:
        condition = str(step.get("if", "success()"))
        condition = _EXPRESSION.sub(lambda m: m.group(1), condition)
        if not _STATUS.search(condition):
            condition = f"success() && ({condition})"
        return bool(self.evaluate(condition))


def run_action(job: Job, installed: list[str] | None = None) -> Job:
    """The action's steps in ``job``; with ``installed`` (the GITHUB_PATH of an earlier run in
    the same runner), its install step is taken as done: it builds the same checkout again."""
    spec = yaml.safe_load((job.action / "action.yml").read_text())
    declared = spec["inputs"]
    unknown = set(job.inputs) - set(declared)
    assert not unknown, f"inputs action.yml does not declare: {unknown}"
    job.inputs = {name: str(d.get("default", "")) for name, d in declared.items()} | job.inputs
    assert spec["runs"]["using"] == "composite"
    if installed is not None:
        job.path = list(installed)
    for i, step in enumerate(spec["runs"]["steps"]):
        name = step.get("id") or step.get("name") or str(i)
        if not job.runs(step) or (installed is not None and name == "Install qadvisor"):
            continue
        if "uses" in step:
            given = {k: job.substitute(str(v)) for k, v in step.get("with", {}).items()}
            job.uses.append((step["uses"], given))
            continue
        assert step.get("shell") == "bash", step  # a composite step must name its shell
        output = job.temp / f"output-{i}"
        output.write_text("")
        (job.temp / "path").touch()
        env = job.env | {
            "GITHUB_ACTIONS": "true", "CI": "true", "RUNNER_TEMP": str(job.temp),
            "GITHUB_ACTION_PATH": str(job.action), "GITHUB_WORKSPACE": str(job.workspace),
            "GITHUB_PATH": str(job.temp / "path"), "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(job.summary),
        }  # fmt: skip
        env |= {k: job.substitute(str(v)) for k, v in step.get("env", {}).items()}
        env["PATH"] = os.pathsep.join([*reversed(job.path), env["PATH"]])
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", job.substitute(step["run"])],
            cwd=job.workspace, env=env, capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        job.logs[name] = proc.stdout + proc.stderr
        job.outputs[name] = dict(
            line.split("=", 1) for line in output.read_text().splitlines() if "=" in line
        )
        job.path = [p for p in (job.temp / "path").read_text().splitlines() if p]
        if proc.returncode != 0 and job.failed_at is None:
            job.failed_at = name
    return job


def test_the_action_installs_qadvisor_gates_the_job_and_uploads_sarif(
    db: TestDB, tmp_path: Path
) -> None:
    action = source_copy(tmp_path / "action")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    # The job's environment: a runner's Python on PATH, nothing of this checkout.
    env = outside_env(Path(sys.executable).parent)
    build_archive_queue(db, archive=2_000, composite=False, partial=True)
    (workspace / "qadvisor.toml").write_text(f"queries = [{json.dumps(HEALTHY_CLAIM)}]\n")
    temp = tmp_path / "runner-temp"
    temp.mkdir()

    first: list[Job] = []

    def job(**inputs: str) -> Job:
        given = {"dsn": db.dsn, "python": sys.executable, **inputs}
        done = run_action(Job(action, workspace, temp, given, env),
                          first[0].path if first else None)  # fmt: skip
        first[:] = first or [done]
        return done

    # A healthy queue every check judged: the job passes, the report is summarised.
    passed = job()
    assert passed.failed_at is None, passed.logs
    assert passed.outputs["check"] == {"exit-code": "0"}
    assert "No problems found on the queue tables." in passed.summary.read_text()
    assert_valid_sarif(json.loads((workspace / "qadvisor.sarif").read_text()))
    ((uses, given),) = passed.uses
    assert uses.startswith("github/codeql-action/upload-sarif@")
    assert given == {"sarif_file": "qadvisor.sarif", "category": "qadvisor"}
    assert str(ROOT) not in passed.logs["Install qadvisor"]

    # Autovacuum off on the queue: a warning. The check step records exit 1 and passes, the
    # SARIF is uploaded all the same, and the last step fails the job with that code.
    db.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")
    passed.summary.write_text("")
    failed = job(**{"sarif-category": "staging"})
    assert failed.outputs["check"] == {"exit-code": "1"}
    assert failed.failed_at == "Gate on the exit code", failed.logs
    assert re.search(r"^::warning .*title=QA203 ", failed.logs["check"], re.M), failed.logs
    sarif = json.loads((workspace / "qadvisor.sarif").read_text())
    assert_valid_sarif(sarif)
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["QA203"]
    assert failed.uses == [(uses, {"sarif_file": "qadvisor.sarif", "category": "staging"})]
    assert "## Warning (1)" in failed.summary.read_text()

    # Without the claim, the statement checks cannot judge the queue: in CI, exit 3 fails the
    # job unless fail-on-skip says otherwise; fail-on never lets the finding through.
    (workspace / "qadvisor.toml").write_text("")
    blind = job(**{"fail-on": "never", "upload-sarif": "false"})
    assert blind.outputs["check"] == {"exit-code": "3"} and blind.uses == []
    lenient = job(**{"fail-on": "never", "fail-on-skip": "false", "sarif": ""})
    assert lenient.failed_at is None and lenient.outputs["check"] == {"exit-code": "0"}


def test_docs_ci_md_shows_the_action_with_inputs_it_declares() -> None:
    spec = yaml.safe_load((ROOT / "action.yml").read_text())
    page = (ROOT / "docs" / "ci.md").read_text()
    section = page.split("## The GitHub Action", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block, "docs/ci.md shows no workflow under its GitHub Action section"
    example = yaml.safe_load(block.group(1))
    (step,) = [s for s in example["steps"] if "your-org/qadvisor@" in s.get("uses", "")]
    assert set(step["with"]) <= set(spec["inputs"])
    documented = set(re.findall(r"^\| `([\w-]+)` \|", section, re.M))
    assert documented == set(spec["inputs"]), documented ^ set(spec["inputs"])
