"""The tree reads as the pipeline: README's picture of the folders is the tree, each stage says
what it takes and gives, the top level stays small, and the import contracts name modules
that exist (a contract over a renamed module would pass while guarding nothing)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "qadvisor"


def _picture() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## How it is built", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def _stages() -> set[str]:
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def _top_modules() -> set[str]:
    return {p.name for p in PACKAGE.glob("*.py")} - {"__init__.py", "__main__.py"}


def test_readme_draws_every_stage_and_no_other() -> None:
    drawn = set(re.findall(r"^  (\w+)/", _picture(), flags=re.M))
    assert drawn == _stages()


def test_readme_names_every_top_level_module() -> None:
    drawn = set(re.findall(r"\b(\w+\.py)\b", _picture()))
    assert drawn == _top_modules()


def test_the_top_level_holds_at_most_ten_modules() -> None:
    assert len(_top_modules() | {"__init__.py", "__main__.py"}) <= 10


def test_each_stage_says_what_it_takes_and_gives() -> None:
    for stage in sorted(_stages()):
        doc = ast.get_docstring(ast.parse((PACKAGE / stage / "__init__.py").read_text()))
        assert doc, f"qadvisor/{stage}/__init__.py has no docstring"
        first = doc.split("\n\n", 1)[0]
        assert "takes" in first and "gives" in first, f"qadvisor/{stage}: {first!r}"


def _module_exists(name: str) -> bool:
    if name in ("sqlglot", "psycopg", "leather"):
        return True
    path = ROOT.joinpath(*name.replace(".**", "").replace(".*", "").split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_every_contract_names_modules_that_exist() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for contract in config["tool"]["importlinter"]["contracts"]:
        names = [
            *contract.get("source_modules", ()),
            *contract.get("forbidden_modules", ()),
            *contract.get("protected_modules", ()),
            *contract.get("allowed_importers", ()),
            *contract.get("modules", ()),
            *(m.strip() for layer in contract.get("layers", ()) for m in re.split("[|:]", layer)),
        ]
        for ignored in contract.get("ignore_imports", ()):
            names += [side.strip() for side in ignored.split("->")]
        missing = [n for n in names if not _module_exists(n)]
        assert not missing, f"{contract['id']} names {missing}"


def test_readme_draws_the_layers_in_the_contracts_order() -> None:
    """The picture, read top to bottom, is the `layers` contract's order: a stage moved in one
    and not in the other fails here."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    layered = [
        m.strip().removeprefix("qadvisor.")
        for layer in contract["layers"]
        for m in re.split("[|:]", layer)
    ]
    drawn = re.findall(r"^  (\w+)(?:/|\.py)", _picture(), flags=re.M)
    assert drawn == layered
    assert set(drawn) == _stages() | {m.removesuffix(".py") for m in _top_modules()}
