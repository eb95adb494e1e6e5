"""A process that imports qadvisor once and forks one child per CLI run the tests ask for
(tests/helpers.py: `qadvisor`).

A child is `python -m qadvisor ARGS` in a process of its own (its own arguments, environment,
working directory, stdin from /dev/null, stdout and stderr to files, its exit status), without
the interpreter's start and the imports: about 0.4 s of CPU a run, over thousands of runs a
session. What it cannot be is a fresh interpreter: a run whose interpreter must differ
(PYTHONPATH, another PYTHON* variable) or that starts a server (`demo`, `--prove`: the server
guard of tests/conftest.py sees those commands) is run as a real subprocess by the caller.

Protocol, one JSON object a line: the caller writes ``{"args", "env", "cwd", "out", "err"}``
to stdin; this process forks, answers ``{"pid": N}``, waits for the child and answers
``{"status": S}`` (negative: the signal that ended it, as subprocess reports it).
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import sys
import traceback
from typing import Any, NoReturn


def _preload() -> None:
    # What every `qadvisor check` imports, the built-in checks included (a child still finds
    # them through their entry point, as a real run does); the rest (rich, the other
    # renderers) is imported by the child that needs it.
    import importlib
    import pkgutil

    import checks
    import qadvisor.cli
    import qadvisor.engine
    import qadvisor.render.json  # noqa: F401

    for module in pkgutil.iter_modules(checks.__path__, "checks."):
        importlib.import_module(module.name)


def _run(request: dict[str, Any]) -> NoReturn:
    code = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        os.close(stdin)
        for fd, path in ((1, request["out"]), (2, request["err"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, fd)
            os.close(out)
        # As `python -m qadvisor` sets them: the working directory first on sys.path, argv[0]
        # the module's file (run_module sets it, and __main__'s package, which click reads for
        # the program's name in usage lines).
        sys.path[0] = os.getcwd()
        sys.argv = ["qadvisor", *request["args"]]
        try:
            runpy.run_module("qadvisor", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                code = code or 120  # as Python does when it cannot flush at exit
        os._exit(code & 0xFF)


def main() -> None:
    _preload()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main()
