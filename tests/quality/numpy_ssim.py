"""The referee of perfkit's SSIM (libavfilter's ssim filter run through PyAV): the filter's definition
(libavfilter/vf_ssim.c, 8-bit planes) written out again in numpy, independent of libavfilter.

Per plane: the sums of a, b, a^2 + b^2 and a * b over 4x4 blocks on a 4-sample grid (the plane cut down to a
multiple of 4 each way); every 8x8 window of 2x2 neighbouring blocks gives Wang et al.'s SSIM with the filter's
integer constants (C1 = .01^2 * 255^2 * 64, C2 = .03^2 * 255^2 * 64 * 63, rounded), in int32 up to the four
factors, then in float32 as the filter computes it; the plane's SSIM is the mean over its windows. ``All`` is the
planes' SSIM weighted by their sizes (a 4:2:0 frame: Y 4/6, U and V 1/6 each).

ffmpeg builds whose x86 ``ssim_end_line`` predates the fix of its last 1-3 windows of a row (Debian 12's 5.1, for
one) differ from it on planes whose width / 4 - 1 leaves 1 when divided by 4 (a 720-wide 4:2:0
video's U and V); libavfilter 11 (the one PyAV bundles) agrees with its C code and with this module.
"""

from __future__ import annotations

import numpy as np

from perfkit.errors import BadInput

C1 = int(0.01 * 0.01 * 255 * 255 * 64 + 0.5)
C2 = int(0.03 * 0.03 * 255 * 255 * 64 * 63 + 0.5)
# Samples converted to float32 at a time: a chunk's temporaries stay in cache instead of being fresh pages every
# frame, and few enough numpy calls per frame that their overhead stays small.
CHUNK = 1 << 18


class Scratch:
    """Work arrays for planes of one size, kept from frame to frame: fresh ones every frame would be new pages
    from the kernel, whose faults cost more than the sums."""

    def __init__(self, shape: tuple[int, int]):
        h4, w4 = shape[0] >> 2, shape[1] >> 2
        width = 4 * w4
        self.rows = max(1, CHUNK // (4 * width))  # block rows a chunk
        self.blocks = np.empty((4, h4, w4), np.float32)
        self.a, self.b, self.plus = (np.empty((4 * self.rows, width), np.float32) for _ in range(3))
        self.column = np.empty((4, self.rows, width), np.float32)


def _block_sums(a: np.ndarray, b: np.ndarray, scratch: Scratch) -> np.ndarray:
    """(4, h/4, w/4) float32 sums over each 4x4 block of a + b, a - b, (a + b)^2 and (a - b)^2: exact integers
    (at most 16 * 510^2 < 2^24), from which the filter's sums of a, b, a^2 + b^2 and a * b follow exactly."""
    out = scratch.blocks
    h4, w4 = out.shape[1:]
    width = 4 * w4
    for r in range(0, h4, scratch.rows):
        n = min(scratch.rows, h4 - r)
        fa, fb, plus = scratch.a[:4 * n], scratch.b[:4 * n], scratch.plus[:4 * n]
        np.copyto(fa, a[4 * r:4 * (r + n), :width])  # to float32 once: cheaper than a casting add and subtract
        np.copyto(fb, b[4 * r:4 * (r + n), :width])
        plus = np.add(fa, fb, out=plus).reshape(n, 4, width)
        minus = np.subtract(fa, fb, out=fa).reshape(n, 4, width)
        column = scratch.column[:, :n]  # each column's sum over the block's 4 rows
        np.sum(plus, axis=1, out=column[0])
        np.sum(minus, axis=1, out=column[1])
        np.einsum("rkj,rkj->rj", plus, plus, out=column[2])
        np.einsum("rkj,rkj->rj", minus, minus, out=column[3])
        quads = column.reshape(4, n, w4, 4)
        block = out[:, r:r + n]
        np.add(quads[..., 0], quads[..., 1], out=block)
        block += quads[..., 2]
        block += quads[..., 3]
    return out


def _window_total(blocks: np.ndarray) -> float:
    """The sum of every 8x8 window's SSIM over block rows ``blocks`` (4, rows, w/4): windows of rows 1.. with
    the row above, as the filter adds them (float32 per window, added up in float64). With P and M a window's
    sums of a + b and a - b: s1 s2 = (P^2 - M^2) / 4 and s1^2 + s2^2 = (P^2 + M^2) / 2, so the filter's four
    int32 factors come from P, M and the sums of their squares, exactly (all below 2^31)."""
    w = blocks[:, :-1, :-1] + blocks[:, 1:, :-1]
    w += blocks[:, :-1, 1:]
    w += blocks[:, 1:, 1:]
    plus, minus, plus_sq, minus_sq = w.astype(np.int32)
    plus *= plus
    minus *= minus
    squares = (plus + minus) >> 1  # s1^2 + s2^2
    twice_s1s2 = (plus - minus) >> 1
    num = (twice_s1s2 + C1).astype(np.float32)  # 2 s1 s2 + C1
    num *= ((plus_sq - minus_sq) * 32 - twice_s1s2 + C2).astype(np.float32)  # 2 covar + C2: 64 s12 = 16 (PP - MM)
    den = (squares + C1).astype(np.float32)
    den *= ((plus_sq + minus_sq) * 32 - squares + C2).astype(np.float32)  # var + C2: 64 ss = 32 (PP + MM)
    num /= den
    return float(num.sum(dtype=np.float64))


def plane_ssim(a: np.ndarray, b: np.ndarray, scratch: Scratch | None = None) -> float:
    """The SSIM of one pair of uint8 planes (H, W), at least 8x8, as the filter gives it; ``scratch`` the work
    arrays of planes of this size."""
    h4, w4 = a.shape[0] >> 2, a.shape[1] >> 2
    if h4 < 2 or w4 < 2:
        raise BadInput(f"SSIM needs planes of at least 8x8 samples, got {a.shape[1]}x{a.shape[0]}")
    blocks = _block_sums(a, b, scratch or Scratch(a.shape))
    rows = max(1, CHUNK // (16 * w4))  # window rows a chunk, each with the block row above it
    total = sum(_window_total(blocks[:, r:r + rows + 1]) for r in range(0, h4 - 1, rows))
    return total / ((h4 - 1) * (w4 - 1))
