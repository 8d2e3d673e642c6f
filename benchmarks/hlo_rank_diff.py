"""How fast `perfkit hlo-diff` compares many ranks' dumps of one large program (issues 6 and 15).

Writes dump folders of one TPU-style scheduled module (tiled layouts, async collective-permute
start/done pairs, a fused computation per fusion, backend_config JSON, metadata on every line, a
FileNames / StackFrames header, 24,000 instructions) with its buffer assignment. Ranks that number
their instructions alike dumped byte-identical files; others name them differently (as separate
processes do), and perfkit parses one file of each program (files equal up to naming share a key); rank
DIVERGENT compiled one more pad fusion and copy-start in front of the first collective-permute, which
moves its receive buffers 18.9 MB further into its temp allocation (the reference TPU PR's failure).
Scenario 8-programs is the case that key cannot help: every rank compiled a program of its own (one
constant differs), so every file is keyed and then parsed. Then times the `perfkit hlo-diff` command end
to end, as a user runs it (median and best of --repeat runs; the CPU time counts its worker processes, the
peak RSS is that of its largest process), and checks its --json.

There is no anchor to time it against: XLA's hlo_diff compares two modules, not N ranks.

    .venv/bin/python benchmarks/hlo_rank_diff.py [--scenario 8 8-programs 64 64-distinct] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfkit.common.workers import Pool

T = "{1,0:T(8,128)(2,1)}"
ACT, WEIGHT = f"bf16[578,3072]{T}", f"bf16[3072,3072]{T}"
SHIFT = 18_939_904  # bytes rank DIVERGENT's receive buffers move (the reference PR's figure)
DIVERGENT = 5
LAYERS = 1600  # 15 instructions each: 24,000 in all


def meta(op: str, line: int) -> str:
    return (f'metadata={{op_type="{op}" op_name="jit(step)/jit(main)/{op}" '
            f'source_file="/home/user/sp/collective_matmul.py" source_line={line}}}')


def module_text(layers: int, rank: int, divergent: bool, program: int = 0) -> tuple[str, str]:
    """(HLO text, buffer-assignment text) of one rank's module; ``program`` changes the first layer's constant."""
    n = lambda name, i: f"{name}.{i * 8 + rank + 1}"  # noqa: E731  per-process numbering
    comps, entry, values = [], [], []
    head = ["HloModule jit_step, is_scheduled=true, entry_computation_layout={(...)->(...)}, num_partitions=8", "",
            "FileNames", '1 "/home/user/sp/collective_matmul.py"', "", "StackFrames",
            "1 {file_location_id=1 parent_frame_id=0}", ""]
    params = [f"  %{n('param', 0)} = {ACT} parameter(0), sharding={{devices=[8,1]<=[8]}}"]
    params += [f"  %{n('w', i)} = {WEIGHT} parameter({i + 1}), sharding={{replicated}}" for i in range(layers)]
    prev, offset = n("param", 0), 0
    if divergent:
        comps.append(f"%{n('pad_slice_computation', 0)} (p: {ACT}) -> {ACT} {{\n"
                     f"  %{n('p', 0)} = {ACT} parameter(0)\n  %{n('zero', 0)} = bf16[]{{:T(256)}} constant(0)\n"
                     f"  ROOT %{n('pad', 0)} = {ACT} pad(%{n('p', 0)}, %{n('zero', 0)}), padding=0_0x0_0\n}}\n")
        entry.append(f"  %{n('copy-start', 0)} = ({WEIGHT}, {WEIGHT}, u32[]{{:S(2)}}) copy-start(%{n('w', 0)}), "
                     "cross_program_prefetch_index=0")
        entry.append(f"  %{n('pad_slice_fusion', 0)} = {ACT} fusion(%{prev}), kind=kLoop, "
                     f"calls=%{n('pad_slice_computation', 0)}, {meta('pad', 80)}")
        prev = n("pad_slice_fusion", 0)
        values.append(f" value: <{len(values)} {prev} @0> (size=3551232,offset=0): {ACT}")
        offset = SHIFT
    for i in range(layers):
        mm, add = n("fused_matmul", i), n("fused_add", i)
        comps.append(f"%{mm} (a: {ACT}, b: {WEIGHT}) -> {ACT} {{\n  %{n('a', i)} = {ACT} parameter(0)\n"
                     f"  %{n('b', i)} = {WEIGHT} parameter(1)\n"
                     f"  ROOT %{n('convolution', i)} = {ACT} convolution(%{n('a', i)}, %{n('b', i)}), "
                     f"dim_labels=bf_io->bf, {meta('dot_general', 88)}\n}}\n")
        comps.append(f"%{add} (x: {ACT}, y: {ACT}) -> {ACT} {{\n  %{n('x', i)} = {ACT} parameter(0)\n"
                     f"  %{n('y', i)} = {ACT} parameter(1)\n  %{n('add', i)} = {ACT} add(%{n('x', i)}, %{n('y', i)}), "
                     f"{meta('add', 90)}\n  %{n('half', i)} = bf16[]{{:T(256)}} "
                     f"constant({0.5 + (program if i == 0 else 0)})\n"
                     f"  %{n('bhalf', i)} = {ACT} broadcast(%{n('half', i)}), dimensions={{}}\n"
                     f"  %{n('mul', i)} = {ACT} multiply(%{n('add', i)}, %{n('bhalf', i)}), {meta('mul', 91)}\n"
                     f"  ROOT %{n('tanh', i)} = {ACT} tanh(%{n('mul', i)}), {meta('tanh', 92)}\n}}\n")
        fusion, start, done, out = n("fusion", i), n("collective-permute-start", i), n("collective-permute-done", i), n("add_fusion", i)
        entry += [
            f"  %{fusion} = {ACT} fusion(%{prev}, %{n('w', i)}), kind=kOutput, calls=%{mm}, {meta('dot_general', 88)}, "
            'backend_config={"flag_configs":[],"window_config":{"kernel_window_bounds":["2","24"]}}',
            f"  %{start} = ({ACT}, {ACT}, u32[]{{:S(2)}}, u32[]{{:S(2)}}) collective-permute-start(%{fusion}), "
            "channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}, "
            f'backend_config={{"flag_configs":[],"barrier_config":{{"barrier_type":"CUSTOM","id":"{i}"}}}}, '
            f"{meta('ppermute', 89)}",
            f"  %{done} = {ACT} collective-permute-done(%{start}), {meta('ppermute', 89)}",
            f"  %{out} = {ACT} fusion(%{done}, %{fusion}), kind=kLoop, calls=%{add}, {meta('tanh', 92)}",
        ]
        values += [f" value: <{len(values)} {fusion} @0> (size=3551232,offset={offset + 4 * 3551232 * (i % 4)}): {ACT}",
                   f" value: <{len(values) + 1} {start}{{1}} @0> (size=3551232,offset={29_884_416 + offset}): {ACT}",
                   f" value: <{len(values) + 2} {start}{{2}} @2> (size=4,offset=0): u32[]{{:S(2)}}",
                   f" value: <{len(values) + 3} {out} @0> (size=3551232,offset={offset + 3551232}): {ACT}"]
        prev = out
    entry.append(f"  ROOT %{n('copy', 0)} = {ACT} copy(%{prev})")
    hlo = "\n".join(head) + "\n" + "\n".join(comps) + f"ENTRY %{n('main', 0)} (...) -> {ACT} {{\n" + \
        "\n".join(params + entry) + "\n}\n"
    temp = 48_824_320 + (SHIFT if divergent else 0)
    ba = "BufferAssignment:\n" + f"allocation 0: size {temp}, preallocated-temp:\n" + "\n".join(values) + "\n"
    return hlo, ba


SCENARIOS = {  # name: (ranks, distinct numberings, distinct programs, goal in s wall or None)
    "8": (8, 8, 1, 2.0),       # issue 15's 8 ranks: every rank named differently, as separate processes do
    "8-programs": (8, 8, 8, None),  # every rank a program of its own: all 8 parsed (no goal stated)
    "64": (64, 8, 1, 15.0),    # 64 ranks of one program: rank r dumped byte-identical files to rank r % 8's
    "64-distinct": (64, 64, 1, None),  # every rank named differently (no goal stated)
}


def write_ranks(root: Path, layers: int, ranks: int, numberings: int, programs: int) -> int:
    """RANKS dump folders; rank r numbers like rank r % NUMBERINGS (byte-identical files) except DIVERGENT,
    and compiled program r % PROGRAMS. Returns the number of distinct files."""
    made: dict[tuple[int, bool, int], tuple[str, str]] = {}
    for r in range(ranks):
        look = (r % numberings, r == DIVERGENT, r % programs)
        if look not in made:
            made[look] = module_text(layers, *look)
        hlo, ba = made[look]
        folder = root / f"rank{r}"
        folder.mkdir(parents=True)
        stem = f"module_{look[0] + 3:04d}.jit_step.tpu_after_optimizations"
        (folder / f"{stem}.txt").write_text(hlo)
        (folder / f"{stem}-buffer-assignment.txt").write_text(ba)
    return len(made)


def timed(argv: list[str]) -> tuple[float, float, float, int, str]:
    """(wall s, user+sys CPU s, peak RSS MiB, exit code, stdout) of one command, workers included."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode, out.read()

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="Write the dumps here and keep them (default: a temp folder).")
    args = parser.parse_args()
    print("anchor: none (XLA's hlo_diff compares two modules, not N ranks); perfkit alone, whole CLI process, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.scenario:
            ranks, numberings, programs, goal = SCENARIOS[name]
            root = (args.keep or Path(tmp)) / f"ranks-{name}"
            # Written by a child process: this one stays small, so that the timed commands' peak RSS is their
            # own (a child's high-water mark counts what it shared with this process before its exec).
            with Pool(1, name="the dump writer") as writer:
                distinct = writer.result(writer.submit(write_ranks, root, LAYERS, ranks, numberings, programs))
            size_mb = sum(p.stat().st_size for p in root.rglob("*.txt")) / 1e6
            os.sync()  # the dumps on disk first: their writeback would otherwise share the cores with the timed runs
            command = [sys.executable, "-m", "perfkit.cli", "hlo-diff", str(root)]
            runs = [timed(command) for _ in range(args.repeat)]
            wall, cpu, rss = (statistics.median(r[i] for r in runs) for i in range(3))
            result = json.loads(timed(command + ["--json"])[4])
            (m,) = result["modules"]
            d = next(d for d in m["divergences"] if DIVERGENT in d["ranks"])
            print(f"{name}: {ranks} ranks ({distinct} distinct files) x {m['instructions']:,} instructions, "
                  f"{size_mb:.0f} MB of dumps: {wall:.2f} s wall (best {min(r[0] for r in runs):.2f}), {cpu:.2f} s "
                  f"CPU, {rss:.0f} MiB peak RSS (exit {runs[0][3]}; goal {f'<= {goal} s' if goal else 'none'})")
            print(f"  found: groups {rank_ranges(m['groups'])}; rank {DIVERGENT}: ENTRY ops "
                  f"{d['entry_ops']['majority']} -> {d['entry_ops']['rank']}, "
                  f"first difference {d['first_difference']['rank']['opcode']}, "
                  f"{d['buffers']['receive_moved']} receive buffers moved by {d['buffers']['receive'][0]['delta']:+,} B")


def rank_ranges(groups: list[list[int]]) -> str:
    return " | ".join(f"{len(g)} ranks" if len(g) > 3 else str(g) for g in groups)


if __name__ == "__main__":
    main()
