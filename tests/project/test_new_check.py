"""A new built-in check needs three files: its module, its test module and its generated docs
page (with README's table and docs/privileges.md, written by the same docgen command). This
test adds a throwaway check to a copy of the repository the way a newcomer would and runs the
meta tests that keep the pack whole over it: the registry-derived codes and names, the
README table, the docs pages, the evidence labels and the fix-steps coverage. Then it leaves
out the labels, and the docs page, and reads what the failure says to add.

Pure (no server): the copy's meta tests run in two subprocesses, about 25 s on an idle
two-core machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHECK = '''"""A throwaway check: a queue table with any dead tuple."""

from __future__ import annotations

from collections.abc import Iterator

from qadvisor.api import Finding, Severity, Skip, Snapshot, Target, check, judgeable_queues

# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {"throwaway_dead_share": "Share of the rows dead"}


@check("QA901", "throwaway-check", severity=Severity.INFO, category="vacuum",
       requires=("table_facts",), labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: object) -> Iterator[Finding | Skip]:
    """A queue table holds a dead tuple.

    ## What it finds
    A queue table with dead tuples.

    ## Why it matters
    It does not: this check exists for one test.

    ## How to fix
    Nothing.

    ## When it stays quiet
    No dead tuple.
    """
    for _queue, table in judgeable_queues(snapshot):
        dead = table.stats.n_dead_tup
        if dead:
            yield Finding(
                target=Target("table", table.schema, table.name, table.name),
                message=f"{table.qualified} holds {dead} dead tuples.",
                evidence={"n_dead_tup": dead, "throwaway_dead_share": dead / (dead + 1)},
            )
'''

TEST = '''"""QA901: tests of the throwaway check."""

from __future__ import annotations

from checks.qa901_throwaway_check import run
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import Pathology, Run, build_archive_queue, check


def test_fires_on_dead_tuples() -> None:
    (finding,) = run.run(S.snapshot(S.jobs_table()), None)
    assert finding.evidence["n_dead_tup"] > 0


def _fix_pathology(db: TestDB) -> Run:
    build_archive_queue(db)
    return check(db)


FIX_PATHOLOGIES = {"throwaway": Pathology(frozenset({"QA901"}), _fix_pathology)}
'''

MODULE = Path("checks/qa901_throwaway_check.py")
TEST_MODULE = Path("tests/checks/test_qa901_throwaway_check.py")
PAGE = Path("docs/checks/QA901.md")
# The meta tests a new check must pass; the pure ones, no server started.
META = [
    "tests/checks/test_pack.py",
    "tests/checks/test_qa901_throwaway_check.py",
    "tests/render/test_render.py::test_every_evidence_field_of_the_built_in_checks_has_a_label",
    "tests/fixes/test_fix_steps.py::test_every_check_has_its_fixes_walked",
]


def _copy(tmp: Path) -> Path:
    """The repository's tracked files as they are in the work tree, under git."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    repo = tmp / "repo"
    for name in filter(None, files.split("\0")):
        source = ROOT / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"],
                   cwd=repo, check=True)  # fmt: skip
    return repo


def _run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The copy's qadvisor and checks come first on the path: the entry point names the
    # package "checks", which is then the copy's.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(repo)
    return subprocess.run(
        [sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )


def _pytest(repo: Path, *tests: str) -> subprocess.CompletedProcess[str]:
    return _run(repo, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                "-m", "not server", *tests)  # fmt: skip


def test_a_new_check_needs_its_module_its_test_and_its_generated_page(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    (repo / MODULE).write_text(CHECK)
    (repo / TEST_MODULE).write_text(TEST)
    docgen = _run(repo, "-m", "qadvisor.docgen.pages", "docs/checks")
    assert docgen.returncode == 0, docgen.stderr
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=repo, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    changed = {line[3:] for line in status.splitlines()}
    # The three files, and what the docgen command writes from the registry.
    assert changed == {str(MODULE), str(TEST_MODULE), str(PAGE), "README.md",
                       "docs/privileges.md"}, changed  # fmt: skip
    passed = _pytest(repo, *META)
    assert passed.returncode == 0, passed.stdout[-4000:]

    # Its labels and its page left out (one run): the label test names the field and where
    # its words go, the docs test the page and the command that writes it.
    (repo / MODULE).write_text(CHECK.replace(", labels=LABELS", ""))
    (repo / PAGE).unlink()
    failed = _pytest(repo, META[2], "tests/checks/test_pack.py::test_docs_pages_match_the_code")
    assert failed.returncode == 1
    assert "2 failed" in failed.stdout, failed.stdout[-4000:]
    assert "QA901 emits evidence fields without a label: throwaway_dead_share" in failed.stdout
    assert "labels= of its @check" in failed.stdout
    assert f"missing {repo / PAGE}: run python -m qadvisor.docgen.pages docs/checks" in (
        failed.stdout
    )
