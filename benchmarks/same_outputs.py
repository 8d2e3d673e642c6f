"""Every output of perfkit's analysis commands byte-identical between two commits, and (``--time``) the heavy
commands' speed, the two commits run alternately in one session.

    .venv/bin/python benchmarks/same_outputs.py --base main                 # against the working tree
    .venv/bin/python benchmarks/same_outputs.py --base main --new HEAD --time
    .venv/bin/python benchmarks/same_outputs.py --base main --quick --keep /tmp/inputs   # fewer, smaller inputs
    .venv/bin/python benchmarks/same_outputs.py --base main --only "trace tail"          # commands containing TEXT
    .venv/bin/python benchmarks/same_outputs.py --base main --time --no-compare --leave-out "trace tail"

Each side is a detached ``git worktree`` of its commit in a temporary folder (removed at the end, also on
Ctrl-C or an error), or the working tree as it is (``--new WORKTREE``, the default). Every command runs as a
user runs it, ``python -m perfkit.cli ...`` in a fresh process started in that side's tree with
``PYTHONPATH`` set to it, so each side runs its own code; this process never imports perfkit.

The inputs are made once, by the new side's generators, into one folder both sides read: the real files of
tests/data/real (Kineto, xplane, HLO dumps, the video), the hand-made traces of tests/trace/trace_builders.py
and perfkit.trace.synthetic, profiles of both shapes from benchmarks/trace_breakdown.py (one file and a
folder of files), the dumps of benchmarks/hlo_rank_diff.py, the 720p pair of benchmarks/quality_throughput.py,
a pair of arrays and broken files (a cut xplane, a cut Kineto file, a JSON that is no trace, a cut video, an
HLO dump of text that is no HLO). ``--quick`` leaves out the big profiles and the 720p pair.

Each command runs on the base side, then at once on the new one; their exit codes, stdout, stderr (each side's
tree path replaced by ``<tree>``) and the files they write are compared byte for byte. One line a command,
``same`` or ``DIFF`` (with the first differing lines), then the count; exit status 1 on any DIFF.

``--time``: the heavy commands (trace breakdown, collectives, diff, tail and export on 6M-event profiles of
both shapes, hlo-diff on the benchmark's dumps, quality on the 720p pair), base and new alternately for
``--rounds`` rounds (the order turned round each round), each a whole process waited for with ``os.wait4``:
wall seconds, CPU seconds (user + system of the process and the workers it waited for) and peak RSS. Printed
as medians and new/base ratios, ``<-- over 1.1x`` beside any ratio above 1.1. The first round's outputs are
compared as above. Both trees are byte-compiled first, as an install would be.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import filecmp
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SLOWER = 1.1  # the most new/base time allowed (issue 34)
BIG_EVENTS, TIMED_EVENTS = 1_200_000, 6_000_000  # the generated profiles: compared / timed
SHAPES = ("benchmark", "xprof")  # benchmarks/trace_breakdown.py --shape
OUT = "{OUT}"  # a command's output file: the same path on both sides, each side's file kept apart after its run


@dataclass
class Inputs:
    """The files the commands read, all under one folder both sides share."""
    traces: list[Path] = field(default_factory=list)  # each a trace file or a folder of them
    trace_pairs: list[tuple[Path, Path]] = field(default_factory=list)  # diff A B
    multi: list[list[Path]] = field(default_factory=list)  # several PATHS in one command
    dump_sets: list[Path] = field(default_factory=list)  # hlo-diff PATHS: a folder of rank<R>/ folders
    dump_pairs: list[tuple[Path, Path]] = field(default_factory=list)  # hlo-diff --ab A B
    cost_dumps: list[Path] = field(default_factory=list)
    quality_pairs: list[tuple[Path, Path]] = field(default_factory=list)
    broken_traces: list[Path] = field(default_factory=list)
    broken_quality: list[tuple[Path, Path]] = field(default_factory=list)
    broken_dumps: list[Path] = field(default_factory=list)
    timed_traces: list[Path] = field(default_factory=list)
    timed_dumps: list[Path] = field(default_factory=list)
    timed_quality: list[tuple[Path, Path]] = field(default_factory=list)


@dataclass
class Outcome:
    """One command's run on one side: exit code, where its stdout / stderr / written files were kept."""
    code: int
    stdout: Path
    stderr: Path
    files: list[Path]
    wall_s: float = 0.0
    cpu_s: float = 0.0
    rss_mib: float = 0.0


