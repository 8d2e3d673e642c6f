"""Output quality: PSNR and friends for frames, videos and tensors, the codec floor, per-step drift and
the determinism of repeats. ``perfkit quality A B`` and the runner use the same functions.

Conventions, stated because papers and tools differ:
- Frames are uint8, data_range 255; videos are compared in RGB after decoding. MSE, PSNR and |d| are
  per frame over all pixels and channels.
- ``psnr_mean_db`` is the mean of per-frame PSNR over the frames that differ (what many papers report).
  Identical frames have infinite PSNR: they are counted in ``identical_frames`` ("k of N frames
  identical") and left out of that mean, never clamped; it is inf only when every frame is identical.
- ``psnr_pooled_db`` is the PSNR of the MSE pooled over all frames (ffmpeg psnr filter's "average");
  ``psnr_min_db`` is the worst frame (ffmpeg's "min").
- ``mean_abs_diff`` is in /255 units; ``share_over_16`` is the share of channel values with |d| > 16.
- SSIM (on request) is scikit-image's with Wang et al.'s settings: Gaussian window sigma 1.5,
  K1 0.01, K2 0.03, population covariance; per frame over channels, then averaged over frames.
- Tensors (any non-uint8 array): relative L2 ||a - b|| / ||a||, cosine similarity, max and mean |a - b|,
  and PSNR with A's range (max - min) as data range. A is the reference.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
from pathlib import Path
from typing import Iterator, NamedTuple

import click
import numpy as np
import pandas as pd

from perfkit.common.summary import json_safe
from perfkit.errors import BadInput
from perfkit.quality.media import (DEFAULT_CODEC, LATENTS_FILE, Codec, Media, VideoFile, load_array, main_output,
                           open_media, output_files, outputs_folder, parse_codec, prefetch, write_video)

DATA_RANGE = 255
OVER = 16  # |d| above which a channel value counts as visibly different (the reference PRs' threshold)
# 256 * 255**2 < 2**24: a float32 sum of 256 squared uint8 differences is exact, so per-frame sums are
# exact integers at float32 speed.
BLOCK = 256


class FrameRange(NamedTuple):
    """Frames ``start:stop`` (Python slice, no step) of both inputs; ``stop`` None = to the end."""

    start: int = 0
    stop: int | None = None

    def __str__(self) -> str:
        return f"{self.start}:{'' if self.stop is None else self.stop}"


ALL_FRAMES = FrameRange()


def parse_frame_range(text: str | None) -> FrameRange:
    """``"0:49"`` -> FrameRange(0, 49); either side may be empty."""
    if not text:
        return ALL_FRAMES
    start, sep, stop = text.partition(":")
    try:
        rng = FrameRange(int(start or 0), int(stop) if stop else None)
    except ValueError:
        rng = None
    if not sep or rng is None or rng.start < 0 or (rng.stop is not None and rng.stop <= rng.start):
        raise BadInput(f"expected START:STOP with 0 <= START < STOP, got {text!r}", field="--frames")
    return rng


def psnr(mse, data_range: float = DATA_RANGE):
    """PSNR in dB of an MSE (scalar or array); inf where the MSE is 0."""
    mse = np.asarray(mse, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mse == 0, np.inf, 10.0 * np.log10(np.float64(data_range) ** 2 / mse))


def _frame_sums(a: np.ndarray, b: np.ndarray) -> tuple[float, float, int, int]:
    """Exact sums of one pair of uint8 frames: sum d^2, sum |d|, max |d|, count of |d| > OVER."""
    absd = np.maximum(a, b)
    absd -= np.minimum(a, b)  # |a - b| without widening to int16
    flat = absd.reshape(-1).astype(np.float32)
    whole = flat.size - flat.size % BLOCK
    blocks, tail = flat[:whole].reshape(-1, BLOCK), flat[whole:]
    sq = np.einsum("ij,ij->i", blocks, blocks).sum(dtype=np.float64) + float(tail @ tail)
    ab = blocks.sum(axis=1).sum(dtype=np.float64) + float(tail.sum())
    return sq, ab, int(absd.max()), int(np.count_nonzero(absd > OVER))


def _ssim(a: np.ndarray, b: np.ndarray) -> float:
    from skimage.metrics import structural_similarity

    try:
        return float(structural_similarity(a, b, channel_axis=-1, data_range=DATA_RANGE, gaussian_weights=True,
                                           sigma=1.5, use_sample_covariance=False, K1=0.01, K2=0.03))
    except ValueError as exc:  # frames smaller than the 11-pixel window
        raise BadInput(f"SSIM: {exc}") from None


def _hashed(frames: Iterator[np.ndarray], digest) -> Iterator[np.ndarray]:
    for frame in frames:
        digest.update(np.ascontiguousarray(frame))
        yield frame


def frame_table(a: Iterator[np.ndarray], b: Iterator[np.ndarray], labels: tuple[str, str],
                ssim: bool = False, first: int = 0) -> tuple[pd.DataFrame, tuple[str, str]]:
    """Per-frame metrics of two frame streams (each frame uint8 (H, W, C)), read in background threads;
    ``first`` is the index of their first frame in the inputs.

    Returns the tidy per-frame table (frame, mse, psnr_db, mean_abs_diff, max_abs_diff, share_over_16
    [, ssim]) and the sha256 of each stream's frame bytes (equal to the sha256 of a (T, H, W, C) array).
    """
    pair = f"{labels[0]} vs {labels[1]}"
    digests = hashlib.sha256(), hashlib.sha256()
    streams = prefetch(_hashed(a, digests[0])), prefetch(_hashed(b, digests[1]))
    rows = []
    try:
        for i, (fa, fb) in enumerate(itertools.zip_longest(*streams)):
            if fa is None or fb is None:
                short, longer = labels if fa is None else labels[::-1]
                raise BadInput(f"frame counts differ: {short} ends after {i} frames, {longer} has more", path=pair)
            if fa.shape != fb.shape:
                raise BadInput(f"frame sizes differ at frame {i}: {fa.shape} vs {fb.shape}", path=pair)
            sq, ab, mx, over = _frame_sums(fa, fb)
            row = (first + i, sq / fa.size, ab / fa.size, mx, over / fa.size)
            rows.append(row + (_ssim(fa, fb),) if ssim else row)
    finally:
        for stream in streams:
            stream.close()
    if not rows:
        raise BadInput("no frames to compare", path=pair)
    columns = ["frame", "mse", "mean_abs_diff", "max_abs_diff", "share_over_16"] + (["ssim"] if ssim else [])
    table = pd.DataFrame(rows, columns=columns)
    table.insert(2, "psnr_db", psnr(table["mse"].to_numpy()))
    return table, (digests[0].hexdigest(), digests[1].hexdigest())


def summarize_frames(per_frame: pd.DataFrame) -> dict:
    """The aggregate fields of ``perfkit quality --json`` from a per-frame table (equal-size frames)."""
    finite = per_frame["psnr_db"][np.isfinite(per_frame["psnr_db"])]
    out = {
        "frames": len(per_frame),
        "psnr_mean_db": float(finite.mean()) if len(finite) else math.inf,
        "psnr_pooled_db": float(psnr(per_frame["mse"].mean())),
        "psnr_min_db": float(per_frame["psnr_db"].min()),
        "worst_frame": int(per_frame["frame"][per_frame["psnr_db"].idxmin()]),
        "identical_frames": int((per_frame["mse"] == 0).sum()),
        "mean_abs_diff": float(per_frame["mean_abs_diff"].mean()),
        "max_abs_diff": int(per_frame["max_abs_diff"].max()),
        "share_over_16": float(per_frame["share_over_16"].mean()),
        "bit_identical": bool((per_frame["max_abs_diff"] == 0).all()),
    }
    if "ssim" in per_frame:
        out["ssim_mean"] = float(per_frame["ssim"].mean())
    return out


def tensor_table(a: np.ndarray, b: np.ndarray) -> pd.DataFrame:
    """One row per leading index of two equal-shape tensors (a step, for latents (steps, ...)):
    rel_l2, cosine, psnr_db (A's range at that index), max_abs_diff, mean_abs_diff."""
    a2 = np.asarray(a, np.float64).reshape(len(a), -1)
    b2 = np.asarray(b, np.float64).reshape(len(b), -1)
    d = a2 - b2
    norm_a, norm_b, norm_d = (np.linalg.norm(x, axis=1) for x in (a2, b2, d))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_l2 = np.where(norm_d == 0, 0.0, norm_d / norm_a)
        cosine = np.einsum("ij,ij->i", a2, b2) / (norm_a * norm_b)
    mse = (d * d).mean(axis=1)
    data_range = np.ptp(a2, axis=1)
    return pd.DataFrame({
        "index": np.arange(len(a2)), "rel_l2": rel_l2, "cosine": cosine,
        "psnr_db": np.where(mse == 0, np.inf, np.where(data_range > 0, psnr(mse, data_range), np.nan)),
        "max_abs_diff": np.abs(d).max(axis=1), "mean_abs_diff": np.abs(d).mean(axis=1),
    })


def _sha256_array(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr)).hexdigest()


