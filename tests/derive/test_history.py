"""--history as facts (no server): which earlier snapshot is measured against the new one, the
rates and series between them, and the directory that keeps them."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from qadvisor.derive.estimates import rates, suggested_vacuum_threshold
from qadvisor.derive.history import history, index_growth, not_comparable, readings, series
from qadvisor.engine import snapshot_json
from qadvisor.history import store
from qadvisor.model import Sample, ServerInfo, Snapshot, TableStats
from tests import snapshots as S

START = "2026-12-01T08:00:00.000000+00:00"


def at(
    clock: str,
    *,
    ins: int = 0,
    upd: int = 0,
    dead: int = 0,
    index_bytes: int = 8192,
    database: str = "app",
    oid: int = 16384,
    system: str = "7716491702415212084",
    started: str = START,
    reset: str | None = None,
) -> Snapshot:
    """A snapshot of the jobs table read at ``clock`` with these counters."""
    stats = TableStats(n_tup_ins=ins, n_tup_upd=upd, n_dead_tup=dead, n_live_tup=1_000 + ins)
    idx = S.index("jobs_status_idx", ("status",), index_bytes)
    snap = S.snapshot(S.jobs_table(stats=stats, indexes=(idx,)))
    server = ServerInfo("18.6", 180006, database, "monitor", collected_at=clock,
                        stats_reset=reset, system_identifier=system, database_oid=oid,
                        started_at=started)  # fmt: skip
    return replace(snap, server=server)


def with_history(new: Snapshot, *earlier: Snapshot) -> Snapshot:
    found = [(f"s{i}.json", s) for i, s in enumerate(earlier)]
    return replace(new, history=history(new, "hist", found))


def test_only_a_snapshot_whose_counters_run_on_is_comparable() -> None:
    new = at("2026-12-01T10:00:00+00:00")
    old = at("2026-12-01T09:00:00+00:00")
    assert not_comparable(old, new) is None
    elsewhere = replace(old, server=replace(old.server, system_identifier="1"))
    assert "another cluster" in str(not_comparable(elsewhere, new))
    other = at("2026-12-01T09:00:00+00:00", database="other", oid=1)
    assert not_comparable(other, new) == "another database (other, OID 1)"
    restarted = at("2026-12-01T09:00:00+00:00", started="2026-11-30T08:00:00+00:00")
    assert str(not_comparable(restarted, new)).startswith("the server restarted since")
    reset = at("2026-12-01T10:00:00+00:00", reset="2026-12-01T09:30:00+00:00")
    assert "statistics were reset since" in str(not_comparable(old, reset))
    assert not_comparable(new, old) == "it was not read before this snapshot"
    older = replace(old, server=replace(old.server, system_identifier=None))
    assert "an older qadvisor" in str(not_comparable(older, new))


def test_history_keeps_the_comparable_oldest_first_and_says_why_not_the_rest() -> None:
    new = at("2026-12-01T10:00:00+00:00")
    found: list[tuple[str, Snapshot | str]] = [
        ("b.json", at("2026-12-01T09:30:00+00:00")),
        ("a.json", at("2026-12-01T09:00:00+00:00")),
        ("c.json", at("2026-12-01T09:45:00+00:00", database="other", oid=1)),
        ("d.json", "not a qadvisor snapshot: its 'format' is missing or unknown"),
    ]
    h = history(new, "hist", found)
    assert [e.source for e in h.earlier] == ["a.json", "b.json"]
    assert [(m.source, m.reason[:16]) for m in h.not_mixed_in] == [
        ("c.json", "another database"), ("d.json", "not a qadvisor s")]  # fmt: skip
    assert h.summary().startswith("2 earlier snapshots in hist, from 2026-12-01T09:00:00+00:00")


def test_rates_come_from_the_longest_interval_when_no_sample_was_taken() -> None:
    new = with_history(
        at("2026-12-01T10:00:00+00:00", ins=7_200, upd=36_000),
        at("2026-12-01T09:00:00+00:00", ins=0, upd=0),
        at("2026-12-01T09:30:00+00:00", ins=5_000, upd=1_000),
    )
    r = rates(new, new.tables[0])
    assert r is not None and r.from_history
    assert r.seconds == 3600 and r.dead_per_s == 10 and r.inserts_per_s == 2
    assert r.source == (
        "the 60 min since the snapshot of 2026-12-01T09:00:00+00:00 (--history, 3 readings)"
    )
    n, basis = suggested_vacuum_threshold(new, new.tables[0], 100)
    assert n == 1_000  # 30 s at 10 dead tuples/s is 300: the floor
    assert basis.endswith(", measured over " + r.source)
    # A --sample of this run is the rate: it is the current one.
    later = TableStats(n_tup_ins=7_300, n_tup_upd=36_100)
    sampled = replace(new, sample=Sample(10, {"public.jobs": later}))
    r2 = rates(sampled, sampled.tables[0])
    assert r2 is not None and not r2.from_history and r2.seconds == 10


def test_counters_that_went_back_start_the_interval_again() -> None:
    # The table's counters were reset on their own between the first and second snapshot.
    new = with_history(
        at("2026-12-01T10:00:00+00:00", upd=3_000),
        at("2026-12-01T08:00:00+00:00", upd=90_000),
        at("2026-12-01T09:00:00+00:00", upd=0),
    )
    r = rates(new, new.tables[0])
    assert r is not None and r.seconds == 3600 and r.dead_rows == 3_000
    assert [p.source for p in readings(new, new.tables[0])] == ["s1.json", "this snapshot"]


def test_series_and_index_growth_are_readings_over_time() -> None:
    new = with_history(
        at("2026-12-02T09:00:00+00:00", dead=300, index_bytes=3 * 8192),
        at("2026-12-01T09:00:00+00:00", dead=100, index_bytes=8192),
    )
    t = new.tables[0]
    dead = series(new, t, dead_tuples=lambda r: r.stats.n_dead_tup)
    assert dead == [
        {"at": "2026-12-01T09:00:00+00:00", "dead_tuples": 100},
        {"at": "2026-12-02T09:00:00+00:00", "dead_tuples": 300},
    ]
    grew = index_growth(new, t, "jobs_status_idx")
    assert grew["index_growth_per_day_bytes"] == 2 * 8192
    assert str(grew["index_growth_from"]).startswith("between the snapshot of 2026-12-01T09")
    # One reading is no series, and no growth.
    alone = at("2026-12-02T09:00:00+00:00")
    assert series(alone, alone.tables[0], dead=lambda r: r.stats.n_dead_tup) == []
    assert index_growth(alone, alone.tables[0], "jobs_status_idx") == {}


def test_the_directory_keeps_the_newest_and_leaves_other_files_alone(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("mine")
    clocks = [f"2026-12-0{d}T09:00:00.123456+00:00" for d in (1, 2, 3)]
    for clock in clocks:
        snap = at(clock)
        store.save(tmp_path, snap, snapshot_json(snap), keep=2)
    assert store.names(tmp_path) == [
        "qadvisor-snapshot-20261202T090000.123456Z.json",
        "qadvisor-snapshot-20261203T090000.123456Z.json",
    ]
    assert other.read_text() == "mine"
    # Two runs read at the same moment keep both files.
    again = at(clocks[-1])
    store.save(tmp_path, again, snapshot_json(again), keep=5)
    assert store.names(tmp_path)[-1] == "qadvisor-snapshot-20261203T090000.123456Z-2.json"


def test_a_file_that_is_no_snapshot_is_listed_not_read(tmp_path: Path) -> None:
    (tmp_path / "qadvisor-snapshot-20261201T090000.000000Z.json").write_text("{}")
    (tmp_path / "qadvisor-snapshot-20261201T100000.000000Z.json").write_text("not json")
    h = store.read(tmp_path, at("2026-12-02T09:00:00+00:00"))
    assert h.earlier == ()
    reasons = [m.reason for m in h.not_mixed_in]
    assert reasons[0].startswith("not a qadvisor snapshot")
    assert "not JSON" in reasons[1] and str(tmp_path) not in reasons[1]


def test_a_saved_snapshot_does_not_carry_its_history(tmp_path: Path) -> None:
    new = with_history(at("2026-12-02T09:00:00+00:00"), at("2026-12-01T09:00:00+00:00"))
    path = store.save(tmp_path, new, snapshot_json(replace(new, history=None)), keep=3)
    assert json.loads(path.read_text())["history"] is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_directory_that_cannot_hold_the_history_is_named(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert store.unusable(locked) == "it is not readable and writable"


def test_a_file_in_place_of_the_directory_is_no_history(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert store.unusable(tmp_path / "f") == "it is not a directory"
    assert store.unusable(tmp_path / "new") is None
    assert store.unusable(tmp_path / "no" / "such") == f"directory {tmp_path / 'no'} does not exist"


def test_a_sample_adds_its_second_read_to_the_counters_series() -> None:
    snap = replace(at("2026-12-01T09:00:00+00:00", dead=100),
                   sample=Sample(30, {"public.jobs": TableStats(n_dead_tup=700)}))  # fmt: skip
    t = snap.tables[0]
    assert series(snap, t, dead_tuples=lambda r: r.stats.n_dead_tup) == [
        {"at": "2026-12-01T09:00:00+00:00", "dead_tuples": 100},
        {"at": "2026-12-01T09:00:30+00:00", "dead_tuples": 700},
    ]
    # Sizes are not read again by --sample: no index series from it alone.
    assert index_growth(snap, t, "jobs_status_idx") == {}


def test_a_series_reads_as_its_first_and_last_reading_in_the_text_reports() -> None:
    from qadvisor.render.labels import value_text

    points = [{"at": "2026-12-01T09:00:00+00:00", "index_bytes": 8192},
              {"at": "2026-12-01T10:00:00+00:00", "index_bytes": 3 * 1024 * 1024}]  # fmt: skip
    assert value_text("index_bytes_series", points) == (
        "2 readings, 2026-12-01T09:00:00+00:00 to 10:00:00+00:00: 8.0 kB -> 3.0 MB"
    )


def test_qa101_says_how_fast_the_index_grew_between_snapshots() -> None:
    mb = 1024 * 1024
    new = with_history(
        at("2026-12-03T09:00:00+00:00", index_bytes=80 * mb),
        at("2026-12-01T09:00:00+00:00", index_bytes=40 * mb),
    )
    (f,) = [f for f in S.run("QA101", new) if hasattr(f, "evidence")]
    assert f.evidence["index_growth_per_day_bytes"] == 20 * mb
    assert [p["index_bytes"] for p in f.evidence["index_bytes_series"]] == [40 * mb, 80 * mb]
    alone = at("2026-12-03T09:00:00+00:00", index_bytes=80 * mb)
    (g,) = [g for g in S.run("QA101", alone) if hasattr(g, "evidence")]
    assert "index_growth_per_day_bytes" not in g.evidence
