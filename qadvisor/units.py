"""Human-readable numbers for messages (evidence keeps the raw values)."""

from __future__ import annotations

import math


def human_bytes(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def human_count(n: float) -> str:
    return f"{round(n):,}"


def human_share(share: float) -> str:
    """A share as a percentage with the digits that tell it from zero: 99.97 % of an archive,
    0.0067 % of a live set."""
    if share >= 1:
        return "100%"
    if share >= 0.999:
        return f"{share * 100:.6g}%"  # 99.9993 %: an archive that is all but the whole table
    if share == 0 or share >= 0.001:
        return f"{share:.2%}"
    return f"{share * 100:.2g}%"


def human_seconds(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def nice_ceil(n: float) -> int:
    """Round up to 1, 2 or 5 times a power of ten: thresholds people can read and remember."""
    if n <= 1:
        return 1
    exp = 10 ** math.floor(math.log10(n))
    for step in (1, 2, 5, 10):
        if n <= step * exp:
            return int(step * exp)
    return int(10 * exp)


def nice_round(n: float) -> tuple[int, float, float]:
    """The 1, 2 or 5 times a power of ten nearest ``n`` on a log scale, with the range of
    figures that round to it (the geometric midpoints with its neighbours): a threshold a
    person can read, which the few tens of percent a new ANALYZE's sample moves an estimate
    by do not change unless ``n`` is near the range's edge. 5,000 takes 3,163 to 7,071."""
    if n <= 1:
        return 1, 0.0, math.sqrt(2)
    exp = math.floor(math.log10(n))
    steps = [s * 10.0**e for e in (exp - 1, exp, exp + 1) for s in (1, 2, 5)]
    i = min(range(1, len(steps) - 1), key=lambda k: abs(math.log(steps[k] / n)))
    low = math.sqrt(steps[i - 1] * steps[i])
    high = math.sqrt(steps[i] * steps[i + 1])
    return round(steps[i]), low, high
