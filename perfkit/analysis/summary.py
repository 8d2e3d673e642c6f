"""From a run directory's files to the summary dict that ``summary.json`` holds (``perfkit.run.finish``
writes it, report.md and the summary line).

Works only from what the run wrote (``case.yaml``, ``env.json``, ``trials.jsonl``, trial folders), so
``perfkit report RUN_DIR`` re-renders any run, finished or interrupted.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np

from perfkit.analysis import attribution, serving, stats, timing
from perfkit.common.comparison import (NO_SPREAD, aa_call_text, compared_variant, inside_noise_floor, noise_range,
                                       one_trial_call, unreadable_text, without_ci)
from perfkit.common.devices import on_cpu_devices
from perfkit.cost.programs import run_costs
from perfkit.hlo.consistency import variant_check
from perfkit.quality import compare, departure, media
from perfkit.rundata import case as case_mod
from perfkit.rundata.case import Case
from perfkit.rundata import rundir
from perfkit.rundata.exits import crashed_alike, ended
from perfkit.rundata.summary import Summary
from perfkit.trace.runs import summarize, summarize_with_parts
from perfkit.trace.parting import run_hangs


def _first_ok(trials: list[dict], variant: str) -> dict | None:
    return next((t for t in trials if t["variant"] == variant and t["status"] == "ok"), None)


def variant_summary(trials: list[dict], name: str) -> dict:
    """A variant's timing: synced steps after warmup (``step_ms``), natural passes
    (``natural_step_ms``), first steps (``first_step_ms``: the bundled model compiles in it), other reported values
    (``values``, e.g. ``compile_s``) over its good trials."""
    mine = [t for t in trials if t["variant"] == name]
    steps = timing.steps_frame(mine)
    table = timing.variant_timing(steps).set_index("metric")
    values: dict[str, list[float]] = {}
    for t in mine:
        if t["status"] == "ok":
            for k, v in t["values"].items():
                values.setdefault(k, []).append(v)
    figures = {m: ({k: table.loc[m, k] for k in ("median", "p25", "p75")} | {"n": int(table.loc[m, "n"])}
                   if m in table.index else stats.summarize([]))
               for m in ("step_ms", "natural_step_ms", "first_step_ms")}
    return {
        **figures,
        "trial_medians_ms": [float(np.median(x)) for x in timing.per_trial(steps, name, "step_ms")],
        "values": {k: stats.summarize(v) for k, v in values.items()},
        "trials": len(mine),
        "failed": sum(t["status"] != "ok" for t in mine),
        # a good trial's steps are its first rank's (rank 0's): a step's collectives wait for every rank
        "ranks": max((len(t.get("ranks") or ()) for t in mine if t["status"] == "ok"), default=0),
        # the traced steps, and any the program ran under its profiler besides (torch.profiler's warm-up)
        "profiled_steps": max((len(t.get("traced") or ()) for t in mine if t["status"] == "ok"), default=0),
    }


def crash_ends(case: Case, run_dir: Path, trials: list[dict]) -> tuple[dict[str, dict | None], int | None]:
    """Where the plan stopped variants that crashed alike (``perfkit.rundata.exits.ended``, on one host, as the runner
    applies it): each variant's ``crashed_alike`` (``{round, error}``, the round from 1, where it ran no trial after
    it and the case allowed more rounds; else None), and the round the run ended with, nothing left to compare, where
    the case allowed more (else None)."""
    names = [v.name for v in case.run_variants()]
    alike = dict.fromkeys(names)
    if rundir.started_options(run_dir).get("hosts", 1) > 1:
        return alike, None
    last = {n: max((t["round"] for t in trials if t["variant"] == n), default=None) for n in names}
    ran = [n for n in names if last[n] is not None]  # (with --only, the variant and its A/A control)
    for n in ran:
        found = crashed_alike(trials, n)
        if found is not None and last[n] == found[0] and found[0] + 1 < case.repeats["max"]:
            alike[n] = {"round": found[0] + 1, "error": found[1]}
    stop = ended(ran, case.variants[0].name, case.aa_name, trials)
    end = max(stop.values()) if stop and set(stop) == set(ran) else None  # every variant stopped: the run did
    if end is None or end >= case.repeats["max"] or max(last[n] for n in ran) >= end:
        return alike, None
    return alike, end


def quality_summary(run_dir: Path, trials: list[dict], a: str, b: str, oracle: str | None = None) -> dict | None:
    """B's outputs against A's (first good trial of each), both against the oracle, and the per-step
    drift when latents were saved (``perfkit.quality.compare.outputs_quality``); None without outputs."""
    ta, tb = _first_ok(trials, a), _first_ok(trials, b)
    if ta is None or tb is None:
        return None
    return compare.outputs_quality(run_dir / ta["dir"], run_dir / tb["dir"], oracle, names=(a, b))


def determinism(run_dir: Path, trials: list[dict], name: str) -> dict | None:
    """Whether every good trial of a variant wrote the same outputs, and their spread if not."""
    return compare.repeats_quality([media.output_files(run_dir / t["dir"]) for t in trials
                                    if t["variant"] == name and t["status"] == "ok"])


def compile_cache_summary(case: Case, run_dir: Path, trials: list[dict], variants: dict) -> dict | None:
    """Cold against warm compile caches (variants with ``compile_cache``), side by side: each one's first
    step and ``compile_s`` (medians over good trials), the cache hits its program counted
    (``compile_cache_hits``), the jax cache entries its trials wrote (counted on disk), a server's
    ``ready_s``, its priming trial; and whether every good trial of them all wrote bit-identical outputs
    (``outputs``: ``perfkit.quality.compare.repeats_quality`` over those trials). None without such variants."""
    cached = [v for v in case.run_variants() if v.compile_cache]
    if not cached:
        return None
    rows = {}
    for v in cached:
        mine = [t for t in trials if t["variant"] == v.name and t["status"] == "ok" and "compile_cache" in t]
        caches = [t["compile_cache"] for t in mine]
        primed = run_dir / "compile_cache" / v.name / "primed.json"
        prime = json.loads(primed.read_text()) if primed.exists() else None
        values = variants[v.name]["values"]
        rows[v.name] = {
            "mode": v.compile_cache, "trials": len(mine),
            "first_step_ms": variants[v.name]["first_step_ms"]["median"],
            **{name: values.get(key, {}).get("median") for name, key in
               (("compile_s", "compile_s"), ("cache_hits", "compile_cache_hits"), ("ready_s", "ready_s"))},
            "entries_at_start": stats.summarize([c["before"]["jax_entries"] for c in caches])["median"],
            "entries_written": stats.summarize([c["after"]["jax_entries"] - c["before"]["jax_entries"]
                                                for c in caches])["median"],
            "priming": prime and {"status": prime["status"], "wall_s": prime["wall_s"],
                                  "entries": prime["compile_cache"]["after"]["jax_entries"]},
        }
    outputs = compare.repeats_quality([media.output_files(run_dir / t["dir"]) for t in trials
                                       if t["status"] == "ok" and t["variant"] in rows])
    return {"variants": rows, "outputs": outputs}


# One process drives all its devices from one controller, so no rank can compile another program; said without
# claiming the process compiled any (a pure-Python command compiles none).
ONE_PROCESS = "one process: no other rank to compile another program"


def rank_summary(case: Case, run_dir: Path, trials: list[dict], only: str | None = None) -> dict:
    """Rank consistency per variant. One SPMD controller compiles one program for all devices; with one
    process per rank, ``perfkit hlo-diff`` compares the programs of the first trial of each variant whose
    ranks wrote XLA dumps (``perfkit.hlo.consistency``). One process is one rank, consistent whatever it runs (a
    model's or a command's alike: ``ONE_PROCESS``). A variant with no finished trial, or one the run's ``only``
    left out, is not checked (``consistent`` null, ``checked`` saying why)."""
    return {v.name: {"consistent": None, "groups": [], "checked": f"not checked: {rundir.left_out_by_only(only)}"}
            if only not in (None, v.name) else _rank_check(case, run_dir, trials, v.name) for v in case.variants}


def _rank_check(case: Case, run_dir: Path, trials: list[dict], variant: str) -> dict:
    """``rank_summary``'s figure for one variant the run ran."""
    if case.kind == "serve":
        return {"consistent": None, "groups": [], "checked": "not checked (a served system)"}
    if case.processes == 1:
        if any(t["variant"] == variant and t["status"] == "ok" for t in trials):
            return {"consistent": True, "groups": [[0]], "checked": ONE_PROCESS}
        return {"consistent": None, "groups": [], "checked": "not checked: no trial of this variant finished"}
    return variant_check(run_dir, variant)


