"""The --history directory: one snapshot file per run, named by the server's clock when it was
read, in UTC (``qadvisor-snapshot-20261207T092852.627963Z.json``), so names sort by time; the
newest ``keep`` are kept.

A file is written as --output writes one (whole, beside its final name, then renamed) and
never replaces another run's; only files named as this module names them are read or removed,
so the directory may hold other files. A file that cannot be read, or is no snapshot, is
listed with why and otherwise left alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from datetime import UTC, datetime
from pathlib import Path

from qadvisor.derive.history import history
from qadvisor.errors import InputError, read_json
from qadvisor.model import History, Snapshot
from qadvisor.settings.outputs import write_atomic

PREFIX = "qadvisor-snapshot-"
_NAME = re.compile(rf"^{PREFIX}(?P<at>\d{{8}}T\d{{6}}\.\d{{6}})Z(-(?P<n>\d+))?\.json$")


class HistoryError(InputError):
    """The --history directory cannot be read or written."""


def unusable(directory: Path) -> str | None:
    """Why ``directory`` cannot hold the history, or None: it is a directory this process
    may read and write, or does not exist yet and its parent is one."""
    if directory.exists():
        if not directory.is_dir():
            return "it is not a directory"
        if not os.access(directory, os.R_OK | os.W_OK | os.X_OK):
            return "it is not readable and writable"
        return None
    parent = directory.absolute().parent
    if not parent.is_dir():
        return f"directory {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"it does not exist and {parent} is not writable"
    return None


def names(directory: Path) -> list[str]:
    """The snapshot files of the directory, oldest first (regular files only)."""
    if not directory.is_dir():
        return []
    found = []
    for entry in os.scandir(directory):
        m = _NAME.match(entry.name)
        if m and entry.is_file(follow_symlinks=False):
            # A second file of the same moment ("-2") comes after the first.
            found.append(((m["at"], int(m["n"] or 1)), entry.name))
    return [name for _, name in sorted(found)]


def read(directory: Path, snapshot: Snapshot) -> History:
    """The history of ``snapshot`` from the directory's files."""
    found: list[tuple[str, Snapshot | str]] = []
    for name in names(directory):
        path = directory / name
        try:
            data = read_json(path, "snapshot", HistoryError)
            found.append((name, Snapshot.from_dict(data)))
        except HistoryError as exc:
            found.append((name, str(exc).replace(str(path), "the file")))
        except (ValueError, TypeError, KeyError) as exc:
            found.append((name, f"not a qadvisor snapshot: {exc}"))
    return history(snapshot, str(directory), found)


def file_name(snapshot: Snapshot) -> str:
    """The file name of a snapshot: the server's clock when it was read, in UTC."""
    text = snapshot.server.collected_at
    at = datetime.fromisoformat(text) if text else datetime.now(UTC)
    at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    return f"{PREFIX}{at:%Y%m%dT%H%M%S.%f}Z.json"


def save(directory: Path, snapshot: Snapshot, text: str, *, keep: int) -> Path:
    """Write ``text`` (the snapshot as ``qadvisor snapshot`` saves it, without its own
    history) into the directory under a name no other file has, then remove the oldest
    snapshot files beyond ``keep``; HistoryError when the directory cannot be written."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        base = file_name(snapshot)
        path = directory / base
        n = 1
        while os.path.lexists(path):
            n += 1
            path = directory / base.replace(".json", f"-{n}.json")
        write_atomic(path, text)
        for old in names(directory)[:-keep]:
            victim = directory / old
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISREG(os.lstat(victim).st_mode):
                    victim.unlink()
    except OSError as exc:
        raise HistoryError(f"--history {directory}: {exc.strerror or exc}") from None
    return path
