"""The JSON Schema of the snapshot file, made from the Snapshot dataclasses themselves.

``qadvisor snapshot`` writes ``dataclasses.asdict(Snapshot)``; the schema is derived from the
same type hints that ``Snapshot.from_dict`` reads back (closed sets as enums, optional fields
as not required, every object closed to unknown fields), so it cannot say something the code
does not do. ``python -m qadvisor.docgen.schemas docs/snapshot.schema.json`` writes it; a test keeps
the file in the repository identical to what this produces. The JSON report's schema,
``docs/report.schema.json``, is written by hand: it is the public contract, and a test
validates every report against it.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal

from qadvisor.model import SNAPSHOT_FORMAT, Snapshot

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def snapshot_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    root = _object(Snapshot, defs)
    root["properties"]["format"] = {"const": SNAPSHOT_FORMAT}
    root["required"] = sorted({*root["required"], "format"})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"qadvisor snapshot file, format {SNAPSHOT_FORMAT}",
        "description": "What `qadvisor snapshot` writes and `qadvisor check --snapshot` reads. "
        "Generated from qadvisor/model.py (python -m qadvisor.docgen.schemas); fields added in "
        "later versions of the format are optional.",
        **root,
        "$defs": dict(sorted(defs.items())),
    }


def _object(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    required = []
    for f in dataclasses.fields(cls):
        props[f.name] = _type(hints[f.name], defs)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    return {
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": props,
    }


def _type(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp in _SCALARS:
        # A float field holds whole numbers too (json writes 5.0 as 5.0, but a hand-written
        # or older file may say 5).
        return {"type": "number"} if tp is float else {"type": _SCALARS[tp]}
    if tp is Any:
        return {}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        options = [_type(a, defs) for a in inner]
        if type(None) in args:
            options.append({"type": "null"})
        return options[0] if len(options) == 1 else {"anyOf": options}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder against recursion (PlanNode holds PlanNodes)
            defs[name] = _object(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if origin is tuple:
        return {"type": "array", "items": _type(args[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _type(args[1], defs)}
    raise TypeError(f"no JSON Schema for {tp!r}")


def render() -> str:
    return json.dumps(snapshot_schema(), indent=2) + "\n"


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/snapshot.schema.json")
    target.write_text(render())
    print(target)
