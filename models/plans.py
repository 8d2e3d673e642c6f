"""Parallel plans: how an unchanged model runs on a 1-D device mesh.

A model is written once against the operations of ``Plan`` (as gpt-fast's ``tp.py`` swaps layers of an
unchanged model): ``project`` (column-parallel matmuls), ``project_out`` (row-parallel matmuls back into
a stream), ``attention``, ``rope``, ``projected_rows`` (per-token tables such as RoPE angles), and
``join`` / ``split`` (streams joined along the sequence for single-stream blocks). Every call names the
stream its rows belong to; a family declares its streams (``Stream``, ``Joint``) and the pipeline binds
the plan to them (``Plan.bind``). Each weight is tagged with a ``kind``: ``"column"`` (output features
split: q, k, v, FFN up), ``"row"`` (input features split: attention out, FFN down) or ``"replicated"``.

- ``local``: one device; plain dots.
- ``tp``: heads sharded; every stream whole on every device; an all-reduce after row-parallel matmuls.
- ``sp``: sequence streams sharded by rows; the all-gather is fused into column-parallel matmuls and
  the reduce-scatter out of row-parallel ones (``perfkit.kernels.collective_matmul``, ``impl``
  selectable); attention sees whole sequences with local heads, as under ``tp``. Streams declared
  ``sequence=False`` (text context, LTX-2's audio) stay whole and run as under ``tp``.
- ``ulysses``: sequence streams sharded by rows, weights replicated; attention trades the row shard
  for a head shard with an all-to-all each way (DeepSpeed Ulysses).

Options of every plan: ``split_rope`` (RoPE as split halves; the pipeline permutes each head's q / k
channels once on the host). Of the sequence plans: ``pad`` (a stream whose rows do not split is padded
at its tail, eagerly, before the compiled step; pad keys are dropped in attention and pad rows cut at
the end) and ``rope_fault_block``: a planted defect, for checking perfkit's first-departure analysis
(``perfkit.quality.departure``): in that block (its index in the order the forward runs its blocks)
ranks > 0 rotate q and k by RoPE angles one row off; absent (None), as shipped, there is none. Values
that differ by rank (which rows a rank holds) enter the compiled step through
``lax.axis_index``, never as Python constants, so every rank compiles the same program.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from perfkit.errors import BadInput
from perfkit.kernels import collective_matmul as cm
from perfkit.kernels import padding
from perfkit.kernels.attention import attention_reference
from perfkit.kernels.precision import compute_dtype
from perfkit.kernels.rope import apply_rope_interleaved, apply_rope_split_halves

AXIS = "x"
# ``pad`` option -> how many rows a padded stream gets (perfkit.kernels.padding)
PAD_MODES = {
    "shards": lambda rows, ranks: padding.plan_multiple(rows, ranks, ranks),
    "halves": padding.plan_ring_halves,  # even shards: both halves of a bidirectional ring
    "tiles": padding.plan_whole_tiles,  # whole row tiles per ring half: what the Pallas kernels take
    "lanes": padding.plan_lanes,  # shards of a multiple of 128 rows
}
CHUNKINGS = ("interleaved", "contiguous")


def _dot(x, w):
    # Accumulate in float32 (as perfkit.kernels.collective_matmul does, so one-device plans round alike).
    return jnp.matmul(x, w, preferred_element_type=compute_dtype(x.dtype)).astype(x.dtype)


@dataclasses.dataclass(frozen=True)
class Stream:
    """A (batch, rows, channels) token input of a family's forward."""

    rows: int
    channels: int
    denoised: bool = True  # Euler-stepped latents; else a fixed condition (zeros in CFG's unconditional half)
    sequence: bool = True  # row-sharded under sequence plans; else whole on every device (as under tp)


