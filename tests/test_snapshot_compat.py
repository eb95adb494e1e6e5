"""Snapshots saved by older versions still load, closed sets included, and values outside a
closed set are refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qadvisor import engine
from qadvisor.engine import SnapshotFileError
from qadvisor.model import Snapshot
from qadvisor.registry import load_checks
from tests.helpers import qadvisor

FIXTURES = Path(__file__).parent / "fixtures"
# Each saved by `qadvisor snapshot` of the commit in its name, on PostgreSQL 18.6: the demo
# queue, a multi-tenant queue with a rotation table, and three claims from a --query-file (a
# round-robin LATERAL, a FOR UPDATE without SKIP LOCKED, a window under FOR UPDATE). The keys
# are what that version's own `qadvisor check --snapshot` reported on the file.
SAVED = {
    "snapshot-508d112.json": [
        "QA401:public./tmp/engine-rr.sql#1",
        "QA402:public.tjobs_tenants",
        "QA501:public./tmp/engine-rr.sql#2",
        "QA503:public./tmp/engine-rr.sql#3",
    ],
    "snapshot-f24dd57.json": [
        "QA401:public.tjobs@68cf9ed9f9",
        "QA402:public.tjobs_tenants",
        "QA501:public.tjobs@ee2ae69742",
        "QA503:public.tjobs@9a1063c648",
    ],
}


@pytest.mark.parametrize(("name", "keys"), sorted(SAVED.items()))
def test_an_older_snapshot_loads_and_is_judged_as_its_version_judged_it(
    name: str, keys: list[str]
) -> None:
    snap = engine.load_snapshot(FIXTURES / name)
    parsed = [s.parsed for s in snap.statements if s.parsed is not None]
    assert len(parsed) == 4  # the three claims of the file and the demo's, from pg_stat_statements
    assert {p.lock.strength for p in parsed} == {"update"}
    assert {p.lock.wait_policy for p in parsed} == {"skip locked", None}
    assert {p.lock_level for p in parsed} == {"lateral", "top", "subquery"}
    assert {q.live.op for q in snap.queues if q.live} == {"in"}
    report = engine.run_checks(snap, load_checks())
    assert sorted(f.key for f in report.findings) == keys
    # Saved again by this version, it reads back the same.
    assert Snapshot.from_dict(json.loads(engine.snapshot_json(snap))) == snap


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("queues", 0, "live", "op"), "like", "LivePredicate.op: 'like' is not one of 'in'"),
        (
            ("statements", 0, "parsed", "lock", "strength"),
            "exclusive",
            "LockClause.strength: 'exclusive' is not one of 'update', 'no key update'",
        ),
        (
            ("statements", 0, "parsed", "predicates", 0, "op"),
            "~~",
            "Predicate.op: '~~' is not one of",
        ),
    ],
)
def test_a_value_outside_a_closed_set_is_refused_by_name(
    tmp_path: Path, path: tuple[str | int, ...], value: str, message: str
) -> None:
    data = json.loads((FIXTURES / "snapshot-f24dd57.json").read_text())
    node = data
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(SnapshotFileError, match="is not a qadvisor snapshot: " + message):
        engine.load_snapshot(bad)
    run = qadvisor("check", "--snapshot", str(bad))
    assert run.rc == 2 and message in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
