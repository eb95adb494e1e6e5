"""Renderers: golden files from hand-built reports, format validity, and the CLI's --format.

The golden reports are built by hand (findings, skips and checks written out here), so a
golden file changes only when a renderer does, not when a check rewords a message.
Regenerate them after an intended change with ``QADVISOR_UPDATE_GOLDEN=1 pytest
tests/render/test_render.py`` and review the diff. Never in CI: there the switch makes the golden
tests fail, since rewriting a golden file compares the output with itself.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from qadvisor import api
from qadvisor.api import provisional
from qadvisor.engine import run_checks
from qadvisor.fixes.builders import (
    CONCURRENT_BUILD_NOTE,
    drop_index,
    migration,
    review,
    rewrite,
    table_setting,
)
from qadvisor.model import (
    BaselineEntry,
    BaselineResult,
    Finding,
    Fix,
    HiddenFact,
    Ignored,
    LeftOut,
    LivePredicate,
    Location,
    Proof,
    ProofMeasure,
    ProofReproduction,
    ProofSeries,
    Queue,
    Rejected,
    Report,
    RoleSetting,
    SeriesPoint,
    ServerInfo,
    Severity,
    Skip,
    Snapshot,
    Statement,
    Target,
)
from qadvisor.registry import Check, NoOptions, load_checks
from qadvisor.render import json as json_render
from qadvisor.render import junit, labels, markdown, sarif, terminal
from qadvisor.render import sql as sql_render
from tests import snapshots as S
from tests.conftest import in_ci
from tests.json_schemas import assert_valid_sarif
from tests.render.evidence_fields import evidence_fields

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("QADVISOR_UPDATE_GOLDEN") == "1"
UPDATE_SET = "QADVISOR_UPDATE_GOLDEN" in os.environ
MB = 1024 * 1024
SECRET = "s3cr3t-Pa55"
DSN = f"postgresql://monitor:{SECRET}@db.internal:5432/app"


# --- hand-built reports -------------------------------------------------------------------


# The words the built-in checks declare for their own evidence fields, by code.
BUILT_IN_LABELS = {c.code: c.labels for c in load_checks()}


def _check(code: str, name: str, severity: Severity, doc: str) -> Check:
    return Check(
        code, name, severity, "test", doc.splitlines()[0], doc, NoOptions, lambda snap, opts: (),
        labels=BUILT_IN_LABELS.get(code, {}),
    )  # fmt: skip


CHECKS = (
    _check(
        "QA101",
        "archive-bloated-index",
        Severity.WARNING,
        "A non-partial index covers the archive.\n\n## What it finds\nAn index on the "
        "dequeue path that also indexes finished rows.\n\n## How to fix\nA partial index.",
    ),
    _check(
        "QA102",
        "dead-entry-bloated-partial-index",
        Severity.WARNING,
        "A partial index far larger than its live set needs.",
    ),
    _check(
        "QA201",
        "archive-scaled-vacuum-threshold",
        Severity.WARNING,
        "Autovacuum's trigger is set by the archive.\n\n## Why it matters\n"
        "`reltuples` counts finished rows | and <archived> ones & more.",
    ),
    _check(
        "QA203",
        "queue-autovacuum-disabled",
        Severity.CRITICAL,
        "Autovacuum is off for a queue table.",
    ),
    _check(
        "QA501",
        "lock-without-skip-locked",
        Severity.CRITICAL,
        "A dequeue takes its row lock without SKIP LOCKED.",
    ),
    _check("QA999", "made-up-info-check", Severity.INFO, "An informational check."),
)
# What a report of these checks says about them (what SARIF's rules come from).
RULES = tuple(c.rule for c in CHECKS)


def _snapshot() -> Snapshot:
    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), int(310.4 * MB))
    snap = S.snapshot(S.jobs_table(indexes=(idx,)))
    odd = Queue("Odd Schema", "we|rd`jobs", None, "named with --table")
    return replace(
        snap,
        server=ServerInfo("18.6", 180006, "app", f"monitor {SECRET}"),
        settings={**snap.settings, "primary_conninfo": DSN},
        role_settings=(RoleSetting("app", "monitor", "search_path", SECRET),),
        queues=(
            *snap.queues,
            replace(snap.queues[0], table="mail", live=LivePredicate("finished_at", "is null")),
            odd,
        ),
        rejected=(
            Rejected(
                "public",
                "jobs_log",
                "column status holds waiting (queued) and finished (done) values, but no known "
                "claim reads it (claims are known for other tables)",
            ),
        ),
        left_out=(
            LeftOut(
                "pg_stat_statements 1f2e3d4c5b (7,800 calls)",
                'SELECT $2 FROM ONLY "public"."jobs" x WHERE "id" OPERATOR(pg_catalog.=) $1 '
                "FOR KEY SHARE OF x",
                "is a foreign-key check run by PostgreSQL's RI triggers",
                "public.jobs",
            ),
        ),
    )


def _findings() -> tuple[Finding, ...]:
    jobs_idx = Target("index", "public", "jobs", "jobs_status_created_at_idx")
    return (
        Finding(
            code="QA203",
            name="queue-autovacuum-disabled",
            severity=Severity.CRITICAL,
            target=Target("table", "public", "jobs", "jobs"),
            message="Autovacuum is off for public.jobs: 1,753,949 dead tuples & counting <fast>.",
            evidence={
                "autovacuum_enabled": False,
                "n_dead_tup": 1_753_949,
                "last_autovacuum": None,
            },
            explanation="Dead tuples are never removed, so every index keeps growing.",
            fix=Fix(
                safety="safe",
                steps=(table_setting("ALTER TABLE public.jobs RESET (autovacuum_enabled);"),),
            ),
            docs="docs/checks/QA203.md",
        ),
        Finding(
            code="QA101",
            name="archive-bloated-index",
            severity=Severity.WARNING,
            target=jobs_idx,
            message="Index public.jobs_status_created_at_idx is 310.4 MB for 5,000 live rows "
            "(*not* a typo | really).",
            evidence={
                "index_bytes": 325_477_785,
                "live_rows": 5_000,
                "archive_fraction": 0.9995,
                "size_ratio": 1_234.5,
                "min_size_ratio": 10.0,
                "live_rows_source": "pg_stats most_common_freqs of status | sampled",
                "columns": ["status", "created_at"],
            },
            fix=Fix(
                notes="The dequeue query must say status = 'pending' with a literal.",
                steps=(
                    migration(
                        "CREATE INDEX CONCURRENTLY jobs_pending_created_at_idx\n"
                        "    ON public.jobs (created_at) WHERE status = 'pending';",
                        "SHARE UPDATE EXCLUSIVE",
                        in_transaction_block=False,
                        note=CONCURRENT_BUILD_NOTE,
                    ),
                    drop_index("public", "jobs_status_created_at_idx"),
                ),
            ),
            docs="docs/checks/QA101.md",
        ),
        Finding(
            code="QA201",
            name="archive-scaled-vacuum-threshold",
            severity=Severity.WARNING,
            target=Target("table", "Odd Schema", "we|rd`jobs", "we|rd`jobs"),
            message='- Autovacuum of "Odd Schema"."we|rd`jobs" waits for ~2 M dead tuples.',
            evidence={"vacuum_trigger": 2_000_050, "settings_source": "server défaut"},
            fix=Fix(
                (
                    'ALTER TABLE "Odd Schema"."we|rd`jobs" SET '
                    "(autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000);",
                ),
                "Takes a SHARE UPDATE EXCLUSIVE lock.",
                "safe",
            ),
            docs="docs/checks/QA201.md",
        ),
        Finding(
            code="QA501",
            name="lock-without-skip-locked",
            severity=Severity.CRITICAL,
            target=Target("statement", "public", "jobs", "--query 1"),
            message="--query 1 claims jobs rows with FOR UPDATE without SKIP LOCKED.",
            evidence={"wait_policy": "wait"},
            fix=Fix(
                notes="A worker now skips rows other workers hold.",
                steps=(
                    rewrite(
                        Statement(
                            "--query 1",
                            "select id from jobs where status = 'queued'\n"
                            "order by id limit 1 for update",
                        ),
                        "SELECT id FROM jobs WHERE status = 'queued'\nORDER BY id LIMIT 1\n"
                        "FOR UPDATE SKIP LOCKED;",
                    ),
                    review(
                        "SELECT pg_terminate_backend(4242);",
                        "none",
                        note="Ends the session that holds the first job.",
                    ),
                ),
            ),
            docs="docs/checks/QA501.md",
        ),
        Finding(
            code="QA999",
            name="made-up-info-check",
            severity=Severity.INFO,
            target=Target("database", None, None, None),
            message="Just so you know.\x01",
            evidence={},
            docs="docs/checks/QA999.md",
        ),
    )


def full_report() -> Report:
    return Report(
        snapshot=_snapshot(),
        findings=_findings(),
        skipped=(
            Skip(
                "public.mail: live set unknown: no pg_stats for finished_at",
                "public.mail",
                code="QA201",
            ),
            Skip("public.jobs: [stats] are *stale*", "public.jobs", code="QA201"),
            Skip("pg_stat_statements is not installed", code="QA301"),
            Skip(
                "public.mail: indexes not read: pid 4242 holds AccessExclusiveLock on "
                "public.mail (idle in transaction, transaction open 12 s: LOCK TABLE public.mail "
                "IN ACCESS EXCLUSIVE MODE)",
                "public.mail",
                code="QA101",
                fact="index_definitions",
            ),
            Skip(
                "public.jobs: live set unknown: pg_stats of status is hidden from monitor: "
                "GRANT SELECT (status) ON public.jobs TO monitor;",
                "public.jobs",
                code="QA102",
                fact="live_set",
                grants=("GRANT SELECT (status) ON public.jobs TO monitor;",),
            ),
        ),
        checks_run=("QA101", "QA102", "QA201", "QA203", "QA501", "QA999"),
        rules=RULES,
        checked_at="2026-12-01T09:30:00Z",
        command='qadvisor check "$DSN" --format markdown',
    )


def empty_report() -> Report:
    gap = HiddenFact(
        "discovery",
        None,
        "app.events was not judged as a queue: the values of status are hidden from monitor: "
        "GRANT SELECT (status) ON app.events TO monitor;",
        ("GRANT SELECT (status) ON app.events TO monitor;",),
    )
    snap = replace(_snapshot(), queues=(), tables=(), hidden=(gap,))
    return Report(snap, (), (), checks_run=("QA101", "QA102"), rules=RULES)


def baselined_report() -> Report:
    """The full report against a baseline: QA203 was a warning in it (its severity rose: new),
    QA101 and QA201 were accepted, QA999 is new; a QA102 finding is gone (fixed) and a QA301
    one not judged again. One statement finding of a --query-file, one inline ignore, and the
    config file's tables line as the anchor."""
    full = full_report()
    stmt = Finding(
        code="QA102",
        name="dead-entry-bloated-partial-index",
        severity=Severity.WARNING,
        target=Target("statement", "public", "jobs", "jobs@3f9a2c1b0d"),
        message="A made-up finding about the claim in sql/claim.sql.",
        evidence={"statement": "sql/claim.sql:3"},
        docs="docs/checks/QA102.md",
    )
    (qa999,) = [f for f in full.findings if f.code == "QA999"]
    findings = (*full.findings[:3], stmt, qa999)
    qa203, qa101, qa201 = (f.key for f in full.findings[:3])
    fixed = BaselineEntry(
        "QA102:public.jobs_pending_idx", "QA102", "dead-entry-bloated-partial-index",
        Severity.WARNING, Target("index", "public", "jobs", "jobs_pending_idx"),
    )  # fmt: skip
    unjudged = BaselineEntry(
        "QA301:public.jobs@0a1b2c3d4e", "QA301", "generic-plan-misses-partial-index",
        Severity.WARNING, Target("statement", "public", "jobs", "jobs@0a1b2c3d4e"),
    )  # fmt: skip
    return replace(
        full,
        findings=findings,
        baseline=BaselineResult(
            source="qadvisor-baseline.json",
            database="app",
            preexisting=frozenset({qa101, qa201}),
            keys=frozenset({qa203, qa101, qa201, fixed.key, unjudged.key}),
            fixed=(fixed,),
            not_judged=(unjudged,),
        ),
        ignored=(Ignored("sql/claim.sql:9", 8, "QA301", 1),),
        locations={stmt.key: Location("sql/claim.sql", 3)},
        anchor=Location("qadvisor.toml", 2),
    )


