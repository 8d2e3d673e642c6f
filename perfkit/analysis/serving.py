"""A serve run's figures as tidy frames: every request, then per server process and level, pooled per
variant and level, B/A ratios per level, and the served outputs' quality per prompt.

Conventions (stated in the report): latency is measured at the client, from sending a request to
holding its output, over the requests that returned an output; outputs per minute of one server process
at one level are its good measured outputs over the span from the first measured request's start to the
last one's end; a pooled row takes its latency percentiles over the pooled requests of the variant's good
server processes and its outputs per minute as their median (min and max alongside; the reference PR's
"mean of two server processes" is the same figure for two), the figure its B/A ratio divides.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from perfkit.analysis import stats
from perfkit.errors import BadInput
from perfkit.quality.compare import codec_floor, compare, headline
from perfkit.quality.media import open_media, output_files, parse_codec
from perfkit.rundata import rundir
from perfkit.rundata.case import Case

REQUEST_COLUMNS = ["trial", "variant", "round", "trial_status", "level", "phase", "index", "prompt", "seed",
                   "worker", "start_s", "end_s", "latency_ms", "status", "ok", "error", "timed_out", "output",
                   "sha256"]
PROCESS_COLUMNS = ["variant", "trial", "trial_status", "level", "sent", "ok", "failed", "latency_p50_ms",
                   "latency_p90_ms", "latency_max_ms", "outputs_per_min", "span_s"]
FAILED_KEPT = 50  # failed requests listed in the summary (all are counted)
SERVED_FIGURES = ("psnr_db", "psnr_pooled_db", "psnr_min_db", "bit_identical", "max_abs_diff")  # per served output


def requests_frame(run_dir: Path, trials: list[dict]) -> pd.DataFrame:
    """One row per request of every trial (``requests.jsonl`` of each server process)."""
    rows = []
    for t in trials:
        path = run_dir / t["dir"] / t.get("serve", {}).get("requests", "rank0/requests.jsonl")
        lines = path.read_text().splitlines() if path.is_file() else []
        for line in lines:
            try:
                r = json.loads(line)
            except ValueError:  # a torn last line of a killed perfkit
                continue
            rows.append({"trial": t["index"], "variant": t["variant"], "round": t["round"],
                         "trial_status": t["status"], **r})
    return pd.DataFrame(rows, columns=REQUEST_COLUMNS).astype({"ok": bool, "timed_out": bool, "status": "Int64"})


def _good_measured(requests: pd.DataFrame) -> pd.DataFrame:
    """The measured requests that returned an output, of server processes that finished ok: what pooled
    latencies and their ratios are taken over."""
    return requests[requests.ok & (requests.phase == "measured") & (requests.trial_status == "ok")]


def _percentiles(latency_ms: np.ndarray) -> tuple[float, float, float]:
    """p50, p90 and max of some latencies; NaN each when there are none."""
    return tuple(np.percentile(latency_ms, [50, 90, 100])) if latency_ms.size else (np.nan,) * 3


def per_process(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per (variant, server process, level) over its measured requests."""
    rows = []
    measured = requests[requests.phase == "measured"]
    for (variant, trial, level), g in measured.groupby(["variant", "trial", "level"], sort=False):
        good = g.latency_ms[g.ok].to_numpy()
        span = float(g.end_s.max() - g.start_s.min())
        rows.append((variant, trial, g.trial_status.iloc[0], level, len(g), int(good.size), int(len(g) - good.size),
                     *_percentiles(good), good.size / span * 60 if span > 0 else np.nan, span))
    return pd.DataFrame(rows, columns=PROCESS_COLUMNS)


def pooled(requests: pd.DataFrame, processes: pd.DataFrame) -> pd.DataFrame:
    """One row per (variant, level) over the variant's good server processes."""
    good = processes[processes.trial_status == "ok"]
    measured = _good_measured(requests)
    rows = []
    for (variant, level), g in good.groupby(["variant", "level"], sort=False):
        p50, p90, top = _percentiles(
            measured.latency_ms[(measured.variant == variant) & (measured.level == level)].to_numpy())
        rows.append({"variant": variant, "level": level, "processes": len(g), "sent": int(g.sent.sum()),
                     "failed": int(g.failed.sum()), "latency_p50_ms": p50, "latency_p90_ms": p90,
                     "latency_max_ms": top, "outputs_per_min": g.outputs_per_min.median(),
                     "outputs_per_min_min": g.outputs_per_min.min(), "outputs_per_min_max": g.outputs_per_min.max()})
    return pd.DataFrame(rows, columns=["variant", "level", "processes", "sent", "failed", "latency_p50_ms",
                                       "latency_p90_ms", "latency_max_ms", "outputs_per_min",
                                       "outputs_per_min_min", "outputs_per_min_max"])


