"""Output quality: PSNR and friends for frames, videos and tensors, the codec floor, per-step drift and
the determinism of repeats. ``perfkit quality A B`` and the runner use the same functions.

Conventions, stated because papers and tools differ:
- Frames are uint8, data range 255. A pair of videos in one 8-bit planar YUV format is measured in its own
  planes (space ``yuv``: ``ffmpeg -i A -i B -lavfi psnr``); every pair can be measured in RGB after
  decoding to RGB24 (space ``rgb``: the same filter after ``format=rgb24``). ``perfkit.quality.planes`` says
  how each figure is made and pooled. The top-level figures are those of the headline space: ``rgb`` where
  RGB is computed (``rgb=True``, the default of the Python API and of a run's summary), else ``yuv``.
  Frames pair by index; ffmpeg's filter pairs them by timestamp (each frame of A with B's latest at or before
  it), the same for videos that start at 0 at one constant rate. Where two videos' timestamps pair otherwise,
  ``frames_paired`` says so and the commands given (``reproduce``) retime both inputs to their index.
- ``psnr_mean_db`` is the mean of per-frame PSNR over the frames that differ (what many papers report).
  Identical frames have infinite PSNR: they are counted in ``identical_frames`` ("k of N frames
  identical") and left out of that mean, never clamped; it is inf only when every frame is identical.
- ``psnr_pooled_db`` is the PSNR of the MSE pooled over all frames (ffmpeg psnr's ``average`` in that
  space); ``psnr_min_db`` is the worst frame (ffmpeg's ``min``).
- ``mean_abs_diff`` is in /255 units; ``share_over_16`` is the share of samples with |d| > 16.
- SSIM (on request) is ffmpeg's ``ssim`` filter's (``perfkit.quality.ssim``), in the source planes where the
  pair is measured in them, else in the RGB channels (ffmpeg's ``gbrp``). Not scikit-image's Gaussian-window SSIM
  on RGB, a different and lower figure on the same pair: it is one call on ``open_media(path).frames()`` for
  whoever needs it.
- ``sha256`` hashes the frames in the first space measured: a YUV pair's source planes (with or without RGB), or
  else the RGB24 frames; ``sha256_of`` names which.
- Tensors (any non-uint8 array): relative L2 ||a - b|| / ||a||, cosine similarity, max and mean |a - b|,
  and PSNR with A's range (max - min) as data range. A is the reference. NaN and inf are counted and left
  out of the figures, which are undefined (NaN) where one side's NaN or inf is not the other's
  (``compare_tensors``). A 0-d or empty array is refused.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import itertools
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, NamedTuple

import av
import numpy as np

from perfkit.errors import BadInput
from perfkit.quality.media import (DEFAULT_CODEC, FFMPEG_RELEASE, LATENTS_FILE, UNINDEXED, YUV_FORMATS, Codec, Media,
                                   VideoFile, load_array, main_output, open_media, output_files, outputs_folder,
                                   prefetch, size_text, write_video)
from perfkit.quality.planes import (CHANNELS, DATA_RANGE, YUV_PLANES, Decoded, Tally, first_video_streams, frame_sums,
                                    paired_by_index, psnr, trimmed, unrotated, yuv_sums)
from perfkit.quality.ssim import SsimTally, channels

if TYPE_CHECKING:
    import pandas as pd


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


def _hashed(frames: Iterator[Decoded], digest, space: str) -> Iterator[Decoded]:
    """Hash each frame as it passes (in the decoding thread): the bytes of its planes in ``space``, which
    for ``yuv`` are the raw video's (``ffmpeg -f rawvideo``) and for ``rgb`` a (T, H, W, C) array's."""
    for frame in frames:
        for plane in (frame.planes if space == "yuv" else (frame.rgb,)):
            digest.update(np.ascontiguousarray(plane))
        yield frame


def _decoded(media: Media, frames: FrameRange, yuv: bool, rgb: bool) -> Iterator[Decoded]:
    if yuv:
        return media.planes(*frames, rgb=rgb)
    return (Decoded(None, f) for f in media.frames(*frames))


def _space_planes(frame: Decoded, space: str) -> tuple[np.ndarray, ...]:
    """A decoded frame's planes in ``space``: the source's, or its RGB frame's channels."""
    return frame.planes if space == "yuv" else channels(frame.rgb)


