"""Hand-made TPU- and GPU-shaped XSpaces (protobuf classes via perfkit.trace.synthetic) whose
breakdowns are worked out by hand in the comments; times in microseconds (U picoseconds)."""

from pathlib import Path

from perfkit.trace.protos import XSPACE
from perfkit.trace.synthetic import Uint64, XSpaceWriter

U = 1_000_000  # picoseconds per microsecond
TPU_START_NS = 1_764_547_200_000_000_000  # tpu_trace's profile start (epoch ns)
GPU_START_NS = TPU_START_NS + 2_000_000  # gpu_trace's, 2 ms later

# Per (device, step): span, compute, ici, dma, idle in microseconds, worked out below.
TPU_EXPECTED = {
    (0, 0): (30, 17, 6, 5, 2),
    (0, 1): (40, 14, 11, 0, 15),
    (0, 2): (30, 0, 0, 0, 30),
    (1, 0): (14, 9, 0, 0, 5),
}


def on_host(real: Path, path: Path, host: str) -> Path:
    """``real``'s profile written to ``path`` as recorded on ``host``: another process's profile, as a copy is not
    (a profiler records its own machine in each, so no two processes' are byte for byte alike)."""
    space = XSPACE.FromString(real.read_bytes())
    del space.hostnames[:]
    space.hostnames.append(host)
    path.write_bytes(space.SerializeToString())
    return path


def started(space: XSpaceWriter, start_ns: int) -> XSpaceWriter:
    """``space`` with the Task Environment plane a profiler writes last: the epoch ns its profile started at,
    from which its line timestamps count (without it, two hosts' files are on no one clock)."""
    space.plane("Task Environment").stat("profile_start_time", Uint64(start_ns))
    return space


def tpu_trace(path: Path) -> Path:
    """Two TPU chips. Chip 0, program 1 (its HLO in /host:metadata), Steps 0 [0,30) 1 [30,70) 2 [70,100):

    step 0: fusion.1 [0,10) with a 2 us DMA stall -> compute 8, dma 2; all-gather-start.1 [10,11) ici 1;
            fusion.2 [11,20) compute 9 (the gather is in flight, hidden); all-gather-done.1 [20,25) ici 5
            (exposed wait); copy-start.1 [25,26) and copy-done.1 [26,28) dma 3; idle [28,30) 2.
            -> compute 17, ici 6, dma 5, idle 2 of 30.
    step 1: while.1 [32,52) around fusion.3 [33,40) compute 7 and collective-permute-done.1 [40,46) ici 6,
            the while's own 7 compute; fusion.4 [60,65) is a fusion calling reduce-scatter -> ici 5;
            idle [30,32) [52,60) [65,70) 15. -> compute 14, ici 11, dma 0, idle 15 of 40.
    step 2: nothing runs -> idle 30 of 30.
    Chip 1: Steps 0 [0,10); "%fusion.9 = bf16[8,128]{...} fusion(...)" (HLO text as the name, no program)
            [5,14) runs past the marker, so the span is [0,14): compute 9, idle 5.
    """
    space = XSpaceWriter("tpu-host")
    space.program(1, "jit_step", [
        ("fusion.1", "fusion", "f32[8,128]"), ("fusion.2", "fusion", "f32[8,128]"),
        ("fusion.3", "fusion", "f32[8,128]"), ("fusion.4", "fusion:reduce-scatter", "f32[2,128]"),
        ("all-gather-start.1", "all-gather-start", "f32[32,128]"),
        ("all-gather-done.1", "all-gather-done", "f32[32,128]"),
        ("copy-start.1", "copy-start", "f32[8,128]"), ("copy-done.1", "copy-done", "f32[8,128]"),
        ("while.1", "while", "s32[]"), ("collective-permute-done.1", "collective-permute-done", "f32[8,128]"),
    ])
    chip = space.plane("/device:TPU:0")
    steps, ops = chip.line("Steps", 1_000), chip.line("XLA Ops", 1_000)
    for n, (a, b) in enumerate([(0, 30), (30, 70), (70, 100)]):
        steps.event(chip.op(str(n)), a * U, (b - a) * U)

    def op(name, a, b, category="", **stats):
        md = chip.op(name, program_id=1, **({"hlo_category": category} if category else {}))
        ops.event(md, a * U, (b - a) * U, **stats)

    op("fusion.1", 0, 10, "convolution fusion", dma_stall_duration_ps=2 * U)
    op("all-gather-start.1", 10, 11, "all-gather")
    op("fusion.2", 11, 20, "loop fusion")
    op("all-gather-done.1", 20, 25, "all-gather")
    op("copy-start.1", 25, 26, "data formatting")  # the opcode (copy-start) decides: local DMA
    op("copy-done.1", 26, 28, "data formatting")
    op("while.1", 32, 52)
    op("fusion.3", 33, 40, "convolution fusion")
    op("collective-permute-done.1", 40, 46, "collective-permute")
    op("fusion.4", 60, 65)
    chip1 = space.plane("/device:TPU:1")
    chip1.line("Steps", 1_000).event(chip1.op("0"), 0, 10 * U)
    chip1.line("XLA Ops", 1_000).event(
        chip1.op("%fusion.9 = bf16[8,128]{1,0:T(8,128)} fusion(%p.1), kind=kLoop, calls=%fused_computation"),
        5 * U, 9 * U)
    return started(space, TPU_START_NS).save(path)


