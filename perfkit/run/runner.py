"""``perfkit run``: interleaved A/B trials of a case, each in fresh processes, into a run directory.

Run directory (a contract, see docs/architecture.md): ``case.yaml`` (resolved), ``env.json``, ``run.json``
(how it was run, for ``--resume``), ``trials.jsonl`` (one line per finished trial, appended at once),
``trials/<NN>-<variant>/rank<R>/`` (``metrics.jsonl``, ``stdout.log``, ``stderr.log``, ``stacks.txt``,
``outputs/``, ``xla_dump/``, ``trace/``), ``summary.json``, ``report.md``, ``plots/``. A matrix case
holds one such run directory per combination under ``cells/NN/``; a multi-host run keeps each host's
part under ``hosts/host<I>/`` (``perfkit.rundata.rundir``).

Trials run in rounds (every variant once per round, ``abba`` or seeded ``random`` order: ``perfkit.run.plan``).
Rounds go on past ``repeats.min`` while a B/A verdict is still unknown, up to ``repeats.max``, without the
variants none of whose trials ran. A trial's index is its place in that plan, so an interrupted run continues
with the same trials (``--resume``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TextIO

from perfkit.analysis import stats, timing
from perfkit.common.xla import xla_flags
from perfkit.errors import BadInput
from perfkit.run import envinfo, finish, matrix, placement, ranks, serve_trial, stackdump
from perfkit.run.model_rank import AFTER_STEPS
from perfkit.run.placement import devices_per_process
from perfkit.run.plan import plan_trials, sat_out
from perfkit.run.trial import SCRIPTS, RunOptions, Trial, cache_entries, compile_cache_env, run_names
from perfkit.rundata import case as case_mod
from perfkit.rundata import rundir
from perfkit.rundata.case import Case
from perfkit.rundata.exits import crashed_alike, ended
from perfkit.rundata.metrics import is_timed, read_metrics

# Each case kind runs its trials through the same two functions (perfkit.run.trial's docstring).
KINDS = {"model": ranks, "command": ranks, "serve": serve_trial}


@dataclasses.dataclass(frozen=True)
class RunResult:
    run_dir: Path
    failed: bool  # exit code 3: a trial failed or hung, a serve case's requests failed, or the run stopped
    interrupted: bool  # stopped (Ctrl-C / SIGTERM) before the plan was done


def timed_steps(trial: dict) -> list[float]:
    return [ms for i, ms in enumerate(trial["steps_ms"]) if is_timed(trial, i)]


def undecided(case: Case, names: list[str], trials: list[dict]) -> bool:
    """Whether any B (every variant run but the baseline and the A/A control) has an unknown verdict, as the
    summary will give it (``timing.compare_variants``), that more rounds may decide: not a B none of whose trials
    ran (every one crashed or hung: ``sat_out``, its next trials would fail alike), and none at all where none of
    the baseline's ran."""
    a = case.variants[0].name
    out = sat_out(names, trials)
    others = [b for b in names if b not in (a, case.aa_name) and b not in out]
    if a not in names or a in out or not others:
        return False
    rows = timing.compare_variants(timing.steps_frame(trials), a, others, min_effect=case.min_effect, seed=case.seed,
                                   rounds=case.looks(hosts=1))
    return bool((rows[rows.metric == "step_ms"].verdict == "unknown").any())


def default_run_dir(case: Case) -> Path:
    """``reports/runs/<case>-<time>`` under the folder perfkit was started in (never inside an installed
    or editable package)."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in case.name)
    return Path.cwd() / "reports" / "runs" / f"{safe}-{stamp}"


PRIMED = "primed.json"  # in a warm cache folder: the record of the untimed trial that filled it


def cache_folder(case: Case, run_dir: Path, trial_dir: Path, name: str) -> Path | None:
    """The compile cache a trial of variant ``name`` starts with: cold, a fresh one in its trial folder;
    warm, the variant's own, primed once (``compile_cache/<variant>/``); None without compile_cache."""
    mode = case.variant(name).compile_cache
    if mode is None:
        return None
    return trial_dir / "compile_cache" if mode == "cold" else run_dir / "compile_cache" / name


def with_cache(case: Case, name: str, folder: Path) -> Case:
    """The case with variant ``name``'s environment pointing its compile caches at ``folder`` (every case
    kind starts its processes with the variant's env; the A/A control's comes from the baseline's)."""
    target = case.variants[0].name if name == case.aa_name else name
    return dataclasses.replace(case, variants=[
        dataclasses.replace(v, env={**v.env, **compile_cache_env(folder)}) if v.name == target else v
        for v in case.variants])