def trace_summary(run_dir: Path, trials: list[dict], variants: list[str] | None = None) -> dict | None:
    """From the profiler traces the good trials captured (``trials/NN-variant/rank<R>/trace/``): per
    variant the mean step per chip as compute / exposed ICI / local DMA / idle (ms), and the op kinds
    whose device time per step changed most against the baseline (``perfkit.trace.runs``); None when
    no trace was captured. ``variants``: baseline first (default: the order trials name them)."""
    return summarize(run_dir, trials, variants or list(dict.fromkeys(t["variant"] for t in trials)))


def traces_summary(run_dir: Path, trials: list[dict], variants: list[str], seed: int) -> tuple[dict | None, dict | None]:
    """summary.json's ``breakdown`` (``trace_summary``) and ``attribution`` (``attribution.summarize``), from one
    reading of each trial's traces."""
    breakdown, parts = summarize_with_parts(run_dir, trials, variants)
    return breakdown, attribution.summarize(run_dir, trials, variants, parts, seed=seed, breakdown=breakdown)


def unreadable_steps(trials: list[dict]) -> list[dict]:
    """Each trial rank's step events whose ``ms`` was no finite number (trials.jsonl's ``unreadable_steps``)."""
    return [{"index": t["index"], "variant": t["variant"], "rank": r["rank"], "steps": r["unreadable_steps"]}
            for t in trials for r in t["ranks"] if r.get("unreadable_steps")]


