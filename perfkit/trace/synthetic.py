"""Writing XSpaces with the protobuf classes of ``perfkit.trace.protos``: hand-made TPU-, GPU- and
CPU-shaped traces for tests, benchmarks and bug reports.

    space = XSpaceWriter("host0")
    tpu = space.plane("/device:TPU:0")
    ops = tpu.line("XLA Ops")
    ops.event(tpu.op("fusion.1", hlo_category="convolution fusion", program_id=7), 0, 1_000_000)
    space.save(path)

``tpu_profile`` writes a whole TPU-shaped profile with the planes, lines and stat types real v6e
profiles carry (tests/data/real/README.md, "What real TPU profiles look like"), since no real one can
be shipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from perfkit.trace.protos import HLO_PROTO, PRIMITIVE_TYPES, XSPACE

_TYPE_NUMBERS = {v: k for k, v in PRIMITIVE_TYPES.items()}
FINGERPRINT = 17342868964687645945  # a real v6e program id: above 2**63, as most fingerprints are


class Uint64(int):
    """An int written as ``uint64_value`` (ints >= 2**63 always are; smaller ones as ``int64_value``)."""


class Inline(str):
    """A string written inline (``str_value``); plain strings are references to stat metadata."""


def _set_stat(stat, value, intern) -> None:
    if isinstance(value, Uint64) or (isinstance(value, int) and value >= 2**63):
        stat.uint64_value = int(value)
    elif isinstance(value, int):  # bools too
        stat.int64_value = int(value)
    elif isinstance(value, float):
        stat.double_value = value
    elif isinstance(value, bytes):
        stat.bytes_value = value
    elif isinstance(value, Inline):
        stat.str_value = str(value)
    else:  # strings as references to stat metadata, the way profilers intern them
        stat.ref_value = intern(str(value))


class LineWriter:
    def __init__(self, plane: "PlaneWriter", proto):
        self.plane, self.proto = plane, proto

    def event(self, metadata_id: int, offset_ps: int, duration_ps: int, **stats) -> None:
        """One event ``offset_ps`` after the line's timestamp; ``stats`` become per-event stats."""
        ev = self.proto.events.add(metadata_id=metadata_id, offset_ps=offset_ps, duration_ps=duration_ps)
        for key, value in stats.items():
            _set_stat(ev.stats.add(metadata_id=self.plane.stat_id(key)), value, self.plane.stat_id)


class PlaneWriter:
    def __init__(self, proto):
        self.proto = proto
        self._stats: dict[str, int] = {v.name: k for k, v in proto.stat_metadata.items()}
        self._events: dict[tuple, int] = {}

    def stat_id(self, name: str) -> int:
        """The stat metadata id of ``name`` (created on first use)."""
        if name not in self._stats:
            sid = self._stats[name] = len(self._stats) + 1
            self.proto.stat_metadata[sid].id = sid
            self.proto.stat_metadata[sid].name = name
        return self._stats[name]

    def stat(self, name: str, value) -> None:
        """A plane-level stat."""
        _set_stat(self.proto.stats.add(metadata_id=self.stat_id(name)), value, self.stat_id)

    def op(self, name: str, display_name: str = "", **stats) -> int:
        """The event metadata id of ``name`` with metadata-level ``stats`` (created on first use)."""
        key = (name, display_name, tuple(sorted(stats.items())))
        if key not in self._events:
            # numbered past the plane's metadata, not this writer's: a second writer on one plane (a second
            # ``XSpaceWriter.program``) adds to it where it would overwrite
            mid = self._events[key] = len(self.proto.event_metadata) + 1
            md = self.proto.event_metadata[mid]
            md.id, md.name, md.display_name = mid, name, display_name
            for k, v in stats.items():
                _set_stat(md.stats.add(metadata_id=self.stat_id(k)), v, self.stat_id)
        return self._events[key]

    def line(self, name: str, timestamp_ns: int = 0) -> LineWriter:
        proto = self.proto.lines.add(id=len(self.proto.lines) + 1, name=name, timestamp_ns=timestamp_ns)
        return LineWriter(self, proto)


