"""Renderers: takes one report, gives it in a format (text, json, markdown, sarif, junit): one
format per module, each a function of the report alone.

:data:`RENDERERS` maps a ``--format`` value to its module; each has ``write(report, out)``.
``github`` is no format of its own: under GitHub Actions its annotations follow the text
report (:func:`write` with ``annotations``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TextIO

from qadvisor.model import Report
from qadvisor.render import github, junit, markdown, sarif, terminal
from qadvisor.render import json as json_format


class Renderer(Protocol):
    def write(self, report: Report, out: TextIO) -> None: ...


RENDERERS: Mapping[str, Renderer] = {
    "text": terminal,
    "json": json_format,
    "markdown": markdown,
    "sarif": sarif,
    "junit": junit,
}


def write(
    report: Report, fmt: str, out: TextIO, *, annotations: bool = False, verbose: bool = False
) -> None:
    """The report in format ``fmt``; with ``annotations`` (GitHub Actions) and the text format,
    one workflow-command annotation per finding after it; ``verbose`` lists, in the text
    format, what discovery did not take (JSON always carries it; the other formats leave it
    out)."""
    if fmt == "text":
        terminal.write(report, out, verbose=verbose)
    else:
        RENDERERS[fmt].write(report, out)
    if annotations and fmt == "text":
        out.write(github.render(report))
