"""`qadvisor diff` on a fleet's JSON report: refused with the way to take one database's
report out of it, never read as a report of no findings (its findings name their databases,
and it has no checks_run or skips of its own)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import qadvisor
from tests.render.test_fleet_render import _fleet, _text


def test_a_fleet_report_is_refused_and_one_database_of_it_compares(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet.json"
    fleet.write_text(_text("json", _fleet()))
    run = qadvisor("diff", str(fleet), str(fleet))
    assert run.rc == 2 and run.stdout == ""
    assert "is a fleet's report" in run.stderr and ".databases[]" in run.stderr
    # One database's report, as the message says to take it out, is a report diff reads.
    app = next(m["report"] for m in json.loads(fleet.read_text())["databases"]
               if m["database"] == "app")  # fmt: skip
    one = tmp_path / "app.json"
    one.write_text(json.dumps(app))
    run = qadvisor("diff", str(one), str(one))
    assert run.rc == 0, run.stderr
    assert "No change" in run.stdout
