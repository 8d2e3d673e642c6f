"""Checking a mapping read from a user's file against a table of known keys: unknown keys refused with
the nearest valid one suggested, types checked, defaults filled. Case files and serve specs use it."""

from __future__ import annotations

import copy
import difflib

from perfkit.errors import BadInput


def _type_name(t) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true/false", list: "a list",
             dict: "a mapping"}
    if isinstance(t, tuple):
        return " or ".join(names[x] for x in t)
    return names[t]


def _is_type(val, typ) -> bool:
    # YAML's true/false are Python bools, which are ints: refuse them where a number is wanted.
    allowed = typ if isinstance(typ, tuple) else (typ,)
    if isinstance(val, bool):
        return bool in allowed
    return isinstance(val, allowed)


def check_keys(data: dict, table: dict, where: str, path: str) -> dict:
    """Refuse unknown keys (suggesting the nearest) and wrong types; fill defaults."""
    out = {}
    for key, val in data.items():
        if key not in table:
            # the nearest by spelling, else a key the unknown one spells out (`env` for `environment`)
            near = difflib.get_close_matches(str(key), list(table), n=1) or \
                [k for k in table if len(k) >= 3 and str(key).lower().startswith(k)][:1]
            hint = f" (did you mean '{near[0]}'?)" if near else f" (valid: {', '.join(table)})"
            raise BadInput(f"unknown key{hint}", path=path, field=f"{where}{key}")
        typ, _ = table[key]
        if val is not None and not _is_type(val, typ):
            raise BadInput(f"must be {_type_name(typ)}, got {type(val).__name__} {val!r}", path=path,
                           field=f"{where}{key}")
        out[key] = val
    for key, (_, default) in table.items():
        if out.get(key) is None:
            out[key] = copy.deepcopy(default)
    return out
