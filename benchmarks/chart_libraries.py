"""Which SVG chart library the incident page (``--format html``) draws with: each candidate
draws the same two charts the page needs most, and this prints what that costs.

The two charts: dead tuples over 48 snapshots against two flat lines (the old and the proposed
vacuum trigger), QA201's picture over time; and two horizontal bars (an index's size against
the size the live set needs), QA101's. For each library installed in this interpreter, in a
fresh process each time (nothing imported yet but the standard library):

- import ms: importing the library, less a bare interpreter's start (median of ``--repeat``);
- first draw ms: both charts drawn once, in that fresh process (what one report pays);
- SVG bytes: both charts' SVG, as the page would inline it (UTF-8, no XML declaration);
- scripts / links: whether that SVG holds a ``<script>`` or any ``http(s)://`` reference
  other than the SVG namespaces (a self-contained page must hold neither);
- installed MiB: the library's own files and those of the packages it requires that the
  interpreter does not already have for qadvisor (read from the installed distributions).

Candidates that are not installed are listed as such. Run it from the repository root in an
interpreter that has them, e.g.::

    python3 -m venv /tmp/charts && /tmp/charts/bin/pip install pygal leather matplotlib \\
        vl-convert-python
    /tmp/charts/bin/python benchmarks/chart_libraries.py --repeat 7
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Dead tuples over 48 readings, as a queue without a fitting trigger shows them: a saw that
# climbs while autovacuum waits for the archive-scaled trigger.
DEAD = [1_000 + (i % 16) * 12_500 + i * 2_000 for i in range(48)]
OLD_TRIGGER = 441_090
NEW_TRIGGER = 100_000
BARS = [("index now", 77_930_496), ("live set's partial index", 147_456)]

# Each candidate's drawing of the two charts; ``svg`` collects the SVG texts.
DRAW = {
    "pygal": """
import pygal
line = pygal.Line(js=[], disable_xml_declaration=True, width=640, height=260,
                  show_dots=False, x_title="snapshot", y_title="dead tuples")
line.add("dead tuples", DEAD)
line.add("vacuum trigger now", [OLD_TRIGGER] * len(DEAD))
line.add("proposed trigger", [NEW_TRIGGER] * len(DEAD))
bars = pygal.HorizontalBar(js=[], disable_xml_declaration=True, width=640, height=160)
for name, value in BARS:
    bars.add(name, [value])
svg = [line.render(is_unicode=True), bars.render(is_unicode=True)]
""",
    "leather": """
import leather
line = leather.Chart("dead tuples")
line.add_line(list(enumerate(DEAD)), name="dead tuples")
line.add_line([(0, OLD_TRIGGER), (len(DEAD) - 1, OLD_TRIGGER)], name="vacuum trigger now")
line.add_line([(0, NEW_TRIGGER), (len(DEAD) - 1, NEW_TRIGGER)], name="proposed trigger")
bars = leather.Chart("index size")
bars.add_bars([(v, n) for n, v in BARS])
svg = [line.to_svg(width=640, height=260), bars.to_svg(width=640, height=160)]
""",
    "matplotlib": """
import io
import matplotlib
matplotlib.use("svg")
matplotlib.rcParams["svg.fonttype"] = "none"
import matplotlib.pyplot as plt
svg = []
fig, ax = plt.subplots(figsize=(6.4, 2.6))
ax.plot(DEAD, label="dead tuples")
ax.axhline(OLD_TRIGGER, label="vacuum trigger now")
ax.axhline(NEW_TRIGGER, label="proposed trigger")
ax.legend()
out = io.StringIO(); fig.savefig(out, format="svg"); svg.append(out.getvalue())
fig, ax = plt.subplots(figsize=(6.4, 1.6))
ax.barh([n for n, _ in BARS], [v for _, v in BARS])
out = io.StringIO(); fig.savefig(out, format="svg"); svg.append(out.getvalue())
""",
    "vl_convert": """
import vl_convert
line = {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "width": 600,
        "height": 220, "layer": [
    {"data": {"values": [{"i": i, "dead": d} for i, d in enumerate(DEAD)]},
     "mark": "line", "encoding": {"x": {"field": "i", "type": "quantitative"},
                                  "y": {"field": "dead", "type": "quantitative"}}},
    {"data": {"values": [{"t": OLD_TRIGGER}, {"t": NEW_TRIGGER}]}, "mark": "rule",
     "encoding": {"y": {"field": "t", "type": "quantitative"}}}]}
