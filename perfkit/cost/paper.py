"""A bundled model's step costed on paper: lowered at any size from abstract shapes, never run.

The step is the one ``perfkit.models.pipeline.Denoiser`` compiles (``perfkit.models.pipeline.step_program``),
lowered from ``jax.ShapeDtypeStruct`` arguments: no weights are allocated and nothing is compiled. The
lowered (not yet optimized) HLO gives the dot FLOPs and the collectives exactly as the shapes and the
plan make them. Blocks are identical, so the model is lowered with one and with two blocks of each
kind and the cost extrapolated linearly to the block counts asked for (``per-block cost x blocks``):
exact for FLOPs and collectives, and seconds on a CPU where 40 unrolled real blocks take minutes.

HBM bytes on paper are the step's compulsory traffic on each device: its share of the weights, read
once, and of the streams it reads and writes. An unfused program's op-level bytes would count every
elementwise intermediate, and the attention scores a fused kernel keeps on chip: far above what a
chip moves, which would make the bound no lower bound at all.
"""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from perfkit import models
from perfkit.errors import BadInput
from perfkit.hlo.program_cost import ProgramCost, program_cost
from perfkit.hlo.parse import parse_module
from perfkit.models import layers as L
from perfkit.models.pipeline import step_program
from perfkit.models.plans import AXIS, Stream
from perfkit.models.splits import check_devices


