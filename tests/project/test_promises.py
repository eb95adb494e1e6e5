"""docs/safety.md's promises name the tests that hold qadvisor to them: each of those tests
exists, and each test of the hostile-input corpus is named by a promise."""

from __future__ import annotations

import ast
from pathlib import Path

from qadvisor.docgen.promises import PROMISES

ROOT = Path(__file__).resolve().parents[2]
CORPUS = "tests/test_hostile.py"


def _tests(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text())
    return {
        n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
    }


def test_every_test_a_promise_names_exists() -> None:
    named = [t for p in PROMISES for t in p.tests]
    missing = [t for t in named if t.partition("::")[2] not in _tests(t.partition("::")[0])]
    assert missing == []


def test_every_test_of_the_hostile_corpus_holds_a_promise() -> None:
    named = {t.partition("::")[2] for p in PROMISES for t in p.tests if t.startswith(CORPUS)}
    assert _tests(CORPUS) - named == set()
