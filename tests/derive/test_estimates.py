"""The numbers checks share (qadvisor.derive.estimates), on hand-built tables: partial index
predicates read as live predicates, the live-set estimate from statistics, autovacuum's trigger,
btree sizes, sample rates and the threshold a fix suggests. Pure: no server.

Fractions and row counts are chosen to be exact in binary floating point, so the expected
values are worked out by hand and compared with ``==``.
"""

from __future__ import annotations

import dataclasses

import pytest

from qadvisor.derive.estimates import (
    LiveEstimate,
    VacuumTrigger,
    autovacuum_enabled,
    btree_bytes,
    column_width,
    distinct_values,
    live_bound,
    live_index,
    live_rows,
    parse_index_predicate,
    rates,
    same_predicate,
    suggested_vacuum_threshold,
    vacuum_threshold_sql,
    vacuum_trigger,
)
from qadvisor.derive.predicates import predicate_implies
from qadvisor.model import (
    Column,
    ColumnStats,
    LivePredicate,
    Sample,
    Snapshot,
    Table,
    TableStats,
)
from qadvisor.sql.dequeue import analyse
from qadvisor.sql.printing import index_where, live_words, predicate_sql
from tests import snapshots as S

NO_SAMPLE_NOTE = (
    "(no rate was measured, by --sample or between --history snapshots: size it from your "
    "dead tuples/s, about 30 s worth)"
)


def table(
    *stats: ColumnStats,
    reltuples: float = 1_000,
    columns: tuple[Column, ...] = (),
    **kw: object,
) -> Table:
    """S.jobs_table with these pg_stats rows (none: the status and created_at of jobs_table)."""
    base = S.jobs_table(reltuples=reltuples)
    changes: dict[str, object] = {"column_stats": stats or base.column_stats, **kw}
    if columns:
        changes["columns"] = base.columns + columns
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def status_stats(null_frac: float = 0.0, n_distinct: float = 4.0) -> ColumnStats:
    """done 1/2 and pending 1/4 of the rows; the other values share what is left."""
    return ColumnStats("status", null_frac, n_distinct, 5, ("done", "pending"), (0.5, 0.25))


def live(op: str, *values: str, column: str = "status") -> LivePredicate:
    return LivePredicate(column, op, values)  # type: ignore[arg-type]


# --- partial index predicates as live predicates ----------------------------------------------


@pytest.mark.parametrize(
    ("predicate", "expected"),
    [
        ("(status = 'pending'::text)", live("in", "pending")),
        ("((status)::text = 'pending'::text)", live("in", "pending")),
        ("(status = 'it''s'::text)", live("in", "it's")),
        ("(status = ANY (ARRAY['a'::text, 'b'::text, 'a'::text]))", live("in", "a", "b")),
        ("(status = ANY ('{a,b}'::text[]))", live("in", "a", "b")),
        ("status IN ('a', 'b')", live("in", "a", "b")),
        ("(status <> 'done'::text)", live("not in", "done")),
        ("status NOT IN ('done', 'failed')", live("not in", "done", "failed")),
        ("(finished_at IS NULL)", live("is null", column="finished_at")),
        ("available", live("true", column="available")),
        ("(NOT available)", live("false", column="available")),
        ("(state < 'running'::job_state)", live("<", "running", column="state")),
        ("(state >= 'running'::job_state)", live(">=", "running", column="state")),
    ],
)
def test_an_index_predicate_on_one_column_is_a_live_predicate(
    predicate: str, expected: LivePredicate
) -> None:
    assert parse_index_predicate(predicate) == expected


@pytest.mark.parametrize(
    "predicate",
    [
        "((status = 'a'::text) AND (queue = 'x'::text))",  # two conjuncts
        "(run_at < now())",  # not a literal
        "(status = $1)",  # a parameter
        "(lower(status) = 'x'::text)",  # an expression, not a column
        "(finished_at IS NOT NULL)",  # no live operator
        "(",  # not SQL
    ],
)
def test_other_index_predicates_are_not_live_predicates(predicate: str) -> None:
    assert parse_index_predicate(predicate) is None


