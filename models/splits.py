"""The device counts a plan can split a bundled model over: every dimension it shards (weights' sharded axes, head
counts) divides by the count, and every stream's rows split over it (or are padded: the plan option ``pad``).

A count that does not is refused before anything runs (a run's trials would each crash in jax, e.g. on
``IndivisibleError``), naming the dimensions that do not divide and the counts that would.
"""

from __future__ import annotations

import dataclasses
import math

import jax

from perfkit.errors import BadInput
from perfkit.models.layers import is_weight
from perfkit.models.plans import AXIS


def sharded_dims(family, cfg, plan) -> list[tuple[int, str]]:
    """(size, what) of each dimension ``plan`` splits over the devices: weights' sharded axes, and the head
    counts of every plan but the local one (tp and sp shard heads, ulysses trades rows for heads)."""
    dims = {}
    for w in jax.tree.leaves(family.param_specs(cfg), is_leaf=is_weight):
        for size, axes in zip(w.shape, plan.param_spec(w.kind)):
            if axes == AXIS or (isinstance(axes, tuple) and AXIS in axes):
                dims[str(size)] = size
    if plan.name != "local":
        for f in dataclasses.fields(cfg):
            if f.name == "heads" or f.name.endswith("_heads"):
                n = getattr(cfg, f.name)
                dims[f"{n} {f.name.replace('_', ' ')}"] = n
    return sorted((size, what) for what, size in dims.items())


def check_devices(family, cfg, plan, devices: int) -> None:
    """Refuse (``BadInput``, field ``devices``) a device count ``plan`` cannot split ``family`` (a
    ``perfkit.models.Family``) at ``cfg`` over: one that a sharded dimension does not divide (naming the counts
    that work with these options), or one the streams' rows do not split over (``Plan.bind``, field
    ``options.pad``)."""
    if devices < 1:
        raise BadInput(f"{devices} devices; give 1 or more", field="devices")
    dims = sharded_dims(family, cfg, plan)
    short = [what for size, what in dims if size % devices]
    if short:
        common = math.gcd(*(size for size, _ in dims))
        streams = family.streams(cfg)
        divide = [n for n in range(1, common + 1) if common % n == 0]
        fit = [n for n in divide if _binds(plan, streams, n)]  # never empty: rows split over 1
        padded = f" (also {_either(sorted(set(divide) - set(fit)))} with the plan option pad)" if fit != divide else ""
        raise BadInput(f"the {family.name} model's dims sharded under plan {plan.name} ({', '.join(short)}) do not "
                       f"divide by {devices}; use {_either(fit)}{padded}", field="devices")
    plan.bind(family.streams(cfg), devices)


def _either(counts: list[int]) -> str:
    return ", ".join(map(str, counts[:-1])) + f" or {counts[-1]}" if len(counts) > 1 else str(counts[0])


def _binds(plan, streams, devices: int) -> bool:
    try:
        plan.bind(streams, devices)
    except BadInput:
        return False
    return True
