"""Where outputs part: B's taps against A's, tap by tap, and the first tap where B departs from A by
more than the dtype allows.

Taps are what ``perfkit.record.tap`` writes: a rank's ``taps.jsonl`` (one line per tap, in the order the
program made them: ``index, name, step, dtype, shape, mean, std, min, max, l2, nonfinite, sha256``, and
``array``, the ``.npy`` beside it, where arrays were kept). Two variants' taps are matched by position
and must carry the same names and steps; the comparison stops at the first that does not.

The allowance (how far B may lie from A at a tap before it departs) is a relative L2 error:

- ``dtype``: the square root of the tap dtype's machine epsilon (float32 3.5e-4, bfloat16 0.088, float16
  0.031; exact for integers). Two orders of summation (tp against sp) differ by a few epsilon per
  rounding, far below it; a wrong computation lies far above it.
- ``repeats``: where A's own repeats differ at a tap (a non-deterministic device), ``REPEAT_FACTOR`` times
  the largest relative L2 among them, when that exceeds the dtype's allowance.

Each row says which of the two it used. Without arrays, a tap is only identical or not (by hash).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from perfkit.common.json_figures import from_json
from perfkit.errors import BadInput
from perfkit.quality.compare import tensor_table
from perfkit.rundata.rundir import rank_dirs

TAPS_FILE = "taps.jsonl"
REPEAT_FACTOR = 10.0
# Machine epsilon of float dtypes numpy does not know (the ml_dtypes / torch names).
EPSILON = {"bfloat16": 2.0 ** -7, "float8_e4m3fn": 2.0 ** -3, "float8_e5m2": 2.0 ** -2}
LINE_KEYS = ("index", "name", "step", "dtype", "shape", "sha256")


def dtype_allowance(dtype: str) -> float:
    """The relative L2 a tap of ``dtype`` may differ by: sqrt(machine epsilon); 0 for exact dtypes."""
    if dtype in EPSILON:
        return math.sqrt(EPSILON[dtype])
    try:
        kind = np.dtype(dtype)
    except TypeError:
        raise BadInput(f"taps of an unknown dtype {dtype!r}: no allowance for it", field="dtype") from None
    return math.sqrt(float(np.finfo(kind).eps)) if kind.kind in "fc" else 0.0


def read_taps(rank_dir: str | Path) -> pd.DataFrame:
    """A rank's ``taps.jsonl`` as a frame, one row per tap in its order; ``path``: the tap's array, or
    None where it was not kept. ``BadInput`` names the file and line that cannot be read."""
    path = Path(rank_dir) / TAPS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read taps ({exc})", path=str(path)) from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            row = json.loads(line)
            missing = [k for k in LINE_KEYS if k not in row]
        except (json.JSONDecodeError, TypeError):
            row, missing = None, []
        if not isinstance(row, dict) or missing or not _well_typed(row) or row["index"] != len(rows):
            what = f"lacks {', '.join(missing)}" if missing else "is not the next tap's line"
            raise BadInput(f"line {n} {what}", path=str(path))
        row["path"] = str(path.parent / row["array"]) if row.get("array") else None
        rows.append(row)
    return pd.DataFrame(rows, columns=[*LINE_KEYS, "path"])


def _well_typed(row: dict) -> bool:
    """A tap line's fields of the types ``perfkit.record.tap`` writes."""
    shape, step, array = row["shape"], row["step"], row.get("array")
    return (all(isinstance(row[k], str) for k in ("name", "dtype", "sha256"))
            and isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)
            and (step is None or isinstance(step, int)) and (array is None or isinstance(array, str)))


