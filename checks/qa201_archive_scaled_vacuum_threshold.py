"""QA201 archive-scaled-vacuum-threshold."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from qadvisor.api import (
    NOISE_MARGIN,
    Finding,
    Fix,
    LiveEstimate,
    LivePredicate,
    Severity,
    Skip,
    Snapshot,
    Table,
    Target,
    VacuumTrigger,
    at_least,
    check,
    human_count,
    human_seconds,
    judgeable_queues,
    live_rows,
    table_setting,
    vacuum_trigger,
)
from qadvisor.api.provisional import (
    MIN_SAMPLE_ROWS,
    LiveBound,
    Rates,
    autovacuum_enabled,
    live_bound,
    rates,
    series,
    suggested_vacuum_threshold,
    vacuum_threshold_sql,
    writing_partitions,
)


@dataclass(frozen=True)
class Options:
    # The trigger must exceed the live set this many times before the archive is what sets it.
    min_ratio: float = 10.0
    # Below this many dead tuples the trigger is low enough whatever sets it (50,000 is also
    # the usual starting point of a fixed queue-table threshold).
    min_trigger: float = 50_000
    # With --sample: autovacuum further away than this makes the finding critical.
    critical_wait_s: float = 3600.0
    # The live rows, reltuples and sampled rates move between runs: a ratio or trigger up to
    # this share past min_ratio / min_trigger makes the finding info, and a wait within it
    # of critical_wait_s is not critical, so two runs agree.
    margin: float = NOISE_MARGIN


# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "rates_from": "Rates measured over",
    "proposed_vacuum_trigger": "Vacuum trigger the fix sets (dead tuples)",
    "dead_tuples_series": "Dead tuples over time",
    "autoanalyze_count": "Autoanalyze runs",
    "autovacuum_count": "Autovacuum runs",
    "autovacuum_vacuum_max_threshold": "autovacuum_vacuum_max_threshold",
    "autovacuum_vacuum_scale_factor": "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_threshold": "autovacuum_vacuum_threshold",
    "dead_tuples_per_s": "Dead tuples per second (measured)",
    "inserts_per_s": "Inserts per second (measured)",
    "last_autoanalyze": "Last autoanalyze",
    "live_rows_at_most": "Live rows now, at most",
    "live_rows_at_most_from": "Live rows now, at most: from",
    "judged_on": "Judged on",
    "reltuples": "Rows (pg_class.reltuples)",
    "sample_dead_tuples": "Dead tuples made in the interval measured",
    "sample_inserts": "Inserts in the interval measured",
    "sample_seconds": "Interval measured",
    "seconds_to_autovacuum": "Time to the next autovacuum",
    "settings_source": "Autovacuum settings from",
    "partition": "Partition",
    "partitions_judged": "Partitions whose trigger the archive sets",
    "trigger_to_live_ratio": "Vacuum trigger to live rows",
    "min_ratio": "Minimum ratio",
    "min_sample_rows": "Minimum rows changed in a sample",
    "min_trigger": "Minimum vacuum trigger",
}


@check("QA201", "archive-scaled-vacuum-threshold", severity=Severity.WARNING,
       category="vacuum", options=Options,
       requires=("table_facts", "live_set", "counters"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: Options) -> Iterator[Finding | Skip]:
    """Autovacuum's trigger on a queue table is set by the archive, not by the live set.

    ## What it finds
    A queue table whose autovacuum trigger, `autovacuum_vacuum_threshold +
    autovacuum_vacuum_scale_factor x reltuples` (capped by `autovacuum_vacuum_max_threshold`
    on PostgreSQL 18+; table reloptions override server settings), is dominated by the
    scale-factor term and is many times the live set.

    ## Why it matters
    `reltuples` counts finished rows, so the trigger moves away as the archive grows while the
    rate of dead tuples depends only on throughput. At 10 M rows the default trigger is
    50 + 0.2 x 10 M, about 2 M dead tuples: a 15-minute run at 2,000 jobs/s accumulated
    1,753,949 dead tuples with 0 autovacuums, and the composite index fell behind its target
    rate after 660 s. Autoanalyze keeps running meanwhile (and raises reltuples, pushing the
    trigger further), so `last_autoanalyze` is no sign of vacuuming.

    ## How to fix
    Give the table a fixed trigger: `autovacuum_vacuum_scale_factor = 0` and an
    `autovacuum_vacuum_threshold` sized by throughput, about 30 s of dead tuples (2,000
    claims/s make 50,000 dead tuples in 25 s). With `--sample` the threshold is computed from
    the measured rate, else it is 10x the live set; either is rounded to the nearest 1, 2 or
    5 times a power of ten, and the note says from what and which figures give the same
    threshold (31,623 to 70,710 give 50,000). The same table ANALYZEd again prints the same
    fix: four ANALYZEs of one unchanged table estimated 4,071 to 6,246 live rows, which
    rounding up had printed as 50,000 or 100,000 by turns. A threshold so sized that is no
    lower than the trigger now (a throughput high enough to reach it within about 30 s) is
    not proposed: it would not vacuum sooner; the finding is info and says so. `ALTER TABLE
    ... SET` takes a SHARE UPDATE EXCLUSIVE lock (it waits for a running VACUUM or ANALYZE of
    the table, not for reads or writes).

    With `--history DIR`, where no `--sample` is taken, the rates are measured between the
    first earlier snapshot whose counters run on into this one's and this one (the evidence
    says over which interval), and the threshold is sized from them the same way; the
    evidence also holds the dead tuples and the trigger at each snapshot (`--sample` adds its
    second reading), which the incident page draws against the trigger the fix sets.

    With `--sample`, the time until autovacuum fires is predicted from the measured rates: more
    than `critical_wait_s`, or a trigger that recedes as fast as dead tuples grow (dead
    tuples/s at most scale factor x inserts/s, both measured), makes the finding critical. A
    sample in which fewer than 100 rows were updated, deleted or inserted measured no rate (a
    queue with no worker running): the finding keeps its severity and says to sample while
    workers run.

    The live set comes from the live-set partial index's reltuples (every ANALYZE
    re-estimates it from the sample pg_stats is taken from, and a VACUUM that scans it
    counts it), else from pg_stats of the live column; the evidence says which, and as of
    which VACUUM or ANALYZE. When more rows were inserted, updated or deleted since the
    table's last ANALYZE than that estimate holds, the statistics cannot count the live set
    now (normal on an aged queue: autoanalyze waits for a tenth of the table to change):
    the evidence and the fix say so, and the table is judged on a bound instead, at most
    the rows that were not finished when ANALYZE ran (what the finished common values of
    the live column leave, the rows whose finish time is not set, or those a union over
    timestamps can take, at most, by their columns' NULL shares) plus every row changed
    since; the message says "at least" of the ratio (`live_rows_at_most`). The same bound
    judges a queue whose claim's value is hidden behind `$n` with nothing in the catalog
    naming it, from the status column whose finished common values hold the most rows.
    Where only the stale count, not the bound, puts the ratio past `min_ratio`, the finding
    is info. The fix's threshold is sized from what the statistics counted, not from the
    bound: most rows changed since are claims, not a larger live set.

    A partitioned queue table has no trigger of its own: autovacuum vacuums each partition
    on its own, from the partition's reltuples and reloptions (PostgreSQL's docs, "The
    Autovacuum Daemon": partitioned tables are not processed, their partitions are). So the
    partitions that take writes are judged, each against the live rows it holds: those with
    dead tuples, rows changed since their last ANALYZE or rows inserted since their last
    VACUUM, those that hold live rows, and, of a table partitioned by time, the one whose
    range holds the present. The finding is on the partitioned table and names them; its
    fix sets each of those partitions' trigger, since the partitioned table takes no storage
    parameters (`ALTER TABLE` on it fails: "cannot specify storage parameters for a
    partitioned table" on PostgreSQL 18, "unrecognized parameter" before; CREATE TABLE's
    page has them set on the leaf partitions) and a
    partition created later takes none from its siblings: the notes say to create new ones
    `WITH (...)` the same settings.

    ## When it stays quiet
    The scale factor is 0 (or small) for the table, the table is mostly live (rows deleted on
    completion), or the trigger is under `min_trigger`; of a partitioned table, every
    partition that takes writes is so (a table partitioned by day keeps each day's rows in
    a partition of its own, and its old partitions take no writes). Autovacuum switched off
    is QA203's.
    A ratio or trigger up to `margin` (20 %) past its threshold gives an info finding, and a
    sampled wait up to `margin` past `critical_wait_s` is not critical: the estimates and
    rates move between runs, and a value that close gives the same answer every time.
    """
    for queue, table in judgeable_queues(snapshot):
        if table.partition_key is not None:
            yield from _partitioned(snapshot, table, queue.live, queue.reason, options)
            continue
        if not autovacuum_enabled(snapshot, table):
            continue
        trigger = vacuum_trigger(snapshot, table)
        if trigger.scaled_part <= trigger.threshold or trigger.value < options.min_trigger:
            continue
        est = live_rows(table, queue.live)
        # Statistics that cannot count the live set now (they predate the rows changed
        # since, or the value the claim waits for is unknown) bound it: at most how many rows
        # it can hold, from the archive's share of the rows ANALYZE saw.
        bound = None
        if est.rows is None or est.stale:
            bound = est.bound if est.rows is not None else live_bound(table, queue.live)
        if bound is None:
            if est.rows is None:
                why = est.source if queue.live is not None else queue.reason
                yield Skip(f"{table.qualified}: live set unknown: {why}", table.qualified)
                continue
            ratio = trigger.value / max(est.rows, 1.0)
            if ratio >= options.min_ratio:
                yield _finding(snapshot, table, trigger, est, ratio, options)
            continue
        least = trigger.value / max(bound.rows, 1.0)
        stale_ratio = trigger.value / max(est.rows, 1.0) if est.rows is not None else None
        if least >= options.min_ratio or (
            stale_ratio is not None and stale_ratio >= options.min_ratio
        ):
            yield _finding(snapshot, table, trigger, est, least, options, bound)


@dataclass(frozen=True)
class _Judged:
    """A table (or partition) whose trigger the archive sets."""

    table: Table
    trigger: VacuumTrigger
    live: LiveEstimate
    ratio: float


def _judge(snapshot: Snapshot, table: Table, est: LiveEstimate, options: Options) -> _Judged | None:
    """The table when its trigger is the archive's: the scale-factor term over the base
    threshold, at least ``min_trigger``, at least ``min_ratio`` times the live rows."""
    trigger = vacuum_trigger(snapshot, table)
    if trigger.scaled_part <= trigger.threshold or trigger.value < options.min_trigger:
        return None
    ratio = trigger.value / max(est.rows or 0.0, 1.0)
    return _Judged(table, trigger, est, ratio) if ratio >= options.min_ratio else None


def _partitioned(
    snapshot: Snapshot,
    table: Table,
    live: LivePredicate | None,
    reason: str,
    options: Options,
) -> Iterator[Finding | Skip]:
    """A partitioned queue table: autovacuum vacuums each partition on its own trigger, from
    its own reltuples and reloptions, so the partitions that take writes are judged, each
    against the live rows it holds, and a cold partition (no writes since its last VACUUM or
    ANALYZE, no live rows, not the present's range) is not: it has nothing left to vacuum."""
    now = snapshot.server.collected_at
    writing = writing_partitions(table, live, datetime.fromisoformat(now) if now else None).writing
    found, unknown = [], []
    for w in writing:
        if not autovacuum_enabled(snapshot, w.table):
            continue  # QA203's
        trigger = vacuum_trigger(snapshot, w.table)
        if trigger.scaled_part <= trigger.threshold or trigger.value < options.min_trigger:
            continue  # low enough whatever its live rows
        if w.live.rows is None:
            unknown.append(f"{w.table.name}: {w.live.source if live is not None else reason}")
            continue
        judged = _judge(snapshot, w.table, w.live, options)
        if judged is not None:
            found.append(judged)
    if unknown and not found:
        yield Skip(
            f"{table.qualified}: live set unknown in its partitions that take writes: "
            + "; ".join(unknown),
            table.qualified,
        )
        return
    if not found:
        return
    worst = max(found, key=lambda j: j.ratio)
    finding = _finding(snapshot, worst.table, worst.trigger, worst.live, worst.ratio, options)
    steps = []
    notes = []
    for judged in sorted(found, key=lambda j: j.table.name):
        n, basis = suggested_vacuum_threshold(snapshot, judged.table, judged.live.rows)
        if n >= judged.trigger.value:
            # As for a table: a threshold that would not vacuum sooner is not set.
            notes.append(f"{judged.table.name}: threshold {n:,} ({basis}) is no lower than its "
                         f"trigger now ({judged.trigger.value:,.0f}): not set")  # fmt: skip
            continue
        steps.append(table_setting(vacuum_threshold_sql(judged.table, n)))
        notes.append(f"{judged.table.name}: threshold {n:,}, {basis}")
    names = ", ".join(j.table.name for j in sorted(found, key=lambda j: j.table.name))
    yield Finding(
        target=Target("table", table.schema, table.name, table.name),
        severity=finding.severity if steps else Severity.INFO,
        message=(
            f"{table.qualified} is partitioned, and autovacuum vacuums each partition on its "
            f"own trigger: {len(found)} of the {len(writing)} partitions that take writes "
            f"wait for the archive ({names}). {finding.message}"
        ),
        evidence={
            **finding.evidence,
            "partition": worst.table.name,
            "partitions_judged": [
                f"{j.table.name}: trigger {j.trigger.value:,.0f} dead tuples, "
                f"{j.live.rows or 0:,.0f} live rows ({j.ratio:,.0f}x)"
                for j in found
            ],
            "partitions_taking_writes": [f"{w.table.name}: {w.why}" for w in writing],
        },
        explanation=finding.explanation,
        fix=Fix(
            notes="; ".join(notes)
            + f". {table.qualified} itself takes no storage parameters (ALTER TABLE on it "
            "fails: 'cannot specify storage parameters for a partitioned table' on "
            "PostgreSQL 18, 'unrecognized parameter' before; CREATE TABLE's page has them set "
            "on the leaf partitions), and a partition "
            "created later takes none from its siblings: create new partitions WITH "
            "(autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = N), in "
            "your partition manager's template where it has one. Autovacuum picks the "
            "new triggers up on its next round.",
            safety="safe",
            steps=tuple(steps),
        ),
    )


def _finding(
    snapshot: Snapshot,
    table: Table,
    trigger: VacuumTrigger,
    live: LiveEstimate,
    ratio: float,
    options: Options,
    bound: LiveBound | None = None,
) -> Finding:
    """A table whose trigger the archive sets, ``ratio`` times its live rows (``live``: how
    many, how that was estimated, and whether the statistics are older than the table's
    changes since); with ``bound``, at least ``ratio`` times them, the live set being at
    most ``bound.rows``; with --sample, when autovacuum fires."""
    stats = table.stats
    source = live.source
    evidence: dict[str, object] = {
        "n_dead_tup": stats.n_dead_tup,
        "vacuum_trigger": round(trigger.value),
        "autovacuum_vacuum_threshold": trigger.threshold,
        "autovacuum_vacuum_scale_factor": trigger.scale_factor,
        "settings_source": trigger.scale_factor_source,
        "reltuples": round(trigger.reltuples),
        "autovacuum_vacuum_max_threshold": trigger.max_threshold,
        "live_rows": None if live.rows is None else round(live.rows),
        "live_rows_source": source,
        **({"live_rows_stale": live.stale} if live.stale else {}),
        **(
            {
                "live_rows_at_most": round(bound.rows),
                "live_rows_at_most_from": bound.text,
                "judged_on": "the bound on the live set: the statistics cannot count it now",
            }
            if bound is not None
            else {}
        ),
        "trigger_to_live_ratio": round(ratio, 1),
        "autovacuum_count": stats.autovacuum_count,
        "last_autovacuum": stats.last_autovacuum,
        "autoanalyze_count": stats.autoanalyze_count,
        "last_autoanalyze": stats.last_autoanalyze,
        "min_ratio": options.min_ratio,
        "min_trigger": options.min_trigger,
    }
    r = rates(snapshot, table)
    sampled = (
        _Sampled({}, None, "") if r is None else _sampled(r, trigger, stats.n_dead_tup, options)
    )
    # The threshold is sized from what the statistics counted (the live set not yet
    # finished when ANALYZE ran, where they no longer count it now), not from the bound:
    # the rows changed since are mostly claims, not a larger live set.
    counted = live.rows if live.rows is not None else bound.at_analyze if bound else 0.0
    n, basis = suggested_vacuum_threshold(snapshot, table, counted)
    evidence["proposed_vacuum_trigger"] = n
    over_time = series(
        snapshot,
        table,
        dead_tuples=lambda r: r.stats.n_dead_tup,
        vacuum_trigger=lambda r: None if r.vacuum_trigger is None else round(r.vacuum_trigger),
    )
    if over_time:
        evidence["dead_tuples_series"] = over_time
    m = options.margin
    near = [
        text
        for value, limit, text in (
            (ratio, options.min_ratio, f"{ratio:,.1f}x is within {m:.0%} of min_ratio"),
            (trigger.value, options.min_trigger, f"the trigger is within {m:.0%} of min_trigger"),
        )
        if at_least(value, limit, m) is None
    ]
    if bound is not None and ratio < options.min_ratio:
        # Only the statistics' count, which predates the changes since, puts the ratio past
        # min_ratio: the bound does not confirm it.
        near.append(
            f"only the statistics' count ({human_count(counted)} live rows) puts the trigger "
            f"past min_ratio; at most {human_count(bound.rows)} rows may be live now"
        )
    severity = sampled.severity
    if near and severity is None:
        severity = Severity.INFO
        evidence["near_threshold"] = "; ".join(near)
    # A threshold sized from a high measured rate may be at or above today's trigger: setting
    # it would make vacuum no more frequent, or rarer. Nothing is proposed then.
    reached = n >= trigger.value
    if reached:
        severity = Severity.INFO
    if bound is None:
        times = f"{ratio:,.0f}x its {human_count(live.rows or 0.0)} live rows"
    else:
        times = (
            f"at least {ratio:,.0f}x its live rows ({bound.text}: the statistics cannot count "
            "them now)"
        )
    return Finding(
        target=Target("table", table.schema, table.name, table.name),
        severity=severity,
        message=(
            f"Autovacuum of {table.qualified} waits for "
            f"{human_count(trigger.value)} dead tuples ({trigger.scale_factor:g} x "
            f"{human_count(trigger.reltuples)} rows + {trigger.threshold:g}), "
            f"{times}; {human_count(stats.n_dead_tup)} dead tuples now, "
            f"{stats.autovacuum_count} autovacuum runs so far.{sampled.text}"
        ),
        evidence=evidence | sampled.evidence,
        explanation=(
            "reltuples counts the finished rows, so the scale factor ties the vacuum "
            "trigger to the archive while dead tuples come from throughput."
        ),
        fix=_reached(n, basis, trigger)
        if reached
        else Fix(
            notes=f"Threshold {n:,}: {basis}. "
            + (f"The live set is an estimate: {live.stale}. " if live.stale else "")
            + (
                f"The live set is not known ({live.source}): it is taken as the rows not "
                f"finished when ANALYZE ran, by {bound.source}. "
                if live.rows is None and bound is not None
                else ""
            )
            + "Autovacuum picks the new trigger up on its next round"
            + _dead_now(table.qualified, stats.n_dead_tup, n),
            safety="safe",
            steps=(table_setting(vacuum_threshold_sql(table, n)),),
        ),
    )


def _reached(n: int, basis: str, trigger: VacuumTrigger) -> Fix:
    """No step: the threshold the throughput asks for is no lower than the trigger now."""
    return Fix(
        notes=f"Threshold {n:,} ({basis}) is no lower than the trigger now "
        f"({human_count(trigger.value)} dead tuples): at this throughput the scale factor "
        "does not hold autovacuum back yet, and a fixed threshold at that size would not "
        "vacuum sooner, so none is proposed. The trigger grows with the archive while the "
        "throughput does not: prune the archive (QA204), or run again with --sample when the "
        "table is larger.",
        safety="safe",
        steps=(),
    )


@dataclass(frozen=True)
class _Sampled:
    """What a --sample adds to the finding: evidence, a severity other than the default
    (None: the default), and a sentence for the message."""

    evidence: dict[str, object]
    severity: Severity | None
    text: str


def _sampled(r: Rates, trigger: VacuumTrigger, dead: int, options: Options) -> _Sampled:
    """When autovacuum fires at the measured rates, if it ever does."""
    # Autoanalyze raises reltuples with every insert, so the trigger recedes by scale_factor
    # per inserted row while dead tuples grow by the dead rate.
    closing = r.dead_per_s - trigger.scale_factor * r.inserts_per_s
    remaining = max(trigger.value - dead, 0.0)
    wait = remaining / closing if r.dead_measured and closing > 0 else None
    # "Never" needs an imbalance measured on both sides, not two rates of zero.
    never = r.dead_measured and r.inserts_measured and closing <= 0
    evidence: dict[str, object] = {
        "rates_from": r.source,
        "sample_seconds": r.seconds,
        "sample_dead_tuples": r.dead_rows,
        "sample_inserts": r.inserted_rows,
        "dead_tuples_per_s": round(r.dead_per_s, 1),
        "inserts_per_s": round(r.inserts_per_s, 1),
        "seconds_to_autovacuum": round(wait) if wait is not None else None,
        "min_sample_rows": MIN_SAMPLE_ROWS,
    }
    critical = never or (
        wait is not None and at_least(wait, options.critical_wait_s, options.margin) is True
    )
    return _Sampled(evidence, Severity.CRITICAL if critical else None, _wait_text(r, wait, never))


def _wait_text(r: Rates, wait: float | None, never: bool) -> str:
    """The message's sentence on when autovacuum fires, or why the sample cannot tell."""
    if wait is not None:
        return (
            f" At the measured {r.dead_per_s:,.0f} dead tuples/s autovacuum fires in "
            f"about {human_seconds(wait)}."
        )
    if never:
        return (
            f" At the measured {r.dead_per_s:,.0f} dead tuples/s and "
            f"{r.inserts_per_s:,.0f} inserts/s autovacuum never catches up: the "
            "trigger recedes as fast as dead tuples grow."
        )
    saw = (
        "no claims"
        if r.dead_rows == 0
        else f"too few claims to measure a rate ({r.dead_rows:,} dead tuples)"
    )
    if r.from_history:
        return (
            f" The {r.source} saw {saw}: measure while workers run to know when autovacuum fires."
        )
    return (
        f" The {r.seconds:g} s sample saw {saw}: take it while workers run to "
        "know when autovacuum fires."
    )


def _dead_now(table: str, dead: int, n: int) -> str:
    """What becomes of the dead tuples already there once the new threshold is set."""
    if dead > n:
        # Autovacuum vacuums a table whose dead tuples exceed its threshold on its next visit
        # of the database (every autovacuum_naptime, 1 min by default).
        return (
            f": the {human_count(dead)} dead tuples already there are over it, so that round "
            f"vacuums {table}."
        )
    if dead:
        return (
            f"; the {human_count(dead)} dead tuples already there stay until {n:,} are reached "
            f"(VACUUM {table} clears them at once, under the same lock, if that matters)."
        )
    return "."
