"""What one compiled program costs, read from its HLO text and buffer assignment (stdlib only).

Per program, as XLA's ``HloCostAnalysis`` (``compiled.cost_analysis()``) defines the figures:

- ``dot_flops``: dots and convolutions, from shapes and dimension numbers: 2 x output elements x
  contracted elements for a dot; for a convolution 2 x (input features / feature groups) x output
  features x (batch / batch groups) x the kernel-output positions that land on the input (padding and
  dilation holes skipped, as XLA's ``GetConvolutionFlops``). Convolutions and GEMMs called as library
  custom-calls (cuDNN and MIOpen ``__cudnn$conv*``; cuBLAS, cuBLASLt and hipBLASLt ``__cublas$gemm``,
  ``__cublas$lt$matmul*``) are costed so too, as XLA's GPU cost analysis does: from their operand
  shapes, ``window`` / ``dim_labels`` / ``feature_group_count``, or the gemm's ``backend_config`` dot
  dimensions; ``other_flops`` apart: one per element of each elementwise op (``bitcast-convert``
  included), a reduce's reducer once per reduced element of its first input, a reduce-window's (window
  elements - 1) times per element of its output, the combiner's per element of a scatter's updates, 8 x
  log2 of each transform length per input element of an ``fft``, a map's computation per element, and
  sort, triangular-solve, cholesky, select-and-scatter and reduce-precision as XLA counts them
  (``FLOPS_FROM_SHAPES``); ``transcendentals`` (exp, log, tanh, rsqrt ...) counted apart again. Any other
  custom-call has no FLOPs perfkit can know: it is listed in ``uncosted`` (target -> calls a step), never
  counted as 0 unsaid (XLA's analysis counts -1 FLOP and -1 byte for it, its mark for unknown, where perfkit
  counts its operands and results as bytes), except the partitioner's markers (``PARTITIONER_MARKERS``), which
  run nothing;
- ``hbm_bytes``: every top-level op's operands and outputs (a fusion counts its own operands and outputs,
  not what happens inside it), what XLA calls bytes accessed; parameters, constants, tuples,
  get-tuple-element, bitcasts and transposes that only relabel dimensions touch no memory; a slice, gather
  or dynamic-slice reads of its operand what it outputs, a dynamic-update-slice (in place) its update, a
  scatter each update's slice; a library call's scratch workspace (the second
  element of the tuple it returns) is not traffic, as XLA counts a convolution's; the partitioner's
  markers in a program as lowered (Shardy's ``xla.sdy.*``, GSPMD's ``Sharding`` and its manual-shape
  conversions) touch none: XLA removes them before it compiles (its analysis of a lowered program counts
  -1 FLOPs and -1 bytes for each, its mark for a custom-call it cannot cost);
- ``collectives``: each with its kind, buffer, group size ``n`` (its devices, as XLA forms its groups from
  ``replica_groups``, ``channel_id``, ``use_global_device_ids`` and the module's replicas and partitions; a
  collective-permute's, the partitions of one replica with a channel_id, the replicas of one partition without) and
  the bytes one device sends over the interconnect: all-gather (n-1)/n of the gathered buffer, reduce-scatter
  (n-1)/n of the buffer it scatters, all-reduce 2(n-1)/n (a reduce-scatter then an all-gather), all-to-all (n-1)/n,
  collective-permute, send and broadcast the whole buffer; a collective run inside a fusion (XLA GPU's
  dynamic-slice fusion of a reduce-scatter, a Triton collective fusion) counted as it would be at the top;
- ``temp_bytes`` (preallocated temp) from the buffer assignment and ``peak_bytes`` (every allocation:
  XLA assigns buffers statically, so their total is the program's peak) from the memory-usage report.

Ops run as often as their computation: a while body ``known_trip_count`` times (once when unknown, and
``unknown_trip_loops`` says how many such loops a step runs),
the costliest branch of a conditional, a called or async-wrapped computation once per call. Two
definitions differ from XLA's ``HloCostAnalysis``: it counts one iteration of any while loop, where perfkit
counts what a step runs (``repeated_loops`` says how many loops run more than once a step); and an async pair
(a ``-start`` op or ``async-start`` and its done) costs in perfkit what its synchronous op does, where XLA adds
the start's whole tuple (the operand it aliases, its context) and the done's result (``async_pairs`` says how
many pairs a step runs).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import Counter
from typing import NamedTuple

from perfkit.errors import BadInput
from perfkit.hlo.buffers import COLLECTIVES, read_buffer_assignment, read_total_bytes
from perfkit.hlo.dumps import DumpFiles
from perfkit.hlo.parse import Computation, Instruction, Module, read_module, tuple_elements

# Sub-byte types as accelerators store them, packed (XLA's CPU analysis counts a byte each: it stores them so).
DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
               "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "s4": 0.5, "u4": 0.5, "s2": 0.25, "u2": 0.25,
               "s1": 0.125, "u1": 0.125, "f4e2m1fn": 0.5, "token": 0,
               **{f"f8{kind}": 1 for kind in ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz", "e4m3b11fnuz", "e4m3", "e3m4",
                                              "e8m0fnu")}}
TRANSCENDENTAL = frozenset({"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "power",
                            "sqrt", "cbrt", "rsqrt", "tanh", "sine", "cosine", "tan", "atan2", "erf"})
ELEMENTWISE = TRANSCENDENTAL | frozenset({
    "abs", "add", "and", "ceil", "clamp", "compare", "complex", "convert", "count-leading-zeros", "divide",
    "floor", "imag", "is-finite", "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt", "real",
    "remainder", "round-nearest-afz", "round-nearest-even", "select", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "sign", "subtract", "xor", "stochastic-convert", "bitcast-convert"})
def _sort_flops(inst: Instruction, shapes: dict[str, str]) -> int:
    n = shape_elements(shapes.get(inst.operands[0], "")) if inst.operands else 0
    return n * max(n - 1, 0).bit_length()  # n log2 n, rounded up


def _solve_flops(inst: Instruction, shapes: dict[str, str]) -> int:
    a = arrays(shapes.get(inst.operands[0], "")) if inst.operands else []
    return 2 * shape_elements(inst.shape) * (a[0][1][-1] if a and a[0][1] else 0)


def _cholesky_flops(inst: Instruction, shapes: dict[str, str]) -> int:
    a = arrays(inst.shape)
    return shape_elements(inst.shape) * (a[0][1][-1] if a and a[0][1] else 0) // 3


# Ops whose FLOPs XLA counts from their shapes alone: a sort, n log2 n of its first operand's elements; a
# triangular solve, 2 a matrix dimension per right-hand-side element; a Cholesky factorization, n^3 / 3 a
# matrix; reduce-precision, one an element.
FLOPS_FROM_SHAPES = {"sort": _sort_flops, "triangular-solve": _solve_flops, "cholesky": _cholesky_flops,
                     "reduce-precision": lambda inst, shapes: shape_elements(inst.shape)}
# Library calls XLA's GPU compilers emit for convolutions (cuDNN; MIOpen on ROCm, under the same names) and
# GEMMs (cuBLAS, cuBLASLt; hipBLAS / hipBLASLt on ROCm, under the same names).
LIBRARY_CONVOLUTIONS = frozenset({"__cudnn$convForward", "__cudnn$convBackwardInput", "__cudnn$convBackwardFilter",
                                  "__cudnn$convBiasActivationForward", "__cudnn$convForwardGraph"})
LIBRARY_GEMMS = frozenset({"__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8"})
# Custom-calls that only tell the SPMD partitioner how values are sharded (a program as lowered, before
# XLA partitions it): no FLOPs, no bytes, nothing left uncosted.
PARTITIONER_MARKERS = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"})
NO_MEMORY = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all"})
# XLA's own async start opcodes. Any other ``X-start`` (``-update``, ``-done``) is how XLA prints an async-start
# wrapping one op X, X's operands and attributes on the start (``fusion-start(p), kind=kLoop, calls=f``,
# ``custom-call-start(p), custom_call_target="foo"``): it runs X (``synchronous``).
NATIVE_STARTS = frozenset({"all-gather-start", "all-reduce-start", "collective-permute-start", "copy-start",
                           "async-start"})
# Per device, the share of a collective's buffer (see ``_buffer``) that one device sends, for n devices.
SENT_SHARE = {"all-gather": lambda n: (n - 1) / n, "reduce-scatter": lambda n: (n - 1) / n,
              "all-reduce": lambda n: 2 * (n - 1) / n, "all-to-all": lambda n: (n - 1) / n,
              "ragged-all-to-all": lambda n: (n - 1) / n, "collective-permute": lambda n: 1.0,
              "collective-broadcast": lambda n: 1.0, "send": lambda n: 1.0, "recv": lambda n: 0.0}

_LAYOUT = re.compile(r"\{[^{}]*\}")
_MINOR_TO_MAJOR = re.compile(r"\[[^\]]*\]\{([\d,]*)")  # an array's layout: its dimensions, minor to major
_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
_IOTA_GROUPS = re.compile(r"\[([\d,]+)\]<=\[")
# XLA's mesh-axes form, ``mesh['dp'=2,'sp'=4][, device_ids=(...)] {'sp'}`` (names quoted or not): the groups are
# the listed axes, whole or a sub-axis ``name:(pre)size``
_MESH_GROUPS = re.compile(r"mesh\[([^\]]*)\].*\{([^{}]*)\}$")
_MESH_AXIS = re.compile(r"'?([^'=,]+)'?=(\d+)")
_GROUP_AXIS = re.compile(r"'?([^',:]+)'?(?::\(\d+\)(\d+))?")
_TRIP_COUNT = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')
_WINDOW_FIELD = re.compile(r"(\w+)=([\w.\-]+)")


def arrays(shape: str) -> list[tuple[str, tuple[int, ...]]]:
    """(dtype, dims) of every array in a printed shape, tuple members in order (layouts ignored)."""
    out = []
    for m in _ARRAY.finditer(_LAYOUT.sub("", shape)):
        if m.group(1) in DTYPE_BYTES:
            dims = tuple(int(d.lstrip("<=")) for d in m.group(2).split(",") if d.strip())
            out.append((m.group(1), dims))
    return out


def shape_bytes(shape: str) -> int:
    return int(sum(DTYPE_BYTES[t] * math.prod(d) for t, d in arrays(shape)))


def shape_elements(shape: str) -> int:
    return sum(math.prod(d) for _, d in arrays(shape))


def start_result(shape: str) -> str:
    """What an async start's tuple holds as its result: its element 1, whole (``(operands, result, context...)``;
    a combined all-gather-start's ``((f32[1024], f32[512]), (f32[4096], f32[2048]))`` has a tuple of results, so
    its element 1 is, not the flattened tuple's second array); "" where the tuple has no element 1."""
    try:
        parts = tuple_elements(shape)
    except ValueError:
        return ""
    return parts[1] if len(parts) > 1 else ""


