"""``perfkit run``: interleaved A/B trials of a case, each in fresh processes, into a run directory.

Run directory (a contract, see docs/architecture.md): ``case.yaml`` (resolved), ``env.json``, ``run.json``
(how it was run, for ``--resume``), ``trials.jsonl`` (one line per finished trial, appended at once),
``trials/<NN>-<variant>/rank<R>/`` (``metrics.jsonl``, ``stdout.log``, ``stderr.log``, ``stacks.txt``,
``outputs/``, ``xla_dump/``, ``trace/``), ``summary.json``, ``report.md``, ``plots/``. A matrix case
holds one such run directory per combination under ``cells/NN/``; a multi-host run keeps each host's
part under ``hosts/host<I>/`` (``perfkit.rundir``).

Trials run in rounds (every variant once per round, ``abba`` or seeded ``random`` order). Rounds go on
past ``repeats.min`` while a B/A verdict is still unknown, up to ``repeats.max``. A trial's index is its
place in that plan, so an interrupted run continues with the same trials (``--resume``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import random
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Callable, TextIO

from perfkit.run import case as case_mod
from perfkit.run import envinfo
from perfkit.run import rundir
from perfkit.run import stackdump
from perfkit.analysis import stats
from perfkit.run import sweep
from perfkit.run.case import Case, Variant
from perfkit.errors import BadInput
from perfkit.run.launch import RankProcess, TrialOutcome, run_ranks
from perfkit.run.metrics import is_timed, read_metrics, steps_from_stdout

REPO_ROOT = Path(__file__).resolve().parents[2]
# With --salt: caches that would let a trial skip compiling (jax's persistent cache, torch inductor's).
SALT_ENV = {"JAX_ENABLE_COMPILATION_CACHE": "false", "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
PYTHON_NAMES = ("python", "python3")  # a command's argv[0] that means "the Python perfkit runs in"


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How a case is run (beyond the case itself); saved in run.json so --resume continues alike."""

    only: str | None = None  # run this variant only
    salt: bool = False  # every trial compiles fresh: caches off, a new PERFKIT_SALT per trial
    hosts: int = 1  # hosts that share the run directory, each running its share of the ranks
    host_index: int = 0  # which host this is
    coordinator: str | None = None  # multi-host: host:port of rank 0's host; trial k uses port + k
    run_id: str = ""  # names the run in salts (the run directory's name; the same on every host)
    cwd: str = ""  # where commands run (where perfkit was started)


@dataclasses.dataclass(frozen=True)
class Trial:
    """One run of one variant: ``round`` r holds trials r*V .. r*V+V-1 for V variants."""

    index: int
    variant: str
    round: int

    @property
    def dirname(self) -> str:
        return f"{self.index:02d}-{self.variant}"


@dataclasses.dataclass(frozen=True)
class RunResult:
    run_dir: Path
    failed: bool  # a trial failed or hung
    interrupted: bool  # stopped (Ctrl-C / SIGTERM) before the plan was done


def round_order(variants: list[str], round_index: int, order: str, seed: int) -> list[str]:
    """Variants in one round: ``abba`` alternates forward and reversed rounds (A B, B A, ...), which
    cancels linear drift; ``random`` shuffles each round with a seeded generator."""
    if order == "random":
        rng = random.Random(seed * 1_000_003 + round_index)
        out = list(variants)
        rng.shuffle(out)
        return out
    return list(variants) if round_index % 2 == 0 else list(reversed(variants))


def plan_trials(variants: list[str], rounds: int, order: str, seed: int) -> list[Trial]:
    """The first ``rounds`` rounds; a longer plan starts with the same trials."""
    return [Trial(r * len(variants) + i, name, r)
            for r in range(rounds) for i, name in enumerate(round_order(variants, r, order, seed))]


def xla_flags(base: str, devices: int, dump_dir: Path | None) -> str:
    flags = [f for f in base.split() if not f.startswith(("--xla_force_host_platform_device_count",
                                                          "--xla_dump_to"))]
    flags.append(f"--xla_force_host_platform_device_count={devices}")
    if dump_dir is not None:
        flags += [f"--xla_dump_to={dump_dir}", "--xla_dump_hlo_as_text"]
    return " ".join(dict.fromkeys(flags))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_ranks(processes: int, hosts: int, host_index: int) -> range:
    """The global ranks one host runs: an equal, contiguous share."""
    per_host = processes // hosts
    return range(host_index * per_host, (host_index + 1) * per_host)


