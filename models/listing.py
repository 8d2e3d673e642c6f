"""``perfkit models``: the bundled model families (configs, streams) and the parallel plans (options),
the names a case's ``model`` and ``variants.<v>.options`` use."""

from __future__ import annotations

import dataclasses
import json

from typing import TYPE_CHECKING

import click

from perfkit.common import extras

if TYPE_CHECKING:
    from perfkit.models import plans


def _stream(s: plans.Stream | plans.Joint) -> dict:
    if hasattr(s, "parts"):  # a Joint: streams concatenated along the sequence
        return {"joint": list(s.parts), "chunks": s.chunks}
    return {"rows": s.rows, "channels": s.channels, "denoised": s.denoised, "sequence": s.sequence}


def block_order(family, cfg) -> list[str]:
    """The names of ``cfg``'s blocks (as their taps name them) in the order the forward numbers them: the index
    ``rope_fault_block`` takes. Read from the forward itself, traced on abstract shapes under a plan that notes
    each block number it is asked about and the first tap after it, so the listing follows the model's code."""
    # jax and the models: only when the catalog is asked for, not for `perfkit models --help`
    import jax

    from perfkit.models import layers, plans, taps

    numbered = []  # (block number, taps seen before it)

    class Noting(plans.Plan):
        def block_angles(self, angles, block):
            numbered.append((block, len(found)))
            return angles

    streams = family.streams(cfg)
    plan = Noting().bind(streams, 1)
    params = jax.tree.map(lambda w: jax.ShapeDtypeStruct(w.shape, "float32"), family.param_specs(cfg),
                          is_leaf=layers.is_weight)
    inputs = {n: jax.ShapeDtypeStruct((1, s.rows, s.channels), "float32") for n, s in streams.items()
              if isinstance(s, plans.Stream)}
    with taps.collecting() as found:
        jax.eval_shape(lambda p, x, t: family.forward(p, x, t, cfg=cfg, plan=plan), params, inputs,
                       jax.ShapeDtypeStruct((1,), "float32"))
    names = {block: found[seen][0].split(".")[0] for block, seen in numbered}
    if sorted(names) != list(range(len(numbered))):  # each block asks once, numbered from 0: else none is named
        raise AssertionError(f"{family.name}: blocks numbered {[b for b, _ in numbered]}")
    return [names[b] for b in range(len(names))]


def block_text(names: list[str]) -> str:
    """``double0..double1 then single0..single3 counted 0..5``: runs of one kind of block, then their indices."""
    runs: list[list[str]] = []
    for name in names:
        if runs and runs[-1][0].rstrip("0123456789") == name.rstrip("0123456789"):
            runs[-1].append(name)
        else:
            runs.append([name])
    spans = " then ".join(r[0] if len(r) == 1 else f"{r[0]}..{r[-1]}" for r in runs)
    return f"{spans} counted 0" + (f"..{len(names) - 1}" if len(names) > 1 else "")


def catalog() -> dict:
    """Every family with its configs (fields and streams) and every plan with its options and defaults."""
    extras.require("jax", "models")
    # the models and jax: only when the catalog is asked for, not for `perfkit models --help`
    from perfkit import models
    from perfkit.models import plans

    families = []
    for name in models.names():
        fam = models.get(name)
        configs = {c: {"fields": dataclasses.asdict(cfg),
                       "streams": {s: _stream(v) for s, v in fam.streams(cfg).items()},
                       "blocks": block_order(fam, cfg)}
                   for c, cfg in fam.configs.items()}
        families.append({"name": name, "description": fam.description, "configs": configs,
                         "published_blocks": dict(fam.published_blocks)})
    plan_list = [{"name": p.name, "description": p.description, "options": plans.plan_options(p),
                  "choices": plans.option_choices(p)} for p in plans.PLANS.values()]
    return {"families": families, "plans": plan_list}


def _stream_text(name: str, s: dict) -> str:
    if "joint" in s:
        return f"{name} = {' | '.join(s['joint'])} ({s['chunks']})"
    role = ("denoised" if s["denoised"] else "condition") + (", sequence" if s["sequence"] else ", whole")
    return f"{name} {s['rows']}x{s['channels']} ({role})"


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def command(as_json):
    """The bundled model families and parallel plans, as cases name them."""
    cat = catalog()
    if as_json:
        click.echo(json.dumps(cat, indent=2))
        return
    click.echo("families (case: model: {name, config}):")
    for fam in cat["families"]:
        click.echo(f"  {fam['name']:<8} {fam['description']}")
        published = ", ".join(f"{k} {v}" for k, v in fam["published_blocks"].items())
        click.echo(f"           a case runs a config's blocks as listed; `perfkit cost --model` costs the published "
                   f"model's: {published}")
        for c, cfg in fam["configs"].items():
            fields = ", ".join(f"{k} {v}" for k, v in cfg["fields"].items() if not isinstance(v, (str, bool)))
            streams = "; ".join(_stream_text(s, v) for s, v in cfg["streams"].items())
            click.echo(f"    {c:<6} {fields}\n           streams: {streams}\n"
                       f"           blocks (rope_fault_block's index): {block_text(cfg['blocks'])}")
    click.echo("plans (case: variants.<v>.options: {plan, ...options}):")
    for p in cat["plans"]:
        options = ", ".join(f"{k}={v}" + (f" ({'|'.join(p['choices'][k])})" if k in p["choices"] else "")
                            for k, v in p["options"].items()) or "none"
        click.echo(f"  {p['name']:<8} {p['description']}; options: {options}")