def hashed_what(space: str, pix_fmt: str | None) -> str:
    """What ``sha256`` hashes when the frames are hashed in ``space``."""
    return f"{pix_fmt} planes" if space == "yuv" else "RGB24 frames"


TENSOR_HASHED = "array's bytes"  # what a tensor's sha256 hashes (C order)


class FrameTable(NamedTuple):
    """What a frame comparison measured: a Tally per space (the headline's last), SSIM per frame (in the first
    space), sha256s (of the first space's frames)."""

    tallies: dict[str, Tally]
    first: int
    ssim: SsimTally | None
    sha256: tuple[str, str]

    @property
    def headline(self) -> Tally:
        return list(self.tallies.values())[-1]

    def rows(self) -> list[dict]:
        """One record per frame: the headline space's figures, then every space's per-plane PSNR."""
        columns = {"frame": np.arange(self.first, self.first + len(self.headline.rows)),
                   **self.headline.per_frame()}
        for space, tally in self.tallies.items():
            if tally is not self.headline:
                per_frame = tally.per_frame()
                columns[f"psnr_{space}_db"] = per_frame["psnr_db"]
                columns.update({k: v for k, v in per_frame.items() if k.startswith("psnr_") and k != "psnr_db"})
        if self.ssim is not None:
            columns.update(self.ssim.per_frame())
        return [dict(zip(columns, values)) for values in zip(*(c.tolist() for c in columns.values()))]

    def summary(self) -> dict:
        """The aggregate fields of ``perfkit quality --json`` (equal-size frames)."""
        per_frame = self.headline.per_frame()
        frame_psnr, mse = per_frame["psnr_db"], per_frame["mse"]
        finite = frame_psnr[np.isfinite(frame_psnr)]
        worst = int(np.argmax(mse))
        out = {
            "frames": len(mse),
            "space": self.headline.space,
            "psnr_mean_db": float(finite.mean()) if len(finite) else math.inf,
            "psnr_pooled_db": float(psnr(mse.mean())),
            "psnr_min_db": float(frame_psnr[worst]),
            "worst_frame": self.first + worst,
            "identical_frames": int((mse == 0).sum()),
            "mean_abs_diff": float(per_frame["mean_abs_diff"].mean()),
            "max_abs_diff": int(per_frame["max_abs_diff"].max()),
            "share_over_16": float(per_frame["share_over_16"].mean()),
            "bit_identical": bool((per_frame["max_abs_diff"] == 0).all()),
        }
        for space, tally in self.tallies.items():
            out[space] = tally.ffmpeg_line()
        if self.ssim is not None:
            out["ssim"] = self.ssim.line()
        first = next(iter(self.tallies.values()))
        out["sha256_of"] = hashed_what(first.space, first.pix_fmt)
        return out


