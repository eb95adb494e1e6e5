"""A finding's proof (``--prove``) as the line the text and markdown reports print, and as the
JSON object the contract names."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from qadvisor.model import Proof, ProofMeasure
from qadvisor.units import human_bytes


def proof_dict(proof: Proof | None) -> dict[str, Any] | None:
    if proof is None:
        return None
    out = asdict(proof)
    out["scale"] = {
        "rows": proof.rows,
        "table_rows": proof.table_rows,
        "scaled_down": proof.scaled_down,
        "live_rows": proof.live_rows,
    }
    for key in ("rows", "table_rows", "scaled_down", "live_rows"):
        del out[key]
    return {key: _lists(value) for key, value in out.items()}


def _lists(value: Any) -> Any:
    """The tuples of the proof's dataclasses as the lists JSON has."""
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_lists(v) for v in value]
    return value


def proof_lines(proof: Proof) -> list[str]:
    """One line of what was measured, then the notes (what could not be, what did not help)."""
    if not proof.server_version:
        return list(proof.notes)
    size = f"{proof.rows:,}-row copy"
    if proof.scaled_down:
        size += f" (scaled down from {proof.table_rows:,} rows)"
    figures = [_figure(m) for m in _shown(proof.measures)]
    if proof.finding_gone is True:
        verdict = "finding gone"
    elif proof.check_quiet:
        verdict = "the check is quiet but nothing measurably changed"
    elif proof.finding_gone is False:
        verdict = "finding NOT gone"
    elif proof.reproduced:
        # Its fix was not run (a part left to the DBA) or failed there: the notes say which.
        verdict = "fix not proven on the copy"
    else:
        verdict = "finding not reproduced on the copy"
    where = f"PostgreSQL {proof.server_version}"
    if proof.server_version.split(".")[0] != proof.checked_version.split(".")[0]:
        where += f" (the checked server runs {proof.checked_version.split(' ')[0]})"
    head = f"proven on a {size}, {where}: "
    if proof.finding_gone is not True:
        head = f"not proven on a {size}, {where}: "
    first = head + ", ".join([*figures, verdict])
    return [first, *proof.notes]


def _shown(measures: tuple[ProofMeasure, ...]) -> list[ProofMeasure]:
    """The first statement's time, the index bytes and the table's rows when the fix changed
    them, and a vacuum proof's runs and peak of dead tuples."""
    claim = [m for m in measures if m.measure == "claim ms"][:1]
    sizes = [m for m in measures if m.measure in ("index bytes", "table rows")]
    vacuum = [m for m in measures if m.measure in ("autovacuum runs", "dead tuples at peak")]
    return claim + [m for m in sizes if m.before != m.after] + vacuum


_COUNTS = ("autovacuum runs", "dead tuples at peak", "table rows")


def _figure(m: ProofMeasure) -> str:
    if m.measure == "index bytes":
        return f"index bytes {_bytes(m.before)} -> {_bytes(m.after)}" + _unmoved(m)
    if m.measure in _COUNTS:
        return f"{m.measure} {_count(m.before)} -> {_count(m.after)}" + _unmoved(m)
    text = (
        f"claim {_ms(m.before)}{_range(m.before_spread)} -> {_ms(m.after)}"
        f"{_range(m.after_spread)}{_unmoved(m)}"
    )
    if m.plan_before or m.plan_after:
        if m.plan_before == m.plan_after:
            text += f" (plan: {m.plan_after})"
        else:
            text += f" (plan: {m.plan_before or '?'} -> {m.plan_after or '?'})"
    return text


def _unmoved(m: ProofMeasure) -> str:
    return ", no measurable change" if m.change == "none" else ""


def _range(spread: tuple[float, float] | None) -> str:
    """The spread of a timing's runs, as the median is written."""
    if spread is None:
        return ""
    low, high = spread
    if high >= 1000:
        return f" ({low / 1000:.2f}-{high / 1000:.2f} s)"
    return f" ({low:.3g}-{high:.3g} ms)"


def _ms(v: float | None) -> str:
    if v is None:
        return "no figure"
    return f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.3g} ms"


def _count(v: float | None) -> str:
    return "?" if v is None else f"{v:,.0f}"


def _bytes(v: float | None) -> str:
    return "?" if v is None else human_bytes(v)
