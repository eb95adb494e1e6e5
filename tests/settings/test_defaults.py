"""Each default of a setting is written once, in qadvisor.settings.defaults: the settings table,
the session's bounds and the command line's help read it there.

The proof changes every value of the table in a fresh interpreter and looks for the new values
(and not the old ones) where a setting's default shows: a default restated by hand keeps the
old value and fails it.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from qadvisor.settings import defaults

ROOT = Path(__file__).resolve().parents[2]

# Each value of the table moved to one no other value has, bounds kept in order.
MOVED: dict[str, Any] = {
    "FAIL_ON": "critical",
    "STATEMENT_TIMEOUT_MS": 5_171,
    "MIN_STATEMENT_TIMEOUT_MS": 113,
    "LOCK_TIMEOUT_MS": 1_181,
    "MIN_LOCK_TIMEOUT_MS": 7,
    "CONNECT_TIMEOUT_S": 19,
    "MIN_CONNECT_TIMEOUT_S": 3,
    "MIN_RUN_TIMEOUT_S": 2,
    "MAX_TIMEOUT": 2_147_483_629,
    "STATEMENT_MARGIN_S": 11,
    "BASE_RUN_TIMEOUT_S": 137,
    "PLANNED_STATEMENT_READS": 13,
    "SAMPLE_S": (2, 3_593),
    "HISTORY_KEEP": 67,
    "JOBS": 6,
    "MAX_JOBS": 59,
}

# Read in a fresh interpreter whose table holds the moved values: the help and bounds of every
# option of every command, the settings' defaults and the session's bounds.
PROBE = """
import json, sys
from pathlib import Path
from qadvisor.settings import defaults
for name, value in json.loads(sys.argv[1]).items():
    setattr(defaults, name, tuple(value) if isinstance(value, list) else value)
import typer.main
from qadvisor.cli import app
from qadvisor.collect.connect import connect_timeout_s, default_run_timeout_s
from qadvisor.settings.resolve import SETTINGS, Flags, SessionLimits, resolve

options = {}
for name, command in typer.main.get_command(app).commands.items():
    for param in command.params:
        for flag in param.opts:
            options[f"{name} {flag}"] = {"help": getattr(param, "help", None) or "",
                             "min": getattr(param.type, "min", None),
                             "max": getattr(param.type, "max", None)}
limits = SessionLimits()
settings = resolve(Flags(), env={}, cwd=Path(sys.argv[2]), checks=())
print(json.dumps({
    "options": options,
    "table": {s.flag: s.default for s in SETTINGS if type(s.default) in (int, str)},
    "limits": [limits.statement_timeout_ms, limits.lock_timeout_ms, limits.connect_timeout_s],
    "settings": [settings.fail_on, settings.history_keep, settings.jobs],
    "connect_s": connect_timeout_s(limits, {}),
    "run_s": default_run_timeout_s(limits, statements=1, sample_s=1),
}))
"""


def _probe(tmp_path: Path) -> dict[str, Any]:
    moved = json.dumps(MOVED)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, moved, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        timeout=120,
    )
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def test_every_value_of_the_table_moves_in_the_help_the_settings_and_the_session(
    tmp_path: Path,
) -> None:
    assert set(MOVED) == {n for n in vars(defaults) if n.isupper()}, "move every value"
    seen = _probe(tmp_path)
    m = MOVED

    # The settings table and the session take their defaults from it.
    assert seen["table"] == {
        "--fail-on": m["FAIL_ON"],
        "--statement-timeout": m["STATEMENT_TIMEOUT_MS"],
        "--lock-timeout": m["LOCK_TIMEOUT_MS"],
        "--connect-timeout": m["CONNECT_TIMEOUT_S"],
    }
    assert seen["limits"] == [
        m["STATEMENT_TIMEOUT_MS"],
        m["LOCK_TIMEOUT_MS"],
        m["CONNECT_TIMEOUT_S"],
    ]
    assert seen["settings"] == [m["FAIL_ON"], m["HISTORY_KEEP"], m["JOBS"]]
    assert seen["connect_s"] == m["CONNECT_TIMEOUT_S"]
    statement_s = 5.171 + 11  # the moved statement timeout in seconds, and its margin
    assert seen["run_s"] == int(137 + 19 + 1 + 13 * statement_s)

    # The help says the moved defaults, never the ones the table holds, and the flags' bounds
    # are the table's.
    options = seen["options"]
    says = {
        "--fail-on": [f"else {m['FAIL_ON']}"],
        "--statement-timeout": [f"else {m['STATEMENT_TIMEOUT_MS']}"],
        "--lock-timeout": [f"else {m['LOCK_TIMEOUT_MS']}"],
        "--connect-timeout": [f"else {m['CONNECT_TIMEOUT_S']}"],
        "--run-timeout": ["else 137 + the connect timeout", "13 x (statement timeout + 11)"],
        "--history-keep": [f"default {m['HISTORY_KEEP']}"],
        "--jobs": [f"default {m['JOBS']}"],
    }
    for flag, texts in says.items():
        for text in texts:
            assert text in options[f"check {flag}"]["help"], (flag, text)
    bounds = {
        "--statement-timeout": (m["MIN_STATEMENT_TIMEOUT_MS"], None),
        "--lock-timeout": (m["MIN_LOCK_TIMEOUT_MS"], None),
        "--connect-timeout": (m["MIN_CONNECT_TIMEOUT_S"], None),
        "--run-timeout": (m["MIN_RUN_TIMEOUT_S"], None),
        "--sample": m["SAMPLE_S"],
        "--jobs": (1, m["MAX_JOBS"]),
    }
    for flag, (low, high) in bounds.items():
        assert (options[f"check {flag}"]["min"], options[f"check {flag}"]["max"]) == (low, high)
    assert f"else {defaults.FAIL_ON}" not in options["check --fail-on"]["help"]

    # No option's help still says a value the table holds.
    for flag, option in options.items():
        for name, value in vars(defaults).items():
            held = value if isinstance(value, tuple) else (value,)
            for number in (v for v in held if isinstance(v, int) and v >= 10):
                assert not re.search(rf"\b{number:d}\b", option["help"]), (flag, name)


def _words(name: str) -> set[str]:
    # A timeout of something else (initdb's) is not the table's.
    return set(name.split("_")) - {"S", "MS", "MIN", "MAX", "DEFAULT", "TIMEOUT"}


def test_no_module_of_qadvisor_sets_a_default_of_its_own() -> None:
    """A module-level number of the table's value, named like the table's entry (a timeout, a
    margin, how many are kept or run at once), is the table's default written again."""
    table = {
        (name, number)
        for name, value in vars(defaults).items()
        if name.isupper()
        for number in (value if isinstance(value, tuple) else (value,))
        if type(number) is int
    }
    found = []
    for path in sorted((ROOT / "qadvisor").rglob("*.py")):
        if path == ROOT / "qadvisor" / "settings" / "defaults.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
                continue
            for target in (t for t in node.targets if isinstance(t, ast.Name)):
                found += [
                    f"{path.relative_to(ROOT)}:{node.lineno} {target.id} is {name}"
                    for name, number in table
                    if node.value.value == number and _words(target.id) & _words(name)
                ]
    assert found == []
