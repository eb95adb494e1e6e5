"""Every fix the built-in checks print on a real server, step by step: each migration step
runs as printed, one statement per call, and each rewrite plans in place of the statement it
replaces. One pathology per check (the ones their own tests build, small), each declared in
its check's test module (``FIX_PATHOLOGIES``, or ``FIX_REVIEW_ONLY`` for a check whose fixes
are review steps that module runs), and a walk of the registry so that a new check without
one fails here: this file needs no edit for a new check."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from qadvisor.registry import load_checks
from tests.conftest import TestDB
from tests.helpers import Pathology, plan_rewrites

CHECK_TESTS = Path(__file__).resolve().parents[1] / "checks"


def _declared() -> tuple[dict[str, Pathology], dict[str, str]]:
    """The pathologies and the review-only checks every check's test module declares."""
    pathologies: dict[str, Pathology] = {}
    review_only: dict[str, str] = {}
    for path in sorted(CHECK_TESTS.glob("test_qa*.py")):
        module = importlib.import_module(f"tests.checks.{path.stem}")
        own: Mapping[str, Pathology] = getattr(module, "FIX_PATHOLOGIES", {})
        twice = own.keys() & pathologies.keys()
        assert not twice, f"{path.name} declares pathologies another module does: {twice}"
        pathologies.update(own)
        why: Mapping[str, str] = getattr(module, "FIX_REVIEW_ONLY", {})
        review_only.update({code: f"tests/checks/{path.name} {text}" for code, text in why.items()})
    return pathologies, review_only


_DECLARED = _declared()
PATHOLOGIES = _DECLARED[0]
REVIEW_ONLY = _DECLARED[1]


def test_every_check_has_its_fixes_walked() -> None:
    walked = set().union(*(p.codes for p in PATHOLOGIES.values()))
    codes = {c.code for c in load_checks()}
    unwalked = sorted(codes - walked - set(REVIEW_ONLY))
    assert unwalked == [], (
        f"no pathology runs the fixes of {', '.join(unwalked)}: declare FIX_PATHOLOGIES "
        "(name -> tests.helpers.Pathology) in its test module tests/checks/test_<code>_*.py, "
        "or FIX_REVIEW_ONLY (code -> which of its tests runs the review steps)"
    )
    assert walked | set(REVIEW_ONLY) <= codes


def _check_shape(fix: dict[str, Any]) -> None:
    migrations = [s["sql"] for s in fix["steps"] if s["kind"] == "migration"]
    assert fix["statements"] == migrations  # statements are the migrations, nothing else
    for step in fix["steps"]:
        assert step["kind"] in ("migration", "rewrite", "review")
        assert step["lock"] not in ("", "unknown"), step  # the built-in pack states its locks
        assert step["in_transaction_block"] is not None, step
        if step["kind"] == "rewrite":
            assert step["before"] and step["source"], step
        else:
            assert step["before"] is None and step["source"] is None, step
        if "CONCURRENTLY" in step["sql"] or step["sql"].startswith("ALTER SYSTEM"):
            assert step["in_transaction_block"] is False, step
    if fix["safety"] == "safe":
        assert all(s["kind"] == "migration" for s in fix["steps"])


@pytest.mark.parametrize("name", sorted(PATHOLOGIES))
def test_migrations_run_as_printed_and_rewrites_plan(db: TestDB, name: str) -> None:
    pathology = PATHOLOGIES[name]
    run = pathology.build(db)
    findings = [f for f in run.report["findings"] if f["fix"] is not None]
    shown = {f["code"] for f in findings if f["fix"]["steps"]}
    assert pathology.codes <= shown, (shown, run.report["skipped"])
    ran: list[str] = []
    # Every finding's migration first, in report order: a rewrite may read what one creates
    # (the round-robin dequeue reads the rotation table). Two checks that propose the same
    # index print the same statement, and it is built once.
    for f in findings:
        _check_shape(f["fix"])
        for step in f["fix"]["steps"]:
            if step["kind"] == "migration" and step["sql"] not in ran:
                db.execute(step["sql"])
                ran.append(step["sql"])
    planned = 0
    for f in findings:
        rewrites = [s for s in f["fix"]["steps"] if s["kind"] == "rewrite"]
        if rewrites:
            plans = plan_rewrites(db, f, pathology.values)
            assert len(plans) == len(rewrites) and all(plans)
            planned += len(plans)
    assert ran or planned
