"""The errors that end a command with one line on stderr and exit code 2.

Each layer raises its own subclass (a config file, a setting, a pack, the connection, the
collection, a snapshot file, the demo); the command line catches this one class. A message is
one line and safe to print: no password, no traceback.
"""

from __future__ import annotations

import json
import os
import select
import stat
import time
from pathlib import Path


class InputError(Exception):
    """Bad input, an unreachable server or a pack that does not load: exit code 2."""


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
