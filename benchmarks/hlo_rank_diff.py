"""How fast `perfkit hlo-diff` compares large per-rank dumps (issue 6: 8 ranks x 20,000+ instructions).

Writes RANKS dump folders of one TPU-style scheduled module (tiled layouts, async collective-permute
start/done pairs, a fused computation per fusion, backend_config JSON, metadata on every line, a
FileNames / StackFrames header) with its buffer assignment. Every rank names its instructions
differently (as separate processes do); rank DIVERGENT compiled one more pad fusion and copy-start in
front of the first collective-permute, which moves its receive buffers 18.9 MB further into its temp
allocation (the reference TPU PR's failure). Then times `compare_ranks` in-process (one core: Python is
single-threaded here) and the `perfkit hlo-diff` command end to end.

    .venv/bin/python benchmarks/hlo_rank_diff.py [--layers 1600] [--ranks 8]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfkit.hlo.diff import compare_ranks
from perfkit.hlo.dumps import resolve

T = "{1,0:T(8,128)(2,1)}"
ACT, WEIGHT = f"bf16[578,3072]{T}", f"bf16[3072,3072]{T}"
SHIFT = 18_939_904  # bytes rank DIVERGENT's receive buffers move (the reference PR's figure)
DIVERGENT = 5


def meta(op: str, line: int) -> str:
    return (f'metadata={{op_type="{op}" op_name="jit(step)/jit(main)/{op}" '
            f'source_file="/home/user/sp/collective_matmul.py" source_line={line}}}')


def module_text(layers: int, rank: int, divergent: bool) -> tuple[str, str]:
    """(HLO text, buffer-assignment text) of one rank's module."""
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
                     f"{meta('add', 90)}\n  %{n('half', i)} = bf16[]{{:T(256)}} constant(0.5)\n"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=1600, help="13 instructions each (default: 20,800+)")
    parser.add_argument("--ranks", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for r in range(args.ranks):
            hlo, ba = module_text(args.layers, r, r == DIVERGENT)
            folder = root / f"rank{r}"
            folder.mkdir()
            (folder / f"module_{r + 3:04d}.jit_step.tpu_after_optimizations.txt").write_text(hlo)
            (folder / f"module_{r + 3:04d}.jit_step.tpu_after_optimizations-buffer-assignment.txt").write_text(ba)
        size_mb = sum(p.stat().st_size for p in root.rglob("*.txt")) / 1e6
        t0, c0 = time.perf_counter(), time.process_time()
        result = compare_ranks(resolve([root])[0])
        in_process, cpu = time.perf_counter() - t0, time.process_time() - c0
        t0 = time.perf_counter()
        cli = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", str(root)], capture_output=True,
                             text=True)
        command = time.perf_counter() - t0
    (m,) = result["modules"]
    (d,) = m["divergences"]
    moved = d["buffers"]["receive_moved"]
    print(f"{args.ranks} ranks x {m['instructions']:,} instructions ({m['entry_ops']:,} ENTRY ops, "
          f"{m['collectives']:,} collective-permutes), {size_mb:.0f} MB of dumps")
    print(f"compare_ranks: {in_process:.2f} s wall, {cpu:.2f} s CPU in-process; `perfkit hlo-diff`: "
          f"{command:.2f} s wall end to end (exit {cli.returncode})")
    print(f"found: groups {m['groups']}, rank {d['ranks']} ENTRY ops {d['entry_ops']['majority']} -> "
          f"{d['entry_ops']['rank']}, first difference {d['first_difference']['rank']['text'][:60]}..., "
          f"{moved} receive buffers moved by {d['buffers']['receive'][0]['delta']:+,} B")


if __name__ == "__main__":
    main()
