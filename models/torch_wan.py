"""The Wan-like DiT of ``perfkit.models.wan`` in torch, with its parallel plans over torch.distributed.

Same configs, parameter tree and math as the JAX model (checked against it in tests/torch): adaLN
modulation, self-attention with per-head q/k RMSNorm and interleaved RoPE over (frame, row, column),
cross-attention to the text, tanh-GELU FFN, no linear biases. Each block's weights carry the JAX tree's
names (``wq``, ``cq_norm``, ``w2`` ...), so one tree loads into either framework.

The model is written once; a plan is applied to the built module in place, as gpt-fast's ``tp.py`` does:

- ``local``: one process, nothing changes.
- ``tp``: Megatron tensor parallelism. "column" weights (q, k, v, FFN up) keep this rank's output
  features (a contiguous group of heads), "row" weights (attention out, FFN down) its input features,
  and a forward hook all-reduces each row-parallel output. The token stream stays whole on every rank.
- ``ulysses``: the stream is sequence-sharded; self-attention trades the sequence shard for a head
  shard with one ``all_to_all_single`` each way (DeepSpeed Ulysses). Weights are replicated.
- ``ring``: the stream is sequence-sharded; self-attention keeps its queries while K / V blocks travel
  the ring (``batch_isend_irecv``, the next hop in flight while the block in hand is attended to) and
  partial results merge by log-sum-exp.

Cross-attention needs no exchange under any plan: its keys come from the replicated text. A sequence
plan whose token count does not split over the ranks pads the stream at its tail to the next multiple
of the ranks (``perfkit.kernels.padding``, as the JAX plans' ``pad``): ``Placement.shard`` pads before
the step, self-attention drops the pad keys, ``Placement.gather`` cuts the pad rows. Pad rows get zero
RoPE angles and whatever values the step leaves in them; no real row depends on them. ``tp`` keeps the
stream whole, so any token count runs under it as is. Under torch.compile, ``tp`` and ``ulysses`` trace
into one graph; the ring's point-to-point ops are graph breaks (dynamo does not trace them).
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any, Callable

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from perfkit.kernels import padding
from perfkit.models.layers import Weight, is_weight
from perfkit.models.plans import PAD_MODES
from perfkit.models.wan import CONFIGS, WanConfig, param_specs, rope_table

PLANS = ("local", "tp", "ulysses", "ring")
SEQUENCE_PLANS = ("ulysses", "ring")
EPS = 1e-6
# torch 2.13 renamed all_gather_into_tensor (which now warns) to all_gather_single; older torch has only
# the first. In-place c10d collectives, not functional ones: their first call would import torch._dynamo into
# every rank, a start-up cost no step needs, and torch.compile maps these to its traceable forms anyway.
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


# ---- layers (the torch spelling of perfkit.models.layers and perfkit.kernels.rope) ----

def layer_norm(x: torch.Tensor) -> torch.Tensor:
    """LayerNorm without affine parameters, in float32."""
    return F.layer_norm(x.float(), x.shape[-1:], eps=EPS).to(x.dtype)


def rms_norm(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + EPS) * gain.float()).to(x.dtype)


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """adaLN: (B, S, D) * (1 + scale) + shift, with (B, D) shift / scale."""
    return x * (1 + scale[:, None, :]) + shift[:, None, :]


def timestep_features(t: torch.Tensor, dim: int = 256, max_period: float = 10000.0) -> torch.Tensor:
    """(B,) flow-matching times in [0, 1] -> (B, dim) sinusoidal features (t scaled by 1000)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = (t.float() * 1000.0)[:, None] * freqs[None, :]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def apply_rope_interleaved(
    x: torch.Tensor,  # (B, S, H, D)
    angles: torch.Tensor,  # (S, D // 2) float32
) -> torch.Tensor:  # (B, S, H, D)
    """Rotates channel pairs (2j, 2j + 1) by ``angles[:, j]``, in float32."""
    cos, sin = angles.cos()[None, :, None, :], angles.sin()[None, :, None, :]
    xf = x.float().unflatten(-1, (-1, 2))
    a, b = xf[..., 0], xf[..., 1]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2).to(x.dtype)


