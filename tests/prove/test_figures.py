"""What a proof may claim from its figures (pure): a change beyond the spread of the runs, a
copy that reproduces the checked server's counters, no figure from a run that took no row."""

from __future__ import annotations

from qadvisor.model import ProofMeasure, Statement
from qadvisor.prove.figures import (
    REPRODUCED_WITHIN,
    change,
    improved,
    once,
    reproduction,
    reproduction_note,
    statement_measures,
)
from qadvisor.prove.timing import Timed

LABEL = "pg_stat_statements 3f9a2c1b0d (3 calls, 6,044 ms mean)"


def _timed(ms: tuple[float, ...], blocks: float, rows: float = 1.0, node: str = "x") -> Timed:
    return Timed(ms, (blocks,) * len(ms), node, (rows,) * len(ms))


def _recorded(rows: float | None, blocks: float | None) -> Statement:
    return Statement("pg_stat_statements", "SELECT 1", calls=3, mean_exec_ms=6_044.0,
                     shared_blks_per_call=blocks, rows_per_call=rows)  # fmt: skip


def test_a_change_inside_the_spread_is_no_measurable_change() -> None:
    # QA301 on the round-robin trap: 5,548 -> 5,483 ms, with runs that overlap.
    assert change([5_548.0, 5_310.0, 5_900.0], [5_483.0, 5_400.0, 5_700.0]) == "none"
    # Apart, but by less than MIN_CHANGE: a buffer or two in a million is no change.
    assert change([1_000_123.0] * 3, [1_000_100.0] * 3) == "none"
    assert change([5_548.0, 5_310.0, 5_900.0], [0.84, 0.8, 1.1]) == "lower"
    assert change([0.84, 0.8, 1.1], [5_548.0, 5_310.0, 5_900.0]) == "higher"
    assert change([], [1.0]) is None


def test_a_copy_within_the_stated_factor_reproduces_the_statement() -> None:
    near = reproduction(_recorded(1.0, 797.0), LABEL, _timed((3.0,), 797.0 / 2.5))
    assert near.reproduced is True and near.within == REPRODUCED_WITHIN
    # The demo before dead entries were relived: 797 buffers a claim there, 22 on the copy.
    far = reproduction(_recorded(1.0, 797.0), LABEL, _timed((0.04,), 22.0))
    assert far.reproduced is False
    note = reproduction_note(far, 0.9, 0.04)
    assert "797 shared buffers there, 22 on the copy" in note
    assert "not reproduced (more than 3 times apart)" in note and "no ratio" in note
    # A handful of buffers apart is a descent's pages, whatever the factor.
    assert reproduction(_recorded(1.0, 4.0), LABEL, _timed((0.04,), 12.0)).reproduced is True


def test_a_claim_that_takes_a_row_there_and_none_on_the_copy_is_not_reproduced() -> None:
    r = reproduction(_recorded(1.0, 1_000.0), LABEL, _timed((5_000.0,), 1_000.0, rows=0.0))
    assert r.reproduced is False and r.rows_copy == 0
    assert "1 rows there, 0 on the copy" in reproduction_note(r, None, 5_000.0)


def test_without_counters_there_nothing_is_held_against_production() -> None:
    given = Statement("--query", "SELECT 1")
    r = reproduction(given, "--query 1", _timed((1.0,), 10.0))
    assert r.reproduced is None
    assert "recorded no counters" in reproduction_note(r, None, 1.0)


def test_a_run_that_took_no_row_is_no_figure_and_gets_no_ratio() -> None:
    before = _timed((5_548.0, 5_300.0, 5_900.0), 1_000_000.0, node="Index Scan using fifo")
    empty = _timed((0.84, 0.8, 0.9), 3_000.0, rows=0.0, node="Index Scan using tenant")
    ms, blocks = statement_measures(LABEL, before, empty, comparable=True)
    assert ms.before == 5_548.0 and ms.before_spread == (5_300.0, 5_900.0)
    assert ms.after is None and ms.ratio is None and ms.change is None
    assert ms.plan_after == "Index Scan using tenant"
    assert blocks.after is None and blocks.ratio is None


def test_a_statement_the_copy_did_not_reproduce_claims_no_ratio() -> None:
    before, after = _timed((5.0, 5.1, 5.2), 800.0), _timed((0.05, 0.05, 0.06), 20.0)
    ms, _ = statement_measures(LABEL, before, after, comparable=False)
    assert (ms.before, ms.after) == (5.1, 0.05) and ms.ratio is None and ms.change is None
    ms, blocks = statement_measures(LABEL, before, after, comparable=True)
    assert ms.ratio == 102.0 and ms.change == "lower" and blocks.ratio == 40.0


def test_gone_needs_a_measure_moved_the_way_the_fix_means() -> None:
    unmoved = ProofMeasure("claim ms", LABEL, 5_548.0, 5_483.0, None, change="none")
    assert not improved([unmoved])
    assert improved([unmoved, once("index bytes", "a -> b", 66_400_000, 168_000)])
    # A new index replacing none grows the bytes: not what "gone" rests on.
    assert not improved([once("index bytes", "none -> b", 0, 4_000_000)])
    assert improved([ProofMeasure("autovacuum runs", "t", 0, 3, None, change="higher")])


def test_a_time_that_moved_with_the_same_scan_and_buffers_is_no_change_of_the_fix() -> None:
    # QA301 on the round-robin trap under load (PostgreSQL 15, 20 s a run): the rewrite left
    # the claim reading the same million buffers through the same scan, and the runs after
    # were faster than those before only because the machine was less busy.
    scan = "Index Scan using jobs_queued_fifo on jobs"
    before = _timed((20_200.0, 19_800.0, 20_900.0), 1_000_000.0, node=scan)
    after = _timed((15_100.0, 14_900.0, 15_600.0), 1_000_000.0, node=scan)
    ms, blocks = statement_measures(LABEL, before, after, comparable=True)
    assert ms.change == "none" and ms.ratio is None and blocks.change == "none"
    assert (ms.before, ms.after) == (20_200.0, 15_100.0)  # the figures stay as measured
    assert not improved([ms, blocks])
    # Another scan, or other buffers, and the time is the fix's.
    other = _timed((15_100.0, 14_900.0, 15_600.0), 1_000_000.0, node="Seq Scan on jobs")
    assert statement_measures(LABEL, before, other, comparable=True)[0].change == "lower"
    fewer = _timed((15_100.0, 14_900.0, 15_600.0), 700_000.0, node=scan)
    ms, blocks = statement_measures(LABEL, before, fewer, comparable=True)
    assert ms.change == "lower" and blocks.change == "lower"
