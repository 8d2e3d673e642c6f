"""``perfkit quality`` against ffmpeg's psnr filter on the same h264 pair: whole processes, timed in one run.

    .venv/bin/python benchmarks/quality_throughput.py [--frames 121] [--repeats 5]

The pair is built with PyAV alone: the real generated video in ../shared/fixtures (scaled to 960x544 by
libswscale, played forward and back) or, without the fixtures, a moving gradient; A through x264 CRF 18
yuv420p (as served videos are), B = A's frames with mild seeded noise through the same codec. Clips longer
than 121 frames repeat the 121 encoded frames (packets remuxed, nothing re-encoded), so ``--frames 1210``
shows whether peak memory grows with the clip.

Timed alternately, ``--repeats`` times each (medians, and the best run: the least disturbed on a shared
machine): ``perfkit quality A B`` (the default: the source's own planes), ``perfkit quality A B --rgb`` (RGB24
too), ``ffmpeg -i A -i B -lavfi psnr -f null -`` and the same psnr after ``format=rgb24`` on both inputs (the
anchor of ``--rgb``) where an ffmpeg binary exists, ``perfkit quality --help``, and the decode floor: a Python
process that imports what the command imports before its first frame (click, numpy, PyAV) and decodes both
videos as it does, in two threads, computing nothing: what any PyAV-based command costs at least; and the
same floor hashing each frame's planes with sha256 as perfkit does (the ``sha256`` its contract gives),
which is what a command with that field costs at least. Printed:
median wall and CPU seconds (user + system, every thread), peak RSS of each process (ru_maxrss from wait4),
perfkit's ratios to its anchor (wall, and CPU: the steadier one where other jobs share the cores), and both
sides' figures in each space. The pair is built in a child process: a child's ru_maxrss starts from its
parent's size, so the timing parent stays small (the standard library only). perfkit's modules are
byte-compiled first, as installing it does: with PYTHONDONTWRITEBYTECODE set (this machine sets it) each run
would otherwise compile them again (~15 ms).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "video" / "cogvideox_horse_720x480_49f.mp4"
PACKAGE = Path(__file__).resolve().parents[1] / "perfkit"
HEIGHT, WIDTH, CLIP = 544, 960, 121
PERFKIT = [sys.executable, "-m", "perfkit.cli"]
RGB_GRAPH = "[0:v]format=rgb24[a];[1:v]format=rgb24[b];[a][b]psnr"  # perfkit.quality.planes.REPRODUCE["rgb"]
ANCHORS = {"perfkit quality --rgb": "ffmpeg psnr of rgb24"}  # the others: ffmpeg's psnr of the source planes
# argv: "plain" or "sha256" (each frame's planes hashed as perfkit hashes them: the contract's sha256), then the videos
DECODE_FLOOR = """import hashlib, sys, threading
from pathlib import Path
import click, numpy, av
from perfkit.quality.media import DECODE_THREADS, VideoFile

def decode(path):
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = DECODE_THREADS
        stream.thread_type = "AUTO"
        for packet in container.demux(stream):
            packet.decode()

def decode_hashed(path):
    digest = hashlib.sha256()
    for frame in VideoFile(Path(path), path).planes():
        for plane in frame.planes:
            digest.update(numpy.ascontiguousarray(plane))

