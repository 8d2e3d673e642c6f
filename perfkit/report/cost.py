"""The run report's ``## Cost`` section, from summary.json's ``cost`` and ``roofline`` (stdlib only)."""

from __future__ import annotations

from perfkit.common.digits import BYTE_DIGITS, bytes_scale, bytes_text, change_text, digits, significant_text
from perfkit.cost.change import change, whose
from perfkit.cost.roofline import RESOURCES
from perfkit.hlo.program_cost import ProgramCost

# the custom-calls by which a program calls Python on the host (jax's io_callback, pure_callback), by platform and API
HOST_CALLBACKS = ("xla_ffi_python_cpu_callback", "xla_python_cpu_callback", "xla_ffi_python_gpu_callback",
                  "xla_python_gpu_callback")
# what a Pallas TPU kernel's remote copies are off TPU, said where a step program's host callbacks may be them
INTERPRETED = ("a Pallas TPU kernel run in interpret mode (off TPU) runs its DMAs, remote copies included, and its "
               "semaphores as such callbacks, so its remote copies are no collectives here and their time is compute")


def host_callbacks(step: dict) -> int:
    """The host callbacks (``HOST_CALLBACKS``) a step program (``as_json`` form) runs a step."""
    return sum(n for target, n in (step.get("uncosted") or {}).items() if target in HOST_CALLBACKS)


# the significant digits a step's figures are shown with where no change beside them needs more, and their names
OWN_DIGITS = {"flops": 3, "hbm_bytes": BYTE_DIGITS, "interconnect_bytes": BYTE_DIGITS}
FIGURE_NAMES = {"flops": "FLOPs", "hbm_bytes": "HBM bytes accessed", "interconnect_bytes": "bytes sent a device"}


def shown_digits(steps: list[dict], base: int) -> dict[str, int]:
    """The significant digits each of ``OWN_DIGITS``' figures is shown with where the steps' changes against
    ``steps[base]`` are said beside them: report.md's Cost table and ``perfkit cost RUN_DIR`` alike."""
    return {key: _dividing(steps, base, key, key != "flops") for key in OWN_DIGITS}


def digits_note(shown: dict[str, int], changes: int = 1) -> str | None:
    """Where ``shown`` holds more digits than a figure's own, which, in one sentence said beside the figures: a
    figure that prints one way in one place and another way in the other would read as two figures."""
    more = [(key, n) for key, n in shown.items() if n > OWN_DIGITS[key]]
    if not more:
        return None
    parts = [f"{FIGURE_NAMES[key]} {'are shown ' * (i == 0)}to {n}{' significant digits' * (i == 0)} "
             f"({OWN_DIGITS[key]} otherwise)" for i, (key, n) in enumerate(more)]
    listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return (f"{listed}: the digits the change{'s' * (changes != 1)} below "
            f"take{'s' * (changes == 1)} to follow from the figures shown.")


def _dividing(steps: list[dict], base: int, key: str, in_bytes: bool = False) -> int:
    """The significant digits (3 or more; ``BYTE_DIGITS`` or more ``in_bytes``) each step's ``key`` needs for the
    change the last sentence gives against the baseline's to follow from the two shown, in the units the table shows
    them in (bytes as MiB or GiB round apart from bytes)."""
    a = steps[base][key]
    pairs = [(a, s[key]) for s in steps if None not in (a, s[key])]
    if not in_bytes:
        return digits(pairs, 3, significant=True, text=change_text, most=9)
    # each pair in its figures' units (``bytes_text``), their ratio scaled back where one is GiB and one MiB
    return max((digits([(x / bytes_scale(x), y / bytes_scale(y))], BYTE_DIGITS, significant=True,
                       text=lambda r, k=bytes_scale(y) / bytes_scale(x): change_text(r * k), most=9)
                for x, y in pairs), default=BYTE_DIGITS)


