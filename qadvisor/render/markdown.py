"""The Markdown report: for pasting into an incident review, a pull request or an issue.

GitHub-flavoured Markdown. Everything that comes from the database or from a check (names,
messages, reasons, evidence values) is escaped, so an identifier or a message cannot turn
into markup; SQL goes into fenced ``sql`` blocks verbatim. Same report in, same bytes out.
What could not be judged comes before the findings, and the all-clear only when it was earned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TextIO

from qadvisor import __version__
from qadvisor.model import Finding, FixStep, FleetReport, Report, Severity
from qadvisor.render.labels import human_evidence, labels_of
from qadvisor.render.proof import proof_lines
from qadvisor.render.steps import step_heading
from qadvisor.render.values import docs_url, first_sentence
from qadvisor.render.verdict import (
    ALL_CLEAR,
    baseline_note,
    checks_run_note,
    discovery_gaps,
    fleet_summary,
    fleet_verdict,
    ignored_lines,
    not_judged_lines,
    quiet_skips,
    verdict,
    without_queues,
)
from qadvisor.sql.printing import predicate_sql

_SAFETY = {
    "safe": "safe: can run as printed on a live system",
    "review": "review: read the notes before running it",
}
# A fix that is advice alone: what the application or the DBA must change first.
_NOTHING_TO_RUN = "nothing to run: read the notes"

# Characters that start markup anywhere in a line. "_" only matters at a word boundary (GFM
# never reads an intraword underscore as emphasis), so `jobs_status_idx` stays readable.
# "&" only before something shaped like an entity (&amp; &#39;). ">" is markup only where a
# line starts (a quote), so "->" stays as it is written.
_SPECIAL = re.compile(r"([\\`*\[\]<|~]|(?<!\w)_|_(?!\w)|&(?=#?\w+;))")
# ... and what starts a block only at the start of a line: a heading, a list item (a quote is
# _text's: it starts one after a list item's marker too).
_BLOCK_MARK = re.compile(r"^([#+=-])")
_ORDERED = re.compile(r"^(\d+)([.)])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def render(report: Report) -> str:
    return "\n".join([*_body(report), f"*Report by qadvisor {__version__}.*"]) + "\n"


def _body(report: Report, database: str | None = None) -> list[str]:
    """The report up to its signature; ``database`` (a fleet's label for it) is named in
    every finding."""
    snap = report.snapshot
    s = report.summary()
    out: list[str] = [
        f"# qadvisor report: {_text(snap.server.database)} on PostgreSQL "
        f"{_text(snap.server.version)}{' (a standby)' if snap.server.is_standby else ''}",
        "",
        *_header(report),
        f"**Summary:** {s['critical']} critical, {s['warning']} warning, {s['info']} info "
        f"({checks_run_note(report)}; {_plural(len(report.skipped), 'skip')}).",
        "",
    ]
    note = baseline_note(report)
    if note:
        out += [f"**Baseline:** {_text(note.removeprefix('baseline '))}.", ""]
    new = [replace(f, database=database) for f in report.new_findings]
    out += [
        *_summary_table(new),
        "## Queue tables",
        "",
    ]
    if snap.queues:
        out += ["| table | live predicate | reason |", "|---|---|---|"]
        for q in snap.queues:
            live = _code(predicate_sql(q.live)) if q.live else "unknown"
            out.append(f"| {_code(q.qualified)} | {live} | {_cell(q.reason)} |")
    else:
        out.append(
            "No queue tables found: no table has a status-like column together with a partial "
            "index on it, row-locking statements in pg_stat_statements, or waiting and finished "
            "status values. Name them with `--table schema.name`."
        )
        gaps = discovery_gaps(report)
        if gaps:
            out.append("")
            out += [f"- {_text(g.reason)}" for g in gaps]
    out.append("")

    if report.skipped:
        # Before any finding or all-clear: what the report cannot vouch for.
        out += ["## Not judged", ""]
        for line in not_judged_lines(report):
            out += [_paragraph(line + "."), ""]
        out += [f"- **{_text(sk.code)}**: {_text(sk.reason)}" for sk in report.skipped]
        out.append("")
        grants = report.grants()
        if grants:
            out += ["GRANTs that would show what was hidden from this role:", ""]
            out += _sql_block(grants)
            out.append("")

    for sev in sorted(Severity, reverse=True):
        group = [f for f in new if f.severity == sev]
        if group:
            out += [f"## {sev.label.capitalize()} ({len(group)})", ""]
            for f in group:
                out += _finding(f, report)
    out += _baselined(report)
    if report.ignored:
        out += ["## Ignored in the SQL files", ""]
        out += [f"- {_text(line)}" for line in ignored_lines(report)]
        out.append("")
    closing = verdict(report)
    if not report.findings:
        out += ["## Findings", "", closing if closing == ALL_CLEAR else "No finding.", ""]
    if closing and closing != ALL_CLEAR:
        out += [f"**{_text(closing)}**", ""]
    return out


def _baselined(report: Report) -> list[str]:
    """The findings the baseline accepted, and those it held that are fixed: apart from the
    new ones, one line each."""
    b = report.baseline
    if b is None:
        return []
    out: list[str] = []
    old = [f for f in report.findings if report.baseline_state(f) == "preexisting"]
    if old:
        out += [f"## Preexisting ({len(old)}, in the baseline)", ""]
        out += ["| severity | finding | message |", "|---|---|---|"]
        out += [f"| {f.rating.label} | {_code(f.key)} | {_cell(f.message)} |" for f in old]
        out.append("")
    if b.fixed:
        out += [f"## Fixed since the baseline ({len(b.fixed)})", ""]
        out += [f"- {_code(e.key, cell=False)} ({e.severity.label}, {_text(e.name)})"
                for e in b.fixed]  # fmt: skip
        out.append("")
    if b.not_judged:
        out += [
            "In the baseline but not judged in this run (not called fixed): "
            + ", ".join(_code(e.key, cell=False) for e in b.not_judged)
            + ".",
            "",
        ]
    return out


def _header(report: Report) -> list[str]:
    """Which database, when, by which qadvisor and how: what a pasted report must say."""
    snap = report.snapshot
    out = [
        f"- **Database:** {_code(snap.server.database, cell=False)} on PostgreSQL "
        f"{_text(snap.server.version)}"
        + (", a standby (in recovery): fixes run on its primary" if snap.server.is_standby else "")
    ]
    if report.checked_at:
        out.append(f"- **Checked at:** {_text(report.checked_at)}")
    out.append(f"- **qadvisor:** {_text(__version__)}")
    if report.command:
        out.append(f"- **Command:** {_code(report.command, cell=False)}")
    if snap.history is not None:
        out.append(f"- **History:** {_text(snap.history.summary())}")
    return [*out, ""]


def _summary_table(findings: Sequence[Finding]) -> list[str]:
    # With a baseline, the new findings: the accepted ones have their own section.
    if not findings:
        return []
    out = ["| severity | code | object | finding |", "|---|---|---|---|"]
    for f in sorted(findings, key=lambda f: -f.rating):
        out.append(
            f"| {f.rating.label} | {_text(f.code)} | {_code(_object(f))} | "
            f"{_cell(first_sentence(f.message))} |"
        )
    return [*out, ""]


def _evidence(f: Finding, report: Report) -> list[str]:
    """The evidence in human words and units, the thresholds apart, plans as blocks."""
    ev = human_evidence(f.evidence, labels_of(report, f.code))
    out: list[str] = []
    if ev.facts:
        out += ["| evidence | value |", "|---|---|"]
        out += [f"| {_cell(line.label)} | {_cell(line.text)} |" for line in ev.facts]
        out.append("")
    if ev.thresholds:
        out += ["Flagged because (the check's thresholds):", ""]
        out += ["| threshold | value |", "|---|---|"]
        out += [f"| {_cell(line.label)} | {_cell(line.text)} |" for line in ev.thresholds]
        out.append("")
    for line in ev.blocks:
        language = "text" if "plan" in line.field else "sql"
        out += [f"{_text(line.label)}:", "", *_block(line.text, language), ""]
    return out


def _finding(f: Finding, report: Report) -> list[str]:
    out = [
        f"### {_text(f.code)} {_text(f.name)}: {_code(_object(f), cell=False)}",
        "",
        _paragraph(f.message),
        "",
    ]
    if f.explanation:
        out += [f"*{_text(f.explanation)}*", ""]
    out += _evidence(f, report)
    if f.fix:
        safety = _SAFETY.get(f.fix.safety, f.fix.safety) if f.fix.steps else _NOTHING_TO_RUN
        out += [f"**Fix** ({_text(safety)}):", ""]
        for step in f.fix.steps:
            out += _step(step)
        if f.fix.notes:
            out += [_paragraph(f.fix.notes), ""]
    if f.proof is not None:
        lines = proof_lines(f.proof)
        out += [f"**Proof:** {_text(lines[0])}", ""]
        out += [f"- {_text(line)}" for line in lines[1:]]
        out += [""] if len(lines) > 1 else []
    if f.docs:
        url = docs_url(report.docs_url, f.docs)
        page = f"[{_text(f.docs)}]({_url(url)})" if url else _code(f.docs, cell=False)
        out += [f"Docs: {page} (`qadvisor explain {f.code}`)", ""]
    return out


def _object(f: Finding) -> str:
    """The finding's object, after its database in a fleet's report."""
    return f"{f.database}/{f.target.key_part}" if f.database is not None else f.target.key_part


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _one_line(text: str) -> str:
    return " ".join(_CONTROL.sub("\ufffd", text).split())


def _text(text: str) -> str:
    """Plain text as inline Markdown: markup characters escaped, whitespace kept to one line;
    a leading ">" escaped, which would start a quote wherever the text starts a line or a
    list item."""
    out = _SPECIAL.sub(r"\\\1", _one_line(text))
    return "\\" + out if out.startswith(">") else out


def plain(text: str) -> str:
    """Text from a report, as inline Markdown (for other documents made of reports)."""
    return _text(text)


def inline_code(text: str) -> str:
    """A name as an inline code span, outside a table."""
    return _code(text, cell=False)


def _paragraph(text: str) -> str:
    """Plain text as a paragraph of its own: not read as a heading, list item or quote."""
    text = _BLOCK_MARK.sub(r"\\\1", _text(text))
    return _ORDERED.sub(r"\1\\\2", text)


def _cell(text: str) -> str:
    """A table cell (``_text`` already escapes ``|``)."""
    return _text(text) or " "


def _code(text: str, *, cell: bool = True) -> str:
    """An inline code span that survives backticks in the text (and ``|`` in a table cell)."""
    text = _one_line(text)
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    if cell:
        # GFM splits a table row on "|" before it sees code spans; "\|" there reads as "|".
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def _step(step: FixStep) -> list[str]:
    """A step under its heading; a rewrite as the statement before and after, never as one
    block to run."""
    heading = step_heading(step)
    out = [f"*{_text(heading[:1].upper() + heading[1:])}*", ""]
    if step.kind == "rewrite":
        if step.before is not None:
            out += ["Before:", "", *_sql_block((step.before,)), ""]
        out += ["After:", "", *_sql_block((step.sql,)), ""]
    else:
        out += [*_sql_block((step.sql,)), ""]
    if step.note:
        out += [_paragraph(step.note), ""]
    return out


def _sql_block(statements: tuple[str, ...]) -> list[str]:
    return _block("\n".join(s.rstrip() for s in statements), "sql")


def _block(body: str, language: str) -> list[str]:
    """A fenced block that no run of backticks in the body can close early."""
    runs = [len(m) for m in re.findall(r"`{3,}", body)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [f"{fence}{language}", body.rstrip(), fence]


def _url(path: str) -> str:
    return path.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def render_fleet(fleet: FleetReport) -> str:
    """A fleet's report: its summary, the databases that could not be judged with why, a row
    per database and every finding in one table, then each database that has a queue, a
    finding or a skip as its own report, one heading level down."""
    out = ["# qadvisor fleet report", "",
           f"- **Fleet:** {_code(fleet.source, cell=False)}, {fleet.jobs} at once"]  # fmt: skip
    if fleet.checked_at:
        out.append(f"- **Checked at:** {_text(fleet.checked_at)}")
    out.append(f"- **qadvisor:** {_text(__version__)}")
    if fleet.command:
        out.append(f"- **Command:** {_code(fleet.command, cell=False)}")
    out += ["", f"**Summary:** {_text(fleet_summary(fleet))}.", ""]
    if fleet.not_judged:
        out += [f"## Not judged ({len(fleet.not_judged)})", ""]
        for m in fleet.not_judged:
            out.append(f"- {_code(m.database, cell=False)}: {_text(m.reason or '')}")
        grants = [g for m in fleet.not_judged for g in m.grants]
        if grants:
            out += ["", "GRANTs that would let the role connect:", "", *_sql_block(tuple(grants))]
        out.append("")
    out += ["## Databases", "", "| database | queues | critical | warning | info | skipped |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for m in fleet.members:
        if m.report is None:
            out.append(f"| {_code(m.database)} | | | | | not judged |")
            continue
        s = m.report.summary()
        out.append(f"| {_code(m.database)} | {len(m.report.snapshot.queues)} | {s['critical']} "
                   f"| {s['warning']} | {s['info']} | {len(m.report.skipped)} |")  # fmt: skip
    out.append("")
    empty = without_queues(fleet)
    if empty:
        out += [_paragraph(f"No queue table found in {len(empty)} of them: {', '.join(empty)}."),
                ""]  # fmt: skip
        lines = quiet_skips(fleet)
        if lines:
            out += [*(f"- {_text(line)}" for line in lines), ""]
    findings = [f for f, _ in fleet.findings]
    if findings:
        out += ["## Findings", "", *_summary_table(findings)]
    for db, report in fleet.reports:
        if db not in empty:
            out += _demoted(_body(report, db))
    closing = fleet_verdict(fleet)
    if closing:
        out += [f"**{_text(closing)}**", ""]
    out.append(f"*Report by qadvisor {__version__}.*")
    return "\n".join(out) + "\n"


def _demoted(lines: list[str]) -> list[str]:
    """Markdown lines with each heading one level down (a fenced block's lines are its own:
    text from the database outside one never starts with '#', it is escaped)."""
    out, fence = [], ""
    for line in lines:
        if fence:
            fence = "" if line == fence else fence
        elif line.startswith("```"):
            fence = line[: len(line) - len(line.lstrip("`"))]
        elif line.startswith("#"):
            line = "#" + line
        out.append(line)
    return out


def write(report: Report, out: TextIO) -> None:
    out.write(render(report))


def write_fleet(fleet: FleetReport, out: TextIO) -> None:
    out.write(render_fleet(fleet))