bars = {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "width": 600,
        "data": {"values": [{"n": n, "v": v} for n, v in BARS]}, "mark": "bar",
        "encoding": {"y": {"field": "n", "type": "nominal"},
                     "x": {"field": "v", "type": "quantitative"}}}
svg = [vl_convert.vegalite_to_svg(line), vl_convert.vegalite_to_svg(bars)]
""",
}
DISTRIBUTION = {
    "pygal": "pygal",
    "leather": "leather",
    "matplotlib": "matplotlib",
    "vl_convert": "vl-convert-python",
}
_NAMESPACES = ("http://www.w3.org/", "http://purl.org/dc/", "http://creativecommons.org/ns#")


def _run(code: str) -> str:
    # -S and the parent's path: no site hooks (an editable install's finder) in the timing.
    env = {"PYTHONPATH": ":".join(p for p in sys.path if p)}
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return out.stdout


def _bare_ms() -> float:
    start = time.perf_counter()
    _run("pass")
    return (time.perf_counter() - start) * 1000


def _measure(module: str) -> dict[str, object]:
    setup = f"DEAD = {DEAD!r}\nOLD_TRIGGER = {OLD_TRIGGER}\nNEW_TRIGGER = {NEW_TRIGGER}\n"
    setup += f"BARS = {BARS!r}\n"
    code = (
        "import time, json\n" + setup + "t0 = time.perf_counter()\n"
        f"import {module}\n"
        "t1 = time.perf_counter()\n" + DRAW[module] + "t2 = time.perf_counter()\n"
        "print(json.dumps({'import': (t1 - t0) * 1000, 'draw': (t2 - t1) * 1000, 'svg': svg}))"
    )
    result: dict[str, object] = json.loads(_run(code))
    return result


def _installed_mib(dist: str, have: set[str]) -> float:
    """The distribution's files and those of its requirements not already installed for
    qadvisor (``have``), in MiB."""
    seen: set[str] = set()
    todo = [dist]
    total = 0
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen or (key in have and name != dist):
            continue
        seen.add(key)
        try:
            d = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for f in d.files or ():
            path = Path(str(d.locate_file(f)))
            if path.is_file():
                total += path.stat().st_size
        for req in d.requires or ():
            if "extra ==" in req:
                continue
            todo.append(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0])
    return total / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per library")
    args = parser.parse_args()
    # What qadvisor already brings: a library's requirement among them costs nothing more.
    have = {"typer", "rich", "sqlglot", "psycopg", "psycopg-binary", "click", "typing-extensions",
            "markdown-it-py", "mdurl", "pygments", "shellingham"}  # fmt: skip
    bare = statistics.median(_bare_ms() for _ in range(args.repeat))
    print(f"Python {sys.version.split()[0]}; bare interpreter start {bare:.0f} ms (median)\n")
    print("| library | version | import ms | first draw ms | SVG bytes | scripts / links | "
          "installed MiB |")  # fmt: skip
    print("|---|---|---:|---:|---:|---|---:|")
    for module, dist in DISTRIBUTION.items():
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            print(f"| {module} | not installed | | | | | |")
            continue
        runs = [_measure(module) for _ in range(args.repeat)]
        imp = statistics.median(float(r["import"]) for r in runs)  # type: ignore[arg-type]
        draw = statistics.median(float(r["draw"]) for r in runs)  # type: ignore[arg-type]
        svgs: list[str] = runs[0]["svg"]  # type: ignore[assignment]
        size = sum(len(s.encode()) for s in svgs)
        scripts = any("<script" in s for s in svgs)
        links = sorted(
            {u for s in svgs for u in re.findall(r"https?://[^\s\"'<>)]+", s)
             if not u.startswith(_NAMESPACES)}
        )  # fmt: skip
        said = ("script" if scripts else "none") + (f"; {', '.join(links)}" if links else "")
        mib = _installed_mib(dist, have)
        print(f"| {module} | {version} | {imp:.0f} | {draw:.0f} | {size:,} | {said} | "
              f"{mib:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
