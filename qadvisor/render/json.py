"""The JSON report: a public contract (schema_version 1) that CI scripts parse."""

from __future__ import annotations

import json
from typing import Any, TextIO

from qadvisor import __version__
from qadvisor.model import (
    BaselineEntry,
    Finding,
    Fix,
    FixStep,
    FleetMember,
    FleetReport,
    Location,
    Report,
)
from qadvisor.render.proof import proof_dict
from qadvisor.render.values import statement_start
from qadvisor.sql.printing import predicate_sql

SCHEMA_VERSION = 1


def report_dict(report: Report) -> dict[str, Any]:
    snap = report.snapshot
    return {
        "schema_version": SCHEMA_VERSION,
        "qadvisor_version": __version__,
        "server": {
            "version": snap.server.version,
            "version_num": snap.server.version_num,
            "is_standby": snap.server.is_standby,
        },
        "database": snap.server.database,
        "queues": [
            {
                "schema": q.schema,
                "table": q.table,
                "live_predicate": predicate_sql(q.live) if q.live else None,
                "reason": q.reason,
            }
            for q in snap.queues
        ],
        "rejected": [
            {"schema": r.schema, "table": r.table, "reason": r.reason} for r in snap.rejected
        ],
        "left_out": [
            {
                "source": o.source,
                "statement": statement_start(o.text),
                "reason": o.reason,
                "queue": o.queue,
            }
            for o in snap.left_out
        ],
        "maintenance": [
            {
                "source": m.source,
                "statement": statement_start(m.text),
                "queue": m.queue,
                "kind": m.parsed.maintenance.kind if m.parsed and m.parsed.maintenance else None,
                "reason": m.parsed.maintenance.reason
                if m.parsed and m.parsed.maintenance
                else None,
                "calls": m.calls,
                "mean_exec_ms": m.mean_exec_ms,
                "shared_blks_per_call": m.shared_blks_per_call,
            }
            for m in snap.maintenance
        ],
        "checks_run": list(report.checks_run),
        "findings": [_finding(f, report) for f in report.findings],
        "baseline": _baseline(report),
        "fixed": [_entry(e) for e in report.baseline.fixed] if report.baseline else [],
        "ignored": [
            {"source": i.source, "line": i.line, "code": i.code, "findings": i.findings}
            for i in report.ignored
        ],
        "skipped": [
            {
                "code": s.code,
                "reason": s.reason,
                "queue": s.queue,
                "fact": s.fact,
                "grants": list(s.grants),
            }
            for s in report.skipped
        ],
        "hidden": [
            {
                "fact": h.fact,
                "queue": h.queue,
                "reason": h.reason,
                "grants": list(h.grants),
                "blocker_pid": h.blocker_pid,
            }
            for h in snap.hidden
        ],
        "summary": {**report.summary(), "skipped": len(report.skipped)},
        "history": _history(report),
    }


def _history(report: Report) -> dict[str, Any] | None:
    h = report.snapshot.history
    if h is None:
        return None
    return {
        "directory": h.directory,
        "earlier": [{"file": e.source, "collected_at": e.collected_at} for e in h.earlier],
        "not_mixed_in": [{"file": m.source, "reason": m.reason} for m in h.not_mixed_in],
    }


def _baseline(report: Report) -> dict[str, Any] | None:
    b = report.baseline
    if b is None:
        return None
    states = [report.baseline_state(f) for f in report.findings]
    return {
        "file": b.source,
        "database": b.database,
        "new": states.count("new"),
        "preexisting": states.count("preexisting"),
        "fixed": len(b.fixed),
        "not_judged": [e.key for e in b.not_judged],
    }


def _entry(e: BaselineEntry) -> dict[str, Any]:
    t = e.target
    return {
        "code": e.code,
        "name": e.name,
        "severity": e.severity.label,
        "key": e.key,
        "target": {"kind": t.kind, "schema": t.schema, "table": t.table, "name": t.name},
    }


def location_dict(loc: Location | None) -> dict[str, Any] | None:
    return None if loc is None else {"path": loc.path, "line": loc.line}


def _finding(f: Finding, report: Report) -> dict[str, Any]:
    return {
        # A fleet's finding names the database by its label, as its key does.
        "database": f.database if f.database is not None else report.snapshot.server.database,
        "baseline": report.baseline_state(f),
        "location": location_dict(report.locations.get(f.own_key)),
        "code": f.code,
        "name": f.name,
        "severity": f.rating.label,
        "key": f.key,
        "target": {
            "kind": f.target.kind,
            "schema": f.target.schema,
            "table": f.target.table,
            "name": f.target.name,
        },
        "message": f.message,
        "evidence": f.evidence,
        "fix": fix_dict(f.fix),
        "docs": f.docs,
        "proof": proof_dict(f.proof),
    }


def fix_dict(fix: Fix | None) -> dict[str, Any] | None:
    """A fix as the JSON contract spells it (shared with the SARIF properties):
    ``statements`` the migration steps' statements only (they run as printed), ``steps``
    every step."""
    if fix is None:
        return None
    return {
        "statements": list(fix.statements),
        "steps": [step_dict(s) for s in fix.steps],
        "notes": fix.notes,
        "safety": fix.safety,
    }


def step_dict(step: FixStep) -> dict[str, Any]:
    return {
        "kind": step.kind,
        "sql": step.sql,
        "lock": step.lock,
        "in_transaction_block": step.in_transaction_block,
        "note": step.note,
        "before": step.before,
        "source": step.source,
    }


def fleet_dict(fleet: FleetReport) -> dict[str, Any]:
    """A fleet's combined report: each database's report as one run of its own prints it
    (under ``databases[].report``), or why there is none; and every finding of them all in
    one list, each naming its database, in its key too."""
    not_judged = len(fleet.not_judged)
    return {
        "schema_version": SCHEMA_VERSION,
        "qadvisor_version": __version__,
        "fleet": {
            "source": fleet.source,
            "jobs": fleet.jobs,
            "databases": len(fleet.members),
            "judged": len(fleet.members) - not_judged,
            "not_judged": not_judged,
        },
        "databases": [_member(m) for m in fleet.members],
        "findings": [_finding(f, report) for f, report in fleet.findings],
        "summary": {**fleet.summary(), "skipped": fleet.skipped, "not_judged": not_judged},
    }


def _member(m: FleetMember) -> dict[str, Any]:
    return {
        "database": m.database,
        "judged": m.judged,
        "not_judged": m.not_judged,
        "reason": m.reason,
        "grants": list(m.grants),
        "report": report_dict(m.report) if m.report is not None else None,
    }


def render(report: Report) -> str:
    return json.dumps(report_dict(report), indent=2, sort_keys=True, default=str) + "\n"


def write(report: Report, out: TextIO) -> None:
    out.write(render(report))


def write_fleet(fleet: FleetReport, out: TextIO) -> None:
    out.write(json.dumps(fleet_dict(fleet), indent=2, sort_keys=True, default=str) + "\n")
