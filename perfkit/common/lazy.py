"""Public names of a stage package, imported on first use (PEP 562): ``perfkit.trace.load`` works in a
notebook, while ``import perfkit.trace`` (which every ``perfkit trace`` command does first) stays as
light as the command line needs."""

from __future__ import annotations

import importlib
from typing import Callable


def exports(package: str, table: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``table`` maps each public name to the module
    (relative to ``package``) that defines it, as ``module`` or ``module:name_there``."""

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = table[name].partition(":")
        return getattr(importlib.import_module(f"{package}.{module}"), attr or name)

    def __dir__() -> list[str]:
        return sorted(table)

    return __getattr__, __dir__
