"""docs/writing-checks.md stays true to the code: its list of facts is qadvisor.facts.FACTS,
and the places it says a built-in check touches are where it says."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from qadvisor.facts import FACTS

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "writing-checks.md").read_text()

# What the guide's "Adding a check to qadvisor's own pack" names, by the file defining it.
NAMED = {
    "tests/checks/test_pack.py": (
        "CONTRACT", "MODULES", "module_of", "test_every_check_has_its_own_test_module",
        "test_built_in_checks_come_through_the_entry_point_with_contract_names",
        "test_docs_pages_match_the_code",
        "test_privileges_page_matches_the_facts_and_what_each_check_reads",
        "test_the_readme_table_lists_every_built_in_check",
    ),
    "tests/fixes/test_fix_steps.py": (
        "PATHOLOGIES", "REVIEW_ONLY", "test_every_check_has_its_fixes_walked",
    ),
    "qadvisor/render/labels.py": ("LABELS", "BLOCKS", "THRESHOLDS"),
    "tests/render/test_render.py": (
        "test_every_evidence_field_of_the_built_in_checks_has_a_label",
    ),
    "tests/checks/test_skips.py": (
        "TABLE_CODES", "STATEMENT_CODES", "test_a_queue_without_table_facts_is_not_judged",
    ),
    "tests/test_cli.py": ("_snapshot_file",),
}  # fmt: skip


def _section(heading: str) -> str:
    start = GUIDE.index(heading)
    end = GUIDE.find("\n## ", start + len(heading))
    return GUIDE[start : end if end >= 0 else len(GUIDE)]


def test_the_guide_lists_every_fact_a_check_can_require() -> None:
    table = GUIDE.split("<!-- facts: qadvisor/facts.py -->\n", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \| (.+) \|$", table, re.M)
    assert rows == [(f.name, f.title) for f in FACTS.values()]


def test_the_places_a_built_in_check_touches_are_where_the_guide_says() -> None:
    section = _section("## Adding a check to qadvisor's own pack")
    for path, names in NAMED.items():
        assert f"`{path}`" in section, f"the guide no longer names {path}"
        tree = ast.parse((ROOT / path).read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            defined |= {t.id for t in targets if isinstance(t, ast.Name)}
        for name in names:
            assert f"`{name}`" in section, f"the guide no longer names {name}"
            assert name in defined, f"{path} defines no {name}: mend the guide"
    for path in re.findall(r"`((?:tests|qadvisor|checks)/[\w/]+\.py)`", section):
        assert (ROOT / path).is_file(), path