def level_comparisons(requests: pd.DataFrame, processes: pd.DataFrame, baseline: str, others: list[str], *,
                      min_effect: float, seed: int) -> pd.DataFrame:
    """Each variant against the baseline at every level: the median latency ratio (bootstrap over server
    processes, then requests) and the outputs-per-minute ratio (over server processes: a CI only with
    two or more on each side), with the medians each divides (``baseline_median``, ``variant_median``; latency: the
    median of each process's median). Verdicts say whether B is faster (lower latency, more outputs)."""
    good = _good_measured(requests)
    procs = processes[processes.trial_status == "ok"]
    rows = []
    for level in sorted(requests.level.unique()):
        def latencies(v: str) -> list[np.ndarray]:
            mine = good[(good.variant == v) & (good.level == level)]
            return [g.latency_ms.to_numpy() for _, g in mine.groupby("trial")]

        def throughputs(v: str) -> list[list[float]]:
            return [[x] for x in procs.outputs_per_min[(procs.variant == v) & (procs.level == level)].dropna()]

        for v in others:
            a, b = latencies(baseline), latencies(v)
            lat = stats.compare(a, b, min_effect=min_effect, seed=seed)
            rows.append(_row(v, level, "latency_ms", lat, lat.verdict, a, b))
            a, b = throughputs(baseline), throughputs(v)
            out = stats.compare(a, b, min_effect=min_effect, seed=seed)  # (one process a side: no CI)
            # More outputs per minute is faster: the verdict of the inverse ratio's interval.
            verdict = (stats.verdict_for((1 / out.ci[1], 1 / out.ci[0]), min_effect) if np.isfinite(out.ci[0])
                       else "unknown")
            rows.append(_row(v, level, "outputs_per_min", out, verdict, a, b))
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


COMPARISON_COLUMNS = ["variant", "level", "metric", "baseline_median", "variant_median", "ratio", "ci_lo", "ci_hi",
                      "verdict", "n_a", "n_b"]


def _row(variant, level, metric, compared: stats.Comparison, verdict, a: list, b: list) -> dict:
    """A comparison row: ``a`` and ``b`` the two sides' values per process, as compared."""
    a, b = [t for t in a if len(t)], [t for t in b if len(t)]
    return {"variant": variant, "level": level, "metric": metric,
            "baseline_median": stats.median_of_medians(a) if a else None,
            "variant_median": stats.median_of_medians(b) if b else None, "ratio": compared.ratio,
            "ci_lo": compared.ci[0], "ci_hi": compared.ci[1], "verdict": verdict, "n_a": len(a), "n_b": len(b)}


def _oracle_file(oracle: Path, prompt: str) -> Path:
    """The oracle of one prompt: ``<oracle>/<prompt>.<ext>`` (or a frames folder named so)."""
    found = sorted(p for p in oracle.iterdir() if p.stem == prompt) if oracle.is_dir() else []
    if not found:
        raise BadInput(f"no oracle for prompt {prompt!r} (expected {oracle}/{prompt}.<ext>)", path=str(oracle))
    return found[0]


def _first_outputs(run_dir: Path, trials: list[dict], variant: str) -> dict[str, Path]:
    """A variant's first good server process: its first good output of each prompt, by prompt name."""
    t = next((t for t in trials if t["variant"] == variant and t["status"] == "ok"), None)
    return {} if t is None else {p.stem: p for p in output_files(run_dir / t["dir"]).values()}


def _floors_measured(run_dir: Path, codec: str) -> dict[tuple[str, str], float]:
    """The codec floors the run's summary.json holds, by (prompt, reference), where it has them for ``codec``: a
    re-render keeps what was measured, since x264 through PyAV gives another floor on each encode."""
    try:
        quality = rundir.read_summary(run_dir)["serve"]["quality"]
    except (BadInput, KeyError, TypeError):  # no summary yet, or not a served run's
        return {}
    if quality.get("codec") != codec:
        return {}
    return {(r["prompt"], r["reference"]): float(r["codec_floor_db"]) for r in quality.get("rows", [])
            if r.get("reference") and r.get("codec_floor_db") is not None}


