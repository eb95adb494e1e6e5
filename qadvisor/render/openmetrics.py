"""The OpenMetrics report: what a Prometheus that a platform team already runs scrapes (the
node_exporter textfile collector) or is pushed (a Pushgateway), for dashboards and alerts.

Every metric is a gauge of the moment the report was made (no timestamp: the collector's
scrape or the push gives one), named ``qadvisor_...`` with its unit in its name (``_bytes``,
``_seconds``, ``_ratio``, the tuples or rows it counts); no ``_total``, since none is a
counter. Each family is written whole, its samples sorted, so the same report gives the same
bytes; the file ends with ``# EOF``. With only gauges and no timestamps it is also valid
Prometheus text format, which is what the textfile collector and the Pushgateway read.

No label takes unbounded values: labels are the database (its label in a fleet), a queue
table's schema and name, an index or id column of it (the catalog's names), a check's code,
name and severity, and why a database could not be judged (a closed set). No statement text,
no statement hash (it changes with every rewrite of a claim), no DSN, no host, no password.

A figure qadvisor could not estimate (a live set hidden from the role, a table never
analyzed) has no sample: a guessed number would be alerted on as a measured one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TextIO

from qadvisor import __version__
from qadvisor.derive.estimates import live_rows, vacuum_trigger
from qadvisor.derive.id_range import id_limit, ids_used
from qadvisor.model import FleetMember, FleetReport, Report

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    unit: str | None = None  # the name's own suffix, declared for OpenMetrics parsers


# Every family, in the order they are written.
FAMILIES = (
    Family("qadvisor_build_info", "The qadvisor that made these figures (always 1)."),
    Family(
        "qadvisor_database_judged",
        "1 when the database was judged; 0 when it could not be, with the reason: "
        "no_connections, no_connect_privilege, connect_failed, collect_failed, run_timeout, "
        "error.",
    ),
    Family("qadvisor_database_queues", "Queue tables found in the database."),
    Family(
        "qadvisor_database_checks_skipped",
        "Checks that could not judge any queue of the database (a fact of the whole "
        "database was missing).",
    ),
    Family(
        "qadvisor_findings",
        "Findings of a check, by severity, on a queue table (without schema and table: on "
        "the server or the database).",
    ),
    Family("qadvisor_queue_live_rows", "Rows in the queue's live set, estimated from statistics."),
    Family("qadvisor_queue_table_rows", "Rows in the queue table (reltuples)."),
    Family(
        "qadvisor_queue_archive_ratio",
        "Share of the queue table's rows outside its live set (finished jobs).",
        "ratio",
    ),
    Family("qadvisor_queue_index_bytes", "Size of an index of the queue table, in bytes.", "bytes"),
    Family("qadvisor_queue_dead_tuples", "Dead tuples in the queue table (n_dead_tup)."),
    Family(
        "qadvisor_queue_vacuum_trigger_dead_tuples",
        "Dead tuples at which autovacuum vacuums the queue table: threshold + scale factor x "
        "reltuples, capped by autovacuum_vacuum_max_threshold.",
    ),
    Family(
        "qadvisor_queue_claim_mean_seconds",
        "Mean execution time of the queue's claims in pg_stat_statements (all its claims, "
        "weighted by their calls).",
        "seconds",
    ),
    Family(
        "qadvisor_queue_claim_shared_blocks_per_call",
        "Shared blocks (hit and read) per call of the queue's claims in pg_stat_statements.",
    ),
    Family(
        "qadvisor_queue_ids_left",
        "Ids the queue table's integer id column can still take (its type's and sequence's "
        "limit less the last id given).",
    ),
    Family(
        "qadvisor_queue_checks_skipped",
        "Checks that could not judge the queue table (a fact hidden from the role, another "
        "session's lock, an unknown claim).",
    ),
)
_BY_NAME = {f.name: f for f in FAMILIES}


@dataclass
class _Samples:
    by_family: dict[str, dict[Labels, float]] = field(default_factory=dict)

    def add(self, name: str, labels: Iterable[tuple[str, str]], value: float) -> None:
        assert name in _BY_NAME, name
        self.by_family.setdefault(name, {})[tuple(labels)] = value


def render(report: Report) -> str:
    samples = _Samples()
    _build(samples)
    _judged(samples, report.snapshot.server.database, report)
    return _exposition(samples)


def render_fleet(fleet: FleetReport) -> str:
    samples = _Samples()
    _build(samples)
    for m in fleet.members:
        _member(samples, m)
    return _exposition(samples)


def _build(samples: _Samples) -> None:
    samples.add("qadvisor_build_info", [("version", __version__)], 1)


def _member(samples: _Samples, m: FleetMember) -> None:
    if m.report is not None:
        _judged(samples, m.database, m.report)
    else:
        reason = m.not_judged or "error"
        samples.add("qadvisor_database_judged", [("database", m.database), ("reason", reason)], 0)


def _judged(samples: _Samples, database: str, report: Report) -> None:
    snap = report.snapshot
    db = ("database", database)
    samples.add("qadvisor_database_judged", [db], 1)
    samples.add("qadvisor_database_queues", [db], len(snap.queues))
    whole = {s.code for s in report.skipped if s.queue is None}
    samples.add("qadvisor_database_checks_skipped", [db], len(whole))
    counts: dict[Labels, int] = {}
    for f in report.findings:
        t = f.target
        labels: list[tuple[str, str]] = [
            db, ("code", f.code), ("name", f.name), ("severity", f.rating.label)
        ]  # fmt: skip
        if t.schema and t.table:
            labels += [("schema", t.schema), ("table", t.table)]
        key = tuple(labels)
        counts[key] = counts.get(key, 0) + 1
    for labels_, n in counts.items():
        samples.add("qadvisor_findings", labels_, n)
    for queue in snap.queues:
        table = snap.table(queue.schema, queue.table)
        if table is None:
            continue
        q = [db, ("schema", table.schema), ("table", table.name)]
        skipped = {s.code for s in report.skipped if s.queue in (None, queue.qualified)}
        samples.add("qadvisor_queue_checks_skipped", q, len(skipped))
        if table.reltuples >= 0:
            samples.add("qadvisor_queue_table_rows", q, table.reltuples)
        est = live_rows(table, queue.live)
        if est.rows is not None:
            samples.add("qadvisor_queue_live_rows", q, round(est.rows))
            if table.reltuples > 0:
                archive = max(table.reltuples - est.rows, 0.0) / table.reltuples
                samples.add("qadvisor_queue_archive_ratio", q, round(archive, 6))
        for idx in table.indexes:
            samples.add("qadvisor_queue_index_bytes", [*q, ("index", idx.name)], idx.bytes)
        samples.add("qadvisor_queue_dead_tuples", q, table.stats.n_dead_tup)
        trigger = vacuum_trigger(snap, table)
        samples.add("qadvisor_queue_vacuum_trigger_dead_tuples", q, round(trigger.value))
        _claims(samples, report, queue.qualified, q)
        for seq in table.id_sequences:
            limit = id_limit(seq)
            used, _ = ids_used(table, seq)
            if limit is not None and used is not None:
                left = max(limit - used, 0) // seq.increment
                samples.add("qadvisor_queue_ids_left", [*q, ("column", seq.column)], left)


def _claims(samples: _Samples, report: Report, queue: str, q: list[tuple[str, str]]) -> None:
    """The queue's claims as pg_stat_statements counted them, as one mean claim."""
    seen: set[tuple[int | None, str | None]] = set()
    calls = 0
    ms = blocks = 0.0
    with_blocks = 0
    for s in report.snapshot.statements:
        if s.queue != queue or s.source != "pg_stat_statements" or not s.calls:
            continue
        if (s.queryid, s.role) in seen or s.mean_exec_ms is None:
            continue
        seen.add((s.queryid, s.role))
        calls += s.calls
        ms += s.mean_exec_ms * s.calls
        if s.shared_blks_per_call is not None:
            blocks += s.shared_blks_per_call * s.calls
            with_blocks += s.calls
    if calls:
        samples.add("qadvisor_queue_claim_mean_seconds", q, ms / calls / 1000)
    if with_blocks:
        samples.add("qadvisor_queue_claim_shared_blocks_per_call", q, blocks / with_blocks)


def _exposition(samples: _Samples) -> str:
    lines: list[str] = []
    for family in FAMILIES:
        found = samples.by_family.get(family.name)
        if not found:
            continue
        lines.append(f"# TYPE {family.name} gauge")
        if family.unit:
            lines.append(f"# UNIT {family.name} {family.unit}")
        lines.append(f"# HELP {family.name} {family.help}")
        for labels, value in sorted(found.items()):
            text = ",".join(f'{k}="{_escaped(v)}"' for k, v in labels)
            lines.append(f"{family.name}{{{text}}} {_number(value)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def write(report: Report, out: TextIO) -> None:
    out.write(render(report))


def write_fleet(fleet: FleetReport, out: TextIO) -> None:
    out.write(render_fleet(fleet))
