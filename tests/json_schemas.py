"""The schemas outputs are validated against: the official SARIF 2.1.0 JSON schema
(tests/schemas/sarif-schema-2.1.0.json, from the OASIS SARIF TC's repository
oasis-tcs/sarif-spec, sarif-2.1/schema/) with what GitHub code scanning asks beyond it, and
qadvisor's own published schemas of the JSON report and the snapshot file (docs/)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema

SCHEMA = Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json"
DOCS = Path(__file__).resolve().parent.parent / "docs"
REPORT_SCHEMA = DOCS / "report.schema.json"
SNAPSHOT_SCHEMA = DOCS / "snapshot.schema.json"


@cache
def _validator() -> jsonschema.Draft4Validator:
    schema = json.loads(SCHEMA.read_text())
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


@cache
def _ours(path: Path) -> jsonschema.Draft202012Validator:
    schema = json.loads(path.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _assert_valid(validator: jsonschema.protocols.Validator, doc: Any, what: str) -> None:
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, f"{what}:\n" + "\n".join(
        f"{list(e.absolute_path)}: {e.message[:300]}" for e in errors[:10]
    )


def assert_valid_report(doc: Any) -> None:
    """The JSON report matches docs/report.schema.json: no field missing, none unknown."""
    _assert_valid(_ours(REPORT_SCHEMA), doc, "the JSON report does not match " + REPORT_SCHEMA.name)


def assert_valid_snapshot(doc: Any) -> None:
    """A snapshot file matches docs/snapshot.schema.json."""
    _assert_valid(
        _ours(SNAPSHOT_SCHEMA), doc, "the snapshot does not match " + SNAPSHOT_SCHEMA.name
    )


def assert_valid_sarif(doc: dict[str, Any]) -> None:
    """Valid against the 2.1.0 schema, and every result placed in the repository as GitHub
    wants it: a relative URI reference (no scheme, no leading "/", no ".."), a line >= 1."""
    _assert_valid(_validator(), doc, "not valid SARIF 2.1.0")
    for run in doc["runs"]:
        for rule in run["tool"]["driver"]["rules"]:
            if "helpUri" in rule:
                assert urlsplit(rule["helpUri"]).scheme in ("http", "https"), rule["helpUri"]
        for result in run["results"]:
            assert result["locations"], result
            for loc in result["locations"]:
                physical = loc["physicalLocation"]
                uri = physical["artifactLocation"]["uri"]
                parts = urlsplit(uri)
                assert not parts.scheme and not parts.netloc and not uri.startswith("/"), uri
                assert ".." not in uri.split("/") and all(c not in uri for c in ' "`|\\'), uri
                assert physical["region"]["startLine"] >= 1
            assert result["partialFingerprints"]["qadvisorKey/v1"]


FLEET_SCHEMA = DOCS / "fleet-report.schema.json"


@cache
def _fleet_validator() -> jsonschema.Draft202012Validator:
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    schema = json.loads(FLEET_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    report = DRAFT202012.create_resource(json.loads(REPORT_SCHEMA.read_text()))
    registry: Registry[Any] = Registry().with_resource(REPORT_SCHEMA.name, report)
    return jsonschema.Draft202012Validator(schema, registry=registry)


def assert_valid_fleet_report(doc: Any) -> None:
    """A fleet's JSON report matches docs/fleet-report.schema.json, each database's report
    docs/report.schema.json."""
    _assert_valid(_fleet_validator(), doc, "the fleet report does not match " + FLEET_SCHEMA.name)
