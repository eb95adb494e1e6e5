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
import os
import select
import stat
import time
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
          "unreadable, a throwaway server (`demo`, `--prove`) that did not start; with "
          "`--all-databases` or `--dsn-file`, a database of the fleet that could not be "
          "judged (the others' report is printed); and, when skips fail the gate "
          "(`--fail-on-skip`, on by default where `CI` is true), a check that could not "
          "judge a queue, or no queue found"),
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
# How long a file that is no regular file (a FIFO, a terminal, a process substitution's pipe)
# may take to deliver what qadvisor reads, or to take what it writes: a peer that never comes
# must not hang the run.
PIPE_WAIT_S = 10.0


class TooLarge(ValueError):
    """A file holds more than qadvisor reads of it."""


def read_bounded(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``; TooLarge when it holds more (``/dev/zero`` too),
    ValueError when it is a pipe or a terminal that has not ended within PIPE_WAIT_S."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO with no writer opens at once
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.set_blocking(fd, True)
            with open(fd, "rb", closefd=False) as stream:
                data = stream.read(limit + 1)
        else:
            data = _drained(fd, limit)
    finally:
        os.close(fd)
    if len(data) > limit:
        size = f"{limit // 1024 // 1024} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"
        raise TooLarge(f"larger than {size}")
    return data


def _drained(fd: int, limit: int) -> bytes:
    """What a pipe or device gives until it ends, ``limit`` + 1 bytes at most."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + PIPE_WAIT_S
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ValueError(
                f"it did not end within {PIPE_WAIT_S:g} s (a pipe no process writes to?)"
            )
        # Linux reports a FIFO no writer has opened yet as neither readable nor ended.
        if not poller.poll(left * 1000):
            continue
        try:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
        except BlockingIOError:
            continue
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_json(path: Path, what: str, error: type[InputError]) -> object:
    """The JSON in a file the user named as ``what`` ("snapshot", "baseline"); ``error``,
    one line, when it cannot be read or is not JSON."""
    try:
        return json.loads(read_bounded(path, MAX_JSON_BYTES).decode("utf-8"))
    except RecursionError:
        # A file nested thousands deep; no snapshot or baseline nests more than a few.
        raise error(f"{path} is not a qadvisor {what} (nested too deep)") from None
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
            raise error(f"cannot read {what} {path}: {exc}") from None
        raise error(f"{path} is not a qadvisor {what} (not JSON)") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise error(f"{path} is not a qadvisor {what} (not JSON)") from None
