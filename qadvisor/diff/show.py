"""What changed, in text, markdown or JSON (the last a contract of its own: ``diff_version``
1, fields added, never renamed)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from qadvisor.diff.compare import Changes, Moved, Side

DIFF_VERSION = 1


def _finding(f: Mapping[str, Any]) -> dict[str, Any]:
    return {"key": f["key"], "code": f["code"], "name": f["name"], "severity": f["severity"],
            "message": f["message"]}  # fmt: skip


def _moved(m: Moved) -> dict[str, Any]:
    return {"key": m.key, "field": m.field, "label": m.label, "old": m.old, "new": m.new,
            "old_text": m.old_text, "new_text": m.new_text}  # fmt: skip


def _side(s: Side) -> dict[str, Any]:
    return {"source": s.source, "kind": s.kind, "database": s.database,
            "checked_at": s.checked_at}  # fmt: skip


def as_dict(c: Changes, worse: bool) -> dict[str, Any]:
    return {
        "diff_version": DIFF_VERSION,
        "old": _side(c.old),
        "new": _side(c.new),
        "new_findings": [_finding(f) for f in c.new_findings],
        "gone": [_finding(f) for f in c.gone],
        "not_judged": [{**_finding(f), "reason": why} for f, why in c.not_judged],
        "severity_changed": [{**_finding(f), "old_severity": old} for f, old in c.severity_changed],
        "moved": [_moved(m) for m in c.moved],
        "no_longer_judged": [
            {"code": code, "queue": q, "reason": r} for code, q, r in c.no_longer_judged
        ],
        "judged_again": [{"code": code, "queue": q} for code, q in c.judged_again],
        "notes": list(c.notes),
        "worse": worse,
    }


def _lines(
    c: Changes,
    worse: bool,
    item: Callable[[str], str],
    code: Callable[[str], str],
    t: Callable[[str], str],
) -> list[str]:
    """The sections shared by text and markdown: ``item`` makes a list item, ``code`` an
    inline name, ``t`` plain words (escaped for markdown)."""
    out: list[str] = []

    def section(title: str, items: list[str]) -> None:
        if items:
            out.extend([f"{title} ({len(items)}):", *(item(i) for i in items), ""])

    def on(queue: str | None) -> str:
        return code(queue) if queue else "the whole database"

    section("New findings", [f"{f['severity']} {code(f['key'])}: {t(f['message'])}"
                             for f in c.new_findings])  # fmt: skip
    section("Gone (judged again, not found)", [f"{f['severity']} {code(f['key'])}" for f in c.gone])
    section("Severity changed", [f"{code(f['key'])}: {old} -> {f['severity']}"
                                 for f, old in c.severity_changed])  # fmt: skip
    section(
        "Figures that moved",
        [f"{code(m.key)}: {t(m.label)} {t(m.old_text)} -> {t(m.new_text)}" for m in c.moved],
    )
    section(
        "Not judged in the new report (not called gone)",
        [f"{code(f['key'])}: {t(why)}" for f, why in c.not_judged],
    )
    section(
        "Checks that could judge before and cannot now",
        [f"{k} on {on(q)}: {t(r)}" for k, q, r in c.no_longer_judged],
    )
    section(
        "Checks that judge again what they could not",
        [f"{k} on {on(q)}" for k, q in c.judged_again],
    )
    if not out:
        out = ["No change in findings, severities, figures or what was judged.", ""]
    return [*out, "Got worse." if worse else "Not worse."]


def _header(c: Changes) -> list[str]:
    def side(name: str, s: Side) -> str:
        when = f", checked at {s.checked_at}" if s.checked_at else ""
        return f"{name}: {s.source} ({s.kind} of {s.database}{when})"

    return [side("old", c.old), side("new", c.new), *(f"note: {n}" for n in c.notes), ""]


def text(c: Changes, worse: bool) -> str:
    def same(s: str) -> str:
        return s

    body = _lines(c, worse, lambda i: f"  {i}", same, same)
    return "\n".join([*_header(c), *body]) + "\n"


def markdown(c: Changes, worse: bool) -> str:
    from qadvisor.render.markdown import inline_code, plain

    head = [f"- {plain(line)}" for line in _header(c) if line]
    body = _lines(c, worse, lambda i: f"- {i}", inline_code, plain)
    titled: list[str] = []
    for line in body:
        title = line.endswith(":") and not line.startswith("- ")
        titled += [f"**{line[:-1]}**", ""] if title else [line]
    return "\n".join(["# qadvisor diff", "", *head, "", *titled]) + "\n"


def json_text(c: Changes, worse: bool) -> str:
    return json.dumps(as_dict(c, worse), indent=2, sort_keys=True) + "\n"


FORMATS: dict[str, Callable[[Changes, bool], str]] = {
    "text": text,
    "markdown": markdown,
    "json": json_text,
}