def compare_tensors(a: np.ndarray, b: np.ndarray, labels: tuple[str, str] = ("A", "B")) -> dict:
    """Two tensors of one shape and dtype, A the reference: the ``--json`` fields for tensors."""
    if a.shape != b.shape or a.dtype != b.dtype:
        raise BadInput(f"tensors differ in shape or dtype: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}",
                       path=f"{labels[0]} vs {labels[1]}")
    row = tensor_table(a.reshape(1, -1), b.reshape(1, -1)).iloc[0]
    return {"kind": "tensor", "shape": list(a.shape), "dtype": str(a.dtype),
            **{k: float(row[k]) for k in ("rel_l2", "cosine", "max_abs_diff", "mean_abs_diff", "psnr_db")},
            "data_range": float(np.ptp(a)) if a.size else 0.0,
            "bit_identical": bool(np.array_equal(a, b)),
            "sha256": [_sha256_array(a), _sha256_array(b)]}


def compare_media(a: Media, b: Media, frames: FrameRange = ALL_FRAMES, *, ssim: bool = False,
                  per_frame: bool = False) -> dict:
    """Two opened inputs, A the reference: frames (``perfkit quality --json`` fields) or tensors."""
    labels, pair = (a.label, b.label), f"{a.label} vs {b.label}"
    if a.kind != b.kind:
        raise BadInput(f"{a.label} holds {a.kind} ({a.detail}), {b.label} holds {b.kind} ({b.detail})",
                       path=pair)
    if a.kind == "tensor":
        return compare_tensors(a.array()[frames.start:frames.stop], b.array()[frames.start:frames.stop], labels)
    if a.frame_shape != b.frame_shape:
        raise BadInput(f"frame sizes differ: {a.frame_shape} vs {b.frame_shape}", path=pair)
    _check_counts(a, b, frames)
    table, sha = frame_table(a.frames(*frames), b.frames(*frames), labels, ssim, frames.start)
    if frames.stop is not None and len(table) < frames.stop - frames.start:
        raise BadInput(f"asked for frames {frames}, both end after frame {frames.start + len(table) - 1}",
                       path=pair)
    out = {"kind": "frames", "inputs": [a.describe(), b.describe()], "range": str(frames),
           "data_range": DATA_RANGE, **summarize_frames(table), "sha256": list(sha)}
    if per_frame:
        out["per_frame"] = table.to_dict("records")
    return out


