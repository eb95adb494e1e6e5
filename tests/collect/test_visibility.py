"""What the role may see and what other sessions' locks allow, without a server: the engine's
skips for missing facts, the lock conflict rules, and the reports' verdicts.

The real-server cases (a pg_monitor role, an ACCESS EXCLUSIVE lock, row locks, a role with
nothing but CONNECT) are in test_production_shape.py.
"""

from __future__ import annotations

import dataclasses

from rich.console import Console

from qadvisor.collect.locks import (
    ACCESS_SHARE,
    ROW_EXCLUSIVE,
    ROW_SHARE,
    HeldLock,
    Locks,
    query_start,
)
from qadvisor.engine import missing_facts, run_checks
from qadvisor.model import HiddenFact, Report, Skip, Snapshot
from qadvisor.registry import load_checks
from qadvisor.render import junit, markdown, terminal
from tests import snapshots as S

MB = 1024 * 1024
GRANT = "GRANT SELECT (status) ON public.jobs TO monitor;"


def _archive() -> Snapshot:
    """The measured archive case: QA101 and QA201 fire on it."""
    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), int(310.4 * MB))
    return S.snapshot(S.jobs_table(indexes=(idx,)))


def _run(snap: Snapshot, *codes: str) -> Report:
    return run_checks(snap, [c for c in load_checks() if c.code in codes])


# --- the engine: a missing fact is a skip for that queue, never a pass -----------------------


def test_a_hidden_fact_turns_the_checks_that_read_it_into_skips_naming_the_grant() -> None:
    snap = _archive()
    assert {f.code for f in _run(snap, "QA101", "QA201", "QA203").findings} == {"QA101", "QA201"}
    hidden = HiddenFact("live_set", "public.jobs", "pg_stats of status is hidden", (GRANT,))
    report = _run(dataclasses.replace(snap, hidden=(hidden,)), "QA101", "QA201", "QA203")
    # Both read the live set: their findings on that queue are not vouched for, and go.
    assert report.findings == ()
    assert sorted((s.code, s.queue, s.fact) for s in report.skipped) == [
        ("QA101", "public.jobs", "live_set"),
        ("QA201", "public.jobs", "live_set"),
    ]
    assert all(s.reason == "public.jobs: pg_stats of status is hidden" for s in report.skipped)
    assert all(s.grants == (GRANT,) for s in report.skipped)
    assert report.grants() == (GRANT,)
    # QA203 does not read the live set: it judged the queue (healthy) and says nothing.
    assert "QA203" in report.checks_run and not report.fully_judged


def test_a_fact_missing_for_another_queue_leaves_this_one_judged() -> None:
    snap = _archive()
    other = dataclasses.replace(snap.tables[0], schema="app")
    snap = dataclasses.replace(
        snap,
        tables=(*snap.tables, other),
        queues=(*snap.queues, dataclasses.replace(snap.queues[0], schema="app")),
        hidden=(HiddenFact("index_definitions", "app.jobs", "indexes not read: pid 7", (), 7),),
    )
    report = _run(snap, "QA101")
    assert [f.target.schema for f in report.findings] == ["public"]
    assert [(s.queue, s.fact) for s in report.skipped] == [("app.jobs", "index_definitions")]


def test_a_fact_of_the_whole_database_skips_the_check_once() -> None:
    snap = dataclasses.replace(
        _archive(), hidden=(HiddenFact("horizon", None, "sessions hidden", ("GRANT x TO y;",)),)
    )
    report = _run(snap, "QA202")
    assert report.skipped == (
        Skip("sessions hidden", code="QA202", fact="horizon", grants=("GRANT x TO y;",)),
    )


def test_a_read_that_failed_is_a_skip_for_every_queue_or_one() -> None:
    snap = dataclasses.replace(
        _archive(),
        unavailable={
            "index_definitions": "indexes of the queue tables could not be read: timeout",
            "live_set:public.jobs": "pg_stats could not be read",
        },
    )
    report = _run(snap, "QA101", "QA201")
    assert report.findings == ()
    reasons = sorted((s.code, s.queue, s.reason) for s in report.skipped)
    assert reasons == [
        ("QA101", None, "indexes of the queue tables could not be read: timeout"),
        ("QA201", "public.jobs", "public.jobs: pg_stats could not be read"),
    ]


def test_one_lock_behind_several_facts_is_one_skip() -> None:
    facts = (
        HiddenFact("index_definitions", "public.jobs", "indexes not read: pid 7 holds X", (), 7),
        HiddenFact("plans", "public.jobs", "not planned: pid 7 holds X", (), 7),
    )
    snap = dataclasses.replace(_archive(), hidden=facts)
    (qa301,) = [c for c in load_checks() if c.code == "QA301"]
    skips = missing_facts(snap, qa301)
    assert [s.reason for s in skips["public.jobs"]] == [
        "public.jobs: indexes not read: pid 7 holds X"
    ]


# --- locks ---------------------------------------------------------------------------------


def _lock(mode: str, granted: bool = True, relid: int = 10, table: int = 10) -> HeldLock:
    return HeldLock(relid, table, "app.jobs", 4242, mode, granted, "idle in transaction",
                    "LOCK TABLE app.jobs IN ACCESS EXCLUSIVE MODE", 12.4)  # fmt: skip


