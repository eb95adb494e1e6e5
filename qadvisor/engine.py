"""The pipeline: settings -> one snapshot -> every check -> one report.

:func:`check` is the one entry of every command that judges a database (``check``, ``demo``):
:func:`collect` reads the snapshot the settings name (a saved file, else the server, through
qadvisor.collect, the only code that talks to PostgreSQL), and :func:`judge` runs the checks
on it. ``snapshot`` stops after :func:`collect`. :func:`gate` gives the run's exit code by its
report (the codes are qadvisor.errors'). Rendering is the renderers' (qadvisor.render).

Judging: every check is pure; the engine attaches identities, filters and sorts, drops what
the inline ignores of --query-file statements name, places findings in the repository and
measures them against the baseline. A check that requires a fact the snapshot lacks for a
queue (hidden from the role, behind another session's lock, or a read that failed) is reported
as skipped for that queue, with the reason and the GRANT that would show the fact, whatever it
yielded for that queue: a queue without a finding and without a skip is one the check judged
healthy, and that must be earned.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from qadvisor.collect.connect import redact
from qadvisor.collect.server import role_setup_of, snapshot_of
from qadvisor.derive.statement_ids import statement_id
from qadvisor.errors import ExitCode, InputError, read_json
from qadvisor.history import store as history_store
from qadvisor.model import (
    BaselineEntry,
    Finding,
    Ignored,
    Location,
    Report,
    RoleSetup,
    Severity,
    Skip,
    Snapshot,
    Statement,
)
from qadvisor.registry import Check
from qadvisor.settings import baseline
from qadvisor.settings.config import selected
from qadvisor.settings.resolve import Settings, repo_path

# Called while --sample waits: (seconds elapsed, seconds in all).
Progress = Callable[[float, float], None]


class SnapshotFileError(InputError):
    """A file given as a saved snapshot cannot be read or is not one."""


def check(
    settings: Settings, progress: Progress | None = None, deadline: float | None = None
) -> Report:
    """The report of the run the settings describe; with --history, the earlier snapshots
    of the directory are read beside the new one (saving it is :func:`save_history`).
    ``deadline`` (time.monotonic()) bounds the visit to the server further (a fleet's run)."""
    snap = collect(settings, progress, deadline)
    if settings.history_dir is not None:
        snap = replace(snap, history=history_store.read(settings.history_dir, snap))
    return judge(snap, settings)


def save_history(report: Report, settings: Settings) -> Path | None:
    """This run's snapshot saved into the --history directory (without the history read
    beside it), the oldest beyond --history-keep removed; the file written, or None."""
    if settings.history_dir is None:
        return None
    snap = replace(report.snapshot, history=None)
    return history_store.save(
        settings.history_dir, snap, snapshot_json(snap), keep=settings.history_keep
    )


def role_setup(settings: Settings, role: str) -> RoleSetup:
    """What monitoring role ``role`` needs for every installed check to judge the queues of
    the settings' database, each grant with the checks that read what it shows."""
    setup = role_setup_of(settings, role)
    grants = tuple(
        replace(g, checks=tuple(c.code for c in settings.checks if set(c.requires) & set(g.facts)))
        for g in setup.grants
    )
    return replace(setup, grants=grants)


def collect(
    settings: Settings, progress: Progress | None = None, deadline: float | None = None
) -> Snapshot:
    """The snapshot the settings name: the saved file, else one read from the server."""
    if settings.snapshot_file is not None:
        return load_snapshot(settings.snapshot_file)
    snap = snapshot_of(settings, progress, deadline)
    return (
        replace(snap, inline_ignores=settings.inline_ignores) if settings.inline_ignores else snap
    )


def judge(snapshot: Snapshot, settings: Settings) -> Report:
    """Every check of the settings on the snapshot, with their options and ignores (given and
    inline), each finding placed in the repository, measured against the baseline if any;
    stamped with the time and the command as run (its DSN as "$DSN": a report is pasted where
    the server's host, port and user are no one's business; passwords removed elsewhere)."""
    chosen = [c for c in settings.checks if selected(c.code, settings.select)]
    report = run_checks(snapshot, chosen, settings.options, settings.ignore, settings.severities)
    report, dropped = apply_inline_ignores(report)
    report = replace(
        report,
        locations=locations(report, settings.root),
        anchor=settings.anchor,
        docs_url=settings.docs_url,
        checked_at=now(),
        command=command_line(settings),
    )
    if settings.baseline is None:
        return report
    ignored = set(settings.ignore) | dropped

    def judged(entry: BaselineEntry) -> bool:
        if entry.code not in report.checks_run or {entry.code, entry.key} & ignored:
            return False
        t = entry.target
        queue = f"{t.schema}.{t.table}" if t.schema and t.table else None
        return not any(
            s.code == entry.code and (s.queue is None or queue is None or s.queue == queue)
            for s in report.skipped
        )

    return replace(report, baseline=baseline.compare(report, settings.baseline, judged))


def now() -> str:
    """The time a report is stamped with: UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def command_line(settings: Settings) -> str | None:
    """The command as run for a report's header, its DSN as "$DSN" (a report is pasted where
    the server's host, port and user are no one's business), passwords removed elsewhere."""
    # Each argument is redacted before it is quoted for the shell: quoting rewrites a quote
    # in a password ('"'"'), and the password would no longer be found to remove.
    return (
        " ".join(
            '"$DSN"' if settings.dsn and a == settings.dsn else shlex.quote(redact(a, settings.dsn))
            for a in settings.command
        )
        or None
    )


def about_files(report: Report, files: Sequence[Path], root: Path) -> Report:
    """The report with the findings about statements of ``files`` alone (``check-sql``): a
    finding about a table or another statement is not theirs to fix. What could not be
    judged is still said."""
    paths = {repo_path(f, root) or str(f) for f in files}
    mine = tuple(
        f for f in report.findings if f.key in report.locations
        and report.locations[f.key].path in paths
    )  # fmt: skip
    return replace(report, findings=mine)


def _file_statements(snapshot: Snapshot) -> list[tuple[Statement, str, int]]:
    """The statements read from a --query-file, with the file and the line they start on."""
    out = []
    for s in snapshot.statements:
        if s.line is None or s.source == "pg_stat_statements" or s.source.startswith("--query"):
            continue
        path, _, line = s.source.rpartition(":")
        if path and line.isdigit():
            out.append((s, path, int(line)))
    return out


def _of_statement(f: Finding, stmt: Statement) -> bool:
    """Whether the finding is about this statement: the statement it names by id, judged on
    the queue of the finding's target (the same text on two queues has one id)."""
    if f.statement_id is None or f.statement_id != statement_id(stmt):
        return False
    return stmt.queue is None or stmt.queue == f"{f.target.schema}.{f.target.table}"


