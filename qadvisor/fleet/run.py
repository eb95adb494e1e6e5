"""Checking the databases of a fleet concurrently, each as a run of its own.

``jobs`` worker threads take the databases in order of their labels; each opens its own
session (read-only, with its timeouts) through :func:`qadvisor.engine.check`, so a database
that refuses, times out or cannot be read is one member's reason and the others go on. The
threads spend most of a visit waiting on the server, which is when Python lets the others
run. The run's bound (--run-timeout) is one deadline for the whole fleet: a database in its
visit when it passes has its connection closed; one whose turn has not come is not started.
Either is reported as not judged, with why.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

from qadvisor import engine
from qadvisor.collect.connect import (
    default_run_timeout_s,
    describe,
    redact,
)
from qadvisor.collect.databases import Member, dsn_file, failure_kind, server_databases
from qadvisor.errors import QadvisorError
from qadvisor.model import FleetMember, FleetReport
from qadvisor.settings.resolve import Settings

# Called in the main thread once the databases are known (None, 0, in all), then as each is
# done: (its member, done so far, in all).
Progress = Callable[[FleetMember | None, int, int], None]


def members(settings: Settings, run_timeout_s: float | None = None) -> tuple[Member, ...]:
    """The fleet the settings name, read before any database is checked: a DSN file that is
    not one is an InputError (exit 2), a server that cannot list its databases a ConnectError
    (exit 3)."""
    if settings.dsn_file is not None:
        return dsn_file(settings.dsn_file)
    return server_databases(settings.dsn, settings.limits, run_timeout_s)


def bound_s(settings: Settings, visits: int) -> float:
    """The whole run's bound: --run-timeout, else each database's own default bound for each
    turn a worker takes (the time the run would take if every database used its whole bound)."""
    if settings.limits.run_timeout_s is not None:
        return float(settings.limits.run_timeout_s)
    one = default_run_timeout_s(
        settings.limits, len(settings.queries), settings.sample_seconds or 0
    )
    return float(one * max(1, math.ceil(visits / settings.jobs)))


def check(settings: Settings, progress: Progress | None = None) -> FleetReport:
    """Every database of the fleet checked, ``settings.jobs`` at once, within the run's bound."""
    started = time.monotonic()
    listed = members(settings, settings.limits.run_timeout_s)
    to_visit = [m for m in listed if m.dsn is not None]
    bound = bound_s(settings, len(to_visit))
    deadline = started + bound
    done: queue.Queue[tuple[int, FleetMember]] = queue.Queue()
    turns = iter(enumerate(to_visit))
    turn_lock = threading.Lock()

    def work() -> None:
        while True:
            with turn_lock:
                turn = next(turns, None)
            if turn is None:
                return
            i, member = turn
            done.put((i, _visit(member, settings, deadline, bound)))

    # Daemon threads: an interrupted run exits without waiting for a visit to end (the
    # server sees its connections close with the process).
    for n in range(min(settings.jobs, len(to_visit))):
        threading.Thread(target=work, name=f"qadvisor-fleet-{n}", daemon=True).start()
    results: dict[int, FleetMember] = {}
    if progress is not None and to_visit:
        progress(None, 0, len(to_visit))
    for count in range(1, len(to_visit) + 1):
        i, result = done.get()
        results[i] = result
        if progress is not None:
            progress(result, count, len(to_visit))
    visited = iter(results[i] for i in range(len(to_visit)))
    out = tuple(
        next(visited)
        if m.dsn is not None
        else FleetMember(m.label, None, m.left_out, m.reason, m.grants)
        for m in listed
    )
    source = (
        f"--dsn-file {settings.dsn_file}"
        if settings.dsn_file is not None
        else f"--all-databases {describe(settings.dsn)}"
    )
    return FleetReport(
        source=source,
        jobs=settings.jobs,
        members=out,
        checked_at=engine.now(),
        command=engine.command_line(settings),
    )


def _visit(member: Member, settings: Settings, deadline: float, bound: float) -> FleetMember:
    """One database checked as a run of its own: its report, or why there is none."""
    if time.monotonic() >= deadline:
        return FleetMember(
            member.label,
            None,
            "run_timeout",
            f"not checked: the run's bound of {bound:g} s (--run-timeout) passed before its "
            "turn came",
        )
    # Connecting waits no longer than the run has left either.
    left = max(1, math.ceil(deadline - time.monotonic()))
    connect_s = min(settings.limits.connect_timeout_s, left)
    limits = replace(settings.limits, connect_timeout_s=connect_s)
    own = replace(
        settings,
        dsn=member.dsn,
        limits=limits,
        history_dir=history_dir(settings, member.label),
    )
    try:
        report = engine.check(own, None, deadline)
    except QadvisorError as exc:  # bad input or a database not reached or read
        kind = failure_kind(exc)
        reason = str(exc)
        if time.monotonic() >= deadline:
            kind = "run_timeout"
            reason = (
                f"the run's bound of {bound:g} s (--run-timeout) passed while it was being "
                f"checked ({reason})"
            )
        return FleetMember(member.label, None, kind, reason)
    except Exception as exc:
        # A fault of qadvisor's on one database must not cost the others their report; it is
        # reported as such, and the run's exit code says a database was not judged.
        why = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else "", member.dsn)
        return FleetMember(
            member.label,
            None,
            "error",
            f"qadvisor failed on this database ({type(exc).__name__}: {why[:300]}); please "
            "report it",
        )
    # The header names the command as given (its DSN's password removed), not this
    # database's DSN.
    return FleetMember(member.label, replace(report, command=engine.command_line(settings)))


def history_dir(settings: Settings, label: str) -> Path | None:
    """The --history subdirectory that keeps one database's series: its label, with every
    character a file name could take otherwise ('/', ':', a leading '.') percent-encoded."""
    if settings.history_dir is None:
        return None
    name = quote(label, safe="-_")
    name = name.replace(".", "%2E") if name.strip(".") == "" else name
    return settings.history_dir / name


def save_history(fleet: FleetReport, settings: Settings) -> None:
    """Each judged database's snapshot saved into its own --history subdirectory."""
    for label, report in fleet.reports:
        engine.save_history(report, replace(settings, history_dir=history_dir(settings, label)))


def gate(fleet: FleetReport, settings: Settings) -> tuple[bool, bool]:
    """(a database could not be judged, the judged ones fail the run): a database tried and
    failed is an error of the run; one left out by its own settings (no connections, no
    CONNECT for the role) fails it only with --fail-on-skip, as a check that could not
    judge does."""
    failed = any(m.failed for m in fleet.members)
    gated = any(engine.gate(r, settings) for _, r in fleet.reports)
    left_out = any(m.report is None and not m.failed for m in fleet.members)
    return failed, gated or (settings.fail_on_skip and left_out)