def proven_report() -> Report:
    """The full report under --prove: QA101's fix proven on a copy scaled down, its finding
    gone; QA201 not reproduced on the copy, with why; the others without a proof."""
    full = full_report()
    claim = "sql/claim.sql:3"
    gone = Proof(
        server_version="18.6", checked_version="16.4", rows=2_000_000, table_rows=10_000_000,
        scaled_down=True, live_rows=5_000, reproduced=True, finding_gone=True, check_quiet=True,
        measures=(
            ProofMeasure("claim ms", claim, 9600.0, 1.2, 8000.0,
                         "Sort over Seq Scan on jobs",
                         "Index Scan using jobs_pending_created_at_idx on jobs",
                         (9100.0, 9900.0), (1.1, 1.4), "lower"),
            ProofMeasure("shared buffers per claim", claim, 84_000.0, 4.0, 21_000.0,
                         before_spread=(84_000.0, 84_000.0), after_spread=(4.0, 4.0),
                         change="lower"),
            ProofMeasure("index bytes",
                         "jobs_status_created_at_idx -> jobs_pending_created_at_idx",
                         325_000_000, 131_072, 2480.0, change="lower"),
        ),
        notes=("measured on PostgreSQL 18.6; the checked server runs 16.4",),
        reproduction=(ProofReproduction(claim, None, 1.0, None, 84_000.0, 3.0, None),),
    )  # fmt: skip
    series = (
        ProofSeries("without the fix", 80_150.0, 3_333.0, (
            SeriesPoint(0.0, 0, 0, 0.05), SeriesPoint(0.5, 1_666, 0, None),
            SeriesPoint(12.0, 40_587, 0, 0.31))),
        ProofSeries("with the fix", 10_000.0, 3_333.0, (
            SeriesPoint(0.0, 0, 0, 0.05), SeriesPoint(3.1, 10_331, 1, 0.06),
            SeriesPoint(12.0, 13_330, 3, 0.06))),
    )  # fmt: skip
    vacuum = Proof(
        "18.6", "18.6", 400_500, 400_500, False, 500, reproduced=True, finding_gone=True,
        check_quiet=True,
        measures=(
            ProofMeasure("autovacuum runs", "public.jobs", 0, 3, None, change="higher"),
            ProofMeasure("dead tuples at peak", "public.jobs", 40_587, 13_330, 3.04,
                         change="lower"),
        ),
        notes=("driven for 12 s at 3,333 dead rows/s",),
        series=series,
    )  # fmt: skip
    unproven = Proof(
        "18.6", "16.4", 2_000_000, 10_000_000, True, 5_000, reproduced=False,
        finding_gone=None,
        notes=("not reproduced: qadvisor's checks on the copy do not report QA201:public.jobs",),
    )  # fmt: skip
    proofs = {"QA101": gone, "QA201": unproven, "QA203": vacuum}
    findings = tuple(replace(f, proof=proofs.get(f.code)) for f in full.findings)
    return replace(full, findings=findings)