# Child programs run in the new tree (never in this process): the generators of the tests and benchmarks.
HANDMADE = """import sys
from pathlib import Path
sys.path.insert(0, "tests/trace")
from trace_builders import gpu_trace, straggler_trace, tpu_trace
from perfkit.trace.synthetic import tpu_profile
out = Path(sys.argv[1])
tpu_trace(out / "tpu.xplane.pb")
gpu_trace(out / "gpu.xplane.pb")
straggler_trace(out / "straggler.xplane.pb")
tpu_profile(out / "tpu_profile.xplane.pb", chips=4, steps=3)
(out / "folder").mkdir()
for host in range(2):
    tpu_profile(out / "folder" / f"host{host}.xplane.pb", chips=2, steps=3, host=f"t1v-n-{host}")
"""
HLO_DUMPS = """import sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
import hlo_rank_diff as bench
for name in sys.argv[2:]:
    ranks, numberings, programs, _ = bench.SCENARIOS[name]
    bench.write_ranks(Path(sys.argv[1]) / f"ranks-{name}", bench.LAYERS, ranks, numberings, programs)
"""
ARRAYS_AND_REENCODE = """import sys
from pathlib import Path
import numpy as np
sys.path.insert(0, "tests")
from reencode import crf30
out = Path(sys.argv[1])
rng = np.random.default_rng(0)
a = rng.standard_normal((4, 3, 64, 64)).astype(np.float32)
np.save(out / "a.npy", a)
np.save(out / "b.npy", a + rng.normal(0, 1e-3, a.shape).astype(np.float32))
crf30(Path(sys.argv[2]), out / "video_crf30.mp4")
"""


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def checked_out(commits: dict[str, str | None], scratch: Path):
    """Each side's tree: a detached worktree of its commit under ``scratch``, or the working tree (None)."""
    made = []
    try:
        roots = {}
        for side, commit in commits.items():
            if commit is None:
                roots[side] = REPO
                continue
            folder = scratch / side
            git("worktree", "add", "--detach", "--quiet", str(folder), commit)
            made.append(folder)
            if (folder / "setup.py").exists():  # its compiled module, beside its source as an editable install has it
                subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=folder, check=True,
                               capture_output=True)
            roots[side] = folder
        yield roots
    finally:
        for folder in made:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder)], capture_output=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], capture_output=True)


def in_tree(root: Path) -> dict:
    """The environment of a process that runs ``root``'s perfkit."""
    return {**os.environ, "PYTHONPATH": str(root)}


def generate(root: Path, argv: list[str], what: str) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, *argv], cwd=root, env=in_tree(root), capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"building {what} failed ({done.returncode}): {done.stderr[-1500:]}")
    print(f"  built {what} ({time.monotonic() - started:.0f} s)", flush=True)


def profile(root: Path, folder: Path, events: int, shape: str, files: int = 1) -> Path:
    """A profile from benchmarks/trace_breakdown.py: its file (or its folder of ``files`` files)."""
    if not (folder / "host0.xplane.pb").exists():
        generate(root, ["benchmarks/trace_breakdown.py", "--keep", str(folder), "--no-xprof", "--repeats", "1",
                        "--events", str(events), "--shape", shape, "--files", str(files)],
                 f"{events:,}-event {shape}-shaped profile in {files} file(s)")
        (folder / "export.json").unlink(missing_ok=True)
    return folder / "host0.xplane.pb" if files == 1 else folder


def cut(src: Path, dest: Path, share: float) -> Path:
    """The first ``share`` of ``src``'s bytes: a file broken off mid-way."""
    data = src.read_bytes()
    dest.write_bytes(data[:int(len(data) * share)])
    return dest