def _left_out_text(summary: dict) -> str:
    """Which of A and B the run's ``--only`` left out (run.json's, ``rundir.left_out``), in the phrase perfkit
    check's rows give: "a: not run, the run was started with --only b"; "" where it left neither out."""
    return rundir.left_out_text((summary["baseline"], compared_variant(summary)), rundir.left_out_of(summary))


def not_verified(case: Case, summary: dict) -> list[str]:
    """What the run did not check, read from the case and the summary: the report's last section. Where the run's
    ``--only`` left A or B out, its output quality and verdict items say so (``_left_out_text``)."""
    # a model's seed draws its weights and noise; a command or server takes no seed from perfkit
    notes = [f"one seed only (seed {case.seed})" if case.kind == "model" else
             "one set of inputs only: the serve.prompts and their seeds" if case.kind == "serve" else
             "one set of inputs only: the command's own (perfkit passes it no seed)"]
    if case.oracle is None:  # (where B's outputs were not compared with A's either, an item below says so)
        notes.append("no oracle: quality is B against A, not against a higher-precision reference"
                     if summary.get("quality") is not None else
                     "no oracle: no output was compared with a higher-precision reference")
    if case.aa_name is None:
        notes.append("no A/A control: this machine's noise floor was not measured (`--aa`)")
    if not case.capture["trace"]:
        notes.append("no profiler traces captured (no compute / ICI / DMA / idle split)")
    elif summary.get("breakdown") is None:
        notes.append("profiler traces were asked for (`capture.trace`) but no trial wrote one")
    unchecked = [f"{v}: {r.get('checked') or 'not checked'}" for v, r in summary["ranks"].items()
                 if r.get("consistent") is None]
    if unchecked:
        notes.append(f"rank consistency ({'; '.join(unchecked)})")
    if summary.get("quality") is None and case.kind == "serve":  # its outputs are the served ones, not a rank's
        notes.append("output quality (no served output of B compared with A's: the Serving section's table of "
                     "served outputs says why)")
    elif summary.get("quality") is None:
        # (a variant --only left out wrote no outputs, whatever the case's capture.outputs)
        why = _left_out_text(summary) or (
            "`capture.outputs` is on, but no trial's rank 0 wrote a video, array or image folder to its outputs "
            "folder, `perfkit.record.outputs_dir()`" if case.capture.get("outputs") else "")
        notes.append(f"output quality (no comparable outputs{': ' + why if why else ''})")
    others = media.other_rank_outputs(Path(summary["run_dir"]))
    if others:
        listed = "; ".join(f"rank {r}'s {', '.join(names)}" for r, names in others.items())
        notes.append(f"the outputs of ranks other than 0 ({listed}): a run compares rank 0's outputs")
    once = [v for v, d in summary.get("determinism", {}).items() if d and d["runs"] < 2]
    if once:
        notes.append(f"determinism of {', '.join(once)} (one good run)")
    c = summary["comparison"]
    if called := aa_call_text(summary):
        notes.append(f"every timing verdict: {called}")
    if c["verdict"] == "unknown":
        why = (_left_out_text(summary) or "a variant has no timed steps") if c["ratio"] is None else NO_SPREAD \
            if without_ci(c) else "the CI reaches both sides of the minimum effect"
        notes.append(f"the B/A timing verdict: unknown ({why})")
    elif inside := inside_noise_floor(summary):
        notes.append(f"the B/A timing verdict: {c['verdict']} by its CI, but its change ({inside}) lies inside the "
                     f"A/A noise floor ({noise_range(summary['noise_floor'])})")
    elif once := one_trial_call(c):
        notes.append(f"the B/A timing CI: {once}")
    if unreadable := unreadable_text(summary):
        notes.append(f"the step times the program wrote: {unreadable}; perfkit gives them no time, and the steps "
                     "after them count their positions from the steps kept, so one left out within the warmup takes "
                     "the next step as warmup too (a profiled step stays marked)")
    failed = summary["trials"]["failed"]
    if failed:
        notes.append(f"{len(failed)} of {summary['trials']['total']} trials failed or hung: the figures come from "
                     "the others")
    if summary.get("interrupted"):
        notes.append("the run was stopped before its plan was done")
    if on_cpu_devices(summary):
        notes.append("speed on TPU or GPU: these timings come from CPU devices")
    devices = (summary.get("env") or {}).get("devices") or {}
    # (a variant not costed, its dumps unread, has no step to bound: its cost entry says why)
    if any("step" in c for c in (summary.get("cost") or {}).values()) and not summary.get("roofline"):
        notes.append(f"the roofline: perfkit has no figures for {devices.get('kind') or 'these devices'} "
                     "(`perfkit cost RUN_DIR --chip NAME` bounds the steps on one)")
    uncounted = [v for v, r in ((summary.get("compile_cache") or {}).get("variants") or {}).items()
                 if r["cache_hits"] is None]
    if uncounted:
        notes.append(f"compile cache hits of {', '.join(uncounted)}: the program reported no `compile_cache_hits` "
                     "(only the jax entries on disk are counted)")
    if summary.get("serve"):
        notes += summary["serve"]["not_verified"]
    return notes


