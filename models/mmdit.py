"""MMDiT blocks, as FLUX and HunyuanVideo stack them: dual-stream blocks (latent and text streams,
each with its own weights, one attention over both), then single-stream blocks over the joined
sequence (q, k, v and the MLP input from one projection; an output projection with two row-parallel
halves, attention and MLP).

Under ``sp`` the single blocks gather q, k, v and the MLP input in one all-gather (four weights) and
scatter the two output halves in one reduce-scatter (two (x, w) pairs). The families differ in data:
stream names, the joined order, and how a sequence plan lays out the joined stream (``Joint.chunks``).
Simplifications: no biases, no guidance / pooled-text embeddings, no text token refiner, a patch size
of one latent token; text tokens are not rotated (FLUX's zero text positions rotate by nothing).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from perfkit.kernels.rope import rope_angles
from perfkit.models import layers as L
from perfkit.models import taps
from perfkit.models.plans import Joint, Plan, Stream

JOINT = "joint"  # the joined stream of the single-stream blocks


@dataclasses.dataclass(frozen=True)
class MMDiTConfig(L.DiTConfig):
    """Dimensions, latent grid and text (``L.DiTConfig``), block counts, and what the families differ in."""

    grid: tuple[int, int, int] = (1, 8, 8)
    double_blocks: int = 1
    single_blocks: int = 1
    rope_axes: tuple[int, int, int] = (4, 6, 6)  # rotary channels per (frame, row, column); sum = head_dim
    latent: str = "image"  # the latent stream's name
    text_first: bool = True  # joined order [text | latent] (FLUX) or [latent | text] (HunyuanVideo)
    chunks: str = "interleaved"  # Joint.chunks of the joined stream under sequence plans

    @property
    def joined(self) -> tuple[str, str]:
        return ("text", self.latent) if self.text_first else (self.latent, "text")


def streams(cfg: MMDiTConfig) -> dict[str, Stream | Joint]:
    return {cfg.latent: Stream(cfg.tokens, cfg.in_channels),
            "text": Stream(cfg.text_len, cfg.text_dim, denoised=False),
            JOINT: Joint(cfg.joined, cfg.chunks)}


def param_specs(cfg: MMDiTConfig):
    d, f = cfg.dim, cfg.ffn
    attention = L.attention_specs(d, d, d, cfg.head_dim, rope=True)
    dual_stream = {"mod": L.adaln(d, 6), **attention, "w1": L.Weight((d, f), "column"), "w2": L.Weight((f, d), "row")}
    # single: "wo" is the attention half of the output projection, "wo_mlp" the MLP half
    single = {"mod": L.adaln(d, 3), **attention, "w_mlp": L.Weight((d, f), "column"), "wo_mlp": L.Weight((f, d), "row")}
    return {
        "patch_in": L.Weight((cfg.in_channels, d)),
        "text_in": L.Weight((cfg.text_dim, d)),
        "t1": L.Weight((256, d)), "t2": L.Weight((d, d)),
        "double": [{cfg.latent: dual_stream, "text": dual_stream}] * cfg.double_blocks,
        "single": [single] * cfg.single_blocks,
        "head_mod": L.adaln(d, 2),
        "patch_out": L.Weight((d, cfg.in_channels)),
    }


def rope_tables(cfg: MMDiTConfig) -> dict[str, np.ndarray]:
    """(rows, head_dim / 2) angles of the latent stream and of the text (zeros: no rotation)."""
    latent = rope_angles(L.grid_positions(cfg.grid), cfg.rope_axes).astype(np.float32)
    return {cfg.latent: latent, "text": np.zeros((cfg.text_len, latent.shape[1]), np.float32)}


def dual_stream_block(p, hs: dict, temb, angles: dict, *, head_dim: int, plan: Plan, name: str = "double") -> dict:
    """hs: stream name -> (B, S', dim) rows; p: stream name -> that stream's weights; angles: stream
    name -> projected RoPE angles or None. One attention over every stream's tokens. Taps
    (``perfkit.models.taps``), per stream s: ``<name>.<s>.attn``, ``.mlp``, ``.out``."""
    mods, queries, keys = {}, {}, {}
    for s, h in hs.items():
        w = p[s]
        mods[s] = L.modulation(temb, w["mod"], 6)
        q, k, v = plan.project(L.modulate(L.layer_norm(h), *mods[s][:2]), [w["wq"], w["wk"], w["wv"]], stream=s)
        queries[s], keys[s] = L.qkv_heads(plan, w, q, k, v, angles[s], head_dim)
    out = plan.attention(queries, keys)
    new = {}
    for s, h in hs.items():
        w, (_, _, gate1, shift2, scale2, gate2) = p[s], mods[s]
        a = plan.project_out([(L.merge_heads(out[s]), w["wo"])], stream=s)
        taps.tap(f"{name}.{s}.attn", a, stream=s)
        h = h + L.gated(gate1, a)
        x = L.modulate(L.layer_norm(h), shift2, scale2)
        m = L.ffn(plan, x, w["w1"], w["w2"], stream=s)
        taps.tap(f"{name}.{s}.mlp", m, stream=s)
        new[s] = h + L.gated(gate2, m)
        taps.tap(f"{name}.{s}.out", new[s], stream=s)
    return new


def single_stream_block(p, h, temb, angles, *, head_dim: int, plan: Plan, name: str = "single"):
    """h: (B, S', dim) rows of the joined stream; angles: its projected RoPE angles. Taps: ``<name>.out``
    only (attention and MLP leave through one row-parallel projection, summed)."""
    shift, scale, gate = L.modulation(temb, p["mod"], 3)
    x = L.modulate(L.layer_norm(h), shift, scale)
    q, k, v, u = plan.project(x, [p["wq"], p["wk"], p["wv"], p["w_mlp"]], stream=JOINT)
    q, kv = L.qkv_heads(plan, p, q, k, v, angles, head_dim)
    a = plan.attention({JOINT: q}, {JOINT: kv})[JOINT]
    out = plan.project_out([(L.merge_heads(a), p["wo"]), (jax.nn.gelu(u, approximate=True), p["wo_mlp"])],
                           stream=JOINT)
    h = h + L.gated(gate, out)
    taps.tap(f"{name}.out", h, stream=JOINT)
    return h


def forward(params, inputs, t, *, cfg: MMDiTConfig, plan: Plan):
    """Velocity of the latents. inputs: latent (B, S', C) and text (B, L', text_dim) rows; t: (B,)."""
    hs = {cfg.latent: inputs[cfg.latent] @ params["patch_in"], "text": inputs["text"] @ params["text_in"]}
    temb = L.time_embedding(t, params["t1"], params["t2"])
    tables = rope_tables(cfg)
    angles = {cfg.latent: plan.projected_rows(jnp.asarray(tables[cfg.latent]), stream=cfg.latent), "text": None}
    for i, p in enumerate(params["double"]):
        hs = dual_stream_block(p, hs, temb, plan.block_angles(angles, i), head_dim=cfg.head_dim, plan=plan,
                               name=f"double{i}")

    h = plan.join([hs[s] for s in cfg.joined], joint=JOINT)
    joint_table = jnp.asarray(np.concatenate([tables[s] for s in cfg.joined]))
    joint_angles = plan.projected_rows(joint_table, stream=JOINT)
    for j, p in enumerate(params["single"]):  # block index: after the double blocks
        h = single_stream_block(p, h, temb, plan.block_angles(joint_angles, len(params["double"]) + j),
                                head_dim=cfg.head_dim, plan=plan, name=f"single{j}")
    latent = plan.split(h, joint=JOINT)[cfg.joined.index(cfg.latent)]

    shift, scale = L.modulation(temb, params["head_mod"], 2)
    return {cfg.latent: L.modulate(L.layer_norm(latent), shift, scale) @ params["patch_out"]}