def build_inputs(new: Path, folder: Path, quick: bool, timing: bool) -> Inputs:
    """Every input, made once into ``folder`` by the new tree's generators (kept ones reused)."""
    real = new / "tests" / "data" / "real"
    copy = folder / "real"
    if not copy.exists():  # both sides read one copy, whatever each tree's fixtures are
        shutil.copytree(real, copy, ignore=shutil.ignore_patterns("*.md", "licenses"))
    made = Inputs()
    kineto = sorted((copy / "kineto").glob("*.json*"))
    made.traces += sorted((copy / "xplane").glob("*.pb")) + kineto
    made.multi.append([copy / "kineto" / "rank-0.json.gz", copy / "kineto" / "rank-1.json.gz"])
    made.trace_pairs.append((copy / "kineto" / "hta_trace_diff_control.json.gz",
                             copy / "kineto" / "hta_trace_diff_test.json.gz"))
    handmade = folder / "handmade"
    if not handmade.exists():
        handmade.mkdir()
        generate(new, ["-c", HANDMADE, str(handmade)], "the tests' hand-made traces")
    made.traces += [handmade / f"{name}.xplane.pb" for name in ("tpu", "gpu", "straggler", "tpu_profile")]
    made.traces.append(handmade / "folder")
    made.trace_pairs.append((handmade / "tpu.xplane.pb", handmade / "straggler.xplane.pb"))
    dumps = folder / "dumps"
    scenarios = ["8"] if quick else ["8", "8-programs"]
    missing = [name for name in scenarios if not (dumps / f"ranks-{name}").exists()]
    if missing:
        generate(new, ["-c", HLO_DUMPS, str(dumps), *missing], f"hlo-diff dumps ({', '.join(missing)})")
    made.dump_sets += [dumps / f"ranks-{name}" for name in scenarios]
    made.dump_pairs.append((dumps / "ranks-8" / "rank0", dumps / "ranks-8" / "rank5"))
    real_dumps = sorted(p for p in (copy / "hlo").iterdir() if p.is_dir())
    made.dump_sets += [copy / "hlo", *real_dumps]
    made.dump_pairs += list(itertools.pairwise(real_dumps))
    made.cost_dumps += [*real_dumps, dumps / "ranks-8" / "rank0"]
    video = next((copy / "video").glob("*.mp4"))
    arrays = folder / "arrays"
    if not arrays.exists():
        arrays.mkdir()
        generate(new, ["-c", ARRAYS_AND_REENCODE, str(arrays), str(video)], "arrays and the video's CRF 30 re-encode")
    made.quality_pairs += [(video, arrays / "video_crf30.mp4"), (video, video), (arrays / "a.npy", arrays / "b.npy")]
    broken = folder / "broken"
    if not broken.exists():
        broken.mkdir()
        cut(next((copy / "xplane").glob("*.pb")), broken / "cut.xplane.pb", 0.6)
        cut(copy / "kineto" / "rank-0.json.gz", broken / "cut.json.gz", 0.5)
        (broken / "not_a_trace.json").write_text('{"hello": "world", "values": [1, 2, 3]}\n')
        cut(video, broken / "cut.mp4", 0.3)
        (broken / "not_hlo" / "rank0").mkdir(parents=True)
        (broken / "not_hlo" / "rank0" / "module_0001.jit_x.gpu_after_optimizations.txt").write_text("not HLO at all\n")
    made.broken_traces += [broken / "cut.xplane.pb", broken / "cut.json.gz", broken / "not_a_trace.json"]
    made.broken_quality.append((video, broken / "cut.mp4"))
    made.broken_dumps.append(broken / "not_hlo")
    if not quick:
        big = [profile(new, folder / f"profile-{shape}", BIG_EVENTS, shape) for shape in SHAPES]
        made.traces += big
        made.trace_pairs.append((big[0], big[1]))
        made.traces.append(profile(new, folder / "profile-folder", BIG_EVENTS, "benchmark", files=4))
    if not quick or timing:
        pair = folder / "pair720"
        if not (pair / "b.mp4").exists():
            pair.mkdir(exist_ok=True)
            generate(new, ["benchmarks/quality_throughput.py", "--build", str(pair), "--frames", "280", "--clip", "140",
                           "--size", "1280x720", "--pix-fmt", "yuv420p"], "the 720p h264 pair")
        made.quality_pairs.append((pair / "a.mp4", pair / "b.mp4"))
        made.timed_quality.append((pair / "a.mp4", pair / "b.mp4"))
    if timing:
        made.timed_traces += [profile(new, folder / f"timed-{shape}", TIMED_EVENTS, shape) for shape in SHAPES]
        made.timed_dumps += [dumps / f"ranks-{name}" for name in ("8", "8-programs")]
        if not (dumps / "ranks-8-programs").exists():
            generate(new, ["-c", HLO_DUMPS, str(dumps), "8-programs"], "hlo-diff dumps (8-programs)")
    return made


