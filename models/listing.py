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


def catalog() -> dict:
    """Every family with its configs (fields and streams) and every plan with its options and defaults."""
    extras.require("jax", "models")
    # the models and jax: only when the catalog is asked for, not for `perfkit models --help`
    from perfkit import models
    from perfkit.models import plans

    families = []
    for name in models.names():
        fam = models.get(name)
        configs = {c: {"fields": dataclasses.asdict(cfg), "streams": {s: _stream(v) for s, v in fam.streams(cfg).items()}}
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
            click.echo(f"    {c:<6} {fields}\n           streams: {streams}")
    click.echo("plans (case: variants.<v>.options: {plan, ...options}):")
    for p in cat["plans"]:
        options = ", ".join(f"{k}={v}" + (f" ({'|'.join(p['choices'][k])})" if k in p["choices"] else "")
                            for k, v in p["options"].items()) or "none"
        click.echo(f"  {p['name']:<8} {p['description']}; options: {options}")
