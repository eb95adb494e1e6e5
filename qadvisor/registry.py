"""Checks as values, and where they come from.

A check is a pure function ``run(snapshot, options) -> Iterable[Finding | Skip]`` turned into
a frozen :class:`Check` by the :func:`check` decorator. Packs of checks (the built-in one
included) are found through the ``qadvisor.checks`` entry-point group, so a third-party pack
registers exactly the way the built-in pack does.

One vocabulary from check to report: a check yields a ``qadvisor.model.Finding`` (what it
found) or a ``qadvisor.model.Skip`` (what it could not judge), and the report holds the same
objects with what only the engine knows added (the check's code, name and docs page, its
severity; the fact and GRANT behind a skip). A check loops over :func:`judgeable` items: the
skips of the stream go to the report by themselves, so the body of the loop is the check's
judgement alone.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import re
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, TypeVar

from qadvisor.errors import InputError
from qadvisor.facts import FACTS
from qadvisor.model import Finding, Rule, Severity, Skip, Snapshot

ENTRY_POINT_GROUP = "qadvisor.checks"
_CODE = re.compile(r"^[A-Z]{2,5}[0-9]{3}$")
_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


T = TypeVar("T")

# The skips the judgeable items of the running check met, until the check's run yields them.
_SKIPS: ContextVar[list[Skip]] = ContextVar("qadvisor_skips")


def judgeable(items: Iterable[T | Skip]) -> Iterator[T]:
    """The items of a stream that a check can judge, without its skips: each skip goes to the
    report by itself, yielded by the check's run where the check met it.

    Only inside a check's run (``Check.run``), which is what yields the skips."""
    for item in items:
        if not isinstance(item, Skip):
            yield item
            continue
        skips = _SKIPS.get(None)
        if skips is None:
            raise RuntimeError(
                f"judgeable items outside a check's run would lose their skip ({item.reason})"
            )
        skips.append(item)


def _with_skips(
    fn: Callable[[Snapshot, Any], Iterable[Finding | Skip]],
) -> Callable[[Snapshot, Any], Iterator[Finding | Skip]]:
    """The check's function, yielding the skips its judgeable items met in their place among
    what it yields itself."""

    @functools.wraps(fn)
    def run(snapshot: Snapshot, options: Any) -> Iterator[Finding | Skip]:
        skips: list[Skip] = []
        # Set around each step only: another check's run may step in between (a test that
        # runs two at once), and its skips are its own.
        token = _SKIPS.set(skips)
        try:
            items = iter(fn(snapshot, options))
        finally:
            _SKIPS.reset(token)
        while True:
            token = _SKIPS.set(skips)
            try:
                item = next(items)
            except StopIteration:
                break
            finally:
                _SKIPS.reset(token)
            yield from skips
            skips.clear()
            yield item
        yield from skips

    return run


@dataclass(frozen=True)
class NoOptions:
    pass


