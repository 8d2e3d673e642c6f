"""Throughput of ``perfkit.quality.compare`` on a 121-frame 544x960 pair, from mp4 (x264 CRF 18, yuv420p)
and from npy, in frames per second and CPU time per frame pair (all threads; steadier than wall time on
a loaded machine), with the process's peak RSS (one decoded video is 181 MiB), and SSIM on 12 frames.

    .venv/bin/python benchmarks/quality_throughput.py [--frames 121] [--repeats 3]

Content: the real generated video in ../shared/fixtures (resized to 544x960, played forward and back to
121 frames) or, without the fixtures, a moving gradient. B is A with mild noise, as a lossy variant.
Each comparison runs in a fresh process so its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "video" / "cogvideox_horse_720x480_49f.mp4"
HEIGHT, WIDTH = 544, 960


def content(frames: int) -> np.ndarray:
    """uint8 (frames, 544, 960, 3)."""
    if FIXTURE.is_file():
        from skimage.transform import resize

        from perfkit.quality.media import open_media

        src = [resize(f, (HEIGHT, WIDTH), preserve_range=True).astype(np.uint8) for f in open_media(FIXTURE).frames()]
        order = (list(range(len(src))) + list(range(len(src) - 2, 0, -1))) * (frames // len(src) + 2)
        return np.stack([src[i] for i in order[:frames]])
    t, y, x = np.meshgrid(np.arange(frames), np.arange(HEIGHT), np.arange(WIDTH), indexing="ij", sparse=True)
    return np.stack(np.broadcast_arrays((x + 3 * t) % 256, (y + 2 * t) % 256, (x + y) % 256), -1).astype(np.uint8)


MEASURE = """
import json, os, re, sys, time
from perfkit.quality import compare as quality

def high_water_mib():  # VmHWM: this process's peak RSS (ru_maxrss would carry the parent's over exec)
    return int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024

before = high_water_mib()
ssim = sys.argv[3] == "ssim"  # SSIM is slow: 12 frames are enough for a rate
t, cpu = time.perf_counter(), os.times()
r = quality.compare(sys.argv[1], sys.argv[2], quality.FrameRange(0, 12) if ssim else quality.ALL_FRAMES, ssim=ssim)
wall, cpu_s = time.perf_counter() - t, sum(os.times()[:2]) - sum(cpu[:2])  # all threads' CPU time
print(json.dumps({"s": wall, "cpu_s": cpu_s, "frames": r["frames"], "psnr_pooled_db": r["psnr_pooled_db"],
                  "before_mib": before, "peak_mib": high_water_mib()}))
"""


def measure(a: Path, b: Path, repeats: int, ssim: bool = False) -> dict:
    runs = [json.loads(subprocess.run([sys.executable, "-c", MEASURE, str(a), str(b), "ssim" if ssim else ""],
                                      check=True, capture_output=True, text=True).stdout) for _ in range(repeats)]
    best = min(runs, key=lambda r: r["s"])
    return {**best, "fps": best["frames"] / best["s"], "all_s": [round(r["s"], 3) for r in runs]}


def decode_fps(path: Path) -> float:
    import av

    t = time.perf_counter()
    with av.open(str(path)) as c:
        n = sum(1 for f in c.decode(video=0) if f.to_ndarray(format="rgb24") is not None)
    return n / (time.perf_counter() - t)


def ffmpeg_psnr(a: Path, b: Path, repeats: int) -> dict | None:
    """ffmpeg's psnr filter on the same pair (best of ``repeats``), where an ffmpeg binary exists."""
    import re
    import shutil

    if shutil.which("ffmpeg") is None:
        return None
    times, out = [], ""
    for _ in range(repeats):
        t = time.perf_counter()
        out = subprocess.run(["ffmpeg", "-hide_banner", "-nostats", "-i", str(a), "-i", str(b), "-lavfi", "psnr",
                              "-f", "null", "-"], check=True, capture_output=True, text=True).stderr
        times.append(time.perf_counter() - t)
    frames = int(re.findall(r"frame=\s*(\d+)", out)[-1]) if "frame=" in out else None
    return {"s": min(times), "average_db": float(re.search(r"average:([\d.]+|inf)", out).group(1)), "frames": frames}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=121)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from perfkit.quality.media import write_video

    a = content(args.frames)
    rng = np.random.default_rng(0)
    b = np.clip(a.astype(np.int16) + rng.integers(-3, 4, a.shape, dtype=np.int16), 0, 255).astype(np.uint8)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, frames in (("a", a), ("b", b)):
            np.save(tmp / f"{name}.npy", frames)
            write_video(iter(frames), tmp / f"{name}.mp4")
        del a, b
        print(f"{args.frames} frames of {HEIGHT}x{WIDTH}x3 ({'fixture video' if FIXTURE.is_file() else 'gradient'}), "
              f"{args.frames * HEIGHT * WIDTH * 3 / 2**20:.0f} MiB decoded per input")
        print(f"PyAV decode alone, one mp4 to RGB24: {decode_fps(tmp / 'a.mp4'):.0f} frames/s")
        for label, suffix, ssim in (("mp4 pair", "mp4", False), ("npy pair", "npy", False),
                                    ("npy pair, SSIM", "npy", True)):
            r = measure(tmp / f"a.{suffix}", tmp / f"b.{suffix}", 1 if ssim else args.repeats, ssim)
            print(f"{label:16s} {r['fps']:6.0f} frames/s (best of {r['all_s']} s), "
                  f"{r['cpu_s'] / r['frames'] * 1e3:.1f} CPU ms per frame pair, PSNR pooled "
                  f"{r['psnr_pooled_db']:.2f} dB, peak RSS {r['peak_mib']:.0f} MiB ({r['before_mib']:.0f} before)")
        ff = ffmpeg_psnr(tmp / "a.mp4", tmp / "b.mp4", args.repeats)
        if ff is None:
            print("ffmpeg psnr filter: no ffmpeg binary here")
        else:  # ffmpeg compares in YUV (its average is over Y, U, V), perfkit in RGB: times compare, dB differ
            print(f"ffmpeg psnr filter, mp4 pair: {args.frames / ff['s']:6.0f} frames/s ({ff['s']:.2f} s), "
                  f"average {ff['average_db']:.2f} dB (YUV)")


if __name__ == "__main__":
    main()
