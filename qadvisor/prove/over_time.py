"""Vacuum fixes proven over (compressed) time: the queue's churn driven through a clone
without the fix and one with it, autovacuum on; see :mod:`qadvisor.prove.vacuum`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import psycopg

from qadvisor.model import (
    Finding,
    Proof,
    ProofSeries,
    Queue,
    Snapshot,
    Statement,
    Table,
)
from qadvisor.prove.copy import CopyPlan
from qadvisor.prove.figures import improved, once
from qadvisor.prove.measure import Measured, judge, runnable
from qadvisor.prove.proofs import NOTHING_MOVED, Say, other_version
from qadvisor.prove.timing import prepared, statement_rows
from qadvisor.prove.vacuum import (
    DEFAULT_DEAD_PER_S,
    PHASE_S,
    Phase,
    drive,
    driven_rate,
    trigger,
)
from qadvisor.settings.resolve import Settings
from qadvisor.sql.printing import qualified


@contextlib.contextmanager
def autovacuum(admin_dsn: str) -> Iterator[None]:
    """Autovacuum on, with a one-second naptime, for the vacuum proofs; off again after.
    Its ANALYZE is held off: it would replace the checked statistics restored on the copy,
    which the checks' reading of the queue rests on, and a vacuum proof is about vacuum. Its
    cost delay is off: time is compressed, and a vacuum throttled as in production would not
    end within the phase (the proof says so)."""
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute("ALTER SYSTEM SET autovacuum = on")
        admin.execute("ALTER SYSTEM SET autovacuum_naptime = '1s'")
        admin.execute("ALTER SYSTEM SET autovacuum_analyze_threshold = 2147483647")
        admin.execute("ALTER SYSTEM SET autovacuum_vacuum_cost_delay = 0")
        admin.execute("SELECT pg_reload_conf()")
    try:
        yield
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute("ALTER SYSTEM SET autovacuum = off")
            admin.execute("SELECT pg_reload_conf()")


def prove_over_time(
    dsn_of: Callable[[str], str],
    snapshot: Snapshot,
    settings: Settings,
    queue: Queue,
    table: Table,
    plan: CopyPlan,
    findings: Sequence[Finding],
    clones: Sequence[str],
    statements: Sequence[Statement],
    before: Measured,
    version: str,
    say: Say,
) -> dict[str, Proof]:
    """Each vacuum fix: the queue's churn driven through a clone without it (the first of
    ``clones``, shared) and one with it (the others, in the order of ``findings``);
    ``dsn_of`` gives the copies' owner's connection string of a clone. ``before`` is the copy
    measured before any fix: the values its claim runs with."""
    from qadvisor.derive.estimates import live_index, rates

    checked = snapshot.server.version
    measured = rates(snapshot, table)
    base_rate = measured.dead_per_s if measured and measured.dead_per_s > 0 else None
    index = live_index(table, queue.live) if queue.live else None
    index_name = f"{table.schema}.{index.name}" if index else None
    texts = tuple(("--query", s.parsed.text if s.parsed else s.text) for s in statements)
    fixed: list[tuple[Finding, str, float]] = []
    for finding, db in zip(findings, clones[1:], strict=True):
        assert finding.fix is not None
        with psycopg.connect(dsn_of(db), autocommit=True) as conn:
            for step in finding.fix.steps:
                if step.kind in ("migration", "review"):
                    conn.execute(step.sql.encode())
            fixed.append((finding, db, trigger(conn, table.qualified)))
    with psycopg.connect(dsn_of(clones[0]), autocommit=True) as conn:
        before_trigger = trigger(conn, table.qualified)
    rate = driven_rate(base_rate or DEFAULT_DEAD_PER_S, before_trigger, [t for _, _, t in fixed],
                       plan.dead)  # fmt: skip
    probed = statements[0] if statements else None
    say(f"prove: driving {rate:,.0f} dead rows/s through the copy without a vacuum fix "
        f"({PHASE_S:.0f} s)")  # fmt: skip

    def driven(db: str) -> Phase:
        _counted(dsn_of(db), table, plan)
        with _claim_probe(dsn_of(db), probed, before, table.name) as probe:
            return drive(dsn_of(db), table, plan.claim, plan.arrive, rate, index_name,
                         plan.rows, probe)  # fmt: skip

    without = driven(clones[0])
    verdicts_without = judge(dsn_of(clones[0]), settings, queue, texts)
    out: dict[str, Proof] = {}
    for finding, db, after_trigger in fixed:
        say(f"prove: driving the same through the copy with the {finding.code} fix")
        with_fix = driven(db)
        verdicts_with = judge(dsn_of(db), settings, queue, texts)
        reproduced = finding.key in verdicts_without.keys
        subject = table.qualified
        measures = [
            once("autovacuum runs", subject, without.autovacuums, with_fix.autovacuums),
            once("dead tuples at peak", subject, without.peak_dead, with_fix.peak_dead),
        ]
        if index_name and without.index_growth is not None and with_fix.index_growth is not None:
            measures.append(
                once("live-set index growth bytes", index_name, without.index_growth,
                     with_fix.index_growth)
            )  # fmt: skip
        quiet = (finding.key not in verdicts_with.keys) if reproduced else None
        gone = (quiet and improved(measures)) if reproduced else None
        series = (
            ProofSeries("without the fix", before_trigger, rate, without.points),
            ProofSeries("with the fix", after_trigger, rate, with_fix.points),
        )
        pace = (
            f"the measured {base_rate:,.1f} dead rows/s (--sample)"
            if base_rate
            else f"no measured rate (no --sample): a stated {DEFAULT_DEAD_PER_S:,.0f}/s"
        )
        notes = [
            f"driven for {PHASE_S:.0f} s at {rate:,.0f} dead rows/s against {pace}, "
            "from the dead tuples the checked table held, autovacuum_naptime = 1s and no cost "
            f"delay (time is compressed); autovacuum's trigger is {before_trigger:,.0f} dead "
            f"rows without the fix, {after_trigger:,.0f} with it"
            + (f": time compressed {rate / base_rate:,.1f} times" if base_rate else "")
        ]
        if probed is None or not any(p.claim_ms is not None for p in without.points):
            notes.append(
                "the claim's time is not in the series: no statement of the queue took a row "
                "on the copy as it was driven"
            )
        if not reproduced:
            notes.append(
                f"not reproduced: after {PHASE_S:.0f} s of churn qadvisor's checks on the copy "
                f"without the fix do not report {finding.key}, so nothing is proven"
                + verdicts_without.skipped(finding.code)
            )
        elif not quiet:
            notes.append(verdicts_with.not_gone(finding.key))
        elif not gone:
            notes.append(NOTHING_MOVED)
        notes += other_version(version, checked)
        out[finding.key] = Proof(version, checked, plan.rows, plan.table_rows,
                                 plan.scaled_down, plan.live, reproduced, gone,
                                 tuple(measures), tuple(notes), quiet,
                                 series=series)  # fmt: skip
    return out


def _counted(dsn: str, table: Table, plan: CopyPlan) -> None:
    """A clone's counters set from what it holds: a new database starts with none, so its dead
    row versions (those the checked table held) would not count towards autovacuum's trigger.
    ANALYZE counts them; the checked statistics it replaces are restored after it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"ANALYZE {qualified(table.schema, table.name)}".encode())
        for stmt in plan.statistics:
            with contextlib.suppress(psycopg.Error):  # build() said which it could not
                conn.execute(stmt.encode())


@contextlib.contextmanager
def _claim_probe(
    dsn: str, statement: Statement | None, before: Measured, table: str
) -> Iterator[Callable[[], float | None] | None]:
    """A function that times one run of ``statement`` (rolled back) on the clone at ``dsn``,
    None when it took no row; None instead of a function when it cannot be prepared there."""
    from qadvisor.derive.statement_queues import statement_label

    if statement is None or statement_label(statement) not in before.timed:
        yield None
        return
    text = statement.parsed.text if statement.parsed else statement.text
    ready = runnable(statement, text, before.verdicts.values.get(text, {}))
    if isinstance(ready, str):
        yield None
        return
    planned, value_of, _ = ready
    with contextlib.ExitStack() as stack:
        try:
            conn = stack.enter_context(psycopg.connect(dsn, autocommit=True))
            claim = stack.enter_context(
                prepared(conn, planned, list(value_of.values()), statement.search_path)
            )
        except psycopg.Error:
            claim = None  # the copy refuses it as filled in: the series goes without

        def probe() -> float | None:
            assert claim is not None
            run = claim.explained()
            rows = statement_rows(run["Plan"])
            return round(float(run["Execution Time"]), 3) if rows else None

        yield probe if claim is not None else None