def frame_table(a: Iterator[Decoded], b: Iterator[Decoded], labels: tuple[str, str], spaces: tuple[str, ...],
                pix_fmt: str | None = None, ssim: bool = False, first: int = 0) -> FrameTable:
    """Per-frame, per-plane sums of two decoded frame streams in each of ``spaces`` (``yuv`` needs the
    frames' planes, ``rgb`` their RGB), read and hashed in background threads; ``first`` is the index of their
    first frame in the inputs. The last space is the headline; the first is the one hashed and, with ``ssim``,
    the one SSIM is measured in."""
    pair = f"{labels[0]} vs {labels[1]}"
    digests = hashlib.sha256(), hashlib.sha256()
    streams = prefetch(_hashed(a, digests[0], spaces[0])), prefetch(_hashed(b, digests[1], spaces[0]))
    tallies: dict[str, Tally] = {}
    ssim_tally: SsimTally | None = None
    try:
        for i, (fa, fb) in enumerate(itertools.zip_longest(*streams)):
            if fa is None or fb is None:
                short, longer = labels if fa is None else labels[::-1]
                raise BadInput(f"frame counts differ: {short} ends after {i} frames, {longer} has more; --frames "
                               f"{first}:{first + i} compares the frames both have", path=pair)
            shape_a, shape_b = ((fa.rgb.shape, fb.rgb.shape) if fa.rgb is not None else
                                ([p.shape for p in fa.planes], [p.shape for p in fb.planes]))
            if shape_a != shape_b:
                raise BadInput(f"frame sizes differ at frame {i}: {shape_a} vs {shape_b}", path=pair)
            if not tallies:
                tallies = _tallies(fa, spaces, pix_fmt)
                if ssim:
                    first_tally, n = tallies[spaces[0]], len(_space_planes(fa, spaces[0]))
                    ssim_tally = SsimTally(spaces[0], first_tally.planes[:n], first_tally.pix_fmt)
            for space, tally in tallies.items():
                tally.add(yuv_sums(fa.planes, fb.planes) if space == "yuv" else frame_sums(fa.rgb, fb.rgb))
            if ssim_tally is not None:
                try:
                    ssim_tally.add(_space_planes(fa, spaces[0]), _space_planes(fb, spaces[0]),
                                   (fa.source, fb.source) if spaces[0] == "yuv" else None)
                except BadInput as exc:
                    raise BadInput(exc.reason, path=pair) from None
    finally:
        for stream in streams:
            stream.close()
    if not tallies:
        raise BadInput("no frames to compare", path=pair)
    return FrameTable(tallies, first, ssim_tally, (digests[0].hexdigest(), digests[1].hexdigest()))


def _tallies(frame: Decoded, spaces: tuple[str, ...], pix_fmt: str | None) -> dict[str, Tally]:
    """Empty tallies shaped after the first frame: its planes' sizes, its channel count."""
    tallies = {}
    for space in spaces:
        if space == "yuv":
            tallies[space] = Tally(space, YUV_PLANES[:len(frame.planes)], tuple(p.size for p in frame.planes),
                                   pix_fmt)
        else:
            h, w, c = frame.rgb.shape
            tallies[space] = Tally(space, CHANNELS.get(c, tuple(f"c{i}" for i in range(c))), (h * w,) * c)
    return tallies


def tensor_table(a: np.ndarray, b: np.ndarray) -> "pd.DataFrame":
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
    import pandas as pd  # slow to import: only tensors and drift are tables, frames never

    return pd.DataFrame({
        "index": np.arange(len(a2)), "rel_l2": rel_l2, "cosine": cosine,
        "psnr_db": np.where(mse == 0, np.inf, np.where(data_range > 0, psnr(mse, data_range), np.nan)),
        "max_abs_diff": np.abs(d).max(axis=1), "mean_abs_diff": np.abs(d).mean(axis=1),
    })


def _sha256_array(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr)).hexdigest()


TENSOR_FIGURES = ("rel_l2", "cosine", "max_abs_diff", "mean_abs_diff", "psnr_db")