@pytest.mark.xfail(
    strict=True,
    reason="known bug: pg_get_expr prints NOT IN (a, b) as <> ALL (ARRAY[...]), which "
    "parse_index_predicate does not read",
)
def test_not_in_as_pg_get_expr_prints_it_is_a_live_predicate() -> None:
    # What PostgreSQL 15 and 18 print for an index WHERE status NOT IN ('done', 'failed').
    predicate = "(status <> ALL (ARRAY['done'::text, 'failed'::text]))"
    assert parse_index_predicate(predicate) == live("not in", "done", "failed")


def test_the_same_predicate_ignores_the_order_of_values_and_the_source() -> None:
    a = LivePredicate("status", "in", ("a", "b"), "partial index x")
    assert same_predicate(a, LivePredicate("status", "in", ("b", "a"), "status values"))
    assert not same_predicate(a, LivePredicate("status", "not in", ("a", "b")))
    assert not same_predicate(a, LivePredicate("state", "in", ("a", "b")))
    assert not same_predicate(a, LivePredicate("status", "in", ("a",)))


def test_the_live_index_is_the_first_valid_one_with_exactly_the_live_predicate() -> None:
    pending = "(status = 'pending'::text)"
    invalid = S.index("jobs_invalid", ("id",), 8192, predicate=pending, is_valid=False)
    other = S.index("jobs_failed", ("id",), 8192, predicate="(status = 'failed'::text)")
    both = "(status = ANY (ARRAY['pending'::text, 'failed'::text]))"
    wider = S.index("jobs_open", ("id",), 8192, predicate=both)
    whole = S.index("jobs_status", ("status",), 8192)
    first = S.index("jobs_pending", ("created_at",), 8192, predicate=pending)
    second = S.index("jobs_pending_id", ("id",), 8192, predicate=pending)
    t = table(indexes=(invalid, other, wider, whole, first, second))
    assert live_index(t, S.PENDING) is first
    assert live_index(t, live("in", "failed", "pending")) is wider
    assert live_index(t, live("in", "running")) is None


# --- the live set --------------------------------------------------------------------------


def test_no_estimate_without_a_live_predicate_or_statistics() -> None:
    assert live_rows(table(), None) == LiveEstimate(
        None, "no live predicate is known for this table"
    )
    assert live_rows(table(reltuples=-1), S.PENDING) == LiveEstimate(
        None, "the table has never been analyzed (reltuples = -1)"
    )
    no_status = table(ColumnStats("created_at", 0.0, -1.0, 8))
    assert live_rows(no_status, S.PENDING) == LiveEstimate(
        None, "pg_stats has no row for column status; run ANALYZE"
    )
    hidden = dataclasses.replace(no_status, stats_visible=False)
    assert live_rows(hidden, S.PENDING) == LiveEstimate(
        None,
        "pg_stats of status is hidden from this role: it needs SELECT on the column "
        "(GRANT SELECT (status) ON public.jobs TO <role>)",
    )
    assert not live_rows(hidden, S.PENDING).known


def test_a_counted_partial_index_on_the_live_predicate_is_the_estimate() -> None:
    idx = S.index("jobs_pending", ("id",), 8192, predicate="(status = 'pending'::text)",
                  reltuples=250.0)  # fmt: skip
    # pg_stats says 1/4 too, but the index's count wins even where it disagrees.
    t = table(status_stats(), indexes=(idx,), reltuples=2_000)
    counted = "reltuples of partial index jobs_pending"
    assert live_rows(t, S.PENDING) == LiveEstimate(250.0, counted, 0.125)
    assert live_rows(t, S.PENDING).known
    # An empty table: the count, and no fraction of nothing.
    empty = dataclasses.replace(
        t, reltuples=0.0, indexes=(dataclasses.replace(idx, reltuples=0.0),)
    )
    assert live_rows(empty, S.PENDING) == LiveEstimate(0.0, counted, None)
    # Never vacuumed nor analyzed (reltuples -1): pg_stats instead.
    uncounted = dataclasses.replace(t, indexes=(dataclasses.replace(idx, reltuples=-1.0),))
    assert live_rows(uncounted, S.PENDING) == LiveEstimate(500.0, "pg_stats of status", 0.25)


