"""The incident page's pictures from hand-built findings (no server): which charts a finding's
evidence gives, drawn as self-contained SVG; the page's order and escaping."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from qadvisor.model import (
    Finding,
    Proof,
    ProofMeasure,
    ProofSeries,
    Report,
    SeriesPoint,
    ServerInfo,
    Severity,
    Skip,
    Target,
)
from qadvisor.render import charts, html
from qadvisor.render.pictures import (
    Bar,
    Bars,
    Line,
    Lines,
    TrendPoint,
    pictures,
    proof_pictures,
    trend,
)
from tests import snapshots as S

SVG = "{http://www.w3.org/2000/svg}"
NOW = "2026-12-07T09:00:00+00:00"


def report(*findings: Finding, skipped: tuple[Skip, ...] = ()) -> Report:
    snap = S.snapshot(S.jobs_table())
    server = ServerInfo("18.6", 180006, "app", "monitor", collected_at=NOW)
    codes = tuple(sorted({f.code for f in findings} | {"QA203"}))
    return Report(replace(snap, server=server), findings, skipped, codes)


def finding(code: str, **evidence: object) -> Finding:
    return Finding(Target("table", "public", "jobs", "jobs"), "<b>message</b>", dict(evidence),
                   severity=Severity.WARNING, code=code, name="name")  # fmt: skip


def drawn(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and root.get("viewBox", "").startswith("0 0 640 ")
    assert root.find(f"{SVG}script") is None and "http" not in svg.replace(SVG[1:-1], "")
    return root


def test_a_bar_chart_is_an_svg_with_a_bar_for_each_figure() -> None:
    chart = Bars("Index size", "bytes", (Bar("index now: 74.3 MB", 77_930_496),
                                         Bar("partial: 144.0 kB", 147_456, "needed")))  # fmt: skip
    root = drawn(charts.svg(chart))
    bars = [r for r in root.iter(f"{SVG}rect") if r.get("fill") in charts.COLOURS.values()]
    assert [r.get("fill") for r in bars] == [charts.COLOURS["needed"], charts.COLOURS["measured"]]
    widths = sorted(float(r.get("width", 0)) for r in bars)
    assert widths[1] > 100 * widths[0] > 0  # drawn to scale
    assert root.findtext(f"{SVG}title") == "Index size"


def test_a_spread_is_a_whisker_beside_its_bar() -> None:
    chart = Bars("Proof: claim ms", "ms", (Bar("before: 80 ms", 80, "before", (70, 95)),
                                           Bar("after: 0.2 ms", 0.2, "after")))  # fmt: skip
    root = drawn(charts.svg(chart))
    (whisker,) = [p for p in root.iter(f"{SVG}path") if p.get("class") == "spread"]
    assert whisker.get("d", "").count("M") == 3  # the span and its two ends


def test_readings_over_time_are_lines_and_a_proof_series_is_seconds() -> None:
    t0 = datetime(2026, 12, 7, 9, tzinfo=UTC)
    points = [TrendPoint(t0 + timedelta(seconds=5 * i), 1_000.0 * i, 80_000.0) for i in range(3)]
    (lines,) = trend("Dead tuples over time", points, 5_000.0, "3 readings")
    assert [line.name for line in lines.lines] == [
        "dead tuples", "vacuum trigger", "trigger the fix sets"]  # fmt: skip
    root = drawn(charts.svg(lines))
    paths = [p for p in root.iter(f"{SVG}path") if "L" in p.get("d", "")]
    assert len(paths) == 3
    ticks = [t.text for t in root.iter(f"{SVG}text")]
    assert "09:00:00" in ticks  # times within a day, to the second

    # A proof: each measure's spread of repeated runs as a whisker; a vacuum proof's two
    # copies, driven from the same start, each against its own trigger, and the claim timed.
    def run(copy: str, per_s: float) -> ProofSeries:
        points = tuple(
            SeriesPoint(float(t), int(t * per_s), 0, 1.0 + t / 10) for t in range(0, 40, 10)
        )
        return ProofSeries(copy, 500.0 if copy == "with the fix" else 441_090.0, 16_000.0, points)

    measure = ProofMeasure("claim ms", "claim", 80.0, 0.2, 400.0, before_spread=(70.0, 95.0))
    proof = Proof("18.6", "18.6", 1_000, 1_000, False, 10, True, True, (measure,),
                  series=(run("without the fix", 10.0), run("with the fix", 10.0)))  # fmt: skip
    bars, dead, claim = proof_pictures(proof)
    assert isinstance(bars, Bars) and bars.bars[0].spread == (70.0, 95.0)
    assert bars.bars[1].spread is None  # measured once after
    assert isinstance(dead, Lines) and dead.title.endswith("from the same start")
    names = [line.name for line in dead.lines]
    assert names == ["dead tuples, without the fix", "trigger, without the fix",
                     "dead tuples, with the fix", "trigger, with the fix"]  # fmt: skip
    assert dead.lines[0].points[-1] == (30.0, 300.0) and dead.lines[3].dashed
    assert dead.lines[0].tone == "before" and dead.lines[2].tone == "after"
    assert isinstance(claim, Lines) and claim.unit == "ms" and len(claim.lines) == 2
    assert "30 s" in [t.text for t in drawn(charts.svg(dead)).iter(f"{SVG}text")]
    # A proof with no series draws its bars alone.
    assert len(proof_pictures(Proof("18.6", "18.6", 1, 1, False, 1, True, True, (measure,)))) == 1


def test_each_check_draws_what_its_evidence_measured() -> None:
    r = report()
    qa101 = finding("QA101", index_bytes=77_930_496, estimated_partial_bytes=147_456)
    assert [p.title for p in pictures(qa101, r)] == ["Index size against what the live set needs"]
    # One figure compares with nothing: no chart.
    assert pictures(finding("QA101", index_bytes=1), r) == ()
    qa206 = finding("QA206", ids_used=1_900_000_000, id_limit=2**31 - 1, days_left=12.5,
                    rate_from="the rows inserted",
                    ids_used_series=[{"at": "2026-12-05T09:00:00+00:00", "ids_used": 1_850_000_000},
                                     {"at": NOW, "ids_used": 1_900_000_000}])  # fmt: skip
    ids, runway = pictures(qa206, r)
    assert ids.title == "Ids used against the range"
    assert isinstance(runway, Lines) and runway.title == "Runway at the measured rate"
    used, projected, limit = runway.lines
    assert len(used.points) == 2 and projected.points[-1][1] == 2**31 - 1
    assert limit.tone == "limit" and limit.dashed
    assert projected.points[-1][0] == datetime.fromisoformat(NOW) + timedelta(days=12.5)
    assert pictures(finding("QA501", rows=1), r) == ()  # no picture for that evidence


def test_the_page_says_what_was_not_judged_first_and_what_passed_last() -> None:
    skip = Skip("public.jobs: hidden", "public.jobs", code="QA203")
    page = html.render(report(finding("QA101", index_bytes=9, estimated_partial_bytes=1),
                              skipped=(skip,)))  # fmt: skip
    assert page.index("Not judged") < page.index("QA101 name") < page.index("Not an all-clear")
    assert "&lt;b&gt;message&lt;/b&gt;" in page and "<b>message" not in page
    assert "<script" not in page and "default-src 'none'" in page
    passed = html.render(report())
    assert "Checks that judged each queue and found nothing" in passed
    assert "<td><code>public.jobs</code></td><td>QA203</td>" in passed
    assert "No problems found on the queue tables." in passed


def test_readings_of_one_moment_still_draw() -> None:
    # leather's time scale refuses an empty span: the chart widens it rather than fail.
    t = datetime(2026, 12, 7, 9, tzinfo=UTC)
    for moment in (t, 0.0):
        flat = Lines("x", "count", (Line("a", ((moment, 1.0), (moment, 2.0))),))
        drawn(charts.svg(flat))