def compare_tensors(a: np.ndarray, b: np.ndarray, labels: tuple[str, str] = ("A", "B")) -> dict:
    """Two tensors of one shape and dtype, A the reference: the ``--json`` fields for tensors.

    NaN and inf are counted (``nonfinite``, ``nan``: [A, B]) and the figures are over the values finite in
    both (also given as ``finite`` where either side holds a NaN or inf). Where they part (``nonfinite_parted``:
    places where one side's NaN or inf is not matched by the same on the other side), the top-level figures
    are NaN (null in JSON): B is broken there, and figures over the rest alone would read as a good B to
    whatever reads only them (a run's summary, ``perfkit check``)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        raise BadInput(f"tensors differ in shape or dtype: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}",
                       path=f"{labels[0]} vs {labels[1]}")
    sha = [_sha256_array(a), _sha256_array(b)]
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    both = np.isfinite(flat_a) & np.isfinite(flat_b)
    counts = {"nonfinite": [0, 0], "nan": [0, 0], "nonfinite_parted": 0}
    if not both.all():
        odd_a, odd_b = flat_a[~both], flat_b[~both]
        counts = {"nonfinite": [int((~np.isfinite(x)).sum()) for x in (odd_a, odd_b)],
                  "nan": [int(np.isnan(x).sum()) for x in (odd_a, odd_b)],
                  # NaN against NaN and inf against the same inf are alike; anything else at these places parts
                  "nonfinite_parted": int((~((np.isnan(odd_a) & np.isnan(odd_b)) | (odd_a == odd_b))).sum())}
        flat_a, flat_b = flat_a[both], flat_b[both]
    figures = dict.fromkeys(TENSOR_FIGURES, math.nan)
    if flat_a.size:  # (none where every place holds a NaN or inf on one side)
        row = tensor_table(flat_a.reshape(1, -1), flat_b.reshape(1, -1)).iloc[0]
        figures = {k: float(row[k]) for k in TENSOR_FIGURES}
    out = {"kind": "tensor", "shape": list(a.shape), "dtype": str(a.dtype),
           **(dict.fromkeys(TENSOR_FIGURES, math.nan) if counts["nonfinite_parted"] else figures),
           # float64 first: numpy has no max - min of booleans
           "data_range": float(np.ptp(flat_a.astype(np.float64))) if flat_a.size else math.nan,
           # by the bytes the sha256s hash: NaN != NaN would call a file unlike itself
           "bit_identical": sha[0] == sha[1], "sha256": sha, **counts}
    if any(counts["nonfinite"]):
        out["finite"] = {"values": int(flat_a.size), **figures}
    return out


def compare_media(a: Media, b: Media, frames: FrameRange = ALL_FRAMES, *, ssim: bool = False,
                  per_frame: bool = False, rgb: bool = True) -> dict:
    """Two opened inputs, A the reference: frames (``perfkit quality --json`` fields) or tensors. Two videos
    of one YUV format are measured in their planes, and in RGB too unless ``rgb`` is False (which saves
    converting every frame: RGB's figures are then absent, the headline is YUV's)."""
    labels, pair = (a.label, b.label), f"{a.label} vs {b.label}"
    if a.kind != b.kind:
        raise BadInput(f"{a.label} holds {a.kind} ({a.detail}), {b.label} holds {b.kind} ({b.detail}): frames "
                       "(uint8, and images and videos) compare with frames, other arrays as tensors; convert one "
                       "side (a float image in [0, 1]: x 255, rounded, as uint8)", path=pair)
    if a.kind == "tensor":
        arrays = [m.array()[frames.start:frames.stop] for m in (a, b)]
        for m, arr in zip((a, b), arrays):
            if not arr.size:  # (the arrays are not empty: media refuses those)
                raise BadInput(f"has {m.count} rows; --frames {frames} selects none of them", path=m.label)
        return compare_tensors(*arrays, labels)
    if a.frame_shape != b.frame_shape:
        swapped = a.frame_shape[:2] == b.frame_shape[1::-1]  # (the turning is read only then: a first frame decoded)
        turned = [(m.label, m.rotation()) for m in (a, b) if swapped and isinstance(m, VideoFile)]
        turned = [f"{label} is to be shown turned {degrees} degrees" for label, degrees in turned if degrees % 180]
        why = (f" ({', '.join(turned)}: frames are compared as stored, and a copy ffmpeg made without -noautorotate "
               "stores them turned)" if turned else "")
        if a.frame_shape[:2] == b.frame_shape[:2]:  # the channels alone: say both (a gray array against RGB24 frames)
            raise BadInput(f"frame channels differ: {a.frame_shape[-1] if len(a.frame_shape) == 3 else 1} vs "
                           f"{b.frame_shape[-1] if len(b.frame_shape) == 3 else 1} (images and videos are compared "
                           "as RGB24, as ffmpeg's format=rgb24 makes them: 3)", path=pair)
        raise BadInput(f"frame sizes differ: {size_text(a.frame_shape)} vs {size_text(b.frame_shape)}{why}", path=pair)
    _check_counts(a, b, frames)
    # a full-range and a limited-range video hold one picture in other plane values: compared in RGB24, as a yuvj
    # and a yuv one are (the plain psnr filter measures their planes as they are, and warns)
    yuv = a.pix_fmt is not None and a.pix_fmt == b.pix_fmt and a.full_range == b.full_range
    spaces = ("yuv",) * yuv + ("rgb",) * (rgb or not yuv)
    table = frame_table(*(_decoded(m, frames, yuv, "rgb" in spaces) for m in (a, b)), labels, spaces,
                        a.pix_fmt, ssim, frames.start)
    n = len(table.headline.rows)
    if frames.stop is not None and n < frames.stop - frames.start:
        raise BadInput(f"asked for frames {frames}, both end after frame {frames.start + n - 1}", path=pair)
    out = {"kind": "frames", "inputs": [a.describe(), b.describe()], "range": str(frames), "ffmpeg": FFMPEG_RELEASE,
           "data_range": DATA_RANGE, **table.summary(), "sha256": list(table.sha256)}
    # the inputs whose frames the commands' format=rgb24 converts to 8 bits (5.1 otherwise): known once they are read
    deep = {side: m.over_8_bits for side, m in (("A", a), ("B", b)) if m.over_8_bits}
    if deep:
        out["over_8_bits"] = deep
    note = None if "yuv" in spaces else _plain_psnr_differs(a, b)
    if note:
        out["space_note"] = note
    dropped = [f"{m.label} ({m.alpha})" for m in (a, b) if m.alpha]
    tagged = [m for m in (a, b) if m.alpha_tag]
    decoders = " and ".join(dict.fromkeys(m.decoder for m in tagged))
    alpha = ([f"the alpha plane of {' and '.join(dropped)} is not compared (RGB24 drops it, as the commands' "
              "format=rgb24 does)"] * bool(dropped) +
             [f"the alpha plane of {' and '.join(f'{m.label} (tagged {m.alpha_tag})' for m in tagged)} is not "
              f"compared (ffmpeg's {decoders} decoder, the commands' too, does not decode it)"] * bool(tagged))
    if alpha:  # said: a change of transparency alone would read as bit-identical
        out["alpha"] = f"{'; '.join(alpha)}: the figures and sha256 are of the colour planes"
    paired = _paired_by_time(a, b, frames.start, n)
    if paired:
        out["frames_paired"] = paired
    turned = {m.label: m.rotation() for m in (a, b) if isinstance(m, VideoFile)}
    turned = {label: degrees for label, degrees in turned.items() if degrees}
    if turned:
        shown = ", ".join(f"{label} is to be shown turned {degrees} degrees" for label, degrees in turned.items())
        out["rotation"] = f"{shown}: frames are compared as stored, as ffmpeg does with -noautorotate"
    several = any(isinstance(m, VideoFile) and m.video_streams > 1 for m in (a, b))
    unread = [f"{side} is {m.ffmpeg_unreadable()}" for side, m in (("A", a), ("B", b)) if m.ffmpeg_unreadable()]
    for block in filter(None, (out.get(k) for k in ("yuv", "rgb", "ssim"))):  # each names its ffmpeg command
        if unread:  # said, not a command that cannot run
            block["reproduce"], block["no_reproduce"] = None, f"no ffmpeg command: {', '.join(unread)}"
            continue
        command = trimmed(block["reproduce"], frames.start, frames.stop)
        command = paired_by_index(command) if paired else command
        command = unrotated(command) if turned else command
        command = first_video_streams(command) if several else command
        block["reproduce"] = _inputs_spelled(command, a, b)
    if per_frame:
        out["per_frame"] = table.rows()
    return out


def _plain_psnr_differs(a: Media, b: Media) -> str | None:
    """Where a pair perfkit measures in RGB24 is one that ffmpeg's plain psnr (``ffmpeg -i A -i B -lavfi psnr``)
    measures otherwise, the sentence saying so: said, since that command is the figure people quote."""
    fa, fb = a.decoded_format, b.decoded_format
    if fa is None or fb is None or a.ffmpeg_unreadable() or b.ffmpeg_unreadable():  # no plain command
        return None
    plain = "`ffmpeg -i A -i B -lavfi psnr` alone"
    if fa != fb:
        # RGB formats of any depth or order: the filter measures them as RGB24 (checked: rgb24 against bgr0, rgba
        # and rgb48be give these figures); a palette, gray or YUV one is converted to one format with the other
        if av.VideoFormat(fa).is_rgb and av.VideoFormat(fb).is_rgb:
            return None
        return (f"A decodes to {fa}, B to {fb}: these figures are in RGB24; {plain} converts them to one format first "
                "and gives other figures")
    if a.pix_fmt and b.pix_fmt and a.full_range != b.full_range:
        full, limited = ("A", "B") if a.full_range else ("B", "A")
        return (f"{full} is full range, {limited} limited, both {fa}: these figures are in RGB24; {plain} measures "
                "the planes as they are and gives other figures")
    # 8-bit gray is not said: full range, RGB24 holds its plane three times over
    if fa.startswith(("yuv", "gray")) and fa != "gray":
        why = ("whose planes perfkit measures between two videos only" if fa in YUV_FORMATS else  # (JPEG frames)
               "whose own planes perfkit does not measure (the 8-bit YUV formats only)")
        return (f"both decode to {fa}, {why}: these figures are in RGB24; {plain} measures the {fa} planes and gives "
                "other figures")
    return None


def _paired_by_time(a: Media, b: Media, first: int, n: int) -> str | None:
    """Where ffmpeg's two-input filters, which pair each frame of A with B's latest frame at or before it in
    time, would pair these ``n`` frames from ``first`` otherwise than by index: a sentence saying so; None where
    they pair alike or the timestamps are not known (not two videos, a packet without one)."""
    ta, tb = a.times(), b.times()
    if ta is None or tb is None or min(len(ta), len(tb)) < first + n:
        return None
    other = [(i, bisect.bisect_right(tb, ta[i]) - 1) for i in range(first, first + n)]
    other = [(i, j) for i, j in other if j != i]
    if not other:
        return None
    i, j = other[0]
    with_b = f"B's frame {j} ({float(tb[j]):.3f} s)" if j >= 0 else "no frame of B"
    return (f"by index; by their timestamps ffmpeg's filters pair {len(other)} of the {n} otherwise (first A's frame "
            f"{i}, at {float(ta[i]):.3f} s, with {with_b}): the commands given retime both to their index")


def _inputs_spelled(command: str, a: Media, b: Media) -> str:
    """A ``REPRODUCE`` command with each folder of frames as ffmpeg reads it (``-i A/%03d.png``), where its file
    names number its frames; a plain ``-i A`` otherwise."""
    for placeholder, m in (("A", a), ("B", b)):
        spelled = m.ffmpeg_input(placeholder)
        if spelled:
            command = re.sub(rf"-i {placeholder}\b", lambda _: spelled, command, count=1)
    return command


def _check_counts(a: Media, b: Media, frames: FrameRange) -> None:
    """Refuse when both inputs' packets give frame counts that cannot match: before decoding, but for the shorter
    one where its container has no index (a stream cut short: its decoded frames name it cut)."""
    def selected(m: Media) -> int | None:
        return None if m.count is None else len(range(m.count)[frames.start:frames.stop])

    na, nb = selected(a), selected(b)
    if na is not None and nb is not None and na != nb:
        shorter = a if na < nb else b
        if isinstance(shorter, VideoFile) and shorter.demuxer in UNINDEXED:
            for _ in shorter.decoded(frames.start, frames.stop):
                pass
        selects = "" if frames == ALL_FRAMES else f" (--frames {frames} selects {na} vs {nb})"
        raise BadInput(f"frame counts differ: {a.count} vs {b.count}{selects}; --frames {frames.start}:"
                       f"{frames.start + min(na, nb)} compares the frames both have", path=f"{a.label} vs {b.label}")
    for m in (a, b):
        if m.count is not None and frames.stop is not None and m.count < frames.stop:
            raise BadInput(f"has {m.count} frames; --frames {frames} asks for more", path=m.label)


def compare(a, b, frames: FrameRange = ALL_FRAMES, *, ssim: bool = False, per_frame: bool = False,
            rgb: bool = True) -> dict:
    """Compare two inputs, A the reference: paths (as ``perfkit quality`` takes them) or arrays, uint8
    frames (T, H, W, C), one frame (H, W, C) or (H, W), or tensors of any other dtype and shape."""
    return compare_media(open_media(a, "A" if isinstance(a, np.ndarray) else None),
                         open_media(b, "B" if isinstance(b, np.ndarray) else None), frames,
                         ssim=ssim, per_frame=per_frame, rgb=rgb)


def floor_in_planes(ref: Media, codec: Codec, rgb: bool) -> bool:
    """Whether ``codec_floor`` measures ``ref`` in its source planes: without ``rgb``, for a YUV video that the
    codec encodes in the video's own pixel format (so the floor and a comparison of two such videos share a space)."""
    return not rgb and ref.pix_fmt == codec.pix_fmt


