"""Where each chip's step time went: compute, exposed ICI, local DMA wait, idle.

Every instant of a step's span on a device is given to one part. On each line (TPU ``XLA Ops``, a GPU
stream, a CPU thread) the innermost running op owns the instant; across lines (GPU streams running at
once) compute beats ICI beats DMA, so a collective hidden behind compute costs nothing and only its
exposed part counts (on TPU that is the time in ``X-done``, where xprof counts it as compute). Instants
where nothing runs are idle. A compute op's own DMA stall (TPU ``dma_stall_duration_ps``) moves from
compute to DMA. The four parts add up to the span exactly (integer picoseconds).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from perfkit.trace import timeline
from perfkit.trace.classify import CATEGORIES

PARTS = ("compute", "ici", "dma", "idle")
TIMES = ["span_ps"] + [f"{p}_ps" for p in PARTS]  # a span and the parts it splits into
COLUMNS = ["rank", "device", "step", *TIMES]


def _sweep_order(group: np.ndarray, time: np.ndarray) -> np.ndarray:
    """Entries sorted by (group, time): one int64 key when it fits (times are >= 0), else lexsort."""
    span = int(time.max(initial=0)) + 1
    if (int(group.max(initial=0)) + 1) * span < 2**62:
        return np.argsort(group * span + time)
    return np.lexsort((time, group))


def _segments(group: np.ndarray, time: np.ndarray, delta: np.ndarray, cls: np.ndarray, n_groups: int) -> np.ndarray:
    """(n_groups, 3) busy time per group and class, given sweep entries: at ``time`` the count of running
    innermost ops of class ``cls`` changes by ``delta`` in ``group``."""
    order = _sweep_order(group, time)
    group, time, delta, cls = group[order], time[order], delta[order], cls[order]
    counts = [np.cumsum(np.where(cls == c, delta, 0)) for c in range(len(CATEGORIES))]
    length = np.zeros(time.size, np.int64)
    length[:-1] = np.where(group[1:] == group[:-1], time[1:] - time[:-1], 0)
    owner = np.select([c > 0 for c in counts], list(range(len(CATEGORIES))), default=-1)
    busy = owner >= 0
    # float64 sums of integer picoseconds are exact below 2**53 ps (2.5 hours) per span and class
    out = np.bincount(group[busy] * len(CATEGORIES) + owner[busy], weights=length[busy],
                      minlength=n_groups * len(CATEGORIES))
    return np.rint(out).astype(np.int64).reshape(n_groups, len(CATEGORIES))


def breakdown(events: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, device, step): ``span_ps`` and ``compute_ps``, ``ici_ps``, ``dma_ps``, ``idle_ps``
    (adding up to the span), plus ``start_ps`` of the span. Steps as in ``perfkit.trace.steps``; step
    -1 is the whole trace of a device without step markers."""
    spans, ops = timeline.measured(events)
    if spans.empty:
        return pd.DataFrame(columns=COLUMNS + ["start_ps"])
    keys = ["rank", "device", "step"]
    g = ops["span"].to_numpy(np.int64)
    start, end, parent = (ops[c].to_numpy(np.int64) for c in ("start_ps", "end_ps", "parent"))
    cat = ops["category"].astype("category")
    lookup = [CATEGORIES.index(c) if c in CATEGORIES else -1 for c in cat.cat.categories]  # ops hold only these
    cls = np.array(lookup, np.int64)[cat.cat.codes.to_numpy()]
    child = np.flatnonzero(parent >= 0)
    p = parent[child]
    # each op counts while it runs; a nested op takes its time from its parent's class meanwhile
    busy = _segments(np.concatenate([g, g, g[child], g[child]]),
                     np.concatenate([start, end, start[child], np.minimum(end[child], end[p])]),
                     np.concatenate([np.ones_like(g), -np.ones_like(g), -np.ones_like(child), np.ones_like(child)]),
                     np.concatenate([cls, cls, cls[p], cls[p]]), len(spans))
    stall = np.bincount(g, weights=np.where(cls == 0, ops["stall_ps"].to_numpy(), 0), minlength=len(spans))
    moved = np.minimum(stall.astype(np.int64), busy[:, 0])
    out = spans[keys + ["start_ps"]].copy()
    out["span_ps"] = spans["end_ps"] - spans["start_ps"]
    out["compute_ps"] = busy[:, 0] - moved
    out["ici_ps"] = busy[:, 1]
    out["dma_ps"] = busy[:, 2] + moved
    out["idle_ps"] = out["span_ps"] - busy.sum(axis=1)
    return out[COLUMNS + ["start_ps"]]


def mean_per_device(rows: pd.DataFrame) -> pd.DataFrame:
    """The per-step rows of ``breakdown`` averaged over steps, per (rank, device); ``steps`` counts them."""
    out = rows.groupby(["rank", "device"])[TIMES].mean().reset_index()
    out.insert(2, "steps", rows.groupby(["rank", "device"]).size().to_numpy())
    return out


def plot(means: pd.DataFrame, path, title: str = "") -> None:
    """A stacked bar per chip of its mean step: compute / ICI / DMA / idle, in milliseconds."""
    from matplotlib.figure import Figure

    # matplotlib: only when a plot is asked for
    from perfkit.common.figures import PART_STYLE as STYLE, save_figure

    labels = [f"r{r}/d{d}" for r, d in zip(means["rank"], means["device"])]
    fig = Figure(figsize=(max(4.0, 0.5 * len(labels) + 2) + 1.5, 3.5))
    ax = fig.add_subplot()
    bottom = np.zeros(len(means))
    for part in PARTS:
        ms = means[f"{part}_ps"].to_numpy() / 1e9
        label, color = STYLE[part]
        ax.bar(labels, ms, bottom=bottom, label=label, color=color)
        bottom += ms
    ax.set_ylabel("mean step (ms)")
    ax.set_title(title or "step time per chip")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    save_figure(fig, Path(path))