# Per step: span, compute, ici, dma, idle in microseconds.
GPU_EXPECTED = {0: (20, 11, 5, 2, 2), 1: (25, 10, 0, 0, 15)}


def gpu_trace(path: Path) -> Path:
    """One GPU, three streams; steps from StepTraceAnnotation events (step_num) on the host plane:
    step 0 [0,20), step 1 [20,40).

    step 0: Stream #7 fusion_1 [0,10) (hlo_op fusion.1 of program 3: compute); Stream #20 the NCCL kernel
            of all-reduce-start.1 [5,15); Stream #8 MemcpyD2D [14,18) (no HLO: dma by name); Stream #7
            loop_add kernel [16,17) (no HLO: compute). Compute beats ICI beats DMA:
            [0,10) compute, [10,15) ici, [15,16) dma, [16,17) compute, [17,18) dma, [18,20) idle
            -> compute 11, ici 5, dma 2, idle 2 of 20.
    step 1: Stream #7 kernel [35,45) runs past the annotation: span [20,45) -> compute 10, idle 15.
    """
    space = XSpaceWriter("gpu-host")
    space.program(3, "jit_train", [("fusion.1", "fusion", "f32[1024]"),
                                   ("all-reduce-start.1", "all-reduce-start", "f32[1024]")])
    host = space.plane("/host:CPU")
    py = host.line("python", 5_000)
    for n, (a, b) in enumerate([(0, 20), (20, 40)]):
        py.event(host.op("train"), a * U, (b - a) * U, step_num=n, _r=1)
    gpu = space.plane("/device:GPU:0")
    s7, s20, s8 = (gpu.line(name, 5_000) for name in ("Stream #7(Kernel)", "Stream #20(Kernel)",
                                                       "Stream #8(MemcpyD2D)"))
    s7.event(gpu.op("fusion_1.kd"), 0, 10 * U, hlo_op="fusion.1", hlo_module="jit_train", program_id=3)
    s20.event(gpu.op("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), 5 * U, 10 * U, hlo_op="all-reduce-start.1",
              hlo_module="jit_train", program_id=3)
    s8.event(gpu.op("MemcpyD2D"), 14 * U, 4 * U)
    s7.event(gpu.op("loop_add_kernel"), 16 * U, 1 * U)
    s7.event(gpu.op("fusion_1.kd"), 35 * U, 10 * U, hlo_op="fusion.1", hlo_module="jit_train", program_id=3)
    return started(space, GPU_START_NS).save(path)


def one_step_trace(path: Path, ops: list[tuple[str, str, int, int]], host: str = "h",
                   stalls: dict[str, int] | None = None) -> Path:
    """One TPU chip, one step [0, 100) us, ``ops`` as (name, opcode, start_us, end_us) of program 5; ``stalls``:
    the DMA stall (us) some of them carry."""
    space = XSpaceWriter(host)
    space.program(5, "jit_m", [(name, opcode, "f32[8,128]") for name, opcode, _, _ in ops])
    chip = space.plane("/device:TPU:0")
    chip.line("Steps", 0).event(chip.op("0"), 0, 100 * U)
    line = chip.line("XLA Ops", 0)
    for name, _, a, b in ops:
        stall = {"dma_stall_duration_ps": stalls[name] * U} if name in (stalls or {}) else {}
        line.event(chip.op(name, program_id=5), a * U, (b - a) * U, **stall)
    return space.save(path)


# Four TPU chips of one host, two steps of 60 us; in each a chip arrives late at collectives (see
# straggler_trace). Per (step, op, chip): time, exposed, hidden, wait, transfer in us, worked out there.
STRAGGLER_STEPS = ((3, 20, 1), (1, 8, 2))  # per step: late chip and its delay at the all-gather, permute's late chip
STRAGGLER_OP_NAMES = ("all-gather-start.1", "fusion.4", "collective-permute-start.1")


def _straggler_expected() -> dict:
    out = {}
    for step, (late, delay, permute_late) in enumerate(STRAGGLER_STEPS):
        for chip in range(4):
            if chip == late:
                ag = (6, 6, 0, 0, 6)
            elif chip == 0:  # fusion.2 [11, 14) runs under the gather: 3 us hidden, 3 fewer waiting
                ag = (delay + 6, delay + 3, 3, delay - 3, 6)
            else:
                ag = (delay + 6, delay + 6, 0, delay, 6)
            out[(step, "all-gather-start.1", chip)] = ag
            out[(step, "fusion.4", chip)] = (4, 4, 0, 0, 4) if chip == late else (8, 8, 0, 4, 4)
            permute = (4, 4, 0, 0, 4) if chip == permute_late else (6, 6, 0, 2, 4)
            out[(step, "collective-permute-start.1", chip)] = permute
    return out


STRAGGLER_EXPECTED = _straggler_expected()


def _hlo(name: str, opcode: str, shape: str, operand: str, attrs: str = "") -> str:
    return f"%{name} = {shape}{{1,0}} {opcode}(f32[64,128]{{1,0}} %{operand}){attrs}"


_STRAGGLER_HLO = {  # step 0 names its ops by their HLO text, as real TPU profiles do; step 1 by name only
    "fusion.1": _hlo("fusion.1", "fusion", "f32[64,128]", "p.0", ", kind=kLoop, calls=%fused_1"),
    "fusion.2": _hlo("fusion.2", "fusion", "f32[64,128]", "p.1", ", kind=kLoop, calls=%fused_2"),
    "all-gather-start.1": _hlo("all-gather-start.1", "all-gather-start", "f32[256,128]", "fusion.1",
                               ", replica_groups={{0,1,2,3}}, dimensions={0}"),
    "all-gather-done.1": _hlo("all-gather-done.1", "all-gather-done", "f32[256,128]", "all-gather-start.1"),
    "fusion.4": _hlo("fusion.4", "fusion", "f32[64,128]", "all-gather-done.1", ", kind=kLoop, calls=%rs"),
    "collective-permute-start.1": _hlo("collective-permute-start.1", "collective-permute-start", "f32[64,128]",
                                       "fusion.4", ", source_target_pairs={{0,1},{1,2},{2,3},{3,0}}"),
    "collective-permute-done.1": _hlo("collective-permute-done.1", "collective-permute-done", "f32[64,128]",
                                      "collective-permute-start.1"),
}


def straggler_trace(path: Path, host: str = "tpu-host", cpu: bool = False) -> Path:
    """Four TPU chips in one XSpace (one clock), program 9, Steps [60 s, 60 s + 60) us for s = 0, 1. At
    step offset o, with the step's late chip L arriving ``delay`` D late at the all-gather:

    all-gather (async, f32[256,128] gathered over replica_groups={{0,1,2,3}}): chips but L run fusion.1
        [o, o+10), all-gather-start.1 [o+10, o+11), all-gather-done.1 [o+11, o+16+D) (chip 0 runs
        fusion.2 [o+11, o+14) first and its done from o+14); L runs fusion.1 [o, o+10+D), the start
        [o+10+D, o+11+D), the done [o+11+D, o+16+D). Last arrival o+10+D, skew D. A peer: time D+6,
        exposed D+6 (chip 0: D+3, 3 hidden), waiting until L arrived D (chip 0: D-3, its fusion.2 is
        not waiting), transfer 6; L: time 6, exposed 6, wait 0, transfer 6. Bytes sent per device:
        3/4 x 256 x 128 x 4 = 98304 where the text names its groups (step 0), else unknown (step 1).
    reduce-scatter (fusion.4, sync, a fusion calling reduce-scatter, output f32[64,128]; no groups in its
        text): peers [o+40, o+48), L [o+44, o+48): skew 4; peers wait 4, transfer 4; L 4, 0, 4. Bytes unknown:
        nothing the trace records gives its group size (the 4 chips in it need not be all of the program's).
    collective-permute (async, f32[64,128]): peers start [o+50, o+51), done [o+51, o+56); its late
        chip P (chip 1, then 2) start [o+52, o+53), done [o+53, o+56): skew 2; peers exposed 6, wait 2
        (the start and [o+51, o+52)), transfer 4; P: 4, 0, 4. Bytes: the buffer, 32768.

    Straggler: step 0 chip 3 (last at 2 of 3; skew 20 + 4 + 2 = 26 of 60 us; the others wait 17+4+2,
    20+4+0, 20+4+2 us: mean 24.333), step 1 chip 1 (skew 8 + 4 + 2 = 14; waits 5+4+2, 8+4+0, 8+4+2:
    mean 12.333). Times per (step, op, chip) in ``STRAGGLER_EXPECTED``.

    ``cpu``: the same ops as XLA's CPU devices run them, each chip a thread of the ``/host:CPU`` plane (its ops'
    ``hlo_op`` and ``device_ordinal`` stats), the steps the host's annotations. ``host``: the machine it records.
    """
    space = XSpaceWriter(host)
    space.program(9, "jit_ring", [
        ("fusion.1", "fusion", "f32[64,128]"), ("fusion.2", "fusion", "f32[64,128]"),
        ("all-gather-start.1", "all-gather-start", "f32[256,128]"),
        ("all-gather-done.1", "all-gather-done", "f32[256,128]"),
        ("fusion.4", "fusion:reduce-scatter", "f32[64,128]"),
        ("collective-permute-start.1", "collective-permute-start", "f32[64,128]"),
        ("collective-permute-done.1", "collective-permute-done", "f32[64,128]"),
    ])
    host = space.plane("/host:CPU") if cpu else None
    if cpu:
        annotations = host.line("python", 1_000)
        for step in range(len(STRAGGLER_STEPS)):
            annotations.event(host.op("train"), 60 * step * U, 60 * U, step_num=step, _r=1)
    for chip in range(4):
        plane = host or space.plane(f"/device:TPU:{chip}")
        steps, ops = (None, plane.line(f"tf_XLAEigen/{chip}", 1_000)) if cpu else (plane.line("Steps", 1_000),
                                                                                   plane.line("XLA Ops", 1_000))
        for step, (late, d, permute_late) in enumerate(STRAGGLER_STEPS):
            o = 60 * step

            def op(name, a, b):
                label = _STRAGGLER_HLO[name] if step == 0 else name
                on_host = {"hlo_op": label.split(" = ")[0].lstrip("%"), "device_ordinal": chip} if cpu else {}
                ops.event(plane.op(label, program_id=9), (o + a) * U, (b - a) * U, **on_host)

            if steps is not None:
                steps.event(plane.op(str(step)), o * U, 60 * U, step_num=step)
            if chip == late:
                op("fusion.1", 0, 10 + d)
                op("all-gather-start.1", 10 + d, 11 + d)
                op("all-gather-done.1", 11 + d, 16 + d)
                op("fusion.4", 44, 48)
            else:
                op("fusion.1", 0, 10)
                op("all-gather-start.1", 10, 11)
                if chip == 0:
                    op("fusion.2", 11, 14)
                op("all-gather-done.1", 14 if chip == 0 else 11, 16 + d)
                op("fusion.4", 40, 48)
            first = 52 if chip == permute_late else 50
            op("collective-permute-start.1", first, first + 1)
            op("collective-permute-done.1", first + 1, 56)
    return space.save(path)
