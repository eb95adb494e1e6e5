"""What the incident page draws for a finding: each picture as plain data, built from the
report alone (the finding's evidence, its statement's plans and the snapshot's tenant counts),
never from the server. ``qadvisor.render.charts`` turns a picture into SVG.

A picture is one of two kinds: bars (a measured figure beside what it is compared with: an
index's size beside what the live set needs, dead tuples beside the vacuum trigger) or lines
over time (readings of ``--history`` or ``--sample``, a proof's series). Each bar and line has
a tone that says what it is (measured now, what the fix gives, a limit), so every chart reads
alike. Labels are the markdown report's words and units (``qadvisor.render.labels``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from qadvisor.derive.statement_ids import statement_id
from qadvisor.model import Finding, PlanNode, Proof, Report, Statement
from qadvisor.render.labels import label
from qadvisor.units import human_bytes, human_count

# "measured": a figure as the server has it now; "needed": what the live set needs, or what
# the fix gives; "limit": a threshold the figure is held against; "before"/"after": a proof.
Tone = Literal["measured", "needed", "limit", "before", "after"]
# How a chart's numbers read: sizes in bytes, counts of rows or ids, days, milliseconds.
Unit = Literal["bytes", "count", "days", "ms"]


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    tone: Tone = "measured"
    # The smallest and largest of repeated measurements, drawn as a whisker; None: one value.
    spread: tuple[float, float] | None = None


@dataclass(frozen=True)
class Bars:
    title: str
    unit: Unit
    bars: tuple[Bar, ...]
    caption: str = ""


@dataclass(frozen=True)
class Line:
    name: str
    # (moment, value): a time, or seconds from the series' start (a proof's run).
    points: tuple[tuple[datetime | float, float], ...]
    tone: Tone = "measured"
    dashed: bool = False


@dataclass(frozen=True)
class Lines:
    title: str
    unit: Unit
    lines: tuple[Line, ...]
    caption: str = ""


Picture = Bars | Lines


@dataclass(frozen=True)
class TrendPoint:
    """One reading of a series over time: dead tuples and the vacuum trigger then."""

    at: datetime | float
    dead_tuples: float
    trigger: float | None = None


def figure(value: float, unit: Unit) -> str:
    """A number in a chart's unit, as the labels write it."""
    if unit == "bytes":
        return human_bytes(value)
    if unit == "days":
        return f"{value:,.1f} days"
    if unit == "ms":
        return f"{value:,.3g} ms"
    return human_count(value)


def _bar(name: str, value: object, unit: Unit, tone: Tone = "measured") -> Bar | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return Bar(f"{name}: {figure(float(value), unit)}", float(value), tone)


def _bars(title: str, unit: Unit, *bars: Bar | None, caption: str = "") -> tuple[Bars, ...]:
    """A bar chart of the bars that were measured; none when fewer than two were (a bar
    alone compares with nothing)."""
    kept = tuple(b for b in bars if b is not None)
    return (Bars(title, unit, kept, caption),) if len(kept) >= 2 else ()


