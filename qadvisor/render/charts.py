"""A picture (``qadvisor.render.pictures``) drawn as SVG, with leather: the one module that
imports it (an import contract holds that), so only ``--format html`` pays for it.

leather writes plain SVG with no script and no reference outside the document: small (about
3 kB a chart), pure Python with no dependency, and about 30-60 ms to import
(``benchmarks/chart_libraries.py`` measured it against pygal, matplotlib and vl-convert;
docs/benchmarks.md). Its theme is set once here: the page's font, sizes that fit an A4 column,
and one colour per tone, so a measured figure, what the fix gives and a limit read alike in
every chart.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import leather

from qadvisor.render.pictures import Bars, Lines, Picture, Tone, figure

WIDTH = 640
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
# One colour per tone, readable in grey when printed: measured (dark red), what the live set
# needs or the fix gives (green), a limit (grey), a proof's before and after.
COLOURS: dict[Tone, str] = {
    "measured": "#b2182b",
    "needed": "#1a9850",
    "limit": "#636363",
    "before": "#b2182b",
    "after": "#1a9850",
}

_THEME: dict[str, Any] = {
    "background_color": "#ffffff",
    "margin": 0.04,
    "title_font_family": FONT,
    "legend_font_family": FONT,
    "axis_title_font_family": FONT,
    "tick_font_family": FONT,
    "title_font_size": 13,
    "title_font_char_height": 13,
    "title_font_char_width": 7,
    "legend_font_size": 11,
    "legend_font_char_height": 11,
    "legend_font_char_width": 6.5,
    "tick_font_size": 11,
    "tick_font_char_height": 11,
    "tick_font_char_width": 6.5,
    "label_color": "#333333",
    "legend_color": "#333333",
    "tick_color": "#e0e0e0",
}
for _name, _value in _THEME.items():
    setattr(leather.theme, _name, _value)


class _SpreadBars(leather.Bars):  # type: ignore[misc]
    """Bars with a whisker from the smallest to the largest of repeated measurements, where a
    bar has them."""

    def __init__(self, fill: Any, spreads: dict[str, tuple[float, float]]) -> None:
        super().__init__(fill)
        self._spreads = spreads

    def to_svg(self, width: Any, height: Any, x_scale: Any, y_scale: Any, series: Any,
               palette: Any) -> Any:  # fmt: skip
        group = super().to_svg(width, height, x_scale, y_scale, series, palette)
        for d in series.data():
            spread = self._spreads.get(d.y)
            if spread is None:
                continue
            top, bottom = y_scale.project_interval(d.y, height, 0)
            middle = (top + bottom) / 2
            low, high = (x_scale.project(v, 0, width) for v in spread)
            whisker = ET.Element("path", stroke="#000000", fill="none")
            whisker.set("stroke-width", "1.5")
            ends = f"M {low} {middle - 4} L {low} {middle + 4} M {high} {middle - 4} "
            whisker.set("d", f"M {low} {middle} L {high} {middle} {ends}L {high} {middle + 4}")
            whisker.set("class", "spread")
            group.append(whisker)
        return group


def _ticks(unit: Any) -> Any:
    def formatted(value: Any, index: int, count: int) -> str:
        return figure(float(value), unit)

    return formatted


def _moments(first: datetime | float, last: datetime | float) -> Any:
    """Time ticks as precise as the span needs: seconds within a day, hours within a month,
    else dates; seconds from the start for a series of seconds."""
    if not isinstance(first, datetime) or not isinstance(last, datetime):
        return lambda value, index, count: f"{float(value):g} s"
    span = (last - first).total_seconds()
    pattern = "%H:%M:%S" if span < 86400 else "%m-%d %H:%M" if span < 30 * 86400 else "%Y-%m-%d"
    return lambda value, index, count: value.strftime(pattern)


def _bars(picture: Bars) -> tuple[Any, int]:
    chart = leather.Chart()
    tones = {b.label: b.tone for b in picture.bars}
    spreads = {b.label: b.spread for b in picture.bars if b.spread is not None}
    data = [(b.value, b.label) for b in reversed(picture.bars)]  # the first bar on top
    chart.add_series(leather.Series(data), _SpreadBars(lambda d: COLOURS[tones[d.y]], spreads))
    high = max([b.value for b in picture.bars] + [s[1] for s in spreads.values()])
    chart.add_x_scale(0, high if high > 0 else 1)
    chart.add_x_axis(tick_formatter=_ticks(picture.unit))
    return chart, 40 + 26 * len(picture.bars)


def _lines(picture: Lines) -> tuple[Any, int]:
    chart = leather.Chart()
    for line in picture.lines:
        chart.add_line(
            [(_naive(t), v) for t, v in line.points],
            name=line.name,
            stroke_color=COLOURS[line.tone],
            width=2,
            stroke_dasharray="6 4" if line.dashed else None,
        )
    values = [v for line in picture.lines for _, v in line.points]
    # Set, not inferred: leather's inference compares with a naive datetime.
    moments = [_naive(t) for line in picture.lines for t, _ in line.points]
    first, last = min(moments), max(moments)
    if first == last:  # readings of one moment: leather's time scale needs a span
        last = last + timedelta(seconds=1) if isinstance(last, datetime) else last + 1
    chart.add_x_scale(first, last)
    chart.add_x_axis(tick_formatter=_moments(first, last))
    chart.add_y_scale(0, max(max(values), 1))
    chart.add_y_axis(tick_formatter=_ticks(picture.unit))
    return chart, 240


def _naive(moment: datetime | float) -> datetime | float:
    """A moment as leather takes it: in UTC without its zone (it cannot compare aware ones;
    the page says its times are UTC)."""
    if isinstance(moment, datetime) and moment.tzinfo is not None:
        return moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def svg(picture: Picture) -> str:
    """The picture as an ``<svg>`` element to inline in a page: scalable (a viewBox, no fixed
    size), titled for a screen reader, no XML declaration."""
    chart, height = _bars(picture) if isinstance(picture, Bars) else _lines(picture)
    root = ET.Element("svg", xmlns="http://www.w3.org/2000/svg", version="1.1",
                      viewBox=f"0 0 {WIDTH} {height}", role="img")  # fmt: skip
    root.set("aria-label", picture.title)
    title = ET.SubElement(root, "title")
    title.text = picture.title
    root.append(chart.to_svg_group(WIDTH, height))
    for element in root.iter():
        for name, value in element.attrib.items():
            element.set(name, _LONG.sub(_two_places, value))
    return ET.tostring(root, encoding="unicode")


# leather computes coordinates in Decimal and prints every digit: two places are enough.
_LONG = re.compile(r"-?\d+\.\d{3,}")


def _two_places(m: re.Match[str]) -> str:
    return f"{Decimal(m.group()):.2f}"
