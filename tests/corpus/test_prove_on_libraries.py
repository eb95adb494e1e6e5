"""--prove on a database a real queue library wrote: the copy is built from what qadvisor
read of that database (its statistics, and its statements as pg_stat_statements recorded them,
literals shown as $n), not from a table this suite designed."""

from __future__ import annotations

from typing import Any

import pytest

from qadvisor.demo.pgserver import LocalServer
from tests.corpus.fixwalk import source_label
from tests.corpus.library import Observed
from tests.corpus.test_agenda import AGENDA
from tests.corpus.test_oban import OBAN
from tests.corpus.test_pgboss import PGBOSS
from tests.corpus.test_procrastinate import PROCRASTINATE
from tests.helpers import Run, qadvisor

NEW_INDEX = "oban_jobs_available_queue_priority_scheduled_at_id_idx"


# One proof per database (it builds and churns a copy of about 1 M rows): both tests read it.
_PROVEN: dict[str, Run] = {}


def _proofs(
    observed: Observed, server: LocalServer, code: str, *ignored: str
) -> dict[str, dict[str, Any]]:
    """The proof of each ``code`` finding, by finding key; ``ignored``: codes left out of the
    run (each proof costs its seconds on the corpus worker)."""
    dsn = server.dsn(observed.db)
    if dsn not in _PROVEN:
        left_out = [a for c in ignored for a in ("--ignore", c)]
        _PROVEN[dsn] = qadvisor("check", dsn, "--format", "json", "--prove", *left_out, timeout=600)
    run = _PROVEN[dsn]
    assert run.rc == 1 and run.stdout.startswith("{"), run.stderr
    found = {f["key"]: f["proof"] for f in run.findings(code)}
    assert found and all(p is not None for p in found.values()), found
    return found


def _proof(observed: Observed, server: LocalServer, code: str) -> dict[str, Any]:
    (proof,) = _proofs(observed, server, code).values()
    return proof


def _gone(proof: dict[str, Any]) -> dict[str, Any]:
    """``proof``, which must say its finding came back on the copy and went with the fix."""
    assert proof["reproduced"] is True and proof["finding_gone"] is True, proof["notes"]
    return proof


class TestProveOban:
    library = OBAN

    @pytest.mark.parametrize("stage", ["aged"], indirect=True)
    @pytest.mark.xfail(
        reason="known gap: the copy refuses a value qadvisor fills in for a parameter of "
        'Oban\'s claim whose value it never saw (time zone "" not recognized), so the claim '
        "is timed with the row's own attempted_at and the proof is not reproduced",
    )
    def test_the_archive_bloated_index_is_proven_on_a_copy(
        self, observed: Observed, corpus_server: LocalServer, stage: str
    ) -> None:
        proof = _gone(_proof(observed, corpus_server, "QA101"))
        (index,) = [m for m in proof["measures"] if m["measure"] == "index bytes"]
        assert index["subject"].endswith(NEW_INDEX) and 0 < index["after"] < 1_000_000
        # The copy's timings are held against what the checked server's pg_stat_statements
        # measured of the same statements, and none of the library's claims on the table is
        # left out silently: each is timed (a measure names it) or a note says why not.
        assert any("against the checked server's pg_stat_statements" in n for n in proof["notes"])
        claims = [
            source_label(st)
            for st in observed.statements()
            if st.get("queue") == "public.oban_jobs" and st["source"] == "pg_stat_statements"
        ]
        assert claims, observed.statements()
        timed = " ".join(m["subject"] for m in proof["measures"])
        for claim in claims:
            said = [n for n in proof["notes"] if n.startswith(claim) and ": not timed: " in n]
            assert claim in timed or said, (claim, proof["notes"], proof["measures"])

    @pytest.mark.parametrize("stage", ["aged"], indirect=True)
    def test_the_claim_is_timed_on_the_copy(
        self, observed: Observed, corpus_server: LocalServer, stage: str
    ) -> None:
        # The producer's fetch sets attempted_at = timezone('UTC', now()); pg_stat_statements
        # shows 'UTC' as $n, and the value qadvisor fills in ('') is refused on the copy: the
        # fetch is timed keeping attempted_at's value, and the proof says so.
        proof = _proof(observed, corpus_server, "QA101")
        assert not [n for n in proof["notes"] if ": not timed: " in n], proof["notes"]
        kept = [n for n in proof["notes"] if ": timed with SET attempted_at keeping" in n]
        assert len(kept) == 1 and 'time zone "" not recognized' in kept[0], proof["notes"]


