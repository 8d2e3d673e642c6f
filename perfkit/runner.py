"""``perfkit run``: interleaved A/B trials of a case, each in fresh processes, into a run directory.

Run directory (a contract, see architecture.md): ``case.yaml`` (resolved), ``env.json``,
``trials.jsonl`` (one line per finished trial, appended at once), ``trials/<NN>-<variant>/rank<R>/``
(``metrics.jsonl``, ``stdout.log``, ``stderr.log``, ``outputs/``, ``xla_dump/``, ``trace/``),
``summary.json``, ``report.md``, ``plots/``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import random
import socket
import sys
import time
from pathlib import Path
from typing import Callable

from perfkit import case as case_mod
from perfkit import envinfo, stats
from perfkit.case import Case, Variant
from perfkit.launch import RankProcess, run_ranks
from perfkit.metrics import read_metrics, steps_from_stdout

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Trial:
    index: int
    variant: str
    round: int

    @property
    def dirname(self) -> str:
        return f"{self.index:02d}-{self.variant}"


def round_order(variants: list[str], round_index: int, order: str, seed: int) -> list[str]:
    """Variants in one round: ``abba`` alternates forward and reversed rounds (A B, B A, ...), which
    cancels linear drift; ``random`` shuffles each round with a seeded generator."""
    if order == "random":
        rng = random.Random(seed * 1_000_003 + round_index)
        out = list(variants)
        rng.shuffle(out)
        return out
    return list(variants) if round_index % 2 == 0 else list(reversed(variants))


def plan_trials(variants: list[str], rounds: int, order: str, seed: int, start_round: int = 0,
                start_index: int = 0) -> list[Trial]:
    trials = []
    for r in range(start_round, start_round + rounds):
        for name in round_order(variants, r, order, seed):
            trials.append(Trial(start_index + len(trials), name, r))
    return trials


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


def rank_processes(case: Case, variant: Variant, trial: Trial, trial_dir: Path, dump: bool) -> list[RankProcess]:
    """The argv and environment of each rank of a trial (metrics protocol variables included).

    Multi-process trials also get the launcher variables that torch.distributed (``MASTER_ADDR``,
    ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``) and ``jax.distributed``
    (``PERFKIT_COORDINATOR`` = host:port) read, with a fresh free port per trial."""
    ranks = []
    port = free_port() if case.processes > 1 else None
    for r in range(case.processes):
        rdir = trial_dir / f"rank{r}"
        env = dict(os.environ)
        env.update(variant.env)
        devices_here = case.devices if case.processes == 1 else max(1, case.devices // case.processes)
        env.update({
            "PERFKIT_METRICS": str(rdir / "metrics.jsonl"),
            "PERFKIT_OUTPUTS": str(rdir / "outputs"),
            "PERFKIT_RANK": str(r),
            "PERFKIT_WORLD": str(case.processes),
            "PERFKIT_TRIAL": str(trial.index),
            "PERFKIT_VARIANT": variant.name,
            # Where and at which steps a rank should capture a profile (any program may honour it).
            "PERFKIT_TRACE_DIR": str(rdir / "trace"),
            "PERFKIT_TRACE_STEPS": ",".join(map(str, case.capture["trace"])),
            "XLA_FLAGS": xla_flags(env.get("XLA_FLAGS", ""), devices_here,
                                   rdir / "xla_dump" if dump else None),
            "PYTHONUNBUFFERED": "1",
        })
        if port is not None:
            env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(r),
                        "WORLD_SIZE": str(case.processes), "LOCAL_RANK": str(r),
                        "LOCAL_WORLD_SIZE": str(case.processes), "PERFKIT_COORDINATOR": f"127.0.0.1:{port}"})
        env.setdefault("NPROC", "16")  # Pallas interpret kernels deadlock with fewer threads than devices
        if case.kind == "model":
            spec = {"model": case.model, "options": variant.options, "devices": case.devices,
                    "seed": case.seed, "trace_steps": case.capture["trace"],
                    "trace_dir": str(rdir / "trace"), "outputs": case.capture["outputs"]}
            argv = [sys.executable, "-m", "perfkit.worker", json.dumps(spec)]
        else:
            argv = [str(a) for a in case.command] + variant.args
        ranks.append(RankProcess(r, argv, env, rdir))
    return ranks


def trial_record(case: Case, trial: Trial, trial_dir: Path, outcome) -> dict:
    """What ``trials.jsonl`` keeps of a finished trial (rank 0's steps time the trial)."""
    per_rank = []
    for rep in outcome.ranks:
        rdir = trial_dir / f"rank{rep['rank']}"
        m = read_metrics(rdir / "metrics.jsonl")
        steps = m.steps_ms
        if not steps and case.step_regex:
            steps = steps_from_stdout(rdir / "stdout.log", case.step_regex)
        per_rank.append({**rep, "steps_done": len(steps), "last_mark": m.last_mark})
        if rep["rank"] == 0:
            steps0, values0 = steps, {k: v[-1] for k, v in m.values.items()}
    status = outcome.status
    if status == "ok" and len(steps0) <= case.warmup:
        status = "no_steps"
    return {
        "index": trial.index, "variant": trial.variant, "round": trial.round, "dir": f"trials/{trial.dirname}",
        "status": status, "wall_s": round(outcome.wall_s, 3), "warmup": case.warmup,
        "steps_ms": steps0, "values": values0, "ranks": per_rank,
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def read_trials(run_dir: Path) -> list[dict]:
    path = run_dir / "trials.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line from a killed perfkit
    return out


def timed_steps(trial: dict) -> list[float]:
    return trial["steps_ms"][trial["warmup"]:] if trial["status"] == "ok" else []


def current_comparison(case: Case, trials: list[dict]) -> stats.Comparison:
    a, b = case.variants[0].name, case.variants[1].name
    return stats.compare([timed_steps(t) for t in trials if t["variant"] == a],
                         [timed_steps(t) for t in trials if t["variant"] == b],
                         min_effect=case.min_effect, seed=case.seed)


def default_run_dir(case: Case) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in case.name)
    return REPO_ROOT / "reports" / "runs" / f"{safe}-{stamp}"


def _progress_line(k: int, n: int, trial: Trial, trials: list[dict], t0: float) -> str:
    steps = [s for t in trials if t["variant"] == trial.variant for s in timed_steps(t)]
    med = stats.summarize(steps)["median"]
    elapsed = time.monotonic() - t0
    left = elapsed / max(k, 1) * (n - k)
    med_txt = f"{med:.2f} ms" if med is not None else "-"
    return f"[{k}/{n}] {trial.variant:<12} step median {med_txt:>10}   ~{left:.0f} s left"


def run_case(case: Case, run_dir: Path | None = None, *, only: str | None = None,
             log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)) -> Path:
    """Run every trial of ``case`` into ``run_dir`` and write its summary and report."""
    from perfkit import analyze  # analysis pulls in pandas / matplotlib: only once trials are done

    run_dir = Path(run_dir) if run_dir else default_run_dir(case)
    (run_dir / "trials").mkdir(parents=True, exist_ok=True)
    (run_dir / "case.yaml").write_text(case_mod.to_yaml(case))
    env = envinfo.collect(REPO_ROOT, devices_env={**os.environ, "XLA_FLAGS": xla_flags(
        os.environ.get("XLA_FLAGS", ""), case.devices if case.processes == 1 else 1, None)},
        probe=case.kind == "model")
    (run_dir / "env.json").write_text(json.dumps(env, indent=2))

    names = [v.name for v in case.variants]
    if only is not None:
        if only not in names:
            from perfkit.errors import BadInput
            raise BadInput(f"no variant {only!r} (variants: {', '.join(names)})", path=case.source, field="--only")
        names = [only]
    trials_done: list[dict] = read_trials(run_dir)
    plan = plan_trials(names, case.repeats["min"], case.order, case.seed)
    max_rounds = case.repeats["max"]
    t0 = time.monotonic()
    interrupted = False
    k = 0
    while k < len(plan) and not interrupted:
        trial = plan[k]
        k += 1
        trial_dir = run_dir / "trials" / trial.dirname
        dump = case.capture["xla_dump"] == "all" or (case.capture["xla_dump"] == "first" and trial.round == 0)
        outcome = run_ranks(rank_processes(case, case.variant(trial.variant), trial, trial_dir, dump),
                            timeout=case.timeout, cwd=REPO_ROOT)
        record = trial_record(case, trial, trial_dir, outcome)
        with open(run_dir / "trials.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        trials_done.append(record)
        log(_progress_line(k, len(plan), trial, trials_done, t0) + (f"   {record['status']}" if record["status"] != "ok" else ""))
        interrupted = outcome.status == "interrupted"
        if k == len(plan) and len(names) >= 2 and plan[-1].round + 1 < max_rounds:
            # Adaptive repeats: another round while the verdict is still unknown.
            if current_comparison(case, trials_done).verdict == "unknown":
                plan += plan_trials(names, 1, case.order, case.seed, plan[-1].round + 1, len(plan))
    return analyze.finish(case, run_dir, trials_done, interrupted=interrupted)
