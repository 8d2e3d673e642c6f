"""Frame figures per plane, in the space a pair of inputs is compared in, pooled as ffmpeg's psnr filter pools them.

Two spaces, each named by the ffmpeg command that reproduces its figures:
- ``yuv``: the planes a video decodes to (Y, U, V of yuv420p, ...), compared as they are. This is what
  ``ffmpeg -i A -i B -lavfi psnr -f null -`` measures for such sources, and the figure quoted for video.
- ``rgb``: the channels of the frames decoded to RGB24 (a gray frame's one channel, RGBA's four):
  ffmpeg's psnr after ``format=rgb24`` on both inputs (``REPRODUCE["rgb"]``).

Per frame and plane, four exact integers: sum d^2, sum |d|, max |d| and the count of |d| > 16. A frame's MSE
is its sum d^2 over every sample of every plane divided by their number, which is ffmpeg's pixel-weighted
``mse_avg`` (for RGB, the mean of the channels' MSE). The pooled figures are ffmpeg's summary line: per plane
the PSNR of the mean per-frame MSE, ``average`` the PSNR of the mean frame MSE, ``min`` / ``max`` the worst and
best frame's PSNR. Data range 255.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

DATA_RANGE = 255
OVER = 16  # |d| above which a sample counts as visibly different (the reference PRs' threshold)
# 256 * 255**2 < 2**24: a float32 sum of 256 squared uint8 differences is exact, so per-plane sums are
# exact integers at float32 speed.
BLOCK = 256
# Samples summed at a time: a frame's rows in chunks of at most this many. The temporaries of a whole RGB frame
# (|d|, its planar copy, float32 of a channel) would be fresh pages from the kernel every frame, whose faults
# cost more than the sums; a chunk's come from the heap again and stay in cache (benchmarks/quality_throughput.py
# --rgb). A 960x544 Y plane is one chunk.
CHUNK = 1 << 19
SQ, AB, MAX, OVER_COUNT = range(4)  # the columns of a plane's sums

YUV_PLANES = ("y", "u", "v")
CHANNELS = {1: ("y",), 3: ("r", "g", "b"), 4: ("r", "g", "b", "a")}  # as ffmpeg's psnr names them
REPRODUCE = {
    "yuv": "ffmpeg -i A -i B -lavfi psnr -f null -",
    "rgb": "ffmpeg -i A -i B -lavfi '[0:v]format=rgb24[a];[1:v]format=rgb24[b];[a][b]psnr' -f null -",
}


def unrotated(command: str) -> str:
    """A ``REPRODUCE`` command (psnr's, or ssim's) taking each input's frames as stored, not turned as their
    display matrix says (ffmpeg turns them by default)."""
    return command.replace("ffmpeg -i A -i B", "ffmpeg -noautorotate -i A -noautorotate -i B", 1)


def prefiltered(command: str, chain: str) -> str:
    """A ``REPRODUCE`` command (psnr's, or ssim's) with the filters ``chain`` applied to each input first."""
    bare = re.fullmatch(r"(ffmpeg -i A -i B -lavfi )(\w+)( -f null -)", command)
    if bare:
        return f"{bare[1]}'[0:v]{chain}[a];[1:v]{chain}[b];[a][b]{bare[2]}'{bare[3]}"
    return command.replace("[0:v]", f"[0:v]{chain},").replace("[1:v]", f"[1:v]{chain},")


def first_video_streams(command: str) -> str:
    """A ``REPRODUCE`` command taking each input's first video stream by name: unnamed, ffmpeg's two-input filters
    take the first two video streams there are, both of A where A holds two (a cover picture, a second track)."""
    bare = re.fullmatch(r"(ffmpeg .*-lavfi )(\w+)( -f null -)", command)
    if bare:
        return f"{bare[1]}'[0:v:0][1:v:0]{bare[2]}'{bare[3]}"
    return command.replace("[0:v]", "[0:v:0]").replace("[1:v]", "[1:v:0]")


def paired_by_index(command: str) -> str:
    """A ``REPRODUCE`` command with each input's frames retimed to their index (``setpts=N/TB``: frame k at k s),
    so that ffmpeg pairs them by index as perfkit does, whatever their timestamps."""
    return prefiltered(command, "setpts=N/TB")


def trimmed(command: str, start: int, stop: int | None) -> str:
    """A ``REPRODUCE`` command measuring frames ``start:stop`` of each input alone (``trim``)."""
    bounds = ([f"start_frame={start}"] if start else []) + ([f"end_frame={stop}"] if stop is not None else [])
    return prefiltered(command, "trim=" + ":".join(bounds)) if bounds else command


class Decoded(NamedTuple):
    """One decoded frame: its source planes (a YUV video's; None otherwise) and/or its RGB (H, W, C) frame."""

    planes: tuple[np.ndarray, ...] | None
    rgb: np.ndarray | None
    source: object = None  # a video's: the decoder's frame (``av.VideoFrame``) whose buffers ``planes`` views


def psnr(mse, data_range: float = DATA_RANGE):
    """PSNR in dB of an MSE (scalar or array); inf where the MSE is 0."""
    mse = np.asarray(mse, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mse == 0, np.inf, 10.0 * np.log10(np.float64(data_range) ** 2 / mse))


def abs_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| of two uint8 arrays, without widening to int16."""
    d = np.maximum(a, b)
    d -= np.minimum(a, b)
    return d


def plane_sums(absd: np.ndarray) -> tuple[float, float, int, int]:
    """Exact sums of one plane's |d| (any layout): sum d^2, sum |d|, max |d|, count of |d| > OVER."""
    peak = int(absd.max())
    if not peak:  # equal planes (a deterministic program's outputs; a good encode's flat chroma): nothing to add
        return 0.0, 0.0, 0, 0
    flat = absd.astype(np.float32).reshape(-1)
    whole = flat.size - flat.size % BLOCK
    blocks, tail = flat[:whole].reshape(-1, BLOCK), flat[whole:]
    sq = np.matmul(blocks[:, None, :], blocks[:, :, None]).sum(dtype=np.float64) + float(tail @ tail)
    # einsum's row sums: faster than sum(axis=1) (benchmarks/quality_throughput.py), and no BLAS (a product
    # with a ones vector would start OpenBLAS's threads, which spin on the cores the decoders need)
    ab = np.einsum("ij->i", blocks).sum(dtype=np.float64) + float(tail.sum())
    return float(sq), float(ab), peak, int(np.count_nonzero(absd > OVER)) if peak > OVER else 0


def _pooled(total: tuple, part: tuple) -> tuple[float, float, int, int]:
    """Two chunks' sums of one plane as one: sums added (exact: integers far below 2**53), the larger max."""
    return total[SQ] + part[SQ], total[AB] + part[AB], max(total[MAX], part[MAX]), total[OVER_COUNT] + part[OVER_COUNT]


def frame_sums(a: np.ndarray, b: np.ndarray) -> list[tuple]:
    """The sums of each channel of one pair of (H, W, C) frames or (H, W) planes (one channel), ``CHUNK``
    samples of rows at a time."""
    if a.ndim == 2:
        a, b = a[..., None], b[..., None]
    h, w, c = a.shape
    rows = max(1, CHUNK // (w * c))
    total = [(0.0, 0.0, 0, 0)] * c
    for row in range(0, h, rows):
        absd = abs_diff(a[row:row + rows], b[row:row + rows])
        # one copy of a chunk into planar order: each channel's sums then read contiguous memory, not a stride
        planar = (absd[..., 0],) if c == 1 else np.ascontiguousarray(np.moveaxis(absd, -1, 0))
        total = [_pooled(t, plane_sums(channel)) for t, channel in zip(total, planar)]
    return total


def yuv_sums(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> list[tuple]:
    """The sums of each source plane of one frame pair."""
    return [frame_sums(pa, pb)[0] for pa, pb in zip(a, b)]


class Tally:
    """The per-frame, per-plane sums of one space, added a frame at a time; pooled on demand."""

    def __init__(self, space: str, planes: tuple[str, ...], samples: tuple[int, ...], pix_fmt: str | None = None):
        self.space, self.planes, self.pix_fmt = space, planes, pix_fmt
        self.samples = np.asarray(samples, dtype=np.float64)  # samples per plane
        self.rows: list[list[tuple]] = []

    def add(self, sums: list[tuple]) -> None:
        self.rows.append(sums)

    def sums(self) -> np.ndarray:
        """(frames, planes, 4): SQ, AB, MAX, OVER_COUNT."""
        return np.asarray(self.rows, dtype=np.float64).reshape(len(self.rows), len(self.planes), 4)

    def frame_mse(self) -> np.ndarray:
        """Per frame: sum d^2 over all samples / their number (ffmpeg's pixel-weighted ``mse_avg``)."""
        return self.sums()[:, :, SQ].sum(axis=1) / self.samples.sum()

    def plane_mse(self) -> np.ndarray:
        """(frames, planes): each plane's MSE per frame (ffmpeg's ``mse.y`` ...)."""
        return self.sums()[:, :, SQ] / self.samples

    def ffmpeg_line(self) -> dict:
        """ffmpeg psnr's summary line: PSNR per plane of the mean plane MSE, ``average`` of the mean frame
        MSE, ``min`` and ``max`` the worst and best frame; plus ``reproduce``, the command that prints it."""
        mse = self.frame_mse()
        line = dict(zip(self.planes, map(float, psnr(self.plane_mse().mean(axis=0)))))
        line.update(average=float(psnr(mse.mean())), min=float(psnr(mse.max())), max=float(psnr(mse.min())))
        return {**({"pix_fmt": self.pix_fmt} if self.pix_fmt else {}), "planes": list(self.planes), "psnr_db": line,
                "reproduce": REPRODUCE[self.space]}

    def per_frame(self) -> dict[str, np.ndarray]:
        """Per-frame columns: ``mse``, ``psnr_db``, |d| figures (over all samples), ``psnr_<plane>_db``."""
        s, n = self.sums(), self.samples.sum()
        mse = self.frame_mse()
        columns = {"mse": mse, "psnr_db": psnr(mse), "mean_abs_diff": s[:, :, AB].sum(axis=1) / n,
                   "max_abs_diff": s[:, :, MAX].max(axis=1).astype(np.int64),
                   "share_over_16": s[:, :, OVER_COUNT].sum(axis=1) / n}
        columns.update({f"psnr_{p}_db": psnr(self.plane_mse()[:, i]) for i, p in enumerate(self.planes)})
        return columns