def _moment(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def series(evidence: Mapping[str, Any], field: str, *values: str) -> list[dict[str, Any]]:
    """The readings of an evidence series (``<name>_series``: a list of objects with ``at``
    and figures), each with its moment parsed; readings that lack one of ``values`` are left
    out."""
    out = []
    for point in evidence.get(field) or ():
        at = _moment(point.get("at")) if isinstance(point, dict) else None
        if at is None or not all(isinstance(point.get(v), int | float) for v in values):
            continue
        out.append({**point, "at": at})
    return out


def _over_time(
    title: str, unit: Unit, readings: Sequence[Mapping[str, Any]], *lines: tuple[str, str, Tone]
) -> tuple[Lines, ...]:
    """Lines of readings (``lines``: the field, its name, its tone); none for fewer than two
    readings."""
    if len(readings) < 2:
        return ()
    drawn = tuple(
        Line(name, tuple((r["at"], float(r[field])) for r in readings), tone, tone == "limit")
        for field, name, tone in lines
        if all(isinstance(r.get(field), int | float) for r in readings)
    )
    return (Lines(title, unit, drawn, _interval(readings)),) if drawn else ()


def _interval(readings: Sequence[Mapping[str, Any]]) -> str:
    first, last = readings[0]["at"], readings[-1]["at"]
    return f"{len(readings)} readings from {first:%Y-%m-%d %H:%M:%S} to {last:%Y-%m-%d %H:%M:%S}"


# --- per check ------------------------------------------------------------------------


def _index_size(f: Finding, report: Report) -> tuple[Picture, ...]:
    ev = f.evidence
    needed = ev.get("estimated_partial_bytes", ev.get("estimated_fresh_bytes"))
    what = "partial index on the live set" if "estimated_partial_bytes" in ev else "rebuilt"
    out: tuple[Picture, ...] = _bars(
        "Index size against what the live set needs",
        "bytes",
        _bar("index now", ev.get("index_bytes"), "bytes"),
        _bar(what, needed, "bytes", "needed"),
        caption=f"{label('index_bytes')} and {label('estimated_partial_bytes').lower()}"
        if "estimated_partial_bytes" in ev
        else f"{label('index_bytes')} and {label('estimated_fresh_bytes').lower()}",
    )
    readings = series(ev, "index_bytes_series", "index_bytes")
    return out + _over_time(
        "Index size over time", "bytes", readings, ("index_bytes", "index size", "measured")
    )


def _vacuum(f: Finding, report: Report) -> tuple[Picture, ...]:
    ev = f.evidence
    out: tuple[Picture, ...] = _bars(
        "Dead tuples against the vacuum trigger",
        "count",
        _bar("dead tuples now", ev.get("n_dead_tup"), "count"),
        _bar("trigger now", ev.get("vacuum_trigger"), "count", "limit"),
        _bar("trigger the fix sets", ev.get("proposed_vacuum_trigger"), "count", "needed"),
        _bar("live rows", ev.get("live_rows"), "count", "needed"),
        caption="Autovacuum runs once the dead tuples pass the trigger.",
    )
    readings = series(ev, "dead_tuples_series", "dead_tuples")
    points = tuple(
        TrendPoint(r["at"], float(r["dead_tuples"]), _number(r.get("vacuum_trigger")))
        for r in readings
    )
    proposed = _number(ev.get("proposed_vacuum_trigger"))
    return out + trend(
        "Dead tuples over time", points, proposed, _interval(readings) if readings else ""
    )


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def trend(
    title: str, points: Sequence[TrendPoint], proposed: float | None, caption: str
) -> tuple[Lines, ...]:
    """Dead tuples over time against the trigger then and the trigger the fix sets: QA201's
    readings over ``--history`` or ``--sample``, and a proof's series."""
    if len(points) < 2:
        return ()
    lines = [Line("dead tuples", tuple((p.at, p.dead_tuples) for p in points))]
    if all(p.trigger is not None for p in points):
        trig = tuple((p.at, float(p.trigger or 0)) for p in points)
        lines.append(Line("vacuum trigger", trig, "limit", dashed=True))
    if proposed is not None:
        ends = (points[0].at, points[-1].at)
        lines.append(Line("trigger the fix sets", tuple((t, proposed) for t in ends), "needed",
                          dashed=True))  # fmt: skip
    return (Lines(title, "count", tuple(lines), caption),)


def _archive(f: Finding, report: Report) -> tuple[Picture, ...]:
    ev = f.evidence
    table, archive = _number(ev.get("table_rows")), _number(ev.get("archive_rows"))
    live = table - archive if table is not None and archive is not None else None
    out: tuple[Picture, ...] = _bars(
        "Rows outside the live set against the live set",
        "count",
        _bar(label("archive_rows").lower(), archive, "count"),
        _bar("live set", live, "count", "needed"),
    )
    out += _bars(
        "Age of the oldest row against the retention",
        "days",
        _bar("oldest row", ev.get("oldest_row_age_days"), "days"),
        _bar("retention threshold", ev.get("max_age_days"), "days", "limit"),
        caption=f"dated by {ev.get('dated_by')}" if ev.get("dated_by") else "",
    )
    readings = series(ev, "table_rows_series", "table_rows")
    return out + _over_time(
        "Table rows over time", "count", readings, ("table_rows", "table rows", "measured")
    )


def _runway(f: Finding, report: Report) -> tuple[Picture, ...]:
    ev = f.evidence
    out: tuple[Picture, ...] = _bars(
        "Ids used against the range",
        "count",
        _bar("ids used", ev.get("ids_used"), "count"),
        _bar("largest id", ev.get("id_limit"), "count", "limit"),
    )
    readings = series(ev, "ids_used_series", "ids_used")
    now = _moment(report.snapshot.server.collected_at)
    used, limit, days = (_number(ev.get(k)) for k in ("ids_used", "id_limit", "days_left"))
    if now is not None and used is not None and limit is not None:
        readings = [*(r for r in readings if r["at"] < now), {"at": now, "ids_used": used}]
    if now is None or used is None or limit is None or days is None:
        return out + _over_time(
            "Ids used over time", "count", readings, ("ids_used", "ids used", "measured")
        )
    end = now + timedelta(days=days)
    lines = (
        Line("ids used", tuple((r["at"], float(r["ids_used"])) for r in readings)),
        Line("at the measured rate", ((now, used), (end, limit)), "measured", dashed=True),
        Line("largest id", ((readings[0]["at"], limit), (end, limit)), "limit", dashed=True),
    )
    return (
        *out,
        Lines("Runway at the measured rate", "count", lines, str(ev.get("rate_from", ""))),
    )


def _tenants(f: Finding, report: Report) -> tuple[Picture, ...]:
    ev = f.evidence
    if f.code == "QA402":
        rows = _number(ev.get("rotation_rows"))
        idle = _number(ev.get("idle_tenants"))
        return _bars(
            "Tenants in the rotation",
            "count",
            _bar("idle", idle, "count"),
            _bar("with work", ev.get("active_tenants"), "count", "needed"),
            caption=f"{label('rotation_rows')}: {figure(rows, 'count')}" if rows else "",
        )
    facts = next(
        (t for t in report.snapshot.tenants
         if t.schema == f.target.schema and t.table == f.target.table),
        None,
    )  # fmt: skip
    counts = list(facts.live_by_tenant) if facts else []
    if len(counts) < 2:
        return _bars(
            "Largest tenant's share of the backlog",
            "count",
            _bar(f"tenant {ev.get('top_tenant')}", ev.get("top_tenant_rows"), "count"),
            _bar("every tenant", ev.get("live_rows"), "count", "needed"),
        )
    shown, rest = counts[:8], counts[8:]
    bars = [Bar(f"{c.tenant}: {figure(c.rows, 'count')}", c.rows) for c in shown]
    if rest:
        others = sum(c.rows for c in rest)
        bars.append(Bar(f"{len(rest)} others: {figure(others, 'count')}", others, "needed"))
    cap = "" if facts is None or facts.counts_complete else "counts capped per tenant (at least)"
    return (Bars("Live rows by tenant", "count", tuple(bars), cap),)


def _statement(f: Finding, report: Report) -> tuple[Picture, ...]:
    ev = f.evidence
    read = _number(ev.get("rows_read", ev.get("analyzed_rows_read")))
    ratio = _number(ev.get("rows_read_per_row_returned"))
    returned = _number(ev.get("limit")) or (read / ratio if read and ratio else None)
    out: tuple[Picture, ...] = _bars(
        "Rows read against rows returned",
        "count",
        _bar("rows read", read, "count"),
        _bar("rows returned", returned, "count", "needed"),
    )
    out += _bars(
        "Plan cost: generic against custom",
        "count",
        _bar("generic plan", ev.get("generic_plan_cost"), "count"),
        _bar("custom plan", ev.get("custom_plan_cost"), "count", "needed"),
    )
    stmt = _statement_of(f, report)
    if stmt is None:
        return out
    for name, plan in (("generic plan", stmt.generic_plan), ("custom plan", stmt.custom_plan),
                       ("EXPLAIN ANALYZE", stmt.analyzed_plan)):  # fmt: skip
        if plan is not None and (name != "generic plan" or "generic_plan" in ev):
            out += plan_shape(name, plan)
    return out


def _statement_of(f: Finding, report: Report) -> Statement | None:
    if f.statement_id is None:
        return None
    return next(
        (s for s in (*report.snapshot.statements, *report.snapshot.maintenance)
         if statement_id(s) == f.statement_id),
        None,
    )  # fmt: skip


def plan_shape(name: str, plan: PlanNode) -> tuple[Bars, ...]:
    """Each node of a plan as a bar of the rows it yields (actual rows with --analyze,
    else the planner's estimate), indented by depth: where rows are read and where few
    are returned."""
    bars: list[Bar] = []

    def walk(node: PlanNode, depth: int) -> None:
        actual = node.actual_rows is not None
        rows = (node.actual_rows or 0) * (node.actual_loops or 1) if actual else node.plan_rows
        what = _node(node)
        tone: Tone = "measured" if node.children else "limit"
        bars.append(Bar(f"{'· ' * depth}{what}: {figure(rows, 'count')}", rows, tone))
        for child in node.children:
            walk(child, depth + 1)

    walk(plan, 0)
    if len(bars) > 12:
        bars = bars[:12]
    rows_of = "actual rows" if plan.actual_rows is not None else "estimated rows"
    return (Bars(f"Plan shape: {name}", "count", tuple(bars), f"{rows_of} per plan node"),)


def _node(node: PlanNode) -> str:
    """A plan node as a short label: its type, and the index or table it reads."""
    text = node.node_type
    if node.index is not None:
        text += f" using {node.index}"
    elif node.relation is not None:
        text += f" on {node.relation}"
    return text if len(text) <= 48 else text[:47] + "…"


def proof_pictures(proof: Proof) -> tuple[Picture, ...]:
    """A proof's before and after of each figure measured on both sides, with the spread of
    its repeated runs (lowest to highest) where it has one; and a vacuum proof's series: both
    copies' dead tuples from the same start against each copy's trigger, and the claim's time
    over the same run."""
    out: list[Picture] = []
    for m in proof.measures:
        if m.before is None or m.after is None:
            continue
        unit: Unit = (
            "bytes" if "bytes" in m.measure else "ms" if m.measure.endswith(" ms") else "count"
        )
        sides: tuple[tuple[Tone, float, tuple[float, float] | None], ...] = (
            ("before", m.before, m.before_spread),
            ("after", m.after, m.after_spread),
        )
        bars = tuple(Bar(f"{side}: {figure(v, unit)}", v, side, spread)
                     for side, v, spread in sides)  # fmt: skip
        out.append(Bars(f"Proof: {m.measure}", unit, bars, m.subject))
    return (*out, *_proof_series(proof))


def _proof_series(proof: Proof) -> tuple[Lines, ...]:
    """The copies of a vacuum proof driven alike: "without the fix" in the before tone, "with
    the fix" in the after tone, each against its own trigger (dashed)."""
    runs = [s for s in proof.series if len(s.points) >= 2]
    if not runs:
        return ()
    tone: dict[str, Tone] = {"without the fix": "before", "with the fix": "after"}
    dead: list[Line] = []
    for s in runs:
        t = tone.get(s.copy, "measured")
        readings = tuple((p.seconds, float(p.dead_tuples)) for p in s.points)
        dead.append(Line(f"dead tuples, {s.copy}", readings, t))
        ends = (s.points[0].seconds, s.points[-1].seconds)
        dead.append(Line(f"trigger, {s.copy}", tuple((x, s.trigger) for x in ends), t,
                         dashed=True))  # fmt: skip
    rate = max(s.dead_per_s for s in runs)
    driven = f"seconds from the start, {rate:,.0f} dead tuples/s driven on each copy"
    out = [
        Lines("Proof: dead tuples over the run, from the same start", "count", tuple(dead), driven)
    ]
    timed = []
    for s in runs:
        points = tuple((p.seconds, p.claim_ms) for p in s.points if p.claim_ms is not None)
        if len(points) >= 2:
            timed.append(Line(f"claim, {s.copy}", points, tone.get(s.copy, "measured")))
    if timed:
        out.append(Lines("Proof: the claim's time over the run", "ms", tuple(timed),
                         "seconds from the start"))  # fmt: skip
    return tuple(out)


# Which pictures each built-in check's findings get; a code not here gets none (its evidence
# is still in the table beside it).
PICTURES: Mapping[str, Callable[[Finding, Report], tuple[Picture, ...]]] = {
    "QA101": _index_size,
    "QA102": _index_size,
    "QA201": _vacuum,
    "QA204": _archive,
    "QA206": _runway,
    "QA301": _statement,
    "QA303": _statement,
    "QA304": _statement,
    "QA401": _statement,
    "QA402": _tenants,
    "QA403": _tenants,
}


def pictures(f: Finding, report: Report) -> tuple[Picture, ...]:
    """The finding's pictures: its evidence drawn, then its proof's."""
    draw = PICTURES.get(f.code)
    out = draw(f, report) if draw else ()
    if f.proof is not None:
        out += proof_pictures(f.proof)
    return out
