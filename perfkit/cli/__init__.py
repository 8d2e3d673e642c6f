"""The ``perfkit`` command line. Commands are imported when used, so ``perfkit --help`` stays fast and
analysis-only commands never import jax or torch."""

from __future__ import annotations

import dataclasses
import difflib
import errno
import gc
import importlib
import json
import math
import os
import signal
import sys
import warnings
from pathlib import Path

import click

from perfkit.common.json_figures import json_safe
from perfkit.errors import BadInput, DefinitionNote, ExitCode
from perfkit.rundata.rundir import resume_command, run_folder

# name -> ("module:attribute" of a click command, its one-line help): imported on first use; the help
# is spelt here so that `perfkit --help` lists the commands without importing any of them
# (tests/test_cli_help.py holds each line to the command's own).
COMMANDS = {
    "run": ("perfkit.cli:run",
            "Run the A/B trials of CASE_FILE (a file, or a bundled case by name: `perfkit cases`) and write a report..."),
    "cases": ("perfkit.cli:cases", "List the bundled cases (`perfkit run NAME` runs one) with each one's description."),
    "report": ("perfkit.cli:report", "Rewrite each RUN_DIR's summary.json, report.md and plots from its files "
                                     "(merging the parts of a multi-host..."),
    "check": ("perfkit.cli:check",
              "Compare RUN_DIR with a committed baseline: trials, B/A ratios, quality, determinism, ranks, step cost."),
    "cost": ("perfkit.cli.cost:cost",
             "FLOPs, HBM bytes, collectives and memory of each step, and its roofline bound on a chip."),
    "env": ("perfkit.cli:env", "Versions, devices and the git tree hash, as a run records them in env.json."),
    "hlo-diff": ("perfkit.cli.hlo:hlo_diff", "Compare the XLA programs that ranks compiled (exit 1 when they diverge)."),
    "quality": ("perfkit.cli.quality:command", "Compare output B against reference A: videos, PNG / JPEG folders, "
                ".npy / .npz, a trial's outputs folder."),
    "trace": ("perfkit.cli.trace:trace", "Trace analysis of xplane.pb (TPU, GPU, CPU) and Kineto JSON profiles."),
    "models": ("perfkit.models.listing:command", "The bundled model families and parallel plans, as cases name them."),
}


NOTES = "perfkit.notes"  # the click context's meta key of the definition notes printed so far (a --json repeats them)


HELD = "perfkit.notes_held"  # the meta key of the note lines held back until the command ends (``hold_notes``)


def notes() -> list[str]:
    """The definition notes this command printed on stderr (``perfkit: note: ...``), for its --json."""
    return click.get_current_context().meta.get(NOTES, [])


def hold_notes() -> None:
    """The running command's notes printed once it ends, and none where it refuses its input (exit 2): a note said
    of a file the command then refuses reads as if the file had been measured."""
    click.get_current_context().meta.setdefault(HELD, [])


class UsageLine(click.UsageError):
    """A command line click cannot parse, said in one line as perfkit says any bad input (exit 2): the command,
    what is wrong, where its help is; click's own display spends four lines on it."""

    def __init__(self, message: str, command: str):
        super().__init__(message)
        self.command = command

    def show(self, file=None) -> None:
        click.echo(f"{self.command}: {self.format_message()} See '{self.command} --help'.", err=True, file=file)


def _one_line(exc: click.UsageError, parent: click.Context | None = None) -> click.UsageError:
    """``exc`` shown in one line, naming its command: its own context's, else the subcommand ``parent`` was
    invoking (click raises an option's missing value without a context); a command run bare still shows its
    help (click's ``NoArgsIsHelpError``)."""
    if isinstance(exc, (UsageLine, click.exceptions.NoArgsIsHelpError)):
        return exc
    if exc.ctx is not None:
        command = exc.ctx.command_path
    else:
        command = " ".join(filter(None, [parent.command_path, parent.invoked_subcommand])) if parent else "perfkit"
    return UsageLine(exc.format_message(), command)


