"""The JUnit XML report, for CI systems that show test results (GitLab, Jenkins, Actions).

One ``<testsuite name="qadvisor">`` (a fleet's report: one per database): a failing test case
per finding (classname = check code, name = finding key, so a finding keeps its identity
across runs), passing ones for the findings a baseline accepted and for the baselined ones
now fixed (same names, so a CI system's history shows them turn green), a passing one per
check that ran cleanly, and a ``<skipped>`` one per
skip reason (name = the code and the queue it could not judge). A check that ran but could
not judge part of the database is reported as skipped, not as passing; the properties say how
many checks could not judge which queue; and a run that found no queue at all has a skipped
``discovery`` case, so it never shows all green.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from typing import TextIO

from qadvisor import __version__
from qadvisor.model import Finding, FleetReport, Report, Skip
from qadvisor.render.proof import proof_lines
from qadvisor.render.steps import step_heading
from qadvisor.render.values import evidence_text

_NO_QUEUE = "no queue table was found, so no check judged one (name them with --table)"
# XML 1.0 allows no other control characters, not even as character references.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def render(report: Report) -> str:
    return _document([_suite(report, "qadvisor")])


def render_fleet(fleet: FleetReport) -> str:
    """A fleet: one ``<testsuite name="qadvisor DATABASE">`` per database, its test names
    starting with the database (``app01/QA201:public.jobs``); a database that could not be
    judged is a suite of one ``<error>`` case with why, one left out (no connections, no
    CONNECT) a skipped one."""
    suites = []
    for m in fleet.members:
        if m.report is not None:
            suites.append(_suite(m.report, f"qadvisor {m.database}", m.database))
            continue
        suite = ET.Element("testsuite", name=_clean(f"qadvisor {m.database}"))
        case = ET.SubElement(suite, "testcase", classname="qadvisor",
                             name=_clean(f"{m.database}/connection"))  # fmt: skip
        reason = _clean(m.reason or "")
        if m.failed:
            ET.SubElement(case, "error", message=reason, type=str(m.not_judged))
        else:
            ET.SubElement(case, "skipped", message=reason)
        failed = "1" if m.failed else "0"
        suite.attrib |= {"tests": "1", "failures": "0", "errors": failed,
                         "skipped": "0" if m.failed else "1"}  # fmt: skip
        suites.append(suite)
    return _document(suites)


def _document(suites: list[ET.Element]) -> str:
    root = ET.Element("testsuites", name="qadvisor")
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(sum(int(suite.attrib[key]) for suite in suites)))
    root.extend(suites)
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _suite(report: Report, name: str, database: str | None = None) -> ET.Element:
    """One database's test suite; ``database`` (a fleet's label) starts each test's name."""
    snap = report.snapshot
    suite = ET.Element("testsuite", name=_clean(name))
    props = ET.SubElement(suite, "properties")
    not_judged = [
        (f"not_judged {queue or '(whole database)'}", ", ".join(codes))
        for queue, codes in report.not_judged()
    ]
    for name, value in (
        ("qadvisor_version", __version__),
        ("database", snap.server.database),
        ("server_version", snap.server.version),
        ("standby", "yes" if snap.server.is_standby else "no"),
        *not_judged,
    ):
        ET.SubElement(props, "property", name=_clean(name), value=_clean(value))

    def named(name: str) -> str:
        return _clean(f"{database}/{name}" if database is not None else name)

    new = report.new_findings
    for f in new:
        case = ET.SubElement(suite, "testcase", classname=_clean(f.code), name=named(f.key))
        failure = ET.SubElement(case, "failure", message=_clean(f.message), type=f.rating.label)
        failure.text = _clean(_details(f))
    b = report.baseline
    accepted = [f for f in report.findings if f not in new]
    for f in accepted:
        case = ET.SubElement(suite, "testcase", classname=_clean(f.code), name=named(f.key))
        out = ET.SubElement(case, "system-out")
        out.text = _clean(f"preexisting: accepted in the baseline {b.source if b else ''}\n"
                          + _details(f))  # fmt: skip
    for e in b.fixed if b else ():
        case = ET.SubElement(suite, "testcase", classname=_clean(e.code), name=named(e.key))
        out = ET.SubElement(case, "system-out")
        out.text = _clean(f"fixed: in the baseline {b.source if b else ''}, gone in this run\n")

    with_findings = {f.code for f in report.findings}
    with_skips = {s.code for s in report.skipped}
    passed = [c for c in report.checks_run if c not in with_findings | with_skips]
    for code in passed:
        ET.SubElement(suite, "testcase", classname=_clean(code), name=named(code))

    def where(sk: Skip) -> str:
        return f"{sk.code} {sk.queue}" if sk.queue else sk.code

    per_name = Counter(where(s) for s in report.skipped)
    seen: Counter[str] = Counter()
    for sk in report.skipped:
        base = where(sk)
        seen[base] += 1
        name = base if per_name[base] == 1 else f"{base} #{seen[base]}"
        case = ET.SubElement(suite, "testcase", classname=_clean(sk.code), name=named(name))
        ET.SubElement(case, "skipped", message=_clean(sk.reason))
    skipped = len(report.skipped)
    if not snap.queues:
        case = ET.SubElement(suite, "testcase", classname="qadvisor", name=named("discovery"))
        ET.SubElement(case, "skipped", message=_NO_QUEUE)
        skipped += 1

    fixed = len(b.fixed) if b else 0
    tests = len(report.findings) + fixed + len(passed) + skipped
    suite.set("tests", str(tests))
    suite.set("failures", str(len(new)))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    return suite


def _details(f: Finding) -> str:
    lines = [f"{f.rating.label} {f.code} {f.name}: {f.target.key_part}", f.message]
    if f.explanation:
        lines.append(f.explanation)
    if f.evidence:
        lines += ["", "evidence:"]
        lines += [f"  {k}: {evidence_text(v, none='null')}" for k, v in f.evidence.items()]
    if f.fix:
        lines += ["", f"fix ({f.fix.safety}):"]
        for step in f.fix.steps:
            lines += [f"-- {step_heading(step)}"]
            if step.kind == "rewrite" and step.before is not None:
                lines += ["-- before:", *(f"--   {x}" for x in step.before.splitlines())]
                lines += ["-- after:", *(f"--   {x}" for x in step.sql.splitlines())]
            elif step.kind == "rewrite":
                lines += [*(f"--   {x}" for x in step.sql.splitlines())]
            else:
                lines.append(step.sql)
            if step.note:
                lines.append(f"-- {step.note}")
        if f.fix.notes:
            lines += ["", f.fix.notes]
    if f.proof is not None:
        lines += ["", *proof_lines(f.proof)]
    if f.docs:
        lines += ["", f"docs: {f.docs} (qadvisor explain {f.code})"]
    return "\n".join(lines) + "\n"


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def write(report: Report, out: TextIO) -> None:
    out.write(render(report))


def write_fleet(fleet: FleetReport, out: TextIO) -> None:
    out.write(render_fleet(fleet))
