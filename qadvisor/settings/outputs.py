"""Report files: checked before anything is collected, written whole or not at all, and never
in place of what is at their path.

A CI job that uploads ``qadvisor.sarif`` must never find half a file: a regular file (or a
new one) is written to a temporary file beside it and renamed over it (atomic on POSIX), so a
reader sees the old file or the new one; through a symlink, it is the link's target that is
replaced, and the link stays. Anything else at the path (a device such as ``/dev/stdout``, a
FIFO, a socket, an open descriptor under ``/proc``) is written into, never replaced, and
within a bound: a FIFO that no process opens for reading, or stops reading, is an error after
PIPE_WAIT_S, not a run that never ends. A write that fails, at any point up to the file's
close, is an error. So is a write to stdout that
fails (:func:`to_stdout`): a reader that went away (``| head -1`` before the report ends:
EPIPE), a full disk (``> /dev/full``: ENOSPC).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import select
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

from qadvisor.errors import PIPE_WAIT_S, InputError

_MAX_LINKS = 40  # as the kernel's own limit on symlinks followed in one lookup


class OutputError(InputError, OSError):
    """A report, baseline or snapshot could not be written, to its file or to stdout: the
    caller's side failed (a path, a full disk, a closed pipe), not the database's, so it ends
    the run as bad input does (one line and exit 2, a message safe to print)."""


def unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written as a report file, or None when it can."""
    if path.is_dir():
        return "it is a directory"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        return exc.strerror or str(exc)
    if mode is not None and stat.S_ISBLK(mode):
        return "it is a block device (a disk): a report is never written onto one"
    if mode is not None and stat.S_ISSOCK(mode):
        return "it is a socket"
    target, replace = _where(path)
    if not replace:  # written into, not replaced: only the thing itself must take writes
        return None if os.access(path, os.W_OK) else "it is not writable"
    parent = target.parent
    if not parent.is_dir():
        return f"directory {parent} does not exist"
    if mode is None and not os.access(parent, os.W_OK | os.X_OK):
        return f"directory {parent} is not writable"
    if mode is not None and not os.access(path, os.W_OK):
        return "the file is not writable"
    if mode is not None and not os.access(parent, os.W_OK | os.X_OK):
        return f"directory {parent} is not writable (the file is replaced whole)"
    return None


def write_atomic(path: Path, text: str) -> None:
    """``text`` into ``path``: a regular file (or a new one, or a symlink's target) replaced
    whole, anything else written into; OutputError (with the reason) on failure."""
    try:
        fd = _own_descriptor(path)
        if fd is not None:
            _write_descriptor(fd, text)
            return
        target, replace = _where(path)
        if replace:
            _replace(target, text)
        else:
            _write_into(path, text.encode("utf-8"))
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def to_stdout(write: Callable[[TextIO], object]) -> None:
    """``write`` to stdout, flushed; OutputError when stdout does not take it."""
    try:
        write(sys.stdout)
        sys.stdout.flush()
    except OSError as exc:
        # Python flushes stdout again at exit, and would fail (and say so) a second time.
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        why = exc.strerror or str(exc)
        if isinstance(exc, BrokenPipeError):
            why += " (what reads it stopped reading)"
        raise OutputError(f"cannot write to stdout: {why}") from None


def overwritten_input(path: Path, inputs: Iterable[tuple[str, Path]]) -> str | None:
    """What names the input (a regular file) that writing ``path`` would replace, or None."""
    for what, source in inputs:
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.stat(source).st_mode) and same_file(path, source):
                return what
    return None


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (after symlinks; an existing file by identity)."""
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return _where(a)[0] == _where(b)[0]


def _where(path: Path) -> tuple[Path, bool]:
    """The file to write and whether to replace it whole: the end of ``path``'s symlinks when
    that is a regular file or nothing yet; ``path`` itself, written into, when it is anything
    else or a link through /proc (an open descriptor: /dev/stdout, /dev/fd/N)."""
    current = Path(os.path.abspath(path))
    for _ in range(_MAX_LINKS):
        if current.parts[:2] == ("/", "proc"):
            return path, False
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return current, True
        if stat.S_ISLNK(mode):
            link = Path(os.readlink(current))
            current = Path(os.path.normpath(current.parent / link))
            continue
        return (current, True) if stat.S_ISREG(mode) else (path, False)
    raise OSError(f"too many levels of symbolic links in {path}")


_FD = re.compile(r"^/proc/(?:self|(?P<pid>\d+))/fd/(?P<fd>\d+)$")


def _own_descriptor(path: Path) -> int | None:
    """The descriptor of this process that ``path`` names through its symlinks
    (``/dev/stdout`` -> ``/proc/self/fd/1``), or None. Reopening it by name would truncate a
    file the shell redirected stdout to and write from its start over what came before."""
    current = Path(os.path.abspath(path))
    for _ in range(_MAX_LINKS):
        m = _FD.match(str(current))
        if m and (m["pid"] is None or int(m["pid"]) == os.getpid()):
            return int(m["fd"])
        try:
            if not stat.S_ISLNK(os.lstat(current).st_mode):
                return None
        except OSError:
            return None
        current = Path(os.path.normpath(current.parent / os.readlink(current)))
    return None


def _write_into(path: Path, data: bytes) -> None:
    """Into a FIFO or a device, waiting at most PIPE_WAIT_S in all for a reader to open it
    (opening a FIFO for writing waits for one) and to take ``data``."""
    deadline = time.monotonic() + PIPE_WAIT_S
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:  # ENXIO: a FIFO no process has open for reading
            if exc.errno != errno.ENXIO:
                raise
            if time.monotonic() >= deadline:
                raise OSError(exc.errno, f"no process read it within {PIPE_WAIT_S:g} s") from None
            time.sleep(0.05)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        while data:
            left = deadline - time.monotonic()
            if left <= 0:
                raise OSError(
                    errno.ETIMEDOUT, f"its reader did not take the report within {PIPE_WAIT_S:g} s"
                )
            if poller.poll(left * 1000):
                with contextlib.suppress(BlockingIOError):
                    data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def _write_descriptor(fd: int, text: str) -> None:
    # What this process already buffered for the stream goes first, in order.
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    data = text.encode("utf-8")
    while data:
        data = data[os.write(fd, data) :]


def _replace(target: Path, text: str) -> None:
    try:
        keep = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        keep = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        # mkstemp makes the file 0600; a report file keeps the mode of the one it replaces.
        os.chmod(tmp, keep)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