def test_the_live_set_from_the_most_common_values() -> None:
    t = table(status_stats())
    assert live_rows(t, live("in", "pending")) == LiveEstimate(250.0, "pg_stats of status", 0.25)
    assert live_rows(t, live("in", "done", "pending")) == LiveEstimate(
        750.0, "pg_stats of status", 0.75
    )


def test_a_value_outside_the_most_common_ones_gets_its_share_of_the_rest() -> None:
    # 4 distinct values, 2 in the MCV list covering 3/4: the other 2 share 1/4, 1/8 each.
    t = table(status_stats())
    assert live_rows(t, live("in", "failed")) == LiveEstimate(125.0, "pg_stats of status", 0.125)
    assert live_rows(t, live("in", "failed", "pending")).fraction == 0.375
    # Nulls are not among the rest: 1/8 null leaves 1/8 for the other 2 values.
    assert live_rows(table(status_stats(null_frac=0.125)), live("in", "failed")).fraction == 0.0625
    # A negative n_distinct is a fraction of the rows: -0.004 x 1000 rows = 4 values.
    assert live_rows(table(status_stats(n_distinct=-0.004)), live("in", "failed")).fraction == 0.125
    # No more distinct values than MCV entries: the rest goes to the one missing value.
    assert live_rows(table(status_stats(n_distinct=2)), live("in", "failed")).fraction == 0.25
    # Never more than every row.
    full = ColumnStats("status", 0.0, 2.0, 5, ("done", "pending"), (0.75, 0.5))
    assert live_rows(table(full), live("in", "done", "pending")).fraction == 1.0


def test_not_in_is_what_is_neither_null_nor_those_values() -> None:
    t = table(status_stats(null_frac=0.125))
    assert live_rows(t, live("not in", "done")) == LiveEstimate(375.0, "pg_stats of status", 0.375)
    # Rounding that would go below zero stays at zero.
    assert live_rows(t, live("not in", "done", "pending", "x", "y")).fraction == 0.0


def test_is_null_and_booleans_read_their_own_statistics() -> None:
    finished = ColumnStats("finished_at", 0.25, -0.75, 8)
    available = ColumnStats("available", 0.0, 2.0, 1, ("f", "t"), (0.875, 0.125))
    t = table(finished, available, columns=(Column("available", "boolean"),))
    assert live_rows(t, live("is null", column="finished_at")) == LiveEstimate(
        250.0, "pg_stats of finished_at", 0.25
    )
    assert live_rows(t, live("true", column="available")) == LiveEstimate(
        125.0, "pg_stats of available", 0.125
    )
    assert live_rows(t, live("false", column="available")).rows == 875.0


def test_an_enum_range_counts_the_labels_inside_it_in_the_enum_s_order() -> None:
    labels = ("queued", "running", "done", "failed")
    state = ColumnStats("state", 0.0, 4.0, 4, ("done", "queued", "running"), (0.5, 0.25, 0.125))
    t = table(state, columns=(Column("state", "job_state", True, labels),))
    source = "pg_stats of state"
    assert live_rows(t, live("<", "running", column="state")) == LiveEstimate(250.0, source, 0.25)
    assert live_rows(t, live("<=", "running", column="state")).fraction == 0.375
    # failed is outside the MCV list: 4 distinct, 3 listed, it has the rest, 1/8.
    assert live_rows(t, live(">", "running", column="state")).fraction == 0.625
    assert live_rows(t, live(">=", "done", column="state")).fraction == 0.625
    # Nothing sorts before the first label.
    assert live_rows(t, live("<", "queued", column="state")) == LiveEstimate(0.0, source, 0.0)


def test_a_range_whose_order_is_unknown_is_no_estimate() -> None:
    labels = ("queued", "running")
    t = table(
        ColumnStats("state", 0.0, 2.0, 4, labels, (0.5, 0.5)),
        ColumnStats("status", 0.0, 2.0, 4, labels, (0.5, 0.5)),
        columns=(Column("state", "job_state", True, labels),),
    )
    unknown = (
        "is a range of a type whose order qadvisor does not know (only enum ranges are estimated)"
    )
    assert live_rows(t, live("<", "running")) == LiveEstimate(None, f"status < 'running' {unknown}")
    # A value that is not one of the enum's labels: no order to count in.
    assert live_rows(t, live(">", "paused", column="state")) == LiveEstimate(
        None, f"state > 'paused' {unknown}"
    )


