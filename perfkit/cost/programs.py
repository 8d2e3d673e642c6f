"""The cost of the programs a run or a dump folder holds, and of one step (stdlib only).

A dump folder holds every program a process compiled; the step is the one the bundled worker runs each
denoise step (``jit__euler_step``) or the kernel bench times (``jit_kernel_step``: not its XLA reference,
which may cost more than an interpreted Pallas kernel), else the program the run's traced steps ran (the most
device time inside them: an init or tapping program runs outside the steps), else the program with the most FLOPs
(``step_module`` names another). Every rank of an SPMD program compiles the same module (``perfkit hlo-diff``
checks it), so a rank set is costed by its lowest rank.
"""

from __future__ import annotations

import json
from pathlib import Path

from perfkit.cost import chips
from perfkit.cost.change import change
from perfkit.cost.chips import Chip
from perfkit.cost.roofline import describe, roofline
from perfkit.errors import BadInput
from perfkit.hlo.program_cost import ProgramCost, dump_cost
from perfkit.hlo.dumps import AFTER_PASSES, dump_files, note_unfinished, unfinished, variant_dumps
from perfkit.rundata.rundir import rank_dirs

# the bundled worker's step (perfkit.models.pipeline._euler_step), the kernel bench's op (perfkit.kernels.bench)
STEP_MODULES = ("jit__euler_step", "jit_kernel_step")


def folder_costs(folder: Path) -> list[ProgramCost]:
    """Every program of one dump folder, in compile order (one dumped only before optimizations noted, not costed)."""
    note_unfinished(folder)
    return [dump_cost(f) for f in dump_files(folder)]


def step_cost(costs: list[ProgramCost], step_module: str | None = None, traced: tuple[str, ...] = (),
              folder: Path | None = None) -> ProgramCost:
    """The program one step runs (see the module docstring); ``traced``: the programs the traced steps ran, by
    device time, most first. ``folder``: the dump folder ``costs`` are of, whose programs dumped only before
    optimizations (``unfinished``) are chosen among too: ``BadInput`` where the one chosen (named, bundled or traced)
    is one of them, whose figures no one has, rather than another program's given as the step's."""
    left = {stem.partition(".")[2] or stem: stem for stem in unfinished(folder)} if folder is not None else {}
    if step_module is not None:
        named = [c for c in costs if step_module in c.module]
        lost = next((m for m in left if step_module in m), None)
        if not named and lost is not None:
            raise BadInput(f"the program {step_module!r} names, {lost} ({left[lost]}), was dumped only before "
                           f"optimizations, so it is not costed: {AFTER_PASSES}", path=str(folder),
                           field="--step-module")
        if not named:
            raise BadInput(f"no program whose name contains {step_module!r} (have: "
                           f"{', '.join(sorted({c.module for c in costs}))})", field="--step-module")
        return named[0]
    bundled = [c for c in costs if c.module in STEP_MODULES]
    if bundled:
        return bundled[0]
    # the first of the bundled steps and the traced programs that the folder holds, finished or not
    done = {c.module for c in costs}
    first = next((m for m in (*STEP_MODULES, *traced) if m in left or m in done), None)
    if first in left and first not in done:
        raise BadInput(f"the step program {first} ({left[first]}) was dumped only before optimizations, so it is not "
                       f"costed: {AFTER_PASSES}", path=str(folder))
    ran = [c for c in costs if c.module == first]
    return (ran or [max(costs, key=lambda c: (c.dot_flops + c.other_flops, c.hbm_bytes))])[0]


def step_from(step: ProgramCost, step_module: str | None = None, traced: tuple[str, ...] = ()) -> str:
    """How ``step_cost`` picked ``step``: ``step_module`` (named), ``bundled`` (a bundled program's step),
    ``traced`` (the program the traced steps ran) or ``most_flops`` (a guess, which a report must say: an init or
    tapping program may cost as much as the step a command case runs, or more)."""
    return ("step_module" if step_module is not None else "bundled" if step.module in STEP_MODULES
            else "traced" if step.module in traced else "most_flops")


def run_chip(run_dir: Path) -> Chip | None:
    """The chip a run's devices were (env.json ``devices.kind``), or None (CPU, unknown, no env.json)."""
    try:
        env = json.loads((run_dir / "env.json").read_text())
    except (OSError, ValueError):
        return None
    return chips.from_device_kind((env.get("devices") or {}).get("kind"))


