"""An LTX-2-like audio-video DiT: a video stream and a short audio stream, each with self-attention
(RoPE, per-head q/k RMSNorm), cross-attention to the text and an FFN, joined by cross-modal attention
both ways (a2v: video queries over audio keys; v2a: audio queries over video keys).

Under sequence plans the video stream is row-sharded and the audio stays whole on every device, as
under ``tp`` (a few dozen rows: small collectives), as the reference PR did it: under ``sp`` v2a gathers
the video k, v in one two-weight all-gather. Simplifications against LTX-2: no biases, per-head q/k
RMSNorm, no RoPE in the cross-modal attention, one patch per latent token, cross-modal attention in
the audio width.
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
class LTX2Config(L.DiTConfig):
    """The video stream's dimensions and latent grid (``L.DiTConfig``), the audio stream's dimensions
    and latent length, the block count."""

    grid: tuple[int, int, int] = (3, 5, 6)
    audio_dim: int = 32
    audio_heads: int = 4
    audio_ffn: int = 128
    audio_len: int = 10
    audio_channels: int = 4
    blocks: int = 2

    @property
    def audio_head_dim(self) -> int:
        return self.audio_dim // self.audio_heads

    @property
    def rope_axes(self) -> tuple[int, int, int]:
        return L.video_rope_axes(self.head_dim)


# The published model's block counts (``perfkit cost --model`` costs the whole model): LTX-2, 48 blocks.
PUBLISHED_BLOCKS = {"blocks": 48}

CONFIGS = {
    # 90 video rows: as the real shape, they do not split over 4 devices (sequence plans need ``pad``).
    "tiny": LTX2Config(),
    # LTX-2 block dimensions at 480x704x49 (7 x 15 x 22 = 2310 video latent tokens; the reference PR
    # padded them to 2312 at 4 devices), about 2 s of audio latents, 1024 text tokens; 2 of 48 blocks.
    "real": LTX2Config(dim=4096, heads=32, ffn=16384, audio_dim=2048, audio_heads=32, audio_ffn=8192, blocks=2,
                       grid=(7, 15, 22), in_channels=128, audio_len=51, audio_channels=128, text_len=1024,
                       text_dim=3840),
}


def streams(cfg: LTX2Config) -> dict[str, Stream]:
    return {"video": Stream(cfg.tokens, cfg.in_channels),
            "audio": Stream(cfg.audio_len, cfg.audio_channels, sequence=False),
            "text": Stream(cfg.text_len, cfg.text_dim, denoised=False, sequence=False)}


def param_specs(cfg: LTX2Config):
    dv, da = cfg.dim, cfg.audio_dim

    def stream(d, heads, ffn):
        return {"mod": L.adaln(d, 6), "self": L.attention_specs(d, d, d, d // heads, rope=True),
                "text": L.attention_specs(d, d, d, d // heads, rope=False),
                "w1": L.Weight((d, ffn), "column"), "w2": L.Weight((ffn, d), "row")}

    block = {"video": stream(dv, cfg.heads, cfg.ffn), "audio": stream(da, cfg.audio_heads, cfg.audio_ffn),
             "a2v": L.attention_specs(dv, da, da, cfg.audio_head_dim, rope=False),
             "v2a": L.attention_specs(da, dv, da, cfg.audio_head_dim, rope=False)}
    return {
        "video_in": L.Weight((cfg.in_channels, dv)), "audio_in": L.Weight((cfg.audio_channels, da)),
        "text_video": L.Weight((cfg.text_dim, dv)), "text_audio": L.Weight((cfg.text_dim, da)),
        "t1": L.Weight((256, dv)), "t2": L.Weight((dv, dv)),
        "t1_audio": L.Weight((256, da)), "t2_audio": L.Weight((da, da)),
        "blocks": [block] * cfg.blocks,
        "video_head": L.adaln(dv, 2), "audio_head": L.adaln(da, 2),
        "video_out": L.Weight((dv, cfg.in_channels)), "audio_out": L.Weight((da, cfg.audio_channels)),
    }


def rope_tables(cfg: LTX2Config) -> dict[str, np.ndarray]:
    """(rows, head_dim / 2) RoPE angles: video over (frame, row, column), audio over time."""
    return {"video": rope_angles(L.grid_positions(cfg.grid), cfg.rope_axes).astype(np.float32),
            "audio": rope_angles(np.arange(cfg.audio_len)[:, None], [cfg.audio_head_dim]).astype(np.float32)}


def block(p, hs: dict, text: dict, temb: dict, angles: dict, cfg: LTX2Config, plan: Plan,
          name: str = "block") -> dict:
    """hs, text, temb, angles: stream name ("video", "audio") -> its rows (B, S', D), its text context
    (B, L, D), its time embedding (B, D), its projected RoPE angles. Taps (``perfkit.models.taps``), per
    stream s: ``<name>.<s>.attn`` (self-attention), ``.mlp``, ``.out``."""
    head_dims = {"video": cfg.head_dim, "audio": cfg.audio_head_dim}
    mods = {s: L.modulation(temb[s], p[s]["mod"], 6) for s in hs}
    for s, h in hs.items():
        shift, scale, gate = mods[s][:3]
        x = L.modulate(L.layer_norm(h), shift, scale)
        a = L.attention(plan, p[s]["self"], s, x, head_dims[s], angles=angles[s])
        taps.tap(f"{name}.{s}.attn", a, stream=s)
        h = h + L.gated(gate, a)
        hs[s] = h + L.attention(plan, p[s]["text"], s, L.layer_norm(h), head_dims[s], context=("text", text[s]))

    v, a = L.layer_norm(hs["video"]), L.layer_norm(hs["audio"])
    hs["video"] = hs["video"] + L.attention(plan, p["a2v"], "video", v, cfg.audio_head_dim, context=("audio", a))
    hs["audio"] = hs["audio"] + L.attention(plan, p["v2a"], "audio", a, cfg.audio_head_dim, context=("video", v))

    for s, h in hs.items():
        shift, scale, gate = mods[s][3:]
        x = L.modulate(L.layer_norm(h), shift, scale)
        m = L.ffn(plan, x, p[s]["w1"], p[s]["w2"], stream=s)
        taps.tap(f"{name}.{s}.mlp", m, stream=s)
        hs[s] = h + L.gated(gate, m)
        taps.tap(f"{name}.{s}.out", hs[s], stream=s)
    return hs


def forward(params, inputs, t, *, cfg: LTX2Config, plan: Plan):
    """Velocities of both streams. inputs: video (B, S', C) rows, audio (B, A, C_a), text (B, L, text_dim)."""
    hs = {"video": inputs["video"] @ params["video_in"], "audio": inputs["audio"] @ params["audio_in"]}
    text = {"video": inputs["text"] @ params["text_video"], "audio": inputs["text"] @ params["text_audio"]}
    temb = {"video": L.time_embedding(t, params["t1"], params["t2"]),
            "audio": L.time_embedding(t, params["t1_audio"], params["t2_audio"])}
    angles = {s: plan.projected_rows(jnp.asarray(table), stream=s) for s, table in rope_tables(cfg).items()}
    for i, p in enumerate(params["blocks"]):
        hs = block(p, dict(hs), text, temb, plan.block_angles(angles, i), cfg, plan, f"block{i}")
    out = {}
    for s, h in hs.items():
        shift, scale = L.modulation(temb[s], params[f"{s}_head"], 2)
        out[s] = L.modulate(L.layer_norm(h), shift, scale) @ params[f"{s}_out"]
    return out
