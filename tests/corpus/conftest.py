"""Fixtures of the corpus tier: each library's database, built once per session and server.

A test class names its `library` (a `tests.corpus.library.Library`); its tests take
`observed`, what qadvisor said about that library's database in one `stage`: ``fresh`` (the
library's own migrations, enqueue and worker), ``aged`` (a clone with an archive of about
1 M finished rows) or ``stale`` (a clone of the aged one whose statistics predate a fresh
batch of waiting rows; only the tests marked for it ask for it). The first test that needs one
builds every collected library's fresh and aged databases on that server, a few at a time,
and every test of the session shares them; a stale one is built when a test first asks for
it; a build that failed fails its tests with the same message.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from qadvisor.demo.pgserver import LocalServer
from tests.conftest import _bin_dirs
from tests.corpus import envs
from tests.corpus.library import (
    Library,
    Observed,
    autoanalyzed_instead,
    build_aged,
    build_fresh,
    build_stale,
    observe,
)

STAGES = ("fresh", "aged")
# The aged database again, once a fresh batch of waiting rows has arrived after its last
# ANALYZE (library.build_stale): built only for the tests that ask for it.
STALE = "stale"
# Every library on two servers takes twice the time: PostgreSQL 18 unless this names more.
MAJORS_ENV = "QADVISOR_CORPUS_PG"


# Builds at once: installs and workers wait on the network, on polls and on PostgreSQL more
# than they compute, so three overlap well on two cores.
_PARALLEL_BUILDS = 3
# Stale builds of one library at most. A queue table of a few hundred rows (pgqueuer moves
# finished jobs out of it) passes autoanalyze's threshold with the batch, and autovacuum
# visits the database at a moment of its own in each naptime: when it analyzed every queue
# table during the build, nothing is stale, and another build (seconds) is the way to the
# state the tier means, not a weaker assertion.
_STALE_ATTEMPTS = 3


# tryfirst: pytest-xdist reads the group in its own pytest_collection_modifyitems, which may
# otherwise run before this one (conftests register as collection reaches them).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/corpus/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.corpus)
            item.add_marker(pytest.mark.xdist_group("corpus"))  # built once, on one worker
            if "observed" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.server)  # `-m "not server"` leaves them out too


@dataclass
class _Corpus:
    installed: dict[str, envs.Installed] = field(default_factory=dict)
    failed: dict[tuple[int, str, str], str] = field(default_factory=dict)
    observed: dict[tuple[int, str, str], Observed] = field(default_factory=dict)
    started: set[int] = field(default_factory=set)
    building: dict[tuple[int, str], threading.Lock] = field(default_factory=dict)
    installing: dict[str, threading.Lock] = field(default_factory=dict)
    timings: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(
        self, server: LocalServer, lib: Library, stage: str, items: list[pytest.Item]
    ) -> Observed:
        major = server.version_num // 10000
        if major not in self.started:
            self.started.add(major)
            # Every library a selected test of this session needs, this one first.
            wanted = {lib.name: lib}
            for item in items:
                other = getattr(getattr(item, "cls", None), "library", None)
                if isinstance(other, Library):
                    wanted.setdefault(other.name, other)
            libs = list(wanted.values())
            with ThreadPoolExecutor(_PARALLEL_BUILDS, thread_name_prefix="corpus") as pool:
                for _ in pool.map(lambda one: self._build(server, one), libs):
                    pass
        key = (major, lib.name, stage)
        if key in self.failed:
            pytest.fail(self.failed[key], pytrace=False)
        if key not in self.observed:
            self._build(server, lib)  # not collected with the others (a -k selection)
        if key not in self.observed and stage == STALE:
            with self.lock:
                building = self.building.setdefault((major, lib.name), threading.Lock())
            with building:
                if key not in self.observed and key not in self.failed:
                    self._build_stale(server, lib, major)
        if key in self.failed:
            pytest.fail(self.failed[key], pytrace=False)
        return self.observed[key]

    def _build(self, server: LocalServer, lib: Library) -> None:
        major = server.version_num // 10000
        with self.lock:
            building = self.building.setdefault((major, lib.name), threading.Lock())
        with building:  # another thread may be building it as the base of a clone
            self._build_stages(server, lib, major)

    def _build_stages(self, server: LocalServer, lib: Library, major: int) -> None:
        for stage in STAGES:
            key = (major, lib.name, stage)
            if key in self.observed or key in self.failed:
                continue
            started = time.monotonic()
            try:
                installed = self._install(lib)
                if stage == "fresh":
                    seconds = build_fresh(server, lib, installed)
                    dbname = lib.name
                else:
                    base = lib.aged_from or lib
                    if base is not lib:
                        self._build(server, base)
                        if (major, base.name, "aged") in self.failed:
                            raise RuntimeError(self.failed[(major, base.name, "aged")])
                    if base is lib:
                        seconds = build_aged(server, lib, installed, lib.name, age=True)
                    else:
                        seconds = build_aged(server, lib, installed, f"{base.name}_aged", age=False)
                    dbname = f"{lib.name}_aged"
                self.observed[key] = observe(
                    server, dbname, f"{lib.name}-{stage}-pg{major}", seconds
                )
            except (Exception, pytest.fail.Exception) as exc:
                message = f"building {lib.name} ({stage}, pg{major}): {exc}"
                for later in STAGES[STAGES.index(stage) :]:
                    self.failed[(major, lib.name, later)] = message
                return
            parts = ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items())
            total = time.monotonic() - started
            with self.lock:
                self.timings.append(f"{lib.name} {stage} pg{major}: {total:.1f} s ({parts})")

    def _build_stale(self, server: LocalServer, lib: Library, major: int) -> None:
        key = (major, lib.name, STALE)
        aged = (major, lib.name, "aged")
        if aged in self.failed:
            self.failed[key] = self.failed[aged]
            return
        started = time.monotonic()
        try:
            for attempt in range(1, _STALE_ATTEMPTS + 1):
                seconds = build_stale(server, lib, self._install(lib))
                self.observed[key] = observe(
                    server, f"{lib.name}_stale", f"{lib.name}-{STALE}-pg{major}", seconds
                )
                raced = autoanalyzed_instead(self.observed[key])
                if not raced or attempt == _STALE_ATTEMPTS:
                    break
                with self.lock:
                    self.timings.append(
                        f"{lib.name} {STALE} pg{major}: autovacuum analyzed {', '.join(raced)} "
                        "during the build, so nothing was stale: built again"
                    )
        except (Exception, pytest.fail.Exception) as exc:
            self.failed[key] = f"building {lib.name} ({STALE}, pg{major}): {exc}"
            return
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items())
        total = time.monotonic() - started
        with self.lock:
            self.timings.append(f"{lib.name} {STALE} pg{major}: {total:.1f} s ({parts})")

    def _install(self, lib: Library) -> envs.Installed:
        name = lib.env.name
        with self.lock:
            installing = self.installing.setdefault(name, threading.Lock())
        with installing:  # one thread per environment; the others then find it here
            got = self.installed.get(name)
            if got is None:
                got = self.installed[name] = envs.ensure(lib.env)
                how = "installed" if got.built else "reused from the cache"
                with self.lock:
                    self.timings.append(f"{name}: {how} in {got.seconds:.1f} s")
        return got


_CORPUS = _Corpus()


@pytest.fixture(scope="session")
def corpus() -> Iterator[_Corpus]:
    yield _CORPUS


@pytest.fixture(params=STAGES)
def stage(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


def _corpus_majors() -> list[int]:
    """The server majors the corpus runs on: 18 unless QADVISOR_CORPUS_PG names others, and
    only those the suite tests at all (QADVISOR_TEST_PG)."""
    wanted = os.environ.get(MAJORS_ENV, "").strip()
    try:
        majors = {int(part) for part in wanted.split(",") if part.strip()} if wanted else {18}
    except ValueError:
        raise pytest.UsageError(f"{MAJORS_ENV}={wanted!r}: expected e.g. 18 or 15,18") from None
    return sorted(majors & set(_bin_dirs()), reverse=True)


@pytest.fixture(scope="session", params=_corpus_majors(), ids=lambda m: f"pg{m}")
def corpus_server(
    request: pytest.FixtureRequest, _pg_servers: Callable[[int], LocalServer]
) -> LocalServer:
    """The suite's server of that major (the one `pg_server` gives the other tests)."""
    major: int = request.param
    return _pg_servers(major)


@pytest.fixture
def observed(
    request: pytest.FixtureRequest, corpus_server: LocalServer, corpus: _Corpus, stage: str
) -> Observed:
    lib: Library = request.cls.library
    return corpus.observe(corpus_server, lib, stage, request.session.items)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _CORPUS.timings:
        terminalreporter.section("queue-library corpus")
        for line in _CORPUS.timings:
            terminalreporter.write_line(line)


# Under pytest-xdist the worker that built the corpus hands its timings to the controlling
# process (tests/conftest.py prints them there: this file is not loaded by a process that
# collects nothing).
def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["qadvisor_corpus_timings"] = list(_CORPUS.timings)