# --- autovacuum ------------------------------------------------------------------------------


def test_the_vacuum_trigger_comes_from_the_server_settings() -> None:
    snap = S.snapshot(table())
    trigger = vacuum_trigger(snap, table(reltuples=1_000))
    assert trigger == VacuumTrigger(
        threshold=50.0,
        scale_factor=0.2,
        reltuples=1_000,
        max_threshold=100_000_000.0,
        value=250.0,
        threshold_source="server setting",
        scale_factor_source="server setting",
    )
    assert trigger.scaled_part == 200.0


def test_table_reloptions_win_and_the_cap_of_18_applies() -> None:
    t = table(reltuples=1_000_000_000, reloptions={"autovacuum_vacuum_scale_factor": "0.5"})
    trigger = vacuum_trigger(S.snapshot(t), t)
    assert (trigger.threshold, trigger.scale_factor, trigger.value) == (50.0, 0.5, 100_000_000.0)
    assert (trigger.threshold_source, trigger.scale_factor_source) == (
        "server setting",
        "table reloption",
    )
    assert trigger.scaled_part == 500_000_000.0
    # A reloption of -1 turns the cap off, for that table.
    uncapped = dataclasses.replace(t, reloptions={"autovacuum_vacuum_max_threshold": "-1"})
    trigger = vacuum_trigger(S.snapshot(uncapped), uncapped)
    assert (trigger.max_threshold, trigger.value) == (None, 200_000_050.0)


def test_without_settings_the_defaults_and_a_never_analyzed_table_counts_as_empty() -> None:
    t = table(reltuples=-1)
    snap = dataclasses.replace(S.snapshot(t), settings={})
    assert vacuum_trigger(snap, t) == VacuumTrigger(
        50.0, 0.2, 0.0, None, 50.0, "not set", "not set"
    )  # PostgreSQL 15: no autovacuum_vacuum_max_threshold


@pytest.mark.parametrize(
    ("server", "reloption", "enabled"),
    [
        ("on", None, True),
        ("off", None, False),
        ("on", "false", False),
        ("on", "OFF", False),
        ("on", "0", False),
        ("on", "true", True),
        ("off", "true", False),  # the table setting cannot turn the launcher on
    ],
)
def test_autovacuum_runs_when_the_server_and_the_table_both_allow_it(
    server: str, reloption: str | None, enabled: bool
) -> None:
    t = table(reloptions={"autovacuum_enabled": reloption} if reloption else {})
    assert autovacuum_enabled(S.snapshot(t, settings={"autovacuum": server}), t) is enabled


# --- distinct values, widths, btree sizes ------------------------------------------------------


def test_distinct_values_as_a_number() -> None:
    t = table(status_stats(n_distinct=4.0), ColumnStats("id", 0.0, -1.0, 8), reltuples=1_000)
    assert distinct_values(t, "status") == 4.0
    assert distinct_values(t, "id") == 1_000
    assert distinct_values(dataclasses.replace(t, reltuples=-1), "id") == 0
    assert distinct_values(t, "created_at") is None


def test_a_column_s_width_from_pg_stats_else_from_its_type() -> None:
    t = table(
        ColumnStats("status", 0.0, 2.0, 7),
        ColumnStats("created_at", 0.0, -1.0, 0),  # no width measured
        columns=(Column("payload", "jsonb"),),
    )
    assert column_width(t, "status") == 7
    assert column_width(t, "created_at") == 8  # timestamp with time zone
    assert column_width(t, "id") == 8  # bigint, no statistics
    assert column_width(t, "payload") == 16  # a type of no fixed width
    assert column_width(t, "missing") == 8


