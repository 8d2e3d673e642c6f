"""A Wan-2.1-like video DiT block stack: self-attention (RoPE over frame/row/column, per-head q/k
RMSNorm), cross-attention to a text embedding, GELU FFN, adaLN timestep modulation.

Written once against ``perfkit.models.plans.Plan``; ``tp`` / ``sp`` are applied to it unchanged.
Simplifications against Wan 2.1: no linear biases, per-head (not full-width) q/k RMSNorm, a patch size
of one latent token.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from perfkit.kernels.rope import apply_rope_interleaved, rope_angles
from perfkit.models import layers as L
from perfkit.models.plans import Plan


@dataclasses.dataclass(frozen=True)
class WanConfig:
    """Per-block dimensions and the latent grid (frames, rows, columns) of one sample."""

    dim: int = 64
    heads: int = 4
    ffn: int = 256
    blocks: int = 2
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

    @property
    def rope_axes(self) -> tuple[int, int, int]:
        d = self.head_dim  # Wan's split of head_dim over (frame, row, column)
        return (d - 4 * (d // 6), 2 * (d // 6), 2 * (d // 6))


CONFIGS = {
    "tiny": WanConfig(),
    # Wan 2.1 14B block dimensions, 480x832 x 21 latent frames / (1, 2, 2) patches; few blocks.
    "real": WanConfig(dim=5120, heads=40, ffn=13824, blocks=2, grid=(21, 30, 52), in_channels=16,
                      text_len=512, text_dim=4096),
}


def param_specs(cfg: WanConfig):
    d, f = cfg.dim, cfg.ffn
    block = {
        "mod": L.Weight((d, 6 * d), scale=0.02 / np.sqrt(d)),
        "wq": L.Weight((d, d), "column"), "wk": L.Weight((d, d), "column"),
        "wv": L.Weight((d, d), "column"), "wo": L.Weight((d, d), "row"),
        "q_norm": L.Weight((cfg.head_dim,), ones=True), "k_norm": L.Weight((cfg.head_dim,), ones=True),
        "cq": L.Weight((d, d), "column"), "ck": L.Weight((d, d), "column"),
        "cv": L.Weight((d, d), "column"), "co": L.Weight((d, d), "row"),
        "cq_norm": L.Weight((cfg.head_dim,), ones=True), "ck_norm": L.Weight((cfg.head_dim,), ones=True),
        "w1": L.Weight((d, f), "column"), "w2": L.Weight((f, d), "row"),
    }
    return {
        "patch_in": L.Weight((cfg.in_channels, d)),
        "text_in": L.Weight((cfg.text_dim, d)),
        "t1": L.Weight((256, d)), "t2": L.Weight((d, d)),
        "head_mod": L.Weight((d, 2 * d), scale=0.02 / np.sqrt(d)),
        "patch_out": L.Weight((d, cfg.in_channels)),
        "blocks": [block] * cfg.blocks,
    }


def rope_table(cfg: WanConfig) -> np.ndarray:
    return rope_angles(L.grid_positions(cfg.grid), cfg.rope_axes).astype(np.float32)


def _attend(plan: Plan, q, k, v, q_gain, k_gain, angles, *, kv_stream: bool, head_dim: int):
    q = L.rms_norm(L.split_heads(q, head_dim), q_gain)
    k = L.rms_norm(L.split_heads(k, head_dim), k_gain)
    if angles is not None:
        q, k = apply_rope_interleaved(q, angles), apply_rope_interleaved(k, angles)
    out = plan.attention(q, k, L.split_heads(v, head_dim), kv_stream=kv_stream)
    return L.merge_heads(out)


def block(p, h, ctx, temb, angles, cfg: WanConfig, plan: Plan):
    """One Wan block. h: (B, S', dim) stream; ctx: (B, L, dim); temb: (B, dim); angles: (S'', hd/2)."""
    mod = jnp.split(jax.nn.silu(temb) @ p["mod"], 6, axis=-1)
    shift1, scale1, gate1, shift2, scale2, gate2 = mod

    x = L.modulate(L.layer_norm(h), shift1, scale1)
    q, k, v = plan.project(x, [p["wq"], p["wk"], p["wv"]])
    a = _attend(plan, q, k, v, p["q_norm"], p["k_norm"], angles, kv_stream=True, head_dim=cfg.head_dim)
    h = h + gate1[:, None, :] * plan.project_out([(a, p["wo"])])

    (q,) = plan.project(L.layer_norm(h), [p["cq"]])
    k, v = plan.project(ctx, [p["ck"], p["cv"]], stream=False)
    a = _attend(plan, q, k, v, p["cq_norm"], p["ck_norm"], None, kv_stream=False, head_dim=cfg.head_dim)
    h = h + plan.project_out([(a, p["co"])])

    x = L.modulate(L.layer_norm(h), shift2, scale2)
    (u,) = plan.project(x, [p["w1"]])
    h = h + gate2[:, None, :] * plan.project_out([(jax.nn.gelu(u, approximate=True), p["w2"])])
    return h


def forward(params, x, t, ctx, *, cfg: WanConfig, plan: Plan):
    """Velocity prediction. x: (B, S', C) latent tokens (stream layout); t: (B,); ctx: (B, L, text_dim)."""
    h = x @ params["patch_in"]
    temb = L.timestep_features(t) @ params["t1"]
    temb = jax.nn.silu(temb) @ params["t2"]
    c = ctx @ params["text_in"]
    angles = plan.projected_rows(jnp.asarray(rope_table(cfg)))
    for p in params["blocks"]:
        h = block(p, h, c, temb, angles, cfg, plan)
    shift, scale = jnp.split(jax.nn.silu(temb) @ params["head_mod"], 2, axis=-1)
    return L.modulate(L.layer_norm(h), shift, scale) @ params["patch_out"]