# ---- attention: the plain computation and the two sequence-parallel ones ----

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def attention(
    q: torch.Tensor,  # (B, Sq, H, D)
    k: torch.Tensor,  # (B, Sk, H, D)
    v: torch.Tensor,  # (B, Sk, H, D)
) -> torch.Tensor:  # (B, Sq, H, D)
    """softmax(q k^T / sqrt(D)) v through torch's fused kernel (float32 softmax accumulation)."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return out.transpose(1, 2)


def ulysses_attention(
    q: torch.Tensor,  # (B, S / n, H, D): this rank's sequence shard; H divisible by n
    k: torch.Tensor,  # (B, S / n, H, D)
    v: torch.Tensor,  # (B, S / n, H, D)
    *,
    group: Any,
    pad: padding.PadPlan | None = None,  # the sequence's tail padding: its pad keys are dropped
) -> torch.Tensor:  # (B, S / n, H, D)
    """Attention over the whole sequence with H / n heads between two all-to-alls."""
    n = dist.get_world_size(group)
    b, s, h, d = q.shape
    if h % n:
        raise ValueError(f"ulysses: {h} heads do not split over {n} ranks")

    def exchange(send):  # dim 0 of the (contiguous) exchange buffer is the peer rank
        got = torch.empty_like(send)
        dist.all_to_all_single(got, send, group=group)
        return got

    def to_heads(t):  # (B, S/n, H, D) -> (B, S, H/n, D): got[j] = rank j's shard of my heads
        got = exchange(t.reshape(b, s, n, h // n, d).permute(2, 0, 1, 3, 4).contiguous())
        return got.permute(1, 0, 2, 3, 4).reshape(b, n * s, h // n, d)

    real = slice(None) if pad is None else slice(0, pad.length)  # pad keys: the gathered tail, same on every rank
    out = attention(to_heads(q), to_heads(k)[:, real], to_heads(v)[:, real])  # (B, S, H/n, D)
    got = exchange(out.reshape(b, n, s, h // n, d).permute(1, 0, 2, 3, 4).contiguous())  # my shard, rank j's heads
    return got.permute(1, 2, 0, 3, 4).reshape(b, s, h, d)


def _attend_block(qf, k, v):
    """Scaled float32 queries (B, Sq, H, D) over one key block: normalised output and its
    log-sum-exp (B, H, Sq)."""
    logits = torch.einsum("bqhd,bkhd->bhqk", qf, k.float())
    lse = torch.logsumexp(logits, dim=-1)
    out = torch.einsum("bhqk,bkhd->bqhd", torch.exp(logits - lse[..., None]), v.float())
    return out, lse


def _merge(out_a, lse_a, out_b, lse_b):
    """Two normalised partial results over disjoint key sets -> the result over their union."""
    lse = torch.logaddexp(lse_a, lse_b)

    def weight(part):  # (B, H, Sq) -> (B, Sq, H, 1)
        return torch.exp(part - lse).transpose(1, 2)[..., None]

    return out_a * weight(lse_a) + out_b * weight(lse_b), lse


def ring_attention(
    q: torch.Tensor,  # (B, S / n, H, D): this rank's sequence shard
    k: torch.Tensor,  # (B, S / n, H, D)
    v: torch.Tensor,  # (B, S / n, H, D)
    *,
    group: Any,
    pad: padding.PadPlan | None = None,  # the sequence's tail padding: its pad keys are dropped
) -> torch.Tensor:  # (B, S / n, H, D)
    """Local queries over every rank's keys; K / V pass to the next rank while this block is used.
    A block's pad keys are cut off before it is attended to (a block of pad rows only is skipped), so
    they never reach the softmax; the full blocks travel, the same shape on every rank."""
    n, i = dist.get_world_size(group), dist.get_rank(group)
    real_rows = [k.shape[1]] * n if pad is None else pad.shard_valid_rows().tolist()  # per source rank
    to_rank, from_rank = dist.get_global_rank(group, (i + 1) % n), dist.get_global_rank(group, (i - 1) % n)
    qf = q.float() * q.shape[-1] ** -0.5
    k, v = k.contiguous(), v.contiguous()
    out = lse = None
    for hop in range(n):
        if hop < n - 1:
            next_k, next_v = torch.empty_like(k), torch.empty_like(v)
            pending = dist.batch_isend_irecv([
                dist.P2POp(dist.isend, k, to_rank, group), dist.P2POp(dist.isend, v, to_rank, group),
                dist.P2POp(dist.irecv, next_k, from_rank, group), dist.P2POp(dist.irecv, next_v, from_rank, group),
            ])
        real = real_rows[(i - hop) % n]  # this hop's block came from rank i - hop
        if real:  # rank 0's block always holds real rows, so some hop sets ``out``
            part, part_lse = _attend_block(qf, k[:, :real], v[:, :real])
            out, lse = (part, part_lse) if out is None else _merge(out, lse, part, part_lse)
        if hop < n - 1:
            for req in pending:
                req.wait()
            k, v = next_k, next_v
    return out.to(q.dtype)


# ---- the model ----

def _linear(shape: tuple[int, int], factory: dict) -> nn.Linear:
    return nn.Linear(shape[0], shape[1], bias=False, **factory)  # JAX (in, out) -> torch weight (out, in)


def _module_for(spec: Weight, factory: dict) -> nn.Module | nn.Parameter:
    return _linear(spec.shape, factory) if len(spec.shape) == 2 else nn.Parameter(torch.empty(spec.shape, **factory))


class WanBlock(nn.Module):
    """One Wan block; attributes are named as the JAX parameter tree's block keys."""

    def __init__(self, cfg: WanConfig, specs: dict[str, Weight], factory: dict):
        super().__init__()
        self.head_dim = cfg.head_dim
        for name, spec in specs.items():
            setattr(self, name, _module_for(spec, factory))
        # Swapped by the sequence plans; cross-attention keys are the replicated text under every plan.
        self.self_attention: AttentionFn = attention
        self.cross_attention: AttentionFn = attention

    def _attend(self, q, k, v, q_gain, k_gain, angles, core: AttentionFn) -> torch.Tensor:
        heads = lambda t: t.unflatten(-1, (-1, self.head_dim))  # local heads: -1 follows TP sharding
        q, k = rms_norm(heads(q), q_gain), rms_norm(heads(k), k_gain)
        if angles is not None:
            q, k = apply_rope_interleaved(q, angles), apply_rope_interleaved(k, angles)
        return core(q, k, heads(v)).flatten(-2)

    def forward(self, h, ctx, temb, angles):
        """h: (B, S', dim) stream; ctx: (B, L, dim); temb: (B, dim); angles: (S', head_dim / 2)."""
        shift1, scale1, gate1, shift2, scale2, gate2 = self.mod(F.silu(temb)).chunk(6, dim=-1)

        x = modulate(layer_norm(h), shift1, scale1)
        a = self._attend(self.wq(x), self.wk(x), self.wv(x), self.q_norm, self.k_norm, angles,
                         self.self_attention)
        h = h + gate1[:, None, :] * self.wo(a)

        a = self._attend(self.cq(layer_norm(h)), self.ck(ctx), self.cv(ctx), self.cq_norm, self.ck_norm, None,
                         self.cross_attention)
        h = h + self.co(a)

        x = modulate(layer_norm(h), shift2, scale2)
        return h + gate2[:, None, :] * self.w2(F.gelu(self.w1(x), approximate="tanh"))


