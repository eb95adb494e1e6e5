"""What qadvisor promises a DBA, and the tests that hold it to each promise: the first section
of docs/safety.md. A test (tests/project/test_promises.py) fails when a test named here does
not exist, and when a test of the hostile-input corpus (tests/test_hostile.py) is named by no
promise."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Promise:
    promise: str  # one sentence, as a DBA would check it
    tests: tuple[str, ...]  # "tests/<file>.py::<test function>"


_HOSTILE = "tests/test_hostile.py"

PROMISES: tuple[Promise, ...] = (
    Promise(
        "It writes nothing: no row, no write counter, no object, no setting outlives its "
        "session; under `--analyze` no row is locked.",
        ("tests/test_writes_nothing.py::test_a_full_run_writes_nothing_and_locks_no_waiting_row",),
    ),
    Promise(
        "`--analyze` moves no read counter (`idx_scan`, `idx_tup_fetch`) where the role may "
        "switch `track_counts` off; where it may not, it moves what docs/cli.md says.",
        (
            "tests/test_writes_nothing.py"
            "::test_analyze_counts_no_read_where_the_role_may_switch_counting_off",
        ),
    ),
    Promise(
        "It sends only the statements listed below.",
        (
            "tests/test_statements_sent.py"
            "::test_a_full_run_sends_only_what_the_page_lists_and_all_of_it",
        ),
    ),
    Promise(
        "No output (report, snapshot, baseline, message) holds a password or a piece of one; "
        "a URI whose password cuts its user info short is refused before any connection.",
        (
            "tests/test_secrets.py::test_no_output_holds_a_piece_of_the_password",
            f"{_HOSTILE}::test_a_uri_whose_password_cuts_its_user_info_is_refused_before_connecting",
            f"{_HOSTILE}::test_an_error_nobody_foresaw_is_one_line_without_the_password",
        ),
    ),
    Promise(
        "Another session's literals (the query of a lock's holder, a statement "
        "pg_stat_statements keeps whole) never reach an output: every string constant is "
        "masked as PostgreSQL's scanner finds it, under either standard_conforming_strings, "
        "cut off or not.",
        (
            "tests/sql/test_masking.py::test_hostile_text_keeps_its_shape_and_loses_its_constants",
            "tests/sql/test_masking.py::test_constants_are_where_postgresql_finds_them",
            "tests/sql/test_masking.py"
            "::test_no_piece_of_a_constant_survives_wherever_the_text_is_cut",
            "tests/sql/test_masking.py"
            "::test_no_piece_survives_with_standard_conforming_strings_off",
            f"{_HOSTILE}::test_a_lock_holders_literals_never_reach_a_report",
            f"{_HOSTILE}::test_statements_pg_stat_statements_keeps_whole_are_masked",
        ),
    ),
    Promise(
        "A run is bounded whatever the server or the network does: connecting (every host "
        "together), each answer, the whole visit.",
        (
            "tests/collect/test_connect.py"
            "::test_a_connect_timeout_of_zero_does_not_disable_the_bound",
            "tests/collect/test_connect.py::test_a_stopped_backend_ends_the_run_within_its_bound",
            f"{_HOSTILE}::test_ten_silent_hosts_end_within_the_run_bound",
        ),
    ),
    Promise(
        "It only tightens the session's limits, and its lock_timeout holds from the first "
        "statement: another session's lock on a queue table costs only what it blocks, one "
        "on a system catalog ends the run within the lock timeout, naming its holder.",
        (
            "tests/collect/test_connect.py::test_a_stricter_role_statement_timeout_is_kept",
            "tests/collect/test_connect.py"
            "::test_the_lock_timeout_of_the_startup_packet_keeps_a_stricter_one",
            "tests/collect/test_production_shape.py"
            "::test_access_exclusive_on_the_queue_table_costs_only_what_it_blocks",
            "tests/collect/test_production_shape.py::test_workers_holding_row_locks_make_nothing_wait",
            f"{_HOSTILE}::test_a_lock_on_a_system_catalog_ends_the_run_within_lock_timeout",
        ),
    ),
    Promise(
        "A file it writes never replaces what is at its path nor any file the run reads; a "
        "FIFO it reads or writes that no process serves ends the run after 10 s.",
        (
            "tests/test_safety.py::test_a_device_is_written_into_and_a_failed_write_is_exit_2",
            "tests/test_safety.py::test_a_symlink_is_written_through_and_stays_a_link",
            f"{_HOSTILE}::test_nothing_written_replaces_a_file_the_run_reads",
            f"{_HOSTILE}::test_the_config_file_found_in_the_directory_is_not_overwritten",
            f"{_HOSTILE}::test_a_fifo_no_process_writes_to_is_one_line",
            f"{_HOSTILE}::test_a_fifo_no_process_reads_is_one_line",
            f"{_HOSTILE}::test_a_pipe_that_delivers_is_read",
        ),
    ),
    Promise(
        "Every failure is one line on stderr, never a traceback and never exit 1 (which a "
        "CI gate reads as findings): exit 2 for a bad option value, checked before the "
        "server is tried, a file nested too deep, a host name no resolver takes, and stdout "
        "that does not take the report; exit 4 for an error nobody foresaw (its type and "
        "where it was raised, never its message).",
        (
            f"{_HOSTILE}::test_a_bad_value_is_one_line_before_the_server_is_tried",
            f"{_HOSTILE}::test_a_config_files_timeout_past_int_max_is_one_line",
            f"{_HOSTILE}::test_a_check_option_that_is_no_number_is_one_line",
            f"{_HOSTILE}::test_a_file_nested_5000_deep_is_one_line",
            f"{_HOSTILE}::test_a_pghost_label_of_64_characters_is_one_line",
            f"{_HOSTILE}::test_a_host_label_of_64_characters_in_the_dsn_is_one_line",
            f"{_HOSTILE}::test_stdout_that_does_not_take_the_report_is_one_line_and_exit_2",
            f"{_HOSTILE}::test_a_snapshot_stdout_does_not_take_is_one_line_and_exit_2",
            "tests/test_safety.py::test_a_snapshot_with_wrong_values_is_one_line_naming_the_field",
            "tests/test_fuzz.py::test_check_of_a_mutated_snapshot_reports_or_exits_2",
            "tests/test_fuzz.py::test_check_with_any_config_reports_or_exits_2",
        ),
    ),
    Promise(
        "No all-clear that was not earned: a check that could not judge a queue says why, "
        "with the GRANT or the lock that kept it.",
        (
            "tests/collect/test_visibility.py"
            "::test_no_problems_found_only_when_every_check_judged_every_queue",
            "tests/collect/test_production_shape.py"
            "::test_a_role_with_nothing_but_connect_gets_a_report_of_what_it_could_not_see",
        ),
    ),
    Promise(
        "A role with pg_monitor and the GRANTs of privileges.md judges every check.",
        (
            "tests/collect/test_smallest_role.py::test_the_smallest_role_judges_a_queue_with_no_skip",
        ),
    ),
    Promise(
        "On a standby it says so, judges what a standby can know and marks fixes for the primary.",
        (
            "tests/collect/test_standby.py"
            "::test_a_standby_is_named_and_judges_only_what_it_can_know",
        ),
    ),
)


def promises_section() -> list[str]:
    """The lines of docs/safety.md's first section."""
    lines = [
        "## What it promises, and the tests that hold it to each",
        "",
        "Each promise is held by the tests named beside it, on real PostgreSQL servers (the",
        "hostile-input corpus, `tests/test_hostile.py`, on every major CI runs); a test fails",
        "when a test named here is missing, or when a test of the corpus is named by none.",
        "",
        "| promise | tests |",
        "|---|---|",
    ]
    for p in PROMISES:
        tests = "<br>".join(f"`{t}`" for t in p.tests)
        lines.append(f"| {p.promise} | {tests} |")
    return [*lines, ""]