def reproduce(run_dir: Path, env: dict) -> dict:
    """How to run the case again: commit and tree, the directory commands ran in, the ``perfkit run``
    command on the run's resolved ``case.yaml`` with the options the run was started with, and the scripts it ran
    that the commit does not hold (env.json's ``scripts``)."""
    options = rundir.started_options(run_dir)
    cwd = options.get("cwd") or None
    case_file = (run_dir / "case.yaml").resolve()
    shown = str(case_file.relative_to(cwd)) if cwd and case_file.is_relative_to(cwd) else str(case_file)
    argv = ["perfkit", "run", shown]
    if options.get("only"):
        argv += ["--only", options["only"]]
    if options.get("salt"):
        argv.append("--salt")
    if options.get("hosts", 1) > 1:
        argv += ["--hosts", str(options["hosts"]), "--host-index", "<this host, 0..>", "--coordinator",
                 options["coordinator"], "--out", "<a directory all hosts share>"]
    src = env.get("source") or {}
    root = src.get("root")  # a model case's code is perfkit's checkout, which the run's folder may be outside of
    checkout = root if root and cwd and not Path(cwd).is_relative_to(root) else None
    return {"command": shlex.join(argv), "cwd": cwd, "case_file": shown, "checkout": checkout,
            "commit": src.get("commit"), "tree": src.get("tree"), "dirty": src.get("dirty"),
            "dirty_hash": src.get("dirty_hash"), "case_yaml": (run_dir / "case.yaml").read_text(),
            "outside_tree": env.get("scripts") or []}


