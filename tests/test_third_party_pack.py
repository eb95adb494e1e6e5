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
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from qadvisor.docgen.pages import check_page
from qadvisor.engine import run_checks
from qadvisor.model import Severity, Skip, TableStats
from qadvisor.registry import Check, PackError, load_checks
from qadvisor.render import json as json_render
from qadvisor.render import markdown
from tests import snapshots as S
from tests.helpers import Run, assert_quiet, qadvisor

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

# A pack written against names qadvisor.api had before 0.1 settled it (Issue and Unmet for
# Finding and Skip, queue_facts for judgeable_queues): no release carried them, and the door
# names what it lacks.
OLD_PACK = """
from qadvisor.api import Issue, Severity, check
"""

Install = Callable[..., Path]


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

    def install(
        module: str, source: str | dict[str, str], entry_point: str, value: str | None = None
    ) -> Path:
        """``source`` is the module's text, or a package's {file name: text}; the entry point
        names the module unless ``value`` says otherwise."""
        if isinstance(source, str):
            (site / f"{module}.py").write_text(source)
        else:
            (site / module).mkdir()
            for name, text in source.items():
                (site / module / name).write_text(text)
        dist = site / f"{module}-1.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 1.0\n"
        )
        (dist / "entry_points.txt").write_text(
            f"[qadvisor.checks]\n{entry_point} = {value or module}\n"
        )
        modules.append(module)
        for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
            sys.modules.pop(name)
        # The metadata finder caches directory listings; a new dist-info must be seen now.
        importlib.invalidate_caches()
        return site

    monkeypatch.syspath_prepend(str(site))
    yield install
    for module in modules:
        for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
            sys.modules.pop(name)
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
    # The pack's own label reads in the report; a field of qadvisor's shared table too.
    md = markdown.render(report)
    assert "| Dead tuples ACME's runbook allows | 100,000 |" in md
    assert "| Dead tuples | 1,753,949 |" in md


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
    assert report.skipped == (Skip(reason, code="ACME101", fact="table_facts"),)
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


BROKEN_PACK = '''
from qadvisor.api import Snapshot, Severity, check


@check("ACME900", "always-crashes", severity=Severity.WARNING, category="indexes")
def run(snapshot: Snapshot, options: object) -> list[object]:
    """Divides by zero."""
    return [1 // 0]
'''