def _check_counts(a: Media, b: Media, frames: FrameRange) -> None:
    """Refuse before decoding when both headers give frame counts that cannot match."""
    def selected(m: Media) -> int | None:
        return None if m.count is None else len(range(m.count)[frames.start:frames.stop])

    na, nb = selected(a), selected(b)
    if na is not None and nb is not None and na != nb:
        raise BadInput(f"frame counts differ: {a.count} vs {b.count} (range {frames} selects {na} vs {nb})",
                       path=f"{a.label} vs {b.label}")
    for m in (a, b):
        if m.count is not None and frames.stop is not None and m.count < frames.stop:
            raise BadInput(f"has {m.count} frames; --frames {frames} asks for more", path=m.label)


def compare(a, b, frames: FrameRange = ALL_FRAMES, *, ssim: bool = False, per_frame: bool = False) -> dict:
    """Compare two inputs, A the reference: paths (as ``perfkit quality`` takes them) or arrays, uint8
    frames (T, H, W, C), one frame (H, W, C) or (H, W), or tensors of any other dtype and shape."""
    return compare_media(open_media(a, "A" if isinstance(a, np.ndarray) else None),
                         open_media(b, "B" if isinstance(b, np.ndarray) else None), frames,
                         ssim=ssim, per_frame=per_frame)