@dataclasses.dataclass(frozen=True)
class Joint:
    """A stream a model builds by joining streams along the sequence (the single-stream blocks).

    ``chunks`` says how a sequence plan lays it out: ``"interleaved"`` (each rank joins the shards it
    holds, no communication; its rows are in the order [part0 shard 0, part1 shard 0, part0 shard 1,
    ...], which per-token tables follow) or ``"contiguous"`` (the joined sequence split into contiguous
    chunks, which may straddle the boundary between parts; an all-gather and a cut at each end)."""

    parts: tuple[str, ...]
    chunks: str = "interleaved"


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """Where a stream's rows live: ``order[r, j]`` is the plain row held at local row j of rank r (-1
    for a pad row); a single row of ``order`` when the stream is whole on every device."""

    order: np.ndarray  # (ranks, local rows) int
    sharded: bool
    pad: padding.PadPlan | None = None  # sharded streams and contiguous joints: their tail padding

    @property
    def rows(self) -> int:
        return int((self.order >= 0).sum())

    @property
    def gathered(self) -> np.ndarray:  # (ranks * local rows,) plain row of each row of the whole array
        return self.order.reshape(-1)


def _whole(rows: int) -> Layout:
    return Layout(np.arange(rows)[None], sharded=False)


def _choice(default: str | None, choices: Sequence[str]):
    """A plan option taking one of ``choices`` (None too where it is the default), which ``perfkit models`` lists."""
    return dataclasses.field(default=default, metadata={"choices": tuple(choices)})


def _binding(field_default):
    """A field set by ``Plan.bind``, not a plan option."""
    return dataclasses.field(default_factory=field_default, compare=False, repr=False,
                             metadata={"option": False})


@dataclasses.dataclass(frozen=True)
class Plan:
    """Single device: the plain model. Subclasses change where data lives and which collectives run."""

    name = "local"
    description = "one device: the plain model"
    split_rope: bool = False  # RoPE as split halves (q / k channels permuted once on the host)
    streams: Mapping[str, Stream | Joint] = _binding(dict)
    layouts: Mapping[str, Layout] = _binding(dict)

    # -- binding and placement

    def bind(self, streams: Mapping[str, Stream | Joint], ranks: int) -> "Plan":
        """This plan laid out for a family's streams over ``ranks`` devices. Raises ``BadInput`` when a
        stream does not split and ``pad`` is off."""
        layouts: dict[str, Layout] = {}
        for name, s in streams.items():
            layouts[name] = self._layout(name, s, streams, layouts, ranks)
        return dataclasses.replace(self, streams=dict(streams), layouts=layouts)

    def _layout(self, name, s, streams, layouts, ranks) -> Layout:
        rows = s.rows if isinstance(s, Stream) else sum(streams[p].rows for p in s.parts)
        return _whole(rows)

    def layout(self, stream: str) -> Layout:
        if stream not in self.layouts:
            raise KeyError(f"plan {self.name!r} has no stream {stream!r}: bind it to the family's streams "
                           f"(known: {sorted(self.layouts)})")
        return self.layouts[stream]

    def param_spec(self, kind: str) -> P:
        return P()

    def stream_spec(self, stream: str) -> P:
        """Partitioning of a (B, S, ...) stream array at block boundaries."""
        return P(None, AXIS) if self.layout(stream).sharded else P()

    # -- the operations a model is written against

    def project(self, x: jax.Array, weights: Sequence[jax.Array], *, stream: str) -> list[jax.Array]:
        """Column-parallel projections of ``x`` (B, S', K), rows of ``stream``: one (B, S'', N_i) each."""
        return [_dot(x, w) for w in weights]

    def project_out(self, pairs: Sequence[tuple[jax.Array, jax.Array]], *, stream: str) -> jax.Array:
        """Row-parallel ``sum_i x_i @ w_i`` back into ``stream``'s rows (summed in float32, cast once)."""
        total = sum(jnp.matmul(x, w, preferred_element_type=compute_dtype(x.dtype)) for x, w in pairs)
        return total.astype(pairs[0][0].dtype)

    def attention(self, queries: Mapping[str, jax.Array],
                  keys: Mapping[str, tuple[jax.Array, jax.Array]]) -> dict[str, jax.Array]:
        """One attention of the queries of every stream in ``queries`` (name -> q (B, S', H', D), as
        projected) over the keys of every stream in ``keys`` (name -> (k, v)); pad keys are dropped.
        Returns each query stream's output, laid out as its q."""
        ks, vs = zip(*(self._real_keys(name, k, v) for name, (k, v) in keys.items()))
        q = jnp.concatenate(list(queries.values()), axis=1)
        out = attention_reference(q, jnp.concatenate(ks, axis=1), jnp.concatenate(vs, axis=1))
        bounds = np.cumsum([x.shape[1] for x in queries.values()])[:-1]
        return dict(zip(queries, jnp.split(out, bounds, axis=1)))

    def _real_keys(self, stream, k, v):
        """k, v (B, S, H', D) holding every row of ``stream`` (gathered order) without its pad rows."""
        real = np.flatnonzero(self.layout(stream).gathered >= 0)
        if len(real) == k.shape[1]:
            return k, v
        if real[-1] == len(real) - 1:  # tail padding: a static slice, the same on every rank
            return k[:, :len(real)], v[:, :len(real)]
        return jnp.take(k, real, axis=1), jnp.take(v, real, axis=1)

    def block_angles(self, angles, block: int):
        """The projected RoPE angles (an array, or a mapping of them; None: no rotation) block number
        ``block`` of the forward uses: ``angles`` but for a planted ``rope_fault_block``."""
        return angles

    def rope(self, x: jax.Array, angles: jax.Array) -> jax.Array:
        """RoPE on (B, S', H, D) q or k; ``angles`` (S', D/2) from ``projected_rows``."""
        return (apply_rope_split_halves if self.split_rope else apply_rope_interleaved)(x, angles)

    def projected_rows(self, table: jax.Array, *, stream: str) -> jax.Array:
        """Rows of a per-token (S, ...) table (plain order) matching ``stream``'s projected rows; pad rows
        get zeros (for RoPE angles: no rotation)."""
        return table

    def join(self, parts: Sequence[jax.Array], *, joint: str) -> jax.Array:
        """The ``Joint`` stream of ``parts`` (in its ``parts`` order)."""
        return jnp.concatenate(parts, axis=1)

    def split(self, h: jax.Array, *, joint: str) -> list[jax.Array]:
        """The parts of a ``Joint`` stream, each laid out as its own stream."""
        sizes = [self.layout(p).order.shape[1] for p in self.streams[joint].parts]
        return jnp.split(h, np.cumsum(sizes)[:-1], axis=1)


