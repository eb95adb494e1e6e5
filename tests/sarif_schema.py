"""The official SARIF 2.1.0 JSON schema (tests/schemas/sarif-schema-2.1.0.json, from the OASIS
SARIF TC's repository oasis-tcs/sarif-spec, sarif-2.1/schema/), and what GitHub code scanning
asks beyond it."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema

SCHEMA = Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json"


@cache
def _validator() -> jsonschema.Draft4Validator:
    schema = json.loads(SCHEMA.read_text())
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


def assert_valid_sarif(doc: dict[str, Any]) -> None:
    """Valid against the 2.1.0 schema, and every result placed in the repository as GitHub
    wants it: a relative URI reference (no scheme, no leading "/", no ".."), a line >= 1."""
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])
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