class OneLineGroup(click.Group):
    """A group whose subcommands' command lines that do not parse are said in one line (``UsageLine``)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc, ctx) from None


class LazyGroup(OneLineGroup):
    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:  # perfkit's own options (its subcommands' are parsed in invoke)
            raise _one_line(exc) from None

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name][0].split(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx, formatter):
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in self.list_commands(ctx)])

    def invoke(self, ctx):
        with warnings.catch_warnings():
            warnings.simplefilter("always", DefinitionNote)
            warnings.showwarning = _show(warnings.showwarning, ctx.meta.setdefault(NOTES, []), ctx.meta)
            try:
                return super().invoke(ctx)
            except BadInput as exc:
                ctx.meta.pop(HELD, None)  # (the refusal alone)
                click.echo(f"perfkit: {exc.line()}", err=True)
                ctx.exit(ExitCode.BAD_INPUT)
            except OSError as exc:  # a file the user named that cannot be read or written (permissions, a full disk)
                if exc.filename is None:
                    raise
                ctx.meta.pop(HELD, None)
                click.echo(f"perfkit: {exc.filename}: {exc.strerror or exc}", err=True)
                ctx.exit(ExitCode.BAD_INPUT)
            except KeyboardInterrupt:
                # Ctrl-C (its workers already stopped on the way out): the contract's "stopped", as `perfkit run`
                # says it; click's own `Aborted!` exits 1, which reads as a failed check (`check`, `hlo-diff`)
                click.echo("perfkit: stopped", err=True)
                ctx.exit(ExitCode.STOPPED)
            finally:
                for line in ctx.meta.pop(HELD, None) or []:
                    click.echo(line, err=True)


def _show(shown, notes: list[str], meta: dict):
    """``warnings.showwarning`` that prints a ``DefinitionNote`` as one line ``perfkit: note: ...`` (or holds it
    back, ``hold_notes``) and adds it to ``notes``."""
    def show(message, category, *args, **kwargs):
        if issubclass(category, DefinitionNote):
            if str(message) in notes:  # (a folder listed twice, by the cut and by the reader: said once)
                return
            if HELD in meta:
                meta[HELD].append(f"perfkit: note: {message}")
            else:
                click.echo(f"perfkit: note: {message}", err=True)
            notes.append(str(message))
        else:
            shown(message, category, *args, **kwargs)
    return show


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="perfkit", prog_name="perfkit")
def cli():
    """Profiling and A/B benchmarking for sequence-parallel diffusion transformers."""


def bundled_cases() -> dict[str, Path]:
    """Each bundled case by name: its path under the cases folder, without ``.yaml``."""
    from perfkit.rundata.case import cases_dir  # yaml, which the case files' module loads: kept off --help

    root = cases_dir()
    return {p.relative_to(root).with_suffix("").as_posix(): p for p in sorted(root.rglob("*.yaml"))}


def case_path(arg: str | None) -> Path:
    """A case file as the command line names it: a file that exists, else a bundled case by name
    (``quickstart``, ``torch/wan_recompile``, with or without ``.yaml``), else the path as given (which
    loading refuses: no such case file); the quickstart when none."""
    if arg is None:
        return bundled_cases()["quickstart"]
    if Path(arg).exists():
        return Path(arg)
    return bundled_cases().get(arg.removesuffix(".yaml"), Path(arg))


def _nearest_case(arg: str) -> str:
    """" (did you mean `NAME`?)" for the bundled case whose name is nearest to ``arg``, else ""."""
    names = list(bundled_cases())
    near = difflib.get_close_matches(arg.removesuffix(".yaml"), names, n=1) or \
        difflib.get_close_matches(Path(arg).stem, [Path(n).name for n in names], n=1)
    if not near:
        return ""
    name = next((n for n in names if n == near[0] or Path(n).name == near[0]))
    return f" (did you mean `{name}`?)"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def cases(as_json):
    """List the bundled cases (`perfkit run NAME` runs one) with each one's description."""
    from perfkit.rundata.case import load_raw  # yaml: only to read the cases

    rows = []
    for name, path in bundled_cases().items():
        raw = load_raw(path)
        kind = next((k for k in ("model", "command", "serve") if raw.get(k)), "?")
        rows.append({"name": name, "kind": kind, "description": str(raw.get("description", "")), "path": str(path)})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        click.echo(f"{r['name']:<{width}}  {r['kind']:<7}  {r['description']}")