class WanModel(nn.Module):
    """Velocity prediction of the Wan-like DiT; parameters uninitialised until ``load_params``."""

    def __init__(self, cfg: WanConfig, *, device=None, dtype=None):
        super().__init__()
        self.cfg = cfg
        factory = {"device": device, "dtype": dtype}
        specs = param_specs(cfg)
        for name, spec in specs.items():
            if name != "blocks":
                setattr(self, name, _module_for(spec, factory))
        self.blocks = nn.ModuleList(WanBlock(cfg, s, factory) for s in specs["blocks"])
        # RoPE angles of this rank's token rows; a plain attribute so that casts of the module keep it
        # float32 (a sequence plan keeps only its own rows).
        self.angles = torch.as_tensor(rope_table(cfg), device=device)

    def forward(self, x, t, ctx):
        """x: (B, S', in_channels) latent tokens (this rank's rows); t: (B,); ctx: (B, L, text_dim)."""
        h = self.patch_in(x)
        temb = self.t2(F.silu(self.t1(timestep_features(t).to(x.dtype))))
        c = self.text_in(ctx)
        for blk in self.blocks:
            h = blk(h, c, temb, self.angles)
        shift, scale = self.head_mod(F.silu(temb)).chunk(2, dim=-1)
        return self.patch_out(modulate(layer_norm(h), shift, scale))

    def parameter_slots(self):
        """(owner module, attribute, spec, tree path) for every leaf of the JAX parameter tree."""
        specs = param_specs(self.cfg)
        for name, spec in specs.items():
            if name != "blocks":
                yield self, name, spec, (name,)
        for i, (blk, block_specs) in enumerate(zip(self.blocks, specs["blocks"])):
            for name, spec in block_specs.items():
                yield blk, name, spec, ("blocks", i, name)

    @torch.no_grad()
    def load_params(self, tree) -> "WanModel":
        """Load a parameter tree laid out as the JAX model's (``x @ w`` weights, numpy or torch leaves)."""
        for owner, name, spec, path in self.parameter_slots():
            value = tree
            for key in path:
                value = value[key]
            value = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.array(value))  # a writable copy
            if tuple(value.shape) != spec.shape:
                raise ValueError(f"parameter {'.'.join(map(str, path))}: shape {tuple(value.shape)}, "
                                 f"expected {spec.shape}")
            target = getattr(owner, name)
            if isinstance(target, nn.Linear):
                target.weight.copy_(value.T)
            else:
                target.copy_(value)
        return self