def _load(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise BadInput(f"cannot read the tap's array ({exc})", path=path) from None


def _array(tap: pd.Series, load: Callable[[str], np.ndarray]) -> np.ndarray:
    """A tap's kept array, refused where it is not the shape its line gives."""
    arr = load(tap["path"])
    if list(arr.shape) != list(tap["shape"]):
        raise BadInput(f"holds a {list(arr.shape)} array, its line says {list(tap['shape'])}", path=str(tap["path"]))
    return arr


def _matching(a: pd.DataFrame, b: pd.DataFrame) -> tuple[int, dict | None]:
    """How many leading taps of A and B match by name and step, and the first mismatch (None)."""
    n = min(len(a), len(b))
    for i in range(n):
        x, y = a.iloc[i], b.iloc[i]
        if (x["name"], x["step"]) != (y["name"], y["step"]):
            return i, {"index": i, "a": f"{x['name']} (step {x['step']})", "b": f"{y['name']} (step {y['step']})"}
    if len(a) != len(b):
        return n, {"index": n, "a": f"{len(a)} taps", "b": f"{len(b)} taps"}
    return n, None


def _rel_l2(x: np.ndarray, y: np.ndarray) -> dict:
    row = tensor_table(x.reshape(1, -1), y.reshape(1, -1)).iloc[0]
    return {k: float(row[k]) for k in ("rel_l2", "psnr_db", "max_abs_diff")}


def compare_taps(a: pd.DataFrame, b: pd.DataFrame, repeats: list[pd.DataFrame] = (),
                 load: Callable[[str], np.ndarray] = _load) -> tuple[pd.DataFrame, dict | None]:
    """Per matched tap: B against A (``rel_l2``, ``psnr_db`` over A's range, ``max_abs_diff``: NaN
    without both arrays), ``bit_identical`` (by hash), the ``allowance`` and its ``basis`` (module
    docstring), ``repeat_rel_l2`` (largest among A's ``repeats`` against A, 0 where they are identical,
    NaN where they differ but were not kept) and ``departs`` (True / False, None where unmeasured).
    Also the first mismatch of names or steps (None)."""
    n, mismatch = _matching(a, b)
    rows = []
    for i in range(n):
        ta, tb = a.iloc[i], b.iloc[i]
        if list(ta["shape"]) != list(tb["shape"]) or ta["dtype"] != tb["dtype"]:
            mismatch = {"index": i, "a": f"{ta['name']} {ta['dtype']}{list(ta['shape'])}",
                        "b": f"{tb['name']} {tb['dtype']}{list(tb['shape'])}"}
            break
        identical = ta["sha256"] == tb["sha256"]
        row = {"index": i, "step": ta["step"], "name": ta["name"], "dtype": ta["dtype"], "bit_identical": identical,
               "rel_l2": 0.0 if identical else math.nan, "psnr_db": math.inf if identical else math.nan,
               "max_abs_diff": 0.0 if identical else math.nan}
        arr_a = _array(ta, load) if ta["path"] and not identical else None
        if arr_a is not None and tb["path"]:
            row.update(_rel_l2(arr_a, _array(tb, load)))
        spread = 0.0
        for r in repeats:
            if i < len(r) and r["sha256"].iloc[i] != ta["sha256"]:
                again = r.iloc[i]
                if not (again["path"] and ta["path"]) or list(again["shape"]) != list(ta["shape"]):
                    spread = math.nan  # they differ, by how much is unknown
                    break
                arr_a = arr_a if arr_a is not None else _array(ta, load)
                spread = max(spread, _rel_l2(arr_a, _array(again, load))["rel_l2"])
        own = dtype_allowance(ta["dtype"])
        row["repeat_rel_l2"] = spread
        row["basis"] = "repeats" if REPEAT_FACTOR * spread > own else "dtype"
        row["allowance"] = max(own, REPEAT_FACTOR * spread) if not math.isnan(spread) else own
        row["departs"] = None if math.isnan(row["rel_l2"]) else bool(row["rel_l2"] > row["allowance"])
        rows.append(row)
    columns = ["index", "step", "name", "dtype", "bit_identical", "rel_l2", "psnr_db", "max_abs_diff",
               "repeat_rel_l2", "allowance", "basis", "departs"]
    return pd.DataFrame(rows, columns=columns), mismatch


def first_departure(table: pd.DataFrame) -> dict | None:
    """The first tap that departs (or, without arrays, the first that is not identical), or None."""
    for row in table.to_dict("records"):
        if row["departs"] or (row["departs"] is None and not row["bit_identical"]):
            return row
    return None


def rank_with_taps(trial_dir: Path) -> Path | None:
    """The lowest rank folder of a trial holding ``taps.jsonl``."""
    return next((r for r in rank_dirs(trial_dir) if (r / TAPS_FILE).exists()), None)


def untapped(variants: list[str], asked: list) -> str:
    """Why a run whose case asks for taps at steps ``asked`` has none of ``variants``: their programs tapped nothing
    (running the case again the same way would tap nothing again)."""
    return (f"the case asks for taps at steps {asked}, but no good trial of {' or '.join(variants)} wrote any: its "
            "program tapped nothing on those steps (does it call perfkit.record.tap where record.tapping(step) says "
            "so, on module names the model has?)")


def run_departure(run_dir: Path, trials: list[dict], a: str, b: str, asked: list | None = None) -> dict | None:
    """The run summary's ``taps``: the first good trial of B against A's (lowest rank with taps), A's
    other good trials as repeats. None when no trial of A or B tapped; ``{error}`` when taps cannot be read, or
    where the case asked for them (``asked``: its ``capture.taps``) and one side's good trials wrote none."""
    def tapped(variant: str) -> list[tuple[dict, Path]]:
        found = [(t, rank_with_taps(run_dir / t["dir"])) for t in trials if t["variant"] == variant
                 and t["status"] == "ok"]
        return [(t, r) for t, r in found if r is not None]

    ta, tb = tapped(a), tapped(b)
    silent = b if ta else a
    ran = any(t["variant"] == silent and t["status"] == "ok" for t in trials)  # (not a run stopped before it)
    if asked and bool(ta) != bool(tb) and ran:  # one side's program tapped nothing: said, not passed over
        return {"error": untapped([silent], asked)}
    if not ta or not tb:
        return None
    (trial_a, dir_a), (trial_b, dir_b) = ta[0], tb[0]
    try:
        frame_a, frame_b = read_taps(dir_a), read_taps(dir_b)
        table, mismatch = compare_taps(frame_a, frame_b, [read_taps(r) for _, r in ta[1:]])
    except BadInput as exc:  # the rest of the summary stands
        return {"error": str(exc)}
    first = first_departure(table)
    bases = sorted(set(table.basis))
    return {
        "a": {"variant": a, "trial": trial_a["index"], "dir": str(dir_a.relative_to(run_dir))},
        "b": {"variant": b, "trial": trial_b["index"], "dir": str(dir_b.relative_to(run_dir))},
        "taps": len(table), "repeats": len(ta) - 1,
        "arrays": bool(frame_a.path.notna().any() and frame_b.path.notna().any()),
        "basis": "+".join(bases) if bases else None,
        "allowances": {d: dtype_allowance(d) for d in sorted(set(table["dtype"]))},  # by dtype
        "repeat_factor": REPEAT_FACTOR,
        "rows": table.to_dict("records"),
        "first": first,
        "mismatch": mismatch,
    }


def plot_agreement(rows: list[dict], path: Path, title: str = "B against A") -> Path:
    """Relative L2 (log, with the allowance) and PSNR of every tap in order, as a PNG: agreement by layer."""
    # matplotlib: only when a plot is asked for
    from matplotlib.figure import Figure

    from perfkit.common.figures import save_figure

    # figures as the summary holds them ("inf"; None for NaN, which a float array makes NaN)
    rel, allowance, psnr = (np.array([from_json(r[k]) for r in rows], float)
                            for k in ("rel_l2", "allowance", "psnr_db"))
    x = np.arange(len(rows))
    fig = Figure(figsize=(max(6.0, 0.18 * len(rows) + 2), 5))
    top, bottom = fig.subplots(2, 1, sharex=True)
    identical = rel == 0
    top.semilogy(x, np.where(identical, np.nan, rel), marker="o", markersize=3, label="relative L2")
    top.step(x, allowance, where="mid", color="C3", linestyle="--", label="allowance")
    departed = [i for i, r in enumerate(rows) if r["departs"]]
    if departed:
        top.axvline(departed[0], color="C3", alpha=0.4, label=f"first departure: {rows[departed[0]]['name']}")
    top.set_ylabel("relative L2")
    top.set_title(f"agreement by layer, {title}" + (f" ({int(identical.sum())} identical taps not drawn)"
                                                   if identical.any() else ""))
    top.legend(fontsize="small")
    bottom.plot(x, np.where(np.isinf(psnr), np.nan, psnr), marker="o", markersize=3)
    bottom.set_ylabel("PSNR (dB, A's range)")
    every = max(1, len(rows) // 40)
    bottom.set_xticks(x[::every], [f"{r['name']} s{r['step']}" for r in rows][::every], rotation=90, fontsize="x-small")
    return save_figure(fig, path)
