"""The JSON Schemas of perfkit's files, generated from their types and shipped beside them (a test holds
each shipped file equal to what this generates): ``summary.schema.json``, one schema for every summary.json
perfkit writes (the top one of a matrix run, ``kind: "matrix"``, is a ``MatrixSummary``, any other a
``Summary``: ``perfkit.rundata.summary``); ``baseline.schema.json``, a ``perfkit check`` baseline
(``perfkit.rundata.baseline``); ``trial.schema.json``, a trials.jsonl line (``perfkit.rundata.trials``).
``validate`` refuses a file (or a line) that is not one in one line naming the field.

Write them again after changing the types:

    python -m perfkit.rundata.schema

Objects stay open (more keys may be added: the contract says "at least"); a key the types name must have
its type, and a key they require must be there. A bound the types give (``Annotated[int, ("minimum", 0)]``: a
keyword and its value) goes into the schema as written. A number is a finite one and an integer no float, as
JSON spells them (Python reads NaN, Infinity and 3.0 from a file, and jsonschema takes 3.0 for an integer):
perfkit writes no NaN (null: unknown) and no infinity (a PSNR's "inf") into any of these files.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import types
import typing
from importlib import resources
from pathlib import Path

import jsonschema

from perfkit.errors import BadInput
from perfkit.rundata.baseline import Baseline
from perfkit.rundata.metrics import figure
from perfkit.rundata.summary import MatrixSummary, Summary
from perfkit.rundata.trials import TrialRecord

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SHIPPED = {"summary": "summary.schema.json", "baseline": "baseline.schema.json", "trial": "trial.schema.json"}
NAMED = {"trial": "trial record"}  # what a refusal calls one, where not its key
PRIMITIVES = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}
SHOWN = 160  # characters of a refused value kept in the one-line reason
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
               float: "a number", type(None): "null"}


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
    if origin in (typing.Required, typing.NotRequired):
        return _of(args[0], defs)
    if origin is typing.Annotated:
        return {**_of(args[0], defs), **dict(args[1:])}
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
    hints = typing.get_type_hints(td, include_extras=True)
    out = {"type": "object"}
    if td.__doc__:
        out["description"] = inspect.cleandoc(td.__doc__)
    out["properties"] = {k: _of(t, defs) for k, t in hints.items()}
    out["required"] = [k for k in hints if k in td.__required_keys__]
    return out


def generate(which: str = "summary") -> dict:
    """The schema of ``which`` (a key of ``SHIPPED``), every type under ``$defs``. summary.json: ``MatrixSummary``
    where ``kind`` is "matrix", else ``Summary``."""
    defs: dict = {}
    if which == "baseline":
        root = {"title": "perfkit check baseline", **_of(Baseline, defs)}
    elif which == "trial":
        root = {"title": "perfkit trials.jsonl line", **_of(TrialRecord, defs)}
    else:
        run, matrix = _of(Summary, defs), _of(MatrixSummary, defs)
        root = {"title": "perfkit summary.json", "if": {"properties": {"kind": {"const": "matrix"}},
                                                        "required": ["kind"]}, "then": matrix, "else": run}
    return {"$schema": DIALECT, **root, "$defs": dict(sorted(defs.items()))}


def text(schema: dict) -> str:
    """The schema as the shipped file spells it."""
    return json.dumps(schema, indent=1) + "\n"


def shipped(which: str = "summary") -> dict:
    """The schema shipped in the package (what a summary.json, or a baseline, is validated against)."""
    return json.loads(resources.files(__package__).joinpath(SHIPPED[which]).read_text())


@functools.cache
def validator(which: str) -> jsonschema.protocols.Validator:
    """The shipped schema of ``which``'s validator, built once (a trials.jsonl is held to it line by line), whose
    numbers are finite and whose integers are no floats: a NaN step time read as a figure, a count of 3.0."""
    kinds = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many({
        "number": lambda _, x: figure(x), "integer": lambda _, x: isinstance(x, int) and not isinstance(x, bool)})
    return jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=kinds)(shipped(which))


def validate(data, which: str, path: str | Path, remedy: str = "") -> None:
    """BadInput, in one line naming the field, where ``data`` (read from ``path``) is not a ``which`` (summary,
    baseline, trial) as this perfkit writes it; ``remedy``: how to write it again."""
    error = jsonschema.exceptions.best_match(validator(which).iter_errors(data))
    if error is None:
        return
    reason = error.message
    if len(reason) > SHOWN:  # a large value's repr: its kind says enough
        reason = (f"{_JSON_TYPES.get(type(error.instance), 'value')} is not of type {error.validator_value!r}"
                  if error.validator == "type" else reason[:SHOWN] + "...")
    field = error.json_path.removeprefix("$").removeprefix(".") or None
    raise BadInput(f"{reason} (not a {NAMED.get(which, which)} this perfkit writes{remedy})", path=str(path),
                   field=field)


def main() -> None:
    for which, name in SHIPPED.items():
        path = Path(__file__).with_name(name)
        path.write_text(text(generate(which)))
        print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