def locations(report: Report, root: Path) -> dict[str, Location]:
    """Finding key -> the --query-file line of its statement, for files inside ``root``."""
    out: dict[str, Location] = {}
    statements = _file_statements(report.snapshot)
    for f in report.findings:
        for stmt, path, line in statements:
            rel = repo_path(Path(path), root)
            if rel is not None and _of_statement(f, stmt):
                out.setdefault(f.key, Location(rel, line))
    return out


def apply_inline_ignores(report: Report) -> tuple[Report, set[str]]:
    """The report without the findings the --query-file comments ignore, with a record of
    each ignore and what it dropped; and the keys dropped."""
    ignores = report.snapshot.inline_ignores
    if not ignores:
        return report, set()
    by_source: dict[str, list[Statement]] = {}
    for s in report.snapshot.statements:
        by_source.setdefault(s.source, []).append(s)
    keep = list(report.findings)
    records: list[Ignored] = []
    dropped: set[str] = set()
    for ig in ignores:
        statements = by_source.get(ig.source, [])
        for code in ig.codes:
            hit = [
                f for f in keep if f.code == code and any(_of_statement(f, s) for s in statements)
            ]
            keep = [f for f in keep if f not in hit]
            dropped |= {f.key for f in hit}
            records.append(Ignored(ig.source, ig.line, code, len(hit)))
    return replace(report, findings=tuple(keep), ignored=tuple(records)), dropped


def gate(report: Report, settings: Settings) -> ExitCode:
    """The run's exit code by its report: FINDINGS for a finding at or above fail_on (with a
    baseline, a new one), else NOT_JUDGED when skips fail the gate and a check could not judge
    a queue (or no queue was found), else OK. A finding is the surer verdict, so it wins."""
    if settings.fail_on != "never":
        floor = Severity.parse(settings.fail_on)
        # With a baseline, only new findings count: the accepted ones are still reported.
        if any(f.rating >= floor for f in report.new_findings):
            return ExitCode.FINDINGS
    if settings.fail_on_skip and not report.fully_judged:
        return ExitCode.NOT_JUDGED
    return ExitCode.OK


