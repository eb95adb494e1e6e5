"""The two sides of a diff, read from files: a JSON report as ``check --format json`` writes
it, or a snapshot as ``qadvisor snapshot`` (or ``check --history``) saves it, which is judged
here by the installed checks as ``check --snapshot`` would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from qadvisor.diff.compare import Side
from qadvisor.errors import InputError, read_json
from qadvisor.model import Snapshot


class DiffInputError(InputError):
    """A file given to diff is neither a qadvisor JSON report nor a snapshot."""


def load(path: Path, judge: Callable[[Snapshot], dict[str, Any]]) -> tuple[dict[str, Any], Side]:
    """The report a file holds, or the report of the snapshot it holds, and its side."""
    data = read_json(path, "report or snapshot", DiffInputError)
    if isinstance(data, dict) and "fleet" in data and "databases" in data:
        # Its findings name their databases and it has no checks_run or skips of its own:
        # read as one database's report it would compare wrongly.
        raise DiffInputError(
            f"{path} is a fleet's report (--all-databases, --dsn-file): diff compares one "
            "database's; take it out with jq '.databases[] | select(.database == \"NAME\") "
            "| .report'"
        )
    if isinstance(data, dict) and "findings" in data and "schema_version" in data:
        if data["schema_version"] != 1:
            raise DiffInputError(
                f"{path}: a JSON report of schema_version {data['schema_version']!r}; this "
                "qadvisor reads schema_version 1"
            )
        return data, Side(str(path), str(data.get("database", "")), None, "report")
    if isinstance(data, dict) and "format" in data and "server" in data:
        try:
            snap = Snapshot.from_dict(data)
        except (ValueError, TypeError, KeyError) as exc:
            raise DiffInputError(f"{path} is not a qadvisor snapshot: {exc}") from None
        side = Side(str(path), snap.server.database, snap.server.collected_at, "snapshot")
        return judge(snap), side
    raise DiffInputError(
        f"{path} is neither a qadvisor JSON report (check --format json) nor a snapshot"
    )
