"""Hand-built snapshots for unit tests of checks (no server)."""

from __future__ import annotations

from typing import Any

from qadvisor.model import (
    Column,
    ColumnStats,
    Index,
    LivePredicate,
    Queue,
    Report,
    Sample,
    ServerInfo,
    Severity,
    Snapshot,
    Table,
    TableStats,
)

DEFAULT_SETTINGS = {
    "autovacuum": "on",
    "track_counts": "on",
    "autovacuum_vacuum_threshold": "50",
    "autovacuum_vacuum_scale_factor": "0.2",
    "autovacuum_vacuum_max_threshold": "100000000",
    "plan_cache_mode": "auto",
}

PENDING = LivePredicate("status", "in", ("pending",), "status values of status")


def index(name: str, columns: tuple[str | None, ...], nbytes: int, **kw: Any) -> Index:
    base: dict[str, Any] = {
        "definition": f"CREATE INDEX {name} ON public.jobs ({', '.join(map(str, columns))})",
        "predicate": None,
        "is_unique": False,
        "is_primary": False,
        "is_constraint": False,
        "is_valid": True,
        "reltuples": 0.0,
        "idx_scan": 0,
        "idx_tup_read": 0,
        "idx_tup_fetch": 0,
    }
    base.update(kw)
    return Index(name=name, columns=columns, bytes=nbytes, **base)


def jobs_table(
    *,
    reltuples: float = 10_000_000,
    pending_freq: float | None = 0.0005,
    indexes: tuple[Index, ...] = (),
    reloptions: dict[str, str] | None = None,
    stats: TableStats | None = None,
    stats_visible: bool = True,
) -> Table:
    column_stats: tuple[ColumnStats, ...] = ()
    if pending_freq is not None:
        column_stats = (
            ColumnStats(
                "status", 0.0, 2.0, 5, ("done", "pending"), (1 - pending_freq, pending_freq)
            ),
            ColumnStats("created_at", 0.0, -1.0, 8),
        )
    return Table(
        schema="public",
        name="jobs",
        reltuples=reltuples,
        relpages=int(reltuples / 60),
        bytes=int(reltuples * 130),
        reloptions=reloptions or {},
        stats=stats or TableStats(n_live_tup=int(reltuples), n_dead_tup=1_753_949),
        columns=(
            Column("id", "bigint", True),
            Column("status", "text", True),
            Column("created_at", "timestamp with time zone", True),
            Column("finished_at", "timestamp with time zone"),
        ),
        indexes=indexes,
        column_stats=column_stats,
        stats_visible=stats_visible,
    )


def snapshot(
    *tables: Table,
    live: LivePredicate | None = PENDING,
    settings: dict[str, str] | None = None,
    version_num: int = 180006,
    sample: Sample | None = None,
) -> Snapshot:
    return Snapshot(
        server=ServerInfo(f"{version_num // 10000}.x", version_num, "app", "monitor"),
        settings={**DEFAULT_SETTINGS, **(settings or {})},
        role_settings=(),
        queues=tuple(Queue(t.schema, t.name, live, "test") for t in tables),
        tables=tables,
        sample=sample,
    )


def report(check_code: str, snap: Snapshot) -> Report:
    """The report of one check on a snapshot (for ``tests.helpers.assert_quiet``)."""
    from qadvisor.engine import run_checks
    from qadvisor.registry import load_checks

    chk = [c for c in load_checks() if c.code == check_code]
    assert chk, f"no check {check_code}"
    return run_checks(snap, chk)


def run(check_code: str, snap: Snapshot) -> list[Any]:
    """Findings and unmet reasons of one check."""
    out = report(check_code, snap)
    return [*out.findings, *out.skipped]


def assert_margin_answer(found: list[Any], again: list[Any], severity: Any) -> None:
    """One snapshot judged twice near a threshold with a margin: the same answer both times;
    no finding (``severity`` None), info that names the threshold it is near, or the check's
    severity past the margin."""
    assert found == again
    findings = [f for f in found if hasattr(f, "severity") and hasattr(f, "evidence")]
    if severity is None:
        assert not findings, findings
        return
    (f,) = found
    assert f in findings and f.severity is severity, f.message
    assert bool(f.evidence.get("near_threshold")) == (severity is Severity.INFO)
