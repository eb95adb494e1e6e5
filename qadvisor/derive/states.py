"""The words of a queue's states, and which of a status column's values a claim never waits
for. Pure.

A status column's values read as a job's life cycle: waiting (``pending``, ``queued``...),
held by a worker (``running``...), finished (``done``, ``failed``...). A value holding nearly
every row is the archive whatever it is called: a live set is the small, steady part of a
queue table.
"""

from __future__ import annotations

from qadvisor.units import human_share

# Status values that mean "waiting to be claimed", in the order they are preferred.
LIVE_WORDS = (
    "pending", "queued", "available", "ready", "todo", "new", "enqueued", "waiting",
    "scheduled", "created", "retry", "retryable", "runnable", "open",
)  # fmt: skip
# Status values of finished rows: the archive.
ARCHIVE_WORDS = frozenset(
    """
    done completed complete succeeded success successful finished failed failure
    cancelled canceled discarded archived dead expired aborted processed error errored
    exception
    """.split()  # noqa: SIM905
)
# Status values of rows a worker holds: neither waiting nor finished.
INFLIGHT_WORDS = frozenset(
    """
    active running executing doing processing started picked locked claimed working busy
    in_progress inprogress
    """.split()  # noqa: SIM905
)
# A value holding at least this share of the rows ANALYZE saw, beside others, is the archive
# (a live set is the small, steady part of a queue table), unless it reads as waiting.
ARCHIVE_SHARE = 0.99


def status_like(column: str) -> bool:
    """A column named as a status (``status``, ``state``, ``job_state``...)."""
    return column.lower().endswith(("status", "state", "statename"))


def not_waiting(value: str, share: float | None = None, values: int = 2) -> str | None:
    """Why a claim never waits for this value of a status (a finished state, a running one,
    the archive's bulk: ``share`` of the rows ANALYZE saw, among ``values`` values), or None
    when it may."""
    if value.lower() in INFLIGHT_WORDS:
        return "a running state"
    return archived(value, share, values)


def archived(value: str, share: float | None = None, values: int = 2) -> str | None:
    """Why rows holding this value of a status are the archive (a finished state, or the
    bulk of the rows ANALYZE saw, as for ``not_waiting``), or None."""
    word = value.lower()
    if word in ARCHIVE_WORDS:
        return "a finished state"
    if (
        share is not None
        and share >= ARCHIVE_SHARE
        and values > 1
        and word not in LIVE_WORDS
        and word not in INFLIGHT_WORDS
    ):
        return f"{human_share(share)} of the rows ANALYZE saw: the archive"
    return None