def synchronous(inst: Instruction) -> Instruction:
    """The op an ``X-start`` that wraps op X runs (``NATIVE_STARTS``): X, with the start's result as its shape;
    any other instruction as it is. Costed as X, a wrapped fusion's or custom-call's FLOPs count (they were 0,
    and an unknown custom-call so wrapped was not listed as not costed)."""
    if not inst.opcode.endswith("-start") or inst.opcode in NATIVE_STARTS:
        return inst
    return inst._replace(opcode=inst.opcode.removesuffix("-start"), shape=start_result(inst.shape))


def _dims_attr(inst: Instruction, key: str) -> list[int]:
    value = dict(inst.attrs).get(key, "{}").strip("{} ")
    return [int(x) for x in value.split(",") if x.strip()]


def custom_call_target(inst: Instruction) -> str:
    return dict(inst.attrs).get("custom_call_target", "").strip('"')


def is_partitioner_marker(inst: Instruction) -> bool:
    """A ``PARTITIONER_MARKERS`` custom-call, or Shardy's (every ``xla.sdy.`` target)."""
    if inst.opcode != "custom-call":
        return False
    target = custom_call_target(inst)
    return target in PARTITIONER_MARKERS or target.startswith("xla.sdy.")


def array_text(dtype: str, dims: tuple[int, ...]) -> str:
    return f"{dtype}[{','.join(map(str, dims))}]"


