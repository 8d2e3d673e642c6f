"""Tapping a torch model's named modules through forward hooks, for perfkit's first-departure analysis.

Each named module's output goes to ``perfkit.record.tap`` as the forward runs, so taps come in the
order the modules run (the same in every variant of one model):

    names = {"blocks.0.wo": "block0.attn", "blocks.0": "block0.out"}   # module name -> tap name
    if record.tapping(step):
        with torch_taps.tapping(model, names, step=step, gather=placement.gather):
            model(x, t, text)

A tap must be the whole logical array: ``gather`` turns this rank's part of an output into it (every
rank calls the forward, so a gather that is a collective runs on all of them in the same order).
Register the taps after a plan's own hooks (tensor parallelism's all-reduce on a row-parallel output),
since hooks run in the order they were registered; run the tapped forward eagerly (not compiled).
"""

from __future__ import annotations

import contextlib
import re
from typing import Callable, Iterator, Mapping, Sequence

from perfkit import record


def module_names(model, pattern: str) -> list[str]:
    """The names of ``model``'s modules that match ``pattern`` (a whole-name regex), in model order."""
    return [name for name, _ in model.named_modules() if re.fullmatch(pattern, name)]


@contextlib.contextmanager
def tapping(model, names: Mapping[str, str] | Sequence[str], *, step: int | None = None,
            gather: Callable | None = None) -> Iterator[None]:
    """While inside, every forward of a module in ``names`` (module names, or module name -> tap name)
    taps its output (a tuple's first item) through ``gather``; the hooks are removed on the way out.
    A name the model does not have is a ``KeyError``."""
    taps = dict(names) if isinstance(names, Mapping) else {n: n for n in names}
    modules = dict(model.named_modules())
    missing = [n for n in taps if n not in modules]
    if missing:
        raise KeyError(f"the model has no module {', '.join(missing)}")

    def hook(tap_name: str):
        def run(module, inputs, output):
            value = output[0] if isinstance(output, (tuple, list)) else output
            record.tap(tap_name, gather(value) if gather is not None else value, step=step)
        return run

    handles = [modules[name].register_forward_hook(hook(tap)) for name, tap in taps.items()]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