@dataclasses.dataclass(frozen=True)
class TensorParallel(Plan):
    """Megatron tensor parallelism: heads / FFN columns sharded, all-reduce after row-parallel matmuls."""

    name = "tp"
    description = "heads sharded; all-reduce after row-parallel matmuls"

    def param_spec(self, kind: str) -> P:
        return {"column": P(None, AXIS), "row": P(AXIS, None)}.get(kind, P())

    def project_out(self, pairs, *, stream):
        return lax.psum(super().project_out(pairs, stream=stream), AXIS)


@dataclasses.dataclass(frozen=True)
class _SequencePlan(Plan):
    """Sequence streams row-sharded: layouts, padding, per-token tables, contiguous joints."""

    projects_whole = False  # column-parallel projections return every row of a sharded stream
    pad: str | None = _choice(None, PAD_MODES)  # None: a stream that does not split is refused
    rope_fault_block: int | None = None  # a planted defect (module docstring); None as shipped

    def __post_init__(self):
        if self.pad is not None and self.pad not in PAD_MODES:
            raise BadInput(f"pad must be one of {sorted(PAD_MODES)} (or absent), not {self.pad!r}",
                           field="options.pad")
        fault = self.rope_fault_block
        if fault is not None and (not isinstance(fault, int) or isinstance(fault, bool) or fault < 0):
            raise BadInput(f"rope_fault_block must be a block index >= 0 (or absent), not {fault!r}",
                           field="options.rope_fault_block")

    def block_angles(self, angles, block):
        if block != self.rope_fault_block:
            return angles
        later = lax.axis_index(AXIS) > 0
        return jax.tree.map(lambda a: jnp.where(later, jnp.roll(a, 1, axis=0), a), angles)

    def _layout(self, name, s, streams, layouts, ranks):
        if isinstance(s, Stream):
            return self._split_rows(name, s.rows, ranks) if s.sequence else _whole(s.rows)
        if s.chunks not in CHUNKINGS:
            raise ValueError(f"joint {name!r}: chunks must be one of {CHUNKINGS}, not {s.chunks!r}")
        parts = [layouts[p] for p in s.parts]
        if s.chunks == "contiguous":
            return self._split_rows(name, sum(p.rows for p in parts), ranks)
        if not all(p.sharded for p in parts):
            raise ValueError(f"joint {name!r}: an interleaved joint needs row-sharded parts, got {s.parts}")
        offsets = np.cumsum([0] + [p.rows for p in parts[:-1]])
        order = np.concatenate([np.where(p.order >= 0, p.order + off, -1) for p, off in zip(parts, offsets)],
                               axis=1)
        return Layout(order, sharded=True)

    def _split_rows(self, name: str, rows: int, ranks: int) -> Layout:
        if self.pad is None and rows % ranks:
            raise BadInput(f"{self.name}: stream {name!r} has {rows} rows, which do not split over {ranks} "
                           f"devices; set the plan option pad ({', '.join(PAD_MODES)})", field="options.pad")
        plan = PAD_MODES[self.pad or "shards"](rows, ranks)  # "shards" pads nothing where rows split
        order = np.arange(plan.padded)
        return Layout(np.where(order < rows, order, -1).reshape(ranks, -1), sharded=True, pad=plan)

    def projected_rows(self, table, *, stream):
        layout = self.layout(stream)
        if not layout.sharded:
            return table
        with_zero = jnp.concatenate([table, jnp.zeros_like(table[:1])])
        order = np.where(layout.order >= 0, layout.order, len(table))  # pad rows -> the zero row
        if self.projects_whole:
            return with_zero[order.reshape(-1)]
        return with_zero[jnp.asarray(order)[lax.axis_index(AXIS)]]  # this rank's rows: a runtime index

    def join(self, parts, *, joint):
        spec = self.streams[joint]
        if spec.chunks == "interleaved":
            return super().join(parts, joint=joint)
        whole = [self._whole_rows(x, p) for x, p in zip(parts, spec.parts)]
        return self._own_rows(jnp.concatenate(whole, axis=1), joint)

    def split(self, h, *, joint):
        spec = self.streams[joint]
        if spec.chunks == "interleaved":
            return super().split(h, joint=joint)
        sizes = [self.layout(p).rows for p in spec.parts]
        whole = jnp.split(self._whole_rows(h, joint), np.cumsum(sizes)[:-1], axis=1)
        return [self._own_rows(x, p) for x, p in zip(whole, spec.parts)]

    def _whole_rows(self, x, stream):
        """(B, S', C) this device's rows of a tail-padded stream -> (B, S, C) its real rows."""
        layout = self.layout(stream)
        if not layout.sharded:
            return x
        return lax.all_gather(x, AXIS, axis=1, tiled=True)[:, :layout.rows]

    def _own_rows(self, x, stream):
        """(B, S, C) a stream's real rows (every device alike) -> this device's rows of its layout."""
        layout = self.layout(stream)
        if not layout.sharded:
            return x
        # Padded in the graph, but the pad is the same on every rank; the rank's offset is a runtime value.
        x = jnp.pad(x, ((0, 0), (0, layout.pad.pad), (0, 0)))
        rows = layout.pad.shard_rows
        return lax.dynamic_slice_in_dim(x, lax.axis_index(AXIS) * rows, rows, axis=1)