def test_a_check_that_raises_is_an_internal_error_in_one_line(
    install: Install, tmp_path: Path
) -> None:
    # Exit 4: a bug (here the pack's), one line naming what was raised and where, never its
    # message, which may hold anything.
    site = install("crashing_checks", BROKEN_PACK, "crashing")
    snapshot = tmp_path / "jobs.json"
    snapshot.write_text(json.dumps(S.snapshot(S.jobs_table()).to_dict()))
    path = [str(site), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    env.pop("QADVISOR_TRACEBACK", None)
    run = qadvisor("check", "--snapshot", str(snapshot), env=env)
    assert run.rc == 4 and run.stdout == "", run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line == (
        "qadvisor: internal error: ZeroDivisionError at crashing_checks.py:8 (a bug in "
        "qadvisor or in a check pack; QADVISOR_TRACEBACK=1 prints the traceback)"
    )
    run = qadvisor("check", "--snapshot", str(snapshot), env=env | {"QADVISOR_TRACEBACK": "1"})
    assert run.rc == 4
    assert "Traceback (most recent call last)" in run.stderr and "1 // 0" in run.stderr
    assert run.stderr.strip().splitlines()[-1] == line


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


# --- every error the guide promises, raised as promised -----------------------------------

# (what the guide's example is changed into, the error, what it says)
REFUSED = [
    (('"ACME101",', '"Acme101",'), ValueError, "check code 'Acme101' must look like QA101"),
    (('"queue-dead-tuples-over-budget",', '"QueueDeadTuples",'), ValueError, "kebab-case"),
    (("max_dead_tuples: int = 100_000", "max_dead_tuples: int"), TypeError,
     "Options.max_dead_tuples has no default"),
    (("@dataclass(frozen=True)", "@dataclass"), TypeError, "Options is not frozen"),
    (("options=Options,", "options=Options(),"), TypeError, "frozen dataclass with a default"),
    (("options=Options,", "options=dict,"), TypeError, "frozen dataclass with a default"),
    (('requires=("table_facts",)', 'requires=("table_fact",)'), ValueError,
     "requires unknown fact(s) table_fact"),
    (("\"Dead tuples ACME's runbook allows\"", '" "'), ValueError,
     "the label of max_dead_tuples is empty"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "error", "message"), REFUSED)
def test_the_decorator_refuses_what_the_guide_says_it_refuses(
    change: tuple[str, str], error: type[Exception], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = guide_example()
    assert change[0] in source, f"the guide's example lost {change[0]!r}"
    broken = source.replace(change[0], change[1], 1)
    module = types.ModuleType("acme_checks")
    monkeypatch.setitem(sys.modules, "acme_checks", module)  # dataclasses look it up
    with pytest.raises(error, match=re.escape(message)):
        exec(compile(broken, "acme_checks.py", "exec"), module.__dict__)


def _env(site: Path) -> dict[str, str]:
    path = [str(site), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def test_a_refused_check_stops_every_command_with_one_line(install: Install) -> None:
    broken = guide_example().replace("max_dead_tuples: int = 100_000", "max_dead_tuples: int")
    site = install("acme_checks", broken, "acme")
    with pytest.raises(PackError, match=r"check pack 'acme' \(acme_checks\) failed to load: "
                                        r"check ACME101: options must be a frozen"):  # fmt: skip
        load_checks()
    commands = [("explain",), ("check", "--snapshot", "missing.json"),
                ("snapshot", "host=/nonexistent dbname=app")]  # fmt: skip
    for args in commands:  # the pack is loaded before anything is read
        run = qadvisor(*args, env=_env(site))
        assert run.rc == 2 and run.stdout == "", args
        assert run.stderr.strip().splitlines() == [run.stderr.strip()], run.stderr
        assert "Traceback" not in run.stderr and "has no default" in run.stderr


def test_an_entry_point_naming_an_attribute_is_a_pack_error(install: Install) -> None:
    site = install("acme_checks", guide_example(), "acme", "acme_checks:dead_tuples_over_budget")
    with pytest.raises(PackError, match="check pack 'acme' must name a module, not acme_checks:"):
        load_checks()
    run = qadvisor("explain", env=_env(site))
    assert run.rc == 2 and run.stderr.startswith("qadvisor: error: check pack 'acme' must name")


def test_a_package_pack_registers_its_public_submodules_only(install: Install) -> None:
    private = (
        guide_example()
        .replace('"ACME101"', '"ACME199"')
        .replace('"queue-dead-tuples-over-budget"', '"private-helper-check"')
    )
    install("acme_pkg", {"__init__.py": "", "queues.py": guide_example(), "_helpers.py": private},
            "acme")  # fmt: skip
    codes = [c.code for c in load_checks()]
    assert "ACME101" in codes and "ACME199" not in codes


def test_options_for_the_pack_are_checked_like_the_built_in_ones(
    install: Install, tmp_path: Path
) -> None:
    site = install("acme_checks", guide_example(), "acme")
    snapshot = tmp_path / "jobs.json"
    snap = S.snapshot(S.jobs_table(stats=TableStats(n_dead_tup=1_753_949)))
    snapshot.write_text(json.dumps(snap.to_dict()))
    config = tmp_path / "qadvisor.toml"

    def run_with(text: str) -> Run:
        config.write_text(text)
        return qadvisor("check", "--snapshot", str(snapshot), "--config", str(config),
                        "--format", "json", "--fail-on", "never", env=_env(site))  # fmt: skip

    # The guide's config example (500,000) is still under the table's 1,753,949 dead tuples.
    assert run_with("[options.ACME101]\nmax_dead_tuples = 500000\n").findings("ACME101")
    assert_quiet(run_with("[options.ACME101]\nmax_dead_tuples = 2000000\n"), "ACME101", live=False)
    run = run_with('[options.ACME101]\nmax_dead_tuples = "many"\n')
    assert run.rc == 2 and "ACME101.max_dead_tuples must be an integer" in run.stderr
    run = run_with("[options.ACME101]\nmax_dead_tuple = 5\n")
    assert run.rc == 2
    assert "ACME101 has no option 'max_dead_tuple' (options: max_dead_tuples)" in run.stderr


def test_an_old_server_is_a_skip_naming_the_version(install: Install) -> None:
    newer = guide_example().replace("    options=Options,\n", "    options=Options,\n"
                                    "    min_server_version=190000,\n")  # fmt: skip
    assert newer != guide_example()
    install("acme_checks", newer, "acme")
    chk = acme(load_checks())
    report = run_checks(S.snapshot(S.jobs_table(stats=TableStats(n_dead_tup=1_753_949))), [chk])
    assert report.findings == () and "ACME101" not in report.checks_run
    assert report.skipped == (Skip("needs PostgreSQL 19 or newer", code="ACME101"),)


def test_repeated_reasons_of_one_check_are_reported_once() -> None:
    from qadvisor.api import Skip as CheckSkip
    from qadvisor.api import check

    @check("ACME102", "repeats-itself", severity=Severity.INFO, category="test")
    def repeats(snapshot: object, options: object) -> list[CheckSkip]:
        """Says the same thing twice."""
        return [
            CheckSkip("no way to tell", "public.jobs"),
            CheckSkip("no way to tell", "public.jobs"),
        ]

    report = run_checks(S.snapshot(S.jobs_table()), [repeats])
    assert report.skipped == (Skip("no way to tell", "public.jobs", code="ACME102"),)


def test_a_pack_importing_a_name_the_api_does_not_have_fails_to_load_naming_it(
    install: Install,
) -> None:
    install("old_acme_checks", OLD_PACK, "old-acme")
    with pytest.raises(PackError) as failed:
        load_checks()
    message = str(failed.value)
    assert "check pack 'old-acme'" in message and "'Issue'" in message, message
