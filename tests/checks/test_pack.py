"""Meta-tests over the check pack: registration, identities, docs pages, tests per check."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qadvisor.docgen.pages import (
    PRIVILEGES_PAGE,
    README_TABLE_END,
    README_TABLE_START,
    check_page,
    privileges_page,
    with_readme_table,
)
from qadvisor.facts import FACTS
from qadvisor.model import Severity
from qadvisor.registry import Check, check, load_checks
from tests.helpers import NO_SUCH_CODE

ROOT = Path(__file__).resolve().parents[2]
# The codes and names of the built-in checks, from the registry: a code is never reused and
# a name never changes once released, and a renamed or renumbered check cannot pass unseen,
# because its generated page (docs/checks/<CODE>.md, headed with code and name) and README's
# generated table are compared with the code below, and a change to either is a diff a
# reviewer reads (see "Codes are forever" in docs/writing-checks.md).
CONTRACT = {c.code: c.name for c in load_checks()}
HEADINGS = ["## What it finds", "## Why it matters", "## How to fix", "## When it stays quiet"]
# One module per check in checks/, named after its code and name.
MODULES = sorted(p.stem for p in (ROOT / "checks").glob("qa*.py"))


def module_of(chk: Check) -> str:
    return f"{chk.code.lower()}_{chk.name.replace('-', '_')}"


def built_in_checks() -> tuple[Check, ...]:
    """The loaded pack, once it is known to be whole: a test that loops over the checks would
    pass on an empty or short pack without looking at anything."""
    checks = load_checks()
    assert len(MODULES) == len(CONTRACT), f"checks/ holds {MODULES}"
    assert sorted(module_of(c) for c in checks) == MODULES, "the pack loaded other checks"
    return checks


def test_built_in_checks_come_through_the_entry_point_with_contract_names() -> None:
    checks = load_checks()
    assert checks, "no check registered through the qadvisor.checks entry point"
    for chk in checks:
        assert CONTRACT.get(chk.code) == chk.name, chk.code
    assert sorted(module_of(c) for c in checks) == MODULES


def test_the_readme_table_lists_every_built_in_check() -> None:
    # README's "What it finds" is the first list a user reads: a row per built-in check, in
    # code order, named as registered, linked to its page, with its summary; written by
    # docgen between its markers.
    readme = (ROOT / "README.md").read_text()
    assert README_TABLE_START in readme and README_TABLE_END in readme, "README lost its markers"
    assert readme == with_readme_table(readme, built_in_checks()), (
        "README.md's table of checks is stale: run python -m qadvisor.docgen.pages docs/checks"
    )


def test_every_check_documents_itself_under_the_fixed_headings() -> None:
    for chk in built_in_checks():
        positions = [chk.doc.find(h) for h in HEADINGS]
        assert all(p > 0 for p in positions) and positions == sorted(positions), chk.code


def test_docs_pages_match_the_code() -> None:
    for chk in built_in_checks():
        page = ROOT / "docs" / "checks" / f"{chk.code}.md"
        assert page.is_file(), f"missing {page}: run python -m qadvisor.docgen.pages docs/checks"
        assert page.read_text() == check_page(chk), (
            f"{page} is stale: run python -m qadvisor.docgen.pages docs/checks"
        )


def test_privileges_page_matches_the_facts_and_what_each_check_reads() -> None:
    page = ROOT / "docs" / PRIVILEGES_PAGE
    assert page.is_file(), f"missing {page}: run python -m qadvisor.docgen.pages docs/checks"
    assert page.read_text() == privileges_page(built_in_checks()), (
        f"{page} is stale: run python -m qadvisor.docgen.pages docs/checks"
    )


def test_every_check_declares_the_facts_it_reads_and_only_known_ones() -> None:
    for chk in built_in_checks():
        assert chk.requires, f"{chk.code} declares no facts (requires=...)"
        assert set(chk.requires) <= set(FACTS), chk.code
    # A fact a grant or a lock can hide names what to do about it.
    for fact in FACTS.values():
        assert fact.privilege, fact.name
        assert bool(fact.lock) == bool(fact.when_locked), fact.name
        for template in fact.grants.values():
            assert template.startswith("GRANT ") and template.endswith(" TO {role};")
    with pytest.raises(ValueError, match="unknown fact"):
        check("QA999", "made-up", severity=Severity.INFO, category="x", requires=("nope",))


def test_the_code_tests_use_as_unknown_is_one_no_check_can_have() -> None:
    with pytest.raises(ValueError, match="must look like QA101"):
        check(NO_SUCH_CODE, "made-up", severity=Severity.INFO, category="x")


def test_every_check_has_its_own_test_module() -> None:
    tests = {p.name for p in (ROOT / "tests" / "checks").glob("test_qa*.py")}
    for chk in built_in_checks():
        assert any(re.match(rf"test_{chk.code.lower()}_", t) for t in tests), chk.code
