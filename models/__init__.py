"""Reference SP model families, by name: ``perfkit.models.get("wan")``.

Every family module holds its configs (``tiny`` for CPU, ``real`` for published block sizes), its
streams (``perfkit.models.plans.Stream`` / ``Joint``), a tree of parameter specs, and one ``forward``
written against ``perfkit.models.plans.Plan``.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from typing import Any, Callable

from perfkit.errors import BadInput

FAMILIES = {
    "wan": "perfkit.models.wan",
    "flux": "perfkit.models.flux",
    "hunyuan": "perfkit.models.hunyuan",
    "ltx2": "perfkit.models.ltx2",
}


@dataclasses.dataclass(frozen=True)
class Family:
    """One model family: ``forward(params, inputs, t, *, cfg, plan)`` maps stream name -> (B, S', C)
    inputs and (B,) times to the velocity of each denoised stream."""

    name: str
    configs: dict[str, Any]
    streams: Callable[[Any], dict]
    param_specs: Callable[[Any], Any]
    forward: Callable[..., Any]
    description: str
    published_blocks: dict[str, int]  # config field -> the published model's block count

    def whole(self, config):
        """A config (name or object) with the published model's block counts."""
        return dataclasses.replace(self.config(config), **self.published_blocks)

    def config(self, config):
        """A config by name, or a config object passed through."""
        if not isinstance(config, str):
            return config
        if config not in self.configs:
            raise BadInput(f"model {self.name!r} has configs {sorted(self.configs)}, not {config!r}",
                           field="model.config")
        return self.configs[config]


def get(name: str) -> Family:
    if name not in FAMILIES:
        raise BadInput(f"unknown model {name!r}; known: {', '.join(sorted(FAMILIES))}", field="model.name")
    mod = importlib.import_module(FAMILIES[name])
    doc = (mod.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    return Family(name, mod.CONFIGS, mod.streams, mod.param_specs, mod.forward, doc, mod.PUBLISHED_BLOCKS)


# Variant options the bundled worker acts on itself; every other option belongs to the plan.
WORKER_OPTIONS = ("save_latents",)


def plan_for(name: str, config, options: dict, devices: int):
    """The plan a case's variant asks for (``options``: ``plan`` and its options), bound to the family's
    streams over ``devices`` ranks. ``BadInput`` names the option, or the device count (``splits``), that cannot
    be honoured."""
    # plans import jax: only when a plan is built, not to list families
    from perfkit.models.plans import PLANS, make_plan, plan_options
    from perfkit.models.splits import check_devices

    # A key no plan takes, spelt near one a variant may set (`plam` for `plan`), is a typo: name the key meant,
    # where the plan (the default one, when `plan` itself is the typo) would only list its own options.
    # An option set to null is absent (the plan's default): `--set variants.sp.options.impl=null` drops it, as a
    # variant moved to a plan that lacks the option needs.
    options = {k: v for k, v in options.items() if v is not None}
    valid = {"plan", *WORKER_OPTIONS, *(o for p in PLANS.values() for o in plan_options(p))}
    for key in sorted(set(options) - valid, key=str):
        near = difflib.get_close_matches(str(key), sorted(valid), n=1)
        if near:
            raise BadInput(f"unknown option (did you mean '{near[0]}'?)", field=f"options.{key}")
    opts = {k: v for k, v in options.items() if k not in WORKER_OPTIONS}
    family = get(name)
    plan = make_plan(opts.pop("plan", "local"), **opts)
    cfg = family.config(config)
    check_devices(family, cfg, plan, devices)
    fault = getattr(plan, "rope_fault_block", None)
    blocks = sum(getattr(cfg, field) for field in family.published_blocks)
    if fault is not None and fault >= blocks:  # else no block is faulted and the taps read as a clean all-clear
        raise BadInput(f"rope_fault_block {fault} is past the last block: {name} {config} has blocks 0..{blocks - 1} "
                       f"(perfkit models lists them)", field="options.rope_fault_block")
    return plan.bind(family.streams(cfg), devices)


def names() -> list[str]:
    return sorted(FAMILIES)