def run_cached_trial(case: Case, trial: Trial, trial_dir: Path, run_dir: Path, run_one) -> dict | None:
    """Run a trial through ``run_one(case, trial, trial_dir)`` with its variant's compile cache: a cold
    cache is emptied before and removed after (its count kept); the record gains ``compile_cache``
    (mode, entries before and after, on disk)."""
    folder = cache_folder(case, run_dir, trial_dir, trial.variant)
    if folder is None:
        return run_one(case, trial, trial_dir)
    cold = case.variant(trial.variant).compile_cache == "cold"
    if cold:
        shutil.rmtree(folder, ignore_errors=True)
    before = cache_entries(folder)
    record = run_one(with_cache(case, trial.variant, folder), trial, trial_dir)
    if record is not None:
        record["compile_cache"] = {"mode": "cold" if cold else "warm", "before": before, "after": cache_entries(folder)}
    if cold:
        shutil.rmtree(folder, ignore_errors=True)
    return record


def prime(case: Case, run_dir: Path, name: str, run_one, progress: Progress) -> bool:
    """Fill a warm variant's cache with one untimed trial (index -1, in ``compile_cache/<v>/prime/``),
    once per run: its record goes to ``compile_cache/<v>/primed.json``, never to trials.jsonl. False
    when it was interrupted."""
    folder = run_dir / "compile_cache" / name
    if (folder / PRIMED).exists():
        return True
    progress.stream.write(f"priming the compile cache of {name} (untimed)\n")
    record = run_cached_trial(case, Trial(-1, name, -1), folder / "prime", run_dir, run_one)
    if record is None:
        return False
    record["dir"] = (folder / "prime").relative_to(run_dir).as_posix()  # (not a trials/ folder: no trial)
    rundir.write_atomic(folder / PRIMED, json.dumps(record))
    return True


QUIET_S = 15  # seconds a trial runs between lines on a log that is not a terminal


def steps_run(trials: list[dict], variant: str) -> int | None:
    """The steps every finished (ok) trial of ``variant`` ran (rank 0's), where they ran as many; else None."""
    counts = {len(t["steps_ms"]) for t in trials if t["variant"] == variant and t["status"] == "ok"}
    return counts.pop() if len(counts) == 1 else None


