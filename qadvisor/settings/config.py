"""The config file, one layer of the settings (qadvisor.settings.resolve resolves them all).

The file is ``qadvisor.toml`` (top level) or the ``[tool.qadvisor]`` table of
``pyproject.toml``, found in the current directory, or the file given with ``--config`` (or
``QADVISOR_CONFIG``)::

    fail_on = "critical"
    fail_on_skip = true      # exit 1 when a check could not judge a queue
    tables = ["public.jobs"]
    ignore = ["QA201:public.audit_jobs"]
    select = ["QA1", "QA201"]  # only these checks (codes, or a code's start)
    query_files = ["sql/dequeue.sql"]
    statement_timeout = 5000 # ms, like --statement-timeout
    lock_timeout = 1000      # ms
    connect_timeout = 10     # seconds
    run_timeout = 300        # seconds, the whole run
    baseline = "qadvisor-baseline.json"  # like --baseline, relative to this file
    sarif_anchor = ".github/workflows/qadvisor.yml"  # like --sarif-anchor
    docs_url = "https://example.org/qadvisor/"      # like --docs-url

    [options.QA201]          # [tool.qadvisor.options.QA201] in pyproject.toml
    min_ratio = 20

    [severity]               # a check's severity in this project's reports and gate
    QA204 = "info"

Here each value is read and its type checked; bounds, ignores and options are judged with
the other layers, against the installed checks. Checks receive their options dataclass, never
the file.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qadvisor.errors import InputError, read_bounded
from qadvisor.model import Severity
from qadvisor.registry import Check

# The most read of a config file: parsing it is client-side work, bounded like the rest.
MAX_CONFIG_BYTES = 1024 * 1024

# --fail-on's values: a severity, or never (no finding fails the run).
FAIL_ON = ("critical", "warning", "info", "never")
_KEYS = {"fail_on", "fail_on_skip", "tables", "ignore", "select", "queries", "query_files",
         "options", "severity", "statement_timeout", "lock_timeout", "connect_timeout",
         "run_timeout", "baseline", "sarif_anchor", "docs_url"}  # fmt: skip
# The severities a [severity] entry may set.
SEVERITIES = ("critical", "warning", "info")


class ConfigError(InputError, ValueError):
    """The config file is unreadable or says something qadvisor does not understand."""


@dataclass(frozen=True)
class Config:
    source: Path | None = None
    fail_on: str | None = None
    fail_on_skip: bool | None = None
    tables: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    queries: tuple[str, ...] = ()
    query_files: tuple[Path, ...] = ()
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    severity: dict[str, str] = field(default_factory=dict)  # code -> severity
    statement_timeout: int | None = None  # ms
    lock_timeout: int | None = None  # ms
    connect_timeout: int | None = None  # seconds
    run_timeout: int | None = None  # seconds
    baseline: Path | None = None  # relative paths are made relative to the file
    sarif_anchor: Path | None = None
    docs_url: str | None = None
    # The line that sets ``tables`` (where SARIF shows findings that have no line of their
    # own), or None when the file does not name tables.
    tables_line: int | None = None


def find_config(explicit: Path | None, cwd: Path | None = None) -> Config:
    """The explicit file, else ./qadvisor.toml, else ./pyproject.toml's [tool.qadvisor]."""
    if explicit is not None:
        return _load(explicit, explicit.name == "pyproject.toml")
    base = cwd or Path.cwd()
    if (base / "qadvisor.toml").is_file():
        return _load(base / "qadvisor.toml", False)
    pyproject = base / "pyproject.toml"
    if pyproject.is_file():
        return _load(pyproject, True, missing_ok=True)
    return Config()


def _load(path: Path, in_pyproject: bool, missing_ok: bool = False) -> Config:
    try:
        text = read_bounded(path, MAX_CONFIG_BYTES).decode("utf-8")
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path} is not a qadvisor config file (nested too deep)") from None
    except ValueError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    if in_pyproject:
        tool = data.get("tool", {})
        ours = tool.get("qadvisor") if isinstance(tool, dict) else None
        if ours is None:
            if missing_ok:
                return Config()
            raise ConfigError(f"{path} has no [tool.qadvisor] table")
        if not isinstance(ours, dict):
            raise ConfigError(f"{path}: tool.qadvisor must be a table ([tool.qadvisor])")
        data = ours
    unknown = set(data) - _KEYS
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(sorted(unknown))}")
    base = path.parent
    options = data.get("options", {})
    if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
        raise ConfigError(f"{path}: options must be tables such as [options.QA201]")
    fail_on = _str(data, "fail_on", path)
    if fail_on is not None and fail_on not in FAIL_ON:
        raise ConfigError(f"{path}: fail_on must be one of {', '.join(FAIL_ON)}")
    fail_on_skip = data.get("fail_on_skip")
    if fail_on_skip is not None and not isinstance(fail_on_skip, bool):
        raise ConfigError(f"{path}: fail_on_skip must be true or false")
    severity = data.get("severity", {})
    if not isinstance(severity, dict) or not all(v in SEVERITIES for v in severity.values()):
        raise ConfigError(
            f"{path}: severity must be a table of check codes, each one of "
            f'{", ".join(SEVERITIES)} ([severity] QA204 = "info")'
        )
    return Config(
        source=path,
        fail_on=fail_on,
        fail_on_skip=fail_on_skip,
        tables=_strs(data, "tables", path),
        ignore=_strs(data, "ignore", path),
        select=_strs(data, "select", path),
        queries=_strs(data, "queries", path),
        query_files=tuple(base / p for p in _strs(data, "query_files", path)),
        options={code.upper(): dict(v) for code, v in options.items()},
        severity={code.upper(): v for code, v in severity.items()},
        statement_timeout=_int(data, "statement_timeout", path),
        lock_timeout=_int(data, "lock_timeout", path),
        connect_timeout=_int(data, "connect_timeout", path),
        run_timeout=_int(data, "run_timeout", path),
        baseline=_file(data, "baseline", path),
        sarif_anchor=_file(data, "sarif_anchor", path),
        docs_url=_str(data, "docs_url", path),
        tables_line=_line_of_key(text, "tables", in_pyproject) if "tables" in data else None,
    )