def codec_floor(reference, codec: Codec = DEFAULT_CODEC, frames: FrameRange = ALL_FRAMES, *,
                ssim: bool = False) -> dict:
    """The reference against itself through ``codec``: the best a video served through that codec can
    score against the reference, so served-vs-reference figures can be judged. Encodes in memory.
    libx264 through PyAV is not bit-reproducible run to run: the floor moves by ~0.02 dB (measured)."""
    ref = open_media(reference)
    if ref.kind != "frames" or (ref.frame_shape or (3,))[-1] != 3:
        raise BadInput("the codec floor needs RGB frames", path=ref.label)
    buffer = io.BytesIO()
    write_video(ref.frames(*frames), buffer, codec)
    through = VideoFile(buffer.getvalue(), f"{ref.label} through {codec}")
    table, _ = frame_table(ref.frames(*frames), through.frames(), (ref.label, through.label), ssim, frames.start)
    return {"codec": str(codec), "bytes": len(buffer.getvalue()), "range": str(frames), **summarize_frames(table)}


def drift(a: np.ndarray, b: np.ndarray, labels: tuple[str, str] = ("A", "B")) -> pd.DataFrame:
    """Per-step latents of two variants, each (steps, ...): how far B drifts from A at every step."""
    if a.shape != b.shape or a.ndim < 2:
        raise BadInput(f"per-step latents must share a (steps, ...) shape: {list(a.shape)} vs {list(b.shape)}",
                       path=f"{labels[0]} vs {labels[1]}")
    return tensor_table(a, b).rename(columns={"index": "step"})


def plot_drift(table: pd.DataFrame, path: Path, title: str = "B against A") -> Path:
    """Relative L2 and PSNR per step, as a PNG."""
    from matplotlib.figure import Figure

    # matplotlib: only when a plot is asked for
    from perfkit.common.figures import save_figure

    identical = int((table["rel_l2"] == 0).sum())  # no point on a log scale: said in the title
    fig = Figure(figsize=(6, 5))
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.semilogy(table["step"], table["rel_l2"].replace(0.0, np.nan), marker="o")
    top.set_ylabel("relative L2")
    top.set_title(f"latent drift, {title}" + (f" ({identical} identical steps not drawn)" if identical else ""))
    bottom.plot(table["step"], table["psnr_db"].replace(np.inf, np.nan), marker="o")
    bottom.set_ylabel("PSNR (dB, A's range)")
    bottom.set_xlabel("step")
    return save_figure(fig, path)


def content_sha256(media: Media) -> str:
    """sha256 of the decoded frame bytes (or of the tensor's bytes)."""
    if media.kind == "tensor":
        return _sha256_array(media.array())
    digest = hashlib.sha256()
    for _ in _hashed(media.frames(), digest):
        pass
    return digest.hexdigest()


def headline(result: dict) -> dict:
    """The few figures a run summary keeps of one comparison (frames or tensor); ``psnr_db`` is the
    headline PSNR (for frames the mean over differing frames)."""
    if result["kind"] == "tensor":
        return {k: result[k] for k in ("kind", "psnr_db", "rel_l2", "cosine", "mean_abs_diff", "max_abs_diff",
                                       "bit_identical")}
    keys = ("kind", "frames", "psnr_pooled_db", "psnr_min_db", "identical_frames", "mean_abs_diff",
            "max_abs_diff", "share_over_16", "bit_identical")
    return {"psnr_db": result["psnr_mean_db"], **{k: result[k] for k in keys}}


def _compare_or_error(a: Path, b: Path, **options) -> dict:
    """``compare``, or ``{"error": line}`` for an output a trial wrote broken: a run reports it, not stops."""
    try:
        return compare(a, b, **options)
    except BadInput as exc:
        return {"error": exc.line()}