class Progress:
    """The progress line on stderr: trial k of the plan's n, variant, that trial's median step and the
    variant's median of trial medians so far (the figure the summary line shows), time left. Adaptive
    rounds grow the plan while a verdict is unknown: the count says up to how many trials it may grow
    (``most``), and the first line after it grew says so. On a terminal the line is redrawn while a trial
    runs, with rank 0's steps so far."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.walls: list[float] = []
        self.cell_label = ""  # a matrix run's combination running: its folder and values (``cells/01 seed=2``)
        self.most: int | None = None  # the largest plan adaptive rounds may reach (None: the plan is fixed)
        self._planned: int | None = None  # the plan's size on the last line written
        self._running: int | None = None  # the trial the last tick was of, since when, and the last line's time
        self._started = self._written = 0.0

    def _line(self, k: int, n: int, variant: str, trials: list[dict], trial: str, elapsed: float | None = None,
              limit: float | None = None) -> str:
        """The line of trial ``k``, finished, or running for ``elapsed`` seconds of its ``limit``: its time
        left then counts too; once it runs longer than a trial takes, the time after it, and up to its limit."""
        medians = [stats.summarize(timed_steps(t))["median"] for t in trials if t["variant"] == variant]
        so_far = stats.summarize([m for m in medians if m is not None])["median"]
        count = f"{k}/{n}" + (f", up to {self.most}" if self.most and self.most > n else "")
        left = ""
        if self.walls:
            mean = sum(self.walls) / len(self.walls)
            after = mean * (n - k)  # the trials after this one
            if elapsed is not None and limit is not None and elapsed > mean:  # its own end unknown: said apart
                to_limit = after + limit - elapsed
                left = f"   ~{after:.0f} s left after this trial (~{to_limit:.0f} s if it runs to its limit)"
            else:
                left = f"   ~{after + (0 if elapsed is None else max(mean - elapsed, 0)):.0f} s left"
        cell = f"{self.cell_label} " if self.cell_label else ""
        shown = "-" if so_far is None else f"{so_far:.2f} ms"
        return f"{cell}[{count}] {variant:<12} {trial}, {variant} so far {shown}{left}"

    def running(self, k: int, n: int, variant: str, trials: list[dict], metrics: Path, limit: float | None = None,
                from_stdout: bool = False) -> None:
        """Trial ``k`` still running (its ``limit``: seconds until it ends as hung): on a terminal the line
        redrawn, elsewhere a line each ``QUIET_S`` it runs, so that a trial that hangs is seen waiting.
        ``from_stdout``: its steps are its stdout's ``step_regex`` matches, counted when it ends (its rank 0 may
        print gigabytes, too many to read again at every tick), where metrics.jsonl's are counted as they come."""
        now = time.monotonic()
        if self._running != k:  # the trial's first tick (on a log, its first line comes QUIET_S later)
            self._running, self._started = k, now
            self._written = self._written if self.tty else now
        if now - self._written < (0.5 if self.tty else QUIET_S):
            return
        self._written = now
        m = read_metrics(metrics)
        elapsed, steps = now - self._started, len(m.steps_ms)
        # past its steps: the bundled worker marks what it does there; a command, where it ran as many as its variant's
        # finished trials (perfkit is not told its count), has them done and has not exited
        after = AFTER_STEPS.get(m.last_mark) or ("not yet exited" if steps and steps == steps_run(trials, variant)
                                                 else None)
        ends = "" if limit is None else f" (ends as hung at {limit:.0f} s)"
        if self.tty:
            done = ("steps counted at its end" if from_stdout else f"{steps} steps done, {after}" if after
                    else f"{steps} steps")
            self.stream.write("\r" + self._line(k, n, variant, trials, f"running {elapsed:.0f} s{ends}: {done}",
                                                 elapsed, limit) + "\033[K")
        else:
            done = ("its steps counted from its stdout when it ends" if from_stdout
                    else f"its {steps} steps done, {after}" if after else f"{steps} steps so far")
            self.stream.write(self._line(k, n, variant, trials, f"still running after {elapsed:.0f} s{ends}: {done}",
                                         elapsed, limit) + "\n")
        self.stream.flush()

    def nothing_left(self, run_dir: Path, n: int, rewrites: bool) -> None:
        """A resumed run whose plan had finished: nothing ran (``rewrites``: its summary and report are written
        again; a host of several says on its own line whether it writes them)."""
        self.stream.write(f"{self.cell_label + ': ' if self.cell_label else ''}every trial of {run_dir}'s plan "
                          f"({n}) had finished: none ran"
                          + ("; its summary.json and report.md are written again\n" if rewrites else "\n"))
        self.stream.flush()

    def ended(self, variant: str, trials: list[dict], everything: bool) -> None:
        """A variant whose first two trials crashed with one error runs no more (``perfkit.rundata.exits.ended``); where
        no comparison is left, neither does the run."""
        round_, why = crashed_alike(trials, variant)
        self.stream.write(f"{self.cell_label + ': ' if self.cell_label else ''}{variant}: its first two trials "
                          f"crashed alike ({why}): it runs no trial after round {round_ + 1}"
                          + ("; none is left to compare, so the run ends with that round (its finished trials kept)\n"
                             if everything else "; the others go on without it\n"))
        self.stream.flush()

    def finished(self, k: int, n: int, record: dict, trials: list[dict]) -> None:
        self.walls.append(record["wall_s"])
        median = stats.summarize(timed_steps(record))["median"]
        trial = f"trial median {'-' if median is None else f'{median:.2f} ms'}"
        note = "" if record["status"] == "ok" else f"   {record['status'].upper()}"
        if self._planned is not None and n > self._planned and k > 1:  # k == 1: a matrix's next cell
            note += f"   (plan grew from {self._planned} to {n} trials: the verdict was still unknown)"
        self._planned = n
        self.stream.write(("\r" if self.tty else "") + self._line(k, n, record["variant"], trials, trial) + note
                          + ("\033[K" if self.tty else "") + "\n")
        self.stream.flush()


def _check_options(case: Case, options: RunOptions) -> None:
    names = [v.name for v in case.run_variants()]
    if options.only is not None and options.only not in names:
        raise BadInput(f"no variant {options.only!r} (variants: {', '.join(names)})", path=case.source,
                       field="--only")
    if options.coordinator is not None:
        host, _, port = options.coordinator.rpartition(":")
        if not (host and port.isdigit()):
            raise BadInput(f"must be HOST:PORT, got {options.coordinator!r}", path=case.source,
                           field="--coordinator")
    if any(v.compile_cache for v in case.variants):
        if options.salt:
            raise BadInput("--salt turns compile caches off; this case's variants set compile_cache themselves",
                           path=case.source, field="--salt")
        if options.hosts > 1:
            raise BadInput("compile_cache variants run on one host (the priming trial is not shared across hosts)",
                           path=case.source, field="--hosts")
    if options.hosts > 1:
        if case.kind == "serve":
            raise BadInput("a serve case runs its servers from one host", path=case.source, field="--hosts")
        if case.processes % options.hosts:
            raise BadInput(f"{case.processes} processes do not split evenly over {options.hosts} hosts",
                           path=case.source, field="processes")
        if options.coordinator is None:
            raise BadInput("a multi-host run needs --coordinator HOST:PORT (rank 0's host)",
                           path=case.source, field="--coordinator")
    if not 0 <= options.host_index < options.hosts:
        raise BadInput(f"must be in 0..{options.hosts - 1}", path=case.source, field="--host-index")