class XSpaceWriter:
    def __init__(self, hostname: str = "host"):
        self.proto = XSPACE()
        self.proto.hostnames.append(hostname)

    def plane(self, name: str) -> PlaneWriter:
        return PlaneWriter(self.proto.planes.add(id=len(self.proto.planes), name=name))

    def program(self, program_id: int, module: str, ops: list[tuple[str, str, str]],
                groups: dict[str, list[list[int]]] | None = None, counts: tuple[int, int] | None = None) -> None:
        """Add a program's HLO to ``/host:metadata``: ``ops`` as (name, opcode, "f32[8,128]"); a fusion
        may name a collective it runs as opcode ``fusion:<collective>``, a ``while`` its body's ops as
        ``while:<op name>,<op name>``; ``groups``: op name -> the replica groups of the collective it is or runs
        (``replica_groups``, with no channel_id: replica ids); ``counts``: the module's device assignment,
        (replicas, partitions)."""
        meta = next((p for p in self.proto.planes if p.name == "/host:metadata"), None)
        writer = PlaneWriter(meta if meta is not None else self.plane("/host:metadata").proto)
        hlo = HLO_PROTO()
        hlo.hlo_module.name, hlo.hlo_module.id = module, program_id % 2**63
        if counts:
            assigned = hlo.hlo_module.device_assignment
            assigned.replica_count, assigned.computation_count = counts
        entry = hlo.hlo_module.computations.add(name="main", id=1)
        for i, (name, opcode, shape) in enumerate(ops):
            opcode, _, inner = opcode.partition(":")
            inst = entry.instructions.add(name=name, opcode=opcode, id=100 + i)
            dtype, _, dims = shape.partition("[")
            inst.shape.element_type = _TYPE_NUMBERS[dtype]
            inst.shape.dimensions.extend(int(d) for d in dims.rstrip("]").split(",") if d)
            collective = inst
            if inner and opcode != "while":
                called = hlo.hlo_module.computations.add(name=f"{name}_computation", id=1000 + i)
                collective = called.instructions.add(name=f"{name}.inner", opcode=inner, id=2000 + i)
                inst.called_computation_ids.append(called.id)
            for group in (groups or {}).get(name, []):
                collective.replica_groups.add().replica_ids.extend(group)
        writer.op(f"{module}({program_id})", **{"Hlo Proto": hlo.SerializeToString(), "program_id": program_id})

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.proto.SerializeToString())
        return path


class TpuOp(NamedTuple):
    """One op of ``tpu_profile``'s program: its HLO and where it runs in a step (microseconds)."""

    name: str
    opcode: str      # as ``XSpaceWriter.program`` takes it
    shape: str
    category: str    # the ``hlo_category`` stat xprof reads
    start_us: int    # from the step's start
    dur_us: int


US = 1_000_000  # picoseconds per microsecond
# One training step of a data-parallel program of two replicas: compute, an async all-reduce whose wait is exposed,
# a fusion that runs a reduce-scatter, a local async copy, a while loop around two body ops (so self time
# differs from total time), and a cross-slice (DCN) all-reduce.
TPU_STEP = (
    TpuOp("fusion.1", "fusion", "bf16[1024,4096]", "convolution fusion", 0, 40),
    TpuOp("all-reduce-start.1", "all-reduce-start", "f32[4096,1024]", "all-reduce", 40, 2),
    TpuOp("fusion.2", "fusion", "bf16[1024,4096]", "loop fusion", 42, 18),
    TpuOp("all-reduce-done.1", "all-reduce-done", "f32[4096,1024]", "all-reduce", 60, 10),
    TpuOp("fusion.3", "fusion:reduce-scatter", "f32[256,1024]", "reduce-scatter", 70, 6),
    TpuOp("copy-start.1", "copy-start", "f32[1024]", "data formatting", 76, 1),
    TpuOp("copy-done.1", "copy-done", "f32[1024]", "data formatting", 77, 3),
    TpuOp("while.1", "while", "s32[]", "control flow", 80, 30),
    TpuOp("fusion.4", "fusion", "bf16[1024,1024]", "convolution fusion", 82, 12),
    TpuOp("fusion.5", "fusion", "bf16[1024,1024]", "loop fusion", 96, 10),
    TpuOp("all-reduce.2", "all-reduce", "f32[1024]", "megascale all-reduce", 112, 8),
)
STEP_US = 130
# the replica groups of its collectives, as its HloProto records them (the op texts in the trace name none)
TPU_GROUPS = {name: [[0, 1]] for name in ("all-reduce-start.1", "fusion.3", "all-reduce.2")}
ASYNC_PAIRS = (("all-reduce-start.1", "all-reduce-done.1"), ("copy-start.1", "copy-done.1"))
COUNTERS = ("MXU busy", "Vector ALU", "Vector Load", "Vector Store", "Scalar ALU")


def hlo_text(op: TpuOp) -> str:
    """The whole HLO instruction, as real profiles name ``XLA Ops`` events."""
    opcode = op.opcode.partition(":")[0]
    calls = f", kind=kLoop, calls=%{op.name}_computation" if opcode == "fusion" else ""
    return f"%{op.name} = {op.shape}{{1,0:T(8,128)}} {opcode}(f32[8]{{0}} %param.1){calls}"