@dataclasses.dataclass(frozen=True)
class SequenceParallel(_SequencePlan, TensorParallel):
    """Megatron sequence parallelism with collective matmuls: sequence streams row-sharded between
    projections; all-gather + matmul in, matmul + reduce-scatter out."""

    name = "sp"
    description = "sequence sharded; all-gather / reduce-scatter fused into the matmuls"
    projects_whole = True
    impl: str = _choice("ring", cm.IMPLS)
    bidirectional: bool = True
    assemble: str = _choice("dus", cm.ASSEMBLIES)

    def __post_init__(self):
        super().__post_init__()
        if self.impl not in cm.IMPLS:
            raise BadInput(f"impl must be one of {list(cm.IMPLS)}, not {self.impl!r}", field="options.impl")
        if self.assemble not in cm.ASSEMBLIES:
            raise BadInput(f"assemble must be one of {list(cm.ASSEMBLIES)}, not {self.assemble!r}",
                           field="options.assemble")

    def project(self, x, weights, *, stream):
        if not self.layout(stream).sharded:
            return super().project(x, weights, stream=stream)
        return cm.all_gather_matmul(x, weights, axis_name=AXIS, impl=self.impl,
                                    bidirectional=self.bidirectional, assemble=self.assemble)

    def project_out(self, pairs, *, stream):
        if not self.layout(stream).sharded:
            return super().project_out(pairs, stream=stream)
        return cm.matmul_reduce_scatter(pairs, axis_name=AXIS, impl=self.impl,
                                        bidirectional=self.bidirectional)