def outputs_quality(dir_a: Path, dir_b: Path, oracle: str | None = None,
                    names: tuple[str, str] = ("A", "B")) -> dict | None:
    """A run's quality block: B's outputs against A's (every common output; the main one headlined),
    both against an oracle (a folder of same-named outputs, or one file for the main output), and the
    per-step drift when both saved ``latents.npy``. None when no output of the two compares."""
    files_a, files_b = output_files(dir_a), output_files(dir_b)
    per_file = {n: _compare_or_error(files_a[n], files_b[n], per_frame=True) for n in files_a if n in files_b}
    good = {n: r for n, r in per_file.items() if "error" not in r}
    if not good:
        return None
    main = next((n for n, r in good.items() if r["kind"] == "frames"), next(iter(good)))
    head = good[main]
    out = {"file": main, **headline(head),
           "bit_identical": len(good) == len(per_file) and all(r["bit_identical"] for r in good.values()),
           "sha256": head["sha256"],
           "files": {n: r if "error" in r else headline(r) for n, r in per_file.items()}}
    if head["kind"] == "frames":
        out["per_frame_psnr_db"] = [row["psnr_db"] for row in head["per_frame"]]
    if oracle:
        out["oracle"] = _oracle_quality(Path(oracle), main, {names[0]: files_a, names[1]: files_b})
    latents = [outputs_folder(d) / LATENTS_FILE for d in (dir_a, dir_b)]
    if all(p.is_file() for p in latents):
        try:
            out["drift"] = drift(*(load_array(p) for p in latents), labels=tuple(map(str, latents))
                                 ).to_dict("records")
        except BadInput as exc:
            out["drift_error"] = exc.line()
    return out


def _oracle_quality(oracle: Path, main: str, variants: dict[str, dict[str, Path]]) -> dict:
    """Each variant's main output against the oracle; an unusable oracle is reported, not raised."""
    ref = oracle / main if (oracle / main).exists() else oracle
    results = {v: _compare_or_error(ref, files[main]) for v, files in variants.items()}
    errors = [r["error"] for r in results.values() if "error" in r]
    if errors:
        return {"path": str(ref), "error": errors[0]}
    return {"path": str(ref), "variants": {v: headline(r) for v, r in results.items()}}


def repeats_quality(outputs: list[dict[str, Path]]) -> dict | None:
    """Determinism of one variant: are the repeats' outputs bit-identical (each against the first), and
    if not, how far apart (worst PSNR / max |d| for frames, worst relative L2 for tensors). None (not
    known) with an ``error`` when an unreadable output kept it from being checked."""
    outputs = [o for o in outputs if o]
    if not outputs:
        return None
    first = outputs[0]
    main = main_output(first)
    summary = {"runs": len(outputs), "bit_identical": True, "differing_runs": 0}
    worst: dict[str, float | str] = {}
    sha = None
    for other in outputs[1:]:
        same = set(other) == set(first)
        for name in first.keys() & other.keys():
            r = _compare_or_error(first[name], other[name])
            if "error" in r:  # unreadable: neither identical nor different, said in "error"
                worst.setdefault("error", r["error"])
                continue
            sha = r["sha256"][0] if name == main else sha
            same &= r["bit_identical"]
            if r["kind"] == "frames":
                worst["psnr_min_db"] = min(worst.get("psnr_min_db", math.inf), r["psnr_min_db"])
                worst["max_abs_diff"] = max(worst.get("max_abs_diff", 0), r["max_abs_diff"])
            else:
                worst["rel_l2_max"] = max(worst.get("rel_l2_max", 0.0), r["rel_l2"])
        summary["differing_runs"] += not same
    summary["bit_identical"] = False if summary["differing_runs"] else (None if "error" in worst else True)
    if sha is None:
        try:
            sha = content_sha256(open_media(first[main]))
        except BadInput as exc:
            sha, worst["error"] = "unreadable", exc.line()
    summary["sha256"] = sha[:12]
    if summary["bit_identical"] is not True or "error" in worst:
        summary.update(worst)
    return summary


def _db(x: float) -> str:
    return "inf" if x == math.inf else f"{x:.2f} dB"


def format_frames(r: dict) -> list[str]:
    """The text report of one frame comparison."""
    n, k = r["frames"], r["identical_frames"]
    where = "" if r.get("range", "0:") == "0:" else f" (frames {r['range']})"
    lines = [f"{n} frames{where}, data range 255, RGB: {k} of {n} frames identical"]
    if k < n:
        mean_of = f"over the {n - k} differing frames" if k else "of per-frame PSNR"
        lines += [f"PSNR mean {_db(r['psnr_mean_db'])} ({mean_of}), pooled MSE {_db(r['psnr_pooled_db'])} "
                  f"(ffmpeg's average), worst {_db(r['psnr_min_db'])} (frame {r['worst_frame']})",
                  f"mean |d| {r['mean_abs_diff']:.3f}/255, max |d| {r['max_abs_diff']}, "
                  f"|d| > 16 in {r['share_over_16']:.3%} of channel values"]
    if "ssim_mean" in r:
        lines.append(f"SSIM mean {r['ssim_mean']:.5f} (Wang et al. settings)")
    return lines


