"""The pure parts of what --prove says of a measurement: the copy's run of a statement held
against the checked server's own counters, and why a check skipped the copy."""

from __future__ import annotations

from qadvisor.model import Statement
from qadvisor.prove.measure import FAR_APART, Measured, Verdicts, against_counters, made_worse

LABEL = "pg_stat_statements 3f9a2c1b0d (1,200 calls, 5,210 ms mean)"


def _recorded(ms: float | None, blocks: float | None) -> Statement:
    return Statement(
        "pg_stat_statements", "SELECT 1", calls=1_200, mean_exec_ms=ms, shared_blks_per_call=blocks
    )


def test_figures_that_agree_are_said_beside_each_other_without_a_warning() -> None:
    note = against_counters(_recorded(5_210.0, 91_000.0), LABEL, 5_237.2, 90_412.0)
    assert note == (
        f"{LABEL}: per call, against the checked server's pg_stat_statements: 91,000 shared "
        "buffers there, 90,412 on the copy; 5,210 ms there, 5,237 on the copy"
    )


def test_buffers_ten_times_apart_say_the_figures_are_the_copys() -> None:
    # Time alone is machine-dependent; the buffers decide, and here the copy reads 40x more.
    note = against_counters(_recorded(0.52, 12.0), LABEL, 0.61, 480.0)
    assert note is not None
    assert note.endswith(
        ": 40 times apart, so the copy does not run this statement as the checked server "
        "did, and its figures are the copy's, not production's"
    )
    # Apart by just under the bound: no warning.
    near = against_counters(_recorded(0.52, 12.0), LABEL, 0.61, 12.0 * FAR_APART - 1)
    assert near is not None and "apart" not in near


def test_without_buffer_counts_time_decides() -> None:
    note = against_counters(_recorded(0.4, None), LABEL, 9.0, 30.0)
    assert note is not None
    assert "0.4 ms there, 9 on the copy" in note and "22 times apart" in note
    assert "shared buffers" not in note


def test_a_statement_the_server_did_not_record_gets_no_note() -> None:
    given = Statement("--query", "SELECT 1")
    assert against_counters(given, "--query 1", 1.0, 3.0) is None


def test_a_skip_is_said_for_its_own_check_only() -> None:
    verdicts = Verdicts(frozenset({"QA101:public.jobs"}), {"QA304": "no claim statement"})
    assert verdicts.skipped("QA304") == " (QA304 skipped the copy: no claim statement)"
    assert verdicts.skipped("QA101") == ""


def test_a_fix_that_did_not_help_says_what_the_copy_still_reports() -> None:
    key = "QA101:pgboss.job_common_i15"
    said = "Index pgboss.job_common_i15 is 41 MB for 312 live rows"
    verdicts = Verdicts(frozenset({key}), {}, messages={key: said})
    assert verdicts.not_gone(key) == (
        f"the fix did not help: {key} is still reported on the copy ({said})"
    )
    # A verdict without its message (made elsewhere): the note without it.
    assert Verdicts(frozenset({key}), {}).not_gone(key).endswith("still reported on the copy")


def _measured(ms: float, blocks: float, node: str) -> Measured:
    return Measured({LABEL: node}, {LABEL: ms}, {LABEL: blocks}, {}, Verdicts(frozenset(), {}), ())


def test_a_claim_the_fix_made_read_many_more_buffers_is_said_worse() -> None:
    # Chancy's aged database: the finding went with the new index, and the claim read 16
    # times the buffers on the copy.
    before = _measured(0.572, 396.0, "Seq Scan on chancy_jobs")
    after = _measured(1.282, 6567.0, "Index Scan using chancy_jobs_pending on chancy_jobs")
    (note,) = made_worse(before, after, {LABEL})
    assert note.startswith(f"{LABEL}: the fix made it worse on the copy: 17 times the shared")
    assert "(396 -> 6,567, 0.572 -> 1.28 ms; plan Seq Scan on chancy_jobs -> Index Scan" in note
    # Twice as many but a handful of buffers, or fewer: nothing to say; another label neither.
    assert made_worse(_measured(0.1, 40.0, "x"), _measured(0.1, 120.0, "x"), {LABEL}) == []
    assert made_worse(after, before, {LABEL}) == []
    assert made_worse(before, after, {"another statement"}) == []