def devices_per_process(case: Case) -> int:
    """The devices each rank process sees (XLA's fake CPU device count): at least one, since a command
    case may start more processes than it names devices."""
    return max(1, case.devices // case.processes)


def command_argv(case: Case, variant: Variant) -> list[str]:
    argv = [str(a) for a in case.command] + variant.args
    if argv[0] in PYTHON_NAMES:
        argv[0] = sys.executable
    return argv


def coordinator_for(options: RunOptions, trial_port: int) -> tuple[str, int]:
    """(address, port) of a trial's coordinator: this machine with a free port, or the given host with
    its base port plus the trial's number (so a late rank never joins the previous trial)."""
    if options.coordinator is None:
        return "127.0.0.1", free_port()
    host, _, port = options.coordinator.rpartition(":")
    return host, int(port) + trial_port


def trial_salt(options: RunOptions, trial_dir: Path, trial: Trial) -> str | None:
    """With ``--salt``: the same on every rank and host of a trial (one program), new for every trial,
    cell and run; None without it."""
    if not options.salt:
        return None
    scope = f"{options.run_id}/{trial_dir.parent.parent.name}/{trial.index}"
    return hashlib.sha256(scope.encode()).hexdigest()[:16]


def process_env(overrides: dict[str, str], rank_dir: Path, hook: Path | None, salt: str | None) -> dict[str, str]:
    """The environment a rank or server starts with: perfkit's own with ``overrides`` on top, unbuffered
    output, the stack-dump hook first on PYTHONPATH (dumps into ``rank_dir``), and with a salt the
    compile caches off and ``PERFKIT_SALT`` set."""
    env = dict(os.environ)
    env.pop(stackdump.OWNER_ENV, None)
    env.update(overrides)
    env.update({"PYTHONUNBUFFERED": "1", stackdump.STACKS_ENV: str(rank_dir / "stacks.txt")})
    if salt is not None:
        env.update({**SALT_ENV, "PERFKIT_SALT": salt})
    if hook is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook), env.get("PYTHONPATH")]))
    return env


