"""The door a check pack goes through: qadvisor.api promises at most 60 names, each one the
built-in pack or the guide uses; qadvisor.api.provisional holds the rest of what the built-in
checks share, nothing they do not use, and no name of both."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from qadvisor import api
from qadvisor.api import provisional

ROOT = Path(__file__).resolve().parents[1]
CORE_LIMIT = 60
# Named by no built-in check, and why they are promised all the same.
CORE_FOR_PACKS = {
    "judgeable": "a pack's own streams of items and skips",
    "Locking": "what judgeable_locking yields, for a pack's annotations",
    "Column": "a pack's tests build snapshots of it",
    "ColumnStats": "a pack's tests build snapshots of it",
    "RoleSetting": "a pack's tests build snapshots of it",
    "Sample": "a pack's tests build snapshots of it",
    "ServerInfo": "a pack's tests build snapshots of it",
    "TableStats": "a pack's tests build snapshots of it",
    "TenantCount": "a pack's tests build snapshots of it",
}
# Provisional names the built-in checks do not import: return types for a pack's annotations,
# and the parser of saved EXPLAIN output for a pack's tests.
PROVISIONAL_FOR_PACKS = {"LockClause", "PlanCacheMode", "Writes", "Writing", "ValueJudgement",
                         "parse_explain", "sorts_over"}  # fmt: skip


def _imported_by_the_built_in_pack() -> dict[str, set[str]]:
    names: dict[str, set[str]] = {"qadvisor.api": set(), "qadvisor.api.provisional": set()}
    for path in (ROOT / "checks").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in names:
                names[node.module] |= {a.name for a in node.names}
    return names


def test_the_promised_api_is_small_and_used() -> None:
    assert len(api.__all__) <= CORE_LIMIT, len(api.__all__)
    used = _imported_by_the_built_in_pack()["qadvisor.api"]
    assert set(api.__all__) - used == set(CORE_FOR_PACKS)


def test_the_provisional_api_holds_what_the_built_in_checks_share_and_no_more() -> None:
    assert not set(api.__all__) & set(provisional.__all__)
    used = _imported_by_the_built_in_pack()["qadvisor.api.provisional"]
    assert set(provisional.__all__) - used == PROVISIONAL_FOR_PACKS
    # Every check imports each name from the module that has it.
    assert used <= set(provisional.__all__)
    assert _imported_by_the_built_in_pack()["qadvisor.api"] <= set(api.__all__)


def test_every_name_is_there() -> None:
    for module in (api, provisional):
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert not missing, (module.__name__, missing)


def test_the_guide_imports_only_names_the_api_has() -> None:
    guide = (ROOT / "docs" / "writing-checks.md").read_text()
    imported = 0
    for block in re.findall(r"```python\n(.*?)\n```", guide, re.S):
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue  # a signature written out, not code
        for node in ast.walk(tree):
            module = {"qadvisor.api": api, "qadvisor.api.provisional": provisional}
            if isinstance(node, ast.ImportFrom) and node.module in module:
                names = {a.name for a in node.names}
                assert names <= set(module[node.module].__all__), names
                imported += 1
    assert imported