def codec_floor(reference, codec: Codec = DEFAULT_CODEC, frames: FrameRange = ALL_FRAMES, *,
                ssim: bool = False, rgb: bool = True) -> dict:
    """The reference against itself through ``codec``: the best a video served through that codec can score
    against the reference, so served-vs-reference figures can be judged. Encodes in memory. In RGB24: the frames
    decoded to RGB24 are encoded (the Python API's and a run's default); with ``rgb`` False, a YUV video in the
    codec's pixel format instead goes to the encoder as decoded, at its own frame rate, and is measured in its
    source planes, the space ``compare(..., rgb=False)`` headlines for two such videos (``floor_in_planes``).
    libx264 through PyAV is not bit-reproducible run to run, even on one thread: the floor moves by a few
    hundredths of a dB, and by up to a few tenths on a clip of a few small frames."""
    ref = open_media(reference)
    if ref.kind != "frames" or (ref.frame_shape or (3,))[-1] != 3:
        raise BadInput("the codec floor needs RGB frames", path=ref.label)
    planes = floor_in_planes(ref, codec, rgb)
    buffer = io.BytesIO()
    if planes:  # at the video's own rate, as it would be served
        write_video(ref.decoded(*frames), buffer, codec, fps=ref.rate or 24)
    else:
        write_video(ref.frames(*frames), buffer, codec)
    through = VideoFile(buffer.getvalue(), f"{ref.label} through {codec}")
    table = frame_table(_decoded(ref, frames, planes, not planes), _decoded(through, ALL_FRAMES, planes, not planes),
                        (ref.label, through.label), ("yuv",) if planes else ("rgb",), ref.pix_fmt, ssim=ssim,
                        first=frames.start)
    out = {"codec": str(codec), "bytes": len(buffer.getvalue()), "range": str(frames), **table.summary()}
    for block in filter(None, (out.get(k) for k in ("yuv", "rgb", "ssim"))):  # B is no file a command could name
        block["reproduce"], block["no_reproduce"] = None, "no ffmpeg command: B is A's encode, held in memory"
    return out