def test_btree_sizes_are_counted_in_pages() -> None:
    t = table(ColumnStats("status", 0.0, 2.0, 5), ColumnStats("created_at", 0.0, -1.0, 8))
    page = 8192
    # A bigint key: 8 header + 8 data + 4 line pointer = 20 bytes; 8152 usable x 90 % = 7336,
    # so 366 entries a leaf.
    assert btree_bytes(t, ("id",), 0) == 2 * page  # metapage and an empty root
    assert btree_bytes(t, ("id",), -5) == 2 * page
    assert btree_bytes(t, ("id",), 366) == 2 * page
    assert btree_bytes(t, ("id",), 367) == 4 * page  # two leaves and a root above them
    # 2,733 leaves (366 x 2,732 = 999,912) and 11 internal pages.
    assert btree_bytes(t, ("id",), 1_000_000) == (1 + 2_733 + 11) * page
    # status (5) + created_at (8) = 13 bytes of data, MAXALIGNed to 16: 28 a entry, 262 a leaf.
    assert btree_bytes(t, ("status", "created_at"), 262) == 2 * page
    assert btree_bytes(t, ("status", "created_at"), 263) == 4 * page


# --- rates and the suggested threshold ---------------------------------------------------------


def sampled(first: TableStats, later: TableStats, seconds: float = 10.0) -> tuple[Snapshot, Table]:
    """A snapshot of jobs with counters ``first`` and, ``seconds`` later, ``later``."""
    t = table(stats=first)
    return S.snapshot(t, sample=Sample(seconds, {"public.jobs": later})), t


def test_rates_are_the_counters_difference_per_second() -> None:
    first = TableStats(n_tup_ins=1_000, n_tup_upd=2_000, n_tup_del=500, autovacuum_count=3)
    later = TableStats(n_tup_ins=1_500, n_tup_upd=2_750, n_tup_del=750, autovacuum_count=5)
    snap, t = sampled(first, later)
    r = rates(snap, t)
    assert r is not None
    assert dataclasses.asdict(r) == {
        "seconds": 10.0,
        "dead_per_s": 100.0,
        "inserts_per_s": 50.0,
        "updates_per_s": 75.0,
        "deletes_per_s": 25.0,
        "autovacuums": 2,
        "dead_rows": 1_000,
        "inserted_rows": 500,
        "source": "the 10 s of --sample",
        "from_history": False,
    }
    assert r.dead_measured and r.inserts_measured


def test_a_counter_reset_during_the_sample_is_no_negative_rate() -> None:
    snap, t = sampled(TableStats(n_tup_ins=900, n_tup_upd=9, autovacuum_count=4), TableStats())
    r = rates(snap, t)
    assert r is not None
    assert (r.dead_per_s, r.inserts_per_s, r.autovacuums) == (0.0, 0.0, 0)


def test_fewer_than_100_rows_over_the_sample_is_no_rate() -> None:
    snap, t = sampled(TableStats(), TableStats(n_tup_ins=99, n_tup_upd=99))
    r = rates(snap, t)
    assert r is not None
    assert not r.dead_measured and not r.inserts_measured
    snap, t = sampled(TableStats(), TableStats(n_tup_ins=100, n_tup_upd=60, n_tup_del=40))
    r = rates(snap, t)
    assert r is not None
    assert r.dead_measured and r.inserts_measured


def test_no_rates_without_a_sample_of_this_table() -> None:
    t = table()
    assert rates(S.snapshot(t), t) is None
    assert rates(S.snapshot(t, sample=Sample(0.0, {"public.jobs": TableStats()})), t) is None
    assert rates(S.snapshot(t, sample=Sample(10.0, {"app.jobs": TableStats()})), t) is None


@pytest.mark.parametrize(
    ("dead", "expected", "basis"),
    [
        (1_000, 2_000, "30 s of dead tuples at the measured 100 dead tuples/s is 3,000, rounded to 2,000 (the nearest of 1, 2 and 5 times a power of ten: any figure from 1,415 to 3,162 gives it)"),  # noqa: E501
        (2_000, 5_000, "30 s of dead tuples at the measured 200 dead tuples/s is 6,000, rounded to 5,000 (the nearest of 1, 2 and 5 times a power of ten: any figure from 3,163 to 7,071 gives it)"),  # noqa: E501
        (200, 1_000, "30 s of dead tuples at the measured 20 dead tuples/s is 600, raised to the floor of 1,000"),  # noqa: E501
        (2_500, 10_000, "30 s of dead tuples at the measured 250 dead tuples/s is 7,500, rounded to 10,000 (the nearest of 1, 2 and 5 times a power of ten: any figure from 7,072 to 14,142 gives it)"),  # noqa: E501
    ],
)  # fmt: skip
def test_a_measured_rate_sizes_the_threshold_to_30_seconds_of_dead_tuples(
    dead: int, expected: int, basis: str
) -> None:
    snap, t = sampled(TableStats(), TableStats(n_tup_upd=dead))
    assert suggested_vacuum_threshold(snap, t, live=1_000_000) == (expected, basis)


