"""Reference SP model families, by name: ``perfkit.models.get("wan")``.

Every family is a set of configs (``tiny`` for CPU, ``real`` for published block sizes), a tree of
parameter specs, and one ``forward`` written against ``perfkit.models.plans.Plan``.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

FAMILIES = {"wan": "perfkit.models.wan"}


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    configs: dict[str, Any]
    param_specs: Callable[[Any], Any]
    forward: Callable[..., Any]
    description: str


def get(name: str) -> Family:
    if name not in FAMILIES:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(FAMILIES))}")
    mod = importlib.import_module(FAMILIES[name])
    doc = (mod.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    return Family(name, mod.CONFIGS, mod.param_specs, mod.forward, doc)


def names() -> list[str]:
    return sorted(FAMILIES)