def drift(a: np.ndarray, b: np.ndarray, labels: tuple[str, str] = ("A", "B")) -> "pd.DataFrame":
    """Per-step latents of two variants, each (steps, ...): how far B drifts from A at every step."""
    if a.shape != b.shape or a.ndim < 2:
        raise BadInput(f"per-step latents must share a (steps, ...) shape: {list(a.shape)} vs {list(b.shape)}",
                       path=f"{labels[0]} vs {labels[1]}")
    if not a.size:  # (a run's latents.npy comes here unopened by media, which refuses empty arrays)
        raise BadInput(f"per-step latents of shape {list(a.shape)} hold no values", path=f"{labels[0]} vs {labels[1]}")
    return tensor_table(a, b).rename(columns={"index": "step"})


def plot_drift(table: "pd.DataFrame", path: Path, title: str = "B against A") -> Path:
    """Relative L2 and PSNR per step, as a PNG."""
    # matplotlib: only when a plot is asked for
    from matplotlib.figure import Figure

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


def content_sha256(media: Media) -> tuple[str, str]:
    """sha256 of the frames as a comparison with an input of the same kind hashes them (a YUV video's source
    planes, other frames decoded to RGB24), or of the tensor's bytes; and what it hashed (``sha256_of``)."""
    if media.kind == "tensor":
        return _sha256_array(media.array()), TENSOR_HASHED
    digest = hashlib.sha256()
    space = "yuv" if media.pix_fmt is not None else "rgb"
    for _ in _hashed(_decoded(media, ALL_FRAMES, space == "yuv", space == "rgb"), digest, space):
        pass
    return digest.hexdigest(), hashed_what(space, media.pix_fmt)


