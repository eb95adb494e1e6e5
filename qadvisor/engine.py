"""Snapshot -> findings: run every check (pure), attach identities, filter and sort."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from qadvisor.model import Finding, Report, Skip, Snapshot
from qadvisor.registry import Check, Issue, Unmet


def run_checks(
    snapshot: Snapshot,
    checks: Sequence[Check],
    options: Mapping[str, Any] | None = None,
    ignore: Iterable[str] = (),
) -> Report:
    """Run each check on the snapshot; ``ignore`` holds codes or finding keys to drop."""
    ignored = set(ignore)
    findings: list[Finding] = []
    skipped: list[Skip] = []
    ran: list[str] = []
    for chk in checks:
        if chk.code in ignored:
            continue
        if chk.min_server_version and snapshot.server.version_num < chk.min_server_version:
            skipped.append(
                Skip(chk.code, f"needs PostgreSQL {chk.min_server_version // 10000} or newer")
            )
            continue
        ran.append(chk.code)
        opts = (options or {}).get(chk.code) or chk.default_options()
        reasons: list[tuple[str, str | None]] = []
        for item in chk.run(snapshot, opts):
            if isinstance(item, Unmet):
                reasons.append((item.reason, item.queue))
                continue
            finding = _finding(chk, item)
            if finding.key not in ignored:
                findings.append(finding)
        for reason, queue in dict.fromkeys(reasons):
            skipped.append(Skip(chk.code, reason, queue))
    findings.sort(key=lambda f: (-f.severity, f.code, f.key))
    return Report(snapshot, tuple(findings), tuple(skipped), tuple(ran))


def _finding(chk: Check, issue: Issue) -> Finding:
    return Finding(
        code=chk.code,
        name=chk.name,
        severity=issue.severity or chk.severity,
        target=issue.target,
        message=issue.message,
        evidence=issue.evidence,
        explanation=issue.explanation,
        fix=issue.fix,
        docs=chk.docs_path,
    )
