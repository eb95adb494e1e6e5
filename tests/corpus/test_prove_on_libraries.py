"""--prove on a database a real queue library wrote: the copy is built from what qadvisor
read of that database (its statistics, and its statements as pg_stat_statements recorded them,
literals shown as $n), not from a table this suite designed."""

from __future__ import annotations

from typing import Any

import pytest

from qadvisor.demo.pgserver import LocalServer
from tests.corpus.fixwalk import source_label
from tests.corpus.library import Observed
from tests.corpus.test_oban import OBAN
from tests.helpers import Run, qadvisor

NEW_INDEX = "oban_jobs_available_queue_priority_scheduled_at_id_idx"


# One proof per database (it builds and churns a copy of about 1 M rows): both tests read it.
_PROVEN: dict[str, Run] = {}


def _proof(observed: Observed, server: LocalServer, code: str) -> dict[str, Any]:
    dsn = server.dsn(observed.db)
    if dsn not in _PROVEN:
        _PROVEN[dsn] = qadvisor("check", dsn, "--format", "json", "--prove", timeout=600)
    run = _PROVEN[dsn]
    assert run.rc == 1 and run.stdout.startswith("{"), run.stderr
    (f,) = run.findings(code)
    proof: dict[str, Any] = f["proof"]
    return proof


class TestProveOban:
    library = OBAN

    @pytest.mark.parametrize("stage", ["aged"], indirect=True)
    def test_the_archive_bloated_index_is_proven_on_a_copy(
        self, observed: Observed, corpus_server: LocalServer, stage: str
    ) -> None:
        proof = _proof(observed, corpus_server, "QA101")
        assert proof["reproduced"] is True and proof["finding_gone"] is True, proof["notes"]
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
