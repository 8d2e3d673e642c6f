"""``perfkit hlo-diff``: which ranks compiled a different program, and where it differs.

Imports only the stdlib, click and perfkit.hlo (no jax, torch or pandas), so it starts fast.
"""

from __future__ import annotations

import json
import sys

import click

from perfkit.cost.chips import chip
from perfkit.cost.programs import ab_cost
from perfkit.errors import BadInput, ExitCode
from perfkit.hlo import render
from perfkit.hlo.diff import compare_ab, compare_ranks
from perfkit.hlo.dumps import resolve, single_dump


def check_all(paths: list[str], module_filter: str | None = None) -> dict:
    """Every rank set the paths name, compared; the ``--json`` result of the rank mode."""
    # workers=None: distinct dump files parse in a process per core (this process is single-threaded).
    checks = [compare_ranks(d, module_filter, workers=None) for d in resolve(paths)]
    return {"consistent": all(c["consistent"] for c in checks),
            "modules": [{**m, "source": c["source"]} for c in checks for m in c["modules"]],
            "checks": checks}


@click.command("hlo-diff")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--ab", is_flag=True, help="Two dump folders: variant A's programs against B's.")
@click.option("--module", "module_filter", metavar="TEXT", help="Only modules whose name contains TEXT.")
@click.option("--chip", "chip_name", metavar="NAME", help="--ab: each step's roofline on this chip (perfkit cost --chip).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--markdown", is_flag=True, help="Print Markdown (as run reports embed it).")
def hlo_diff(paths, ab, module_filter, chip_name, as_json, markdown):
    """Compare the XLA programs that ranks compiled (exit 1 when they diverge).

    PATHS: a run directory, a folder of rank<R>/ dump folders, or one dump folder per rank
    (--xla_dump_to=DIR --xla_dump_hlo_as_text). With --ab: A_DUMP B_DUMP.
    """
    if as_json and markdown:
        raise BadInput("--json and --markdown exclude each other", field="--markdown")
    if ab:
        if len(paths) != 2:
            raise BadInput(f"--ab takes two dump folders (A then B), got {len(paths)}", field="--ab")
        a, b = single_dump(paths[0]), single_dump(paths[1])
        result = compare_ab(a, b, module_filter)
        result["cost"] = ab_cost(a, b, chip(chip_name) if chip_name else None, module_filter)
        click.echo(json.dumps(result, indent=2) if as_json else render.ab_report(result, markdown), nl=as_json)
        sys.exit(ExitCode.OK)
    result = check_all(list(paths), module_filter)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo("\n".join(render.ranks_report(c, markdown) for c in result["checks"]), nl=False)
    sys.exit(ExitCode.OK if result["consistent"] else ExitCode.CHECK_FAILED)
