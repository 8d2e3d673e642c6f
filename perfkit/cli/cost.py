"""``perfkit cost``: what each program and each step costs, and the roofline bound on a chip.

On dumps (a dump folder, rank folders, a run directory) it reads HLO text only: no jax. ``--model``
lowers a bundled model on paper (``perfkit.cost.paper``), which needs jax.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from perfkit.common import extras
from perfkit.common.digits import bytes_text, significant_text
from perfkit.cost import chips
from perfkit.cost.change import change, whose
from perfkit.cost.programs import cost_block, run_costs
from perfkit.cost.roofline import describe, roofline
from perfkit.errors import BadInput
from perfkit.hlo.program_cost import ProgramCost
from perfkit.hlo.dumps import single_dump
from perfkit.report.cost import OWN_DIGITS, digits_note, shown_digits


def _shape(shape: dict) -> str:
    """``grid (21, 30, 52): video 32760 rows, text 512 rows`` (and ``, batch 2 (CFG)`` under guidance)."""
    rows = ", ".join(f"{name} {n} rows" for name, n in shape["rows"].items())
    return f"grid {tuple(shape['grid'])}: {rows}" + (f", batch {shape['batch']} (CFG)" if shape["batch"] > 1 else "")


def program_lines(label: str, step: dict, roof: dict | None, shown: dict[str, int] | None = None) -> list[str]:
    """A step's figures in words, and its roofline where a chip is known; ``shown``: the significant digits of its
    FLOPs and HBM bytes where a change is said beside them (``shown_digits``, as report.md's Cost table has them)."""
    shown = shown or OWN_DIGITS
    where = f" ({step['file']})" if step.get("file") else ""
    if step.get("shape"):  # on paper: the size asked for (--rows, --guidance) changes every figure below
        where += " at " + _shape(step["shape"])
    lines = [f"{label}: step program {step['module']}{where}",
             # dot_flops holds convolutions too (library calls included): the label says so
             f"  FLOPs {significant_text(step['flops'], shown['flops'])} (dots and convolutions "
             f"{significant_text(step['dot_flops'])}, other {significant_text(step['other_flops'])}; beside them, "
             f"transcendentals {significant_text(step['transcendentals'])}); "
             f"HBM bytes accessed {bytes_text(step['hbm_bytes'], shown['hbm_bytes'])} a step; " +
             (f"temp {bytes_text(step['temp_bytes'])}, peak {bytes_text(step['peak_bytes'])}"
              if step["temp_bytes"] is not None or step["peak_bytes"] is not None else
              "temp and peak memory unknown (no *-buffer-assignment.txt beside the program: XLA writes one beside "
              "each program it dumps optimized, as text)" if step.get("file") else
              "temp and peak memory unknown (a program as lowered has no buffer assignment; XLA's dump after "
              "optimizations has)")]
    kinds = step["collectives"]
    lines.append("  collectives: " + ("; ".join(
        f"{k['count']} {kind} ({bytes_text(k['buffer_bytes'])} of buffers, {bytes_text(k['sent_bytes'])} sent a "
        "device)"
        for kind, k in kinds.items()) if kinds else "none"))
    uncosted = step.get("uncosted") or {}
    if uncosted:
        calls = ", ".join(f"{target} x{n}" for target, n in uncosted.items())
        n = sum(uncosted.values())
        # XLA's totals part from these by definition: said, so that the gap is not read as an error
        lines.append(f"  not costed: {n} custom-call{'s' * (n != 1)} ({calls}): no FLOPs are known for them, nor what "
                     "they send to other devices; left out of the FLOPs, their operands and results in the HBM bytes, "
                     "where XLA's cost analysis counts -1 FLOP and -1 byte for each (its mark for a custom-call it "
                     "cannot cost)")
    lines += [f"  {sentence}" for sentence in ProgramCost.definitions(step)]
    if roof is not None:
        lines.append("  roofline " + describe(roof))
    return lines


def _paper(model, config, rows, plan_name, options, devices, guidance, config_blocks) -> tuple[str, dict]:
    extras.require("jax", "cost --model")
    # Simulated CPU devices must be asked for before jax starts; on paper nothing runs on an accelerator.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    flags = os.environ.get("XLA_FLAGS", "")
    if "device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
    # jax and the models: only for --model (cost on dumps stays jax-free).
    from perfkit import models
    from perfkit.cost.paper import paper_cost, with_rows
    from perfkit.models.plans import make_plan

    try:
        family = models.get(model)
        cfg = family.config(config) if config_blocks else family.whole(config)
        if rows is not None:
            cfg = with_rows(cfg, rows)
        plan = make_plan(plan_name, **options)
        label = f"{model} {config} {plan_name} x{devices}"
        return label, paper_cost(model, cfg, plan, devices, guidance=guidance)
    except BadInput as exc:  # the models name a case file's fields; here the user typed flags
        raise BadInput(exc.reason, path=exc.path, field=_flag(exc.field)) from None


def _flag(field: str | None) -> str | None:
    """The flag of ``perfkit cost --model`` that sets a case file's ``field`` (``options.pad``: ``--option pad``)."""
    flags = {"model.name": "--model", "model.config": "--config", "options.plan": "--plan", "options": "--option",
             "devices": "--devices"}
    if field in flags:
        return flags[field]
    return "--option " + field.removeprefix("options.") if field and field.startswith("options.") else field


def _options(pairs: tuple[str, ...]) -> dict:
    out = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq:
            raise BadInput(f"{pair!r} is not KEY=VALUE", field="--option")
        out[key] = {"true": True, "false": False}.get(value.lower(), value)
    return out


@click.command("cost")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--chip", "chip_name", metavar="NAME", help=f"Roofline on this chip ({', '.join(chips.CHIPS)}); "
              "default: the run's own devices.")
