"""GitHub Actions workflow commands: one annotation per finding on the run's summary page.

Printed after the terminal report when ``GITHUB_ACTIONS=true``; other formats stay untouched
so their output remains parseable. A finding placed in the repository (its --query-file line,
or the report's anchor) names that file and line. Findings a baseline accepted are left out.
"""

from __future__ import annotations

from qadvisor.model import Report, Severity

_LEVEL = {Severity.CRITICAL: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape(text: str, *, prop: bool = False) -> str:
    # The workflow-command escapes: data escapes %, CR, LF; properties also ':' and ','.
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def render(report: Report) -> str:
    lines = []
    for f in report.new_findings:  # a baseline's accepted findings are not announced again
        title = _escape(f"{f.code} {f.name} {f.target.key_part}", prop=True)
        place = report.location(f)
        # With a file of the repository the annotation also shows on that line of the diff.
        at = f"file={_escape(place.path, prop=True)},line={place.line}," if place else ""
        lines.append(f"::{_LEVEL[f.rating]} {at}title={title}::{_escape(f.message)}")
    return "".join(line + "\n" for line in lines)