def tpu_profile(path: str | Path, chips: int = 1, steps: int = 2, program_id: int = FINGERPRINT,
                host: str = "t1v-n-0") -> Path:
    """A TPU-shaped XSpace: ``/host:metadata`` (the program's HLO), ``/device:TPU:<c>`` per chip (plane
    stats of a v6e; lines ``XLA Modules``, ``XLA Ops`` (whole HLO text names, op stats on the metadata,
    per-event device / self duration stats), ``Async XLA Ops`` (one span per async pair), ``TC Overlay``,
    ``Tensor Core`` (LLO bundles), ``XLA TraceMe``, ``_counters_``, and ``Steps`` when there are several
    chips), one SparseCore plane, ``/device:CUSTOM:Megascale Trace`` (the DCN all-reduce's transfers),
    ``/host:CPU`` (a uint64 ``_p`` stat above 2**63) and ``Task Environment``. Every step runs
    ``TPU_STEP`` from ``STEP_US`` x step on every chip; the program's collectives are of ``TPU_GROUPS``."""
    space = XSpaceWriter(host)
    space.program(program_id, "jit_train_step", [(op.name, op.opcode, op.shape) for op in TPU_STEP], TPU_GROUPS)
    stamp = 1_764_547_200_000_000_000  # line timestamps: wall-clock ns
    for chip in range(chips):
        plane = space.plane(f"/device:TPU:{chip}")
        plane.stat("device_type_string", Inline("TPU v6 Lite"))
        plane.stat("peak_teraflops_per_second", 918.0)
        plane.stat("peak_hbm_bw_gigabytes_per_second", 1640.0)
        plane.stat("peak_vmem_bw_gigabytes_per_second", 26000.0)
        plane.stat("has_megacore", 0)
        plane.stat("has_merged_vmem", 1)
        plane.stat("core_details", b"\x08\x01\x10\x00")
        lines = {name: plane.line(name, stamp) for name in ("XLA Modules", "XLA Ops", "Async XLA Ops", "TC Overlay",
                                                            "Tensor Core", "XLA TraceMe", "_counters_")}
        if chips > 1:
            lines["Steps"] = plane.line("Steps", stamp)
        module = plane.op(f"jit_train_step({program_id})", display_name="jit_train_step",
                          program_id=Uint64(program_id), run_id=7)
        for step in range(steps):
            t0 = step * STEP_US * US
            lines["XLA Modules"].event(module, t0, STEP_US * US - US, run_id=7)
            if "Steps" in lines:
                lines["Steps"].event(plane.op(str(step)), t0, STEP_US * US, step_num=step, group_id=step)
            for k, op in enumerate(TPU_STEP):
                md = plane.op(hlo_text(op), display_name=op.name, program_id=Uint64(program_id), symbol_id=k + 1,
                              hlo_category=op.category, flops=Uint64(2 * 1024**3), bytes_accessed=1 << 22,
                              long_name=Inline(hlo_text(op)))
                begin, dur = t0 + op.start_us * US, op.dur_us * US
                lines["XLA Ops"].event(md, begin, dur, device_offset_ps=begin, device_duration_ps=dur,
                                       self_duration_ps=dur, run_id=7, replica_id=chip, queue_id=0, core_type=0,
                                       spills=0, fills=0.0, **({"dma_stall_duration_ps": 2 * US}
                                                                 if op.name == "fusion.1" else {}))
                lines["Tensor Core"].event(plane.op(f"bundle.{k}"), begin, dur // 2)
                lines["XLA TraceMe"].event(plane.op("ep_copy_in"), begin, dur // 4)
            for a, b in ASYNC_PAIRS:
                first, last = (next(op for op in TPU_STEP if op.name == n) for n in (a, b))
                lines["Async XLA Ops"].event(plane.op(hlo_text(first), display_name=a.removesuffix("-start"),
                                                      program_id=Uint64(program_id)),
                                             t0 + first.start_us * US, (last.start_us + last.dur_us - first.start_us) * US)
            lines["TC Overlay"].event(plane.op("overlay"), t0, 5 * US)
            for c, name in enumerate(COUNTERS):
                lines["_counters_"].event(plane.op(name), t0 + c, 0, counter_value=float(c + step))
        if chip == 0:
            sparse = space.plane(f"/device:TPU:{chip} SparseCore 0")
            sparse.line("Sparse Core Ops", stamp).event(sparse.op("sparse-dense-matmul"), 0, 3 * US)
    dcn = space.plane("/device:CUSTOM:Megascale Trace")
    transfers = dcn.line("all-reduce.2", stamp)
    dcn_op = next(op for op in TPU_STEP if op.name == "all-reduce.2")
    for chip in range(chips):
        for step in range(steps):
            t0 = (step * STEP_US + dcn_op.start_us) * US
            transfers.event(dcn.op("MegaScale: all-reduce.2 send"), t0 + US, 3 * US, device_ordinal=chip,
                            payload_size_bytes=4096, dcn_label=Inline("all-reduce.2"))
    cpu = space.plane("/host:CPU")
    thread = cpu.line("python3", stamp)
    for step in range(steps):
        thread.event(cpu.op("train_step"), step * STEP_US * US, 20 * US, _p=Uint64(2**63 + 12345), _r=1)
    env = space.plane("Task Environment")
    env.stat("profile_start_time", Uint64(stamp))
    env.stat("profile_stop_time", Uint64(stamp + steps * STEP_US * 1000))
    return space.save(path)