@click.option("--step-module", metavar="TEXT", help="The step is the program whose name contains TEXT.")
@click.option("--model", metavar="NAME", help="Cost a bundled model on paper instead (lowered, never run).")
@click.option("--config", default="real", show_default=True, help="--model: its config.")
@click.option("--rows", type=click.IntRange(min=1), help="--model: latent rows (frames change, frame size kept).")
@click.option("--plan", "plan_name", default="sp", show_default=True, help="--model: the plan.")
@click.option("--option", "plan_options", multiple=True, metavar="KEY=VALUE", help="--model: a plan option.")
# A plain int: paper.check_devices refuses a count below 1 in one line, as it does one the model cannot split over.
@click.option("--devices", type=int, default=4, show_default=True, help="--model: devices.")
@click.option("--guidance", type=float, default=None, help="--model: CFG scale (a batch of 2); default none.")
@click.option("--config-blocks", is_flag=True, help="--model: the config's block counts, not the published model's.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: cost, roofline and (runs) change, per variant.")
def cost(paths, chip_name, step_module, model, config, rows, plan_name, plan_options, devices, guidance,
         config_blocks, as_json):
    """FLOPs, HBM bytes, collectives and memory of each step, and its roofline bound on a chip.

    PATHS: run directories (each variant's first trial with XLA dumps), dump folders or rank folders.
    Or --model NAME: a bundled model lowered on paper at its published block counts."""
    chip = chips.chip(chip_name) if chip_name else None
    if bool(paths) == bool(model):
        raise BadInput("give PATHS (dumps or a run directory) or --model, one of them", field="--model")
    blocks: dict[str, dict] = {}
    lines: dict[str, dict] = {}
    changes: dict[str, dict] = {}
    digits: dict[str, dict[str, int]] = {}  # a run's variants' figures' digits, where a change is said of them
    said: list[str] = []  # each run's change sentences, after the note on its figures' digits
    if model:
        label, step = _paper(model, config, rows, plan_name, _options(plan_options), devices, guidance, config_blocks)
        blocks[label] = {"dumps": None, "programs": [], "step": step}
        if chip is not None:
            lines[label] = roofline(step, chip)
    for path in paths:
        if (Path(path) / "trials").is_dir():
            summary_file = Path(path) / "summary.json"
            summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
            found, roofs = run_costs(Path(path), summary, chip, step_module)
            if not found:
                raise BadInput("no trial wrote XLA dumps (capture.xla_dump: none?)", path=path)
            # A variant without a step (no program --step-module names, dumps that do not parse or that hold no
            # module after optimizations) is said in its place while the others are costed; with none costed the
            # run is bad input, as a folder is.
            if all("step" not in b for b in found.values()):
                raise BadInput("; ".join(f"variant {v}: {b['error']}" for v, b in found.items()), path=path)
            prefix = "" if len(paths) == 1 else f"{path}:"
            blocks.update({prefix + v: b for v, b in found.items()})
            lines.update({prefix + v: r for v, r in roofs.items()})
            a, *others = found
            ran = {prefix + b: change(a, found[a]["step"], b, found[b]["step"], whose(summary.get("ranks") or {}, a, b))
                   for b in others if "step" in found[a] and "step" in found[b]}
            changes.update(ran)
            if ran:  # (the digits of the figures report.md's Cost table gives, said alike: digits_note)
                costed = [v for v in found if "step" in found[v]]
                shown = shown_digits([found[v]["step"] for v in costed], costed.index(a))
                digits.update({prefix + v: shown for v in costed})
                note = digits_note({k: shown[k] for k in ("flops", "hbm_bytes")}, len(ran))
                said += [note] * bool(note) + [c["sentence"] for c in ran.values()]
            continue
        label = str(Path(path))
        block = cost_block(single_dump(path), chip, step_module=step_module)
        roof = block.pop("roofline")
        blocks[label] = block
        if roof is not None:
            lines[label] = roof
    if as_json:
        click.echo(json.dumps({"cost": blocks, "roofline": lines, "change": changes}, indent=2))
        return
    for label, block in blocks.items():
        if "step" not in block:
            click.echo(f"{label}: not costed: {block['error']}")
            continue
        for line in program_lines(label, block["step"], lines.get(label), digits.get(label)):
            click.echo(line)
        if block.get("step_from") == "most_flops":
            click.echo("  (the step program is a guess, the one with the most FLOPs; --step-module TEXT names "
                       "the one your steps run)")
        elif block.get("step_from") == "traced":
            click.echo("  (the step program is the one the run's traced steps ran)")
    for line in said:
        click.echo(line)
    if not lines:
        click.echo(f"no roofline: the chip is unknown (give --chip {'|'.join(chips.CHIPS)})")