def with_rows(cfg, rows: int):
    """``cfg`` with ``rows`` latent tokens: frames changed, a frame's rows and columns kept."""
    t, h, w = cfg.grid
    if rows % (h * w):
        raise BadInput(f"{rows} rows are not whole frames of {h} x {w} tokens", field="--rows")
    return dataclasses.replace(cfg, grid=(rows // (h * w), h, w))


def block_fields(cfg) -> list[str]:
    """The config's block-count fields (``blocks``, or ``double_blocks`` and ``single_blocks``)."""
    return [f.name for f in dataclasses.fields(cfg) if f.name.endswith("blocks")]


def lower_step(family: str, cfg, plan, devices: int, guidance: float | None, dtype: str) -> ProgramCost:
    """The cost of one step of ``family`` at ``cfg`` under ``plan`` (unbound) over ``devices`` devices."""
    fam = models.get(family)
    if len(jax.devices()) < devices:
        raise BadInput(f"{devices} devices asked for, {len(jax.devices())} present (on CPU set "
                       f"XLA_FLAGS=--xla_force_host_platform_device_count={devices} before jax starts)",
                       field="--devices")
    mesh = Mesh(np.asarray(jax.devices()[:devices]), (AXIS,))
    streams = fam.streams(cfg)
    plan = plan.bind(streams, devices)
    dt = jnp.dtype(dtype)
    specs = fam.param_specs(cfg)
    param_pspecs = jax.tree.map(plan.param_spec, L.param_kinds(specs))
    params = jax.tree.map(lambda w, s: jax.ShapeDtypeStruct(w.shape, dt, sharding=NamedSharding(mesh, s)),
                          specs, param_pspecs, is_leaf=L.is_weight)
    inputs = {n: s for n, s in streams.items() if isinstance(s, Stream)}

    def stream(name):
        layout = plan.layout(name)
        rows = layout.pad.padded if layout.pad is not None else inputs[name].rows
        return jax.ShapeDtypeStruct((1, rows, inputs[name].channels), dt,
                                    sharding=NamedSharding(mesh, plan.stream_spec(name)))

    state = {n: stream(n) for n, s in inputs.items() if s.denoised}
    conditions = {n: stream(n) for n, s in inputs.items() if not s.denoised}
    step = step_program(fam, cfg, plan, mesh, param_pspecs, state, conditions, guidance)
    scalar = jax.ShapeDtypeStruct((), jnp.float32)
    lowered = step.lower(params, state, conditions, scalar, scalar)
    return program_cost(parse_module(lowered.as_text(dialect="hlo")), devices)


def _combine(base: dict, deltas: list[tuple[dict, int]]) -> dict:
    """``base`` plus ``k`` times each (delta against base) for the additive figures of a cost."""
    out = dict(base)
    for key in ("flops", "dot_flops", "other_flops", "transcendentals", "interconnect_bytes", "async_pairs",
                "repeated_loops", "unknown_trip_loops"):
        out[key] = base[key] + sum(k * (d[key] - base[key]) for d, k in deltas)
    kinds = set(base["collectives"]).union(*(d["collectives"] for d, _ in deltas))
    out["collectives"] = {}
    for kind in sorted(kinds):
        zero = {"count": 0, "buffer_bytes": 0, "sent_bytes": 0.0}
        b = base["collectives"].get(kind, zero)
        out["collectives"][kind] = {f: b[f] + sum(k * (d["collectives"].get(kind, zero)[f] - b[f]) for d, k in deltas)
                                    for f in zero}

    def counts(cost):
        return {(r["kind"], r["shape"], r.get("group")): r for r in cost["collective_shapes"]}

    rows = {**counts(base), **{key: r for d, _ in deltas for key, r in counts(d).items()}}
    out["collective_shapes"] = []
    for key, row in sorted(rows.items()):
        n = counts(base).get(key, {}).get("count", 0)
        n += sum(k * (counts(d).get(key, {}).get("count", 0) - counts(base).get(key, {}).get("count", 0))
                 for d, k in deltas)
        if n:
            out["collective_shapes"].append({**row, "count": n})
    return out


def paper_cost(family: str, cfg, plan, devices: int, *, guidance: float | None = None,
               dtype: str = "bfloat16") -> dict:
    """The step's cost (``ProgramCost.as_json`` form) at ``cfg``'s block counts, from lowerings at one and
    two blocks of each kind (see the module docstring); HBM bytes from the whole model's weights."""
    check_devices(models.get(family), cfg, plan, devices)
    fields = block_fields(cfg)
    wanted = {f: getattr(cfg, f) for f in fields}
    one = dataclasses.replace(cfg, **{f: 1 for f in fields})
    base = lower_step(family, one, plan, devices, guidance, dtype).as_json()
    deltas = [(lower_step(family, dataclasses.replace(one, **{f: 2}), plan, devices, guidance, dtype).as_json(),
               wanted[f] - 1) for f in fields]
    out = _combine(base, deltas)
    out["hbm_bytes"] = _whole_model_bytes(family, cfg, plan, devices, dtype)
    out.update(module=f"{family} step ({', '.join(f'{f}={n}' for f, n in wanted.items())})", file=None,
               temp_bytes=None, peak_bytes=None, blocks=wanted, shape=step_shape(family, cfg, guidance),
               method="lowered at 1 and 2 blocks of each kind, extrapolated linearly (per-block cost x blocks)")
    return out


def step_shape(family: str, cfg, guidance: float | None = None) -> dict:
    """The size a step is costed at, in ``perfkit models``' words: the latent ``grid`` (frames, rows, columns of
    tokens), each input stream's ``rows`` (before any plan pads them) and the ``batch`` (2 under CFG)."""
    streams = models.get(family).streams(cfg)
    return {"batch": 1 if guidance is None else 2, "grid": list(cfg.grid),
            "rows": {name: s.rows for name, s in streams.items() if isinstance(s, Stream)}}


def _whole_model_bytes(family: str, cfg, plan, devices: int, dtype: str) -> float:
    """Compulsory HBM traffic of one step on one device: its weights once, its streams in, the state out."""
    fam = models.get(family)
    bound = plan.bind(fam.streams(cfg), devices)
    itemsize = jnp.dtype(dtype).itemsize
    specs = jax.tree.leaves(fam.param_specs(cfg), is_leaf=L.is_weight)
    weights = sum(int(np.prod(w.shape)) // _shards(bound.param_spec(w.kind), devices) for w in specs)
    rows = 0
    for name, s in fam.streams(cfg).items():
        if isinstance(s, Stream):
            layout = bound.layout(name)
            local = layout.order.shape[1] if layout.sharded else s.rows
            rows += local * s.channels * (2 if s.denoised else 1)
    return float((weights + rows) * itemsize)


def _shards(spec: P, devices: int) -> int:
    return devices if any(a == AXIS for a in itertools.chain.from_iterable(
        (x,) if not isinstance(x, tuple) else x for x in spec)) else 1
