"""Baseline files: the findings a team has accepted, so that a CI gate fails only on new ones.

``--write-baseline PATH`` records each finding by what identifies it (key, code, name,
severity, target), never a measurement: the file stays the same while the numbers move, and
holds no secret (the database name, no DSN). ``--baseline PATH`` reads it back and marks each
finding of the run ``new`` (its key was not in the file, or its severity rose) or
``preexisting``; baselined findings that are gone are fixed when the check judged their object
again, and only "not judged" otherwise. Keys are built from names and statement shapes (see
qadvisor.derive.statement_queues), so a baseline written on staging holds after a restore from a
dump.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from qadvisor import __version__
from qadvisor.errors import InputError, read_json
from qadvisor.model import (
    BaselineEntry,
    BaselineResult,
    Finding,
    Report,
    Severity,
    Target,
    TargetKind,
)

BASELINE_FORMAT = 1
# The field that says what the file is (and which version of the format it is).
MARKER = "qadvisor_baseline"


class BaselineError(InputError):
    """A file given as a baseline cannot be read or is not one."""


@dataclass(frozen=True)
class Baseline:
    source: str  # the path as given
    database: str
    qadvisor_version: str
    entries: tuple[BaselineEntry, ...]


def dumps(report: Report) -> str:
    """The baseline of a report: every finding (preexisting ones included), sorted by key."""
    findings = sorted(report.findings, key=lambda f: f.key)
    data = {
        MARKER: BASELINE_FORMAT,
        "qadvisor_version": __version__,
        "database": report.snapshot.server.database,
        "server_version": report.snapshot.server.version,
        "findings": [_entry(f) for f in findings],
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _entry(f: Finding) -> dict[str, Any]:
    t = f.target
    return {
        "key": f.key,
        "code": f.code,
        "name": f.name,
        "severity": f.rating.label,
        "target": {"kind": t.kind, "schema": t.schema, "table": t.table, "name": t.name},
    }


def load(path: Path) -> Baseline:
    """The baseline in ``path``; BaselineError, one line, when it is not one."""
    data = read_json(path, "baseline", BaselineError)
    if not isinstance(data, dict) or MARKER not in data:
        what = _what_it_is(data)
        raise BaselineError(
            f"{path} is not a qadvisor baseline{what}: write one with --write-baseline"
        )
    if data[MARKER] != BASELINE_FORMAT:
        raise BaselineError(
            f"{path} is a baseline of format {data[MARKER]!r}; this qadvisor reads format "
            f"{BASELINE_FORMAT}: write it again with --write-baseline"
        )
    findings = data.get("findings")
    if not isinstance(findings, list):
        raise BaselineError(f"{path} is not a qadvisor baseline: 'findings' is not a list")
    entries = []
    for i, item in enumerate(findings):
        try:
            entries.append(_parse_entry(item))
        except (KeyError, TypeError, ValueError) as exc:
            raise BaselineError(
                f"{path} is not a qadvisor baseline: findings[{i}]: {exc}"
            ) from None
    return Baseline(
        source=str(path),
        database=str(data.get("database", "")),
        qadvisor_version=str(data.get("qadvisor_version", "")),
        entries=tuple(entries),
    )


def _what_it_is(data: object) -> str:
    if isinstance(data, dict) and "schema_version" in data and "findings" in data:
        return " (it is a JSON report)"
    if isinstance(data, dict) and "format" in data and "server" in data:
        return " (it is a snapshot)"
    if isinstance(data, dict) and "runs" in data:
        return " (it is a SARIF file)"
    return ""


_KINDS = get_args(TargetKind)


def _parse_entry(item: Any) -> BaselineEntry:
    if not isinstance(item, dict):
        raise TypeError("not an object")
    key, code = item["key"], item["code"]
    if not isinstance(key, str) or not isinstance(code, str) or not key.startswith(code + ":"):
        raise ValueError(f"key {key!r} is not a finding key of {code!r}")
    target = item["target"]
    if not isinstance(target, dict) or target.get("kind") not in _KINDS:
        raise ValueError("target has no known kind")
    parts = {p: target.get(p) for p in ("schema", "table", "name")}
    if not all(v is None or isinstance(v, str) for v in parts.values()):
        raise ValueError("target names must be strings or null")
    return BaselineEntry(
        key=key,
        code=code,
        name=str(item.get("name", "")),
        severity=Severity.parse(str(item["severity"])),
        target=Target(target["kind"], parts["schema"], parts["table"], parts["name"]),
    )


def compare(
    report: Report, baseline: Baseline, judged: Callable[[BaselineEntry], bool]
) -> BaselineResult:
    """The report's findings against the baseline; ``judged(entry)`` says whether this run
    judged the entry's object again (its check ran, did not skip that queue, and nothing
    ignored it), so that an entry not seen is fixed only when it was looked for."""
    by_key = {e.key: e for e in baseline.entries}
    preexisting = frozenset(
        f.key for f in report.findings if f.key in by_key and f.rating <= by_key[f.key].severity
    )
    seen = {f.key for f in report.findings}
    gone = [e for e in baseline.entries if e.key not in seen]
    return BaselineResult(
        source=baseline.source,
        database=baseline.database,
        preexisting=preexisting,
        keys=frozenset(by_key),
        fixed=tuple(e for e in gone if judged(e)),
        not_judged=tuple(e for e in gone if not judged(e)),
    )
