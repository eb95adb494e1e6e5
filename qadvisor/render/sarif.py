"""The SARIF 2.1.0 report, for GitHub code scanning and other SARIF viewers.

One run; ``tool.driver.rules`` holds every check that ran (the report's rules: its docstring
is the rule help), ``results`` one entry per finding, except those a baseline accepted
(preexisting ones are left out, so their alerts close). A finding is about a database object:
that is its logical location (``public.jobs``, kind ``table``). GitHub code scanning rejects a
result without a file, so each also has a physical location in the repository: the
--query-file line of its statement, else the report's anchor (the config file's ``tables``
line, or --sarif-anchor), else a stable pseudo artifact ``postgresql/<schema>/<object>`` at
line 1 (no such file is in the repository). A fleet is one run too: every database's results,
the database named in each fingerprint, logical location and pseudo artifact
(``postgresql/<database>/<schema>/<object>``). Alerts are matched across runs by
``partialFingerprints["qadvisorKey/v1"]``, the finding key.

Skipped checks are tool execution notifications of the one invocation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO
from urllib.parse import quote

from qadvisor import __version__
from qadvisor.model import Finding, FleetReport, Location, Report, Rule, Severity, Target
from qadvisor.render.json import fix_dict
from qadvisor.render.proof import proof_dict
from qadvisor.render.values import docs_url

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
FINGERPRINT = "qadvisorKey/v1"
ARTIFACT_ROOT = "postgresql"

LEVEL = {Severity.CRITICAL: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def render(report: Report, *, docs_base_url: str | None = None) -> str:
    """SARIF for ``report``.

    The schema wants ``helpUri`` to be an absolute URI (GitHub's upload checks URI formats), so it
    is set only when ``docs_base_url`` (default: the report's ``docs_url``) is given; the docs
    path is in the rule help either way.
    """
    return (
        json.dumps(
            sarif_dict(report, docs_base_url=docs_base_url),
            indent=2,
            sort_keys=True,
            default=str,
        )
        + "\n"
    )


def sarif_dict(report: Report, *, docs_base_url: str | None = None) -> dict[str, Any]:
    rules, index = _rules([report], docs_base_url or report.docs_url)
    invocation: dict[str, Any] = {"executionSuccessful": True}
    if report.skipped:
        invocation["toolExecutionNotifications"] = _skips(report)
    run: dict[str, Any] = {
        "tool": _tool(rules),
        "invocations": [invocation],
        "results": [
            _result(f, index[f.code], report)
            for f in report.findings
            if report.baseline_state(f) != "preexisting"
        ],
        "properties": {**_database(report), "summary": report.summary()},
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def fleet_dict(fleet: FleetReport, *, docs_base_url: str | None = None) -> dict[str, Any]:
    """A fleet as one run: every database's results, each naming its database in its
    fingerprint and its locations (``postgresql/<database>/<schema>/<object>``); a database
    that could not be judged is an error notification (the run's execution was not
    successful), one left out a warning."""
    reports = [r for _, r in fleet.reports]
    url = docs_base_url or next((r.docs_url for r in reports if r.docs_url), None)
    rules, index = _rules(reports, url)
    notes = [n for db, r in fleet.reports for n in _skips(r, db)]
    for m in fleet.not_judged:
        level = "error" if m.failed else "warning"
        notes.append({"level": level, "message": {"text": f"{m.database} not judged: {m.reason}"}})
    invocation: dict[str, Any] = {
        "executionSuccessful": not any(m.failed for m in fleet.not_judged)
    }
    if notes:
        invocation["toolExecutionNotifications"] = notes
    run: dict[str, Any] = {
        "tool": _tool(rules),
        "invocations": [invocation],
        "results": [_result(f, index[f.code], report) for f, report in fleet.findings],
        "properties": {
            "fleet": {"source": fleet.source, "jobs": fleet.jobs},
            "databases": [
                {"database": m.database, "judged": m.judged, "not_judged": m.not_judged}
                | (_database(m.report) | {"summary": m.report.summary()} if m.report else {})
                for m in fleet.members
            ],
            "summary": fleet.summary(),
        },
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _rules(
    reports: Sequence[Report], docs_base_url: str | None
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The rules of the checks the reports ran, and each code's index among them."""
    ran = {c for r in reports for c in r.checks_run}
    known = {rule.code: rule for r in reports for rule in r.rules if rule.code in ran}
    rules = [_rule(known[code], docs_base_url) for code in sorted(known)]
    index = {r["id"]: i for i, r in enumerate(rules)}
    for f in (f for r in reports for f in r.findings):  # a check the reports do not describe
        if f.code not in index:
            index[f.code] = len(rules)
            rules.append(_bare_rule(f))
    return rules, index


def _tool(rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "driver": {
            "name": "qadvisor",
            "version": __version__,
            "semanticVersion": __version__,
            "rules": rules,
        }
    }


def _skips(report: Report, database: str | None = None) -> list[dict[str, Any]]:
    where = f"{database}: " if database is not None else ""
    return [
        {
            "associatedRule": {"id": sk.code},
            "level": "note",
            "message": {"text": f"{where}{sk.code} skipped: {sk.reason}"},
        }
        for sk in report.skipped
    ]


def _database(report: Report) -> dict[str, Any]:
    snap = report.snapshot
    return {
        "database": snap.server.database,
        "server": {
            "version": snap.server.version,
            "version_num": snap.server.version_num,
            "is_standby": snap.server.is_standby,
        },
    }


def _rule(c: Rule, docs_base_url: str | None) -> dict[str, Any]:
    body = c.doc.split("\n", 1)[1].strip() if "\n" in c.doc else ""
    text = body or c.summary
    rule: dict[str, Any] = {
        "id": c.code,
        "name": c.name,
        "shortDescription": {"text": c.summary},
        "fullDescription": {"text": text},
        "help": {
            "text": f"{text}\n\nDocs: {c.docs_path} (qadvisor explain {c.code})",
            "markdown": f"{text}\n\nDocs: `{c.docs_path}` (`qadvisor explain {c.code}`)",
        },
        "defaultConfiguration": {"level": LEVEL[c.severity]},
        "properties": {"category": c.category, "docs": c.docs_path, "tags": [c.category]},
    }
    url = docs_url(docs_base_url, c.docs_path)
    if url:
        rule["helpUri"] = url
    return rule


def _bare_rule(f: Finding) -> dict[str, Any]:
    return {"id": f.code, "name": f.name, "shortDescription": {"text": f.name}}


def _result(f: Finding, rule_index: int, report: Report) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": f.code,
        "ruleIndex": rule_index,
        "level": LEVEL[f.rating],
        "message": {"text": f.message},
        "locations": [_location(f.target, report.location(f), f.database)],
        "partialFingerprints": {FINGERPRINT: f.key},
        "properties": {
            "key": f.key,
            "severity": f.rating.label,
            "evidence": f.evidence,
            "fix": fix_dict(f.fix),
            "docs": f.docs,
        },
    }
    if f.proof is not None:
        result["properties"]["proof"] = proof_dict(f.proof)
    if report.baseline is not None:
        # Preexisting ones are not in the file; one whose severity rose is "updated".
        result["baselineState"] = "updated" if f.key in report.baseline.keys else "new"
    fixes = _fixes(f, report.location(f))
    if fixes:
        result["fixes"] = fixes
    return result


def _fixes(f: Finding, place: Location | None) -> list[dict[str, Any]]:
    """SARIF fixes: the migration steps only, as text inserted at the start of the finding's
    placeholder artifact. A rewrite is application code and a review step is for a person to
    judge, so neither is offered as something a tool may apply; nor is a migration for a
    finding located in one of the repository's SQL files, which it does not belong in."""
    if f.fix is None or not f.fix.statements or place is not None:
        return []
    location = _location(f.target, None, f.database)["physicalLocation"]["artifactLocation"]
    notes = list(dict.fromkeys(s.note for s in f.fix.of_kind("migration") if s.note))
    return [
        {
            "description": {"text": " ".join(["Run as printed, in order.", *notes])},
            "artifactChanges": [
                {
                    "artifactLocation": location,
                    "replacements": [
                        {
                            "deletedRegion": {"startLine": 1, "startColumn": 1, "endColumn": 1},
                            "insertedContent": {"text": "\n".join(f.fix.statements) + "\n"},
                        }
                    ],
                }
            ],
        }
    ]


def _location(t: Target, place: Location | None, database: str | None = None) -> dict[str, Any]:
    """Where a result is: its object (after its database, in a fleet), and a file of the
    repository or the object's pseudo artifact."""
    qualified = f"{database}/{t.key_part}" if database is not None else t.key_part
    logical: dict[str, Any] = {"fullyQualifiedName": qualified, "kind": t.kind}
    name = t.name or t.table
    if name:
        logical["name"] = name
    if place is not None:
        uri, line = "/".join(quote(p) for p in place.path.split("/")), place.line
    else:
        segments = [p for p in (t.schema, name) if p] or [t.kind]
        if database is not None:
            segments.insert(0, database)
        uri, line = "/".join([ARTIFACT_ROOT, *(_segment(p) for p in segments)]), 1
    return {
        "physicalLocation": {"artifactLocation": {"uri": uri}, "region": {"startLine": line}},
        "logicalLocations": [logical],
    }


def _segment(name: str) -> str:
    """A name as one path segment of a relative URI reference: '/' and the like encoded,
    and a name of dots alone too ('..' would climb out of the pseudo artifact's root)."""
    segment = quote(name, safe="")
    return segment.replace(".", "%2E") if segment.strip(".") == "" else segment


def write(report: Report, out: TextIO) -> None:
    out.write(render(report))


def write_fleet(fleet: FleetReport, out: TextIO) -> None:
    out.write(json.dumps(fleet_dict(fleet), indent=2, sort_keys=True, default=str) + "\n")