def load_snapshot(path: Path) -> Snapshot:
    data = read_json(path, "snapshot", SnapshotFileError)
    try:
        # from_dict names what is wrong with anything that is not a snapshot, a list included.
        return Snapshot.from_dict(data)
    except (ValueError, TypeError, KeyError) as exc:
        raise SnapshotFileError(f"{path} is not a qadvisor snapshot: {exc}") from None


def snapshot_json(snapshot: Snapshot) -> str:
    """The snapshot as ``qadvisor snapshot`` saves it and load_snapshot reads it back."""
    return json.dumps(snapshot.to_dict(), indent=2, sort_keys=True) + "\n"


def run_checks(
    snapshot: Snapshot,
    checks: Sequence[Check],
    options: Mapping[str, Any] | None = None,
    ignore: Iterable[str] = (),
    severities: Mapping[str, Severity] | None = None,
) -> Report:
    """Run each check on the snapshot; ``options`` maps a code to its options object (the
    check's defaults where missing), ``ignore`` holds codes or finding keys to drop,
    ``severities`` a code to the severity the config file gives the check (see
    :func:`configured_severity`).

    The entry for a check's own tests: no settings, no server."""
    ignored = set(ignore)
    findings: list[Finding] = []
    skipped: list[Skip] = []
    ran: list[str] = []
    for chk in checks:
        if chk.code in ignored:
            continue
        if chk.min_server_version and snapshot.server.version_num < chk.min_server_version:
            version = chk.min_server_version // 10000
            skipped.append(Skip(f"needs PostgreSQL {version} or newer", code=chk.code))
            continue
        ran.append(chk.code)
        missing = missing_facts(snapshot, chk)
        if None in missing:  # a fact of the whole database: the check cannot judge anything
            skipped += missing[None]
            continue
        opts = (options or {}).get(chk.code) or chk.default_options()
        own_skips: list[Skip] = []
        for item in chk.run(snapshot, opts):
            if isinstance(item, Skip):
                if item.queue not in missing:
                    own_skips.append(replace(item, code=chk.code))
                continue
            if _queue_of(item) in missing:
                continue
            finding = _reported(chk, item, snapshot.server.is_standby)
            if chk.code in (severities or {}):
                own = finding.rating
                finding = replace(finding, severity=configured_severity(own, chk, severities))
            if finding.key not in ignored:
                findings.append(finding)
        skipped += dict.fromkeys(own_skips)
        for queue_skips in missing.values():
            skipped += queue_skips
    findings.sort(key=lambda f: (-f.rating, f.code, f.key))
    rules = tuple(
        replace(chk.rule, severity=(severities or {}).get(chk.code, chk.severity))
        for chk in checks
        if chk.code in ran
    )
    return Report(snapshot, tuple(findings), tuple(skipped), tuple(ran), rules)


def configured_severity(
    own: Severity, chk: Check, severities: Mapping[str, Severity] | None
) -> Severity:
    """A finding's severity under the config file's [severity] entry for its check: the
    entry, except for a finding the check itself rated below its default (evidence only near
    a threshold, or one a counter contradicts), which the entry never raises."""
    configured = (severities or {}).get(chk.code)
    if configured is None:
        return own
    return min(own, configured) if own < chk.severity else configured


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
            skip = Skip(reason, h.queue, code=chk.code, fact=fact, grants=h.grants)
            out.setdefault(h.queue, []).append(skip)
        for queue, reason in snapshot.unavailable_for(fact).items():
            text = f"{queue}: {reason}" if queue else reason
            out.setdefault(queue, []).append(Skip(text, queue, code=chk.code, fact=fact))
    return {q: list(dict.fromkeys(skips)) for q, skips in out.items()}


def _queue_of(found: Finding) -> str | None:
    t = found.target
    return f"{t.schema}.{t.table}" if t.schema and t.table else None


# Said first in every fix a standby's report prints: the statements cannot run where the
# findings were read.
ON_THE_PRIMARY = (
    "This server is a standby (in recovery), which runs no DDL, ALTER SYSTEM or VACUUM: run "
    "these steps on its primary."
)


def _reported(chk: Check, found: Finding, on_standby: bool = False) -> Finding:
    """The check's finding as the report holds it: with the check's identity and severity,
    and the statement it is about (a statement target's name, unless it names another)."""
    t = found.target
    fix = found.fix
    if on_standby and fix is not None and fix.steps:
        fix = replace(fix, notes=f"{ON_THE_PRIMARY} {fix.notes}".strip())
    return replace(
        found,
        code=chk.code,
        name=chk.name,
        severity=found.severity or chk.severity,
        fix=fix,
        docs=chk.docs_path,
        statement_id=found.statement_id or (t.name if t.kind == "statement" else None),
    )
