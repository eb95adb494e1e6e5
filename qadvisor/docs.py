"""The docs page of a check, made from the check itself (docstring, options and their comments).

``python -m qadvisor.docs docs/checks`` writes one page per installed check; a test keeps the
pages in the repository identical to what this produces, so the docs cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from pathlib import Path

from qadvisor.registry import Check, load_checks


def option_rows(chk: Check) -> list[tuple[str, str, str]]:
    """(name, default, why) for each option; "why" is the comment above the field."""
    comments: dict[str, str] = {}
    try:
        source = inspect.getsource(chk.options)
    except (OSError, TypeError):
        source = ""
    pending: list[str] = []
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("# ").strip())
            continue
        m = re.match(r"(\w+)\s*:", stripped)
        if m and pending:
            comments[m.group(1)] = " ".join(pending)
        pending = []
    rows = []
    for f in dataclasses.fields(chk.options):
        default = f.default if f.default is not dataclasses.MISSING else None
        rows.append((f.name, _fmt(default), comments.get(f.name, "")))
    return rows


def _fmt(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def check_page(chk: Check) -> str:
    lines = [
        f"# {chk.code} {chk.name}",
        "",
        f"*{chk.summary}*",
        "",
        f"Default severity: **{chk.severity.label}**. Category: {chk.category}.",
    ]
    if chk.min_server_version:
        lines.append(f"Needs PostgreSQL {chk.min_server_version // 10000} or newer.")
    body = chk.doc.split("\n", 1)[1].strip() if "\n" in chk.doc else ""
    if body:
        lines += ["", body]
    rows = option_rows(chk)
    if rows:
        lines += ["", "## Options", "", "| option | default | why |", "|---|---|---|"]
        lines += [f"| `{n}` | {d} | {w} |" for n, d, w in rows]
    lines += [
        "",
        "## Silencing it",
        "",
        f"`qadvisor check --ignore {chk.code}` drops the check; "
        f"`--ignore {chk.code}:schema.name` drops one finding (the finding's `key`).",
        "",
    ]
    return "\n".join(lines)


def write_pages(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for chk in load_checks():
        path = directory / f"{chk.code}.md"
        path.write_text(check_page(chk))
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/checks")
    for p in write_pages(target):
        print(p)