def test_a_round_number_of_dead_tuples_is_said_without_rounding() -> None:
    # 5,000 dead tuples over 30 s: 166.67/s, and 30 s of it 5,000 again (exactly, in floats).
    snap, t = sampled(TableStats(), TableStats(n_tup_upd=5_000), seconds=30.0)
    assert suggested_vacuum_threshold(snap, t, live=None) == (
        5_000,
        "30 s of dead tuples at the measured 167 dead tuples/s",
    )


def test_a_round_number_over_a_sample_that_does_not_divide_it_is_not_doubled() -> None:
    # 1,000 / 30 x 30 is 1000.0000000000001 in floats, which rounding up made 2,000.
    snap, t = sampled(TableStats(), TableStats(n_tup_upd=1_000), seconds=30.0)
    assert suggested_vacuum_threshold(snap, t, live=None) == (
        1_000,
        "30 s of dead tuples at the measured 33 dead tuples/s",
    )


def test_without_a_measured_rate_ten_times_the_live_set() -> None:
    t = table()
    snap = S.snapshot(t)
    assert suggested_vacuum_threshold(snap, t, 500.0) == (
        5_000,
        f"10x the live set of 500 rows {NO_SAMPLE_NOTE}",
    )
    assert suggested_vacuum_threshold(snap, t, 150.0) == (
        2_000,
        f"10x the live set of 150 rows is 1,500, rounded to 2,000 (the nearest of 1, 2 and 5 "
        f"times a power of ten: any figure from 1,415 to 3,162 gives it) {NO_SAMPLE_NOTE}",
    )
    assert suggested_vacuum_threshold(snap, t, None) == (
        1_000,
        f"10x the live set of 0 rows is 0, raised to the floor of 1,000 {NO_SAMPLE_NOTE}",
    )
    # A sample too short to measure a rate falls back on the live set too.
    quiet, t = sampled(TableStats(), TableStats(n_tup_upd=99))
    assert suggested_vacuum_threshold(quiet, t, 500.0) == (
        5_000,
        f"10x the live set of 500 rows {NO_SAMPLE_NOTE}",
    )


def test_the_threshold_statement_quotes_names_and_turns_scaling_off() -> None:
    t = dataclasses.replace(table(), schema="Tenant 42", name="jobs")
    assert vacuum_threshold_sql(t, 5_000) == (
        'ALTER TABLE "Tenant 42".jobs SET '
        "(autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);"
    )


def test_the_whole_table_as_the_live_set() -> None:
    every = LivePredicate.every_row("claim --query 1; it has no condition on jobs")
    table = S.jobs_table(reltuples=12_000, pending_freq=None)
    est = live_rows(table, every)
    assert (est.rows, est.fraction) == (12_000, 1.0)
    assert "reltuples of the table" in est.source
    assert live_index(table, every) is None
    assert predicate_sql(every) == "TRUE" and index_where(every) is None
    assert live_words(every) == [] and every.columns == ()
    # Any condition implies every row: a claim's own index fix is a plain one.
    assert predicate_implies((), every).implies is True


def test_a_boolean_partial_index_as_postgresql_keeps_it() -> None:
    assert parse_index_predicate("(is_available = true)") == LivePredicate("is_available", "true")
    assert parse_index_predicate("(is_available = false)") == LivePredicate("is_available", "false")
    assert parse_index_predicate("(is_available <> true)") == LivePredicate("is_available", "false")
    flag = LivePredicate("is_available", "true")
    for claim, proved in (
        ("jobs.is_available = true", True),
        ("is_available", True),
        ("is_available = false", False),
        ("NOT is_available", False),
    ):
        parsed = analyse(f"SELECT id FROM jobs WHERE {claim} FOR UPDATE SKIP LOCKED")
        assert parsed is not None
        assert predicate_implies(parsed.predicates, flag).implies is proved, claim
    parsed = analyse("SELECT id FROM jobs WHERE is_available = $1 FOR UPDATE SKIP LOCKED")
    assert parsed is not None
    assert predicate_implies(parsed.predicates, flag).implies is None  # a hypothesis
    assert predicate_implies(parsed.predicates, flag, {"1": "true"}).implies is True
    assert predicate_implies(parsed.predicates, flag, {"1": "false"}).implies is False