def headline(result: dict) -> dict:
    """The few figures a run summary keeps of one comparison (frames or tensor); ``psnr_db`` is the
    headline PSNR (for frames the mean over differing frames, in ``space``). A YUV pair adds ffmpeg psnr's
    pooled Y (``psnr_y_db``) and ``average`` (``psnr_yuv_db``) in the source's planes."""
    if result["kind"] == "tensor":
        return {k: result[k] for k in ("kind", "psnr_db", "rel_l2", "cosine", "mean_abs_diff", "max_abs_diff",
                                       "bit_identical")}
    keys = ("kind", "space", "frames", "psnr_pooled_db", "psnr_min_db", "identical_frames", "mean_abs_diff",
            "max_abs_diff", "share_over_16", "bit_identical")
    out = {"psnr_db": result["psnr_mean_db"], **{k: result[k] for k in keys}}
    if "yuv" in result:
        out.update(psnr_y_db=result["yuv"]["psnr_db"]["y"], psnr_yuv_db=result["yuv"]["psnr_db"]["average"])
    return out


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
    known) with an ``error`` when an unreadable output kept it from being checked, or without a second run."""
    outputs = [o for o in outputs if o]
    if not outputs:
        return None
    first = outputs[0]
    main = main_output(first)
    summary = {"runs": len(outputs), "bit_identical": True, "differing_runs": 0}
    worst: dict[str, float | str] = {}
    sha = of = None
    for other in outputs[1:]:
        same = set(other) == set(first)
        for name in first.keys() & other.keys():
            r = _compare_or_error(first[name], other[name])
            if "error" in r:  # unreadable: neither identical nor different, said in "error"
                worst.setdefault("error", r["error"])
                continue
            if name == main:
                sha, of = r["sha256"][0], r.get("sha256_of", TENSOR_HASHED)
            same &= r["bit_identical"]
            if r["kind"] == "frames":
                worst["psnr_min_db"] = min(worst.get("psnr_min_db", math.inf), r["psnr_min_db"])
                worst["max_abs_diff"] = max(worst.get("max_abs_diff", 0), r["max_abs_diff"])
            else:  # NaN where a repeat's NaN or inf part from the first's: the worst is then undefined
                before = worst.get("rel_l2_max", 0.0)
                worst["rel_l2_max"] = math.nan if math.isnan(before) or math.isnan(r["rel_l2"]) else \
                    max(before, r["rel_l2"])
        summary["differing_runs"] += not same
    # one run compares with nothing: not known (a one-round run's had read bit-identical)
    summary["bit_identical"] = False if summary["differing_runs"] else (
        None if "error" in worst or len(outputs) < 2 else True)
    if sha is None:
        try:
            sha, of = content_sha256(open_media(first[main]))
        except BadInput as exc:
            sha, worst["error"] = "unreadable", exc.line()
    summary["sha256"] = sha[:12]
    if of is not None:
        summary["sha256_of"] = of
    if summary["bit_identical"] is not True or "error" in worst:
        summary.update(worst)
    return summary
