"""The one place a run is finished: its records are read and summarized (``perfkit.analysis``), then
summary.json, report.md and the plots are written (``perfkit.report``) and the summary line printed.
The runner calls it after the last trial, ``perfkit report RUN_DIR`` to rewrite a run; neither the
analysis nor the report imports it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from perfkit.analysis.summary import summarize_run
from perfkit.analysis.timing import steps_frame
from perfkit.report import markdown
from perfkit.report.line import summary_line
from perfkit.run import matrix
from perfkit.run.plan import plan_trials, sat_out
from perfkit.run.trial import Trial, run_names
from perfkit.rundata import case as case_mod
from perfkit.rundata import rundir
from perfkit.rundata.exits import ended


def finish(run_dir: Path, *, interrupted: bool = False) -> dict:
    """Write summary.json and report.md of a run directory and print the summary line; returns the
    summary."""
    _, summary = summarize_run(run_dir, interrupted=interrupted)
    rundir.write_summary(run_dir, summary)
    report_path = markdown.write(run_dir, summary, steps_frame(rundir.read_trials(run_dir)))
    print(summary_line(summary, report_path), flush=True)
    return summary


def part_done(run_dir: Path, part: Path, host_index: int) -> None:
    """The line a host of a multi-host run prints where another host is still running: the last to finish writes
    the report and prints the summary line, so this one says where its own part went and where the report will
    be."""
    print(f"host {host_index}: its trials are in {part}; the host that finishes last writes the report, "
          f"{run_dir / 'report.md'}", flush=True)


def run_failed(summary: dict) -> bool:
    """Exit code 3 territory: a trial failed or hung, or the run stopped before its plan was done."""
    return bool(summary["trials"]["failed"] or summary.get("interrupted")
                or (summary.get("serve") or {}).get("failed_count"))


def render(run_dir: Path) -> bool:
    """(Re)write summary.json and report.md from the run's files (each matrix cell, then the matrix);
    returns whether the run failed (a trial failed or hung, or the run was stopped)."""
    cells = rundir.cell_dirs(run_dir)
    if not cells:
        return render_one(run_dir)
    failed = [render_one(c) for c in cells]
    return matrix.finish(run_dir) or any(failed)


def _short_of_plan(run_dir: Path) -> bool:
    """Whether a run stopped short of its plan's first rounds (``repeats.min`` trials of each variant it runs, but
    those ``exits.ended`` leaves out: a variant that crashed alike, a run with no comparison left):
    perfkit was killed during a trial, and nothing wrote that it stopped; or while writing one, its
    trials.jsonl's last line cut short; or a trial's record is lost (the last two said on stderr: which)."""
    trials = rundir.read_trials(run_dir)
    case = case_mod.load(run_dir / "case.yaml")
    names = run_names(case, rundir.started_options(run_dir).get("only"))
    stop = ended(names, case.variants[0].name, case.aa_name, trials)
    if _said_damaged(run_dir, trials, _planned(case, names, trials, stop),
                     lambda named: f", and --resume runs {_it(named)} again"):
        return True
    return len(trials) < len(plan_trials(names, case.repeats["min"], case.order, case.seed, stop=stop))


def _parts_damaged(run_dir: Path) -> bool:
    """Whether a host's part of a multi-host run lacks a whole record of a trial (said on stderr: which), as
    ``_short_of_plan`` finds of one host's. The merge leaves that host's ranks out of the trial. Each host's --resume
    runs the trials its own part lacks: that host's would run it alone, its ranks meeting none of the others', so the
    line says how every host runs it again."""
    case = case_mod.load(run_dir / "case.yaml")
    names = run_names(case, rundir.started_options(run_dir).get("only"))
    damaged = False
    for part in rundir.host_parts(run_dir):
        host, trials = part.name[4:], rundir.read_trials(part)

        def again(named: list[int], host: str = host) -> str:
            it, its = ("it", "its") if len(named) == 1 else ("them", "their")
            return (f": --resume --host-index {host} would run {_it(named)} again on host {host} alone (a host that "
                    f"recorded {it} runs {it} no more), {its} ranks meeting none of the other hosts'; to run {it} "
                    f"again on every host, remove {its} line{'s' * (len(named) > 1)} from each host's trials.jsonl "
                    "(hosts/host<I>/trials.jsonl), then --resume every host")
        damaged = _said_damaged(part, trials, _planned(case, names, trials), again) or damaged
    return damaged


def _it(named: list[int]) -> str:
    """The trials ``named`` as the advice after their line speaks of them: one (or one not known) is "it", several
    are named."""
    return "it" if len(named) < 2 else f"trials {', '.join(map(str, named))}"


def _planned(case: case_mod.Case, names: list[str], trials: list, stop: dict[str, int] | None = None) -> list[Trial]:
    """The trials of the plan's rounds up to the highest of ``trials`` recorded, and the round after it (where a
    trial cut short as it was written may lie)."""
    highest = max((t["index"] for t in trials if isinstance(t.get("index"), int)), default=-1)
    return plan_trials(names, highest // len(names) + 2, case.order, case.seed, min_rounds=case.repeats["min"],
                       out=sat_out(names, trials), stop=stop)


def _said_damaged(part: Path, trials: list, planned: list[Trial], again: Callable[[list[int]], str]) -> bool:
    """Whether ``part``'s trials.jsonl holds no whole record of a trial of ``planned`` below its highest recorded
    (a line damaged or cut short), or its last line is cut short (perfkit killed while writing it): each named on
    stderr, with what ``again`` (of the trials named) runs them."""
    path = part / "trials.jsonl"
    lost = rundir.lost_trials(trials, [t.index for t in planned])
    if lost:
        print(f"perfkit: {path}: no whole record of trial{'s' * (len(lost) > 1)} {', '.join(map(str, lost))} (a line "
              f"damaged or cut short): the run is read as interrupted{again(lost)}", file=sys.stderr)
    torn = rundir.torn_end(part)
    if torn is not None:
        if "index" in torn:
            index, said = torn["index"], f"trial {torn['index']}" + (f" ({torn['variant']})" if "variant" in torn
                                                                     else "") + ": the file's last line"
        else:  # the runner runs the plan in order, each trial not yet recorded: the cut line began the first of them
            recorded = {t.get("index") for t in trials}
            first = next((t for t in planned if t.index not in recorded), None)
            index, said = (None, "the trial its last line began: the line") if first is None else (
                first.index, f"trial {first.index} ({first.variant}), the plan's first not recorded, which its last "
                "line began: the line, cut before its trial's number,")
        print(f"perfkit: {path}: no whole record of {said} is cut short (perfkit killed while writing it, or the file "
              f"cut since): the run is read as interrupted{again([] if index is None else [index])}", file=sys.stderr)
    return bool(lost) or torn is not None


def render_one(run_dir: Path, interrupted: bool | None = None) -> bool:
    """summary.json and report.md of one run directory (host parts merged first); True if it failed."""
    if (run_dir / "hosts").is_dir():
        hosts = rundir.planned_hosts(run_dir)
        absent = rundir.absent_hosts(run_dir, hosts)
        if absent:
            named = f"host{'s' * (len(absent) > 1)} {', '.join(map(str, absent))}"
            print(f"perfkit: {run_dir / 'hosts'}: no part of {named} of {hosts} (it never started, or wrote "
                  "elsewhere): the trials lack its ranks and read as incomplete", file=sys.stderr)
        rundir.merge_hosts(run_dir, hosts)
        stopped = _parts_damaged(run_dir) or rundir.any_host_interrupted(run_dir) or not rundir.all_hosts_done(
            run_dir, hosts)
    else:
        summary = run_dir / "summary.json"
        stopped = _short_of_plan(run_dir) or bool(summary.exists() and json.loads(summary.read_text()).get(
            "interrupted"))
    return run_failed(finish(run_dir, interrupted=stopped if interrupted is None else interrupted))