def rank_processes(case: Case, variant: Variant, trial: Trial, trial_dir: Path, dump: bool, *,
                   options: RunOptions = RunOptions(), trial_port: int = 0,
                   hook: Path | None = None) -> list[RankProcess]:
    """The argv and environment of this host's ranks of a trial (metrics protocol variables included).

    Multi-process trials also get the launcher variables that torch.distributed (``MASTER_ADDR``,
    ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``) and ``jax.distributed``
    (``PERFKIT_COORDINATOR`` = host:port) read."""
    ranks = []
    addr, port = coordinator_for(options, trial_port) if case.processes > 1 else (None, None)
    mine = host_ranks(case.processes, options.hosts, options.host_index)
    salt = trial_salt(options, trial_dir, trial)
    for r in mine:
        rdir = trial_dir / f"rank{r}"
        inherited_flags = variant.env.get("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
        env = process_env({**variant.env, **{
            "PERFKIT_METRICS": str(rdir / "metrics.jsonl"),
            "PERFKIT_OUTPUTS": str(rdir / "outputs"),
            "PERFKIT_RANK": str(r),
            "PERFKIT_WORLD": str(case.processes),
            "PERFKIT_TRIAL": str(trial.index),
            "PERFKIT_VARIANT": variant.name,
            # Where and at which steps a rank should capture a profile (any program may honour it).
            "PERFKIT_TRACE_DIR": str(rdir / "trace"),
            "PERFKIT_TRACE_STEPS": ",".join(map(str, case.capture["trace"])),
            "XLA_FLAGS": xla_flags(inherited_flags, devices_per_process(case), rdir / "xla_dump" if dump else None),
        }}, rdir, hook, salt)
        if case.mesh:
            env["PERFKIT_MESH"] = ",".join(f"{k}={v}" for k, v in case.mesh.items())
        if port is not None:
            env.update({"MASTER_ADDR": addr, "MASTER_PORT": str(port), "RANK": str(r),
                        "WORLD_SIZE": str(case.processes), "LOCAL_RANK": str(r - mine.start),
                        "LOCAL_WORLD_SIZE": str(len(mine)), "PERFKIT_COORDINATOR": f"{addr}:{port}"})
        env.setdefault("NPROC", "16")  # Pallas interpret kernels deadlock with fewer threads than devices
        if case.kind == "model":
            spec = {"model": case.model, "options": variant.options, "devices": case.devices,
                    "seed": case.seed, "trace_steps": case.capture["trace"],
                    "trace_dir": str(rdir / "trace"), "outputs": case.capture["outputs"]}
            argv = [sys.executable, "-m", "perfkit.run.worker", json.dumps(spec)]
        else:
            argv = command_argv(case, variant)
        ranks.append(RankProcess(r, argv, env, rdir))
    return ranks


def trial_record(case: Case, trial: Trial, trial_dir: Path, outcome: TrialOutcome) -> dict:
    """What ``trials.jsonl`` keeps of a finished trial. This host's lowest rank times the trial (rank 0
    on one host; a multi-host merge keeps the part holding rank 0)."""
    per_rank = []
    timing = None
    for rep in outcome.ranks:
        rdir = trial_dir / f"rank{rep['rank']}"
        m = read_metrics(rdir / "metrics.jsonl")
        steps = m.steps_ms
        if not steps and case.step_regex:
            steps = steps_from_stdout(rdir / "stdout.log", case.step_regex)
        per_rank.append({**rep, "steps_done": len(steps), "last_step_ms": steps[-1] if steps else None,
                         "last_mark": m.last_mark})
        if timing is None:
            timing = (steps, m.natural_ms, m.traced, {k: v[-1] for k, v in m.values.items()})
    steps0, natural0, traced0, values0 = timing
    status = outcome.status
    if status == "ok" and outcome.ranks[0]["rank"] == 0 and len(steps0) <= case.warmup:
        status = "no_steps"
    return {
        "index": trial.index, "variant": trial.variant, "round": trial.round, "dir": f"trials/{trial.dirname}",
        "status": status, "wall_s": round(outcome.wall_s, 3), "warmup": case.warmup,
        "steps_ms": steps0, "natural_ms": natural0, "traced": traced0, "values": values0, "ranks": per_rank,
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def timed_steps(trial: dict) -> list[float]:
    return [ms for i, ms in enumerate(trial["steps_ms"]) if is_timed(trial, i)]


def undecided(case: Case, names: list[str], trials: list[dict]) -> bool:
    """Whether any B (every variant run but the baseline and the A/A control) has an unknown verdict."""
    a = case.variants[0].name
    if a not in names:
        return False
    base = [timed_steps(t) for t in trials if t["variant"] == a]
    return any(stats.compare(base, [timed_steps(t) for t in trials if t["variant"] == b],
                             min_effect=case.min_effect, seed=case.seed).verdict == "unknown"
               for b in names if b not in (a, case.aa_name))


def default_run_dir(case: Case) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in case.name)
    return REPO_ROOT / "reports" / "runs" / f"{safe}-{stamp}"


class Progress:
    """The progress line on stderr: trial k of n, variant, its step-time median so far, time left.
    On a terminal the line is redrawn while a trial runs, with rank 0's steps so far."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.walls: list[float] = []
        self._drawn = 0.0

    def _line(self, k: int, n: int, variant: str, trials: list[dict], note: str) -> str:
        med = stats.summarize([s for t in trials if t["variant"] == variant for s in timed_steps(t)])["median"]
        left = (sum(self.walls) / len(self.walls) * (n - k)) if self.walls else None
        return (f"[{k}/{n}] {variant:<12} step median {'-' if med is None else f'{med:.2f} ms':>10}"
                f"   {'' if left is None else f'~{left:.0f} s left'}{note}")

    def running(self, k: int, n: int, variant: str, trials: list[dict], metrics: Path) -> None:
        now = time.monotonic()
        if not self.tty or now - self._drawn < 0.5:
            return
        self._drawn = now
        steps = len(read_metrics(metrics).steps_ms)
        self.stream.write("\r" + self._line(k, n, variant, trials, f"   (running: {steps} steps)") + "\033[K")
        self.stream.flush()

    def finished(self, k: int, n: int, record: dict, trials: list[dict]) -> None:
        self.walls.append(record["wall_s"])
        note = "" if record["status"] == "ok" else f"   {record['status'].upper()}"
        self.stream.write(("\r" if self.tty else "") + self._line(k, n, record["variant"], trials, note)
                          + ("\033[K" if self.tty else "") + "\n")
        self.stream.flush()


def _check_runnable(case: Case) -> None:
    """A command or server that cannot start, or a model variant whose plan cannot be honoured, is bad
    input, found before any trial runs."""
    if case.kind == "model":
        from perfkit.models import plan_for

        for v in case.variants:
            try:
                plan_for(case.model["name"], case.model["config"], v.options, case.devices)
            except BadInput as exc:
                field = exc.field if exc.field and exc.field.startswith("model.") else \
                    f"variants.{v.name}.{exc.field or 'options'}"
                raise BadInput(exc.reason, path=case.source, field=field) from None
        return
    programs = {"command": command_argv(case, case.variants[0])[0]} if case.kind == "command" else \
        {f"variants.{v.name}.serve.server": v.serve.argv[0] for v in case.variants}
    for field, prog in programs.items():
        if prog not in PYTHON_NAMES and os.sep not in prog and shutil.which(prog) is None:
            raise BadInput(f"program {prog!r} not found on PATH", path=case.source, field=field)


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


def run_names(case: Case, only: str | None) -> list[str]:
    """Variants the trials run: all (A/A control included), or ``only`` (with its A/A control)."""
    names = [v.name for v in case.run_variants()]
    if only is None:
        return names
    return [only] + ([case.aa_name] if case.aa and only == names[0] else [])


def run_case(case: Case, run_dir: Path | None = None, options: RunOptions = RunOptions(), *,
             resume: bool = False, progress: Progress | None = None) -> RunResult:
    """Run every trial of ``case`` (every matrix combination) and write summaries and reports."""
    _check_options(case, options)
    _check_runnable(case)
    run_dir = Path(run_dir) if run_dir else default_run_dir(case)
    options = dataclasses.replace(options, run_id=options.run_id or run_dir.name,
                                  cwd=options.cwd or os.getcwd())
    progress = progress or Progress()
    part = rundir.part_dir(run_dir, options.host_index, options.hosts)
    part.mkdir(parents=True, exist_ok=True)
    if not resume and (part / "run.json").exists():
        raise BadInput("already holds a run; continue it with --resume, or choose another --out",
                       path=str(run_dir))
    rundir.write_options(part, dataclasses.asdict(options))
    if options.host_index == 0:
        (run_dir / "case.yaml").write_text(case_mod.to_yaml(case))
    env_json = _environment(case, options)
    rundir.write_atomic(part / "env.json", env_json)
    if not case.matrix:
        return _run_cell(case, run_dir, options, resume=resume, env_json=env_json, progress=progress)

    failed = interrupted = False
    port_base = 0
    for i, (_, cell) in enumerate(case_mod.expand_matrix(case)):
        res = _run_cell(cell, run_dir / "cells" / f"{i:02d}", options, resume=resume, env_json=env_json,
                        progress=progress, port_base=port_base)
        port_base += cell.repeats["max"] * len(run_names(cell, options.only))
        failed, interrupted = failed or res.failed, res.interrupted
        if interrupted:
            break
    if options.hosts == 1 or all(rundir.all_hosts_done(c, options.hosts) for c in sweep.cell_dirs(run_dir)):
        failed = sweep.finish(run_dir) or failed
    return RunResult(run_dir, failed, interrupted)


def resume_run(run_dir: Path, host_index: int | None = None, progress: Progress | None = None) -> RunResult:
    """Continue an interrupted run: its finished trials are kept, the rest of its plan runs."""
    run_dir = Path(run_dir)
    if not (run_dir / "case.yaml").exists():
        raise BadInput("not a perfkit run directory (no case.yaml)", path=str(run_dir))
    opts = rundir.read_options(run_dir, host_index)
    options = RunOptions(**{f.name: opts[f.name] for f in dataclasses.fields(RunOptions) if f.name in opts})
    return run_case(case_mod.load(run_dir / "case.yaml"), run_dir, options, resume=True, progress=progress)


def _environment(case: Case, options: RunOptions) -> str:
    info = envinfo.collect(REPO_ROOT, devices_env={**os.environ, "XLA_FLAGS": xla_flags(
        os.environ.get("XLA_FLAGS", ""), devices_per_process(case), None)}, probe=case.kind == "model")
    info["hosts"] = {"count": options.hosts, "index": options.host_index}
    return json.dumps(info, indent=2)


def _run_cell(case: Case, run_dir: Path, options: RunOptions, *, resume: bool, env_json: str,
              progress: Progress, port_base: int = 0) -> RunResult:
    """The trials of one case without a matrix, then its summary and report."""
    part = rundir.part_dir(run_dir, options.host_index, options.hosts)
    part.mkdir(parents=True, exist_ok=True)
    (part / "done").unlink(missing_ok=True)  # a resumed host is running again
    if options.host_index == 0:
        (run_dir / "case.yaml").write_text(case_mod.to_yaml(case))
        rundir.write_atomic(run_dir / "env.json", env_json)
    done = {t["index"]: t for t in rundir.read_trials(part)}
    names = run_names(case, options.only)
    hook = stackdump.hook_dir(part / ".perfkit")
    # Adaptive rounds need one view of every trial: with many hosts each runs repeats.min rounds.
    adaptive = options.hosts == 1 and len(names) >= 2
    rounds = max([case.repeats["min"]] + [t["round"] + 1 for t in done.values()])
    interrupted = False
    try:
        while True:
            plan = plan_trials(names, rounds, case.order, case.seed)
            for trial in plan:
                if trial.index in done:
                    continue
                record = _run_trial(case, trial, run_dir, options, hook, port_base,
                                    lambda: progress.running(len(done) + 1, len(plan), trial.variant,
                                                             list(done.values()), run_dir / "trials" /
                                                             trial.dirname / "rank0" / "metrics.jsonl"))
                if record is None:
                    interrupted = True
                    break
                rundir.append_trial(part, record)
                done[trial.index] = record
                progress.finished(len(done), len(plan), record, list(done.values()))
            if interrupted or not adaptive or rounds >= case.repeats["max"] or \
                    not undecided(case, names, list(done.values())):
                break
            rounds += 1
    except KeyboardInterrupt:
        interrupted = True
    own_failed = any(t["status"] != "ok" for t in done.values())
    if options.hosts == 1:
        return RunResult(run_dir, rundir.render_one(run_dir, interrupted=interrupted), interrupted)
    rundir.mark_done(part, interrupted)
    if rundir.all_hosts_done(run_dir, options.hosts):
        own_failed = rundir.render_one(run_dir) or own_failed
    return RunResult(run_dir, own_failed or interrupted, interrupted)


def _run_trial(case: Case, trial: Trial, run_dir: Path, options: RunOptions, hook: Path, port_base: int,
               on_tick: Callable[[], None]) -> dict | None:
    """Run one trial in fresh processes; its record, or None when it was interrupted."""
    trial_dir = run_dir / "trials" / trial.dirname
    if case.kind == "serve":
        from perfkit.serve import trial as serve

        return serve.run_trial(case, case.variant(trial.variant), trial, trial_dir, options, hook, on_tick)
    dump = case.capture["xla_dump"] == "all" or (case.capture["xla_dump"] == "first" and trial.round == 0)
    ranks = rank_processes(case, case.variant(trial.variant), trial, trial_dir, dump=dump, options=options,
                           trial_port=port_base + trial.index, hook=hook)
    for r in ranks:
        shutil.rmtree(r.dir, ignore_errors=True)  # what an interrupted attempt left
    outcome = run_ranks(ranks, timeout=case.timeout, cwd=options.cwd, on_tick=on_tick)
    if outcome.status == "interrupted":
        return None
    if dump:
        for r in ranks:
            prune_dump(r.dir / "xla_dump")
    return trial_record(case, trial, trial_dir, outcome)


# The CPU backend also dumps each module's LLVM IR and object code: most of a dump's bytes, and nothing
# perfkit or a reader of HLO uses.
DUMP_NOISE = ("*.ll", "*.o")


def prune_dump(folder: Path) -> None:
    for pattern in DUMP_NOISE:
        for path in folder.glob(pattern):
            path.unlink(missing_ok=True)