@dataclass(frozen=True)
class Check(Rule):
    """A rule (code, name, severity, category, summary, doc, docs) and how to run it."""

    options: type[Any]
    run: Callable[[Snapshot, Any], Iterable[Finding | Skip]]
    min_server_version: int | None = None
    # Facts it reads (names of qadvisor.facts.FACTS): where one is hidden from the role or
    # behind a lock for a queue, the engine reports the check as skipped for that queue.
    requires: tuple[str, ...] = ()

    @property
    def rule(self) -> Rule:
        """The rule alone, plain data for a report."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(Rule)}
        return Rule(**fields)

    def default_options(self) -> Any:
        return self.options()


def check(
    code: str,
    name: str,
    *,
    severity: Severity,
    category: str,
    options: type[Any] = NoOptions,
    min_server_version: int | None = None,
    docs: str | None = None,
    requires: Iterable[str] = (),
    labels: Mapping[str, str] | None = None,
) -> Callable[[Callable[[Snapshot, Any], Iterable[Finding | Skip]]], Check]:
    """Make a check out of a pure function; its docstring is its user documentation.

    The first docstring line is the one-line summary; the rest uses the headings
    "What it finds", "Why it matters", "How to fix", "When it stays quiet". ``requires``
    names the facts it reads (``qadvisor.facts.FACTS``): the privileges page of the docs
    lists them, and a queue for which one is missing is reported as skipped, not healthy.
    ``labels`` gives the words of the evidence fields the check emits (``{"index_bytes":
    "Index size"}``) that qadvisor's shared table (``qadvisor.render.labels.LABELS``) lacks.
    """
    if not _CODE.match(code):
        raise ValueError(f"check code {code!r} must look like QA101")
    if not _NAME.match(name):
        raise ValueError(f"check name {name!r} must be kebab-case")
    _check_options(code, options)
    needs = tuple(requires)
    unknown = [f for f in needs if f not in FACTS]
    if unknown:
        raise ValueError(
            f"check {code} requires unknown fact(s) {', '.join(unknown)} "
            f"(known: {', '.join(FACTS)})"
        )
    words = dict(labels or {})
    blank = [f for f, text in words.items() if not (isinstance(text, str) and text.strip())]
    if blank:
        raise ValueError(f"check {code}: the label of {', '.join(map(str, blank))} is empty")

    def wrap(fn: Callable[[Snapshot, Any], Iterable[Finding | Skip]]) -> Check:
        doc = inspect.cleandoc(fn.__doc__ or "")
        summary = doc.splitlines()[0] if doc else name
        return Check(
            code=code,
            name=name,
            severity=severity,
            category=category,
            summary=summary,
            doc=doc,
            options=options,
            run=_with_skips(fn),
            min_server_version=min_server_version,
            docs=docs,
            requires=needs,
            labels=words,
        )

    return wrap


def _check_options(code: str, options: object) -> None:
    """The options of a check are a frozen dataclass (a class, not an instance) whose every
    field has a default: the engine makes them with ``options()`` and the config file's values,
    and the settings share one object between runs of the check."""
    wanted = "options must be a frozen dataclass with a default for every field"
    if not (isinstance(options, type) and dataclasses.is_dataclass(options)):
        raise TypeError(f"check {code}: {wanted}, not {options!r}")
    if not options.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"check {code}: {wanted}; {options.__name__} is not frozen")
    missing = [
        f.name
        for f in dataclasses.fields(options)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise TypeError(
            f"check {code}: {wanted}; {options.__name__}.{', '.join(missing)} has no default"
        )


def checks_in(module: types.ModuleType) -> Iterator[Check]:
    """Every Check defined in a module or, for a package, in its submodules."""
    seen: set[str] = set()
    for value in vars(module).values():
        if isinstance(value, Check) and value.code not in seen:
            seen.add(value.code)
            yield value
    path = getattr(module, "__path__", None)
    if path is not None:
        import pkgutil

        for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            sub = importlib.import_module(f"{module.__name__}.{info.name}")
            for c in checks_in(sub):
                if c.code not in seen:
                    seen.add(c.code)
                    yield c


class PackError(InputError):
    """A check pack could not be loaded; the message names the pack."""


def load_checks() -> tuple[Check, ...]:
    """All checks of every installed pack, sorted by code; a code registered twice is an error."""
    found: dict[str, tuple[Check, str]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            module = ep.load()
        except Exception as exc:  # a broken third-party pack must not look like a finding
            raise PackError(f"check pack {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
        if not isinstance(module, types.ModuleType):
            raise PackError(f"check pack {ep.name!r} must name a module, not {ep.value}")
        for c in checks_in(module):
            if c.code in found and found[c.code][0] is not c:
                raise PackError(
                    f"check code {c.code} is registered twice: by pack "
                    f"{found[c.code][1]!r} and by pack {ep.name!r}"
                )
            found[c.code] = (c, ep.name)
    return tuple(found[k][0] for k in sorted(found))