def section(summary: dict) -> list[str]:
    """A table of each variant's step cost, its roofline where the chip is known, and B's change in words."""
    cost = {v: c for v, c in (summary.get("cost") or {}).items() if "step" in c}
    unread = [f"- {v}: its XLA dumps were not costed: {c['error'].splitlines()[0]}"
              for v, c in (summary.get("cost") or {}).items() if "step" not in c and c.get("error")]
    if not cost:
        return ["## Cost", "", *unread, ""] if unread else []
    names = list(cost)
    steps = [cost[v]["step"] for v in names]
    a = summary.get("baseline", names[0])
    # (no change sentence without the baseline's cost: nothing for more digits to follow)
    shown = shown_digits(steps, names.index(a)) if a in cost else OWN_DIGITS
    flops, hbm, sent = (shown[key] for key in ("flops", "hbm_bytes", "interconnect_bytes"))
    rows = ["## Cost", "", "The step program of each variant's first trial with XLA dumps, per device "
            "(`perfkit cost RUN_DIR --chip NAME` for any chip).", "",
            "| | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names),
            "| step program | " + " | ".join(f"`{s['module']}`" for s in steps) + " |",
            "| FLOPs (dots and convolutions) | "
            + " | ".join(f"{significant_text(s['flops'], flops)} ({significant_text(s['dot_flops'])})" for s in steps)
            + " |",
            "| HBM bytes accessed | " + " | ".join(bytes_text(s["hbm_bytes"], hbm) for s in steps) + " |",
            "| bytes sent a device | " + " | ".join(bytes_text(s["interconnect_bytes"], sent) for s in steps) + " |",
            "| temp / peak memory | " + " | ".join(f"{bytes_text(s['temp_bytes'])} / {bytes_text(s['peak_bytes'])}"
                                                  for s in steps) + " |"]
    kinds = sorted({k for s in steps for k in s["collectives"]})
    rows += [f"| {k} per step | " + " | ".join(str(s["collectives"].get(k, {}).get("count", 0)) for s in steps) + " |"
             for k in kinds]
    roof = summary.get("roofline") or {}
    if roof:
        chip = next(iter(roof.values()))["chip"]
        rows += [f"| roofline on {chip}: {r} | " + " | ".join(
            f"{roof[v][f'{r}_ms']:.4g} ms" if v in roof else "-" for v in names) + " |" for r in RESOURCES]
        rows += ["| bound (binding) / serial | " + " | ".join(
            f"{roof[v]['bound_ms']:.4g} ms ({roof[v]['binding']}) / {roof[v]['serial_ms']:.4g} ms" if v in roof
            else "-" for v in names) + " |"]
        measured = [v for v in names if v in roof and roof[v].get("measured_over_bound") is not None]
        if measured:
            rows += ["| measured step / bound | " + " | ".join(
                f"{roof[v]['measured_over_bound']:.2f}" if v in measured else "-" for v in names) + " |"]
    for v, step in zip(names, steps):
        uncosted = ProgramCost.uncosted_calls(step, "`")
        if uncosted:
            rows += ["", f"{v}'s FLOPs and bytes sent leave out {uncosted}: their work, and whatever they send."]
        if calls := host_callbacks(step):  # (an interpreted kernel's remote copies: easy to read as none made)
            none = "" if step["collectives"] else " and no collective"
            rows += ["", f"{v}'s step program runs {calls} host callback{'s' * (calls != 1)} a step{none}: Python "
                     f"called on the host from inside the program; {INTERPRETED}."]
        rows += [line for sentence in ProgramCost.definitions(step) for line in ("", f"In {v}, {sentence}.")]
    traced = [v for v in names if cost[v].get("step_from") == "traced"]
    if traced:
        rows += ["", f"The step program of {', '.join(traced)} is the one its traced steps ran (the most device time "
                 "inside them)."]
    guessed = [v for v in names if cost[v].get("step_from") == "most_flops"]
    if guessed:  # (a command case's dumps: no bundled step program, and an init program may cost the most)
        rows += ["", f"The step program of {', '.join(guessed)} is a guess, the program with the most FLOPs of its "
                 "dump (no bundled step program there): `perfkit cost RUN_DIR --step-module NAME` costs the one "
                 "your steps run."]
    if a in cost:
        checks = summary.get("ranks") or {}
        note = digits_note(shown, len(names) - 1)
        rows += ["", note] * bool(note) + [""] + [
            change(a, cost[a]["step"], v, cost[v]["step"], whose(checks, a, v))["sentence"] + "."
            for v in names if v != a]
    apart = [(v, r["divergent_ranks"]) for v, r in (summary.get("ranks") or {}).items()
             if v in cost and r.get("consistent") is False and r.get("divergent_ranks")]
    for v, ranks in apart:  # (the step costed is the first rank's: another rank's program is not)
        rows += ["", f"{v}'s ranks compiled different programs (Rank consistency): its cost is its first rank's "
                 f"program's; rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} compiled another."]
    return rows + (["", *unread] if unread else []) + [""]
