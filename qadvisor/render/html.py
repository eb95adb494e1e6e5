"""The incident page: one self-contained HTML file to attach to an incident, with a picture of
each finding's evidence.

Self-contained: its style and its charts (inline SVG) are in the file; it holds no script and
loads nothing (no font, image, stylesheet or link it fetches), so it reads the same offline,
in a mail client's preview and printed. It prints on A4 (a chart is never cut between pages).
Everything that comes from the database or from a check is escaped. The order is the markdown
report's: what could not be judged before any finding, the findings by severity with their
pictures, evidence in human words and units, fix and proof, then the checks that judged each
queue and found nothing; the all-clear only when it was earned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from html import escape
from typing import TextIO

from qadvisor import __version__
from qadvisor.model import Finding, FixStep, FleetReport, Report, Severity
from qadvisor.render.labels import human_evidence, labels_of
from qadvisor.render.pictures import pictures
from qadvisor.render.proof import proof_lines
from qadvisor.render.steps import step_heading
from qadvisor.render.values import first_sentence
from qadvisor.render.verdict import (
    ALL_CLEAR,
    baseline_note,
    checks_run_note,
    discovery_gaps,
    fleet_summary,
    fleet_verdict,
    ignored_lines,
    not_judged_lines,
    passed,
    quiet_skips,
    verdict,
    without_queues,
)
from qadvisor.sql.printing import predicate_sql

_NOTHING_TO_RUN = "nothing to run: read the notes"
_SAFETY = {
    "safe": "safe: can run as printed on a live system",
    "review": "review: read the notes before running it",
}

CSP = "default-src 'none'; style-src 'unsafe-inline'"
STYLE = """
:root { --critical: #a50026; --warning: #b35806; --info: #2166ac; --muted: #555; }
* { box-sizing: border-box; }
body { font: 14px/1.45 "DejaVu Sans", Helvetica, Arial, sans-serif; color: #111;
       max-width: 60rem; margin: 1.5rem auto; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin: 0 0 .5rem; }
h2 { font-size: 1.2rem; border-bottom: 1px solid #ccc; margin-top: 1.8rem; }
h3 { font-size: 1.05rem; margin: 0 0 .4rem; }
h4 { font-size: .95rem; margin: 1rem 0 .3rem; }
table { border-collapse: collapse; margin: .4rem 0 .8rem; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: .2rem .5rem;
         border-bottom: 1px solid #e3e3e3; }
th { background: #f3f3f3; }
code, pre { font: 12.5px/1.4 "DejaVu Sans Mono", Menlo, Consolas, monospace; }
pre { background: #f6f6f6; border: 1px solid #e0e0e0; padding: .5rem; white-space: pre-wrap;
      overflow-wrap: anywhere; }
.meta { color: var(--muted); margin: 0 0 .8rem; padding-left: 1.1rem; }
.summary { font-size: 1.05rem; }
.finding { border: 1px solid #d0d0d0; border-left: 6px solid var(--info); padding: .8rem 1rem;
           margin: 1rem 0; }
.finding.critical { border-left-color: var(--critical); }
.finding.warning { border-left-color: var(--warning); }
.badge { display: inline-block; font-size: .8rem; padding: 0 .4rem; border-radius: 3px;
         color: #fff; background: var(--info); margin-right: .3rem; }
.badge.critical { background: var(--critical); }
.badge.warning { background: var(--warning); }
.pictures { display: block; }
figure.chart { margin: .6rem 0; break-inside: avoid; page-break-inside: avoid; }
figure.chart svg { width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: .85rem; }
figcaption strong { color: #111; }
.explanation { font-style: italic; }
.notjudged { border-left: 6px solid var(--warning); padding: .3rem .8rem; background: #fff8ef; }
.closing { font-weight: bold; }
.empty { color: var(--muted); }
@page { size: A4; margin: 14mm; }
@media print {
  body { max-width: none; margin: 0; padding: 0; font-size: 11pt; }
  .finding { break-inside: auto; }
  h2, h3, h4 { break-after: avoid; page-break-after: avoid; }
}
"""


def render(report: Report) -> str:
    snap = report.snapshot
    s = report.summary()
    where = f"{snap.server.database} on PostgreSQL {snap.server.version}"
    counts = f"{s['critical']} critical, {s['warning']} warning, {s['info']} info"
    return _page(f"qadvisor: {where}: {counts}", _body(report))


def _page(title: str, body: list[str]) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        # The page fetches nothing and runs nothing, and says so to the browser: a fetch or a
        # script slipped in by a future change is refused (and shows as a console error).
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_t(title)}</title>",
        f"<style>{STYLE}</style>",
        "</head>",
        "<body>",
        *body,
    ]
    out += [f"<footer><p><em>Report by qadvisor {_t(__version__)}.</em></p></footer>",
            "</body>", "</html>"]  # fmt: skip
    return "\n".join(out) + "\n"


def _body(report: Report, database: str | None = None) -> list[str]:
    """The report's part of a page, from its heading to its closing line; ``database`` (a
    fleet's label for it) is named in every finding."""
    snap = report.snapshot
    s = report.summary()
    where = f"{snap.server.database} on PostgreSQL {snap.server.version}"
    standby = " (a standby)" if snap.server.is_standby else ""
    counts = f"{s['critical']} critical, {s['warning']} warning, {s['info']} info"
    out = [
        f"<h1>qadvisor report: {_t(where)}{_t(standby)}</h1>",
        *_header(report),
        f'<p class="summary"><strong>Summary:</strong> {_t(counts)} '
        f"({_t(checks_run_note(report))}; {len(report.skipped)} "
        f"skip{'' if len(report.skipped) == 1 else 's'}).</p>",
    ]
    note = baseline_note(report)
    if note:
        out.append(f"<p><strong>Baseline:</strong> {_t(note.removeprefix('baseline '))}.</p>")
    new = [replace(f, database=database) for f in report.new_findings]
    out += _summary_table(new)
    out += _queues(report)
    out += _not_judged(report)
    for sev in sorted(Severity, reverse=True):
        group = [f for f in new if f.severity == sev]
        if group:
            out.append(f'<h2 id="{sev.label}">{sev.label.capitalize()} ({len(group)})</h2>')
            for f in group:
                out += _finding(f, report)
    out += _baselined(report)
    if report.ignored:
        out += ["<h2>Ignored in the SQL files</h2>", "<ul>"]
        out += [f"<li>{_t(line)}</li>" for line in ignored_lines(report)]
        out.append("</ul>")
    closing = verdict(report)
    if not report.findings:
        out += [
            "<h2>Findings</h2>",
            f"<p>{_t(closing if closing == ALL_CLEAR else 'No finding.')}</p>",
        ]
    out += _passed(report)
    if closing and closing != ALL_CLEAR:
        out.append(f'<p class="closing">{_t(closing)}</p>')
    return out


def _t(text: object) -> str:
    return escape(str(text), quote=True)


def _header(report: Report) -> list[str]:
    snap = report.snapshot
    items = [f"<li><strong>Database:</strong> <code>{_t(snap.server.database)}</code> on "
             f"PostgreSQL {_t(snap.server.version)}</li>"]  # fmt: skip
    if snap.server.collected_at:
        items.append(f"<li><strong>Collected at:</strong> {_t(snap.server.collected_at)} "
                     "(the server's clock; chart times are UTC)</li>")  # fmt: skip
    if report.checked_at:
        items.append(f"<li><strong>Checked at:</strong> {_t(report.checked_at)}</li>")
    items.append(f"<li><strong>qadvisor:</strong> {_t(__version__)}</li>")
    if report.command:
        items.append(f"<li><strong>Command:</strong> <code>{_t(report.command)}</code></li>")
    history = snap.history
    if history is not None:
        items.append(f"<li><strong>History:</strong> {_t(history.summary())}</li>")
    return ['<ul class="meta">', *items, "</ul>"]


def _summary_table(findings: Sequence[Finding]) -> list[str]:
    if not findings:
        return []
    out = ["<table>", "<tr><th>severity</th><th>code</th><th>object</th><th>finding</th></tr>"]
    for f in sorted(findings, key=lambda f: -f.rating):
        out.append(
            f'<tr><td><span class="badge {f.rating.label}">{f.rating.label}</span></td>'
            f'<td><a href="#{_anchor(f)}">{_t(f.code)}</a></td>'
            f"<td><code>{_t(_object(f))}</code></td>"
            f"<td>{_t(first_sentence(f.message))}</td></tr>"
        )
    return [*out, "</table>"]


def _object(f: Finding) -> str:
    """The finding's object, after its database in a fleet's page."""
    return f"{f.database}/{f.target.key_part}" if f.database is not None else f.target.key_part


def _anchor(f: Finding) -> str:
    return "f-" + "".join(c if c.isalnum() else "-" for c in f.key)


def _queues(report: Report) -> list[str]:
    snap = report.snapshot
    out = ["<h2>Queue tables</h2>"]
    if not snap.queues:
        out.append(
            "<p>No queue tables found: no table has a status-like column together with a "
            "partial index on it, row-locking statements in pg_stat_statements, or waiting "
            "and finished status values. Name them with <code>--table schema.name</code>.</p>"
        )
        gaps = discovery_gaps(report)
        if gaps:
            out += ["<ul>", *(f"<li>{_t(g.reason)}</li>" for g in gaps), "</ul>"]
        return out
    out += ["<table>", "<tr><th>table</th><th>live predicate</th><th>reason</th></tr>"]
    for q in snap.queues:
        live = f"<code>{_t(predicate_sql(q.live))}</code>" if q.live else "unknown"
        out.append(f"<tr><td><code>{_t(q.qualified)}</code></td><td>{live}</td>"
                   f"<td>{_t(q.reason)}</td></tr>")  # fmt: skip
    return [*out, "</table>"]


def _not_judged(report: Report) -> list[str]:
    if not report.skipped:
        return []
    out = ['<h2 id="not-judged">Not judged</h2>', '<div class="notjudged">']
    out += [f"<p>{_t(line)}.</p>" for line in not_judged_lines(report)]
    out += ["<ul>", *(f"<li><strong>{_t(s.code)}</strong>: {_t(s.reason)}</li>"
                      for s in report.skipped), "</ul>"]  # fmt: skip
    grants = report.grants()
    if grants:
        out += ["<p>GRANTs that would show what was hidden from this role:</p>",
                f"<pre>{_t(chr(10).join(grants))}</pre>"]  # fmt: skip
    return [*out, "</div>"]


def _finding(f: Finding, report: Report) -> list[str]:
    sev = f.rating.label
    out = [
        f'<article class="finding {sev}" id="{_anchor(f)}" data-code="{_t(f.code)}">',
        f'<h3><span class="badge {sev}">{sev}</span>{_t(f.code)} {_t(f.name)}: '
        f"<code>{_t(_object(f))}</code></h3>",
        f"<p>{_t(f.message)}</p>",
    ]
    if f.explanation:
        out.append(f'<p class="explanation">{_t(f.explanation)}</p>')
    drawn = pictures(f, report)
    if drawn:
        from qadvisor.render.charts import svg

        out.append('<div class="pictures">')
        for p in drawn:
            caption = f"<strong>{_t(p.title)}</strong>" + (
                f": {_t(p.caption)}" if p.caption else ""
            )
            out.append(f'<figure class="chart"><figcaption>{caption}</figcaption>{svg(p)}</figure>')
        out.append("</div>")
    out += _evidence(f, report)
    if f.fix:
        safety = (
            _SAFETY.get(f.fix.safety, f.fix.safety)
            if f.fix.steps
            else "nothing to run: read the notes"
        )
        out.append(f"<h4>Fix ({_t(safety)})</h4>")
        for step in f.fix.steps:
            out += _step(step)
        if f.fix.notes:
            out.append(f"<p>{_t(f.fix.notes)}</p>")
    if f.proof is not None:
        lines = proof_lines(f.proof)
        out += [f"<h4>Proof</h4><p>{_t(lines[0])}</p>"]
        if len(lines) > 1:
            out += ["<ul>", *(f"<li>{_t(line)}</li>" for line in lines[1:]), "</ul>"]
    if f.docs:
        href = f"{report.docs_url.rstrip('/')}/{f.docs}" if report.docs_url else None
        doc = f'<a href="{_t(href)}">{_t(f.docs)}</a>' if href else f"<code>{_t(f.docs)}</code>"
        out.append(f"<p>Docs: {doc} (<code>qadvisor explain {_t(f.code)}</code>)</p>")
    return [*out, "</article>"]


def _evidence(f: Finding, report: Report) -> list[str]:
    ev = human_evidence(f.evidence, labels_of(report, f.code))
    out: list[str] = []
    if ev.facts:
        out += ["<h4>Evidence</h4>", "<table>"]
        out += [f"<tr><th>{_t(line.label)}</th><td>{_t(line.text)}</td></tr>" for line in ev.facts]
        out.append("</table>")
    if ev.thresholds:
        out += ["<p>Flagged because (the check's thresholds):</p>", "<table>"]
        out += [f"<tr><th>{_t(line.label)}</th><td>{_t(line.text)}</td></tr>"
                for line in ev.thresholds]  # fmt: skip
        out.append("</table>")
    for line in ev.blocks:
        out += [f"<p>{_t(line.label)}:</p>", f"<pre>{_t(line.text)}</pre>"]
    return out


def _step(step: FixStep) -> list[str]:
    heading = step_heading(step)
    out = [f"<p><em>{_t(heading[:1].upper() + heading[1:])}</em></p>"]
    if step.kind == "rewrite":
        if step.before is not None:
            out += ["<p>Before:</p>", f"<pre>{_t(step.before)}</pre>"]
        out += ["<p>After:</p>", f"<pre>{_t(step.sql)}</pre>"]
    else:
        out.append(f"<pre>{_t(step.sql)}</pre>")
    if step.note:
        out.append(f"<p>{_t(step.note)}</p>")
    return out


def _baselined(report: Report) -> list[str]:
    b = report.baseline
    if b is None:
        return []
    out: list[str] = []
    old = [f for f in report.findings if report.baseline_state(f) == "preexisting"]
    if old:
        out += [f"<h2>Preexisting ({len(old)}, in the baseline)</h2>", "<table>",
                "<tr><th>severity</th><th>finding</th><th>message</th></tr>"]  # fmt: skip
        out += [f"<tr><td>{f.rating.label}</td><td><code>{_t(f.key)}</code></td>"
                f"<td>{_t(f.message)}</td></tr>" for f in old]  # fmt: skip
        out.append("</table>")
    if b.fixed:
        out += [f"<h2>Fixed since the baseline ({len(b.fixed)})</h2>", "<ul>"]
        out += [f"<li><code>{_t(e.key)}</code> ({e.severity.label}, {_t(e.name)})</li>"
                for e in b.fixed]  # fmt: skip
        out.append("</ul>")
    if b.not_judged:
        keys = ", ".join(f"<code>{_t(e.key)}</code>" for e in b.not_judged)
        out.append(f"<p>In the baseline but not judged in this run (not called fixed): {keys}.</p>")
    return out


def _passed(report: Report) -> list[str]:
    """The checks that judged each queue and found nothing: what the page vouches for."""
    rows = [(q, codes) for q, codes in passed(report) if codes]
    if not rows:
        return []
    out = ['<h2 id="passed">Checks that judged each queue and found nothing</h2>', "<table>",
           "<tr><th>queue table</th><th>checks</th></tr>"]  # fmt: skip
    out += [f"<tr><td><code>{_t(q)}</code></td><td>{_t(', '.join(codes))}</td></tr>"
            for q, codes in rows]  # fmt: skip
    return [*out, "</table>"]


def render_fleet(fleet: FleetReport) -> str:
    """A fleet's page: its summary, the databases that could not be judged with why, a row
    per database, then each database that has a queue, a finding or a skip as its own
    section (its headings one level down, its anchors its own)."""
    body = [
        "<h1>qadvisor fleet report</h1>",
        '<ul class="meta">',
        f"<li><strong>Fleet:</strong> <code>{_t(fleet.source)}</code>, {fleet.jobs} at once</li>",
    ]
    if fleet.checked_at:
        body.append(f"<li><strong>Checked at:</strong> {_t(fleet.checked_at)}</li>")
    body.append(f"<li><strong>qadvisor:</strong> {_t(__version__)}</li>")
    if fleet.command:
        body.append(f"<li><strong>Command:</strong> <code>{_t(fleet.command)}</code></li>")
    body += [
        "</ul>",
        f'<p class="summary"><strong>Summary:</strong> {_t(fleet_summary(fleet))}.</p>',
    ]
    if fleet.not_judged:
        body += [f'<h2 id="databases-not-judged">Not judged ({len(fleet.not_judged)})</h2>',
                 '<div class="notjudged">', "<ul>"]  # fmt: skip
        for m in fleet.not_judged:
            grants = f"<pre>{_t(chr(10).join(m.grants))}</pre>" if m.grants else ""
            body.append(f"<li><code>{_t(m.database)}</code>: {_t(m.reason or '')}{grants}</li>")
        body += ["</ul>", "</div>"]
    empty = without_queues(fleet)
    sections = {db: f"db-{i}" for i, (db, _) in enumerate(fleet.reports) if db not in empty}
    body += ['<h2 id="databases">Databases</h2>', "<table>",
             "<tr><th>database</th><th>queues</th><th>critical</th><th>warning</th>"
             "<th>info</th><th>skipped</th></tr>"]  # fmt: skip
    for m in fleet.members:
        name = f"<code>{_t(m.database)}</code>"
        if m.database in sections:
            name = f'<a href="#{sections[m.database]}">{name}</a>'
        if m.report is None:
            body.append(f'<tr><td>{name}</td><td colspan="5">not judged</td></tr>')
            continue
        s = m.report.summary()
        cells = (len(m.report.snapshot.queues), s["critical"], s["warning"], s["info"],
                 len(m.report.skipped))  # fmt: skip
        body.append(f"<tr><td>{name}</td>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    body.append("</table>")
    if empty:
        body.append(f"<p>No queue table found in {len(empty)} of them: "
                    f"{_t(', '.join(empty))}.</p>")  # fmt: skip
        lines = quiet_skips(fleet)
        if lines:
            body += ["<ul>", *(f"<li>{_t(line)}</li>" for line in lines), "</ul>"]
    for db, report in fleet.reports:
        if db in sections:
            body.append(f'<section id="{sections[db]}">')
            body += [_within(line, sections[db]) for line in _body(report, db)]
            body.append("</section>")
    closing = fleet_verdict(fleet)
    if closing:
        body.append(f'<p class="closing">{_t(closing)}</p>')
    return _page(f"qadvisor fleet: {fleet_summary(fleet)}", body)


# Everything from the database or a check is escaped, so a tag or an attribute in a line is
# the page's own.
_HEADING = re.compile(r"<(/?)h([1-5])\b")
_ANCHOR = re.compile(r'\b(id="|href="#)')


def _within(line: str, prefix: str) -> str:
    """A line of one database's report inside a fleet's page: its headings one level down,
    its ids and links to them its own."""
    line = _HEADING.sub(lambda m: f"<{m[1]}h{int(m[2]) + 1}", line)
    return _ANCHOR.sub(lambda m: f"{m[1]}{prefix}-", line)


def write(report: Report, out: TextIO) -> None:
    out.write(render(report))


def write_fleet(fleet: FleetReport, out: TextIO) -> None:
    out.write(render_fleet(fleet))