def test_the_estimate_says_as_of_when_and_whether_the_table_changed_more_since() -> None:
    idx = S.index("jobs_pending", ("id",), 8192, predicate="(status = 'pending'::text)",
                  reltuples=200.0)  # fmt: skip
    stats = TableStats(
        last_autoanalyze="2026-01-02 03:00:00+00",
        last_vacuum="2026-01-02 04:00:00+00",
        n_mod_since_analyze=5_000,
    )
    t = dataclasses.replace(table(status_stats(), indexes=(idx,), reltuples=2_000), stats=stats)
    est = live_rows(t, S.PENDING)
    assert est.rows == 200.0
    # The index's count, dated by the later of VACUUM and ANALYZE; pg_stats disagrees by more
    # than a sample's noise, so it is said too.
    assert est.source == (
        "reltuples of partial index jobs_pending, as of the table's last VACUUM or ANALYZE "
        "(2026-01-02 04:00:00+00); pg_stats of status says 500"
    )
    assert est.stale.startswith("5,000 rows were inserted, updated or deleted since")
    by_stats = live_rows(dataclasses.replace(t, indexes=()), S.PENDING)
    assert by_stats.source == (
        "pg_stats of status, as of the table's last ANALYZE (2026-01-02 03:00:00+00)"
    )
    assert by_stats.stale  # 5,000 changed rows against 500 live ones
    calm = dataclasses.replace(t, stats=dataclasses.replace(stats, n_mod_since_analyze=200))
    assert live_rows(calm, S.PENDING).stale == ""


# --- a union of one-column conditions (an OR over timestamps) ---------------------------------

WAITING_OR_LOCKED = LivePredicate.any_of(
    (LivePredicate("next_run_at", "is not null"), LivePredicate("locked_at", "is not null"))
)


def test_a_union_is_at_most_the_sum_of_its_parts_from_indexes_else_from_null_frac() -> None:
    next_run = ColumnStats("next_run_at", 0.99, -0.01, 8)
    locked = ColumnStats("locked_at", 0.995, -0.005, 8)
    t = table(next_run, locked, reltuples=100_000)
    got = live_rows(t, WAITING_OR_LOCKED)
    assert got.rows == pytest.approx(1_000 + 500)
    assert "null_frac of next_run_at" in got.source and "null_frac of locked_at" in got.source
    # A partial index on exactly a part counts it instead (here 40 locked rows).
    idx = S.index("jobs_locked", ("locked_at",), 8192, predicate="(locked_at IS NOT NULL)",
                  reltuples=40.0)  # fmt: skip
    counted = live_rows(dataclasses.replace(t, indexes=(idx,)), WAITING_OR_LOCKED)
    assert counted.rows == pytest.approx(1_000 + 40)
    assert "reltuples of partial index jobs_locked" in counted.source


def test_a_union_prints_as_an_or_in_parentheses_and_names_its_parts() -> None:
    assert predicate_sql(WAITING_OR_LOCKED) == "(next_run_at IS NOT NULL OR locked_at IS NOT NULL)"
    assert predicate_sql(WAITING_OR_LOCKED, "j") == (
        "(j.next_run_at IS NOT NULL OR j.locked_at IS NOT NULL)"
    )
    assert index_where(WAITING_OR_LOCKED) == predicate_sql(WAITING_OR_LOCKED)
    assert live_words(WAITING_OR_LOCKED) == ["next_run_at_set", "locked_at_set"]
    assert WAITING_OR_LOCKED.columns == ("next_run_at", "locked_at")


