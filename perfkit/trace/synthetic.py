"""Writing XSpaces with the protobuf classes of ``perfkit.trace.schema``: hand-made TPU-, GPU- and
CPU-shaped traces for tests, benchmarks and bug reports.

    space = XSpaceWriter("host0")
    tpu = space.plane("/device:TPU:0")
    ops = tpu.line("XLA Ops")
    ops.event(tpu.op("fusion.1", hlo_category="convolution fusion", program_id=7), 0, 1_000_000)
    space.save(path)
"""

from __future__ import annotations

from pathlib import Path

from perfkit.trace.schema import HLO_PROTO, PRIMITIVE_TYPES, XSPACE

_TYPE_NUMBERS = {v: k for k, v in PRIMITIVE_TYPES.items()}


def _set_stat(stat, value, intern) -> None:
    if isinstance(value, bool) or isinstance(value, int):
        stat.int64_value = int(value)
    elif isinstance(value, float):
        stat.double_value = value
    elif isinstance(value, bytes):
        stat.bytes_value = value
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
        self._stats: dict[str, int] = {}
        self._events: dict[tuple, int] = {}

    def stat_id(self, name: str) -> int:
        """The stat metadata id of ``name`` (created on first use)."""
        if name not in self._stats:
            sid = self._stats[name] = len(self._stats) + 1
            self.proto.stat_metadata[sid].id = sid
            self.proto.stat_metadata[sid].name = name
        return self._stats[name]

    def op(self, name: str, **stats) -> int:
        """The event metadata id of ``name`` with metadata-level ``stats`` (created on first use)."""
        key = (name, tuple(sorted(stats.items())))
        if key not in self._events:
            mid = self._events[key] = len(self._events) + 1
            md = self.proto.event_metadata[mid]
            md.id, md.name = mid, name
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

    def program(self, program_id: int, module: str, ops: list[tuple[str, str, str]]) -> None:
        """Add a program's HLO to ``/host:metadata``: ``ops`` as (name, opcode, "f32[8,128]"); a fusion
        may name a collective it runs as opcode ``fusion:<collective>``."""
        meta = next((p for p in self.proto.planes if p.name == "/host:metadata"), None)
        writer = PlaneWriter(meta) if meta is not None else self.plane("/host:metadata")
        if meta is not None:
            writer._stats = {v.name: k for k, v in meta.stat_metadata.items()}
        hlo = HLO_PROTO()
        hlo.hlo_module.name, hlo.hlo_module.id = module, program_id
        entry = hlo.hlo_module.computations.add(name="main", id=1)
        for i, (name, opcode, shape) in enumerate(ops):
            opcode, _, inner = opcode.partition(":")
            inst = entry.instructions.add(name=name, opcode=opcode, id=100 + i)
            dtype, _, dims = shape.partition("[")
            inst.shape.element_type = _TYPE_NUMBERS[dtype]
            inst.shape.dimensions.extend(int(d) for d in dims.rstrip("]").split(",") if d)
            if inner:
                called = hlo.hlo_module.computations.add(name=f"{name}_computation", id=1000 + i)
                called.instructions.add(name=f"{name}.inner", opcode=inner, id=2000 + i)
                inst.called_computation_ids.append(called.id)
        writer.op(f"{module}({program_id})", **{"Hlo Proto": hlo.SerializeToString(), "program_id": program_id})

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.proto.SerializeToString())
        return path