@click.command()
@click.argument("case_file", type=click.Path(dir_okay=False), required=False)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a case field (dotted keys).")
@click.option("--only", metavar="VARIANT", help="Run one variant only.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Run directory (default ./reports/runs/<case>-<time>).")
@click.option("--aa", is_flag=True, help="Also run the baseline again, interleaved: the A/A noise floor.")
@click.option("--salt", is_flag=True, help="Every trial compiles fresh (compile caches off, a new PERFKIT_SALT).")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False), metavar="RUN_DIR",
              help="Continue an interrupted run: finished trials are kept.")
@click.option("--hosts", type=click.IntRange(min=1), default=1, help="Hosts sharing one run (docs/multi-host.md).")
@click.option("--host-index", type=click.IntRange(min=0), default=None, help="This host's index, 0..HOSTS-1.")
@click.option("--coordinator", metavar="HOST:PORT", help="Multi-host: rank 0's host and a base port.")
def run(case_file, overrides, only, out_dir, aa, salt, resume_dir, hosts, host_index, coordinator):
    """Run the A/B trials of CASE_FILE (a file, or a bundled case by name: `perfkit cases`) and write a
    report into reports/runs/ under the current folder (default case: quickstart).

    Exit code 3 when a trial failed or hung, or the run was stopped (Ctrl-C): the report is still
    written, and --resume RUN_DIR continues it."""
    # A SIGTERM (a CI timeout, a scheduler) stops the run like Ctrl-C: ranks ended, partial report.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        result = _run_or_resume(case_file, overrides, only, out_dir, aa, salt, resume_dir, hosts, host_index,
                                coordinator)
    except KeyboardInterrupt:  # before the first trial or after the last: nothing to report
        click.echo("perfkit: stopped", err=True)
        sys.exit(ExitCode.STOPPED)
    if result.interrupted:
        click.echo(f"perfkit: stopped; `{resume_command(result.run_dir)}` runs the rest", err=True)
    sys.exit(ExitCode.TRIAL_FAILED if result.failed else ExitCode.OK)


def _run_or_resume(case_file, overrides, only, out_dir, aa, salt, resume_dir, hosts, host_index, coordinator):
    from perfkit.rundata import case as case_mod  # yaml and the case schema: only to run

    if resume_dir:
        given = [n for n, v in (("CASE_FILE", case_file), ("--set", overrides), ("--only", only), ("--out", out_dir),
                                ("--aa", aa), ("--salt", salt), ("--coordinator", coordinator)) if v]
        if given or hosts != 1:
            raise BadInput(f"--resume continues a run as it was started; drop {', '.join(given) or '--hosts'}",
                           path=resume_dir, field="--resume")
        from perfkit.run.runner import resume_run  # the runner's stack: only once the options are good

        return resume_run(resume_dir, host_index)
    if hosts > 1 and not out_dir:
        raise BadInput("a multi-host run needs --out: the run directory all hosts share", field="--out")
    path = case_path(case_file)
    if not path.exists():
        raise BadInput(f"no such case file or bundled case{_nearest_case(case_file)}; `perfkit cases` lists the "
                       "bundled ones", path=str(path))
    case = case_mod.load(path, list(overrides) + (["aa=true"] if aa else []))
    if case_mod.empty_matrix(case):
        click.echo(f"perfkit: note: {path}: matrix: empty: the case runs once, as a case without a matrix (a matrix "
                   "maps dotted fields to lists of values, one run per combination: matrix: {seed: [0, 1]})", err=True)
    # the runner's stack (statistics, pandas): only once the case is good
    from perfkit.run.runner import run_case
    from perfkit.run.trial import RunOptions

    return run_case(case, out_dir, RunOptions(only=only, salt=salt, hosts=hosts, host_index=host_index or 0,
                                              coordinator=coordinator))


