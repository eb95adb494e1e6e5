"""A third-party pack registers through the same door as the built-in one.

The pack is the example of docs/writing-checks.md, taken from the page as it is, written to a
temporary directory with a fake installed distribution (``*.dist-info`` with METADATA and
entry_points.txt) and put on sys.path: nothing is pip-installed, nothing outside tmp_path is
touched.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from qadvisor.docs import check_page
from qadvisor.engine import run_checks
from qadvisor.model import Skip, TableStats
from qadvisor.registry import Check, PackError, load_checks
from qadvisor.render import json as json_render
from tests import snapshots as S
from tests.helpers import assert_quiet, qadvisor

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "writing-checks.md"

# A pack that takes a code qadvisor already uses.
DUPLICATE_PACK = '''
from qadvisor.api import Snapshot, Severity, check


@check("QA101", "something-else", severity=Severity.INFO, category="indexes")
def run(snapshot: Snapshot, options: object) -> list[object]:
    """Reuses a built-in code."""
    return []
'''

Install = Callable[[str, str, str], Path]


def guide_example(marker: str = "acme_checks.py") -> str:
    """A Python example of docs/writing-checks.md, the one after ``<!-- example: marker -->``."""
    pattern = rf"<!-- example: {re.escape(marker)} -->\s*```python\n(.*?)\n```"
    m = re.search(pattern, GUIDE.read_text(), re.S)
    assert m, f"{GUIDE} lost its {marker} example"
    return m.group(1) + "\n"


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """Install a one-module pack as distribution ``<module>-1.0`` on a fresh sys.path entry."""
    site = tmp_path / "site-packages"
    site.mkdir()
    modules: list[str] = []

    def install(module: str, source: str, entry_point: str) -> Path:
        (site / f"{module}.py").write_text(source)
        dist = site / f"{module}-1.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 1.0\n"
        )
        (dist / "entry_points.txt").write_text(f"[qadvisor.checks]\n{entry_point} = {module}\n")
        modules.append(module)
        sys.modules.pop(module, None)
        # The metadata finder caches directory listings; a new dist-info must be seen now.
        importlib.invalidate_caches()
        return site

    monkeypatch.syspath_prepend(str(site))
    yield install
    for module in modules:
        sys.modules.pop(module, None)
    importlib.invalidate_caches()


def acme(checks: tuple[Check, ...]) -> Check:
    (chk,) = [c for c in checks if c.code == "ACME101"]
    return chk


def test_the_pack_loads_next_to_the_built_in_checks(install: Install) -> None:
    install("acme_checks", guide_example(), "acme")
    checks = load_checks()
    codes = [c.code for c in checks]
    assert codes == sorted(codes)
    assert "ACME101" in codes and {"QA101", "QA201"} <= set(codes)
    chk = acme(checks)
    assert chk.name == "queue-dead-tuples-over-budget"
    assert chk.run.__module__ == "acme_checks"
    # The pack reached qadvisor through qadvisor.api alone.
    imported = re.findall(r"^(?:from|import) (\S+)", guide_example(), re.M)
    assert {m for m in imported if m.startswith("qadvisor")} == {"qadvisor.api"}


def test_the_check_finds_on_a_hand_built_snapshot(install: Install) -> None:
    install("acme_checks", guide_example(), "acme")
    checks = load_checks()
    snap = S.snapshot(S.jobs_table(stats=TableStats(n_dead_tup=1_753_949)))
    report = run_checks(snap, checks)

    (finding,) = [f for f in report.findings if f.code == "ACME101"]
    chk = acme(checks)
    assert finding.name == "queue-dead-tuples-over-budget"
    assert finding.severity == chk.severity
    assert finding.key == "ACME101:public.jobs"
    assert finding.docs == chk.docs_path and finding.docs.endswith("ACME101.md")
    assert finding.evidence["n_dead_tup"] == 1_753_949
    assert finding.evidence["max_dead_tuples"] == 100_000
    assert finding.fix is not None
    assert finding.fix.statements == ("VACUUM (ANALYZE) public.jobs;",)
    assert "ACME101" in report.checks_run
    # Next to the built-in findings on the same snapshot, in the same report.
    assert "QA201" in {f.code for f in report.findings}

    data = json.loads(json_render.render(report))
    (item,) = [f for f in data["findings"] if f["code"] == "ACME101"]
    assert item["docs"] == finding.docs and item["key"] == "ACME101:public.jobs"
    assert item["fix"]["safety"] == "safe"


def test_options_ignores_and_unmet_work_as_for_built_in_checks(install: Install) -> None:
    install("acme_checks", guide_example(), "acme")
    chk = acme(load_checks())
    snap = S.snapshot(S.jobs_table(stats=TableStats(n_dead_tup=1_753_949)))

    loose = chk.options(max_dead_tuples=2_000_000)
    assert_quiet(run_checks(snap, [chk], options={"ACME101": loose}), "ACME101", live=False)
    assert not run_checks(snap, [chk], ignore=["ACME101:public.jobs"]).findings
    quiet = S.snapshot(S.jobs_table(stats=TableStats(n_dead_tup=1_000)))
    assert_quiet(run_checks(quiet, [chk]), "ACME101", live=False)
    # A queue whose table facts are missing is a skip of that queue.
    (skip,) = run_checks(dataclasses.replace(quiet, tables=()), [chk]).skipped
    assert skip.queue == "public.jobs"

    # It requires table_facts: when they could not be read, it is a skip, not a pass.
    reason = "the queue tables' catalog facts could not be read: canceling statement"
    blind = S.snapshot(S.jobs_table(stats=TableStats(n_dead_tup=1_753_949)))
    blind.unavailable["table_facts"] = reason
    report = run_checks(blind, [chk])
    assert report.findings == ()
    assert report.skipped == (Skip("ACME101", reason, None, "table_facts"),)
    assert chk.requires == ("table_facts",)


def test_explain_documents_the_third_party_check(install: Install) -> None:
    install("acme_checks", guide_example(), "acme")
    page = check_page(acme(load_checks()))
    assert page.startswith("# ACME101 queue-dead-tuples-over-budget\n")
    for heading in ("## What it finds", "## Why it matters", "## How to fix"):
        assert heading in page
    # The option's comment becomes its "why".
    assert "| `max_dead_tuples` | 100,000 | ACME's on-call runbook" in page


def test_the_cli_runs_the_installed_pack(install: Install, tmp_path: Path) -> None:
    site = install("acme_checks", guide_example(), "acme")
    snapshot = tmp_path / "jobs.json"
    snap = S.snapshot(S.jobs_table(stats=TableStats(n_dead_tup=1_753_949)))
    snapshot.write_text(json.dumps(snap.to_dict()))
    path = [str(site), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}

    run = qadvisor("explain", "ACME101", env=env)
    assert run.rc == 0, run.stderr
    assert run.stdout.startswith("# ACME101 queue-dead-tuples-over-budget")

    run = qadvisor(
        "check", "--snapshot", str(snapshot), "--format", "json", "--fail-on", "never", env=env
    )
    assert run.rc == 0, run.stderr
    (item,) = run.findings("ACME101")
    assert item["docs"].endswith("ACME101.md")
    assert item["fix"]["statements"] == ["VACUUM (ANALYZE) public.jobs;"]


def test_a_pack_that_reuses_a_built_in_code_stops_loading(install: Install) -> None:
    site = install("dup_checks", DUPLICATE_PACK, "dup")
    with pytest.raises(PackError, match=r"check code QA101 is registered twice: by pack '"):
        load_checks()
    # On the command line: one line naming both packs, exit 2 (not 1, which means findings).
    path = [str(site), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    run = qadvisor("explain", env=env)
    assert run.rc == 2 and "Traceback" not in run.stderr
    assert "'builtin'" in run.stderr and "'dup'" in run.stderr


def test_a_pack_that_fails_to_import_is_a_usage_error(install: Install) -> None:
    site = install("broken_checks", "import no_such_module_anywhere\n", "broken")
    path = [str(site), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    run = qadvisor("explain", "QA101", env=env)
    assert run.rc == 2
    assert run.stderr.startswith("qadvisor: error: check pack 'broken'")


def test_the_guide_s_own_tests_pass(install: Install) -> None:
    install("acme_checks", guide_example(), "acme")
    namespace: dict[str, object] = {}
    exec(compile(guide_example("test_acme_checks.py"), str(GUIDE), "exec"), namespace)
    tests = [fn for name, fn in namespace.items() if name.startswith("test_") and callable(fn)]
    assert len(tests) == 3
    for test in tests:
        test()
