"""The optional extras (pyproject.toml) and the one-line error of a command that needs one not installed:
``pip install perfkit`` analyses profiles, videos and dumps; the bundled models and kernels need more."""

from __future__ import annotations

import importlib.util

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


def missing(extra: str) -> bool:
    """Whether a module of ``extra`` cannot be found."""
    return any(importlib.util.find_spec(name) is None for name in EXTRAS[extra])


def require(extra: str, what: str, *, path: str | None = None) -> None:
    """Refuse ``what`` (e.g. ``cost --model``) in one line naming ``extra`` when it is not installed."""
    if missing(extra):
        raise BadInput(f"needs the '{extra}' extra: pip install 'perfkit[{extra}]'", path=path, field=what)
