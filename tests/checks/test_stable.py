"""The same snapshot judged twice gives the same report: every check, on the snapshots the
checks' own unit tests build for their pathologies and on the saved snapshots of
tests/fixtures, twice in this process and in two processes with different string hash
seeds (a set of names iterates in another order in each: an answer that depends on it
differs between two runs of `qadvisor check`)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from qadvisor.engine import load_snapshot, run_checks, snapshot_json
from qadvisor.model import Snapshot
from qadvisor.registry import load_checks
from qadvisor.render.json import report_dict
from qadvisor.settings.resolve import ENV_VARIABLES
from tests import snapshots as S
from tests.checks import test_qa301_generic_plan_misses_partial_index as qa301
from tests.checks import test_qa303_dequeue_sorts_backlog as qa303
from tests.checks import test_qa401_round_robin_walks_backlog as qa401
from tests.checks import test_qa403_fifo_noisy_neighbour as qa403
from tests.helpers import qadvisor

FIXTURES = Path(__file__).parent.parent / "fixtures"

PATHOLOGIES: dict[str, Callable[[], Snapshot]] = {
    "archive-scaled threshold": lambda: S.snapshot(S.jobs_table()),
    "archive-bloated and dead-entry-bloated indexes": lambda: S.snapshot(
        S.jobs_table(
            indexes=(
                S.index("jobs_status_created_at_idx", ("status", "created_at"), 300 << 20),
                S.index(
                    "jobs_pending_created_at",
                    ("created_at",),
                    38 << 20,
                    predicate="(status = 'pending'::text)",
                    reltuples=5_000,
                ),
            )
        )
    ),
    "bound status, normalised text": lambda: qa301._snap(qa301._stmt(**qa301.PGSS)),
    "bound status, given text": lambda: qa301._snap(qa301._stmt()),
    "sort over the backlog": lambda: qa303._snap(),
    "round-robin walk": lambda: qa401.rr_snapshot(qa401.jobs(qa401.FIFO_IDX), qa401.walk_plan()),
    "fifo noisy neighbour": lambda: qa403.fifo_snapshot(),
    **{
        f"fixture {p.name}": (lambda p=p: load_snapshot(p))  # type: ignore[misc]
        for p in sorted(FIXTURES.glob("snapshot-*.json"))
    },
}


@pytest.mark.parametrize("name", sorted(PATHOLOGIES))
def test_the_same_snapshot_judged_twice_gives_the_same_report(name: str) -> None:
    checks = load_checks()
    first = report_dict(run_checks(PATHOLOGIES[name](), checks))
    second = report_dict(run_checks(PATHOLOGIES[name](), checks))
    first.pop("generated_at", None)
    second.pop("generated_at", None)
    assert first["findings"], f"{name}: no finding, so the comparison says little"
    # Order, codes, targets, severities, messages, evidence and fixes: all of it.
    assert first == second


@pytest.mark.parametrize("name", sorted(PATHOLOGIES))
def test_two_processes_with_other_hash_seeds_give_the_same_report(
    name: str, tmp_path: Path
) -> None:
    path = tmp_path / "snapshot.json"
    path.write_text(snapshot_json(PATHOLOGIES[name]()))
    reports = []
    for seed in ("1", "2"):
        env = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES}
        run = qadvisor("check", "--snapshot", str(path), "--format", "json",
                       env={**env, "PYTHONHASHSEED": seed})  # fmt: skip
        assert run.rc in (0, 1) and run.stdout.startswith("{"), run.stderr
        report = json.loads(run.stdout)
        report.pop("generated_at", None)
        reports.append(report)
    assert reports[0]["findings"]
    assert reports[0] == reports[1]
