"""Output quality of one variant against another (or an oracle): PSNR and friends over uint8 frames.

Conventions, stated because papers and tools differ: data_range is 255 for uint8; ``psnr_mean_db`` is
the mean of per-frame PSNR (what many papers report); ``psnr_pooled_db`` is the PSNR of the MSE pooled
over all frames (ffmpeg's "average"); identical frames have infinite PSNR and are counted, not clamped.
"""

from __future__ import annotations

import hashlib

import numpy as np

DATA_RANGE = 255.0


def _psnr(mse: np.ndarray | float) -> np.ndarray:
    mse = np.asarray(mse, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(mse == 0, np.inf, 10.0 * np.log10(DATA_RANGE**2 / np.where(mse == 0, 1, mse)))


def sha256(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


def compare_frames(a: np.ndarray, b: np.ndarray) -> dict:
    """Compare uint8 frames (T, H, W, C) of equal shape; returns the ``perfkit quality --json`` fields."""
    if a.shape != b.shape:
        raise ValueError(f"frame shapes differ: {a.shape} vs {b.shape}")
    if a.ndim == 3:
        a, b = a[None], b[None]
    diff = a.astype(np.float32) - b.astype(np.float32)
    per_mse = (diff * diff).reshape(len(a), -1).mean(axis=1, dtype=np.float64)
    per_psnr = _psnr(per_mse)
    finite = np.isfinite(per_psnr)
    absd = np.abs(diff)
    return {
        "frames": int(len(a)),
        # Identical frames (inf) are counted in identical_frames, not averaged into the mean.
        "psnr_mean_db": float(np.mean(per_psnr[finite])) if finite.any() else float("inf"),
        "psnr_pooled_db": float(_psnr(per_mse.mean())),
        "psnr_min_db": float(np.min(per_psnr)),
        "identical_frames": int(np.sum(per_mse == 0)),
        "mean_abs_diff": float(absd.mean(dtype=np.float64)),
        "max_abs_diff": float(absd.max()),
        "bit_identical": bool(np.array_equal(a, b)),
        "sha256": [sha256(a), sha256(b)],
        "per_frame": [float(x) for x in per_psnr],
    }


def json_safe(value):
    """Infinite PSNR is written as the string "inf" in JSON (a contract)."""
    if isinstance(value, float) and np.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value
