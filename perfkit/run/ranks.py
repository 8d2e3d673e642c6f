"""The model and command case kinds: a trial is N rank processes started with the metrics protocol's
variables (and the launcher variables of torch.distributed and jax.distributed), watched until they
end, then read back into one ``trials.jsonl`` record (interface: ``perfkit.run.trial``)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Callable

from perfkit.common import extras
from perfkit.common.xla import xla_flags
from perfkit.errors import BadInput
from perfkit.run.launch import RankProcess, TrialOutcome, run_ranks
from perfkit.run.placement import Placement, devices_per_process, host_ranks, placements
from perfkit.run.trial import (PYTHON_NAMES, RunOptions, Trial, check_program, check_scripts, free_port, process_env,
                               trial_salt)
from perfkit.rundata.case import Case, Variant, cases_dir
from perfkit.rundata.metrics import read_metrics, steps_from_stdout
from perfkit.rundata.trials import RankRecord, TrialRecord


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


def rank_processes(case: Case, variant: Variant, trial: Trial, trial_dir: Path, dump: bool, *,
                   options: RunOptions = RunOptions(), trial_port: int = 0,
                   hook: Path | None = None, placed: dict[int, Placement] | None = None) -> list[RankProcess]:
    """The argv and environment of this host's ranks of a trial (metrics protocol variables included).

    Multi-process trials also get the launcher variables that torch.distributed (``MASTER_ADDR``,
    ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``) and ``jax.distributed``
    (``PERFKIT_COORDINATOR`` = host:port) read; with ``placed`` (``placements``), each rank its chips'
    variables."""
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
            # At which steps to tap (perfkit.record.tap), and whether to keep the arrays (as xla_dump picks trials).
            "PERFKIT_TAP_STEPS": ",".join(map(str, case.capture["taps"])),
            "PERFKIT_TAP_ARRAYS": str(int(case.capture["tap_arrays"] == "all"
                                          or (case.capture["tap_arrays"] == "first" and trial.round == 0))),
            "XLA_FLAGS": xla_flags(inherited_flags, devices_per_process(case), rdir / "xla_dump" if dump else None),
        }}, rdir, hook, salt)
        if case.mesh:
            env["PERFKIT_MESH"] = ",".join(f"{k}={v}" for k, v in case.mesh.items())
        if port is not None:
            env.update({"MASTER_ADDR": addr, "MASTER_PORT": str(port), "RANK": str(r),
                        "WORLD_SIZE": str(case.processes), "LOCAL_RANK": str(r - mine.start),
                        "LOCAL_WORLD_SIZE": str(len(mine)), "PERFKIT_COORDINATOR": f"{addr}:{port}"})
        if placed is not None:
            env.update(placed[r].env)
        env.setdefault("NPROC", "16")  # Pallas interpret kernels deadlock with fewer threads than devices
        if case.kind == "model":
            spec = {"model": case.model_of(variant), "options": variant.options, "devices": case.devices,
                    "seed": case.seed, "trace_steps": case.capture["trace"],
                    "trace_dir": str(rdir / "trace"), "outputs": case.capture["outputs"]}
            argv = [sys.executable, "-m", "perfkit.run.model_rank", json.dumps(spec)]
        else:
            argv = command_argv(case, variant)
        ranks.append(RankProcess(r, argv, env, rdir))
    return ranks


def trial_record(case: Case, trial: Trial, trial_dir: Path, outcome: TrialOutcome,
                 placed: dict[int, Placement] | None = None) -> TrialRecord:
    """What ``trials.jsonl`` keeps of a finished trial. This host's lowest rank times the trial (rank 0
    on one host; a multi-host merge keeps the part holding rank 0). Metrics lines written after perfkit stopped
    the trial are left out (``late_steps`` counts a rank's steps among them), and so are a ``step_regex``'s stdout
    lines past what stdout held then: the stack dumps were taken then,
    and a rank that ran on past SIGTERM did not get that far before it. Step events with no finite ``ms`` are
    left out, ``unreadable_steps`` counting a rank's. With a placement each rank keeps its
    chips and variables, and the chip kind it reported (a ``device_kind`` in a mark, as the bundled
    worker's ``ready`` has it)."""
    per_rank: list[RankRecord] = []
    timing = None
    for rep in outcome.ranks:
        rdir = trial_dir / f"rank{rep['rank']}"
        m = read_metrics(rdir / "metrics.jsonl", until=outcome.stopped_t)
        steps, late, unreadable = m.steps_ms, m.late_steps, m.unreadable_steps
        if not steps and case.step_regex:  # stdout's lines past its size at the stop: late alike
            steps, stdout_late, stdout_unreadable = steps_from_stdout(rdir / "stdout.log", case.step_regex,
                                                                      until=outcome.stdout_at_stop.get(rep["rank"]))
            late += stdout_late
            unreadable += stdout_unreadable
        kind = next((mk["device_kind"] for mk in reversed(m.marks) if isinstance(mk.get("device_kind"), str)), None)
        per_rank.append({**rep, "steps_done": len(steps), "last_step_ms": steps[-1] if steps else None,
                         "last_mark": m.last_mark, **({"late_steps": late} if late else {}),
                         **({"unreadable_steps": unreadable} if unreadable else {}),
                         **({"device_kind": kind} if kind else {}),
                         **({"placement": placed[rep["rank"]].record()} if placed else {})})
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


# The CPU backend also dumps each module's LLVM IR and object code: most of a dump's bytes, and nothing
# perfkit or a reader of HLO uses.
DUMP_NOISE = ("*.ll", "*.o")


def prune_dump(folder: Path) -> None:
    for pattern in DUMP_NOISE:
        for path in folder.glob(pattern):
            path.unlink(missing_ok=True)


def check_runnable(case: Case, cwd: str) -> None:
    """A command that cannot start (its program or a script it names missing, relative ones from ``cwd``, where its
    ranks start; a bundled program, ``-m`` module or case script, whose extra is not installed), or a model variant
    whose plan cannot be honoured, is bad input, found before any trial runs."""
    if case.kind == "model":
        extras.require("jax", "a model case", path=case.source)
        # jax and the bundled models: only for model cases
        from perfkit.models import plan_for

        for v in case.variants:
            try:
                plan_for(case.model["name"], case.model["config"], v.options, case.devices)
            except BadInput as exc:
                if exc.field == "devices":  # the case's count, which this variant's plan cannot split the model over
                    raise BadInput(f"variant {v.name}: {exc.reason}", path=case.source, field="devices") from None
                field = exc.field if exc.field and exc.field.startswith("model.") else \
                    f"variants.{v.name}.{exc.field or 'options'}"
                raise BadInput(exc.reason, path=case.source, field=field) from None
        return
    argv = command_argv(case, case.variants[0])
    check_program(argv[0], case, "command")
    named = [("command", [str(a) for a in case.command]), *((f"variants.{v.name}.args", v.args) for v in case.variants)]
    for field, args in named:
        check_scripts(case, args, field, cwd, program=field == "command")
    if argv[1:2] == ["-m"] and len(argv) > 2 and (extra := extras.of_module(argv[2])):
        extras.require(extra, f"command: {argv[2]}", path=case.source)
    # the scripts of a bundled case (cases/repro/'s import jax), whose imports perfkit knows; of a user's it cannot
    bundled = cases_dir().resolve()
    for field, args in named:
        for script in ((Path(cwd) / a).resolve() for a in args if a.endswith(".py")):
            if script.is_relative_to(bundled) and (extra := extras.of_script(script)):
                extras.require(extra, f"{field}: {script.name}", path=case.source)


def run_trial(case: Case, trial: Trial, trial_dir: Path, options: RunOptions, hook: Path, trial_port: int,
               on_tick: Callable[[], None]) -> TrialRecord | None:
    """Run one trial's ranks in fresh processes; its record, or None when it was interrupted."""
    dump = case.capture["xla_dump"] == "all" or (case.capture["xla_dump"] == "first" and trial.round == 0)
    placed = placements(case, options)
    by_rank = placed[1] if placed else None
    ranks = rank_processes(case, case.variant(trial.variant), trial, trial_dir, dump=dump, options=options,
                           trial_port=trial_port, hook=hook, placed=by_rank)
    for r in ranks:
        shutil.rmtree(r.dir, ignore_errors=True)  # what an interrupted attempt left
        (r.dir / "outputs").mkdir(parents=True)  # PERFKIT_OUTPUTS: a program may save into it without making it
    outcome = run_ranks(ranks, timeout=case.timeout, cwd=options.cwd, on_tick=on_tick)
    if outcome.status == "interrupted":
        return None
    for r in ranks:
        with contextlib.suppress(OSError):  # one the rank wrote nothing into is left out, as before it was made
            (r.dir / "outputs").rmdir()
    if dump:
        for r in ranks:
            prune_dump(r.dir / "xla_dump")
    return trial_record(case, trial, trial_dir, outcome, by_rank)
