"""Where the test suite's time goes, tier by tier, from a run's JUnit XML.

A CI run's wall time says how long it took, not what to cut. This reads the per-test times
pytest writes with ``--junitxml`` (setup, call and teardown of each test: a server's start and
a corpus library's build land on the first test that needs them) and sorts every test into a
tier by its markers, read from the suite's own collection:

- ``pure``: no server (``-m "not server"``);
- ``install``: builds qadvisor and installs it into fresh environments (``-m install``);
- ``corpus``: databases built by real queue libraries (``-m corpus``);
- ``checks pgNN``: a check's pathology tests (tests/checks) on one major;
- ``server pgNN``: every other server test on one major;
- ``server, no major``: server tests not parametrized by major.

It prints each tier's test count, the seconds its tests took (summed over the workers, so
with two workers the sums add up to about twice the wall time), its share, and the files that
cost most. Run it from the repository root after a run such as CI's::

    PYTEST_ADDOPTS="--junitxml=/tmp/suite.xml" .ci/run
    .venv/bin/python benchmarks/suite_cost.py /tmp/suite.xml
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAJOR = re.compile(r"\[pg(\d+)")


@dataclass(frozen=True)
class Case:
    key: tuple[str, str]  # (junit classname, test name without an xdist group suffix)
    file: str
    seconds: float


def _key_of_nodeid(nodeid: str) -> tuple[str, str]:
    """The (classname, name) pytest's JUnit XML gives the test a node ID names."""
    path, *scopes = nodeid.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    return ".".join([module, *scopes[:-1]]), scopes[-1].split("@")[0]


def _collected(marker: str) -> set[tuple[str, str]]:
    """The tests the suite's collection selects with ``-m marker``."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-m", marker],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return {_key_of_nodeid(line) for line in out.stdout.splitlines() if "::" in line}


def _file_of(classname: str) -> str:
    """The test file a JUnit classname points into (its longest prefix that is one)."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = Path(*parts[:end]).with_suffix(".py")
        if (ROOT / candidate).is_file():
            return candidate.as_posix()
    return classname


def read_cases(junit: Path) -> tuple[list[Case], float]:
    """Every test case of the XML, and the wall time the run reported."""
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    wall = sum(float(s.get("time", 0)) for s in suites)
    cases = [
        Case(
            (tc.get("classname", ""), tc.get("name", "").split("@")[0]),
            _file_of(tc.get("classname", "")),
            float(tc.get("time", 0)),
        )
        for s in suites
        for tc in s.iter("testcase")
    ]
    return cases, wall


def tier_of(
    case: Case,
    pure: set[tuple[str, str]],
    corpus: set[tuple[str, str]],
    install: set[tuple[str, str]],
) -> str:
    if case.key in corpus:
        return "corpus"
    if case.key in install:
        return "install"
    if case.key in pure:
        return "pure"
    major = MAJOR.search(case.key[1])
    where = "checks" if case.file.startswith("tests/checks/") else "server"
    return f"{where} pg{major.group(1)}" if major else "server, no major"


def _table(rows: Iterable[tuple[str, ...]], header: tuple[str, ...]) -> str:
    # The first and last columns are words, the others figures.
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 2) + "---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, help="the XML a pytest --junitxml run wrote")
    parser.add_argument("--top", type=int, default=3, help="costliest files shown per tier")
    args = parser.parse_args(argv)
    if not args.junit.is_file():
        parser.error(f"{args.junit}: no such file")
    cases, wall = read_cases(args.junit)
    pure, corpus, install = _collected("not server"), _collected("corpus"), _collected("install")
    tiers: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        tiers[tier_of(case, pure, corpus, install)].append(case)
    total = sum(c.seconds for c in cases)
    rows = []
    for name, members in sorted(tiers.items(), key=lambda t: -sum(c.seconds for c in t[1])):
        seconds = sum(c.seconds for c in members)
        by_file: dict[str, float] = defaultdict(float)
        for c in members:
            by_file[c.file] += c.seconds
        costly = sorted(by_file.items(), key=lambda f: -f[1])[: args.top]
        rows.append(
            (
                name,
                f"{len(members):,}",
                f"{seconds / 60:,.1f}",
                f"{100 * seconds / total:.0f} %" if total else "-",
                ", ".join(f"{Path(f).name} {s / 60:.1f}" for f, s in costly),
            )
        )
    print(
        f"{len(cases):,} tests; {total / 60:,.1f} minutes of test time; the run's wall "
        f"{wall / 60:,.1f} minutes as the XML reports it\n"
    )
    print(_table(rows, ("tier", "tests", "minutes", "share", "costliest files (minutes)")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