ENV_KEYS = ("source", "packages", "devices", "python", "host", "cpus", "platform", "flags", "hosts")


def run_env(run_dir: Path) -> tuple[dict, dict]:
    """The run's env.json (empty where it wrote none) and what a summary keeps of it (``ENV_KEYS``)."""
    env = json.loads((run_dir / "env.json").read_text()) if (run_dir / "env.json").exists() else {}
    return env, {k: env.get(k) for k in ENV_KEYS}


def summarize_run(run_dir: str | Path, *, interrupted: bool = False) -> tuple[Case, Summary]:
    """The run's case and summary (``summary.json``'s content); ``interrupted``: the run was stopped
    before its plan was done."""
    run_dir = Path(run_dir)
    case = case_mod.load(run_dir / "case.yaml")
    trials = rundir.read_trials(run_dir)
    variants = case.run_variants()
    a, b = variants[0].name, variants[1].name
    options = rundir.started_options(run_dir)
    comparisons = timing.compare_variants(timing.steps_frame(trials), a, [v.name for v in variants[1:]],
                                          min_effect=case.min_effect, seed=case.seed,
                                          rounds=case.looks(options.get("hosts", 1), options.get("only")))
    main = comparisons[(comparisons.variant == b) & (comparisons.metric == "step_ms")].iloc[0].to_dict()
    env, kept = run_env(run_dir)
    breakdown, attributed = traces_summary(run_dir, trials, [v.name for v in variants], case.seed)
    alike, ended_after = crash_ends(case, run_dir, trials)
    summary = {
        "case": case.name,
        "kind": case.kind,
        "run_dir": str(run_dir),
        "baseline": a,
        "description": case.description,
        "variants": {v.name: {"description": v.description, **variant_summary(trials, v.name),
                              "crashed_alike": alike[v.name]} for v in variants},
        "comparison": {k: v for k, v in main.items() if k != "variant"},
        "comparisons": comparisons.to_dict("records"),
        "noise_floor": timing.noise_floor(comparisons, case.aa_name) if case.aa else None,
        "quality": quality_summary(run_dir, trials, a, b, None if case.kind == "serve" else case.oracle),
        # where B's intermediate arrays part from A's
        "taps": departure.run_departure(run_dir, trials, a, b, case.capture.get("taps")),
        "determinism": {v.name: determinism(run_dir, trials, v.name) for v in case.variants},
        "ranks": rank_summary(case, run_dir, trials, options.get("only")),
        "compile_cache": None,
        "breakdown": breakdown,
        "attribution": attributed,
        "trials": {"total": len(trials), "ok": sum(t["status"] == "ok" for t in trials), "timeout_s": case.timeout,
                   "failed": [{"index": t["index"], "variant": t["variant"], "status": t["status"], "dir": t["dir"],
                               "ranks": t["ranks"], **({"warmup": t["warmup"]} if "warmup" in t else {}),
                               **{k: t[k] for k in ("missing_hosts", "cut_hosts", "untold_hosts") if k in t}}
                              for t in trials if t["status"] != "ok"],
                   "ended_after_round": ended_after,
                   **({"unreadable_steps": unreadable} if (unreadable := unreadable_steps(trials)) else {})},
        "hangs": run_hangs(run_dir, trials),  # hung trials with traces: where their chips part
        "env": kept,
        "reproduce": reproduce(run_dir, env),
        "interrupted": interrupted,
    }
    summary["compile_cache"] = compile_cache_summary(case, run_dir, trials, summary["variants"])
    # per variant, the step program of its first trial with XLA dumps; bounds where the run's chip is known
    summary["cost"], summary["roofline"] = run_costs(run_dir, summary)
    if case.kind == "serve":  # per-level latency, outputs/min, served quality (perfkit.analysis.serving)
        summary["serve"] = serving.summarize(case, run_dir, trials)
    summary["not_verified"] = not_verified(case, summary)
    return case, summary
