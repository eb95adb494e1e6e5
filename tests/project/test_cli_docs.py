"""The option tables of docs/cli.md and README.md are the command line's: every option of
`qadvisor check` has a row in both, so a new flag cannot ship undocumented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main

from qadvisor.cli import app

ROOT = Path(__file__).parents[2]


def _check_options() -> list[str]:
    # typer carries its own copy of click: the command is read by its attributes.
    check = typer.main.get_command(app).commands["check"]  # type: ignore[attr-defined]
    return [
        max(param.opts, key=len)
        for param in check.params
        if param.param_type_name == "option" and not getattr(param, "hidden", False)
    ]


def _table_rows(text: str, heading: str) -> list[str]:
    """The first cells of the first table after ``heading``."""
    after = text[text.index(heading) :]
    table = re.search(r"^\|.*?(?=^$)", after, re.M | re.S)
    assert table, heading
    return [line.split(" | ")[0] for line in table.group(0).splitlines()[2:]]


@pytest.mark.parametrize(
    ("page", "heading"),
    [("docs/cli.md", "## qadvisor check\n"), ("README.md", "`qadvisor check [DSN]` options:")],
)
def test_every_check_option_has_a_row(page: str, heading: str) -> None:
    rows = _table_rows((ROOT / page).read_text(), heading)
    options = _check_options()
    assert len(options) > 20, options
    missing = [
        o for o in options if not any(re.search(rf"(?<![\w-]){o}(?![\w-])", row) for row in rows)
    ]
    assert not missing, f"{page}: no row for {missing}"


def test_ci_runs_the_readmes_test_command() -> None:
    """CI proves what a contributor runs: .ci/run's last command is the README's test command,
    and docs/testing.md shows the same one."""
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```sh\n(.*?)\n```", readme, re.S)
    test_command = next(c for c in commands if "pytest" in c)
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == test_command
    assert f"```sh\n{test_command}\n```" in (ROOT / "docs" / "testing.md").read_text()
