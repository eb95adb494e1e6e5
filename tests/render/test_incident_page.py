"""The incident page (``--format html``) of each seed state, built on a real server and opened in
headless Chromium: every expected chart is drawn (a non-empty SVG, as many as each finding's
evidence gives), the page logs no error, requests nothing but its own file, needs no script
(the browser runs it with scripts off), and prints on A4."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium, open_page
from tests.checks.test_qa102_dead_entry_bloated_partial_index import churn_partial_index
from tests.checks.test_qa401_round_robin_walks_backlog import (
    FIFO,
    RR_BY_ID,
    build_tenant_queue,
    build_trap,
)
from tests.checks.test_qa403_fifo_noisy_neighbour import EXAMPLE_JOBS
from tests.conftest import TestDB, flush_stats, in_ci
from tests.helpers import build_archive_queue, qadvisor
from tests.prove.test_prove_seeds import build_forced_generic_claims

pytestmark = pytest.mark.skipif(
    chromium() is None and not in_ci(),
    reason="chromium is not installed (apt-get install chromium; .ci/run installs it)",
)

# Per finding of the page: its code, its severity, and per chart its title and whether its
# SVG draws something (a bar wider than nothing, a line with a segment).
CHARTS = """
JSON.stringify([...document.querySelectorAll('article.finding')].map(a => ({
  code: a.dataset.code,
  charts: [...a.querySelectorAll('figure.chart svg')].map(s => {
    const box = s.getBBox();
    const bars = [...s.querySelectorAll('.series rect')].filter(r => r.getBBox().width > 0);
    const lines = [...s.querySelectorAll('.series path')]
      .filter(p => /L/.test(p.getAttribute('d')));
    return {title: s.querySelector('title').textContent, width: box.width, height: box.height,
            drawn: bars.length + lines.length};
  }),
})))
"""


def page(tmp_path: Path, db: TestDB, *args: str) -> Path:
    out = tmp_path / "page.html"
    run = qadvisor("check", db.dsn, "--format", "html", "--output", f"json:{tmp_path / 'r.json'}",
                   *args)  # fmt: skip
    assert run.rc in (0, 1) and run.stdout.startswith("<!DOCTYPE html>"), run.stderr
    out.write_text(run.stdout)
    return out


def opened(path: Path) -> dict[str, list[dict[str, Any]]]:
    """What Chromium drew of the page, by finding code, after checking that the page behaved."""
    with open_page(path) as p:
        assert p.requests == [p.url], p.requests  # nothing outside the file
        assert p.errors == [], p.errors
        findings = json.loads(p.evaluate(CHARTS))
        pdf = p.pdf()
    sizes = set(re.findall(rb"/MediaBox \[0 0 ([\d.]+) ([\d.]+)\]", pdf))
    assert {(round(float(w)), round(float(h))) for w, h in sizes} == {(595, 842)}  # A4, points
    assert b"<script" not in path.read_bytes()
    by_code: dict[str, list[dict[str, Any]]] = {}
    for f in findings:
        by_code.setdefault(f["code"], []).extend(f["charts"])
    for charts in by_code.values():
        for c in charts:
            assert c["width"] > 100 and c["height"] > 20 and c["drawn"] >= 1, c
    return by_code


def titles(charts: list[dict[str, Any]]) -> list[str]:
    return [c["title"] for c in charts]


def test_the_archive_queue_page_draws_index_size_vacuum_trigger_and_archive(
    db: TestDB, tmp_path: Path
) -> None:
    build_archive_queue(db)
    drawn = opened(page(tmp_path, db))
    assert titles(drawn["QA101"]) == ["Index size against what the live set needs"]
    assert titles(drawn["QA201"]) == ["Dead tuples against the vacuum trigger"]
    assert titles(drawn["QA204"]) == [
        "Rows outside the live set against the live set",
        "Age of the oldest row against the retention",
    ]


def test_with_history_the_archive_queue_page_draws_its_figures_over_time(
    db: TestDB, tmp_path: Path
) -> None:
    build_archive_queue(db)
    history = tmp_path / "history"
    for _ in range(2):
        qadvisor("check", db.dsn, "--history", str(history), "--format", "json")
        db.execute("UPDATE jobs SET status = 'pending' WHERE status = 'pending'")
        with db.connect() as conn:
            flush_stats(conn)
    drawn = opened(page(tmp_path, db, "--history", str(history)))
    assert "Dead tuples over time" in titles(drawn["QA201"])
    assert "Table rows over time" in titles(drawn["QA204"])
    assert "Index size over time" in titles(drawn["QA101"])


def test_the_churned_partial_index_page_draws_its_size_against_a_fresh_build(
    db: TestDB, tmp_path: Path
) -> None:
    build_archive_queue(db, archive=50_000, composite=False, partial=True,
                        reloptions="autovacuum_enabled = false")  # fmt: skip
    churn_partial_index(db, rounds=40, batch=5_000)
    db.execute("ANALYZE jobs")
    drawn = opened(page(tmp_path, db))
    assert titles(drawn["QA102"]) == ["Index size against what the live set needs"]


def test_the_generic_plan_page_draws_both_plans_and_their_costs(db: TestDB, tmp_path: Path) -> None:
    build_forced_generic_claims(db)
    drawn = opened(page(tmp_path, db))
    assert titles(drawn["QA301"]) == [
        "Plan cost: generic against custom",
        "Plan shape: generic plan",
        "Plan shape: custom plan",
    ]


def test_the_round_robin_trap_page_draws_the_plan_and_the_idle_rotation(
    db: TestDB, tmp_path: Path
) -> None:
    build_trap(db)
    drawn = opened(page(tmp_path, db, "--query", RR_BY_ID))
    assert titles(drawn["QA401"]) == ["Plan shape: custom plan"]
    assert titles(drawn["QA402"]) == ["Tenants in the rotation"]


def test_the_noisy_neighbour_page_draws_the_tenants_shares(db: TestDB, tmp_path: Path) -> None:
    build_tenant_queue(db, EXAMPLE_JOBS, tenant_index=None)
    drawn = opened(page(tmp_path, db, "--query", FIFO))
    assert titles(drawn["QA403"]) == ["Live rows by tenant"]


def test_the_proven_page_draws_the_proofs_before_and_after(db: TestDB, tmp_path: Path) -> None:
    build_archive_queue(db)
    drawn = opened(page(tmp_path, db, "--prove", "--ignore", "QA201"))
    assert "Proof: index bytes" in titles(drawn["QA101"])


def test_the_browser_sees_a_request_outside_the_file_and_a_console_error(tmp_path: Path) -> None:
    # What the page tests rely on: a page that fetches and logs is caught doing so.
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
        "<script>console.error('from the page')</script></body></html>"
    )
    with open_page(bad, scripts=True) as p:
        assert "http://127.0.0.1:9/x.png" in p.requests
        assert any("from the page" in e for e in p.errors), p.errors
    with open_page(bad) as p:  # scripts off, as the incident page is opened
        assert not any("from the page" in e for e in p.errors), p.errors
