"""Renderers: takes one report (or a fleet's: one report per database), gives it in a format
(text, json, markdown, sarif, junit, html, openmetrics, sql): one format per module, each a
function of the report alone.

:data:`RENDERERS` maps a ``--format`` value to its module; each has ``write(report, out)``
and ``write_fleet(fleet, out)``.
``github`` is no format of its own: under GitHub Actions its annotations follow the text
report (:func:`write` with ``annotations``).
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Iterator, Mapping
from typing import ClassVar, Protocol, TextIO

from qadvisor.model import FleetReport, Report


class Renderer(Protocol):
    def write(self, report: Report, out: TextIO) -> None: ...

    def write_fleet(self, fleet: FleetReport, out: TextIO) -> None: ...


class _Renderers(Mapping[str, Renderer]):
    """Each format's module, imported when it is first asked for: a JSON run in CI does not
    pay for the terminal renderer's rich."""

    _MODULES: ClassVar[dict[str, str]] = {
        "text": "terminal",
        "json": "json",
        "markdown": "markdown",
        "sarif": "sarif",
        "junit": "junit",
        "html": "html",
        "openmetrics": "openmetrics",
        "sql": "sql",
    }

    def __getitem__(self, fmt: str) -> Renderer:
        module: Renderer = importlib.import_module(f"qadvisor.render.{self._MODULES[fmt]}")
        return module

    def __iter__(self) -> Iterator[str]:
        return iter(self._MODULES)

    def __len__(self) -> int:
        return len(self._MODULES)


RENDERERS: Mapping[str, Renderer] = _Renderers()


def write(
    report: Report, fmt: str, out: TextIO, *, annotations: bool = False, verbose: bool = False
) -> None:
    """The report in format ``fmt``; with ``annotations`` (GitHub Actions) and the text format,
    one workflow-command annotation per finding after it; ``verbose`` lists, in the text
    format, what discovery did not take (JSON always carries it; the other formats leave it
    out)."""
    if fmt == "text":
        from qadvisor.render import terminal

        terminal.write(report, out, verbose=verbose)
    else:
        RENDERERS[fmt].write(report, out)
    if annotations and fmt == "text":
        from qadvisor.render import github

        out.write(github.render(report))


def write_fleet(fleet: FleetReport, fmt: str, out: TextIO, *, verbose: bool = False) -> None:
    """A fleet's combined report in format ``fmt``; ``verbose`` as for :func:`write`."""
    if fmt == "text":
        from qadvisor.render import terminal

        terminal.write_fleet(fleet, out, verbose=verbose)
    else:
        RENDERERS[fmt].write_fleet(fleet, out)


def fleet_text(fleet: FleetReport, fmt: str, *, verbose: bool = False) -> str:
    """A fleet's combined report in format ``fmt``, as one string (an --output file's)."""
    buffer = io.StringIO()
    write_fleet(fleet, fmt, buffer, verbose=verbose)
    return buffer.getvalue()