def _check_runnable(case: Case, options: RunOptions) -> None:
    """Each matrix combination checked as a case of its own (a script, a plan or a process count may be what is
    swept): one that cannot run is refused before any file is written, as a case without a matrix is."""
    for assignment, cell in case_mod.expand_matrix(case):
        try:
            _check_options(cell, options)
            KINDS[cell.kind].check_runnable(cell, options.cwd or os.getcwd())
            placement.placements(cell, options)  # a placement this host cannot honour
        except BadInput as exc:
            raise (case_mod.in_combination(exc, assignment) if assignment else exc) from None


def run_case(case: Case, run_dir: Path | None = None, options: RunOptions = RunOptions(), *,
             resume: bool = False, progress: Progress | None = None) -> RunResult:
    """Run every trial of ``case`` (every matrix combination) and write summaries and reports."""
    _check_runnable(case, options)
    run_dir = Path(run_dir) if run_dir else default_run_dir(case)
    options = dataclasses.replace(options, run_id=options.run_id or run_dir.name,
                                  cwd=options.cwd or os.getcwd())
    progress = progress or Progress()
    part = rundir.part_dir(run_dir, options.host_index, options.hosts)
    part.mkdir(parents=True, exist_ok=True)
    with rundir.held(part, run_dir):
        return _run_held(case, run_dir, options, part, resume, progress)


def _run_held(case: Case, run_dir: Path, options: RunOptions, part: Path, resume: bool, progress: Progress
              ) -> RunResult:
    if not resume and (part / "run.json").exists():
        raise BadInput("already holds a run; continue it with --resume, or choose another --out",
                       path=str(run_dir))
    rundir.write_options(part, dataclasses.asdict(options))
    if options.host_index == 0:
        rundir.write_atomic(run_dir / "case.yaml", case_mod.to_yaml(case))  # other hosts read it as they start
    env_json = _environment(case, options)
    rundir.write_atomic(part / "env.json", env_json)
    if not case.matrix:
        return _run_cell(case, run_dir, options, env_json=env_json, progress=progress)
    rundir.release_report(run_dir)

    failed = interrupted = False
    port_base = 0
    for i, (assignment, cell) in enumerate(case_mod.expand_matrix(case)):
        values = case_mod.combination_label(assignment)  # (shortened: a terminal redraws one line)
        folder = rundir.cell_dir(run_dir, i)
        progress.cell_label = f"cells/{folder.name} " + (values if len(values) <= 40 else values[:39] + "…")
        res = _run_cell(cell, folder, options, env_json=env_json, progress=progress, port_base=port_base)
        port_base += cell.repeats["max"] * len(run_names(cell, options.only))
        failed, interrupted = failed or res.failed, res.interrupted
        if interrupted:
            break
    if options.hosts == 1 or (all(rundir.all_hosts_done(c, options.hosts) for c in rundir.cell_dirs(run_dir))
                              and rundir.claim_report(run_dir)):
        failed = matrix.finish(run_dir) or failed
    return RunResult(run_dir, failed, interrupted)


def resume_run(run_dir: Path, host_index: int | None = None, progress: Progress | None = None) -> RunResult:
    """Continue an interrupted run: its finished trials are kept, the rest of its plan runs."""
    # absolute: the trials run in the folder the run was started from, which a relative path may not be from
    run_dir = rundir.run_folder(run_dir).absolute()
    opts = rundir.read_options(run_dir, host_index)
    options = RunOptions(**{f.name: opts[f.name] for f in dataclasses.fields(RunOptions) if f.name in opts})
    return run_case(case_mod.load(run_dir / "case.yaml"), run_dir, options, resume=True, progress=progress)