def first_array(shape: str) -> str:
    """A library call's result: the first element of the tuple it returns (the rest is scratch)."""
    parts = arrays(shape)
    return array_text(*parts[0]) if parts else shape


def _window(inst: Instruction, spatial: int) -> list[dict[str, int]]:
    """Per spatial dimension of a ``window``: stride, padding low / high, base (lhs) and window (rhs) dilation."""
    fields = dict(_WINDOW_FIELD.findall(dict(inst.attrs).get("window", "")))
    dims = [{"stride": 1, "low": 0, "high": 0, "base": 1, "dilation": 1} for _ in range(spatial)]
    for key, name in (("stride", "stride"), ("lhs_dilate", "base"), ("rhs_dilate", "dilation")):
        for d, v in zip(dims, fields.get(key, "").split("x") if key in fields else ()):
            d[name] = int(v)
    for d, pad in zip(dims, fields["pad"].split("x") if "pad" in fields else ()):
        low, high = pad.split("_")
        d["low"], d["high"] = int(low), int(high)
    return dims


def _valid_positions(kernel: int, output: int, inputs: int, w: dict[str, int]) -> int:
    """Kernel x output positions of one spatial dimension that read an input element (XLA's count)."""
    count = 0
    for k in range(kernel):
        for o in range(output):
            undilated = o * w["stride"] - w["low"] + k * w["dilation"]
            index, hole = divmod(undilated, w["base"])
            count += not hole and 0 <= index < inputs
    return count


def convolution_flops(inst: Instruction, lhs: str, rhs: str, out: str) -> float:
    """A convolution's FLOPs from its input, kernel and output shapes, ``dim_labels`` and ``window``: an
    HLO ``convolution`` or a library call (whose dimension numbers describe the forward convolution, with
    operand 0 read as the input and its result as the output, as XLA reads them)."""
    attrs = dict(inst.attrs)
    labels = attrs.get("dim_labels", "")
    shapes = [arrays(s) for s in (lhs, rhs, out)]
    if not all(shapes) or "_" not in labels or "->" not in labels:
        return 0.0
    (_, lhs_dims), (_, rhs_dims), (_, out_dims) = (s[0] for s in shapes)
    lhs_labels, rest = labels.split("_", 1)
    rhs_labels, out_labels = rest.split("->")
    positions = 1
    for i, w in enumerate(_window(inst, sum(c.isdigit() for c in lhs_labels))):
        d = str(i)
        positions *= _valid_positions(rhs_dims[rhs_labels.index(d)], out_dims[out_labels.index(d)],
                                      lhs_dims[lhs_labels.index(d)], w)
    in_features = lhs_dims[lhs_labels.index("f")] // int(attrs.get("feature_group_count", "1"))
    batch = lhs_dims[lhs_labels.index("b")] // int(attrs.get("batch_group_count", "1"))
    return 2.0 * in_features * out_dims[out_labels.index("f")] * batch * positions


def gemm_contracted(inst: Instruction, lhs: str) -> int | None:
    """Elements a library GEMM contracts, from its ``backend_config`` dot dimensions (bare or nested in
    ``gemm_backend_config``, printed as JSON or as a quoted JSON string); None when it holds none."""
    config = dict(inst.attrs).get("backend_config", "")
    try:
        config = json.loads(config)
        config = json.loads(config) if isinstance(config, str) else config
    except ValueError:
        return None
    dims = (config.get("gemm_backend_config", config) if isinstance(config, dict) else {}).get("dot_dimension_numbers")
    lhs_arrays = arrays(lhs)
    if not isinstance(dims, dict) or not lhs_arrays:
        return None
    return math.prod(lhs_arrays[0][1][int(k)] for k in dims.get("lhs_contracting_dimensions", []))


# Collectives that carry ``use_global_device_ids`` (false unless printed); the others have no such field, so a
# channel_id alone makes their groups partition ids.
_GLOBAL_ID_KINDS = ("all-gather", "all-reduce", "reduce-scatter")


