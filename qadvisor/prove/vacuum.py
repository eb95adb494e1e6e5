"""Vacuum fixes proven in compressed time: claims driven through two clones of the copy, one
without the fix and one with it, while autovacuum runs with a one-second naptime.

A vacuum finding (QA201: autovacuum's trigger scaled by the archive) is about what happens
over time, which a fresh copy has not lived: its counters are empty. So each clone is driven
for ``PHASE_S`` seconds by the queue's own churn, the way its claims make it: live rows leave
the live set (an UPDATE of the live column to its most common other value, one dead row
version each) and as many new rows arrive, at the measured rate of dead rows (``--sample``) or
a stated default, raised so that the fixed trigger is crossed every few seconds but the
trigger without the fix is not reached (the report says by how much time is compressed).
Polled meanwhile: the table's dead tuples, autovacuum's runs and, every PROBE_S seconds, the
time of the queue's claim (rolled back), kept as a series from the same start on both clones;
the live-set index's growth; then qadvisor's checks judge each clone again. Autovacuum's
ANALYZE is held off, so the statistics restored from the checked table stay.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from qadvisor.model import SeriesPoint, Table

PHASE_S = 12.0
TICK_S = 0.1
# A reading of the series every this many seconds, the claim timed every PROBE_S.
POINT_S = 0.5
PROBE_S = 1.0
DEFAULT_DEAD_PER_S = 200.0
# The fixed trigger is crossed about every this many seconds of driven churn.
CROSSINGS_S = 3.0
# Findings about when autovacuum runs. QA102's partial index bloated by dead entries is not
# one: its REINDEX is proven on a copy that has lived the bloat, which a copy built from
# statistics has not (it is reported as not reproduced, with why).
VACUUM_CODES = frozenset({"QA201"})


# The most the driver is asked for (dead rows a second), what two cores keep up with.
MAX_DEAD_PER_S = 20_000.0


def driven_rate(
    measured: float, before: float, after: Sequence[float], start: float = 0.0
) -> float:
    """Dead rows a second to drive: the measured rate, raised so that each fixed trigger
    (``after``) is crossed about every CROSSINGS_S seconds, but kept under the trigger without
    the fix (``before``) for the whole phase from the ``start`` dead tuples, as in production,
    where the archive keeps it far away; never above MAX_DEAD_PER_S."""
    wanted = max([measured, *(t / CROSSINGS_S for t in after)])
    ceiling = 0.8 * max(before - start, 0.0) / PHASE_S
    if ceiling > measured:
        wanted = min(wanted, ceiling)
    return max(1.0, min(wanted, MAX_DEAD_PER_S))


@dataclass(frozen=True)
class Phase:
    autovacuums: int
    peak_dead: int
    index_growth: int | None  # bytes the live-set index grew by; None: no such index
    points: tuple[SeriesPoint, ...] = ()


def trigger(conn: psycopg.Connection[Any], table: str) -> float:
    """Dead tuples past which autovacuum vacuums ``table`` on this server: its reloptions,
    else the settings (the autovacuum documentation's formula, capped on PostgreSQL 18)."""
    row = conn.execute(
        """
        SELECT coalesce((SELECT split_part(o, '=', 2) FROM unnest(c.reloptions) o
                          WHERE o LIKE 'autovacuum_vacuum_threshold=%%'),
                        current_setting('autovacuum_vacuum_threshold'))::float8
             + coalesce((SELECT split_part(o, '=', 2) FROM unnest(c.reloptions) o
                          WHERE o LIKE 'autovacuum_vacuum_scale_factor=%%'),
                        current_setting('autovacuum_vacuum_scale_factor'))::float8
               * greatest(c.reltuples, 0),
               coalesce((SELECT split_part(o, '=', 2) FROM unnest(c.reloptions) o
                          WHERE o LIKE 'autovacuum_vacuum_max_threshold=%%'),
                        current_setting('autovacuum_vacuum_max_threshold', true), '-1')::float8
          FROM pg_class c WHERE c.oid = %s::regclass
        """,
        [table],
    ).fetchone()
    assert row is not None
    value, cap = float(row[0]), float(row[1])
    return min(value, cap) if cap >= 0 else value


def drive(
    dsn: str, table: Table, claim_sql: str, arrive_sql: str, dead_per_s: float,
    live_index: str | None, rows: int, probe: Callable[[], float | None] | None = None,
) -> Phase:  # fmt: skip
    """Churn for PHASE_S seconds at ``dead_per_s`` (each tick: that many live rows leave the
    live set, as many arrive with new ids past ``rows``), read as a series; ``probe`` times
    the queue's claim on the clone (None where it cannot)."""
    per_tick = max(1, round(dead_per_s * TICK_S))
    stats = (
        "SELECT n_dead_tup, autovacuum_count FROM pg_stat_user_tables WHERE relid = %s::regclass"
    )
    size = "SELECT pg_relation_size(%s::regclass)"
    points: list[SeriesPoint] = []
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        psycopg.connect(dsn, autocommit=True) as watch,
    ):
        first = watch.execute(stats, [table.qualified]).fetchone()
        assert first is not None
        start_size = watch.execute(size, [live_index]).fetchone() if live_index else None
        peak, next_id = int(first[0]), rows + 1
        started = time.monotonic()
        ends = started + PHASE_S
        next_point = next_probe = started

        def read(at: float, claim_ms: float | None) -> SeriesPoint:
            watch.execute("SELECT pg_stat_clear_snapshot()")
            now = watch.execute(stats, [table.qualified]).fetchone()
            assert now is not None
            return SeriesPoint(round(at - started, 2), int(now[0]), int(now[1]) - int(first[1]),
                               claim_ms)  # fmt: skip

        while (tick := time.monotonic()) < ends:
            with conn.transaction():
                conn.execute(claim_sql.replace("__K__", str(per_tick)).encode())
                conn.execute(
                    arrive_sql.replace("__START__", str(next_id))
                    .replace("__STOP__", str(next_id + per_tick - 1))
                    .encode()
                )
            next_id += per_tick
            claim_ms = None
            if probe is not None and tick >= next_probe:
                claim_ms, next_probe = probe(), next_probe + PROBE_S
            point = read(tick, claim_ms)
            peak = max(peak, point.dead_tuples)
            if tick >= next_point or claim_ms is not None:
                points.append(point)
                next_point += POINT_S
            time.sleep(max(0.0, TICK_S - (time.monotonic() - tick)))
        conn.execute("SELECT pg_stat_force_next_flush()")
        time.sleep(1.0)  # the backend's counters reach the shared statistics
        last = read(time.monotonic(), probe() if probe is not None else None)
        points.append(last)
        grown = None
        if live_index and start_size is not None:
            end_size = watch.execute(size, [live_index]).fetchone()
            assert end_size is not None
            grown = int(end_size[0]) - int(start_size[0])
    return Phase(last.autovacuum_runs, max(peak, last.dead_tuples), grown, tuple(points))
