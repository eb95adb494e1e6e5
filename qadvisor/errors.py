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


def read_json(path: Path, what: str, error: type[InputError]) -> object:
    """The JSON in a file the user named as ``what`` ("snapshot", "baseline"); ``error``,
    one line, when it cannot be read or is not JSON."""
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise error(f"{path} is not a qadvisor {what} (not JSON)") from None
