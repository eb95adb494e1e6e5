"""The pure parts of what --prove says of a measurement: why a check skipped the copy, what
it still reports, and a fix that made a statement worse."""

from __future__ import annotations

from qadvisor.prove.measure import Measured, Verdicts, made_worse
from qadvisor.prove.timing import Timed

LABEL = "pg_stat_statements 3f9a2c1b0d (1,200 calls, 5,210 ms mean)"


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
    timed = Timed((ms,) * 3, (blocks,) * 3, node, (1.0,) * 3)
    return Measured({LABEL: timed}, {}, Verdicts(frozenset(), {}), ())


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
