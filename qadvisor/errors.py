"""The errors that end a command, and the exit code each one ends it with.

Exit codes are a CI gate's contract: :data:`EXIT_CODES` is the one table of them, which
``qadvisor --help``, the README and docs/cli.md print (a test keeps the pages identical to
:func:`exit_code_table`). Error paths raise; the command line picks the code from the error's
type in one place (:func:`exit_code`), never where the error is raised. A message is one line
and safe to print: no password, no traceback.

- :class:`InputError` (each layer raises its own subclass: a config file, a setting, a pack,
  a malformed DSN, a table that does not exist, a snapshot file, a report that could not be
  written): usage or bad input, exit 2.
- :class:`NotJudgedError` (the connection, the collection, a throwaway server): the database
  could not be reached or read, exit 3.
- Anything else is a bug: one line, exit 4.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path


class ExitCode(enum.IntEnum):
    OK = 0
    FINDINGS = 1
    USAGE = 2
    NOT_JUDGED = 3
    INTERNAL = 4


# What the run's end says, code by code: the table of --help, the README and docs/cli.md.
EXIT_CODES: tuple[tuple[str, str], ...] = (
    ("0", "passed: no finding at or above `--fail-on` (with a baseline, no new one); when "
          "skips fail the gate, also every check judged every queue"),
    ("1", "findings: at least one finding (with a baseline, a new one) at or above "
          "`--fail-on`; this wins over 3 when both apply"),
    ("2", "usage or bad input: an unknown option or a bad value (a flag, a `QADVISOR_*` "
          "variable, the config file), a malformed DSN, a file that cannot be read or is "
          "not what it should be (config, snapshot, baseline, `--query-file`), a refused "
          "`--query` or inline ignore, a table that does not exist, a check pack that does "
          "not load; or the report could not be written (an `--output` or "
          "`--write-baseline` path, stdout: disk full, broken pipe)"),
    ("3", "could not connect or could not judge: the server unreachable, authentication "
          "refused, a bound passed (connect, statement, `--run-timeout`), the catalog "
          "unreadable, a throwaway server (`demo`, `--prove`) that did not start; and, when "
          "skips fail the gate (`--fail-on-skip`, on by default where `CI` is true), a "
          "check that could not judge a queue, or no queue found"),
    ("4", "internal error: a bug in qadvisor or in a check pack, said in one line "
          "(`QADVISOR_TRACEBACK=1` prints the traceback)"),
    ("130, 143", "interrupted by Ctrl-C or SIGTERM (128 + the signal's number): no report"),
)  # fmt: skip


def exit_code_table() -> str:
    """:data:`EXIT_CODES` as the Markdown table the docs print."""
    rows = [f"| {code} | {meaning} |" for code, meaning in EXIT_CODES]
    return "\n".join(["| code | meaning |", "|---|---|", *rows]) + "\n"


class QadvisorError(Exception):
    """An error that ends a command with its message, one line on stderr."""


class InputError(QadvisorError):
    """Usage or bad input, or a report that could not be written: exit code 2."""


class NotJudgedError(QadvisorError):
    """The database could not be reached or read (or a throwaway server did not start): exit
    code 3."""


def exit_code(exc: BaseException) -> ExitCode:
    """The code a command ends with when ``exc`` ends it (the command line's usage errors
    aside, which are 2 as well)."""
    if isinstance(exc, InputError):
        return ExitCode.USAGE
    if isinstance(exc, NotJudgedError):
        return ExitCode.NOT_JUDGED
    return ExitCode.INTERNAL


# The most read of a snapshot or baseline file: a snapshot of 10,000 tables is a few MB.
MAX_JSON_BYTES = 256 * 1024 * 1024


def read_bounded(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``; ValueError when it holds more (``/dev/zero`` too)."""
    with path.open("rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit // (1024 * 1024)} MiB")
    return data


def read_json(path: Path, what: str, error: type[InputError]) -> object:
    """The JSON in a file the user named as ``what`` ("snapshot", "baseline"); ``error``,
    one line, when it cannot be read or is not JSON."""
    try:
        return json.loads(read_bounded(path, MAX_JSON_BYTES).decode("utf-8"))
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
            raise error(f"cannot read {what} {path}: {exc}") from None
        raise error(f"{path} is not a qadvisor {what} (not JSON)") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise error(f"{path} is not a qadvisor {what} (not JSON)") from None