def _listed_groups(groups: str) -> tuple[int, int] | None:
    """(devices in the first group, ids named in all groups) of ``{{0,1},{2,3}}``, the iota form ``[G,S]<=[N]`` or
    the mesh-axes form ``mesh['dp'=2,'sp'=4] {'sp'}``; None when the groups are empty."""
    iota = _IOTA_GROUPS.match(groups)
    if iota:
        dims = [int(d) for d in iota.group(1).split(",")]
        return dims[-1], math.prod(dims)
    mesh = _MESH_GROUPS.match(groups)
    if mesh:
        sizes = {name: int(size) for name, size in _MESH_AXIS.findall(mesh.group(1))}
        grouped = [_GROUP_AXIS.fullmatch(axis.strip()) for axis in mesh.group(2).split(",")]
        if sizes and all(a and a.group(1) in sizes for a in grouped):
            return math.prod(int(a.group(2) or sizes[a.group(1)]) for a in grouped), math.prod(sizes.values())
    first = re.search(r"\{([\d,\s]+)\}", groups)
    if first is None:
        return None
    return len(re.findall(r"\d+", first.group(1))), len(set(re.findall(r"\d+", groups)))


def group_size(inst: Instruction, devices: int, replicas: int | None = None) -> int:
    """Devices taking part in each group of a collective run on ``devices`` devices, ``replicas`` replicas of
    ``devices / replicas`` partitions each, as XLA forms its groups (``GetCollectiveOpGroupMode`` and
    ``GetParticipatingDevicesGroups``). No channel_id: the groups list
    replica ids, each group within one partition (empty: every replica). A channel_id on an all-gather, all-reduce
    or reduce-scatter: with ``use_global_device_ids`` the groups list flattened device ids; without, replica ids,
    each group spanning every partition (empty: every device). A channel_id on any other collective: partition
    ids (empty: every partition). A group naming more replicas than a one-replica module has reads as listed, as
    XLA's verifier does (it takes such a count as unset). ``replicas`` None (the module's counts unknown): groups
    as listed, BadInput where the counts would size them."""
    attrs = dict(inst.attrs)
    channel = "channel_id" in attrs
    global_ids = inst.opcode.removesuffix("-start") in _GLOBAL_ID_KINDS
    flattened = global_ids and attrs.get("use_global_device_ids") == "true"
    if flattened and not channel:
        raise BadInput(f"line {inst.line}: {inst.name} has use_global_device_ids but no channel_id, which XLA refuses")
    listed = _listed_groups(attrs.get("replica_groups", "").strip())
    if flattened and listed is None:  # (XLA's GetParticipatingDevicesGroups: a RET_CHECK, no default group)
        raise BadInput(f"line {inst.line}: {inst.name} has use_global_device_ids=true and replica_groups={{}}: its "
                       "groups are flattened device ids, which XLA requires listed (no group of every device stands "
                       "in), so its group size is not in the text (jaxlib 0.10.2 prints a profile's program whose "
                       "groups are in iota form so: cost the program as XLA dumps it, --xla_dump_to)")
    spans_partitions = channel and global_ids and not flattened
    if replicas is None:
        if listed is not None and not spans_partitions:
            return listed[0]
        why = _sized_by_counts(attrs, listed, channel, spans_partitions)
        raise BadInput(f"line {inst.line}: {inst.name} is sized by the module's replica and partition counts ({why}), "
                       "which its HloModule line does not name (XLA prints replica_count and num_partitions only where "
                       "they are not 1, and a program printed from its HloProto, as a profile keeps it, names "
                       "neither): its group size is not in the text")
    partitions = devices // replicas
    if "replica_groups" not in attrs and "source_target_pairs" in attrs:
        return _pairs_group(inst, attrs["source_target_pairs"], partitions if channel else replicas, channel)
    if listed is None:
        return replicas if not channel else devices if spans_partitions else partitions
    size, ids = listed
    if not spans_partitions or (replicas == 1 and ids > 1):
        return size
    if ids != replicas:
        raise BadInput(f"line {inst.line}: {inst.name}'s replica groups name {ids} replicas, the module has "
                       f"{replicas}, which XLA refuses")
    return size * partitions


def _pairs_group(inst: Instruction, pairs: str, count: int, channel: bool) -> int:
    """A collective-permute's group: the ``count`` partitions of one replica its pairs run among (a channel_id), or the
    replicas of one partition (none), as XLA's ``GetCollectiveOpGroupMode`` forms it. Pairs naming more ids than a
    count of 1 read as the ids they name, as XLA's verifier takes such a count as unset; a count above 1 that they
    pass is refused, as XLA refuses it."""
    ids = {int(i) for i in re.findall(r"\d+", pairs)}
    if count == 1:
        return max(len(ids), 1)
    if ids and max(ids) >= count:
        kind = "partition" if channel else "replica"
        raise BadInput(f"line {inst.line}: {inst.name}'s source-target pairs name {kind} {max(ids)}, the module has "
                       f"{count}, which XLA refuses")
    return count


def _sized_by_counts(attrs: dict[str, str], listed: tuple[int, int] | None, channel: bool,
                     spans_partitions: bool) -> str:
    """What about a collective makes the module's counts size its groups, and what its group is then."""
    if listed is not None:
        return "replica groups with a channel_id and no use_global_device_ids: each group's replicas on every partition"
    if "replica_groups" not in attrs:
        if "source_target_pairs" not in attrs:
            return "no groups: every device"
        return ("source-target pairs with a channel_id: every partition" if channel else
                "source-target pairs: every replica")
    groups = f"replica_groups={attrs['replica_groups'].strip()}"
    if not channel:
        return f"{groups} and no channel_id: every replica"
    if spans_partitions:
        return f"{groups}, a channel_id and no use_global_device_ids: every device"
    return f"{groups} and a channel_id: every partition"


class Collective(NamedTuple):
    kind: str           # all-gather, reduce-scatter, all-reduce, all-to-all, collective-permute ...
    instruction: str
    shape: str          # the buffer the share applies to, layouts dropped
    buffer_bytes: int
    group: int          # devices in its replica group
    sent_bytes: float   # per device, over the interconnect
    times: int          # how often one step runs it (while trip counts)