def _environment(case: Case, options: RunOptions) -> str:
    # the code measured: perfkit's own models, or the user's programs in the folder their commands run in
    source = envinfo.SOURCE_ROOT if case.kind == "model" else Path(options.cwd or ".")
    info = envinfo.collect(source, devices_env={**os.environ, "XLA_FLAGS": xla_flags(
        os.environ.get("XLA_FLAGS", ""), devices_per_process(case), None)}, probe=case.kind == "model")
    info["hosts"] = {"count": options.hosts, "index": options.host_index}
    if case.kind != "model":  # a command's or a server's scripts: the user's, which the tree may not hold
        argvs = [ranks.command_argv(case, v) if case.kind == "command" else [*v.serve.argv, *map(str, v.args)]
                 for v in case.variants]
        info["scripts"] = envinfo.outside_scripts(argvs, source, info["source"].get("root"), SCRIPTS)
    info["placement"] = placement.placement_record(case, options)
    return json.dumps(info, indent=2)


def _run_cell(case: Case, run_dir: Path, options: RunOptions, *, env_json: str,
              progress: Progress, port_base: int = 0) -> RunResult:
    """The trials of one case without a matrix, then its summary and report."""
    part = rundir.part_dir(run_dir, options.host_index, options.hosts)
    part.mkdir(parents=True, exist_ok=True)
    (part / "done").unlink(missing_ok=True)  # a resumed host is running again
    rundir.release_report(run_dir)
    if options.host_index == 0:
        rundir.write_atomic(run_dir / "case.yaml", case_mod.to_yaml(case))  # other hosts read it as they start
        rundir.write_atomic(run_dir / "env.json", env_json)
    done = {t["index"]: t for t in rundir.read_trials(part)}
    kept = len(done)
    names = run_names(case, options.only)

    def ends() -> dict[str, int]:
        """``exits.ended`` of the trials so far; with many hosts none (each sees its own ranks' errors alone, and a host
        whose plan ended would leave the others' ranks waiting for its own)."""
        return ended(names, case.variants[0].name, case.aa_name, list(done.values())) if options.hosts == 1 else {}

    hook = stackdump.hook_dir(part / ".perfkit")
    # Adaptive rounds need one view of every trial: with many hosts each runs repeats.min rounds.
    adaptive = options.hosts == 1 and len(names) >= 2
    rounds = max([case.repeats["min"]] + [t["round"] + 1 for t in done.values()])
    interrupted = False
    plan: list[Trial] = []

    def run_one(trial_case: Case, trial: Trial, trial_dir: Path) -> dict | None:
        return KINDS[case.kind].run_trial(
            trial_case, trial, trial_dir, options, hook, port_base + max(trial.index, 0),
            lambda: progress.running(len(done) + 1, len(plan), trial.variant, list(done.values()),
                                     trial_dir / "rank0" / "metrics.jsonl", trial_case.timeout,
                                     from_stdout=trial_case.step_regex is not None))

    try:
        warm = [n for n in names if case.variant(n).compile_cache == "warm"]
        interrupted = not all(prime(case, run_dir, n, run_one, progress) for n in warm)
        while not interrupted:
            out, stop = sat_out(names, list(done.values())), ends()
            plan = plan_trials(names, rounds, case.order, case.seed, min_rounds=case.repeats["min"], out=out, stop=stop)
            progress.most = len(plan_trials(names, case.repeats["max"], case.order, case.seed,
                                            min_rounds=case.repeats["min"], out=out, stop=stop)) if adaptive else None
            replan = False
            for trial in plan:
                if trial.index in done:
                    continue
                trial_dir = run_dir / "trials" / trial.dirname
                record = run_cached_trial(case, trial, trial_dir, run_dir, run_one)
                if record is None:
                    interrupted = True
                    break
                rundir.append_trial(part, record)
                done[trial.index] = record
                progress.finished(len(done), len(plan), record, list(done.values()))
                now = ends()
                if now != stop:  # a variant crashed alike: the plan loses its trials (with no comparison left, all)
                    progress.ended(trial.variant, list(done.values()), set(now) == set(names))
                    replan = True
                    break
            if interrupted:
                break
            if replan:
                continue
            if not adaptive or rounds >= case.repeats["max"] or not undecided(case, names, list(done.values())):
                break
            rounds += 1
    except KeyboardInterrupt:
        interrupted = True
    if kept and len(done) == kept and not interrupted:
        progress.nothing_left(run_dir, kept, rewrites=options.hosts == 1)
    own_failed = any(t["status"] != "ok" for t in done.values())
    if options.hosts == 1:
        return RunResult(run_dir, finish.render_one(run_dir, interrupted=interrupted), interrupted)
    rundir.mark_done(part, interrupted)
    if rundir.all_hosts_done(run_dir, options.hosts) and rundir.claim_report(run_dir):
        own_failed = finish.render_one(run_dir) or own_failed
    else:
        finish.part_done(run_dir, part, options.host_index)
    return RunResult(run_dir, own_failed or interrupted, interrupted)


