"""Report files: checked before anything is collected, written whole or not at all.

A CI job that uploads ``qadvisor.sarif`` must never find half a file: each one is written to a
temporary file in the same directory and renamed over the target (atomic on POSIX), so a
reader sees the old file or the new one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


class OutputError(OSError):
    """A report file could not be written."""


def unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written as a report file, or None when it can."""
    if path.is_dir():
        return "it is a directory"
    parent = path.parent
    if not parent.is_dir():
        return f"directory {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"directory {parent} is not writable"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is not writable"
    return None


def write_atomic(path: Path, text: str) -> None:
    """``text`` into ``path``, replacing it whole; OutputError (with the reason) on failure."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        # mkstemp makes the file 0600; a report file gets the usual mode.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
