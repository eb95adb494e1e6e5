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
