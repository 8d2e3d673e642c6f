"""The optional extras (pyproject.toml) and the one-line error of a command that needs one not installed:
``pip install perfkit`` analyses profiles, videos and dumps; the bundled models and kernels need more."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from perfkit.errors import BadInput

# extra -> the modules it installs that perfkit imports (found, not imported: jax takes seconds to load)
EXTRAS = {
    "jax": ("jax",),
    "torch": ("torch", "jax"),  # the torch models share the JAX models' configs and plans
}


def of_module(module: str) -> str | None:
    """The extra a bundled program (``python -m MODULE``) needs, or None for perfkit's own analyses."""
    if module.startswith("perfkit.models.torch_"):
        return "torch"
    return "jax" if module.startswith(("perfkit.models", "perfkit.kernels")) else None


def of_script(path: Path) -> str | None:
    """The extra a Python script of perfkit's bundled cases needs: the one that installs every module it imports
    (its import statements read, not run), perfkit's own through ``of_module``; None where it imports none of them.
    A bundled script imports no such module it can run without."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names] + \
        [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level]
    needed = {of_module(m) or next((e for e, mods in EXTRAS.items() if m.split(".")[0] in mods), None) for m in names}
    return max(needed - {None}, key=lambda e: len(EXTRAS[e]), default=None)


def missing(extra: str) -> bool:
    """Whether a module of ``extra`` cannot be found."""
    return any(importlib.util.find_spec(name) is None for name in EXTRAS[extra])


def require(extra: str, what: str, *, path: str | None = None) -> None:
    """Refuse ``what`` (e.g. ``cost --model``) in one line naming ``extra`` when it is not installed."""
    if missing(extra):
        raise BadInput(f"needs the '{extra}' extra: pip install 'perfkit[{extra}]'", path=path, field=what)