# Libraries whose tables a copy could not be built for until it could fill their live sets: a
# range over an enum (pg-boss), a union of conditions on two timestamps (Agenda), a boolean
# column whose pg_stats values are spelled t and f (procrastinate).


class TestProvePgBoss:
    library = PGBOSS

    @pytest.mark.parametrize("stage", ["aged"], indirect=True)
    @pytest.mark.xfail(
        reason="known gap: QA101 on job_common_pkey still reports on the copy after its fix, "
        "now that a partial index no recorded statement matches is not proposed (the fix "
        "builds nothing for the key, so nothing moves); the test still expects it gone",
    )
    def test_a_range_over_an_enum_is_copied_and_the_index_fix_proven(
        self, observed: Observed, corpus_server: LocalServer, stage: str
    ) -> None:
        proofs = _proofs(observed, corpus_server, "QA101", "QA201", "QA301")
        # The primary key stays: what the new partial index changes is the fetch's cost, and
        # the fetch calls pg-boss's own functions (pgboss.job_now()), which a copy of the table
        # does not have, so it is not timed. The check falls quiet, but nothing measured moved:
        # the proof does not call the finding gone.
        pkey = proofs["QA101:pgboss.job_common_pkey"]
        assert pkey["reproduced"] is True and pkey["scale"]["live_rows"] > 0, pkey["notes"]
        assert pkey["check_quiet"] is True and pkey["finding_gone"] is False, pkey["notes"]
        assert any(": not timed: function pgboss." in n for n in pkey["notes"]), pkey["notes"]
        (index,) = [m for m in pkey["measures"] if m["measure"] == "index bytes"]
        assert "state_lt_active" in index["subject"] and 0 < index["after"] < 1_000_000
        # job_common_i15 (name, created_on): the fetch's generic plan reads it, but the fetch
        # writes its state as a literal (pg_stat_statements shows $2), its custom plan reads
        # job_common_i11, and the server never scanned i15 while it ran. Not kept for that
        # plan: the DROP is for review, run on the copy, and the finding goes.
        i15 = _gone(proofs["QA101:pgboss.job_common_i15"])
        assert not any("did not help" in n for n in i15["notes"]), i15["notes"]


class TestProveAgenda:
    library = AGENDA

    @pytest.mark.parametrize("stage", ["aged"], indirect=True)
    def test_a_union_of_timestamps_is_copied_and_the_vacuum_fix_proven(
        self, observed: Observed, corpus_server: LocalServer, stage: str
    ) -> None:
        vacuum = _gone(_proof(observed, corpus_server, "QA201"))
        runs = [m for m in vacuum["measures"] if m["measure"] == "autovacuum runs"]
        assert runs and runs[0]["before"] == 0 and runs[0]["after"] > 0, vacuum["measures"]
        # Agenda's jobs are dated by creation only: the retention leaves which rows are
        # finished to the DBA, and the proof does not run it with a guess.
        retention = _proof(observed, corpus_server, "QA204")
        assert retention["finding_gone"] is None, retention["notes"]
        assert any("only the DBA can write" in n for n in retention["notes"])


class TestProveProcrastinate:
    library = PROCRASTINATE

    @pytest.mark.parametrize("stage", ["aged"], indirect=True)
    def test_a_boolean_column_is_copied_and_the_vacuum_fix_proven(
        self, observed: Observed, corpus_server: LocalServer, stage: str
    ) -> None:
        _gone(_proof(observed, corpus_server, "QA201"))