@click.command()
@click.option("--devices", type=int, default=None, help="Simulated CPU devices to probe with (CPU only).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def env(devices, as_json):
    """Versions, devices and the git tree hash, as a run records them in env.json."""
    # each command imports what it needs when run: `perfkit --help` stays fast
    from perfkit.run import envinfo
    from perfkit.common.xla import xla_flags

    probe_env = dict(os.environ)
    if devices:
        probe_env["XLA_FLAGS"] = xla_flags(probe_env.get("XLA_FLAGS", ""), devices, None)
    info = envinfo.collect(devices_env=probe_env)
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


class FiniteFloat(click.FloatRange):
    """A float in range that is a number: nan passes a range's comparisons (``nan < 0`` is false), and a tolerance
    of inf would pass any regression, so each is a command line that does not parse (exit 2)."""

    name = "finite float"

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number.", param, ctx)
        return number

    def _describe_range(self) -> str:
        # click's help would read "[x<=None]" for a range with no bounds (--min-psnr): say nothing there
        return "" if self.min is None and self.max is None else super()._describe_range()


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--baseline", "baseline_file", required=True, type=click.Path(dir_okay=False),
              help="Baseline JSON (or another run's summary.json).")
@click.option("--update-baseline", is_flag=True, help="Write the baseline from this run instead of checking.")
@click.option("--ratio-tolerance", type=FiniteFloat(min=0), default=None,
              help="A B/A ratio fails when its CI lies wholly above baseline x (1 + this). Default: 0.10 or the case's "
                   "check:.")
@click.option("--psnr-drop", "psnr_drop_db", type=FiniteFloat(min=0), default=None,
              help="A PSNR fails more than this many dB below the baseline's. Default: 0.5 or the case's check:.")
