"""The report's PNG plots, written under ``<run_dir>/plots/``: step times per variant and trial, the
trace breakdown per variant, PSNR per frame, and the latent drift (``perfkit.quality.compare.plot_drift``).

Figures are drawn on matplotlib's ``Figure`` with the Agg canvas (no pyplot state, no display): a few
small figures take a few hundred milliseconds, most of it matplotlib's import.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from perfkit.common.comparison import compared_variant
from perfkit.common.figures import PART_STYLE, save_figure
from perfkit.common.json_figures import from_json

PLOTS_DIR = "plots"


def step_times(steps: pd.DataFrame, serve_level: int | None = None) -> Figure | None:
    """One box per trial of its timed synced steps, in run order along the x axis (drift over the run
    shows), coloured by variant, with a dotted line per variant through its trials' medians.
    ``steps``: ``perfkit.analysis.timing.steps_frame`` rows. ``serve_level``: a serve run's lowest concurrency
    level, whose request latencies its trials keep as their steps (one trial, one server process); None for a
    model or command run. None without timed steps."""
    timed = steps[(steps.kind == "synced") & steps.timed]
    if timed.empty:
        return None
    variants = list(dict.fromkeys(timed.variant))
    colors = [f"C{i}" for i in range(len(variants))]
    groups = [(g.variant.iloc[0], t, g.ms.to_numpy()) for t, g in timed.groupby("trial", sort=True)]
    fig = Figure(figsize=(max(4.0, 0.45 * len(groups) + 2), 3.2))
    ax = fig.add_subplot()
    boxes = ax.boxplot([g for _, _, g in groups], patch_artist=True, widths=0.6, showfliers=True,
                       medianprops={"color": "black"})
    for box, (v, _, _) in zip(boxes["boxes"], groups):
        box.set_facecolor(colors[variants.index(v)])
        box.set_alpha(0.6)
    for v, color in zip(variants, colors):
        at = [(i + 1, np.median(g)) for i, (name, _, g) in enumerate(groups) if name == v]
        ax.plot(*zip(*at), linestyle=":", marker=".", color=color, linewidth=1)
    ax.set_xticks(range(1, len(groups) + 1), [str(t) for _, t, _ in groups], fontsize="small")
    ax.set_xlabel("trial, in run order")
    if serve_level is None:
        ax.set_ylabel("step time (ms)")
        ax.set_title("timed synced steps per trial")
    else:
        ax.set_ylabel("request latency (ms)")
        ax.set_title(f"c={serve_level} latencies per server process")
    ax.legend(handles=[boxes["boxes"][[v for v, _, _ in groups].index(v)] for v in variants], labels=variants,
              fontsize="small")
    return fig


def breakdown_bars(breakdown: dict) -> Figure | None:
    """A stacked bar per variant of its mean traced step per chip: compute / ICI / DMA / idle (ms).
    ``breakdown``: the summary's ``breakdown`` block. None when no variant has figures."""
    rows = {v: parts for v, parts in breakdown["variants"].items() if "error" not in parts}
    if not rows:
        return None
    fig = Figure(figsize=(6, 0.5 * len(rows) + 1.6))
    ax = fig.add_subplot()
    names = list(rows)[::-1]  # the baseline on top
    left = np.zeros(len(names))
    for part, (label, color) in PART_STYLE.items():
        ms = np.array([rows[v].get(f"{part}_ms", 0.0) for v in names])  # dcn_ms: summaries from before it
        if part == "dcn" and not ms.any():  # cross-slice collectives drawn only where some variant has them
            continue
        ax.barh(names, ms, left=left, color=color, label=label)
        left += ms
    ax.set_xlabel("mean traced step per chip (ms, profiler on)")
    ax.legend(fontsize="small", ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return fig


def psnr_per_frame(psnr_db: list, title: str) -> Figure:
    """PSNR of each frame; identical frames (infinite PSNR) are marked along the top, not drawn as a value."""
    values = np.array([from_json(x) for x in psnr_db], float)
    finite = np.isfinite(values)
    fig = Figure(figsize=(6, 2.8))
    ax = fig.add_subplot()
    frames = np.arange(len(values))
    ax.plot(frames[finite], values[finite], marker="o", markersize=3, linewidth=1)
    if (~finite).any():
        top = values[finite].max() if finite.any() else 100.0
        ax.plot(frames[~finite], np.full((~finite).sum(), top), linestyle="none", marker="^", color="C2",
                label=f"identical frames ({(~finite).sum()})")
        ax.legend(fontsize="small")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("frame")
    ax.set_ylabel("PSNR (dB)")
    ax.set_title(title)
    return fig


def write_plots(run_dir: Path, summary: dict, steps: pd.DataFrame) -> dict[str, str]:
    """Every plot the run's figures allow, as ``{name: path relative to run_dir}``: ``step_times``,
    ``breakdown``, ``psnr`` (of the headline output), ``drift``, ``taps`` (agreement by layer)."""
    folder = run_dir / PLOTS_DIR
    a = summary["baseline"]
    b = compared_variant(summary)
    q = summary.get("quality") or {}
    differing = [x for x in q.get("per_frame_psnr_db") or [] if from_json(x) != math.inf]  # else nothing to draw
    serve_level = summary["serve"]["concurrency"][0] if summary.get("serve") else None
    figures = {"step_times": step_times(steps, serve_level),
               "breakdown": breakdown_bars(summary["breakdown"]) if summary.get("breakdown") else None,
               "psnr": psnr_per_frame(q["per_frame_psnr_db"], f"PSNR per frame, {b} vs {a} ({q['file']})")
               if differing else None}
    made = {name: save_figure(fig, folder / f"{name}.png") for name, fig in figures.items() if fig is not None}
    if q.get("drift"):
        # the quality modules (PyAV among their imports): only for a run whose latents drift
        from perfkit.quality.compare import plot_drift

        made["drift"] = plot_drift(pd.DataFrame(q["drift"]), folder / "drift.png", f"{b} against {a}")
    if (summary.get("taps") or {}).get("rows"):
        # (as the drift's: only for a run with taps)
        from perfkit.quality.departure import plot_agreement

        made["taps"] = plot_agreement(summary["taps"]["rows"], folder / "taps.png", f"{b} against {a}")
    return {name: str(p.relative_to(run_dir)) for name, p in made.items()}
