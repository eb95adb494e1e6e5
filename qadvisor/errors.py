"""The errors that end a command with one line on stderr and exit code 2.

Each layer raises its own subclass (a config file, a setting, a pack, the connection, the
collection, a snapshot file, the demo); the command line catches this one class. A message is
one line and safe to print: no password, no traceback.
"""

from __future__ import annotations

import json
from pathlib import Path


class InputError(Exception):
    """Bad input, an unreachable server or a pack that does not load: exit code 2."""


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
