"""The ``perfkit`` command line. Commands are imported when used, so ``perfkit --help`` stays fast and
analysis-only commands never import jax or torch."""

from __future__ import annotations

import importlib
import json
import sys

import click

from perfkit import __version__
from perfkit.errors import BadInput, ExitCode

# name -> "module:attribute" of a click command; imported on first use.
COMMANDS = {
    "run": "perfkit.cli:run",
    "env": "perfkit.cli:env",
    "hlo-diff": "perfkit.hlo.cli:hlo_diff",
    "quality": "perfkit.quality:command",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BadInput as exc:
            click.echo(f"perfkit: {exc.line()}", err=True)
            ctx.exit(ExitCode.BAD_INPUT)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perfkit")
def cli():
    """Profiling and A/B benchmarking for sequence-parallel diffusion transformers."""


@click.command()
@click.argument("case_file", type=click.Path(dir_okay=False), default="cases/quickstart.yaml")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a case field (dotted keys).")
@click.option("--only", metavar="VARIANT", help="Run one variant only.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Run directory (default reports/runs/...).")
def run(case_file, overrides, only, out_dir):
    """Run the A/B trials of CASE_FILE and write a report (default: cases/quickstart.yaml)."""
    from perfkit import case as case_mod
    from perfkit.runner import run_case

    case = case_mod.load(case_file, list(overrides))
    run_dir = run_case(case, out_dir, only=only)
    summary = json.loads((run_dir / "summary.json").read_text())
    failed = summary["trials"]["failed"] or summary.get("interrupted")
    sys.exit(ExitCode.TRIAL_FAILED if failed else ExitCode.OK)


@click.command()
@click.option("--devices", type=int, default=None, help="Simulated CPU devices to probe with (CPU only).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def env(devices, as_json):
    """Versions, devices and the git tree hash, as a run records them in env.json."""
    import os

    from perfkit import envinfo
    from perfkit.runner import REPO_ROOT, xla_flags

    probe_env = dict(os.environ)
    if devices:
        probe_env["XLA_FLAGS"] = xla_flags(probe_env.get("XLA_FLAGS", ""), devices, None)
    info = envinfo.collect(REPO_ROOT, devices_env=probe_env)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    src = info["source"]
    click.echo(f"perfkit {info['packages']['perfkit']}  python {info['python']}  host {info['host']} ({info['cpus']} CPUs)")
    click.echo("packages: " + ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v))
    dev = info["devices"]
    click.echo("devices: " + (dev.get("error") or f"{dev['count']} x {dev['kind']} ({dev['platform']})"))
    if src.get("git"):
        dirty = f", uncommitted changes {src['dirty_hash']}" if src["dirty"] else ""
        click.echo(f"source: commit {src['commit'][:12]}, tree {src['tree']}{dirty}")
    for k, v in info["flags"].items():
        click.echo(f"{k}={v}")


def main() -> None:
    cli(prog_name="perfkit")


if __name__ == "__main__":
    main()