@click.option("--min-psnr", "min_psnr_db", type=FiniteFloat(), default=None, help="A PSNR fails below this (dB).")
@click.option("--cost-tolerance", type=FiniteFloat(min=0), default=None,
              help="A step's FLOPs, HBM bytes, bytes sent or temp memory fails when it moves more than this "
                   "share from the baseline's. Default: 0.01 or the case's check:.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def check(run_dir, baseline_file, update_baseline, ratio_tolerance, psnr_drop_db, min_psnr_db, cost_tolerance,
          as_json):
    """Compare RUN_DIR with a committed baseline: trials, B/A ratios, quality, determinism, ranks, step cost.

    \b
    One row per figure; a row fails when
      trials       a trial failed or hung (whatever the baseline's did), or the run was stopped
      timing       a B/A step-time ratio's whole CI (95%; each look's, higher, in the adaptive rounds) lies
                   above baseline x (1 + ratio tolerance); a serve case's every level too: latency so,
                   outputs/min below baseline / (1 + ratio tolerance)
                   or the run's A/A control (--aa) was called faster or slower than the baseline itself
      quality      a PSNR (B vs A, each variant vs the oracle) drops below its limit, or
                   bit-identical outputs are no longer so
      determinism  a variant's repeats were bit-identical in the baseline (or not checked there) and are not now
      ranks        a variant's ranks compile different programs, unless they did in the baseline too
      cost         a variant's collectives per step (by kind, exactly) or its FLOPs, HBM bytes,
                   bytes sent a device or temp memory (within the cost tolerance) changed

    Timing sees only a change larger than the ratio's CI on this machine (docs/ci.md); the cost rows
    see any change to the compiled step program, whatever the load. Exit code 1 when a row fails (each
    is listed), 2 when an input is refused (a run not finished: no summary.json yet); with
    GITHUB_STEP_SUMMARY set, a Markdown summary is appended there. --update-baseline writes BASELINE from
    this run, refusing one with failed trials, stopped, or whose A/A control called a change."""
    # pandas, jsonschema, the cost gate and the case schema: only when a check runs, not for --help (``check``
    # here is perfkit.report.check, the module, within this command of its name)
    from perfkit.report import check
    from perfkit.report.line import summary_line
    from perfkit.rundata import schema
    from perfkit.rundata.rundir import read_summary

    run = Path(run_dir)
    check.finished(run)
    summary = read_summary(run)
    # the gate reads most of it: one written by another perfkit, or damaged, is refused naming the field
    schema.validate(summary, "summary", run / "summary.json", f"; `perfkit report {run_dir}` writes it again")
    if summary.get("kind") == "matrix":
        raise BadInput("a matrix run: check each combination's directory (cells/NN)", path=str(run))
    check.checks_run_ratios(summary, run / "summary.json")
    check.agrees_with_trials(summary, run)
    flags = {"ratio_tolerance": ratio_tolerance, "psnr_drop_db": psnr_drop_db, "min_psnr_db": min_psnr_db,
             "cost_tolerance": cost_tolerance}
    if update_baseline:
        written = check.write_baseline(Path(baseline_file), run, summary)
        # said where it can be acted on, the run at hand; a summary kept without its case has no thresholds to say it by
        for note in check.unsure_notes(written, check.thresholds_for(run, **flags)) if (run / "case.yaml").is_file() \
                else []:
            click.echo(f"perfkit: note: {note}", err=True)
        click.echo(f"baseline written: {baseline_file} (from {run_dir})")
        return
    baseline = check.load_baseline(baseline_file)
    check.same_setup(baseline, summary, baseline_file, run)
    th = check.thresholds_for(run, **flags)
    frame = check.check_frame(baseline, summary, th, run)
    passed = bool(frame.passed.all())
    if as_json:
        click.echo(json.dumps(json_safe({"passed": passed, "baseline": str(baseline_file),
                                         "thresholds": dataclasses.asdict(th),
                                         "rows": frame.to_dict("records")}), indent=2))
    else:
        for line in check.text_lines(frame):
            click.echo(line)
        failed = int((~frame.passed).sum())
        unsure = check.not_ruled_out(frame)
        click.echo(f"check: {'passed' if passed else 'FAILED'}, {failed} of {len(frame)} rows failed "
                   f"against {baseline_file}" + (f"; {unsure}" if unsure else ""))
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        line = summary_line(summary, run / "report.md")
        try:
            with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
                f.write("\n".join(check.markdown(frame, summary["case"], line)) + "\n")
        except OSError as exc:  # the CI's summary file is what is wrong: the gate's verdict and exit code stand
            click.echo(f"perfkit: {os.environ['GITHUB_STEP_SUMMARY']}: GITHUB_STEP_SUMMARY: the step summary cannot "
                       f"be appended there ({exc.strerror or exc}; the verdict above stands)", err=True)
    raise SystemExit(ExitCode.OK if passed else ExitCode.CHECK_FAILED)


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--progression", "across_runs", is_flag=True, help="One table across the runs, in the order given.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), help="--progression: also write the table here.")
@click.option("--json", "as_json", is_flag=True, help="--progression: print the rows as JSON.")
def report(run_dirs, across_runs, out_file, as_json):
    """Rewrite each RUN_DIR's summary.json, report.md and plots from its files (merging the parts of a
    multi-host run first); exit code 3 when a trial failed or hung. With --progression, print one
    Markdown table across the runs (each run's summary.json) instead."""
    if across_runs:
        from perfkit.report import progression  # numpy and pandas: only for --progression

        frame = progression.progression_frame(progression.load_runs([Path(d) for d in run_dirs]))
        text = json.dumps({"rows": json_safe(frame.to_dict("records"))}, indent=2) if as_json \
            else "\n".join(progression.markdown(frame))
        click.echo(text)
        if out_file:
            Path(out_file).write_text(text + "\n")
        return
    if out_file or as_json:
        raise BadInput("--out and --json go with --progression", field="--out" if out_file else "--json")
    from perfkit.run.finish import render as render_run  # the analysis stack: only to rewrite runs

    failed = False
    for d in run_dirs:
        failed = render_run(run_folder(d).absolute()) or failed  # its paths as a run writes them: absolute
    raise SystemExit(ExitCode.TRIAL_FAILED if failed else ExitCode.OK)


class _Output:
    """sys.stdout or sys.stderr, whose reader may stop reading before the command ends (``perfkit ... | head``):
    from then on it writes to /dev/null, and the command ends as it would have, with its own exit status (a gate's
    verdict stands, a run is not cut short), where click and Python end it with exit 1 on the broken pipe, the
    status of a failed check."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            self._to_null(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self._to_null(exc)

    def _to_null(self, exc: OSError) -> None:
        if exc.errno != errno.EPIPE:
            raise exc
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self._stream.fileno())  # (what the stream still buffers goes there too)
        os.close(null)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main() -> None:
    sys.stdout, sys.stderr = _Output(sys.stdout), _Output(sys.stderr)
    try:
        cli(prog_name="perfkit")
    finally:
        # The process ends next and the OS frees its memory whole: its objects are kept out of the interpreter's
        # last collections, which walk every object of pandas and the command's results on the way out
        # (benchmarks/trace_breakdown.py times the whole command, exit included).
        gc.freeze()
