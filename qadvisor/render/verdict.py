"""What a report may say about the queues as a whole, shared by the human-readable renderers.

A report says which checks could not judge which queue before it says anything is fine, and
"No problems found" only when queues were found and every check that ran judged every one.
"""

from __future__ import annotations

from qadvisor.model import FleetReport, HiddenFact, Report

ALL_CLEAR = "No problems found on the queue tables."


def _checks(n: int) -> str:
    return f"{n} check" if n == 1 else f"{n} checks"


def not_judged_count(report: Report) -> int:
    """Checks that could not judge at least one queue."""
    return len({s.code for s in report.skipped})


def checks_run_note(report: Report) -> str:
    """ "14 checks run", and how many of them could not judge every queue."""
    text = f"{_checks(len(report.checks_run))} run"
    n = not_judged_count(report)
    return f"{text}, {n} could not judge every queue" if n else text


def not_judged_lines(report: Report) -> list[str]:
    """One line per queue (and one for skips of the whole database) naming the checks."""
    lines = []
    for queue, codes in report.not_judged():
        where = queue if queue is not None else "any queue (the whole database)"
        lines.append(f"{_checks(len(codes))} could not judge {where}: {', '.join(codes)}")
    return lines


def verdict(report: Report) -> str | None:
    """The closing line: the all-clear when earned, a warning when not, None with findings
    and nothing skipped (the findings speak)."""
    if not report.snapshot.queues:
        return None  # the report already says no queue was found
    if report.skipped:
        return (
            f"Not an all-clear: {_checks(not_judged_count(report))} could not judge every "
            "queue (see what was not judged, and why)."
        )
    return None if report.findings else ALL_CLEAR


def discovery_gaps(report: Report) -> list[HiddenFact]:
    """Tables discovery could not judge as queues (their status values are hidden)."""
    return [h for h in report.snapshot.hidden if h.fact == "discovery"]


def baseline_note(report: Report) -> str | None:
    """ "baseline b.json: 1 new, 2 preexisting, 1 fixed"; None without a baseline."""
    b = report.baseline
    if b is None:
        return None
    new = len(report.new_findings)
    text = (
        f"baseline {b.source}: {new} new, {len(report.findings) - new} preexisting, "
        f"{len(b.fixed)} fixed"
    )
    if b.not_judged:
        text += f", {len(b.not_judged)} not judged again"
    return text


def ignored_lines(report: Report) -> list[str]:
    """One line per inline ignore: what it dropped and where it is written."""
    lines = []
    for i in report.ignored:
        path = i.source.rpartition(":")[0]
        what = f"{i.findings} finding" + ("" if i.findings == 1 else "s")
        lines.append(f"{i.code} ignored on {i.source} (comment at {path}:{i.line}): {what}")
    return lines


def passed(report: Report) -> list[tuple[str, tuple[str, ...]]]:
    """(queue, codes of the checks that judged it and found nothing), queues in report order:
    a check that ran, left no skip for that queue (or the whole database) and raised no
    finding on it. A finding whose target is no queue table (the server, the xmin horizon)
    counts against every queue."""
    queues = [q.qualified for q in report.snapshot.queues]
    out = []
    for queue in queues:
        skipped = {s.code for s in report.skipped if s.queue in (None, queue)}
        found = set()
        for f in report.findings:
            t = f.target
            on = f"{t.schema}.{t.table}" if t.schema and t.table else None
            if on == queue or on not in queues:
                found.add(f.code)
        codes = tuple(c for c in report.checks_run if c not in skipped | found)
        out.append((queue, codes))
    return out


def _databases(n: int) -> str:
    return f"{n} database" if n == 1 else f"{n} databases"


def fleet_summary(fleet: FleetReport) -> str:
    """ "50 databases (47 judged, 3 not judged): 1 critical, 4 warning, 0 info" """
    s = fleet.summary()
    not_judged = len(fleet.not_judged)
    judged = len(fleet.members) - not_judged
    return (
        f"{_databases(len(fleet.members))} ({judged} judged, {not_judged} not judged): "
        f"{s['critical']} critical, {s['warning']} warning, {s['info']} info"
    )


def without_queues(fleet: FleetReport) -> list[str]:
    """The judged databases where no queue table was found, no finding made and no table
    kept from discovery by a hidden fact: said in one line, not a report each."""
    return [
        db
        for db, r in fleet.reports
        if not r.snapshot.queues and not r.findings and not discovery_gaps(r)
    ]


def quiet_skips(fleet: FleetReport) -> list[str]:
    """The skips of the databases :func:`without_queues` names, each reason once with how many
    of them it was given in: "in 44 of them: 11 checks skipped: pg_stat_statements is not
    installed in this database"."""
    quiet = set(without_queues(fleet))
    by_reason: dict[str, tuple[set[str], set[str]]] = {}
    for db, r in fleet.reports:
        if db in quiet:
            for s in r.skipped:
                codes, dbs = by_reason.setdefault(s.reason, (set(), set()))
                codes.add(s.code)
                dbs.add(db)
    return [
        f"in {len(dbs)} of them: {_checks(len(codes))} skipped: {reason}"
        for reason, (codes, dbs) in by_reason.items()
    ]


def fleet_verdict(fleet: FleetReport) -> str | None:
    """The fleet's closing line: a database not judged, or a queue a check could not judge,
    comes before anything reads as fine; the all-clear only when every database was judged,
    queues were found, and every check judged every one of them."""
    if fleet.not_judged:
        return (
            f"Not an all-clear: {_databases(len(fleet.not_judged))} could not be judged "
            "(see which, and why)."
        )
    partly = [db for db, r in fleet.reports if r.snapshot.queues and r.skipped]
    if partly:
        return (
            f"Not an all-clear: in {_databases(len(partly))} a check could not judge every "
            f"queue ({', '.join(partly)})."
        )
    if not any(r.snapshot.queues for _, r in fleet.reports):
        return f"No queue table was found in any of the {_databases(len(fleet.members))}."
    if any(r.findings for _, r in fleet.reports):
        return None
    return (
        f"No problems found on the queue tables of the "
        f"{_databases(sum(1 for _, r in fleet.reports if r.snapshot.queues))} that have them."
    )
