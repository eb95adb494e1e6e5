"""Evidence values as text, shared by the human-readable renderers."""

from __future__ import annotations

import json
import math
import re


def evidence_text(v: object, none: str = "-") -> str:
    """Numbers with thousands separators (whole floats without ".0"), containers as JSON."""
    if v is None:
        return none
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isfinite(v) and v.is_integer() and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,}"
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, default=str)


def docs_url(base: str | None, path: str) -> str | None:
    """Where a docs page (``docs/checks/QA101.md``, a path of qadvisor's repository) is
    published, when ``base`` (--docs-url) says where qadvisor's docs/ is; None without it: a
    relative link pasted into another repository's issue would point into that one."""
    return base.rstrip("/") + "/" + path if base else None


def statement_start(text: str, width: int = 160) -> str:
    """A statement on one line, cut at ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def first_sentence(text: str, width: int = 140) -> str:
    """The first sentence of a message (a number such as 1.5 does not end one), on one line
    and cut at ``width`` characters: a summary line."""
    flat = " ".join(text.split())
    m = re.search(r"[.!?](?=\s+[A-Z(])", flat)
    head = flat[: m.start() + 1] if m else flat
    return head if len(head) <= width else head[: width - 3] + "..."