def tap_modules(model: WanModel) -> dict[str, str]:
    """Module name -> tap name for ``perfkit.adapters.torch_taps``: each block's self-attention output
    projection, FFN down projection and output, named as the JAX model's taps (``block<i>.attn`` ...)."""
    return {f"blocks.{i}{module}": f"block{i}.{tap}" for i in range(len(model.blocks))
            for module, tap in ((".wo", "attn"), (".w2", "mlp"), ("", "out"))}


def init_params(cfg: WanConfig, seed: int) -> dict:
    """A parameter tree for ``cfg`` drawn with torch's generator, by the spec rules of
    ``perfkit.models.layers.Weight`` (different numbers from the JAX initialiser, same distribution)."""
    gen = torch.Generator().manual_seed(seed)

    def draw(w: Weight) -> torch.Tensor:
        noise = torch.randn(w.shape, generator=gen)
        if w.ones:
            return 1.0 + 0.1 * noise
        return noise * (w.scale if w.scale is not None else 1.0 / math.sqrt(w.shape[0]))

    def walk(node):
        if is_weight(node):
            return draw(node)
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        return [walk(v) for v in node]

    return walk(param_specs(cfg))


def build_model(config: str | WanConfig, seed: int, *, device=None, dtype=torch.float32) -> WanModel:
    """The single-rank model with parameters from ``init_params`` (identical on every rank)."""
    cfg = CONFIGS[config] if isinstance(config, str) else config
    return WanModel(cfg, device=device, dtype=dtype).load_params(init_params(cfg, seed)).eval()


# ---- plans ----