def trace_commands(path: Path) -> list[list[str]]:
    """Every trace command on one trace file or folder."""
    p = str(path)
    commands = [["trace", "breakdown", p], ["trace", "breakdown", "--json", p],
                ["trace", "breakdown", "--window", "trace", p], ["trace", "tail", p], ["trace", "tail", "--json", p],
                ["trace", "collectives", p], ["trace", "collectives", "--json", p], ["trace", "diff", p, p],
                ["trace", "diff", "--by", "op", p, p], ["trace", "diff", "--json", p, p],
                ["trace", "export", p, "--perfetto", OUT + ".json"]]
    if ".json" in path.name:  # Kineto: HTA's default leaves the last step out
        commands.append(["trace", "breakdown", "--last-step", "drop", p])
    return commands


def compared_commands(made: Inputs) -> list[list[str]]:
    """Every command whose outputs both sides must give alike."""
    commands = [command for path in made.traces for command in trace_commands(path)]
    commands.append(["trace", "breakdown", str(made.traces[0]), "--plot", OUT + ".png"])
    for paths in made.multi:
        names = [str(p) for p in paths]
        commands += [["trace", "breakdown", *names], ["trace", "collectives", *names], ["trace", "tail", *names]]
    for a, b in made.trace_pairs:
        commands += [["trace", "diff", str(a), str(b)], ["trace", "diff", "--by", "op", str(a), str(b)],
                     ["trace", "diff", "--json", str(a), str(b)], ["trace", "diff", "--window", "trace", str(a), str(b)]]
    for dumps in made.dump_sets:
        commands += [["hlo-diff", str(dumps)], ["hlo-diff", "--json", str(dumps)], ["hlo-diff", "--markdown", str(dumps)]]
    for a, b in made.dump_pairs:
        commands += [["hlo-diff", "--ab", str(a), str(b)], ["hlo-diff", "--ab", "--json", str(a), str(b)],
                     ["hlo-diff", "--ab", "--markdown", str(a), str(b)], ["hlo-diff", "--ab", "--chip", "v5p", str(a), str(b)]]
    for dumps in made.cost_dumps:
        commands += [["cost", str(dumps), "--chip", "h100"], ["cost", str(dumps), "--chip", "mi300x", "--json"]]
    for a, b in made.quality_pairs:
        commands += [["quality", str(a), str(b)], ["quality", "--json", str(a), str(b)]]
        if a.suffix == ".mp4":
            commands += [["quality", "--ssim", str(a), str(b)], ["quality", "--rgb", "--json", str(a), str(b)]]
    a, b = made.quality_pairs[0]
    commands.append(["quality", "--per-frame", "--json", "--ssim", str(a), str(b)])
    for path in made.broken_traces:
        commands += [["trace", "breakdown", str(path)], ["trace", "tail", "--json", str(path)]]
    for a, b in made.broken_quality:
        commands.append(["quality", str(a), str(b)])
    for dumps in made.broken_dumps:
        commands += [["hlo-diff", str(dumps)], ["cost", str(dumps / "rank0")]]
    return commands


def timed_commands(made: Inputs) -> list[list[str]]:
    """The heavy commands ``--time`` measures."""
    commands = []
    for path in made.timed_traces:
        p = str(path)
        commands += [["trace", "breakdown", p], ["trace", "collectives", p], ["trace", "diff", p, p],
                     ["trace", "tail", p], ["trace", "export", p, "--perfetto", OUT + ".json"]]
    commands += [["hlo-diff", str(dumps)] for dumps in made.timed_dumps]
    for a, b in made.timed_quality:
        commands += [["quality", str(a), str(b)], ["quality", "--ssim", str(a), str(b)],
                     ["quality", "--rgb", str(a), str(b)]]
    return commands