def test_which_lock_makes_which_of_qadvisors_requests_wait() -> None:
    def blocks(held: HeldLock, mode: str) -> bool:
        return bool(Locks((held,)).on_table(10, mode))

    ae, ex, share = _lock("AccessExclusiveLock"), _lock("ExclusiveLock"), _lock("ShareLock")
    # Reading a size or a definition: only ACCESS EXCLUSIVE, granted or waiting.
    assert blocks(ae, ACCESS_SHARE) and blocks(_lock("AccessExclusiveLock", False), ACCESS_SHARE)
    assert not blocks(ex, ACCESS_SHARE) and not blocks(share, ACCESS_SHARE)
    # Planning SELECT ... FOR UPDATE: also EXCLUSIVE; an UPDATE claim: also a CREATE INDEX.
    assert blocks(ex, ROW_SHARE) and not blocks(share, ROW_SHARE)
    assert blocks(share, ROW_EXCLUSIVE) and blocks(_lock("ShareRowExclusiveLock"), ROW_EXCLUSIVE)
    # A lock on one of the table's indexes makes planning wait, not reading the table's size.
    on_index = _lock("AccessExclusiveLock", relid=11, table=10)
    locks = Locks((on_index,))
    assert locks.on_table(10, ROW_SHARE) and not locks.on_relation(10, ACCESS_SHARE)
    assert locks.blocked() == [11]


def test_a_blocker_is_named_by_pid_mode_state_and_the_start_of_its_query() -> None:
    assert _lock("AccessExclusiveLock").describe("monitor") == (
        "pid 4242 holds AccessExclusiveLock on app.jobs (idle in transaction, transaction open "
        "12 s: LOCK TABLE app.jobs IN ACCESS EXCLUSIVE MODE)"
    )
    waiting = dataclasses.replace(
        _lock("AccessExclusiveLock", False),
        waiting_for=(4100,),
        state="active",
        query="ALTER TABLE app.jobs ADD x int",
    )
    assert waiting.describe("monitor").startswith(
        "pid 4242 waits for AccessExclusiveLock on app.jobs behind pid 4100, and later lock "
        "requests queue behind it (active"
    )
    hidden = dataclasses.replace(_lock("AccessExclusiveLock"), state=None,
                                 query="<insufficient privilege>")  # fmt: skip
    assert hidden.describe("nobody").endswith(
        "(its state and query are hidden from this role: GRANT pg_read_all_stats TO nobody;)"
    )
    prepared = dataclasses.replace(_lock("AccessExclusiveLock"), pid=None)
    assert prepared.describe("x") == "a prepared transaction holds AccessExclusiveLock on app.jobs"


def test_the_start_of_a_query_is_one_line() -> None:
    text = "ALTER ROLE app\n   PASSWORD $1 VALID UNTIL $2"
    assert query_start(text) == "ALTER ROLE app PASSWORD $1 VALID UNTIL $2"
    long = "SELECT " + ", ".join(f"c{i}" for i in range(100)) + " FROM t"
    assert len(query_start(long)) == 80 and query_start(long).endswith("…")


# --- the reports: no all-clear that was not earned -------------------------------------------


def _healthy() -> Snapshot:
    return S.snapshot(S.jobs_table(reltuples=1_000, pending_freq=0.5))


def _text(report: Report) -> str:
    console = Console(record=True, width=160, color_system=None)
    terminal.render(report, console)
    return console.export_text()


def test_no_problems_found_only_when_every_check_judged_every_queue() -> None:
    clean = _run(_healthy(), "QA101", "QA201", "QA203")
    assert clean.findings == () and clean.skipped == () and clean.fully_judged
    assert "No problems found on the queue tables." in _text(clean)
    assert "No problems found on the queue tables." in markdown.render(clean)

    hidden = HiddenFact("live_set", "public.jobs", "pg_stats of status is hidden", (GRANT,))
    blind = _run(dataclasses.replace(_healthy(), hidden=(hidden,)), "QA101", "QA201", "QA203")
    assert blind.findings == () and not blind.fully_judged
    for out in (_text(blind), markdown.render(blind)):
        assert "No problems found" not in out
        assert "Not an all-clear: 2 checks could not judge every queue" in out
        assert "2 checks could not judge public.jobs: QA101, QA201" in out
        assert GRANT in out
    # Said before the findings section and before any closing line.
    md = markdown.render(blind)
    assert md.index("## Not judged") < md.index("## Findings") < md.index("Not an all-clear")
    text = _text(blind)
    assert text.index("could not judge public.jobs") < text.index("Not an all-clear")
    assert "3 checks run, 2 could not judge every queue" in text.splitlines()[0]
    assert '<property name="not_judged public.jobs" value="QA101, QA201" />' in junit.render(blind)

    nothing = _run(dataclasses.replace(_healthy(), queues=(), tables=()), "QA101")
    assert not nothing.fully_judged
    for out in (_text(nothing), markdown.render(nothing)):
        assert "No problems found" not in out and "No queue tables found" in out


def test_hidden_facts_and_estimated_sizes_survive_a_saved_snapshot() -> None:
    idx = S.index("jobs_pkey", ("id",), 8192, bytes_source="estimate: pg_class.relpages")
    table = dataclasses.replace(S.jobs_table(indexes=(idx,)), bytes_source="estimate: relpages")
    hidden = HiddenFact("plans", "public.jobs", "not planned: pid 7 holds X", (), 7)
    snap = dataclasses.replace(S.snapshot(table), hidden=(hidden,))
    assert Snapshot.from_dict(snap.to_dict()) == snap
    # A snapshot saved before these fields existed still loads.
    old = snap.to_dict()
    del old["hidden"]
    del old["tables"][0]["bytes_source"]
    assert Snapshot.from_dict(old).hidden == ()
