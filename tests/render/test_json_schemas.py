"""The published schemas: docs/report.schema.json describes the JSON report exactly (every
field the code writes, nothing more), and docs/snapshot.schema.json is generated from the
snapshot's dataclasses and kept in sync. Every test that makes a JSON report validates it
(tests.helpers.Run.report, assert_quiet); these tests make the schemas themselves honest."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from qadvisor.docgen import schemas
from qadvisor.model import InlineIgnore, Sample, Statement, TableStats
from qadvisor.render import json as json_render
from tests import snapshots as S
from tests.json_schemas import (
    REPORT_SCHEMA,
    SNAPSHOT_SCHEMA,
    assert_valid_report,
    assert_valid_snapshot,
)
from tests.render.test_render import REPORTS, _checked_report, _snapshot


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


def test_every_object_of_the_report_schema_is_closed_and_complete() -> None:
    # Closed: a field the code adds without the schema fails validation. Complete: every
    # field the schema names is required, so a field the code stops writing fails too.
    schema = json.loads(REPORT_SCHEMA.read_text())
    objects = list(_objects(schema))
    assert len(objects) > 10
    for obj in objects:
        assert obj["additionalProperties"] is False, obj
        assert set(obj["required"]) == set(obj["properties"]), obj


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_golden_reports_match_the_schema(name: str) -> None:
    assert_valid_report(json_render.report_dict(REPORTS[name]()))


def test_a_report_of_the_real_checks_matches_the_schema() -> None:
    assert_valid_report(json.loads(json_render.render(_checked_report())))


def test_a_field_added_to_the_code_but_not_the_schema_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    report = REPORTS["baselined"]()
    # A renderer that starts writing one more field of a finding...
    finding = json_render._finding
    monkeypatch.setattr(json_render, "_finding", lambda f, r: {**finding(f, r), "new_field": 1})
    with pytest.raises(AssertionError, match="new_field"):
        assert_valid_report(json.loads(json_render.render(report)))
    monkeypatch.undo()
    # ... or of the report, or stops writing one.
    data = json_render.report_dict(report)
    data["extra"] = {}
    with pytest.raises(AssertionError, match="extra"):
        assert_valid_report(data)
    data = json_render.report_dict(report)
    del data["fixed"]
    with pytest.raises(AssertionError, match="fixed"):
        assert_valid_report(data)


def test_the_snapshot_schema_is_generated_from_the_code() -> None:
    assert SNAPSHOT_SCHEMA.read_text() == schemas.render(), (
        "docs/snapshot.schema.json is out of date: python -m qadvisor.docgen.schemas "
        "docs/snapshot.schema.json"
    )


def test_snapshots_match_their_schema() -> None:
    # A snapshot with most parts filled: statements with plans, a sample, inline ignores.
    snap = _snapshot()
    stmt = Statement("sql/claim.sql:3", "SELECT 1", line=3, custom_values={"1": "'x'"})
    snap = replace(
        snap,
        statements=(stmt,),
        sample=Sample(60.0, {"public.jobs": TableStats(n_dead_tup=5)}),
        inline_ignores=(InlineIgnore("sql/claim.sql:3", ("QA301",), 2),),
    )
    assert_valid_snapshot(json.loads(json.dumps(snap.to_dict())))
    assert_valid_snapshot(json.loads(json.dumps(S.snapshot(S.jobs_table()).to_dict())))
    bad = json.loads(json.dumps(snap.to_dict()))
    bad["tables"][0]["indexes"][0]["surprise"] = True
    with pytest.raises(AssertionError, match="surprise"):
        assert_valid_snapshot(bad)
    bad = json.loads(json.dumps(snap.to_dict()))
    bad["queues"][0]["live"]["op"] = "like"
    with pytest.raises(AssertionError, match="like"):
        assert_valid_snapshot(bad)