def run(root: Path, command: list[str], written: Path, kept: Path) -> Outcome:
    """``command`` as a whole process of ``root``'s perfkit, its outputs kept under ``kept``: stdout, stderr and
    the file it wrote at ``written`` (moved there after the run). Wall, CPU and peak RSS from ``os.wait4``."""
    argv = [sys.executable, "-m", "perfkit.cli", *(a.replace(OUT, str(written)) for a in command)]
    outputs = [Path(a.replace(OUT, str(written))) for a in command if OUT in a]
    stdout, stderr = kept.with_suffix(".out"), kept.with_suffix(".err")
    with stdout.open("wb") as out, stderr.open("wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=root, env=in_tree(root), stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped above: Popen must not wait for it again
    files = []
    for number, output in enumerate(outputs):
        moved = kept.with_suffix(f".file{number}")
        if output.exists():
            shutil.move(output, moved)
        files.append(moved)
    return Outcome(proc.returncode, stdout, stderr, files, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def normalized(path: Path, root: Path) -> bytes:
    return path.read_bytes().replace(str(root).encode(), b"<tree>")


def first_difference(a: bytes, b: bytes, what: str) -> str:
    """The first line where ``a`` and ``b`` part, with its neighbour, each side's."""
    lines_a, lines_b = a.splitlines(), b.splitlines()
    at = next((i for i, (x, y) in enumerate(zip(lines_a, lines_b)) if x != y), min(len(lines_a), len(lines_b)))
    show = lambda lines: " | ".join(line.decode(errors="replace")[:160] for line in lines[at:at + 2]) or "(end)"  # noqa: E731
    return f"    {what} line {at + 1}: base: {show(lines_a)}\n    {what} line {at + 1}:  new: {show(lines_b)}"


def differences(base: Outcome, new: Outcome, roots: dict[str, Path]) -> list[str]:
    """What differs between the two sides' outcomes of one command (empty: byte-identical)."""
    found = []
    if base.code != new.code:
        found.append(f"    exit code: base {base.code}, new {new.code}")
    for what in ("stdout", "stderr"):
        a, b = normalized(getattr(base, what), roots["base"]), normalized(getattr(new, what), roots["new"])
        if a != b:
            found.append(first_difference(a, b, what))
    for number, (a, b) in enumerate(zip(base.files, new.files)):
        if a.exists() != b.exists():
            found.append(f"    written file {number}: base {'wrote' if a.exists() else 'did not write'} it, new "
                         f"{'wrote' if b.exists() else 'did not write'} it")
        elif a.exists() and not filecmp.cmp(a, b, shallow=False):
            found.append(first_difference(a.read_bytes(), b.read_bytes(), f"written file {number}"))
    return found


def shown(command: list[str], folder: Path) -> str:
    return " ".join(command).replace(str(folder), "IN")


def compare(commands: list[list[str]], roots: dict[str, Path], scratch: Path, inputs: Path) -> int:
    """Each command on both sides, one after the other; one line each. Returns how many differed."""
    written, kept = scratch / "written", scratch / "kept"
    written.mkdir(exist_ok=True)
    kept.mkdir(exist_ok=True)
    differed = 0
    for number, command in enumerate(commands):
        outcomes = {side: run(roots[side], command, written / "output", kept / f"{number}-{side}")
                    for side in ("base", "new")}
        found = differences(outcomes["base"], outcomes["new"], roots)
        differed += bool(found)
        print(f"{'DIFF' if found else 'same'} (exit {outcomes['base'].code}) {shown(command, inputs)}", flush=True)
        for line in found:
            print(line, flush=True)
        for outcome in outcomes.values():
            for path in (outcome.stdout, outcome.stderr, *outcome.files):
                path.unlink(missing_ok=True)
    return differed


def timings(commands: list[list[str]], roots: dict[str, Path], rounds: int, scratch: Path, inputs: Path) -> int:
    """Each heavy command on both sides, alternately, ``rounds`` times; the medians and ratios, printed. Compares
    the first round's outputs; returns how many differed."""
    written, kept = scratch / "written", scratch / "kept"
    written.mkdir(exist_ok=True)
    kept.mkdir(exist_ok=True)
    for root in roots.values():
        compileall.compile_dir(root / "perfkit", quiet=1)
    runs: dict[tuple[int, str], list[Outcome]] = {}
    differed = 0
    load_before = os.getloadavg()
    for r in range(rounds):
        for number, command in enumerate(commands):
            order = ("base", "new") if (r + number) % 2 == 0 else ("new", "base")
            outcomes = {side: run(roots[side], command, written / "output", kept / f"t{number}-{side}") for side in order}
            for side, outcome in outcomes.items():
                runs.setdefault((number, side), []).append(outcome)
                if outcome.code not in (0, 1):
                    print(f"  {side} exited {outcome.code}: {shown(command, inputs)}", flush=True)
            if r == 0:
                found = differences(outcomes["base"], outcomes["new"], roots)
                differed += bool(found)
                print(f"{'DIFF' if found else 'same'} (exit {outcomes['base'].code}) {shown(command, inputs)}", flush=True)
                for line in found:
                    print(line, flush=True)
            for outcome in outcomes.values():
                for path in (outcome.stdout, outcome.stderr, *outcome.files):
                    path.unlink(missing_ok=True)
        print(f"  round {r + 1} of {rounds} done, load average {os.getloadavg()[0]:.1f}", flush=True)
        print_timings(commands, runs, load_before, inputs)
    return differed


def print_timings(commands: list[list[str]], runs: dict[tuple[int, str], list[Outcome]], load_before: tuple,
                  inputs: Path) -> None:
    """The medians of the rounds so far and new/base ratios, as a Markdown table (after every round: a run
    cut short still leaves its figures)."""
    rounds = len(runs[0, "base"])
    print(f"\nload average (1, 5, 15 min) before: {' '.join(f'{x:.2f}' for x in load_before)}, now: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs; medians of {rounds} round(s)")
    print("| command | base wall / CPU (s) | new wall / CPU (s) | new/base wall | new/base CPU | peak RSS base / new (MiB) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for number, command in enumerate(commands):
        med = {side: {k: statistics.median(getattr(o, k) for o in runs[number, side]) for k in ("wall_s", "cpu_s")}
               for side in ("base", "new")}
        rss = {side: max(o.rss_mib for o in runs[number, side]) for side in ("base", "new")}
        ratio = {k: med["new"][k] / med["base"][k] for k in ("wall_s", "cpu_s")}
        mark = {k: f"{ratio[k]:.2f}x" + (" <-- over 1.1x" if ratio[k] > SLOWER else "") for k in ratio}
        print(f"| {shown(command, inputs)} | {med['base']['wall_s']:.2f} / {med['base']['cpu_s']:.2f} | "
              f"{med['new']['wall_s']:.2f} / {med['new']['cpu_s']:.2f} | {mark['wall_s']} | {mark['cpu_s']} | "
              f"{rss['base']:.0f} / {rss['new']:.0f} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the commit before the change")
    parser.add_argument("--new", default="WORKTREE", help="the commit after it (default: the working tree as it is)")
    parser.add_argument("--time", action="store_true", help="also time the heavy commands, interleaved")
    parser.add_argument("--rounds", type=int, default=3, help="--time: rounds of base and new (default 3)")
    parser.add_argument("--quick", action="store_true", help="leave out the big profiles (and the 720p pair unless --time)")
    parser.add_argument("--no-compare", action="store_true", help="--time alone: skip the byte-for-byte pass")
    parser.add_argument("--only", metavar="TEXT", help="only commands whose line contains TEXT")
    parser.add_argument("--leave-out", metavar="TEXT", help="leave out the commands whose line contains TEXT")
    parser.add_argument("--keep", type=Path, help="make the inputs in this folder and keep them (those there are reused)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the worktrees are removed on a kill too
    commits = {"base": git("rev-parse", "--verify", args.base + "^{commit}"),
               "new": None if args.new == "WORKTREE" else git("rev-parse", "--verify", args.new + "^{commit}")}
    scratch = Path(tempfile.mkdtemp(prefix="same-outputs-"))
    try:
        with checked_out(commits, scratch) as roots:
            inputs = args.keep or scratch / "inputs"
            inputs.mkdir(parents=True, exist_ok=True)
            dirty = " (uncommitted changes included)" if commits["new"] is None and git("status", "--porcelain", "--",
                                                                                       "perfkit") else ""
            print(f"base {commits['base'][:9]}, new {(commits['new'] or 'the working tree')[:9]}{dirty}; inputs in "
                  f"{inputs} (IN below); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
            made = build_inputs(roots["new"], inputs, args.quick, args.time)
            chosen = lambda commands: [c for c in commands if (not args.only or args.only in " ".join(c))  # noqa: E731
                                        and not (args.leave_out and args.leave_out in " ".join(c))]
            differed = total = 0
            if not args.no_compare:
                commands = chosen(compared_commands(made))
                total += len(commands)
                differed += compare(commands, roots, scratch, inputs)
            if args.time:
                commands = chosen(timed_commands(made))
                total += len(commands)
                differed += timings(commands, roots, args.rounds, scratch, inputs)
            print(f"\n{total - differed} of {total} commands gave byte-identical outputs; {differed} differed")
            return 1 if differed else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
