"""The JSON Schema of summary.json, generated from the types of ``perfkit.rundata.summary`` and shipped
beside them as ``summary.schema.json`` (a test holds the shipped file equal to what this generates). One
schema for every summary.json perfkit writes: the top one of a matrix run (``kind: "matrix"``) is a
``MatrixSummary``, any other a ``Summary``.

Write it again after changing the types:

    python -m perfkit.rundata.schema

Objects stay open (more keys may be added: the contract says "at least"); a key the types name must have
its type, and a key they require must be there.
"""

from __future__ import annotations

import inspect
import json
import sys
import types
import typing
from importlib import resources
from pathlib import Path

from perfkit.rundata.summary import MatrixSummary, Summary

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SHIPPED = "summary.schema.json"
PRIMITIVES = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


def _of(tp, defs: dict) -> dict:
    """The schema of one annotation; a TypedDict goes to ``defs`` once and is referred to by name."""
    if tp is typing.Any:
        return {}
    if tp in PRIMITIVES:
        return {"type": PRIMITIVES[tp]}
    if typing.is_typeddict(tp):
        if tp.__name__ not in defs:
            defs[tp.__name__] = {}  # claimed first: a type that holds itself refers to its own name
            defs[tp.__name__] = _object(tp, defs)
        return {"$ref": f"#/$defs/{tp.__name__}"}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        members = [_of(a, defs) for a in args]
        if all(list(m) == ["type"] for m in members):  # int | None -> {"type": ["integer", "null"]}
            return {"type": [m["type"] for m in members]}
        return {"anyOf": members}
    if origin is list:
        return {"type": "array", "items": _of(args[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _of(args[1], defs)}
    raise TypeError(f"no JSON Schema for {tp!r}")


def _object(td, defs: dict) -> dict:
    hints = typing.get_type_hints(td)
    out = {"type": "object"}
    if td.__doc__:
        out["description"] = inspect.cleandoc(td.__doc__)
    out["properties"] = {k: _of(t, defs) for k, t in hints.items()}
    out["required"] = [k for k in hints if k in td.__required_keys__]
    return out


def generate() -> dict:
    """The schema: ``MatrixSummary`` where ``kind`` is "matrix", else ``Summary``; every type under ``$defs``."""
    defs: dict = {}
    run, matrix = _of(Summary, defs), _of(MatrixSummary, defs)
    return {"$schema": DIALECT, "title": "perfkit summary.json",
            "if": {"properties": {"kind": {"const": "matrix"}}, "required": ["kind"]}, "then": matrix, "else": run,
            "$defs": dict(sorted(defs.items()))}


def text(schema: dict) -> str:
    """The schema as the shipped file spells it."""
    return json.dumps(schema, indent=1) + "\n"


def shipped() -> dict:
    """The schema shipped in the package (what a summary.json is validated against)."""
    return json.loads(resources.files(__package__).joinpath(SHIPPED).read_text())


def main() -> None:
    path = Path(__file__).with_name(SHIPPED)
    path.write_text(text(generate()))
    print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
