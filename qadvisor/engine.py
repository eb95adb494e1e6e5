"""Snapshot -> findings: run every check (pure), attach identities, filter and sort.

A check that requires a fact the snapshot lacks for a queue (hidden from the role, behind
another session's lock, or a read that failed) is reported as skipped for that queue, with the
reason and the GRANT that would show the fact, whatever it yielded for that queue: a queue
without a finding and without a skip is one the check judged healthy, and that must be earned.
"""

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
        missing = missing_facts(snapshot, chk)
        if None in missing:  # a fact of the whole database: the check cannot judge anything
            skipped += missing[None]
            continue
        opts = (options or {}).get(chk.code) or chk.default_options()
        reasons: list[tuple[str, str | None]] = []
        for item in chk.run(snapshot, opts):
            if isinstance(item, Unmet):
                if item.queue not in missing:
                    reasons.append((item.reason, item.queue))
                continue
            if _queue_of(item) in missing:
                continue
            finding = _finding(chk, item)
            if finding.key not in ignored:
                findings.append(finding)
        for reason, queue in dict.fromkeys(reasons):
            skipped.append(Skip(chk.code, reason, queue))
        for queue_skips in missing.values():
            skipped += queue_skips
    findings.sort(key=lambda f: (-f.severity, f.code, f.key))
    return Report(snapshot, tuple(findings), tuple(skipped), tuple(ran))


def missing_facts(snapshot: Snapshot, chk: Check) -> dict[str | None, list[Skip]]:
    """The skips the check gets for facts it requires that the snapshot lacks, by queue
    ("schema.table"; None: the whole database)."""
    out: dict[str | None, list[Skip]] = {}
    blockers: set[tuple[str | None, int]] = set()
    for fact in chk.requires:
        for h in snapshot.hidden:
            if h.fact != fact:
                continue
            if h.blocker_pid is not None:
                # One lock keeps several facts of a queue from being read: one skip says so.
                if (h.queue, h.blocker_pid) in blockers:
                    continue
                blockers.add((h.queue, h.blocker_pid))
            reason = f"{h.queue}: {h.reason}" if h.queue else h.reason
            out.setdefault(h.queue, []).append(Skip(chk.code, reason, h.queue, fact, h.grants))
        for key, reason in snapshot.unavailable.items():
            name, _, queue = key.partition(":")
            if name == fact:
                text = f"{queue}: {reason}" if queue else reason
                out.setdefault(queue or None, []).append(Skip(chk.code, text, queue or None, fact))
    return {q: list(dict.fromkeys(skips)) for q, skips in out.items()}


def _queue_of(issue: Issue) -> str | None:
    t = issue.target
    return f"{t.schema}.{t.table}" if t.schema and t.table else None


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
