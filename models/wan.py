"""A Wan-2.1-like video DiT block stack: self-attention (RoPE over frame/row/column, per-head q/k
RMSNorm), cross-attention to a text embedding, GELU FFN, adaLN timestep modulation.

Written once against ``perfkit.models.plans.Plan``; every plan is applied to it unchanged. Streams:
``video`` (the latents, row-sharded under sequence plans) and ``text`` (the context, whole everywhere).
Simplifications against Wan 2.1: no linear biases, per-head (not full-width) q/k RMSNorm, a patch size
of one latent token.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from perfkit.kernels.rope import rope_angles
from perfkit.models import layers as L
from perfkit.models import taps
from perfkit.models.plans import Plan, Stream


@dataclasses.dataclass(frozen=True)
class WanConfig(L.DiTConfig):
    """Per-block dimensions, block count, the latent grid (frames, rows, columns) and the text."""

    blocks: int = 2

    @property
    def rope_axes(self) -> tuple[int, int, int]:
        return L.video_rope_axes(self.head_dim)


# The published model's block counts (``perfkit cost --model`` costs the whole model): Wan 2.1 14B.
PUBLISHED_BLOCKS = {"blocks": 40}

CONFIGS = {
    "tiny": WanConfig(),
    # Wan 2.1 14B block dimensions, 480x832 x 21 latent frames / (1, 2, 2) patches; few blocks.
    "real": WanConfig(dim=5120, heads=40, ffn=13824, blocks=2, grid=(21, 30, 52), in_channels=16,
                      text_len=512, text_dim=4096),
}


def streams(cfg: WanConfig) -> dict[str, Stream]:
    return {"video": Stream(cfg.tokens, cfg.in_channels),
            "text": Stream(cfg.text_len, cfg.text_dim, denoised=False, sequence=False)}


# The block's cross-attention weights by their ``layers.attention_specs`` names. Wan keeps them flat
# next to the self-attention's (``cq``, ``cq_norm`` ...), the names the torch model shares.
CROSS = {"wq": "cq", "wk": "ck", "wv": "cv", "wo": "co", "q_norm": "cq_norm", "k_norm": "ck_norm"}


def param_specs(cfg: WanConfig):
    d, f, hd = cfg.dim, cfg.ffn, cfg.head_dim
    cross = L.attention_specs(d, d, d, hd, rope=False)
    block = {
        "mod": L.adaln(d, 6),
        **L.attention_specs(d, d, d, hd, rope=True),
        **{CROSS[k]: w for k, w in cross.items()},
        "w1": L.Weight((d, f), "column"), "w2": L.Weight((f, d), "row"),
    }
    return {
        "patch_in": L.Weight((cfg.in_channels, d)),
        "text_in": L.Weight((cfg.text_dim, d)),
        "t1": L.Weight((256, d)), "t2": L.Weight((d, d)),
        "head_mod": L.adaln(d, 2),
        "patch_out": L.Weight((d, cfg.in_channels)),
        "blocks": [block] * cfg.blocks,
    }


def rope_table(cfg: WanConfig) -> np.ndarray:
    return rope_angles(L.grid_positions(cfg.grid), cfg.rope_axes).astype(np.float32)


def block(p, h, ctx, temb, angles, cfg: WanConfig, plan: Plan, name: str = "block"):
    """One Wan block. h: (B, S', dim) video rows; ctx: (B, L, dim); temb: (B, dim); angles: (S'', hd/2).
    Taps (``perfkit.models.taps``): ``<name>.attn`` (self-attention), ``.mlp``, ``.out``."""
    shift1, scale1, gate1, shift2, scale2, gate2 = L.modulation(temb, p["mod"], 6)
    hd = cfg.head_dim

    x = L.modulate(L.layer_norm(h), shift1, scale1)
    a = L.attention(plan, p, "video", x, hd, angles=angles)
    taps.tap(f"{name}.attn", a, stream="video")
    h = h + L.gated(gate1, a)
    cross = {k: p[w] for k, w in CROSS.items()}
    h = h + L.attention(plan, cross, "video", L.layer_norm(h), hd, context=("text", ctx))

    x = L.modulate(L.layer_norm(h), shift2, scale2)
    m = L.ffn(plan, x, p["w1"], p["w2"], stream="video")
    taps.tap(f"{name}.mlp", m, stream="video")
    h = h + L.gated(gate2, m)
    taps.tap(f"{name}.out", h, stream="video")
    return h


def forward(params, inputs, t, *, cfg: WanConfig, plan: Plan):
    """Velocity of the video latents. inputs: video (B, S', C) latent rows, text (B, L, text_dim); t: (B,)."""
    h = inputs["video"] @ params["patch_in"]
    temb = L.time_embedding(t, params["t1"], params["t2"])
    c = inputs["text"] @ params["text_in"]
    angles = plan.projected_rows(jnp.asarray(rope_table(cfg)), stream="video")
    for i, p in enumerate(params["blocks"]):
        h = block(p, h, c, temb, plan.block_angles(angles, i), cfg, plan, f"block{i}")
    shift, scale = L.modulation(temb, params["head_mod"], 2)
    return {"video": L.modulate(L.layer_norm(h), shift, scale) @ params["patch_out"]}