@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the (B, S, ...) token stream lives after a plan: whole on every rank (local, tp) or, padded
    at its tail as ``pad`` says, one contiguous shard of ``pad.shard_rows`` rows per rank, in rank order
    (ulysses, ring)."""

    plan: str
    rank: int = 0
    world: int = 1
    group: Any = None
    pad: padding.PadPlan | None = None  # sequence plans: the stream's tail padding (pad 0 where it splits)

    @property
    def sequence_sharded(self) -> bool:
        return self.plan in SEQUENCE_PLANS

    def shard(self, x: torch.Tensor) -> torch.Tensor:
        """(B, S, ...) whole stream -> this rank's (B, padded / n, ...) rows of it padded with zero rows
        (unchanged when not sharded). Eager, before the step: every rank's shard has the same shape."""
        if not self.sequence_sharded:
            return x
        if x.shape[1] != self.pad.length:
            raise ValueError(f"{self.plan}: a stream of {x.shape[1]} rows, the plan was applied for {self.pad.length}")
        return _rows_of_rank(pad_tail(x, self.pad.pad, dim=1), self.rank, self.pad.shard_rows, dim=1)

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's rows -> the whole (B, S, ...) stream on every rank, pad rows cut."""
        if not self.sequence_sharded:
            return x
        rows = x.transpose(0, 1).contiguous()  # gloo gathers along dim 0 only
        whole = rows.new_empty((self.world * rows.shape[0], *rows.shape[1:]))
        _all_gather(whole, rows, group=self.group)
        return whole[:self.pad.length].transpose(0, 1).contiguous()


def pad_tail(x: torch.Tensor, rows: int, dim: int) -> torch.Tensor:
    """``x`` with ``rows`` zero rows appended along ``dim`` (``perfkit.kernels.padding.pad`` for torch)."""
    return F.pad(x, [0, 0] * (x.ndim - 1 - dim) + [0, rows])


def _rows_of_rank(x: torch.Tensor, rank: int, rows: int, dim: int) -> torch.Tensor:
    return x.narrow(dim, rank * rows, rows).contiguous()


def _all_reduce_output(module, inputs, output):
    dist.all_reduce(output, group=module.tp_group)
    return output


def _apply_tp(model: WanModel, rank: int, world: int, group: Any) -> None:
    for owner, name, spec, _ in model.parameter_slots():
        if spec.kind not in ("column", "row"):
            continue
        linear: nn.Linear = getattr(owner, name)
        dim = 0 if spec.kind == "column" else 1  # torch weight is (out, in)
        if linear.weight.shape[dim] % world:
            raise ValueError(f"tp: {name} has {linear.weight.shape[dim]} features, not divisible by {world}")
        linear.weight = nn.Parameter(linear.weight.chunk(world, dim=dim)[rank].clone(), requires_grad=False)
        if spec.kind == "row":
            linear.tp_group = group
            linear.register_forward_hook(_all_reduce_output)


def _apply_sequence(model: WanModel, placement: Placement) -> None:
    """Self-attention of ``placement.plan`` dropping its pad keys; this rank's RoPE rows (zero for pad rows)."""
    pad = placement.pad
    core = ulysses_attention if placement.plan == "ulysses" else ring_attention
    for blk in model.blocks:
        blk.self_attention = partial(core, group=placement.group, pad=pad)
    model.angles = _rows_of_rank(pad_tail(model.angles, pad.pad, dim=0), placement.rank, pad.shard_rows, dim=0)


def apply_plan(model: WanModel, plan: str, group: Any = None) -> Placement:
    """Apply ``plan`` to ``model`` in place over ``group`` (default: the whole world); returns where
    the token stream lives, so the caller shards inputs and gathers outputs."""
    if plan not in PLANS:
        raise ValueError(f"unknown plan {plan!r}; known: {', '.join(PLANS)}")
    if plan == "local":
        return Placement(plan)
    group = group if group is not None else dist.group.WORLD
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    if plan == "tp":
        _apply_tp(model, rank, world, group)
        return Placement(plan, rank, world, group)
    # The least tail padding that splits the rows (the JAX plans' ``pad: shards``; none where they split).
    placement = Placement(plan, rank, world, group, pad=PAD_MODES["shards"](model.cfg.tokens, world))
    _apply_sequence(model, placement)
    return placement