@dataclasses.dataclass
class ProgramCost:
    """One program's figures (see the module docstring); ``as_json`` is the ``perfkit cost --json`` form."""

    module: str
    file: str
    devices: int | None  # None: its HloModule line names neither count (a program printed from its HloProto)
    dot_flops: float = 0.0
    other_flops: float = 0.0
    transcendentals: float = 0.0
    hbm_bytes: float = 0.0
    collectives: list[Collective] = dataclasses.field(default_factory=list)
    temp_bytes: int | None = None
    peak_bytes: int | None = None
    uncosted: Counter = dataclasses.field(default_factory=Counter)  # custom-call target -> calls a step
    async_pairs: int = 0  # async start / done pairs a step runs, each costed as its synchronous op
    repeated_loops: int = 0  # the program's while loops whose body runs more than once, each trip costed
    unknown_trip_loops: int = 0  # while loops a step runs whose trip count XLA did not work out, costed once

    @property
    def interconnect_bytes(self) -> float:
        return sum(c.sent_bytes * c.times for c in self.collectives)

    def by_kind(self) -> dict[str, dict]:
        """Per collective kind: how many a step runs, the bytes of their buffers, the bytes a device sends."""
        out: dict[str, dict] = {}
        for c in self.collectives:
            row = out.setdefault(c.kind, {"count": 0, "buffer_bytes": 0, "sent_bytes": 0.0})
            row["count"] += c.times
            row["buffer_bytes"] += c.buffer_bytes * c.times
            row["sent_bytes"] += c.sent_bytes * c.times
        return dict(sorted(out.items()))

    def shapes(self) -> Counter:
        """(kind, buffer shape, devices in its group) -> how many a step runs."""
        out: Counter = Counter()
        for c in self.collectives:
            out[(c.kind, c.shape, c.group)] += c.times
        return out

    @staticmethod
    def uncosted_calls(program: dict, quote: str = "") -> str | None:
        """``196 custom-calls no cost analysis knows (`x` x196)`` of a program (``as_json`` form); None
        without any."""
        uncosted = program.get("uncosted") or {}
        calls = ", ".join(f"{quote}{target}{quote} x{n}" for target, n in uncosted.items())
        n = sum(uncosted.values())
        return f"{n} custom-call{'s' if n != 1 else ''} no cost analysis knows ({calls})" if uncosted else None

    @staticmethod
    def definitions(program: dict) -> list[str]:
        """Where a program's figures (``as_json`` form) differ from XLA's cost analysis by definition, a
        sentence each."""
        out = []
        if loops := program.get("repeated_loops"):
            # the count first: "a loop that runs more than once (1 here)" read as a loop run once
            out.append(f"{loops} while loop{'s' * (loops != 1)} here run{'s' * (loops == 1)} more than once: every "
                       "trip counted, where XLA's cost analysis counts one iteration")
        if unknown := program.get("unknown_trip_loops"):
            # such a loop (a data-dependent while_loop) may run any number of times: a once-through figure is a
            # lower bound of the step, not its cost
            out.append(f"{unknown} while loop{'s' * (unknown != 1)} here {'has' if unknown == 1 else 'have'} a trip "
                       "count XLA did not work out: counted once, as XLA's cost analysis counts it; the step costs "
                       "more where it runs more")
        if program.get("async_pairs"):
            out.append(f"HBM bytes count an async pair (a start and its done; {program['async_pairs']} here) as its "
                       "synchronous op: XLA's cost analysis adds the start's tuple and the done's result")
        return out

    def as_json(self) -> dict:
        return {"module": self.module, "file": self.file, "devices": self.devices,
                "flops": self.dot_flops + self.other_flops, "dot_flops": self.dot_flops,
                "other_flops": self.other_flops, "transcendentals": self.transcendentals,
                "hbm_bytes": self.hbm_bytes, "interconnect_bytes": self.interconnect_bytes,
                "collectives": self.by_kind(),
                "collective_shapes": [{"kind": k, "shape": s, "group": g, "count": n, "buffer_bytes": shape_bytes(s)}
                                      for (k, s, g), n in sorted(self.shapes().items())],
                "temp_bytes": self.temp_bytes, "peak_bytes": self.peak_bytes,
                "uncosted": dict(sorted(self.uncosted.items())), "async_pairs": self.async_pairs,
                "repeated_loops": self.repeated_loops, "unknown_trip_loops": self.unknown_trip_loops}


