"""qadvisor as a user gets it without this checkout: the repository's files as a clone holds
them, a wheel built from them, a fresh virtual environment it is installed into.

Everything is built from a copy of the files git tracks (and those it would, new ones not yet
added), never in the checkout: a build in place would leave build/ and egg-info behind. The
installs use pip's own configuration (here, a local package index: no network needed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Building and installing pulls the dependencies through pip: a slow shared machine needs time.
PIP_TIMEOUT = 900


def source_copy(into: Path) -> Path:
    """The repository's files as a clone of it holds them, under ``into``; a git repository
    of its own with one commit (what an action or a hook is fetched as)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the source"]):
        subprocess.run([*git, *args], cwd=into, check=True, capture_output=True)
    return into


def fresh_venv(path: Path) -> Path:
    """A new virtual environment without this one's packages (and without a pip of its own:
    this one's installs into it); its bin directory."""
    venv.EnvBuilder(with_pip=False, clear=True).create(path)
    return path / "bin"


def pip(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """pip, this environment's, working on the one ``bin_dir`` belongs to."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python",
         str(bin_dir / "python"), *args],
        cwd=cwd, capture_output=True, text=True, timeout=PIP_TIMEOUT, env=env,
    )  # fmt: skip


def outside_env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a shell where that venv's bin comes first and nothing points back
    into this checkout (no PYTHONPATH, not this interpreter's venv)."""
    here = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p != here]
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("QADVISOR_")}  # fmt: skip
    return env | {"PATH": os.pathsep.join([str(bin_dir), *path])} | extra
