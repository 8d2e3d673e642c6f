"""``perfkit quality`` against ffmpeg's psnr and ssim filters on the same h264 pair: whole processes, timed in
one run.

    .venv/bin/python benchmarks/quality_throughput.py [--frames 121] [--repeats 5] [--ssim]
        [--size 1280x720 --pix-fmt yuv444p --clip 140 --frames 280]

The pair is built with PyAV alone: the real generated video in tests/data/real (scaled to ``--size``, 960x544 by
default, by libswscale, played forward and back); A through x264 CRF 18 in ``--pix-fmt`` (yuv420p by default,
as served videos are), B = A's frames with mild seeded noise through the same codec. Clips longer than
``--clip`` frames (121 by default) repeat the encoded frames (packets remuxed, nothing re-encoded), so
``--frames 1210`` shows whether peak memory grows with the clip.

Timed alternately, ``--repeats`` times each (medians, and the best run: the least disturbed on a shared
machine): ``perfkit quality A B`` (the default: the source's own planes), ``perfkit quality A B --rgb`` (RGB24
too), ``ffmpeg -i A -i B -lavfi psnr -f null -`` and the same psnr after ``format=rgb24`` on both inputs (the
anchor of ``--rgb``) where an ffmpeg binary exists; with ``--ssim``, ``perfkit quality A B --ssim`` against
``ffmpeg -i A -i B -lavfi ssim -f null -``; ``perfkit quality --help``, and the decode floor: a Python
process that imports what the command imports before its first frame (click, numpy, PyAV) and decodes both
videos as it does, in two threads, computing nothing: what any PyAV-based command costs at least; and the
same floor hashing each frame's planes with sha256 as perfkit does (the ``sha256`` its contract gives),
which is what a command with that field costs at least. Printed:
median wall and CPU seconds (user + system, every thread), peak RSS of each process (ru_maxrss from wait4),
perfkit's ratios to its anchor (wall, and CPU: the steadier one where other jobs share the cores), and both
sides' figures in each space. The pair is built in a child process: a child's ru_maxrss starts from its
parent's size, so the timing parent stays small (the standard library only). perfkit's modules are
byte-compiled first, as installing it does: with PYTHONDONTWRITEBYTECODE set (this machine sets it) each run
would otherwise compile them again (~15 ms). The load average is printed before and after the timed runs: on a
shared machine the ratios (each command against its anchor in the same rounds) are the figures to read.
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

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "data" / "real" / "video" / "cogvideox_horse_720x480_49f.mp4"
PACKAGE = Path(__file__).resolve().parents[1] / "perfkit"
PERFKIT = [sys.executable, "-m", "perfkit.cli"]
RGB_GRAPH = "[0:v]format=rgb24[a];[1:v]format=rgb24[b];[a][b]psnr"  # perfkit.quality.planes.REPRODUCE["rgb"]
# each command's anchor: the ffmpeg command perfkit names as reproducing its figures (the others: ffmpeg's psnr)
ANCHORS = {"perfkit quality --rgb": "ffmpeg psnr of rgb24", "perfkit quality --ssim": "ffmpeg -lavfi ssim"}
# argv: "plain" or "sha256" (each frame's planes hashed as perfkit hashes them: the contract's sha256), then the videos
DECODE_FLOOR = """import hashlib, sys, threading
from pathlib import Path
import click, numpy, av
from perfkit.quality.media import DECODE_THREADS, VideoFile

def decode(path):
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = DECODE_THREADS
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