@pytest.mark.parametrize(
    ("claim_where", "implied"),
    [
        # Each arm proves a part: PostgreSQL's predicate test proves the OR, a parameter or not.
        ("(locked_at IS NULL AND next_run_at <= $3) OR locked_at <= $4", True),
        ("next_run_at <= now()", True),  # one strict comparison proves its part
        ("locked_at IS NULL", False),  # the archive has it too
        ("(locked_at IS NULL OR locked_at < $1)", False),  # an arm proves no part
    ],
)
def test_a_claim_proves_a_union_when_each_arm_proves_a_part(
    claim_where: str, implied: bool
) -> None:
    parsed = analyse(f"SELECT id FROM jobs WHERE {claim_where} LIMIT 1 FOR UPDATE SKIP LOCKED")
    assert parsed is not None
    assert predicate_implies(parsed.predicates, WAITING_OR_LOCKED).implies is implied


# --- the live set when the statistics cannot count it ---------------------------------------


def test_stale_statistics_bound_the_live_set_by_the_archive_s_share_and_the_changes_since() -> None:
    table = S.jobs_table(reltuples=1_000_000, pending_freq=0.0006)
    fresh = live_rows(table, S.PENDING)
    assert fresh.stale == "" and fresh.bound is None
    stale = dataclasses.replace(table, stats=TableStats(n_mod_since_analyze=5_000))
    est = live_rows(stale, S.PENDING)
    assert est.rows == pytest.approx(600) and est.stale
    assert est.bound is not None
    # 'done' held 99.94 % of the rows ANALYZE saw: 600 were not finished then, and each of
    # the 5,000 rows changed since may have become live.
    assert est.bound.at_analyze == pytest.approx(600)
    assert est.bound.rows == pytest.approx(5_600)
    assert "the finished common values of status (done 99.94%)" in est.bound.text


def test_without_a_live_predicate_the_finished_values_of_a_status_still_bound_it() -> None:
    table = dataclasses.replace(
        S.jobs_table(reltuples=1_000_000, pending_freq=None),
        column_stats=(ColumnStats("status", 0.0, 2.0, 9, ("completed", "failed"), (0.999, 0.001)),),
        stats=TableStats(n_mod_since_analyze=500),
    )
    bound = live_bound(table, None)
    assert bound is not None and bound.at_analyze == pytest.approx(0) and bound.rows == 500
    # A status that holds no finished value bounds nothing.
    running = dataclasses.replace(
        table, column_stats=(ColumnStats("status", 0.0, 2.0, 9, ("running", "new"), (0.5, 0.5)),)
    )
    assert live_bound(running, None) is None


def test_a_finish_time_bounds_a_live_set_that_waits_while_it_is_null() -> None:
    table = dataclasses.replace(
        S.jobs_table(reltuples=1_000_000, pending_freq=None),
        column_stats=(ColumnStats("finished_at", 0.002, -0.9, 8),),
        stats=TableStats(n_mod_since_analyze=300),
    )
    bound = live_bound(table, LivePredicate("finished_at", "is null"))
    assert bound is not None and bound.rows == pytest.approx(2_300)
    assert "the rows with finished_at set" in bound.source


def test_a_union_over_timestamps_is_bounded_by_the_rows_it_can_take_at_most() -> None:
    # Agenda's live set: next_run_at or locked_at set. 99.98 % of the rows have each NULL,
    # so at least 99.96 % have both NULL (the archive): at most 0.04 % were live at ANALYZE.
    live = LivePredicate.any_of(
        (LivePredicate("locked_at", "is not null"), LivePredicate("next_run_at", "is not null"))
    )
    table = dataclasses.replace(
        S.jobs_table(reltuples=1_000_000, pending_freq=None),
        column_stats=(
            ColumnStats("locked_at", 0.9998, -0.0002, 8),
            ColumnStats("next_run_at", 0.9998, -0.0002, 8),
        ),
        stats=TableStats(n_mod_since_analyze=3_000),
    )
    bound = live_bound(table, live)
    assert bound is not None and bound.at_analyze == pytest.approx(400)
    assert bound.rows == pytest.approx(3_400)
    assert "locked_at and next_run_at by pg_stats null_frac" in bound.source
    est = live_rows(table, live)
    assert est.stale and est.bound == bound
