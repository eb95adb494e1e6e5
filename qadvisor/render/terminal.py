"""The terminal report: summary first, then what could not be judged and why, findings by
severity with fixes as highlighted SQL, and the all-clear only when it was earned.

Nothing frames a finding and no statement is broken across lines: a fix selected in the
terminal and pasted into psql is SQL (what must not run as printed is commented out, see
qadvisor.render.steps)."""

from __future__ import annotations

import errno
import os
from dataclasses import replace
from typing import TextIO

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from qadvisor.model import Finding, FleetReport, Report, Severity
from qadvisor.render.labels import human_evidence, labels_of
from qadvisor.render.proof import proof_lines
from qadvisor.render.steps import ScriptLine, as_text, fix_lines
from qadvisor.render.values import docs_url, statement_start
from qadvisor.render.verdict import (
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

_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def render(
    report: Report, console: Console, *, verbose: bool = False, database: str | None = None
) -> None:
    """The report; ``database`` (a fleet's label for it) is named in every finding."""
    snap = report.snapshot
    s = report.summary()
    console.print(
        Text.assemble(
            ("qadvisor ", "bold"),
            f"{snap.server.database} on PostgreSQL {snap.server.version}"
            f"{' (a standby)' if snap.server.is_standby else ''}: ",
            (f"{s['critical']} critical", _STYLE[Severity.CRITICAL] if s["critical"] else "dim"),
            ", ",
            (f"{s['warning']} warning", _STYLE[Severity.WARNING] if s["warning"] else "dim"),
            ", ",
            (f"{s['info']} info", _STYLE[Severity.INFO] if s["info"] else "dim"),
            f"  ({checks_run_note(report)})",
        )
    )
    note = baseline_note(report)
    if note:
        console.print(Text(note))
    if snap.history is not None:
        console.print(Text(f"history: {snap.history.summary()}"))
    _queues(report, console)
    _not_taken(report, console, verbose)
    _not_judged(report, console)
    new = report.new_findings
    for sev in sorted(Severity, reverse=True):
        group = [f for f in new if f.severity == sev]
        if group:
            console.rule(Text(f"{sev.label} ({len(group)})", style=_STYLE[sev]), align="left")
            for f in group:
                _finding(replace(f, database=database), console, report)
    _baselined(report, console)
    if report.ignored:
        console.rule(Text("ignored in the SQL files", style="dim"), align="left")
        for line in ignored_lines(report):
            console.print(Text(f"  {line}", style="dim"))
    closing = verdict(report)
    if closing:
        console.print(Text(closing, style="yellow" if report.skipped else "green"))


def _not_judged(report: Report, console: Console) -> None:
    """Which checks could not judge which queue, and why: before anything reads as fine."""
    if not report.skipped:
        return
    console.rule(Text("not judged", style="yellow"), align="left")
    for line in not_judged_lines(report):
        console.print(Text(line, style="yellow"))
    for sk in report.skipped:
        console.print(Text(f"  {sk.code} skipped: {sk.reason}", style="dim"))
    grants = report.grants()
    if grants:
        console.print(Text("GRANTs that would show what was hidden from this role:", style="bold"))
        for grant in grants:
            console.print(Text(f"  {grant}"))


def _queues(report: Report, console: Console) -> None:
    snap = report.snapshot
    if not snap.queues:
        console.print(
            Text(
                "No queue tables found: no table has a status-like column together with a "
                "partial index on it, row-locking statements in pg_stat_statements, or "
                "waiting and finished status values. Name them with --table schema.name.",
                style="yellow",
            )
        )
        for gap in discovery_gaps(report):
            console.print(Text(f"  {gap.reason}", style="yellow"))
        return
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
    table.add_column("queue table")
    table.add_column("live predicate")
    table.add_column("why", style="dim", overflow="fold")
    for q in snap.queues:
        table.add_row(q.qualified, predicate_sql(q.live) if q.live else "unknown", q.reason)
    console.print(table)


def _baselined(report: Report, console: Console) -> None:
    """Findings the baseline accepted, dimmed, and the baselined ones now fixed."""
    b = report.baseline
    if b is None:
        return
    old = [f for f in report.findings if report.baseline_state(f) == "preexisting"]
    if old:
        console.rule(Text(f"preexisting ({len(old)}, in the baseline)", style="dim"), align="left")
        for f in old:
            console.print(Text(f"  {f.rating.label} {f.key}: {f.message}", style="dim"))
    if b.fixed:
        console.rule(Text(f"fixed since the baseline ({len(b.fixed)})", style="green"),
                     align="left")  # fmt: skip
        for e in b.fixed:
            console.print(Text(f"  {e.key} ({e.severity.label}, {e.name})", style="green"))
    if b.not_judged:
        keys = ", ".join(e.key for e in b.not_judged)
        console.print(Text(f"in the baseline, not judged in this run: {keys}", style="yellow"))


def _not_taken(report: Report, console: Console, verbose: bool) -> None:
    """The tables discovery did not take for queues and the row-locking statements it did not
    judge as claims, each with why: listed with --verbose, counted otherwise."""
    snap = report.snapshot
    if not snap.rejected and not snap.left_out and not snap.maintenance:
        return
    if not verbose:
        counts = []
        if snap.rejected:
            counts.append(f"{len(snap.rejected)} candidate table(s) not taken for queues")
        if snap.left_out:
            counts.append(f"{len(snap.left_out)} row-locking statement(s) not judged as claims")
        if snap.maintenance:
            counts.append(f"{len(snap.maintenance)} maintenance statement(s)")
        console.print(Text(f"{' and '.join(counts)}: --verbose lists them with why.", style="dim"))
        return
    if snap.rejected:
        console.print(Text("not taken for queues:", style="bold"))
        for r in snap.rejected:
            console.print(Text.assemble(f"  {r.qualified}: ", (r.reason, "dim")))
    if snap.left_out:
        console.print(Text("row-locking statements not judged as claims:", style="bold"))
        for o in snap.left_out:
            console.print(Text.assemble(f"  {o.source}: ", (o.reason, "dim")))
            console.print(Text(f"    {statement_start(o.text)}"))
    if snap.maintenance:
        console.print(Text("maintenance statements (not claims):", style="bold"))
        for m in snap.maintenance:
            what = m.parsed.maintenance if m.parsed else None
            about = f"{what.description} on {m.queue}" if what else str(m.queue)
            console.print(Text.assemble(f"  {m.source}: ", (about, "dim")))
            console.print(Text(f"    {statement_start(m.text)}"))


def _finding(f: Finding, console: Console, report: Report) -> None:
    """One finding: its title, message, evidence, then its fix as SQL that a copy can run
    (no frame, no line break inside a statement: see qadvisor.render.steps)."""
    where = f"{f.database}/" if f.database is not None else ""
    console.print(
        Text.assemble(
            (f"{f.code} ", _STYLE[f.rating]), (f.name, "bold"), f"  {where}{f.target.key_part}"
        )
    )
    console.print(Text(f.message))
    if f.explanation:
        console.print(Text(f.explanation, style="dim italic"))
    human = human_evidence(f.evidence, labels_of(report, f.code))
    ev = Table(box=None, show_header=False, pad_edge=False)
    ev.add_column(style="dim")
    ev.add_column(overflow="fold")
    for line in human.facts:
        ev.add_row(line.label, line.text)
    console.print(Text(""), ev)
    if human.thresholds:
        flagged = Table(box=None, show_header=False, pad_edge=False)
        flagged.add_column(style="dim")
        flagged.add_column(overflow="fold", style="dim")
        for line in human.thresholds:
            flagged.add_row(line.label, line.text)
        console.print(Text("flagged because (the check's thresholds):", style="dim"), flagged)
    for line in human.blocks:
        console.print(Text(f"{line.label}:", style="dim"))
        if "plan" in line.field:
            console.print(Text(line.text))
        else:
            console.print(_sql(line.text), soft_wrap=True)
    if f.fix:
        safety = f.fix.safety if f.fix.steps else "nothing to run"
        console.print(Text(f"\nfix ({safety}):", style="bold"))
        _script(fix_lines(f.fix), console)
    if f.proof is not None:
        proof = proof_lines(f.proof)
        console.print(Text(f"\n{proof[0]}", style="bold"))
        for said in proof[1:]:
            console.print(Text(said, style="dim"))
    page = docs_url(report.docs_url, f.docs) or f.docs
    console.print(Text(f"docs: {page} (qadvisor explain {f.code})", style="dim"))
    console.print()


def _script(lines: list[ScriptLine], console: Console) -> None:
    """Lines of an SQL script: statements highlighted and comments dimmed, each printed whole
    (soft wrap: the terminal folds a long line, a copy gets it as one)."""
    for line in lines:
        for text in as_text([line], console.width):
            shown = _sql(text) if line.kind == "sql" else Text(text, style="dim")
            console.print(shown, soft_wrap=True)


def _sql(text: str) -> Text:
    shown = Syntax(text, "sql", background_color="default").highlight(text)
    shown.rstrip()
    return shown


def write_page(markdown: str, out: TextIO) -> None:
    """A docs page (Markdown) to ``out``: rendered when ``out`` is a terminal (headings,
    lists, tables and highlighted SQL at its width), else as the Markdown it is, so that
    ``qadvisor explain QA101 > QA101.md`` writes the page."""
    from rich.markdown import Markdown

    console = _Console(file=out)
    if console.is_terminal:
        console.print(Markdown(markdown, code_theme="ansi_dark"))
    else:
        out.write(markdown + "\n")


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would end the process with exit 1, which reads as findings: the command line
        # says the report could not be written instead.
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def render_fleet(fleet: FleetReport, console: Console, *, verbose: bool = False) -> None:
    """A fleet: its summary; the databases that could not be judged, with why, before
    anything reads as fine; a line per database; then each database that has a queue, a
    finding or a skip, as its own report with the database named in each finding."""
    console.print(Text.assemble(("qadvisor fleet ", "bold"), f"{fleet.source}: ",
                                fleet_summary(fleet)))  # fmt: skip
    if fleet.not_judged:
        console.rule(Text(f"not judged ({len(fleet.not_judged)})", style="yellow"), align="left")
        for m in fleet.not_judged:
            console.print(Text.assemble(f"  {m.database}: ", (m.reason or "", "yellow")))
            for grant in m.grants:
                console.print(Text(f"    {grant}"))
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
    for column in ("database", "queues", "critical", "warning", "info", "skipped"):
        table.add_column(column, justify="left" if column == "database" else "right")
    for m in fleet.members:
        if m.report is None:
            table.add_row(m.database, "-", "-", "-", "-", Text("not judged", style="yellow"))
            continue
        s = m.report.summary()
        table.add_row(m.database, str(len(m.report.snapshot.queues)), str(s["critical"]),
                      str(s["warning"]), str(s["info"]), str(len(m.report.skipped)))  # fmt: skip
    console.rule(Text("databases", style="bold"), align="left")
    console.print(table)
    empty = without_queues(fleet)
    if empty:
        console.print(Text(f"No queue table found in {len(empty)} of them: {', '.join(empty)}.",
                           style="dim"))  # fmt: skip
        for line in quiet_skips(fleet):
            console.print(Text(f"  {line}", style="dim"))
    for db, report in fleet.reports:
        if db in empty:
            continue
        console.print()
        console.rule(Text(f"database {db}", style="bold"), characters="=")
        render(report, console, verbose=verbose, database=db)
    closing = fleet_verdict(fleet)
    if closing:
        console.print()
        bad = fleet.not_judged or any(r.skipped for _, r in fleet.reports)
        console.print(Text(closing, style="yellow" if bad else "green"))


def write_fleet(fleet: FleetReport, out: TextIO, *, verbose: bool = False) -> None:
    """A fleet's report, to ``out`` as :func:`write` writes one database's."""
    render_fleet(fleet, _Console(file=out), verbose=verbose)


def write(report: Report, out: TextIO, *, verbose: bool = False) -> None:
    """To ``out`` in colour when it is a terminal (and NO_COLOR is unset), at its width; with
    ``verbose``, the candidates discovery rejected and the statements it left out, listed."""
    render(report, _Console(file=out), verbose=verbose)