class _Counter:
    """Walks one module's computations, adding each op's cost times how often it runs."""

    def __init__(self, module: Module, devices: int, replicas: int | None):
        self.module = module
        self.devices = devices
        self.replicas = replicas
        self.roots = {c.name: next((i for i in c.instructions if i.root), None) for c in module.computations.values()}
        self.cost = ProgramCost(module.name, module.path, devices)
        self.loops: set[str] = set()  # the while loops counted (HLO names an instruction once in a module)

    def shapes_of(self, comp: Computation) -> dict[str, str]:
        return {i.name: i.shape for i in comp.instructions}

    # -- FLOPs: any computation, fused or not

    def flops(self, name: str) -> tuple[float, float, float]:
        """(dot, other, transcendental) FLOPs of one run of computation ``name`` and what it calls."""
        comp = self.module.computations.get(name)
        if comp is None:
            return 0.0, 0.0, 0.0
        shapes = self.shapes_of(comp)
        dot = other = trans = 0.0
        for inst in comp.instructions:
            d, o, t = self.inst_flops(inst, shapes)
            dot, other, trans = dot + d, other + o, trans + t
        return dot, other, trans

    def inst_flops(self, inst: Instruction, shapes: dict[str, str]) -> tuple[float, float, float]:
        inst = synchronous(inst)
        op = inst.opcode
        if op == "dot":
            lhs = arrays(shapes.get(inst.operands[0], ""))
            contracted = math.prod(lhs[0][1][k] for k in _dims_attr(inst, "lhs_contracting_dims")) if lhs else 0
            return 2.0 * shape_elements(inst.shape) * contracted, 0.0, 0.0
        if op == "convolution" and len(inst.operands) > 1:
            return convolution_flops(inst, shapes.get(inst.operands[0], ""), shapes.get(inst.operands[1], ""),
                                     inst.shape), 0.0, 0.0
        if op == "custom-call" and not inst.calls:
            return self.library_flops(inst, shapes), 0.0, 0.0
        if op == "fft":
            # XLA: 4 complex multiply-adds an input element per factor log2 (floored) of each transform length
            logs = math.prod(n.bit_length() - 1 for n in _dims_attr(inst, "fft_length"))
            return 0.0, 8.0 * logs * shape_elements(shapes.get(inst.operands[0], "")), 0.0
        if op in ELEMENTWISE:
            n = float(shape_elements(inst.shape))
            return (0.0, 0.0, n) if op in TRANSCENDENTAL else (0.0, n, 0.0)
        if op == "reduce" and inst.calls and inst.operands:
            # XLA: the reducer's FLOPs once per reduced element (the first input's elements less the first output's)
            applied = shape_elements(shapes.get(inst.operands[0], "")) - shape_elements(first_array(inst.shape))
            return _scaled(self.flops(inst.calls[-1]), max(applied, 0))
        if op == "reduce-window" and inst.calls:
            # XLA: the reducer's FLOPs (window elements - 1) times per element of the (first) output
            applied = (_window_elements(inst) - 1) * shape_elements(first_array(inst.shape))
            return _scaled(self.flops(inst.calls[-1]), applied)
        if op == "scatter" and inst.calls:
            # XLA: the combiner once per element of the updates
            updates = inst.operands[(len(inst.operands) + 1) // 2:]
            return _scaled(self.flops(inst.calls[-1]), sum(shape_elements(shapes.get(u, "")) for u in updates))
        if op in ("all-reduce", "all-reduce-start") and inst.calls:
            # XLA: the reducer once per element of the result.
            return _scaled(self.flops(inst.calls[-1]), shape_elements(self.output_shape(inst)))
        if op == "map" and inst.calls:  # XLA: its computation once per element
            return _scaled(self.sum_calls(inst.calls), shape_elements(inst.shape))
        if op == "select-and-scatter" and len(inst.calls) == 2 and inst.operands:
            # XLA: per source element, the select between a window's elements, then the scatter
            window = _window_elements(inst)
            select, scatter = (sum(self.flops(c)) for c in inst.calls)
            source = shape_elements(shapes.get(inst.operands[1], "")) if len(inst.operands) > 1 else 0
            return 0.0, source * ((window - 1) * select + scatter), 0.0
        if op in FLOPS_FROM_SHAPES:
            return 0.0, float(FLOPS_FROM_SHAPES[op](inst, shapes)), 0.0
        if op in ("fusion", "call", "async-start", "custom-call") and inst.calls:
            return self.sum_calls(inst.calls)
        if op == "while":
            return _scaled(self.sum_calls(inst.calls), self.trip_count(inst))
        if op == "conditional" and inst.calls:
            return max((self.flops(c) for c in inst.calls), key=sum)
        return 0.0, 0.0, 0.0

    def sum_calls(self, calls) -> tuple[float, float, float]:
        parts = [self.flops(c) for c in calls]
        return tuple(sum(p[k] for p in parts) for k in range(3))

    @staticmethod
    def library_flops(inst: Instruction, shapes: dict[str, str]) -> float:
        """A library convolution's or GEMM's FLOPs; 0 for any other custom-call (``uncosted`` lists it)."""
        target = custom_call_target(inst)
        lhs = shapes.get(inst.operands[0], "") if inst.operands else ""
        if target in LIBRARY_CONVOLUTIONS and len(inst.operands) > 1:
            return convolution_flops(inst, lhs, shapes.get(inst.operands[1], ""), first_array(inst.shape))
        contracted = gemm_contracted(inst, lhs) if target in LIBRARY_GEMMS else None
        return 0.0 if contracted is None else 2.0 * shape_elements(first_array(inst.shape)) * contracted

    @staticmethod
    def known_trips(inst: Instruction) -> int | None:
        """A while loop's trip count as XLA worked it out (``known_trip_count``), None where it did not."""
        m = _TRIP_COUNT.search(dict(inst.attrs).get("backend_config", ""))
        return int(m.group(1)) if m else None

    def trip_count(self, inst: Instruction) -> int:
        known = self.known_trips(inst)
        return 1 if known is None else known

    # -- bytes and collectives: the ops that run at the top (not inside fusions or reducers)

    def walk(self, name: str, times: int) -> None:
        comp = self.module.computations.get(name)
        if comp is None:
            return
        shapes = self.shapes_of(comp)
        for inst in comp.instructions:
            self.top_level(inst, shapes, times)

    def top_level(self, inst: Instruction, shapes: dict[str, str], times: int) -> None:
        if inst.opcode.endswith("-start"):  # (async-start too)
            self.cost.async_pairs += times
        inst = synchronous(inst)
        op = inst.opcode
        if op == "while":
            known = self.known_trips(inst)
            trips = 1 if known is None else known
            if inst.name not in self.loops:  # a loop inside a loop is one loop of the program, however often it runs
                self.loops.add(inst.name)
                self.cost.repeated_loops += trips > 1
                self.cost.unknown_trip_loops += known is None
            for c in inst.calls:
                self.walk(c, times * trips)
            return
        if op == "call":
            for c in inst.calls:
                self.walk(c, times)
            return
        if op == "conditional" and inst.calls:  # counted as its costliest branch
            self.walk(max(inst.calls, key=lambda c: sum(self.flops(c))), times)
            return
        kind = self.collective_kind(inst)
        if kind is not None:
            self.cost.collectives.append(self.collective(kind, inst, shapes, times))
        elif op == "fusion":
            self.fused_collectives(inst, times)
        if is_partitioner_marker(inst):
            return
        self.list_uncosted(inst, shapes, times)
        if op == "async-start":  # the op it runs is in a computation of its own: costed there (``inst_flops``)
            for c in inst.calls:
                wrapped = self.module.computations.get(c)
                for inner in wrapped.instructions if wrapped else ():
                    self.list_uncosted(inner, self.shapes_of(wrapped), times)
        if op in NO_MEMORY or op.endswith(("-done", "-update")) or _is_bitcast(inst, shapes):
            return
        part = _partial_bytes(inst, shapes)
        if part is not None:
            self.cost.hbm_bytes += times * part
            return
        if op == "fusion" and inst.calls and inst.calls[0] in self.module.computations:
            self.cost.hbm_bytes += times * self.fusion_bytes(inst)
            return
        operand_bytes = sum(shape_bytes(shapes.get(o, "")) for o in inst.operands)
        self.cost.hbm_bytes += times * (operand_bytes + shape_bytes(self.output_shape(inst)))

    def fused_collectives(self, fusion: Instruction, times: int) -> None:
        """The collectives a fusion runs inside it (XLA GPU's dynamic-slice fusion of a reduce-scatter, a Triton
        collective fusion), each counted as its own op at the top would be."""
        for name in fusion.calls:
            comp = self.module.computations.get(name)
            shapes = self.shapes_of(comp) if comp else {}
            for inner in map(synchronous, comp.instructions if comp else ()):
                kind = self.collective_kind(inner)
                if kind is not None:
                    self.cost.collectives.append(self.collective(kind, inner, shapes, times))
                elif inner.opcode == "fusion":
                    self.fused_collectives(inner, times)

    def list_uncosted(self, inst: Instruction, shapes: dict[str, str], times: int) -> None:
        """A custom-call of no library known here counted under its target in ``uncosted``."""
        if inst.opcode == "custom-call" and not inst.calls and not self.library_flops(inst, shapes):
            self.cost.uncosted[custom_call_target(inst) or "custom-call"] += times

    def fusion_bytes(self, inst: Instruction) -> float:
        """A fusion's operands as its body reads them, and its output (as XLA's HandleFusion): a parameter
        only sliced is read as the slices; one updated in place (dynamic-update-slice operand 0) is not
        read, and such a root writes only its update."""
        body = self.module.computations[inst.calls[0]]
        users: dict[str, list[Instruction]] = {}
        for i in body.instructions:
            for o in i.operands:
                users.setdefault(o, []).append(i)
        total = 0.0
        for param in (i for i in body.instructions if i.opcode == "parameter"):
            total += self.read_bytes(param, users)
        root = self.roots[body.name]
        while root is not None and root.opcode == "bitcast":
            root = next((i for i in body.instructions if i.name == root.operands[0]), None)
        if root is not None and root.opcode == "dynamic-update-slice":
            update = next((i for i in body.instructions if i.name == root.operands[1]), None)
            return total + (shape_bytes(update.shape) if update is not None else 0)
        return total + shape_bytes(inst.shape)

    @staticmethod
    def read_bytes(param: Instruction, users: dict[str, list[Instruction]]) -> float:
        size, whole_read = 0.0, False
        for user in users.get(param.name, ()):
            if user.opcode == "slice" or (user.opcode == "dynamic-slice" and user.operands[0] == param.name):
                size += shape_bytes(user.shape)
            elif user.opcode == "dynamic-update-slice" and user.operands[0] == param.name:
                continue
            elif not whole_read:
                whole_read = True
                size += shape_bytes(param.shape)
        return size

    def output_shape(self, inst: Instruction) -> str:
        """What an op writes: an async start's result, not the operand aliases its tuple repeats; a library
        call's result, not its scratch workspace."""
        if inst.opcode == "custom-call" and custom_call_target(inst) in LIBRARY_CONVOLUTIONS | LIBRARY_GEMMS:
            return first_array(inst.shape)
        if inst.opcode == "all-reduce-start":  # no operand aliases: its shape is its result (a tuple when variadic)
            return inst.shape
        if inst.opcode.endswith("-start") and inst.shape.startswith("("):
            return start_result(inst.shape)
        return inst.shape

    def collective_kind(self, inst: Instruction) -> str | None:
        op = inst.opcode
        if op == "async-start":
            root = self.roots.get(inst.calls[0]) if inst.calls else None
            return root.opcode if root is not None and root.opcode in COLLECTIVES else None
        base = op.removesuffix("-start")
        if base in ("send", "recv") and dict(inst.attrs).get("is_host_transfer") == "true":
            return None  # to or from the host (a host callback): PCIe, not the interconnect between devices
        return base if base in COLLECTIVES and not op.endswith("-done") else None

    def collective(self, kind: str, inst: Instruction, shapes: dict[str, str], times: int) -> Collective:
        target = inst
        operand_shapes = [shapes.get(o, "") for o in inst.operands]
        if inst.opcode == "async-start":  # the wrapped collective's own operands and output
            target = self.roots[inst.calls[0]]
            inner = self.shapes_of(self.module.computations[inst.calls[0]])
            operand_shapes = [inner.get(o, "") for o in target.operands]
            output = target.shape
        else:
            output = self.output_shape(inst)
        # all-gather: the gathered output; every other kind: what goes in.
        buffer = output if kind == "all-gather" else " ".join(operand_shapes)
        if kind in ("collective-permute", "all-to-all") and not buffer.strip():
            buffer = output
        try:
            n = group_size(target, self.devices, self.replicas)
        except BadInput as e:  # group_size knows the instruction, not the file
            raise BadInput(e.reason, path=self.module.path) from None
        size = shape_bytes(buffer)
        shown = _LAYOUT.sub("", buffer).strip()
        return Collective(kind, inst.name, shown, size, n, size * SENT_SHARE[kind](n) if n > 1 else 0.0, times)


def _window_elements(inst: Instruction) -> int:
    """The elements of an op's ``window`` (``size=AxB...``; 1 where it has none)."""
    size = dict(_WINDOW_FIELD.findall(dict(inst.attrs).get("window", ""))).get("size", "1")
    return math.prod(int(v) for v in size.split("x"))


def _scaled(flops: tuple[float, float, float], n: float) -> tuple[float, float, float]:
    """(dot, other, transcendental) FLOPs of a computation run ``n`` times."""
    return flops[0] * n, flops[1] * n, flops[2] * n


def _layout(shape: str) -> list[int]:
    """An array's dimensions minor to major: as printed, else XLA's default (the last dimension minor)."""
    m = _MINOR_TO_MAJOR.search(shape)
    if m and m.group(1):
        return [int(d) for d in m.group(1).split(",")]
    return list(range(len(arrays(shape)[0][1]) - 1, -1, -1)) if arrays(shape) else []


def _is_bitcast(inst: Instruction, shapes: dict[str, str]) -> bool:
    """A transpose that only relabels dimensions, its bytes in the same order (XLA's ``IsEffectiveBitcast``): no
    memory touched."""
    if inst.opcode != "transpose" or not inst.operands:
        return False
    order, out = _dims_attr(inst, "dimensions"), _layout(inst.shape)
    return len(order) == len(out) and [order[d] for d in out] == _layout(shapes.get(inst.operands[0], ""))


def _partial_bytes(inst: Instruction, shapes: dict[str, str]) -> float | None:
    """What an op that touches only part of an operand reads and writes, as XLA counts each operand (its total
    counts one index operand alone); an opt-barrier of a tuple, its operand's arrays once (XLA counts its result
    as the tuple's table of pointers, which perfkit never counts); None for any other op."""
    op, out = inst.opcode, shape_bytes(inst.shape)
    size = [shape_bytes(shapes.get(o, "")) for o in inst.operands]
    if op in ("slice", "dynamic-slice", "gather") and size:  # operand 0 read as much as is output; indices whole
        return out + sum(size[1:]) + out
    if op == "dynamic-update-slice" and len(size) > 1:  # in place: the update read and written; indices
        return 2 * size[1] + sum(size[2:])
    if op == "opt-barrier" and size and inst.shape.startswith("("):  # a tuple's arrays once: the operand's
        return size[0]
    if op == "scatter" and len(size) > 2:  # operands, indices, updates: each update read, its slice read and written
        n = (len(size) - 1) // 2
        return 3 * sum(size[n + 1:]) + size[n]
    return None


_UNBOUNDED = re.compile(r"[a-z][a-z0-9]*\[[^\]]*\?[^\]]*\]")  # ``f32[?,784]``: no bound, no size


def _refuse_unbounded(module: Module) -> None:
    """BadInput where an instruction has an unbounded dynamic dimension (a program as lowered from shape-polymorphic
    StableHLO): it has no size, so none of its bytes or FLOPs can be counted (it was a traceback)."""
    for comp in module.computations.values():
        for inst in comp.instructions:
            found = _UNBOUNDED.search(inst.shape) if "?" in inst.shape else None
            if found:
                raise BadInput(f"line {inst.line}: {inst.name} has an unbounded dynamic dimension ({found.group()}): "
                               "perfkit costs static and bounded shapes only", path=module.path)


def program_cost(module: Module, devices: int = 1, replicas: int | None = 1) -> ProgramCost:
    """The figures of one parsed module run on ``devices`` devices, ``replicas`` replicas of ``devices / replicas``
    partitions: they size collectives whose replica groups are empty or span partitions (``replicas`` None: the
    counts are unknown, and such a collective is refused)."""
    _refuse_unbounded(module)
    counter = _Counter(module, devices, replicas)
    counter.cost.dot_flops, counter.cost.other_flops, counter.cost.transcendentals = counter.flops(module.entry)
    counter.walk(module.entry, 1)
    return counter.cost


def dump_cost(files: DumpFiles) -> ProgramCost:
    """One dumped module's cost, with its temp and peak memory where the buffer files were dumped."""
    module = read_module(files.hlo)
    counts = module.counts
    if counts is None:  # costed as one device, whose collectives sized by the counts are refused
        cost = program_cost(module, 1, None)
        cost.devices = None
    else:
        cost = program_cost(module, counts["replica_count"] * counts["num_partitions"], counts["replica_count"])
    if files.buffer_assignment is not None:
        cost.temp_bytes = read_buffer_assignment(files.buffer_assignment, files.memory_report).temp_bytes
    if files.memory_report is not None:
        cost.peak_bytes = read_total_bytes(files.memory_report)
    return cost