def _file(data: dict[str, Any], key: str, path: Path) -> Path | None:
    value = _str(data, key, path)
    return path.parent / value if value else None


def _line_of_key(text: str, key: str, in_pyproject: bool) -> int | None:
    """The line where ``key`` is set at the top of the qadvisor table (1-based)."""
    table = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            table = stripped.strip("[] \t")
            continue
        wanted = "tool.qadvisor" if in_pyproject else None
        if table == wanted and re.match(rf"{key}\s*=", stripped):
            return number
    return None


def _str(data: dict[str, Any], key: str, path: Path) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{path}: {key} must be a string")
    return value


def _int(data: dict[str, Any], key: str, path: Path) -> int | None:
    value = data.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise ConfigError(f"{path}: {key} must be an integer")
    return value


def _strs(data: dict[str, Any], key: str, path: Path) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: {key} must be a list of strings")
    return tuple(value)


def check_ignores(patterns: Iterable[str], checks: Sequence[Check]) -> None:
    """Every ignore pattern names a check (``QA201``) or a finding key of one
    (``QA201:public.jobs``): a typo would otherwise ignore nothing, unnoticed."""
    codes = sorted(c.code for c in checks)
    for pattern in patterns:
        code, colon, rest = pattern.partition(":")
        if code in codes and (rest or not colon):
            continue
        if code in codes:
            raise ConfigError(
                f"{pattern!r} names no object after {code}: (e.g. {code}:public.jobs)"
            )
        raise _no_such_code(pattern, code, codes)


def _no_such_code(given: str, code: str, codes: Sequence[str]) -> ConfigError:
    close = difflib.get_close_matches(code.upper(), codes, n=1, cutoff=0.0)
    hint = f"; the closest code is {close[0]}" if close else ""
    return ConfigError(
        f"{given!r}: no check has the code {code!r}{hint} (qadvisor explain lists them)"
    )


def selected(code: str, patterns: Iterable[str]) -> bool:
    """Whether ``--select`` patterns (codes, or the start of codes: ``QA2``) take the check;
    no pattern takes every check."""
    given = tuple(patterns)
    return not given or any(code.startswith(p) for p in given)


def check_selects(patterns: Iterable[str], checks: Sequence[Check]) -> None:
    """Every select pattern takes a check: a typo would otherwise run fewer checks than
    meant, unnoticed."""
    codes = sorted(c.code for c in checks)
    for pattern in patterns:
        if not any(selected(code, [pattern]) for code in codes):
            raise _no_such_code(pattern, pattern, codes)


def check_severities(checks: Sequence[Check], config: Config) -> dict[str, Severity]:
    """The [severity] table: each code a check's, each value a severity."""
    codes = sorted(c.code for c in checks)
    for code in config.severity:
        if code not in codes:
            raise _no_such_code(code, code, codes)
    return {code: Severity.parse(value) for code, value in config.severity.items()}


# How a config-file value of the option's type is described in an error.
_KINDS: dict[type, str] = {
    bool: "true or false", int: "an integer", float: "a number", str: "a string",
}  # fmt: skip


def check_options(checks: Sequence[Check], config: Config) -> dict[str, Any]:
    """Each check's options dataclass with the config's values applied, types checked."""
    known = {c.code: c for c in checks}
    out: dict[str, Any] = {}
    for code, values in config.options.items():
        chk = known.get(code)
        if chk is None:
            raise ConfigError(f"options for unknown check {code}")
        fields = {f.name: f for f in dataclasses.fields(chk.options)}
        defaults = chk.default_options()
        for name, value in values.items():
            if name not in fields:
                allowed = ", ".join(fields) or "none"
                raise ConfigError(f"{code} has no option {name!r} (options: {allowed})")
            expected = type(getattr(defaults, name))
            ok = isinstance(value, expected) or (expected is float and isinstance(value, int))
            if not ok or isinstance(value, bool) is not (expected is bool):
                what = _KINDS.get(expected, f"a {expected.__name__}")
                raise ConfigError(f"{code}.{name} must be {what}")
            # TOML writes nan and inf: a threshold no measure compares with.
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{code}.{name} must be a finite number, not {value}")
        out[code] = dataclasses.replace(defaults, **values)
    return out