def format_result(r: dict, per_frame: bool = False) -> list[str]:
    if r["kind"] == "tensor":
        lines = [f"tensor {r['dtype']}{r['shape']}: rel L2 {r['rel_l2']:.3e}, cosine {r['cosine']:.8f}, "
                 f"max |d| {r['max_abs_diff']:.4g}, mean |d| {r['mean_abs_diff']:.4g}, "
                 f"PSNR {_db(r['psnr_db'])} (data range {r['data_range']:.4g}, A's max - min)"]
    else:
        lines = [f"A: {r['inputs'][0]}", f"B: {r['inputs'][1]}", *format_frames(r)]
        if per_frame:
            lines.append(pd.DataFrame(r["per_frame"]).to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    sha = r["sha256"]
    lines.append(f"bit-identical: {'yes' if r['bit_identical'] else 'no'} (sha256 {sha[0][:12]} vs {sha[1][:12]})")
    return lines


@click.command("quality")
@click.argument("a")
@click.argument("b", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the fields are a contract).")
@click.option("--per-frame", is_flag=True, help="Also give every frame's figures.")
@click.option("--ssim", is_flag=True, help="Also compute SSIM (slower).")
@click.option("--frames", "frame_range", metavar="START:STOP", help="Compare only these frames, e.g. 0:49.")
@click.option("--codec-floor", "with_floor", is_flag=True, help="Also report A against itself through --codec.")
@click.option("--codec", "codec_spec", default="libx264:crf=18:pix_fmt=yuv420p", show_default=True,
              metavar="CODEC[:k=v...]", help="Encoder settings for --codec-floor.")
@click.option("--drift", "as_drift", is_flag=True, help="A and B are per-step latents (steps, ...): a row per step.")
@click.option("--plot", type=click.Path(dir_okay=False), help="With --drift: write the plot to this PNG.")
def command(a, b, as_json, per_frame, ssim, frame_range, with_floor, codec_spec, as_drift, plot):
    """Compare output B against reference A: videos, PNG / JPEG folders, .npy / .npz, run outputs.

    Frames: per-frame PSNR (data range 255), its mean over differing frames and the pooled-MSE PSNR
    (ffmpeg's average), worst frame, mean / max |d|, share of |d| > 16, sha256. Tensors: relative L2,
    cosine, max |d|.
    """
    frames = parse_frame_range(frame_range)
    codec = parse_codec(codec_spec) if with_floor else None
    if b is None and as_drift:
        raise BadInput("--drift compares A's per-step latents with B's: give B", field="B")
    if b is None and not with_floor:
        raise BadInput("give B to compare with A, or --codec-floor", field="B")
    if as_drift:
        return _drift_command(a, b, as_json, plot)
    result = compare(a, b, frames, ssim=ssim, per_frame=per_frame) if b is not None else {}
    if codec is not None:
        result["codec_floor"] = floor = codec_floor(a, codec, frames, ssim=ssim)
    if as_json:
        click.echo(json.dumps(json_safe(result), indent=2))
        return
    if b is not None:
        for line in format_result(result, per_frame):
            click.echo(line)
    if codec is not None:
        click.echo(f"codec floor: A against itself through {floor['codec']} ({floor['bytes']} bytes):")
        for line in format_frames(floor):
            click.echo("  " + line)


def _drift_command(a: str, b: str, as_json: bool, plot: str | None) -> None:
    arrays = [open_media(p).array() for p in (a, b)]
    table = drift(*arrays, labels=(a, b))
    if plot:
        plot_drift(table, Path(plot), f"{b} against {a}")
    if as_json:
        click.echo(json.dumps(json_safe({"kind": "drift", "steps": len(table), "rows": table.to_dict("records")}),
                              indent=2))
    else:
        click.echo(table.to_string(index=False, float_format=lambda x: f"{x:.6g}"))