REPORTS: dict[str, Callable[[], Report]] = {
    "full": full_report,
    "empty": empty_report,
    "baselined": baselined_report,
    "proven": proven_report,
}
FORMATS: dict[str, tuple[str, Callable[[Report], str]]] = {
    "json": ("json", json_render.render),
    "markdown": ("md", markdown.render),
    "sarif": ("sarif", sarif.render),
    "junit": ("junit.xml", junit.render),
    "sql": ("sql", sql_render.render),
}


@pytest.fixture(autouse=True)
def _fixed_version(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Golden files do not change with each release."""
    for module in (json_render, markdown, sarif, junit, sql_render):
        monkeypatch.setattr(module, "__version__", "0.0.0-test")
    yield


# --- golden files -----------------------------------------------------------------------


@pytest.mark.parametrize("report_name", sorted(REPORTS))
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_golden(fmt: str, report_name: str) -> None:
    ext, render = FORMATS[fmt]
    path = GOLDEN / f"{report_name}.{ext}"
    out = render(REPORTS[report_name]()).encode()
    if UPDATE_SET and in_ci():
        pytest.fail(
            "QADVISOR_UPDATE_GOLDEN is set in CI: golden files are compared there, never "
            "rewritten (a rewritten file is the output compared with itself)",
            pytrace=False,
        )
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_bytes(out)
    assert path.exists(), f"{path} is missing: run with QADVISOR_UPDATE_GOLDEN=1"
    assert out == path.read_bytes(), (
        f"{fmt} output differs from {path}; if intended, regenerate with "
        "QADVISOR_UPDATE_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize("report_name", sorted(REPORTS))
def test_sarif_validates_against_the_2_1_0_schema(report_name: str) -> None:
    assert_valid_sarif(json.loads(sarif.render(REPORTS[report_name]())))


def test_sarif_places_each_result_in_the_repository_and_leaves_out_accepted_ones() -> None:
    report = baselined_report()
    doc = json.loads(sarif.render(report))
    (run,) = doc["runs"]
    results = {r["partialFingerprints"]["qadvisorKey/v1"]: r for r in run["results"]}
    # The accepted findings are left out (their alerts close); new ones say how they are new.
    assert sorted(results) == sorted(f.key for f in report.new_findings)
    assert results["QA203:public.jobs"]["baselineState"] == "updated"  # its severity rose
    assert results["QA999:database"]["baselineState"] == "new"
    place = {k: r["locations"][0]["physicalLocation"] for k, r in results.items()}
    # A statement's finding is at its --query-file line; the others at the config file's.
    assert place["QA102:public.jobs@3f9a2c1b0d"] == {
        "artifactLocation": {"uri": "sql/claim.sql"}, "region": {"startLine": 3},
    }  # fmt: skip
    assert place["QA203:public.jobs"] == {
        "artifactLocation": {"uri": "qadvisor.toml"}, "region": {"startLine": 2},
    }  # fmt: skip
    # The database object stays the logical location.
    logical = results["QA203:public.jobs"]["locations"][0]["logicalLocations"]
    assert logical == [{"fullyQualifiedName": "public.jobs", "kind": "table", "name": "jobs"}]


def test_sarif_help_uri_from_the_report_docs_url() -> None:
    report = replace(full_report(), docs_url="https://example.org/qadvisor")
    doc = json.loads(sarif.render(report))
    assert_valid_sarif(doc)
    rules = doc["runs"][0]["tool"]["driver"]["rules"]
    assert [r["helpUri"] for r in rules][:2] == [
        "https://example.org/qadvisor/docs/checks/QA101.md",
        "https://example.org/qadvisor/docs/checks/QA102.md",
    ]
    assert "## What it finds" in rules[0]["help"]["markdown"]


def test_the_schema_check_catches_what_github_rejects() -> None:
    # The validator is not a formality: a result without a location, or a level SARIF does
    # not know, is caught.
    doc = json.loads(sarif.render(full_report()))
    doc["runs"][0]["results"][0]["level"] = "critical"
    with pytest.raises(AssertionError, match="critical"):
        assert_valid_sarif(doc)
    doc = json.loads(sarif.render(full_report()))
    doc["runs"][0]["results"][0]["locations"] = []
    with pytest.raises(AssertionError):
        assert_valid_sarif(doc)


def test_baselined_report_in_the_human_formats() -> None:
    report = baselined_report()
    md = markdown.render(report)
    assert "## Preexisting (2, in the baseline)" in md
    assert "## Fixed since the baseline (1)\n\n- `QA102:public.jobs_pending_idx`" in md
    assert "QA301 ignored on sql/claim.sql:9 (comment at sql/claim.sql:8): 1 finding" in md
    # Accepted findings are not repeated in full with the new ones.
    assert "### QA101" not in md and "### QA203" in md
    suite = ET.fromstring(junit.render(report)).find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["QA101:public.jobs_status_created_at_idx"].find("failure") is None
    assert cases["QA102:public.jobs_pending_idx"].find("failure") is None  # fixed: passes
    assert cases["QA203:public.jobs"].find("failure") is not None
    assert suite.get("failures") == str(len(report.new_findings))
    data = json_render.report_dict(report)
    states = {f["key"]: f["baseline"] for f in data["findings"]}
    assert states["QA101:public.jobs_status_created_at_idx"] == "preexisting"
    assert states["QA203:public.jobs"] == "new"
    assert data["baseline"]["not_judged"] == ["QA301:public.jobs@0a1b2c3d4e"]
    assert data["ignored"] == [
        {"source": "sql/claim.sql:9", "line": 8, "code": "QA301", "findings": 1}
    ]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_same_input_same_bytes(fmt: str) -> None:
    render = FORMATS[fmt][1]
    assert render(full_report()) == render(full_report())


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_no_secret_in_any_output(fmt: str) -> None:
    # The snapshot carries a password in the role name, a setting and a role setting: none
    # of it belongs in a report.
    out = FORMATS[fmt][1](full_report())
    assert SECRET not in out and "primary_conninfo" not in out and "db.internal" not in out


# --- markdown ------------------------------------------------------------------------------


def test_markdown_escapes_table_cells_and_formats_numbers() -> None:
    md = markdown.render(full_report())
    assert "| Index size | 310.4 MB |" in md
    assert "| Size against the partial index | 1,234.5x |" in md
    assert "Flagged because (the check's thresholds):\n\n| threshold | value |" in md
    assert "| Minimum size ratio | 10x |" in md
    assert "| Live rows | 5,000 (pg_stats most_common_freqs of status \\| sampled) |" in md
    # Escaped pipes do not split cells: every row has the columns of its table.
    rows = [ln for ln in md.splitlines() if ln.startswith("|") and not ln.startswith("|---")]
    widths = {ln.replace("\\|", "").count("|") for ln in rows}
    assert widths <= {3, 4, 5}
    # The SQL is verbatim in a fenced block, multi-line statements included.
    assert "```sql\nCREATE INDEX CONCURRENTLY jobs_pending_created_at_idx\n    ON" in md
    # A message that starts like a list item stays a paragraph.
    assert '\n\\- Autovacuum of "Odd Schema"' in md


# --- SARIF ---------------------------------------------------------------------------------


def _assert_valid_sarif(doc: dict[str, Any], report: Report) -> None:
    """The structure SARIF 2.1.0 requires, plus what GitHub code scanning insists on."""
    assert doc["version"] == "2.1.0"
    assert doc["$schema"].startswith("https://") and "sarif-schema-2.1.0" in doc["$schema"]
    (run,) = doc["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "qadvisor" and isinstance(driver["version"], str)
    rules = driver["rules"]
    assert [r["id"] for r in rules] == sorted(report.checks_run)
    for r in rules:
        assert r["name"] and r["shortDescription"]["text"] and r["fullDescription"]["text"]
        assert r["help"]["text"] and r["help"]["markdown"]
        assert r["defaultConfiguration"]["level"] in {"error", "warning", "note"}
        assert "helpUri" not in r or r["helpUri"].startswith("https://")
    assert len(run["results"]) == len(report.findings)
    for res, f in zip(run["results"], report.findings, strict=True):
        assert res["ruleId"] == f.code and rules[res["ruleIndex"]]["id"] == f.code
        assert (
            res["level"]
            == {"critical": "error", "warning": "warning", "info": "note"}[f.rating.label]
        )
        assert res["message"]["text"] == f.message
        assert res["partialFingerprints"] == {"qadvisorKey/v1": f.key}
        assert res["properties"]["evidence"] == json.loads(json.dumps(f.evidence, default=str))
        (loc,) = res["locations"]
        (logical,) = loc["logicalLocations"]
        assert logical["fullyQualifiedName"] == f.target.key_part
        assert logical["kind"] == f.target.kind
        # GitHub rejects results without an artifact, and URIs that are not URI references.
        uri = loc["physicalLocation"]["artifactLocation"]["uri"]
        assert uri.startswith("postgresql/") and all(c not in uri for c in ' "`|:')
        assert loc["physicalLocation"]["region"]["startLine"] >= 1


def test_sarif_structure_levels_and_fingerprints() -> None:
    report = full_report()
    doc = json.loads(sarif.render(report))
    _assert_valid_sarif(doc, report)
    (run,) = doc["runs"]
    idx = next(r for r in run["results"] if r["ruleId"] == "QA101")
    assert idx["locations"][0]["logicalLocations"] == [
        {
            "fullyQualifiedName": "public.jobs_status_created_at_idx",
            "kind": "index",
            "name": "jobs_status_created_at_idx",
        }
    ]
    odd = next(r for r in run["results"] if r["ruleId"] == "QA201")
    assert odd["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        "postgresql/Odd%20Schema/we%7Crd%60jobs"
    )
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert [n["associatedRule"]["id"] for n in notes] == ["QA201", "QA201", "QA301", "QA101",
                                                          "QA102"]  # fmt: skip
    qa101 = next(r for r in run["tool"]["driver"]["rules"] if r["id"] == "QA101")
    assert qa101["fullDescription"]["text"].startswith("## What it finds")


def test_sarif_help_uri_only_when_absolute() -> None:
    doc = sarif.sarif_dict(full_report(), docs_base_url="https://example.org/qa/")
    rules = doc["runs"][0]["tool"]["driver"]["rules"]
    assert rules[0]["helpUri"] == "https://example.org/qa/docs/checks/QA101.md"


def test_sarif_rule_for_a_finding_of_a_check_the_report_does_not_describe() -> None:
    report = replace(full_report(), rules=tuple(r for r in RULES if r.code != "QA999"))
    doc = sarif.sarif_dict(report)
    rules = doc["runs"][0]["tool"]["driver"]["rules"]
    res = doc["runs"][0]["results"][-1]
    assert res["ruleId"] == "QA999" and rules[res["ruleIndex"]]["id"] == "QA999"


# --- JUnit ---------------------------------------------------------------------------------


def _junit_counts(xml: str, report: Report) -> ET.Element:
    root = ET.fromstring(xml)
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "qadvisor"
    cases = suite.findall("testcase")
    failures = [c for c in cases if c.find("failure") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    # A run that found no queue has one more skipped case: discovery.
    discovery = [] if report.snapshot.queues else ["discovery"]
    assert suite.get("tests") == root.get("tests") == str(len(cases))
    assert suite.get("failures") == str(len(failures)) == str(len(report.findings))
    assert suite.get("skipped") == str(len(skipped)) == str(len(report.skipped) + len(discovery))
    assert [c.get("name") for c in skipped if c.get("classname") == "qadvisor"] == discovery
    assert suite.get("errors") == "0"
    assert [c.get("name") for c in failures] == [f.key for f in report.findings]
    assert [c.get("classname") for c in failures] == [f.code for f in report.findings]
    names = [(c.get("classname"), c.get("name")) for c in cases]
    assert len(set(names)) == len(names), "test case identities must be unique"
    return suite


def test_junit_parses_and_counts_match() -> None:
    report = full_report()
    suite = _junit_counts(junit.render(report), report)
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    # Every check that ran has a finding or a skip: none passes. A skip names its queue.
    passing = [n for n, c in cases.items() if len(c) == 0]
    assert passing == []
    assert cases["QA201 public.mail"].find("skipped") is not None
    assert cases["QA102 public.jobs"].find("skipped") is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["not_judged public.jobs"] == "QA201, QA102"
    assert props["not_judged (whole database)"] == "QA301"
    skip = cases["QA301"].find("skipped")
    assert skip is not None and skip.get("message") == "pg_stat_statements is not installed"
    failure = cases["QA101:public.jobs_status_created_at_idx"].find("failure")
    assert failure is not None and failure.get("type") == "warning"
    assert failure.text is not None
    assert "index_bytes: 325,477,785" in failure.text
    assert "DROP INDEX CONCURRENTLY public.jobs_status_created_at_idx;" in failure.text
    # A control character (not allowed in XML 1.0) did not make the document unparseable.
    info = cases["QA999:database"].find("failure")
    assert info is not None and info.get("message") == "Just so you know.\ufffd"


def test_junit_report_without_a_queue_is_not_all_green() -> None:
    report = empty_report()
    suite = _junit_counts(junit.render(report), report)
    assert [c.get("name") for c in suite.findall("testcase")] == ["QA101", "QA102", "discovery"]
    assert suite.get("skipped") == "1"


# --- real checks on a snapshot, every format -----------------------------------------------


def _checked_report() -> Report:
    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), int(310.4 * MB))
    snap = S.snapshot(S.jobs_table(indexes=(idx,)))
    return run_checks(snap, load_checks())


def test_every_format_renders_a_report_of_the_real_checks() -> None:
    report = _checked_report()
    assert report.findings, "the snapshot is meant to trip at least one check"
    assert [r.code for r in report.rules] == list(report.checks_run)
    _assert_valid_sarif(json.loads(sarif.render(report)), report)
    assert_valid_sarif(json.loads(sarif.render(report)))
    _junit_counts(junit.render(report), report)
    md = markdown.render(report)
    for f in report.findings:
        assert f"### {f.code} {f.name}: `{f.target.key_part}`" in md


# --- the CLI -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["markdown", "sarif", "junit", "sql"])
def test_cli_formats_on_a_snapshot_file(fmt: str, tmp_path: Path) -> None:
    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), int(310.4 * MB))
    snap = S.snapshot(S.jobs_table(indexes=(idx,)))
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap.to_dict()))
    proc = subprocess.run(
        [sys.executable, "-m", "qadvisor", "check", "--snapshot", str(path), "--format", fmt],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr  # a warning finding, --fail-on warning
    assert proc.stderr == ""
    if fmt == "sarif":
        doc = json.loads(proc.stdout)
        assert_valid_sarif(doc)
        results = doc["runs"][0]["results"]
        assert "QA101" in {r["ruleId"] for r in results}
        assert {r["id"] for r in doc["runs"][0]["tool"]["driver"]["rules"]} >= {"QA101"}
    elif fmt == "junit":
        root = ET.fromstring(proc.stdout)
        assert int(root.get("failures", "0")) >= 1
    elif fmt == "sql":
        assert proc.stdout.startswith("-- qadvisor ")
        assert "-- QA101 archive-bloated-index: public.jobs_status_created_at_idx (warning)" in (
            proc.stdout
        )
    else:
        assert proc.stdout.startswith("# qadvisor report: app on PostgreSQL 18.x")
        assert "### QA101 archive-bloated-index: `public.jobs_status_created_at_idx`" in (
            proc.stdout
        )


def test_github_annotations_escape_messages_and_titles() -> None:
    from qadvisor.model import Finding, Report, Severity, Target
    from qadvisor.render import github
    from tests import snapshots as S

    target = Target("table", "public", "jobs", "jobs")
    finding = Finding(
        target,
        "50% done,\nnext: x",
        {},
        severity=Severity.CRITICAL,
        code="QA201",
        name="archive-scaled-vacuum-threshold",
    )
    report = Report(S.snapshot(S.jobs_table()), (finding,), (), ("QA201",))
    assert github.render(report) == (
        "::error title=QA201 archive-scaled-vacuum-threshold public.jobs::50%25 done,%0Anext: x\n"
    )


def test_github_annotations_name_the_file_and_leave_out_accepted_findings() -> None:
    from qadvisor.render import github

    lines = github.render(baselined_report()).splitlines()
    assert [ln.split(" ", 1)[0] for ln in lines] == ["::error", "::warning", "::notice"]
    assert lines[1].startswith(
        "::warning file=sql/claim.sql,line=3,title=QA102 dead-entry-bloated-partial-index "
    )
    assert lines[0].startswith("::error file=qadvisor.toml,line=2,title=QA203 ")
    assert not any("QA101" in ln for ln in lines)  # preexisting


# --- terminal ------------------------------------------------------------------------------


def _terminal(report: Report, *, verbose: bool) -> str:
    out = io.StringIO()
    terminal.write(report, out, verbose=verbose)
    return out.getvalue()


def test_terminal_counts_what_discovery_did_not_take_and_lists_it_when_verbose() -> None:
    brief = " ".join(_terminal(full_report(), verbose=False).split())
    assert "1 candidate table(s) not taken for queues" in brief
    assert "1 row-locking statement(s) not judged as claims" in brief
    assert "jobs_log" not in brief and "RI triggers" not in brief
    listed = " ".join(_terminal(full_report(), verbose=True).split())
    assert "public.jobs_log" in listed and "no known claim reads it" in listed
    assert "pg_stat_statements 1f2e3d4c5b" in listed and "RI triggers" in listed
    assert "--verbose lists them" not in listed


def test_terminal_prints_one_line_per_proof_and_its_notes() -> None:
    text = " ".join(_terminal(proven_report(), verbose=False).split(" "))
    flat = " ".join(text.split())
    assert (
        "proven on a 2,000,000-row copy (scaled down from 10,000,000 rows), PostgreSQL 18.6 "
        "(the checked server runs 16.4): claim 9.60 s (9.10-9.90 s) -> 1.2 ms (1.1-1.4 ms)" in flat
    )
    assert "index bytes 309.9 MB -> 128.0 kB, finding gone" in flat
    assert "measured on PostgreSQL 18.6; the checked server runs 16.4" in flat
    assert "not proven on a 2,000,000-row copy" in flat and "not reproduced" in flat
    assert (
        "proven on a 400,500-row copy, PostgreSQL 18.6: autovacuum runs 0 -> 3, dead tuples at "
        "peak 40,587 -> 13,330, finding gone" in flat
    )
    assert "proven on" not in " ".join(_terminal(full_report(), verbose=False).split())


def test_terminal_fixes_are_sql_that_a_copy_can_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # A narrow terminal: before, each fix sat in a frame ("│" on every line) and its
    # statements were folded at the frame's width.
    monkeypatch.setenv("COLUMNS", "50")
    report = full_report()
    text = _terminal(report, verbose=False)
    assert not set("│╭╮╰╯┃") & set(text)
    lines = text.splitlines()
    steps = [s for f in report.findings if f.fix for s in f.fix.steps]
    assert {s.kind for s in steps} >= {"migration", "review", "rewrite"}
    for step in steps:
        for line in step.sql.rstrip().splitlines():
            # What runs as printed is SQL line for line; the rest is commented out, whole.
            shown = line if step.kind == "migration" and not step.left_to_fill else f"-- {line}"
            assert shown.rstrip() in lines, (step.kind, line)


def test_the_sql_script_runs_the_migrations_once_and_comments_out_everything_else() -> None:
    # Names and messages come from the database: a line break in one must not end a comment
    # and turn the rest of the line into a statement.
    hostile = "x\nDROP TABLE users; --\r\nDROP TABLE accounts;"
    report = full_report()
    snap = replace(report.snapshot, server=replace(report.snapshot.server, database=hostile))
    (first, *rest) = report.findings
    evil = replace(first, message=f"About {hostile}.", target=replace(first.target, name=hostile))
    # Another finding proposes the same statement: it runs once.
    twice = replace(rest[0], target=replace(rest[0].target, name="other"))
    report = replace(report, snapshot=snap, findings=(evil, *rest, twice))
    script = sql_render.render(report)
    runnable = {
        line
        for f in report.findings
        if f.fix
        for step in f.fix.steps
        if step.kind == "migration" and not step.left_to_fill
        for line in step.sql.splitlines()
    }
    statements = [ln for ln in script.splitlines() if ln and not ln.startswith("-- ")]
    assert set(statements) - runnable == {"SET lock_timeout = '5s';"}, statements
    assert "DROP TABLE users" in script and "DROP TABLE accounts" in script  # in comments
    drops = [ln for ln in statements if ln.startswith("DROP INDEX CONCURRENTLY")]
    assert len(drops) == 1
    assert "-- already run above: DROP INDEX CONCURRENTLY public.jobs_status_created_at_idx;" in (
        script
    )


def test_docs_pages_follow_the_docs_url_in_markdown_and_the_terminal() -> None:
    report = replace(full_report(), docs_url="https://example.org/qadvisor/")
    md = markdown.render(report)
    assert (
        "Docs: [docs/checks/QA101.md](https://example.org/qadvisor/docs/checks/QA101.md) "
        "(`qadvisor explain QA101`)"
    ) in md
    assert "](docs/" not in md  # never a link into whatever repository it is pasted in
    text = _terminal(report, verbose=False)
    assert "docs: https://example.org/qadvisor/docs/checks/QA101.md (qadvisor explain QA101)" in (
        " ".join(text.split())
    )
    # Without a published URL, the page is named, not linked.
    assert "Docs: `docs/checks/QA101.md` (`qadvisor explain QA101`)" in markdown.render(
        full_report()
    )


def test_markdown_leaves_an_arrow_alone_and_escapes_a_quote_mark_that_starts_a_line() -> None:
    (first, *rest) = full_report().findings
    arrow = replace(first, message="> Claim 0.2 ms -> 80 ms; a <value> stays text.")
    md = markdown.render(replace(full_report(), findings=(arrow, *rest)))
    assert "\\> Claim 0.2 ms -> 80 ms; a \\<value> stays text." in md
    assert "-\\>" not in md


def test_a_fix_of_notes_alone_says_there_is_nothing_to_run() -> None:
    # QA101 when claims pass an existing partial index over: advice, no statement.
    (first, *rest) = _findings()
    advice = replace(first, fix=Fix(notes="Their plans pass jobs_pending over.", safety="review"))
    report = replace(full_report(), findings=(advice, *rest))
    md = markdown.render(report)
    assert "**Fix** (nothing to run: read the notes):" in md
    assert "Their plans pass jobs_pending over." in md
    flat = " ".join(_terminal(report, verbose=False).split())
    assert "fix (nothing to run): -- Their plans pass jobs_pending over." in flat
    # A fix with statements keeps its safety.
    assert "**Fix** (safe: can run as printed on a live system):" in markdown.render(full_report())


# --- human evidence -------------------------------------------------------------------------


def test_evidence_reads_in_human_words_with_units_and_thresholds_apart() -> None:
    ev = labels.human_evidence(
        {
            "index_bytes": 66_854_912,
            "live_rows": 6051,
            "live_rows_source": "pg_stats of status",
            "archive_fraction": 0.9994,
            "size_ratio": 242.0,
            "mean_exec_ms": 0.42,
            "dead_tuples_per_s": 12.5,
            "index_columns": ["status", "created_at"],
            "min_index_bytes": 8 * 1024 * 1024,
            "generic_plan": "Limit\n  -> Index Scan using jobs_pkey on jobs",
            "rows_seen": 3,
        },
        # Its check's own labels (two of them are QA101's and QA201's own fields).
        {**BUILT_IN_LABELS["QA101"], **BUILT_IN_LABELS["QA201"]},
    )
    facts = {line.label: line.text for line in ev.facts}
    assert facts == {
        "Index size": "63.8 MB",
        "Live rows": "6,051 (pg_stats of status)",
        "Finished rows": "99.94 %",
        "Size against the partial index": "242x",
        "Mean execution time": "0.42 ms",
        "Dead tuples per second (measured)": "12.5 /s",
        "Index columns": "status, created_at",
        "Rows seen": "3",  # a field without a label still reads as words
    }
    assert [(t.label, t.text) for t in ev.thresholds] == [("Minimum index size", "8.0 MB")]
    assert [(b.label, b.field) for b in ev.blocks] == [("Generic plan", "generic_plan")]


def _unlabelled(chk: Check) -> tuple[set[str], list[str]]:
    """The evidence fields a check can emit, read from its module's syntax tree and from the
    modules of the qadvisor.api (and api.provisional) helpers whose results it merges into
    evidence; and those of them with no label, neither its own nor a shared one."""
    module = sys.modules[chk.run.__module__]
    assert module.__file__, chk.code
    sources = {module.__file__: Path(module.__file__).read_text()}
    while True:
        fields, elsewhere = evidence_fields(sources.values())
        if not elsewhere:
            break
        for name in sorted(elsewhere):
            path = inspect.getsourcefile(getattr(api, name, None) or getattr(provisional, name))
            assert path and path not in sources, f"the fields of {name}() cannot be read"
            sources[path] = Path(path).read_text()
    known = set(chk.labels) | set(labels.LABELS) | set(labels.BLOCKS)
    missing = sorted(
        f for f in fields - known if not (f.endswith("_source") and f[: -len("_source")] in known)
    )
    return fields, missing


def test_every_evidence_field_of_the_built_in_checks_has_a_label() -> None:
    # A check declares the words of its own evidence fields (check(..., labels=...)); those
    # several checks emit, or a helper of qadvisor.api does, are in labels.LABELS.
    every: set[str] = set()
    for chk in load_checks():
        fields, missing = _unlabelled(chk)
        every |= fields
        assert missing == [], (
            f"{chk.code} emits evidence fields without a label: {', '.join(missing)}: add "
            "them to the labels= of its @check (to qadvisor.render.labels.LABELS when "
            "several checks emit one)"
        )
    # One of a helper's, one of a one-line dict, one a method returns: each way is read.
    assert {"statement", "setting", "partitions_to_drop"} <= every


def test_markdown_header_names_database_time_version_and_command() -> None:
    md = markdown.render(full_report())
    head = md.split("**Summary:**")[0]
    assert "- **Database:** `app` on PostgreSQL 18.6" in head
    assert "- **Checked at:** 2026-12-01T09:30:00Z" in head
    assert "- **qadvisor:** 0.0.0-test" in head
    assert '`qadvisor check "$DSN" --format markdown`' in head
    assert "index_bytes" not in md and "live_rows" not in md  # no raw field names


def test_a_proof_whose_fix_was_not_run_or_failed_says_so_not_that_nothing_was_reproduced() -> None:
    from qadvisor.model import Proof
    from qadvisor.render.proof import proof_lines

    note = "not proven: the fix has a part only the DBA can write (<x>), ..."
    base = Proof("18.6", "18.6", 1_000, 1_000, False, 10, True, None, notes=(note,))
    assert proof_lines(base)[0].endswith(": fix not proven on the copy")
    assert proof_lines(base)[1] == note
    failed = replace(base, notes=("not proven: the fix failed on the copy: syntax error",))
    assert proof_lines(failed)[0].endswith(": fix not proven on the copy")
    assert proof_lines(failed)[1].startswith("not proven: the fix failed on the copy")
    lost = replace(base, reproduced=False)
    assert proof_lines(lost)[0].endswith(": finding not reproduced on the copy")


def test_a_proof_whose_check_went_quiet_while_nothing_moved_does_not_read_gone() -> None:
    from qadvisor.model import Proof, ProofMeasure
    from qadvisor.render.proof import proof_lines

    # QA301 on the round-robin trap: the rewrite changed nothing the claim costs.
    claim = ProofMeasure("claim ms", "q", 5_548.0, 5_483.0, None, "a", "a",
                         (5_300.0, 5_900.0), (5_400.0, 5_700.0), "none")  # fmt: skip
    quiet = Proof("18.6", "18.6", 1_000, 1_000, False, 10, True, False, (claim,),
                  check_quiet=True)  # fmt: skip
    first = proof_lines(quiet)[0]
    assert "claim 5.55 s (5.30-5.90 s) -> 5.48 s (5.40-5.70 s), no measurable change" in first
    assert first.startswith("not proven on a 1,000-row copy")
    assert first.endswith(", the check is quiet but nothing measurably changed")
    assert "finding gone" not in first


def test_a_retention_proof_says_the_table_rows_once() -> None:
    from qadvisor.model import Proof, ProofMeasure
    from qadvisor.render.proof import proof_lines

    rows = ProofMeasure("table rows", "the queue table", 2_205_200, 280_747, 7.85, change="lower")
    pruned = Proof("18.6", "18.6", 2_205_200, 2_205_200, False, 5_145, True, True, (rows,),
                   check_quiet=True)  # fmt: skip
    (first,) = proof_lines(pruned)
    assert first.endswith(": table rows 2,205,200 -> 280,747, finding gone"), first