target = decode_hashed if sys.argv[1] == "sha256" else decode
threads = [threading.Thread(target=target, args=(path,)) for path in sys.argv[2:]]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def build(folder: Path, frames: int) -> None:
    """a.mp4 and b.mp4 in ``folder`` (run in a child process: see the module's docstring)."""
    # numpy and PyAV only in the child that builds the pair, never in the timing parent
    import av
    import numpy as np

    if FIXTURE.is_file():
        with av.open(str(FIXTURE)) as c:
            src = [f.reformat(width=WIDTH, height=HEIGHT, format="rgb24").to_ndarray() for f in c.decode(video=0)]
        order = (list(range(len(src))) + list(range(len(src) - 2, 0, -1))) * (CLIP // len(src) + 2)
        clip = [src[i] for i in order[:CLIP]]
    else:
        t, y, x = np.meshgrid(np.arange(CLIP), np.arange(HEIGHT), np.arange(WIDTH), indexing="ij", sparse=True)
        clip = list(np.stack(np.broadcast_arrays((x + 3 * t) % 256, (y + 2 * t) % 256, (x + y) % 256), -1
                             ).astype(np.uint8))
    rng = np.random.default_rng(0)
    noisy = [np.clip(f.astype(np.int16) + rng.integers(-3, 4, f.shape, dtype=np.int16), 0, 255).astype(np.uint8)
             for f in clip]
    for name, content in (("a", clip), ("b", noisy)):
        once = folder / f"{name}{CLIP}.mp4"
        with av.open(str(once), "w") as c:  # x264 CRF 18 yuv420p at 24 fps
            s = c.add_stream("libx264", rate=24, options={"crf": "18"})
            s.width, s.height, s.pix_fmt = WIDTH, HEIGHT, "yuv420p"
            for i, f in enumerate(content):
                frame = av.VideoFrame.from_ndarray(f, format="rgb24")
                frame.pts, frame.time_base = i, Fraction(1, 24)
                c.mux(s.encode(frame))
            c.mux(s.encode())
        repeat(av, once, folder / f"{name}.mp4", frames // CLIP)


def repeat(av, src: Path, dest: Path, times: int) -> None:
    """``src``'s packets ``times`` over, timestamps shifted: a longer clip with nothing re-encoded (each copy
    starts at a keyframe)."""
    with av.open(str(src)) as probe:
        stream_in = probe.streams.video[0]
        packets = [(p.pts, p.dts, p.is_keyframe, bytes(p)) for p in probe.demux(stream_in) if p.size]
        step = packets[1][0] - packets[0][0] if len(packets) > 1 else 1
        span = max(p[0] for p in packets) + step
        with av.open(str(dest), "w") as out:
            stream = out.add_stream_from_template(stream_in)
            for k in range(times):
                for pts, dts, key, data in packets:
                    packet = av.Packet(data)
                    packet.stream, packet.time_base = stream, stream_in.time_base
                    packet.pts, packet.dts, packet.is_keyframe = pts + k * span, dts + k * span, key
                    out.mux(packet)


def timed(argv: list[str], logs: Path) -> dict:
    """One whole process: wall, CPU (user + sys of all its threads), peak RSS and its output. Spawned and
    waited for with wait4, which gives that child's own rusage."""
    out, err = logs / "stdout", logs / "stderr"
    start = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[
        (os.POSIX_SPAWN_OPEN, 1, str(out), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        (os.POSIX_SPAWN_OPEN, 2, str(err), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)])
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv[:5])} failed: {err.read_text()[-500:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024,
            "out": out.read_text(), "err": err.read_text()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=CLIP, help=f"a multiple of {CLIP}")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)  # the child that builds the pair
    args = parser.parse_args()
    if args.frames % CLIP:
        parser.error(f"--frames must be a multiple of {CLIP}")
    if args.build:
        return build(args.build, args.frames)
    ffmpeg = shutil.which("ffmpeg")
    compileall.compile_dir(PACKAGE, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run([sys.executable, __file__, "--build", str(tmp), "--frames", str(args.frames)], check=True)
        pair = [str(tmp / "a.mp4"), str(tmp / "b.mp4")]
        print(f"{args.frames} frames of {WIDTH}x{HEIGHT}, h264 CRF 18 yuv420p "
              f"({'the fixture video, scaled' if FIXTURE.is_file() else 'a gradient'}), {os.cpu_count()} CPUs")
        commands = {"perfkit quality": PERFKIT + ["quality", *pair, "--json"],
                    "perfkit quality --rgb": PERFKIT + ["quality", *pair, "--json", "--rgb"],
                    "perfkit quality --help": PERFKIT + ["quality", "--help"],
                    "decode floor": [sys.executable, "-c", DECODE_FLOOR, "plain", *pair],
                    "decode + sha256 floor": [sys.executable, "-c", DECODE_FLOOR, "sha256", *pair]}
        if ffmpeg:  # each space's anchor: the command perfkit names as reproducing its figures
            for name, graph in (("ffmpeg -lavfi psnr", "psnr"), ("ffmpeg psnr of rgb24", RGB_GRAPH)):
                commands[name] = [ffmpeg, "-hide_banner", "-nostats", "-i", pair[0], "-i", pair[1], "-lavfi", graph,
                                  "-f", "null", "-"]
        runs: dict[str, list[dict]] = {k: [] for k in commands}
        for _ in range(args.repeats):  # alternating, so a busy machine slows every command alike
            for name, argv in commands.items():
                runs[name].append(timed(argv, tmp))
        med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "cpu_s", "rss_mib")}
               for k, v in runs.items()}
        for name, m in med.items():
            against = ANCHORS.get(name, "ffmpeg -lavfi psnr")
            anchor = med.get(against)
            ratio = (f", {m['wall_s'] / anchor['wall_s']:.2f}x the wall of {against}, "
                     f"{m['cpu_s'] / anchor['cpu_s']:.2f}x its CPU" if anchor and "help" not in name else "")
            best = min(r["wall_s"] for r in runs[name])  # the least disturbed run on a shared machine
            print(f"{name:25s} wall {m['wall_s']:.2f} s median, {best:.2f} best (all "
                  f"{[round(r['wall_s'], 2) for r in runs[name]]}), CPU {m['cpu_s']:.2f} s, "
                  f"peak RSS {m['rss_mib']:.0f} MiB{ratio}")
        if not ffmpeg:
            print("ffmpeg: no binary on this machine; perfkit timed alone")
        figures = json.loads(runs["perfkit quality"][0]["out"])
        line = figures["yuv"]["psnr_db"]
        print("perfkit (source planes): " + " ".join(f"{k}:{v:.6f}" for k, v in line.items()))
        if ffmpeg:
            print("ffmpeg:                  " + runs["ffmpeg -lavfi psnr"][0]["err"].split("PSNR ")[-1].strip())
        rgb = json.loads(runs["perfkit quality --rgb"][0]["out"])["rgb"]["psnr_db"]
        print("perfkit (RGB24):         " + " ".join(f"{k}:{v:.6f}" for k, v in rgb.items()))
        if ffmpeg:
            print("ffmpeg (rgb24):          " + runs["ffmpeg psnr of rgb24"][0]["err"].split("PSNR ")[-1].strip())


if __name__ == "__main__":
    main()