@dataclasses.dataclass(frozen=True)
class Ulysses(_SequencePlan):
    """DeepSpeed Ulysses: sequence streams row-sharded, weights replicated; around attention an
    all-to-all trades the row shard for a head shard, and another trades it back."""

    name = "ulysses"
    description = "sequence sharded, weights replicated; all-to-all attention over heads"

    def attention(self, queries, keys):
        if not any(self.layout(s).sharded for s in keys):  # whole keys: local query rows attend directly
            return super().attention(queries, keys)
        n, i = lax.axis_size(AXIS), lax.axis_index(AXIS)
        heads = next(iter(queries.values())).shape[2]
        if heads % n:
            raise ValueError(f"ulysses: {heads} heads do not split over {n} devices")

        def to_heads(x, stream):  # (B, S', H, D) -> (B, S, H/n, D), rows in gathered order
            if self.layout(stream).sharded:
                return lax.all_to_all(x, AXIS, split_axis=2, concat_axis=1, tiled=True)
            return lax.dynamic_slice_in_dim(x, i * (heads // n), heads // n, axis=2)

        def to_rows(x, stream):  # the inverse
            if self.layout(stream).sharded:
                return lax.all_to_all(x, AXIS, split_axis=1, concat_axis=2, tiled=True)
            return lax.all_gather(x, AXIS, axis=2, tiled=True)

        out = super().attention({s: to_heads(q, s) for s, q in queries.items()},
                                {s: (to_heads(k, s), to_heads(v, s)) for s, (k, v) in keys.items()})
        return {s: to_rows(o, s) for s, o in out.items()}


PLANS = {p.name: p for p in (Plan, TensorParallel, SequenceParallel, Ulysses)}


def plan_options(cls: type[Plan]) -> dict[str, object]:
    """A plan's options (what a case's ``variants.<v>.options`` may set) and their defaults."""
    return {f.name: f.default for f in dataclasses.fields(cls) if f.metadata.get("option", True)}


def option_choices(cls: type[Plan]) -> dict[str, list[str]]:
    """The values each of a plan's options that takes one of a few names may be set to (``pad``: the padding
    modes, where the default, None, pads nothing)."""
    return {f.name: list(f.metadata["choices"]) for f in dataclasses.fields(cls) if "choices" in f.metadata}


def make_plan(name: str, **options) -> Plan:
    """A plan by name, with its options (e.g. ``make_plan("sp", impl="xla", pad="halves")``)."""
    if name not in PLANS:
        raise BadInput(f"unknown plan {name!r}; known: {', '.join(PLANS)}", field="options.plan")
    known = plan_options(PLANS[name])
    unknown = set(options) - set(known)
    if unknown:
        raise BadInput(f"plan {name!r} takes options {sorted(known)}, not {sorted(unknown)}", field="options")
    return PLANS[name](**options)
