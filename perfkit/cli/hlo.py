"""``perfkit hlo-diff``: which ranks compiled a different program, and where it differs.

Imports only the stdlib, click, perfkit.hlo and perfkit.cost (no jax, torch or pandas), so it starts fast.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import click

from perfkit.cli import notes
from perfkit.cost.chips import chip
from perfkit.cost.programs import ab_cost
from perfkit.errors import BadInput, DefinitionNote, ExitCode
from perfkit.hlo import render
from perfkit.hlo.consistency import check_all
from perfkit.hlo.diff import compare_ab
from perfkit.hlo.dumps import run_trials, single_dump, variant_dumps

MULTI_PROCESS_CASE = "repro/rank_constant"


def ab_result(a: Path, b: Path, module_filter: str | None, chip_name: str | None) -> dict:
    """``--ab``'s result: A's modules against B's, and each step's cost."""
    result = compare_ab(a, b, module_filter)
    result["cost"] = ab_cost(a, b, chip(chip_name) if chip_name else None, module_filter)
    return result


def single_process_ab(run_dir: Path) -> tuple[Path, Path, str]:
    """A run whose trials are one process each has no ranks to compare: its first two variants' programs
    (each one's first trial with dumps), and the note saying so; ``BadInput`` leading on where there are
    not two (where a variant's ranks dumped no module after optimizations, what they dumped: ``variant_dumps``)."""
    everything = variant_dumps(run_dir)
    found = {v: folder for v, folder in everything.items() if isinstance(folder, Path)}
    if len(found) < 2:
        unread = [f"variant {v}: {why.line()}" for v, why in everything.items() if isinstance(why, BadInput)]
        if unread:  # (as perfkit cost says a variant it cannot cost)
            raise BadInput("; ".join(unread), path=str(run_dir))
        raise BadInput(f"no multi-rank trial with HLO dumps here, and {len(found)} variant{'s' * (len(found) != 1)} "
                       f"with dumps: hlo-diff compares the ranks of a multi-process trial (e.g. `perfkit run "
                       f"{MULTI_PROCESS_CASE}`, then hlo-diff its run directory), or two programs with `perfkit "
                       "hlo-diff --ab A_DUMP B_DUMP`", path=str(run_dir))
    (a_name, a), (b_name, b) = list(found.items())[:2]
    before_b = list(everything)[:list(everything).index(b_name)]  # (one passed over, its dumps unread: said why)
    passed = "".join(f"; variant {v}'s are not compared: {everything[v].line()}" for v in before_b if v not in found)
    note = (f"{run_dir}: each trial is one process, so there are no ranks to compare; comparing variant {a_name}'s "
            f"programs (A) with {b_name}'s (B), as `perfkit hlo-diff --ab {a} {b}` does (ranks: a multi-process "
            f"case, e.g. `perfkit run {MULTI_PROCESS_CASE}`){passed}")
    return a, b, note


@click.command("hlo-diff")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--ab", is_flag=True, help="Two dump folders: variant A's programs against B's (exit 0 whatever it "
              "finds: variants may compile other programs by design).")
@click.option("--module", "module_filter", metavar="TEXT", help="Only modules whose name contains TEXT.")
@click.option("--chip", "chip_name", metavar="NAME", help="--ab: each step's roofline on this chip (perfkit cost --chip).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--markdown", is_flag=True, help="Print Markdown (as run reports embed it).")
def hlo_diff(paths, ab, module_filter, chip_name, as_json, markdown):
    """Compare the XLA programs that ranks compiled (exit 1 when they diverge).

    PATHS: a run directory, a folder of rank<R>/ dump folders, or one dump folder per rank
    (--xla_dump_to=DIR --xla_dump_hlo_as_text). With --ab: A_DUMP B_DUMP. A run directory whose trials are
    one process each (the quickstart's) has no ranks to compare: its first two variants' programs are
    compared instead, as --ab compares them.
    """
    if as_json and markdown:
        raise BadInput("--json and --markdown exclude each other", field="--markdown")
    run_dir = Path(paths[0])
    if not ab and len(paths) == 1 and (run_dir / "trials").is_dir() and not run_trials(run_dir):
        a, b, note = single_process_ab(run_dir)
        click.echo(note, err=True)
        result = {**ab_result(a, b, module_filter, chip_name), "note": note, "notes": notes()}
        click.echo(json.dumps(result, indent=2) if as_json else render.ab_report(result, markdown), nl=as_json)
        sys.exit(ExitCode.OK)
    if ab:
        if len(paths) != 2:
            raise BadInput(f"--ab takes two dump folders (A then B), got {len(paths)}", field="--ab")
        result = {**ab_result(single_dump(paths[0]), single_dump(paths[1]), module_filter, chip_name), "notes": notes()}
        click.echo(json.dumps(result, indent=2) if as_json else render.ab_report(result, markdown), nl=as_json)
        sys.exit(ExitCode.OK)
    if len(paths) == 1 and (run_dir / "trials").is_dir():  # a variant with no dumps to compare: said, not lost
        for variant, why in variant_dumps(run_dir).items():
            if isinstance(why, BadInput):
                warnings.warn(f"variant {variant}'s ranks are not compared: {why.line()}", DefinitionNote,
                              stacklevel=1)
    result = check_all(list(paths), module_filter)
    if len(paths) == 2 and not result["consistent"]:  # (two variants' dumps given as two ranks read as a divergence)
        warnings.warn("the two folders are compared as two ranks of one program; two variants' dumps (A, B) compare "
                      "with --ab A B", DefinitionNote, stacklevel=1)
    if as_json:
        click.echo(json.dumps({**result, "notes": notes()}, indent=2))
    else:
        click.echo("\n".join(render.ranks_report(c, markdown) for c in result["checks"]), nl=False)
    sys.exit(ExitCode.OK if result["consistent"] else ExitCode.CHECK_FAILED)