def served_quality(run_dir: Path, trials: list[dict], case: Case) -> pd.DataFrame:
    """One row per (prompt, variant): the variant's first good output of the prompt against the reference
    (the case's oracle folder, else the baseline's output) and the codec floor (the reference through the
    case's codec: what a served video can reach; measured once, kept by a re-render)."""
    baseline = case.variants[0].name
    codec = parse_codec(case.serve.codec)
    measured = _floors_measured(run_dir, case.serve.codec)
    outputs = {v.name: _first_outputs(run_dir, trials, v.name) for v in case.run_variants()}
    rows = []
    for prompt in (p.name for p in case.serve.prompts):
        try:
            ref = _oracle_file(Path(case.oracle), prompt) if case.oracle else outputs[baseline].get(prompt)
            floor = None
            if ref is not None and open_media(ref).kind == "frames":
                floor = measured.get((prompt, str(ref)))
                if floor is None:
                    floor = codec_floor(ref, codec)["psnr_mean_db"]
        except BadInput as exc:
            ref, floor, ref_error = None, None, exc.line()
        else:
            ref_error = None if ref is not None else f"{baseline} has no good output of {prompt!r}"
        for variant, files in outputs.items():
            if not case.oracle and variant == baseline:
                continue
            row = {"prompt": prompt, "variant": variant, "reference": str(ref) if ref else None,
                   "codec_floor_db": floor}
            if ref_error or prompt not in files:
                row["error"] = ref_error or f"{variant} has no good output of {prompt!r}"
            else:
                try:
                    figures = headline(compare(ref, files[prompt]))
                    row.update({k: v for k, v in figures.items() if k in SERVED_FIGURES})
                except BadInput as exc:
                    row["error"] = exc.line()
            rows.append(row)
    return pd.DataFrame(rows)


def _records(frame: pd.DataFrame) -> list[dict]:
    """Frame rows for summary.json, NaN as None (an identical output's PSNR stays inf)."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def latency_samples(requests: pd.DataFrame, variants: list[str]) -> dict[str, dict[str, list[float]]]:
    """Good measured latencies of good server processes, by variant (in case order) and level."""
    good = _good_measured(requests)
    return {v: {str(c): g.latency_ms.tolist() for c, g in good[good.variant == v].groupby("level")}
            for v in variants if (good.variant == v).any()}


def not_verified(case: Case) -> list[str]:
    notes = ["latency is measured at the client (HTTP and queueing included); the server's stages are not split",
             "quality of every served output: only the first good output of each prompt is compared (a prompt "
             "may come out differently at other concurrency levels)"]
    if case.serve.server_restarts < 2:
        notes.append("one server process per variant: no spread between processes, no CI on outputs/min ratios")
    return notes


def summarize(case: Case, run_dir: Path, trials: list[dict]) -> dict:
    """The ``serve`` block of summary.json."""
    requests = requests_frame(run_dir, trials)
    processes = per_process(requests)
    names = [v.name for v in case.run_variants()]
    failed = requests[~requests.ok]
    return {
        "concurrency": list(case.serve.concurrency), "requests": case.serve.requests, "warmup": case.warmup,
        "server_restarts": case.serve.server_restarts, "prompts": len(case.serve.prompts),
        "levels": _records(pooled(requests, processes)),
        "processes": _records(processes),
        "comparisons": _records(level_comparisons(requests, processes, names[0], names[1:],
                                                  min_effect=case.min_effect, seed=case.seed)),
        "servers": [{"trial": t["index"], "variant": t["variant"], "status": t["status"],
                     **{k: t.get("serve", {}).get(k) for k in ("url", "ready_s", "failure")}} for t in trials],
        "failed_requests": _records(failed[["trial", "variant", "level", "phase", "index", "prompt", "status",
                                            "error"]].head(FAILED_KEPT)),
        "failed_count": len(failed),
        "latency_samples_ms": latency_samples(requests, names),
        "quality": {"reference": "oracle" if case.oracle else names[0], "codec": case.serve.codec,
                    "rows": _records(served_quality(run_dir, trials, case))},
        "not_verified": not_verified(case),
    }
