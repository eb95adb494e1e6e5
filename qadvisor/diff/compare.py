"""What changed between two reports, from their JSON form (the public contract, so a report
written by an earlier run or another qadvisor version compares as well as a fresh one).

A finding is the same finding in both when its key is (``QA201:public.jobs``). One that is in
the old report and not in the new is called gone only when the new report's check judged its
object: the check ran and left no skip for that queue; otherwise it is "not judged" (no
all-clear that was not earned). A figure moved when a number of the finding's evidence (not a
threshold) changed by at least ``MOVED`` of the old value: smaller changes are the noise of
estimates and counters between runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qadvisor.derive.margins import NOISE_MARGIN
from qadvisor.model import Severity
from qadvisor.render.labels import is_threshold, label, value_text

# A figure moved when it changed by at least this share of its old value.
MOVED = NOISE_MARGIN


@dataclass(frozen=True)
class Side:
    """One of the two reports: where it came from and what it is of."""

    source: str
    database: str
    checked_at: str | None
    kind: str  # "report" or "snapshot" (judged here)


@dataclass(frozen=True)
class Moved:
    key: str
    field: str
    label: str
    old: float
    new: float
    old_text: str
    new_text: str

    @property
    def change(self) -> float:
        """The change as a share of the old value (the new value when the old was 0)."""
        return (self.new - self.old) / abs(self.old) if self.old else float("inf")


@dataclass(frozen=True)
class Changes:
    old: Side
    new: Side
    new_findings: tuple[Mapping[str, Any], ...] = ()
    gone: tuple[Mapping[str, Any], ...] = ()
    # In the old report, absent from the new one, whose check did not judge its object there.
    not_judged: tuple[tuple[Mapping[str, Any], str], ...] = ()
    # (finding in the new report, its old severity)
    severity_changed: tuple[tuple[Mapping[str, Any], str], ...] = ()
    moved: tuple[Moved, ...] = ()
    # (code, queue or None): a check that judged that queue in the old report and skipped it in
    # the new one, with the new reason; and the reverse.
    no_longer_judged: tuple[tuple[str, str | None, str], ...] = ()
    judged_again: tuple[tuple[str, str | None], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def worse(self, floor: Severity | None, skips: bool = False) -> bool:
        """A finding new, or raised, to at least ``floor`` (None: none counts); with
        ``skips``, also a check that can no longer judge a queue it judged."""
        if floor is not None:
            if any(Severity.parse(f["severity"]) >= floor for f in self.new_findings):
                return True
            for f, old in self.severity_changed:
                now = Severity.parse(f["severity"])
                if now > Severity.parse(old) and now >= floor:
                    return True
        return skips and bool(self.no_longer_judged)


def _queue(finding: Mapping[str, Any]) -> str | None:
    t = finding.get("target") or {}
    return f"{t['schema']}.{t['table']}" if t.get("schema") and t.get("table") else None


def _judged(report: Mapping[str, Any], finding: Mapping[str, Any]) -> str | None:
    """Why the report's check did not judge the finding's object; None when it did."""
    code = finding["code"]
    if code not in report.get("checks_run", ()):
        return f"{code} did not run"
    queue = _queue(finding)
    for s in report.get("skipped", ()):
        if s["code"] == code and (s.get("queue") is None or queue is None or s["queue"] == queue):
            return str(s["reason"])
    return None


def _skips(report: Mapping[str, Any]) -> dict[tuple[str, str | None], str]:
    return {(s["code"], s.get("queue")): str(s["reason"]) for s in report.get("skipped", ())}


def _moved(
    key: str, old: Mapping[str, Any], new: Mapping[str, Any], own: Mapping[str, str] | None
) -> list[Moved]:
    out = []
    for name, was in old.items():
        a, b = _number(was), _number(new.get(name))
        if a is None or b is None or is_threshold(name) or a == b:
            continue
        if a and abs(b - a) < MOVED * abs(a):
            continue
        out.append(Moved(key, name, label(name, own), a, b, value_text(name, was),
                         value_text(name, new[name])))  # fmt: skip
    return out


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def compare(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    a: Side,
    b: Side,
    labels: Mapping[str, Mapping[str, str]] | None = None,
) -> Changes:
    """What changed from report ``old`` to report ``new`` (JSON reports); ``labels``: the
    labels each check (by code) declares for its own evidence fields."""
    before = {f["key"]: f for f in old.get("findings", ())}
    after = {f["key"]: f for f in new.get("findings", ())}
    gone, not_judged = [], []
    for key, f in before.items():
        if key in after:
            continue
        why = _judged(new, f)
        if why is None:
            gone.append(f)
        else:
            not_judged.append((f, why))
    changed = [
        (f, before[k]["severity"]) for k, f in after.items()
        if k in before and before[k]["severity"] != f["severity"]
    ]  # fmt: skip
    moved = [
        m for k, f in after.items() if k in before
        for m in _moved(k, before[k].get("evidence") or {}, f.get("evidence") or {},
                        (labels or {}).get(f["code"]))
    ]  # fmt: skip
    old_skips, new_skips = _skips(old), _skips(new)
    lost = [(c, q, r) for (c, q), r in new_skips.items()
            if (c, q) not in old_skips and c in old.get("checks_run", ())]  # fmt: skip
    again = [(c, q) for (c, q) in old_skips
             if (c, q) not in new_skips and c in new.get("checks_run", ())]  # fmt: skip
    notes = []
    if a.database != b.database:
        notes.append(f"the reports are of two databases: {a.database} and {b.database}")
    return Changes(
        a,
        b,
        new_findings=tuple(f for k, f in after.items() if k not in before),
        gone=tuple(gone),
        not_judged=tuple(not_judged),
        severity_changed=tuple(changed),
        moved=tuple(sorted(moved, key=lambda m: (m.key, -abs(m.change), m.field))),
        no_longer_judged=tuple(lost),
        judged_again=tuple(again),
        notes=tuple(notes),
    )
