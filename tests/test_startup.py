"""What a start imports: the command line, `--version` and `--help` load none of the pipeline,
and a `check --format json` none of what only other commands or formats need (docs/benchmarks.md
has what each costs). Looked at in a fresh interpreter, by module name: no timings here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Imported by any run that checks: a start that only parses the command line loads none of it.
PIPELINE = (
    "psycopg",
    "sqlglot",
    "rich",
    "qadvisor.model",
    "qadvisor.registry",
    "qadvisor.engine",
    "qadvisor.collect",
    "qadvisor.render",
    "qadvisor.settings.resolve",
)

# What a `qadvisor check --format json` has no use for: other commands' packages, the other
# formats and the terminal's rich.
NOT_FOR_A_JSON_CHECK = (
    "rich",
    "qadvisor.prove",
    "qadvisor.fleet",
    "qadvisor.demo",
    "qadvisor.diff",
    "qadvisor.docgen",
    "qadvisor.render.terminal",
    "qadvisor.render.markdown",
    "qadvisor.render.html",
    "qadvisor.render.sarif",
    "qadvisor.render.junit",
    "qadvisor.render.openmetrics",
    "qadvisor.render.sql",
)


def _loaded(code: str, of: tuple[str, ...]) -> list[str]:
    """Which of ``of`` (or a submodule of one) a fresh interpreter holds after ``code``."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"print(json.dumps(sorted(m for m in sys.modules for p in {list(of)!r}"
        " if m == p or m.startswith(p + '.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    loaded: list[str] = json.loads(out.splitlines()[-1])
    return loaded


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["check", "--help"]])
def test_the_command_line_alone_loads_no_pipeline(argv: list[str]) -> None:
    code = (
        "import contextlib, io, sys\n"
        f"sys.argv = ['qadvisor', *{argv!r}]\n"
        "from qadvisor import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = cli._run()\n"
        "assert code == 0, code"
    )
    assert _loaded(code, PIPELINE) == []


def test_a_json_check_loads_no_other_command_or_format() -> None:
    # What `qadvisor check --format json` imports before it connects: the engine, every
    # installed check and the JSON renderer.
    code = (
        "from qadvisor import engine, render\n"
        "from qadvisor.registry import load_checks\n"
        "from qadvisor.settings.resolve import Flags, resolve\n"
        "resolve(Flags(format='json'), env={})\n"
        "render.RENDERERS['json']\n"
        "assert load_checks() and engine"
    )
    assert _loaded(code, NOT_FOR_A_JSON_CHECK) == []
