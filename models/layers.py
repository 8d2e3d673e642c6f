"""Building blocks shared by the model families: parameter specs, norms, modulation, embeddings, and
the sublayers every family writes the same way against a plan (q / k norm + RoPE, FFN)."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from perfkit.kernels.precision import compute_dtype
from perfkit.kernels.rope import permute_head_channels, split_halves_permutation


@dataclasses.dataclass(frozen=True)
class Weight:
    """A parameter's shape, its parallel kind (column / row / replicated) and its init scale.

    ``scale=None`` means 1/sqrt(fan_in) (shape[0]); ``ones=True`` for norm gains near 1.
    ``rope_head_dim``: the last axis holds heads of this many channels of a RoPE'd q or k (projection
    outputs, per-head norm gains); split-halves RoPE permutes them (``permute_for_split_rope``)."""

    shape: tuple[int, ...]
    kind: str = "replicated"
    scale: float | None = None
    ones: bool = False
    rope_head_dim: int | None = None


@dataclasses.dataclass(frozen=True)
class DiTConfig:
    """What every family's config has: per-block dimensions, the latent grid (frames, rows, columns) of
    one sample with its channels per token, and the text."""

    dim: int = 64
    heads: int = 4
    ffn: int = 256
    grid: tuple[int, int, int] = (4, 8, 8)
    in_channels: int = 4
    text_len: int = 16
    text_dim: int = 32

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def tokens(self) -> int:
        return int(np.prod(self.grid))


def video_rope_axes(head_dim: int) -> tuple[int, int, int]:
    """Wan's split of a head's rotary channels over (frame, row, column)."""
    d = head_dim // 6
    return (head_dim - 4 * d, 2 * d, 2 * d)


def adaln(dim: int, parts: int) -> Weight:
    """adaLN weights (dim, parts * dim) at the default scale: random gates of order one, so every block
    changes the output (checkpoints' adaLN-zero start would make each block an identity)."""
    return Weight((dim, parts * dim))


def is_weight(x) -> bool:
    return isinstance(x, Weight)


def init_params(specs, seed: int, dtype=np.float32):
    """Random host (numpy) parameters for a tree of ``Weight`` specs, fixed by ``seed`` (no
    checkpoints). Drawn with numpy: one jax random program per weight shape compiled for seconds."""
    rng = np.random.default_rng(seed)

    def draw(w: Weight) -> np.ndarray:
        noise = rng.standard_normal(w.shape, dtype=np.float32)
        if w.ones:
            return (1.0 + 0.1 * noise).astype(dtype)
        return (noise * np.float32(w.scale if w.scale is not None else 1.0 / math.sqrt(w.shape[0]))).astype(dtype)

    return jax.tree.map(draw, specs, is_leaf=is_weight)


def param_kinds(specs):
    return jax.tree.map(lambda w: w.kind, specs, is_leaf=is_weight)


def permute_for_split_rope(params, specs):
    """Host-side, once at load: each head's channels of every ``rope_head_dim`` weight permuted so the
    interleaved rotation becomes split halves (q . k unchanged: q and k are permuted alike)."""

    def permute(w: Weight, value):
        if w.rope_head_dim is None:
            return value
        return permute_head_channels(np.asarray(value), split_halves_permutation(w.rope_head_dim))

    return jax.tree.map(permute, specs, params, is_leaf=is_weight)


def layer_norm(x, eps=1e-6):
    """LayerNorm without affine parameters (the adaLN blocks modulate afterwards), in float32 or wider."""
    xf = x.astype(compute_dtype(x.dtype))
    mu = xf.mean(-1, keepdims=True)
    var = ((xf - mu) ** 2).mean(-1, keepdims=True)
    return ((xf - mu) * jax.lax.rsqrt(var + eps)).astype(x.dtype)


def rms_norm(x, gain, eps=1e-6):
    xf = x.astype(compute_dtype(x.dtype))
    out = xf * jax.lax.rsqrt((xf * xf).mean(-1, keepdims=True) + eps) * gain.astype(xf.dtype)
    return out.astype(x.dtype)


def modulate(x, shift, scale):
    """adaLN: ``x * (1 + scale) + shift`` with (B, D) shift / scale broadcast over tokens."""
    return x * (1 + scale[:, None, :]) + shift[:, None, :]


def modulation(temb, w, parts: int) -> list[jax.Array]:
    """adaLN parameters: ``parts`` (B, D) chunks of ``silu(temb) @ w``."""
    return jnp.split(jax.nn.silu(temb) @ w, parts, axis=-1)


def gated(gate, x):
    """(B, D) gate times (B, S, D) x."""
    return gate[:, None, :] * x


def split_heads(x, head_dim):
    return x.reshape(*x.shape[:-1], -1, head_dim)


def merge_heads(x):
    return x.reshape(*x.shape[:-2], -1)


def attention_specs(q_dim: int, kv_dim: int, inner: int, head_dim: int, *, rope: bool) -> dict[str, Weight]:
    """Weights of one attention: q from ``q_dim`` rows, k / v from ``kv_dim`` rows, heads of
    ``head_dim`` channels (``inner`` in all), per-head q / k RMSNorm gains, out back to ``q_dim``."""
    r = head_dim if rope else None
    return {"wq": Weight((q_dim, inner), "column", rope_head_dim=r), "wk": Weight((kv_dim, inner), "column", rope_head_dim=r),
            "wv": Weight((kv_dim, inner), "column"), "wo": Weight((inner, q_dim), "row"),
            "q_norm": Weight((head_dim,), ones=True, rope_head_dim=r),
            "k_norm": Weight((head_dim,), ones=True, rope_head_dim=r)}


def normed_heads(plan, x, gain, angles, head_dim: int):
    """(B, S, H * head_dim) q or k -> (B, S, H, head_dim): per-head RMSNorm, then RoPE by ``angles``
    (from ``plan.projected_rows``; None for no rotation)."""
    x = rms_norm(split_heads(x, head_dim), gain)
    return x if angles is None else plan.rope(x, angles)


def qkv_heads(plan, w, q, k, v, angles, head_dim: int):
    """Projected q, k, v -> q and (k, v) as ``plan.attention`` takes them (heads split, q / k normed
    and rotated by ``angles``, or not rotated for None)."""
    q, k = normed_heads(plan, q, w["q_norm"], angles, head_dim), normed_heads(plan, k, w["k_norm"], angles, head_dim)
    return q, (k, split_heads(v, head_dim))


def attention(plan, w, stream: str, x, head_dim: int, *, angles=None, context=None):
    """An attention sublayer (weights ``w`` from ``attention_specs``) of ``stream``'s rows ``x``:
    self-attention rotated by ``angles``, or with ``context=(name, rows)`` cross-attention to another
    stream's rows (not rotated); the output is projected back into ``stream``."""
    if context is None:
        q, k, v = plan.project(x, [w["wq"], w["wk"], w["wv"]], stream=stream)
        keys = stream
    else:
        keys, rows = context
        (q,) = plan.project(x, [w["wq"]], stream=stream)
        k, v = plan.project(rows, [w["wk"], w["wv"]], stream=keys)
    q, kv = qkv_heads(plan, w, q, k, v, angles, head_dim)
    out = plan.attention({stream: q}, {keys: kv})[stream]
    return plan.project_out([(merge_heads(out), w["wo"])], stream=stream)


def ffn(plan, x, w1, w2, *, stream: str):
    """tanh-GELU FFN of ``stream``'s rows: column-parallel up, row-parallel down."""
    (u,) = plan.project(x, [w1], stream=stream)
    return plan.project_out([(jax.nn.gelu(u, approximate=True), w2)], stream=stream)


def time_embedding(t, w1, w2):
    """(B,) flow-matching time -> (B, D): sinusoidal features through a SiLU MLP, in the weights' dtype (float32
    features would promote the embedding, and through the adaLN modulation every activation after it)."""
    return jax.nn.silu(timestep_features(t).astype(w1.dtype) @ w1) @ w2


def timestep_features(t, dim=256, max_period=10000.0):
    """Sinusoidal features of flow-matching time t in [0, 1] (scaled by 1000, as the DiTs do)."""
    half = dim // 2
    freqs = jnp.exp(-math.log(max_period) * jnp.arange(half, dtype=jnp.float32) / half)
    args = (t.astype(jnp.float32) * 1000.0)[:, None] * freqs[None, :]
    return jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)


def grid_positions(grid: tuple[int, ...]) -> np.ndarray:
    """(prod(grid), len(grid)) integer positions of tokens laid out row-major over ``grid``."""
    mesh = np.meshgrid(*[np.arange(g) for g in grid], indexing="ij")
    return np.stack([m.reshape(-1) for m in mesh], axis=1)
