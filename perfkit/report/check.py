"""A run against a committed baseline, the CI regression gate (``perfkit check``: ``perfkit.cli.check``).

A baseline (``reports/baselines/*.json``, written by ``--update-baseline``) keeps what does not depend
on the machine's speed: each B/A step-time ratio with its CI, the output quality of B against A (and
against the oracle), whether each variant's repeats were bit-identical, and whether its ranks compiled
one program. ``check_frame`` compares a run's summary with it, one row per figure:

- devices: a row, passing, only where a side records no devices: the match ``same_setup`` makes was not made;
- timing: the A/A control's row, where the run had one (``--aa``): it fails where the control was called faster or
  slower than the baseline itself, and every timing row is then inconclusive: no timing verdict of such a run is to
  be trusted (its report.md says so); a ratio fails when its whole CI (95%, each look's where the adaptive rounds
  read the verdict more than once: ``look_confidence``) lies above ``baseline x (1 +
  ratio_tolerance)``, so noise alone does not fail it (a wide CI passes; the row says how wide, and where it
  reaches past the limit, that the run could not rule a regression out: ``inconclusive``, as is a row whose
  baseline's own CI reaches past the limit, passing or failing: the gate cannot tell); a serve case's every
  concurrency level too: its latency so, its outputs a minute (higher is better) when the CI lies wholly below
  ``baseline / (1 + ratio_tolerance)``;
- quality: a PSNR fails more than ``psnr_drop_db`` below the baseline's (or below ``min_psnr_db``), the headline
  (the mean over the frames that differ) and the one pooled over all frames;
  outputs that were bit-identical must stay so, unless ``min_psnr_db`` states the floor instead;
- taps: the first layer where B's outputs depart from A's (``summary["taps"]["first"]``) may be none the
  baseline did not have; a baseline's taps are checked again by each run (a run without taps fails the row);
- determinism and rank consistency that held in the baseline must hold (one the baseline recorded as not holding
  passes, one it did not check does not); no trial may fail, whatever the baseline's trials did;
- cost (``perfkit.report.cost_check``): each variant's collectives per step by kind exactly, its FLOPs, HBM bytes,
  bytes sent a device and temp memory within ``cost_tolerance``: compiled programs are deterministic, so
  a collective added to a plan fails the gate even where the timing cannot tell.

Thresholds come from the case's ``check:`` block, then the command's flags.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import pandas as pd

from perfkit.common.comparison import (LEVEL_NOTE, NO_SPREAD, aa_call_text, aa_called, ci_level, ci_name,
                                       compared_variant, level_words, looks, looks_hold,
                                       noise_range, read_once_at_95,
                                       recorded_ci_name, without_ci)
from perfkit.common.json_figures import db_cell, from_json, json_safe
from perfkit.report.cost_check import COST_TOLERANCE, baseline_cost, cost_rows, share_text
from perfkit.report.line import departed_at
from perfkit.errors import BadInput
from perfkit.rundata import case as case_mod, rundir, schema
from perfkit.rundata.baseline import BASELINE_VERSION

# inconclusive: a row that could not tell: a passing one whose CI reaches past its limit (the run could not rule a
# regression out), or a timing row whose baseline's own CI does (the baseline's ratio is no surer than the tolerance)
COLUMNS = ["check", "subject", "unit", "baseline", "current", "ci", "limit", "passed", "inconclusive", "note"]
NOT_RULED_OUT = "passed, not ruled out"
UNSURE_BASELINE = "the baseline's own"  # a timing row's note, where its CI reaches past the row's limit
SERVE_LEVEL = ci_name(0.95, 1)  # a serve level's CI, read once (``perfkit.analysis.serving``)
AA_UNSURE = "not to be trusted: the run's A/A control was called"  # a timing row's note, where it called a change


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """When a row fails (defaults and case keys: ``perfkit.rundata.case.CHECK_KEYS``)."""
    ratio_tolerance: float  # a B/A ratio fails when its CI lies wholly above baseline x (1 + this)
    psnr_drop_db: float  # a PSNR fails when it is more than this below the baseline's
    min_psnr_db: float | None = None  # and, when set, whenever it is below this
    cost_tolerance: float = COST_TOLERANCE  # a step's FLOPs / bytes / temp memory: relative, against the baseline


def run_devices(summary: dict, run_dir: Path | None) -> dict | None:
    """The devices a run ran on: env.json's, as probed; else, for a command case (perfkit probes none), the
    count and processes its case asked for (``asked``: true, no platform)."""
    probed = (summary.get("env") or {}).get("devices")
    if probed or summary.get("kind") != "command" or run_dir is None or not (run_dir / "case.yaml").is_file():
        return probed
    case = case_mod.load(run_dir / "case.yaml")
    return {"count": case.devices, "process_count": case.processes, "platform": None, "asked": True}


def baseline_from_summary(summary: dict, run_dir: Path | None = None) -> dict:
    """What a baseline keeps of a run's summary (see the module docstring); ``run_dir``: where the run's
    case.yaml is (a command case's devices, ``run_devices``)."""
    control = (summary.get("noise_floor") or {}).get("variant")
    env = summary.get("env") or {}
    src = env.get("source") or {}
    q = summary.get("quality")
    quality = None
    if q:
        quality = {"file": q["file"], "psnr_db": q["psnr_db"], "bit_identical": q["bit_identical"],
                   **({"psnr_pooled_db": q["psnr_pooled_db"]} if "psnr_pooled_db" in q else {}),
                   "oracle": {v: o["psnr_db"] for v, o in (q.get("oracle") or {}).get("variants", {}).items()}}
    taps = summary.get("taps")
    serve = (summary.get("serve") or {}).get("comparisons") or []
    return {
        "perfkit_baseline": BASELINE_VERSION,
        "case": summary["case"],
        "baseline_variant": summary["baseline"],
        # the run's name, not its path: a path is one machine's, and the baseline is committed for every checkout
        "from": {"run_dir": Path(summary["run_dir"]).name if summary.get("run_dir") else None,
                 "commit": src.get("commit"), "tree": src.get("tree"), "dirty": src.get("dirty"),
                 "devices": run_devices(summary, run_dir)},
        # with the CI's level where the summary keeps it: the gate names it where the CI reaches past a limit
        "comparisons": [{k: c[k] for k in ("variant", "metric", "ratio", "ci", "look_confidence", "looks_at") if k in c}
                        for c in summary["comparisons"] if c["variant"] != control and c["ratio"] is not None],
        **({"serve": [{"variant": c["variant"], "level": c["level"], "metric": c["metric"], "ratio": c["ratio"],
                       "ci": [c["ci_lo"], c["ci_hi"]]}
                      for c in serve if c["variant"] != control and c["ratio"] is not None]}
           if summary.get("kind") == "serve" else {}),
        "quality": quality,
        "determinism": _determinism(summary),
        "ranks": {v: r["consistent"] for v, r in summary["ranks"].items()},
        "failed_trials": len(summary["trials"]["failed"]),
        "cost": {v: cost for v, cost in baseline_cost(summary).items() if v != control},
        **({"taps": {"variant": taps["b"]["variant"], "first": departed_at(taps)}}
           if taps and "error" not in taps else {}),
    }


def load_baseline(path: str | Path) -> dict:
    """A baseline file, or a run's summary.json used as one."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise BadInput("no such baseline file (write one with --update-baseline)", path=str(path)) from None
    except (OSError, ValueError) as exc:
        raise BadInput(f"not a readable JSON file ({exc})", path=str(path)) from None
    if not isinstance(data, dict):
        raise BadInput("a baseline is a JSON object", path=str(path))
    if "perfkit_baseline" not in data:
        if {"comparisons", "variants", "ranks"} <= data.keys():
            schema.validate(data, "summary", path, f"; `perfkit report {Path(path).parent}` writes it again")
            # --update-baseline refuses such a run: its summary.json, as a baseline, would be the same bargain
            why = not_a_baseline(data, "that run")
            if why:
                raise BadInput(f"a run's summary.json, but {why}", path=str(path), field="interrupted" if data.get(
                    "interrupted") else "trials.failed" if data["trials"]["failed"] else "noise_floor.verdict")
            data = baseline_from_summary(data, Path(path).parent)
            checks_timing(data, path)
            return data
        raise BadInput("neither a perfkit baseline nor a run's summary.json", path=str(path),
                       field="perfkit_baseline")
    schema.validate(data, "baseline", path, "; write one with --update-baseline")
    checks_timing(data, path)
    return data


def incomplete(summary: dict) -> str | None:
    """Why a run is not one to write a baseline from, in words (``had 1 failed or hung trial (trial 6 (b)
    crashed)``, ``was stopped before its plan finished``, or both); None for a complete run."""
    failed = summary["trials"]["failed"]
    reasons = []
    if failed:
        statuses = ", ".join(f"trial {f['index']} ({f['variant']}) {f['status']}" for f in failed)
        reasons.append(f"had {len(failed)} failed or hung trial{'s' * (len(failed) != 1)} ({statuses})")
    if summary.get("interrupted"):
        reasons.append("was stopped before its plan finished")
    return " and ".join(reasons) or None


def not_a_baseline(summary: dict, run: str = "the run") -> str | None:
    """Why no baseline is to be written from a run (``run``: how to name it), in words: it is ``incomplete``, or its
    A/A control called a change (``aa_call_text``: no timing verdict of it is to be trusted, its ratios no more than
    the gate's); None where one is."""
    why, called = incomplete(summary), aa_call_text(summary)
    return "; ".join([f"{run} {why}: a baseline needs a complete run"] * bool(why) + [
        f"{called}: no timing verdict of the run is to be trusted, nor a baseline written from it (run again, on a "
        "quieter machine)"] * bool(called)) or None


def checks_timing(baseline: dict, path: str | Path) -> None:
    """BadInput where a baseline holds no B/A ratio (it would pass any slowdown without a timing row), or one no
    run gives (``_ratios_hold``: a ratio of -1 failed every run, a CI [1.5, 1.2] was taken as it came)."""
    if not baseline["comparisons"] and not baseline.get("serve"):
        raise BadInput("a baseline with no B/A ratio checks no timing: write it from a run that compared its "
                       "variants, with --update-baseline", path=str(path), field="comparisons")
    _ratios_hold([(f"{key}[{i}]", c["ratio"], "ci", c["ci"])
                  for key in ("comparisons", "serve") for i, c in enumerate(baseline.get(key) or [])], path)
    looks_hold({f"comparisons[{i}]": c for i, c in enumerate(baseline["comparisons"])}, path)


def checks_run_ratios(summary: dict, path: Path) -> None:
    """BadInput where a run's summary.json holds a ratio no run gives (``_ratios_hold``): one edited by hand, its CI
    [1.5, 1.2] failed the run as slower and a CI [-1.0, 0.5] passed it as faster. ``path``: the summary.json."""
    remedy = f" (`perfkit report {path.parent}` writes it again)"
    _ratios_hold([(f"comparisons[{i}]", c["ratio"], "ci", c["ci"]) for i, c in enumerate(summary["comparisons"])]
                 + [(f"serve.comparisons[{i}]", c["ratio"], "ci_lo, ci_hi", [c["ci_lo"], c["ci_hi"]])
                    for i, c in enumerate((summary.get("serve") or {}).get("comparisons") or [])], path, remedy)
    looks_hold({f"comparisons[{i}]": c for i, c in enumerate(summary["comparisons"])}, path, remedy)


def _not_finished(run_dir: Path, what: str) -> BadInput:
    """The refusal of a run that has not finished (``what``: what its files hold): its trials are still being
    written, or perfkit was killed before the summary; the gate reads no partial run."""
    return BadInput(f"the run has not finished: {what}: wait for it to end (`{rundir.resume_command(run_dir)}` "
                    "finishes one that was killed before it wrote its summary)", path=str(run_dir))


def finished(run_dir: Path) -> None:
    """BadInput where a run directory (its case.yaml written) has no summary.json yet, or a perfkit is running it (a
    resumed run's summary is its last stop's until it ends): its trials are being written (a multi-host run's in each
    host's part). `perfkit report` would summarize the trials so far, and the gate pass them as the run's."""
    if run_dir.is_dir() and any(rundir.running(p) for p in [run_dir, *rundir.host_parts(run_dir)]):
        raise _not_finished(run_dir, "a perfkit is running it")
    if (run_dir / "summary.json").is_file() or not (run_dir / "case.yaml").is_file():
        return  # (no run directory at all: ``read_summary`` says so)
    parts = [run_dir] if (run_dir / "trials.jsonl").is_file() else rundir.host_parts(run_dir)
    n = sum(len(rundir.read_trials(p)) for p in parts)
    raise _not_finished(run_dir, f"trials.jsonl records {n} trial{'s' * (n != 1)}, no summary.json yet")


def agrees_with_trials(summary: dict, run_dir: Path) -> None:
    """BadInput where the run's trials.jsonl holds other trials than its summary.json counts (the gate reads the
    summary): one written before a resumed run's last trials, or edited, passed a crashed trial. A summary older
    than trials.jsonl is a resumed run's from before it: that run has not finished. A run directory without
    trials.jsonl (a summary kept alone) has nothing to hold it to."""
    trials = run_dir / "trials.jsonl"
    if not trials.is_file():
        return
    recorded = rundir.read_trials(run_dir)
    counted = (summary["trials"]["total"], sorted(f["index"] for f in summary["trials"]["failed"]))
    held = (len(recorded), sorted(t["index"] for t in recorded if t["status"] != "ok"))
    if counted == held:
        return  # (whatever the files' times: a copy, an artifact, may not keep them)
    if trials.stat().st_mtime > (run_dir / "summary.json").stat().st_mtime:
        raise _not_finished(run_dir, f"trials.jsonl records {held[0]} trial{'s' * (held[0] != 1)}, its summary.json "
                                     f"(older) {counted[0]}")

    def failed(indexes: list[int]) -> str:
        return f"trial{'s' * (len(indexes) > 1)} {', '.join(map(str, indexes))} failed" if indexes else "none failed"

    raise BadInput(f"{counted[0]} trial{'s' * (counted[0] != 1)}, {failed(counted[1])}, but {run_dir / 'trials.jsonl'} "
                   f"records {held[0]}, {failed(held[1])}: written before the run's last trials, or edited (`perfkit "
                   f"report {run_dir}` writes it again)", path=str(run_dir / "summary.json"), field="trials")


def _ratios_hold(ratios: list[tuple[str, float | None, str, list | None]], path: str | Path, remedy: str = "") -> None:
    """BadInput unless each ``(entry, ratio, ci field, ci)`` is one a run gives: a ratio of two times or rates is a
    finite number > 0 (or null: a side with no timed trials), its CI a pair low <= high, finite and > 0 (or none:
    no spread measured)."""
    for entry, ratio, ci_field, ci in ratios:
        if ratio is not None and not (math.isfinite(ratio) and ratio > 0):
            raise BadInput(f"{ratio} is not a ratio of two times or rates (a finite number > 0){remedy}",
                           path=str(path), field=f"{entry}.ratio")
        if ci is None or ci == [None, None]:
            continue
        if len(ci) != 2 or None in ci or not all(math.isfinite(x) and x > 0 for x in ci):
            raise BadInput(f"{ci} is not a ratio's CI: [low, high], finite and > 0 (or [null, null]){remedy}",
                           path=str(path), field=f"{entry}.{ci_field}")
        if ci[0] > ci[1]:
            raise BadInput(f"{ci}: its low end is above its high end{remedy}", path=str(path),
                           field=f"{entry}.{ci_field}")


def _devices_text(devices: dict | None, counts_only: bool = False, kinds: bool = False) -> str | None:
    """``4 x cpu`` (``in 2 processes``), with ``kinds`` the chips' kind in place of the platform (``4 x TPU v5
    lite``), or with ``counts_only`` (a side whose case asked for its devices, unprobed) ``4 devices``; None where
    the devices are not known (env.json's probe failed)."""
    if not devices or devices.get("count") is None or (devices.get("platform") is None and not counts_only):
        return None
    processes = devices.get("process_count") or 1
    what = (f"device{'s' * (devices.get('count') != 1)}" if counts_only
            else f"x {devices.get('kind') if kinds else devices.get('platform')}")
    return f"{devices.get('count')} {what}" + (f" in {processes} processes" * (processes > 1))


def _devices_texts(devices: list[dict | None]) -> list[str | None]:
    """Each side's ``_devices_text``, by kind where both sides record one (a v5e's ratios are not a v5p's, both
    ``tpu``), by platform where one does not (a hand-written ``from``)."""
    counts_only = any((d or {}).get("asked") for d in devices)
    kinds = all((d or {}).get("kind") for d in devices)
    return [_devices_text(d, counts_only, kinds) for d in devices]


def same_setup(baseline: dict, summary: dict, path: str | Path, run_dir: Path | None = None) -> None:
    """BadInput unless the run is the baseline's kind of run: its case, the variant its ratios divide by, and
    its devices (the ratios, collectives and costs of 2 chips say nothing about 4, nor a v5e's about a v5p's; a
    command case's, unprobed, as its case asked: ``run_devices``)."""
    devices = [(baseline.get("from") or {}).get("devices"), run_devices(summary, run_dir)]
    pairs = [("case", baseline["case"], summary["case"], "a baseline of case {!r}, but the run is of {!r}"),
             ("baseline_variant", baseline.get("baseline_variant"), summary["baseline"],
              "a baseline whose ratios are against {!r}, but the run's are against {!r}"),
             ("from.devices", *_devices_texts(devices),
              "a baseline run on {}, but the run ran on {}")]
    for field, base, current, words in pairs:
        if None not in (base, current) and base != current:
            raise BadInput(words.format(base, current) + " (compare like with like, or write this run's baseline "
                           "with --update-baseline)", path=str(path), field=field)
    if summary.get("kind") == "serve" and "serve" not in baseline:
        raise BadInput("a serve case's baseline without its levels' latency and outputs a minute (written before "
                       "they were kept, it would gate the single request's latency alone): write it again with "
                       "--update-baseline", path=str(path), field="serve")


def _devices_rows(baseline: dict, summary: dict, run_dir: Path | None) -> list[dict]:
    """A row, passing, where a side records no devices, so ``same_setup`` compared none: a baseline without
    ``from`` (hand-written, or cut down) skipped the device match with nothing said. None where both are known:
    ``same_setup`` matched them, and refuses a mismatch."""
    devices = [(baseline.get("from") or {}).get("devices"), run_devices(summary, run_dir)]
    base, current = _devices_texts(devices)
    if None not in (base, current):
        return []
    reasons = []
    for side, text, d in (("the baseline", base, devices[0]), ("this run", current, devices[1])):
        if text is None:
            error = (d or {}).get("error")
            reasons.append(f"{side} records no devices" + (
                f" ({error})" if error else " (no \"from\")" if side == "the baseline" and "from" not in baseline
                else ""))
    return [{"check": "devices", "subject": "the devices the run ran on, against the baseline's", "unit": "",
             "baseline": base, "current": current, "limit": None, "passed": True,
             "note": "; ".join(reasons) + ": the device match was not checked"}]


_TWO_PROCESSES = "outputs a minute need two processes a side: server_restarts >= 2"
SERVE_NO_CI = f"no CI: a side had too few server processes or requests to measure the spread ({_TWO_PROCESSES})"


def _higher_is_better(subject: str) -> bool:
    """A timing row of outputs a minute (a serve case's level), where more is better: its limit is a floor."""
    return re.search(r" outputs_per_min at concurrency \d+$", subject) is not None


def _timing_row(subject: str, base: float, current: dict | None, th: Thresholds, no_ci: str = NO_SPREAD,
                no_ratio: str | None = None) -> dict:
    """A B/A ratio against the baseline's: ``current`` the run's ``{ratio, ci}`` (None: not in this run; its ratio
    None: ``no_ratio`` says why, else ``_no_ratio``'s plain note). A time fails where its whole CI lies above
    baseline x (1 + ratio_tolerance); outputs a minute, where it lies below baseline / (1 + ratio_tolerance): the
    same tolerance on the inverse ratio, a time per output."""
    tol, higher, limit = th.ratio_tolerance, _higher_is_better(subject), _limit(subject, base, th)
    row = {"check": "timing", "subject": subject, "unit": "ratio", "baseline": base, "limit": limit}
    if current is None or without_ci(current):
        return {**row, "current": None if current is None else current["ratio"], "passed": False,
                "note": "not in this run" if current is None else no_ratio or _no_ratio()
                if current["ratio"] is None else no_ci}
    lo, hi = current["ci"]
    n = ci_decimals(current["ci"], limit)
    # each look's level where the adaptive rounds read the verdict more than once: higher than 95%, and wider
    level, n_looks = ci_level(current), looks(current)
    # the limit's making, where a case's own tolerance (the demo's 1.0) lets a ratio far past the baseline pass
    note = (f"limit: the baseline {'/' if higher else 'x'} {1 + tol:g} (ratio_tolerance {tol:g}); "
            f"{ci_name(level, n_looks)} [{lo:.{n}f}, {hi:.{n}f}]")
    passed = hi >= limit if higher else lo <= limit
    if higher and not passed:
        note += " lies below the limit: fewer outputs a minute than the baseline"
    elif higher and lo > base * (1 + tol):
        note += " lies above the baseline's tolerance: more outputs a minute (consider --update-baseline)"
    elif not passed:
        note += " lies above the limit: slower than the baseline"
    elif not higher and hi < base * (1 - tol):
        note += " lies below the baseline's tolerance: faster (consider --update-baseline)"
    # The gate fails only a regression the CI shows; a CI wide enough to hold one passes, and says so: a 3.4x
    # slower B passed on a CI of [0.61, 12.9] with nothing in its row to tell it from a clean pass.
    reach = lo if higher else hi
    inconclusive = passed and (reach < limit if higher else reach > limit)
    if inconclusive:
        note += (f"; {NOT_RULED_OUT}: CI reaches {reach:.{n}f}, {'below' if higher else 'above'} the limit "
                 f"{limit:.{n}f}; more repeats would tell")
    return {**row, "current": current["ratio"], "ci": [lo, hi], "passed": passed, "inconclusive": inconclusive,
            "note": note, "ci_level": (level, n_looks)}


def _no_ratio(variants: tuple[str, ...] = (), left_out: dict[str, str] | None = None) -> str:
    """A timing row's note where a side has no timed trials: which side the run's ``--only`` left out, where it
    did."""
    return f"no ratio ({rundir.left_out_text(variants, left_out) or 'a side has no timed trials'})"


def _timing_rows(baseline: dict, summary: dict, th: Thresholds, left_out: dict[str, str] | None = None) -> list[dict]:
    """The step-time ratios, then a serve case's every level: its latency and outputs a minute. ``left_out``: the
    variants the run's ``--only`` left out (``rundir.left_out``)."""
    a = summary["baseline"]
    current = {(c["variant"], c["metric"]): c for c in summary["comparisons"]}
    rows = [_unsure_baseline(_timing_row(f"{base['variant']}/{a} {base['metric']}", base["ratio"],
                                         current.get((base["variant"], base["metric"])), th,
                                         no_ratio=_no_ratio((a, base["variant"]), left_out)),
                             base["ci"], recorded_ci_name(base))
            for base in baseline["comparisons"]]
    levels = {(c["variant"], c["level"], c["metric"]): {"ratio": c["ratio"], "ci": [c["ci_lo"], c["ci_hi"]]}
              for c in (summary.get("serve") or {}).get("comparisons") or []}
    for base in baseline.get("serve") or []:
        subject = f"{base['variant']}/{a} {base['metric']} at concurrency {base['level']}"
        mine = levels.get((base["variant"], base["level"], base["metric"]))
        if mine is not None and mine["ratio"] is not None and without_ci(mine) and None in base["ci"]:
            # neither run measured its spread (one server process a side): nothing to gate, said, as ranks that
            # neither run checked; a baseline that measured it fails a run that did not (_timing_row)
            rows.append({"check": "timing", "subject": subject, "unit": "ratio", "baseline": base["ratio"],
                         "current": mine["ratio"], "limit": None, "passed": True,
                         "note": f"not checked: neither run measured its spread ({_TWO_PROCESSES})"})
            continue
        rows.append(_unsure_baseline(_timing_row(subject, base["ratio"], mine, th, SERVE_NO_CI,
                                                 _no_ratio((a, base["variant"]), left_out)), base["ci"], SERVE_LEVEL))
    return rows


def _aa_rows(summary: dict) -> list[dict]:
    """The A/A control's row, where the run had one: it fails where the control was called faster or slower than
    the baseline itself (``aa_called``), whose run drifted between its trials, or drew a false call."""
    nf = summary.get("noise_floor")
    if not nf:
        return []
    called = aa_call_text(summary)
    spread = "no CI" if None in (nf["ci"] or [None]) else noise_range(nf)
    return [{"check": "timing", "subject": f"{nf['variant']}/{summary['baseline']} step_ms, the A/A control",
             "unit": "", "baseline": None, "current": nf["verdict"], "limit": "neither faster nor slower",
             "passed": called is None,
             "note": f"{called}; no timing verdict of this run is to be trusted: run again, on a quieter machine"
             if called else f"A/A {'-' if nf['ratio'] is None else format(nf['ratio'], '.3f')}, {spread}"}]


def _aa_unsure(row: dict, called: str) -> dict:
    """A timing row of a run whose A/A control called a change: inconclusive whatever its verdict, which stands (the
    gate fails on the A/A row), as a row against an unsure baseline; one the run did not measure fails as it was."""
    if "ci" not in row:
        return row
    return {**row, "inconclusive": True, "note": f"{row['note']}; {AA_UNSURE} {called} than the baseline itself"}


def _unsure_baseline(row: dict, base_ci: list[float | None], named: str) -> dict:
    """``row`` saying so where the baseline's own CI (``named``: with its level) reaches past the row's limit: the
    limit is the baseline's ratio alone, and a baseline run no surer than the tolerance fails an equal run by chance
    (two equal variants read 0.865 [0.845, 1.098] over 4 rounds, and 12 rounds of the same, 0.999 [0.961, 1.029],
    failed its limit 0.952)."""
    if not _reaches_past(row["subject"], base_ci, row["limit"]):
        return row
    n = ci_decimals(base_ci, row["limit"])
    # The gate cannot tell either way: inconclusive whatever the verdict, which stands (a failing row still fails:
    # the remedy, a surer baseline, is the same), so that a script and the step summary see it, not the note alone.
    return {**row, **({"inconclusive": True} if "ci" in row else {}),  # (a row the run measured: else no CI to tell)
            "note": f"{row['note']}; {UNSURE_BASELINE} {named} [{base_ci[0]:.{n}f}, {base_ci[1]:.{n}f}] reaches "
                    f"past the limit {row['limit']:.{n}f}: its ratio is no surer than the tolerance (write the "
                    "baseline from a run whose CI is narrower: docs/ci.md)"}


def _limit(subject: str, base: float, th: Thresholds) -> float:
    """A timing row's limit: the baseline's ratio x (1 + ratio_tolerance); outputs a minute, where more is better,
    / (1 + ratio_tolerance), a floor."""
    return base / (1 + th.ratio_tolerance) if _higher_is_better(subject) else base * (1 + th.ratio_tolerance)


def _apart_decimals(figures: list, limit, at_least: int, most: int = 6) -> int:
    """The fewest decimals, ``at_least`` or more, with which each of ``figures`` shown lies on the side of ``limit``
    shown that it lies on (a low end of 1.10004 failed the limit 1.1, both shown 1.100); ``at_least`` where there is
    no finite limit (figures that are no finite number left out)."""
    if not _is_number(limit):
        return at_least
    figures = [x for x in figures if _is_number(x)]

    def apart(n: int) -> bool:
        shown = float(f"{limit:.{n}f}")
        return all((float(f"{x:.{n}f}") > shown) == (x > limit) and (float(f"{x:.{n}f}") < shown) == (x < limit)
                   for x in figures)
    return next((n for n in range(at_least, most + 1) if apart(n)), most)


def ci_decimals(ci: list[float | None] | None, limit: float | None) -> int:
    """The decimals, 3 or more, a ratio's CI and its limit are shown with: each end on its side of the limit."""
    return _apart_decimals(ci if isinstance(ci, list) else [], limit, 3)


def _db_decimals(r) -> int:
    """The decimals, 2 or more, a PSNR row's figures are shown with: the figure on its side of the limit."""
    return _apart_decimals([r.current], r.limit, 2)


def _reaches_past(subject: str, ci: list[float | None], limit: float) -> bool:
    """Whether a CI reaches past a timing row's limit (below a floor of outputs a minute, above a time's)."""
    if None in ci:
        return False
    return ci[0] < limit if _higher_is_better(subject) else ci[1] > limit


def unsure_notes(baseline: dict, th: Thresholds) -> list[str]:
    """A line for each ratio of a baseline (as ``--update-baseline`` writes it) whose own CI reaches past the limit
    it sets under ``th``: a check against it cannot tell (``_unsure_baseline``), said where it is written."""
    a = baseline["baseline_variant"]
    ratios = [(f"{c['variant']}/{a} {c['metric']}", c, recorded_ci_name(c)) for c in baseline["comparisons"]] + [
        (f"{c['variant']}/{a} {c['metric']} at concurrency {c['level']}", c, SERVE_LEVEL)
        for c in baseline.get("serve") or []]
    notes = []
    for subject, c, named in ratios:
        limit = _limit(subject, c["ratio"], th)
        if _reaches_past(subject, c["ci"], limit):
            n = ci_decimals(c["ci"], limit)
            notes.append(f"{subject}: its {named} [{c['ci'][0]:.{n}f}, {c['ci'][1]:.{n}f}] reaches past the limit "
                         f"{limit:.{n}f} this baseline sets (ratio_tolerance {th.ratio_tolerance:g}): a check against "
                         "it cannot tell a regression from its noise (docs/ci.md); a run of more repeats narrows it")
    return notes


def _psnr_row(subject: str, base, current, th: Thresholds) -> dict:
    """A PSNR that may drop ``psnr_drop_db`` below the baseline's and never below ``min_psnr_db``."""
    base, current = from_json(base), from_json(current)
    # An infinite baseline (bit-identical outputs) gives no relative limit; the floor alone applies.
    relative = base - th.psnr_drop_db if base is not None and math.isfinite(base) else None
    limits = [x for x in (relative, th.min_psnr_db) if x is not None]
    limit = max(limits) if limits else None
    passed = current is not None and (limit is None or current >= limit)
    notes = [] if current is not None else ["not measured in this run"]
    if current is not None and not passed:  # by how much, against the limit that failed it
        drop = base - current if limit == relative else th.min_psnr_db - current
        allowed = th.psnr_drop_db if limit == relative else 0.0
        drop = f"{drop:.{_apart_decimals([drop], allowed, 2)}f}"  # past what is allowed, as shown
        notes.append(f"{drop} dB below the baseline's (psnr_drop_db {th.psnr_drop_db:g})"
                     if limit == relative else f"{drop} dB below min_psnr_db")
    if current is not None and base is None and limit is None:  # (nothing held it: passing silently read as held)
        notes.append("the baseline has no figure to hold this one to (its run measured none): only min_psnr_db "
                     "would")
    if current is not None and base == math.inf and relative is None and limit is not None:
        notes.append("the baseline's outputs were bit-identical: no drop from inf to hold, so the floor alone "
                     "applies (min_psnr_db, in place of bit-identity)")
    return {"check": "quality", "subject": subject, "unit": "dB", "baseline": base, "current": current,
            "limit": limit, "passed": passed, "note": "; ".join(notes)}


def _quality_rows(baseline: dict, summary: dict, th: Thresholds, left_out: dict[str, str] | None = None) -> list[dict]:
    """``left_out``: the variants the run's ``--only`` left out (``rundir.left_out``), which a row of no outputs
    names."""
    base, q = baseline.get("quality"), summary.get("quality")
    a = summary["baseline"]
    b = compared_variant(summary)
    if base is None:
        return [] if q is None or th.min_psnr_db is None else [_psnr_row(f"PSNR {b} vs {a}", None, q["psnr_db"], th)]
    if q is None:
        why = rundir.left_out_text((a, b), left_out)
        return [{"check": "quality", "subject": f"outputs {b} vs {a}", "unit": "", "baseline": base["file"],
                 "current": None, "limit": None, "passed": False,
                 "note": "no comparable outputs in this run" + (f" ({why})" if why else "")}]
    rows = []
    # A stated PSNR floor replaces bit-identity: summation order may differ between machines.
    if base["bit_identical"] and th.min_psnr_db is None:
        rows.append({"check": "quality", "subject": f"outputs {b} vs {a} bit-identical", "unit": "bool",
                     "baseline": True, "current": q["bit_identical"], "limit": True,
                     "passed": q["bit_identical"] is True, "note": ""})
    if not base["bit_identical"] or th.min_psnr_db is not None:
        # The headline is the mean over the frames that differ: the same error spread to more frames leaves it
        # where it was, and only the PSNR of the MSE pooled over all frames drops (bit-identical: the row above).
        # A baseline from before it has no pooled figure.
        pooled = from_json(base.get("psnr_pooled_db"))
        psnr_rows = [_psnr_row(f"PSNR {b} vs {a} ({q['file']})", base["psnr_db"], q["psnr_db"], th)]
        if pooled is not None:
            psnr_rows.append(_psnr_row(f"PSNR {b} vs {a} pooled over the frames ({q['file']})", pooled,
                                       q.get("psnr_pooled_db"), th))
        moved = f"the baseline's headline output was {base['file']}" if q["file"] != base["file"] else ""
        for row in psnr_rows:
            row["note"] = "; ".join(filter(None, [row["note"], moved]))
        rows += psnr_rows
    oracle = (q.get("oracle") or {}).get("variants", {})
    for v, psnr in base.get("oracle", {}).items():
        rows.append(_psnr_row(f"PSNR {v} vs oracle", psnr, (oracle.get(v) or {}).get("psnr_db"), th))
    return rows


def _taps_rows(baseline: dict, summary: dict, left_out: dict[str, str] | None = None) -> list[dict]:
    """The first tap where B departs from A: none the baseline did not have (nor the baseline's own: where
    it recorded none, this run's must hold as well, and a run without taps has not checked it). ``left_out``: the
    variants the run's ``--only`` left out (``rundir.left_out``), which a row of no taps names."""
    base, taps = baseline.get("taps"), summary.get("taps")
    if base is None and (not taps or "error" in taps):  # nothing the baseline held to check again
        return []
    b = (base or {}).get("variant") or compared_variant(summary)
    subject = f"{b}: first tap departing from {summary['baseline']}"
    if not taps or "error" in taps:
        # a variant that ran no trial (--only) compared none, whatever the case's capture.taps
        idle = [v for v in (summary["baseline"], b) if (summary["variants"].get(v) or {}).get("trials", 1) == 0]
        said = "; ".join(f"{v}: {(left_out or {}).get(v) or 'ran no trial'}" for v in idle)
        note = taps["error"] if taps else "no taps in this run (the case's capture.taps)" if not idle else \
            f"no taps compared in this run ({said})" if set(idle) & set(left_out or {}) else \
            f"no taps compared in this run: {' and '.join(idle)} ran no trial"
        return [{"check": "taps", "subject": subject, "unit": "", "baseline": base["first"], "current": None,
                 "limit": "taps", "passed": False, "note": note}]
    current, allowed = departed_at(taps), (base or {}).get("first", "none")
    return [{"check": "taps", "subject": subject, "unit": "", "baseline": (base or {}).get("first"),
             "current": current, "limit": "none" if allowed == "none" else f"none, or {allowed}",
             "passed": current in ("none", allowed),
             "note": "" if current == "none" else "the report's Quality section: First departure"}]


def _determinism(summary: dict) -> dict[str, bool | None]:
    """Each variant's repeats bit-identical, or None where it had one good run: nothing compared (a one-run
    baseline had recorded it as held, and a one-run check passed it). The run count is read, not only
    ``bit_identical``: summaries from before it said True of one run."""
    return {v: d["bit_identical"] if d["runs"] >= 2 else None
            for v, d in (summary.get("determinism") or {}).items() if d}


def _held_rows(check: str, baseline: dict[str, bool | None], current: dict[str, bool | None], what: str,
               why: dict[str, str] | None = None, failed_why: dict[str, str] | None = None) -> list[dict]:
    """A property each variant had in the baseline (True) must still hold. One the baseline recorded False is no
    regression (divergent ranks, repeats that differ, by design) and passes, shown; False where the baseline
    did not check it fails: nothing accepted it. ``why``: where given, why this run checked a variant's not
    (the rank check's ``checked``), and a row, passing, for one neither run checked. ``failed_why``: what a
    variant's failing row adds (which ranks went their own way)."""
    rows = []
    for v in dict.fromkeys([*baseline, *current]):
        base, cur = baseline.get(v), current.get(v)
        reason = re.sub(r"^not checked:? *", "", (why or {}).get(v) or "").strip("()")  # said once, not twice
        unchecked = "not checked in this run" + (f" ({reason})" if reason else "")
        if why is not None and base is None and cur is None:
            rows.append({"check": check, "subject": f"{v}: {what}", "unit": "bool", "baseline": None,
                         "current": None, "limit": None, "passed": True, "note": unchecked})
            continue
        if base is not True and cur is not False:
            continue
        row = {"check": check, "subject": f"{v}: {what}", "unit": "bool", "baseline": base, "current": cur}
        if base is False:
            rows.append({**row, "limit": None, "passed": True, "note": "no in the baseline too: not a regression"})
            continue
        note = (unchecked if cur is None else "not checked in the baseline: nothing there accepted it"
                if base is None else "")
        if cur is False and (failed_why or {}).get(v):
            note = "; ".join(x for x in (note, failed_why[v]) if x)
        rows.append({**row, "limit": True, "passed": cur is True, "note": note})
    return rows


def _divergence(ranks: dict) -> str:
    """Which ranks compiled another program, and where to look: a failing ranks row's note ("" where the rank
    check did not say)."""
    odd = ranks.get("divergent_ranks") or []
    if not odd:
        return ""
    groups = " / ".join(", ".join(map(str, g)) for g in ranks.get("groups") or [])
    where = f", `perfkit hlo-diff` on {ranks['trial']}" if ranks.get("trial") else ""
    return (f"rank{'s' * (len(odd) > 1)} {', '.join(map(str, odd))} compiled another program "
            f"(programs by rank: {groups}; the report's Rank consistency{where})")


def check_frame(baseline: dict, summary: dict, th: Thresholds, run_dir: Path | None = None) -> pd.DataFrame:
    """One row per compared figure (``COLUMNS``); ``passed`` False marks a regression. ``run_dir``: where the
    run's case.yaml is (a command case's devices, ``run_devices``)."""
    failed = summary["trials"]["failed"]
    statuses = ", ".join(f"trial {f['index']} ({f['variant']}) {f['status']}" for f in failed)
    # Any failed trial fails, whatever the baseline's: its figures are missing, and a hang is a hang. A baseline
    # file without the count has none: --update-baseline has always refused a run with failed trials.
    rows = [{"check": "trials", "subject": "failed or hung trials", "unit": "count",
             "baseline": baseline.get("failed_trials", 0), "current": len(failed), "limit": 0,
             "passed": not failed, "note": statuses}]
    if failed and rows[0]["baseline"]:
        rows[0]["note"] += "; the baseline's failed trials excuse none"
    # A row of its own: on the count's row a stopped run read "failed or hung trials: 0 (... required 0)", FAIL.
    if summary.get("interrupted"):
        rows.append({"check": "trials", "subject": "the run finished its plan", "unit": "bool", "baseline": True,
                     "current": False, "limit": True, "passed": False,
                     "note": "the run was stopped before its plan finished (Ctrl-C, SIGTERM): the trials it did not "
                             "run are missing from its figures (`perfkit run --resume` finishes it)"})
    rows += _devices_rows(baseline, summary, run_dir)
    left_out = rundir.left_out(summary, run_dir)
    timing = _timing_rows(baseline, summary, th, left_out)
    if called := aa_called(summary):
        timing = [_aa_unsure(r, called) for r in timing]
    rows += _aa_rows(summary) + timing
    rows += _quality_rows(baseline, summary, th, left_out)
    rows += _taps_rows(baseline, summary, left_out)
    determinism = _determinism(summary)
    once = {v: "one good run: nothing to compare, at least two repeats check it"
            for v, d in (summary.get("determinism") or {}).items() if d and d["runs"] < 2}
    once |= {v: f"{v} ran no trial" for v, s in summary["variants"].items() if s.get("trials", 1) == 0} | left_out
    rows += _held_rows("determinism", baseline["determinism"], determinism, "repeats bit-identical", once)
    rows += _held_rows("ranks", baseline["ranks"], {v: r["consistent"] for v, r in summary["ranks"].items()},
                       "one program on every rank", {v: r.get("checked") or "" for v, r in summary["ranks"].items()},
                       {v: _divergence(r) for v, r in summary["ranks"].items()})
    rows += cost_rows(baseline, summary, th.cost_tolerance)
    # object: a column of numbers and nulls would read as floats (a count of 0 shown 0.000, a null as NaN)
    # ``ci``: a timing row's, the run's CI its verdict is decided on (a script reads it, not the note's text), at the
    # level its note gives; the step summary's cells give it too (``attrs["levels"]``: by row, its level and looks)
    frame = pd.DataFrame([{"inconclusive": False, "ci": None, **r} for r in rows], columns=COLUMNS, dtype=object)
    frame.attrs["levels"] = {i: r["ci_level"] for i, r in enumerate(rows) if "ci_level" in r}
    frame["passed"] = frame["passed"].astype(bool)
    frame["inconclusive"] = frame["inconclusive"].astype(bool)
    return frame


def _cell(x, unit: str, decimals: int = 2) -> str:
    if x is None and unit == "bool":  # a consistency or bit-identity null: the run did not check it
        return "not checked"
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if unit == "bool":
        return "yes" if x else "no"
    if unit == "dB":  # (decimals: a PSNR row's, ``_db_decimals``)
        return f"{db_cell(x) if decimals == 2 or not _is_number(from_json(x)) else f'{x:.{decimals}f}'} dB"
    if unit in ("bytes", "FLOPs"):  # whole, as counted: a change of a few bytes shows beside its percentage
        return f"{x:.0f}" + (" B" if unit == "bytes" else "")
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _figure_cell(r) -> str:
    """The run's figure; a PSNR's with the decimals that set it apart from its limit (``_db_decimals``)."""
    return _cell(r.current, r.unit, _db_decimals(r) if r.unit == "dB" else 2)


def _baseline_cell(r) -> str:
    """The baseline's figure; a ratio's with the decimals, 3 or more, it takes for its limit shown beside it to
    follow from it (1.65364 x 2 = 3.307 read "1.654", which doubles to 3.308)."""
    if r.unit != "ratio" or not _is_number(r.limit) or not _is_number(r.baseline) or not r.baseline:
        return _cell(r.baseline, r.unit, _db_decimals(r) if r.unit == "dB" else 2)
    decimals = ci_decimals(r.ci, r.limit)
    factor, limit = r.limit / r.baseline, f"{r.limit:.{decimals}f}"
    n = next((n for n in range(3, 7) if f"{float(f'{r.baseline:.{n}f}') * factor:.{decimals}f}" == limit), 6)
    return f"{r.baseline:.{n}f}"


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _rule(r) -> str:
    """What a row requires, in words: the limit and its direction."""
    if r.limit is None or (isinstance(r.limit, float) and math.isnan(r.limit)):
        return "-"
    if r.unit == "ratio" and _higher_is_better(r.subject):
        return f"CI high end >= {r.limit:.{ci_decimals(r.ci, r.limit)}f}"
    rules = {"ratio": lambda x: f"CI low end <= {x:.{ci_decimals(r.ci, r.limit)}f}",
             "dB": lambda x: f">= {_cell(x, 'dB', _db_decimals(r))}",
             "bool": lambda x: "yes", "bytes": lambda x: f"within {share_text(x)}",
             "FLOPs": lambda x: f"within {share_text(x)}"}
    return rules.get(r.unit, str)(r.limit)


def text_lines(frame: pd.DataFrame) -> list[str]:
    """One line per row: ``ok`` or ``FAIL``, the figure, its baseline and rule, the note."""
    return [f"{'ok  ' if r.passed else 'FAIL'} {r.check:<11} {r.subject}: {_figure_cell(r)} (baseline "
            f"{_baseline_cell(r)}; required {_rule(r)})" + (f"; {r.note}" if r.note else "")
            for r in frame.itertuples()]


def _md(text: str) -> str:
    """A table cell: a "|" or a line end in a name the user's program chose (a tap, an output file) would end the
    cell or the row."""
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _aa_unsure_rows(frame: pd.DataFrame) -> pd.Series:
    """The inconclusive rows of a run whose A/A control called a change."""
    return frame.inconclusive & frame.note.str.contains(AA_UNSURE, regex=False)


def _unsure_baseline_rows(frame: pd.DataFrame) -> pd.Series:
    """The inconclusive rows whose baseline's own CI reaches past their limit, the run's A/A control having called
    no change (the rest: the run's CI did)."""
    return frame.inconclusive & frame.note.str.contains(UNSURE_BASELINE, regex=False) & ~_aa_unsure_rows(frame)


def not_ruled_out(frame: pd.DataFrame) -> str:
    """What the inconclusive rows could not tell, counted, with the remedy: ``2 rows could not tell: the run's A/A
    control called a change (...)``, ``1 row could not rule a regression out: more repeats would tell``, ``1 row
    could not tell: its baseline's CI reaches past its limit (...)``, joined by "; ", or "" where every row
    could tell."""
    aa, unsure = _aa_unsure_rows(frame), _unsure_baseline_rows(frame)
    k, m = int(aa.sum()), int(unsure.sum())
    n = int(frame.inconclusive.sum()) - k - m
    return "; ".join(
        [f"{k} row{'s' * (k != 1)} could not tell: the run's A/A control called a change (run again, on a quieter "
         "machine)"] * bool(k)
        + [f"{n} row{'s' * (n != 1)} could not rule a regression out: more repeats would tell"] * bool(n)
        + [f"{m} row{'s' * (m != 1)} could not tell: {'its' if m == 1 else 'their'} baseline's CI reaches past "
           f"{'its' if m == 1 else 'their'} limit (write the baseline from more repeats)"] * bool(m))


def markdown(frame: pd.DataFrame, case: str, run_line: str) -> list[str]:
    """The GitHub step summary: the verdict, the run's summary line, and the rows as a table."""
    failed, unsure, unsure_baseline = int((~frame.passed).sum()), not_ruled_out(frame), _unsure_baseline_rows(frame)
    aa = _aa_unsure_rows(frame)
    verdict = (f"**failed**: {failed} of {len(frame)} rows" if failed else f"passed ({len(frame)} rows)") + (
        f"; **{unsure}**" if unsure else "")
    levels = frame.attrs.get("levels") or {}  # (a frame made elsewhere has none: 95%, read once)
    once = all(read_once_at_95(*x) for x in levels.values())
    marks = [f"**{'ok' if r.passed else 'FAIL'}, A/A control called a change**" if aa[i]
             else f"**{'ok' if r.passed else 'FAIL'}, baseline unsure**" if unsure_baseline[i]
             else "**ok, not ruled out**" if r.inconclusive else "ok" if r.passed else "**FAIL**"
             for i, r in zip(frame.index, frame.itertuples())]
    return [f"### perfkit check, {case}: {verdict}", "", run_line, "",
            f"| | check | figure | this run | {'95% ' * once}CI | baseline | required | note |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
            *(f"| {mark} | {r.check} | {_md(r.subject)} | {_md(_figure_cell(r))} | "
              f"{_ci_cell(r, None if once else levels.get(i))} | {_md(_baseline_cell(r))} | {_md(_rule(r))} | "
              f"{_md(r.note)} |"
              for mark, i, r in zip(marks, frame.index, frame.itertuples())), "",
            *([f"CI: the run's at its level: {LEVEL_NOTE}.", ""] if not once else [])]


def _ci_cell(r, level: tuple[float, int] | None) -> str:
    """A timing row's CI, the figure its verdict is decided on, as its note gives it, with its ``level`` and looks
    where given (the table's are not all 95% read once); "-" on a row with none."""
    if not isinstance(r.ci, list):
        return "-"
    n = ci_decimals(r.ci, r.limit)
    return f"[{r.ci[0]:.{n}f}, {r.ci[1]:.{n}f}]" + (f" {level_words(*level)}" if level else "")


def thresholds_for(run_dir: Path, **flags) -> Thresholds:
    """The case's ``check:`` thresholds with the flags that were given laid over them."""
    if not (run_dir / "case.yaml").is_file():  # (a summary.json kept alone: its thresholds went with the case)
        raise BadInput("no such file: the gate's thresholds are the run's case's (its check: block, else the "
                       "defaults); keep case.yaml beside summary.json", path=str(run_dir / "case.yaml"))
    values = dict(case_mod.load(run_dir / "case.yaml").check)
    values.update({k: v for k, v in flags.items() if v is not None})
    return Thresholds(**values)


def write_baseline(path: Path, run_dir: Path, summary: dict) -> dict:
    """The baseline of a complete run whose A/A control, where it had one, called no change (``not_a_baseline``),
    written to ``path`` and returned."""
    why = not_a_baseline(summary)
    if why:
        raise BadInput(why, path=str(run_dir))
    baseline = baseline_from_summary(summary, run_dir)
    checks_timing(baseline, run_dir)  # (a run of one variant, --only: it compared nothing)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(json_safe(baseline), indent=2) + "\n")
    return baseline