def cost_block(folder: Path, chip: Chip | None, measured_ms: float | None = None,
               step_module: str | None = None, traced: tuple[str, ...] = ()) -> dict:
    """One variant's ``cost`` entry: every program, the step (``step_cost``), and the step's roofline (None
    without a chip)."""
    costs = folder_costs(folder)
    step = step_cost(costs, step_module, traced, folder)
    return {"dumps": str(folder), "programs": [c.as_json() for c in costs], "step": step.as_json(),
            "step_from": step_from(step, step_module, traced),
            "roofline": roofline(step.as_json(), chip, measured_ms) if chip is not None else None}


def run_costs(run_dir: Path, summary: dict, chip: Chip | None = None,
              step_module: str | None = None) -> tuple[dict, dict]:
    """``cost`` and ``roofline`` of summary.json: per variant with dumps (or why not, ``variant_dumps``), its step the
    program its traced steps ran where the summary's breakdown names them (``step_programs``); the roofline on
    ``chip``, else on the run's own chip (env.json's devices, else its profiles' plane stats), where a step timed on
    that chip is set beside its bound."""
    own = run_chip(run_dir)
    profiles = [] if own is not None else [
        f for trial in sorted((run_dir / "trials").glob("*")) for r in rank_dirs(trial)
        for f in sorted((r / "trace").glob("**/*.xplane.pb"))]
    if profiles:
        from perfkit.cost.profile_chip import profile_chip  # numpy and the xplane reader: only for profiled runs

        own = profile_chip(profiles)
    chip = chip or own
    cost, lines = {}, {}
    for variant, folder in variant_dumps(run_dir).items():
        if isinstance(folder, BadInput):  # its ranks dumped no module after optimizations: said in its place, as below
            cost[variant] = {"dumps": folder.path, "error": folder.line()}
            continue
        step_ms = ((summary.get("variants") or {}).get(variant) or {}).get("step_ms") or {}
        timed_here = own is not None and chip is not None and own.name == chip.name
        traced = (((summary.get("breakdown") or {}).get("variants") or {}).get(variant) or {}).get("step_programs")
        try:
            block = cost_block(folder, chip, step_ms.get("median") if timed_here else None, step_module,
                               tuple(traced or ()))
        except BadInput as exc:  # a dump that does not parse costs nothing, the rest of the run still counts
            cost[variant] = {"dumps": str(folder), "error": exc.line()}
            continue
        lines[variant] = block.pop("roofline")
        cost[variant] = block
    return cost, {v: r for v, r in lines.items() if r is not None}


def ab_cost(a_folder: Path, b_folder: Path, chip: Chip | None = None, step_module: str | None = None) -> dict:
    """``perfkit hlo-diff --ab``'s ``cost``: A's and B's step, their rooflines (with a chip) and the change."""
    a, b = cost_block(a_folder, chip, step_module=step_module), cost_block(b_folder, chip, step_module=step_module)
    said = change("A", a["step"], "B", b["step"])
    rooflines = {"A": a["roofline"], "B": b["roofline"]}
    lines = [said["sentence"], *(f"{side} roofline {describe(r)}" for side, r in rooflines.items() if r is not None)]
    lines += [f"{side}'s FLOPs and bytes sent leave out {calls}: their work, and whatever they send" for side, calls
              in (("A", ProgramCost.uncosted_calls(a["step"])), ("B", ProgramCost.uncosted_calls(b["step"]))) if calls]
    guessed = [f"{side}'s" for side, block in (("A", a), ("B", b)) if block["step_from"] == "most_flops"]
    if guessed:  # (no bundled step program there: an init or tapping program may cost the most)
        which = ("A's and B's step programs are guesses, the program with the most FLOPs of each dump"
                 if len(guessed) == 2 else f"{guessed[0]} step program is a guess, the program with the most FLOPs of "
                 "its dump")
        lines += [f"{which}: `perfkit cost PATH --step-module NAME` costs the one your steps run"]
    return {"a": a["step"], "b": b["step"], "roofline": {"a": a["roofline"], "b": b["roofline"]}, "change": said,
            "lines": lines}