def build(folder: Path, frames: int, clip_frames: int, size: tuple[int, int], pix_fmt: str) -> None:
    """a.mp4 and b.mp4 in ``folder`` (run in a child process: see the module's docstring)."""
    # numpy and PyAV only in the child that builds the pair, never in the timing parent
    import av
    import numpy as np

    width, height = size
    with av.open(str(FIXTURE)) as c:
        src = [f.reformat(width=width, height=height, format="rgb24").to_ndarray() for f in c.decode(video=0)]
    order = (list(range(len(src))) + list(range(len(src) - 2, 0, -1))) * (clip_frames // len(src) + 2)
    clip = [src[i] for i in order[:clip_frames]]
    rng = np.random.default_rng(0)
    noisy = [np.clip(f.astype(np.int16) + rng.integers(-3, 4, f.shape, dtype=np.int16), 0, 255).astype(np.uint8)
             for f in clip]
    for name, content in (("a", clip), ("b", noisy)):
        once = folder / f"{name}{clip_frames}.mp4"
        with av.open(str(once), "w") as c:  # x264 CRF 18 at 24 fps
            s = c.add_stream("libx264", rate=24, options={"crf": "18"})
            s.width, s.height, s.pix_fmt = width, height, pix_fmt
            for i, f in enumerate(content):
                frame = av.VideoFrame.from_ndarray(f, format="rgb24")
                frame.pts, frame.time_base = i, Fraction(1, 24)
                c.mux(s.encode(frame))
            c.mux(s.encode())
        repeat(av, once, folder / f"{name}.mp4", frames // clip_frames)


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
    parser.add_argument("--frames", type=int, default=121, help="a multiple of --clip")
    parser.add_argument("--clip", type=int, default=121, help="frames encoded, repeated to --frames")
    parser.add_argument("--size", default="960x544", help="WIDTHxHEIGHT")
    parser.add_argument("--pix-fmt", default="yuv420p", help="the clips' pixel format (yuv420p, yuv444p, ...)")
    parser.add_argument("--ssim", action="store_true", help="also time perfkit quality --ssim and ffmpeg's ssim")
    parser.add_argument("--rgb", action=argparse.BooleanOptionalAction, default=True,
                        help="time perfkit quality --rgb and its anchor (--no-rgb: leave them out)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)  # the child that builds the pair
    args = parser.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))
    if args.frames % args.clip:
        parser.error(f"--frames must be a multiple of --clip ({args.clip})")
    if args.build:
        return build(args.build, args.frames, args.clip, size, args.pix_fmt)
    ffmpeg = shutil.which("ffmpeg")
    compileall.compile_dir(PACKAGE, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run([sys.executable, __file__, "--build", str(tmp), "--frames", str(args.frames), "--clip",
                        str(args.clip), "--size", args.size, "--pix-fmt", args.pix_fmt], check=True)
        pair = [str(tmp / "a.mp4"), str(tmp / "b.mp4")]
        print(f"{args.frames} frames of {args.size}, h264 CRF 18 {args.pix_fmt} (the real video, scaled), "
              f"{os.cpu_count()} CPUs")
        commands = {"perfkit quality": PERFKIT + ["quality", *pair, "--json"],
                    "perfkit quality --rgb": PERFKIT + ["quality", *pair, "--json", "--rgb"],
                    "perfkit quality --ssim": PERFKIT + ["quality", *pair, "--json", "--ssim"],
                    "perfkit quality --help": PERFKIT + ["quality", "--help"],
                    "decode floor": [sys.executable, "-c", DECODE_FLOOR, "plain", *pair],
                    "decode + sha256 floor": [sys.executable, "-c", DECODE_FLOOR, "sha256", *pair]}
        if ffmpeg:  # each space's anchor: the command perfkit names as reproducing its figures
            for name, graph in (("ffmpeg -lavfi psnr", "psnr"), ("ffmpeg psnr of rgb24", RGB_GRAPH),
                                ("ffmpeg -lavfi ssim", "ssim")):
                commands[name] = [ffmpeg, "-hide_banner", "-nostats", "-i", pair[0], "-i", pair[1], "-lavfi", graph,
                                  "-f", "null", "-"]
        left_out = ([] if args.rgb else ["perfkit quality --rgb", "ffmpeg psnr of rgb24"]) + \
            ([] if args.ssim else ["perfkit quality --ssim", "ffmpeg -lavfi ssim"])
        commands = {k: v for k, v in commands.items() if k not in left_out}
        runs: dict[str, list[dict]] = {k: [] for k in commands}
        load_before = os.getloadavg()
        for _ in range(args.repeats):  # alternating, so a busy machine slows every command alike
            for name, argv in commands.items():
                runs[name].append(timed(argv, tmp))
        print("load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}, after: {:.2f} {:.2f} {:.2f}".format(
            *load_before, *os.getloadavg()))
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
        if args.rgb:
            rgb = json.loads(runs["perfkit quality --rgb"][0]["out"])["rgb"]["psnr_db"]
            print("perfkit (RGB24):         " + " ".join(f"{k}:{v:.6f}" for k, v in rgb.items()))
            if ffmpeg:
                print("ffmpeg (rgb24):          " + runs["ffmpeg psnr of rgb24"][0]["err"].split("PSNR ")[-1].strip())
        if args.ssim:
            ssim = json.loads(runs["perfkit quality --ssim"][0]["out"])["ssim"]
            print("perfkit SSIM:            " + " ".join(f"{k.upper() if k != 'all' else 'All'}:{v:.6f}"
                                                         for k, v in ssim["ssim"].items()))
            if ffmpeg:
                print("ffmpeg SSIM:             " + runs["ffmpeg -lavfi ssim"][0]["err"].split("SSIM ")[-1].strip())


if __name__ == "__main__":
    main()
