"""A HunyuanVideo-like video MMDiT: dual-stream blocks over video and text streams, then
single-stream blocks over the joined [video | text] sequence.

The blocks are ``perfkit.models.mmdit``'s. Under sequence plans the single blocks run on contiguous
chunks of the joined sequence ("contiguous"): a chunk may straddle the video / text boundary. The first
single block's input is gathered and cut to this rank's chunk (its offset a runtime value), and the
last one's output gathered and cut back into the two streams.
"""

from __future__ import annotations

import dataclasses

from perfkit.models.mmdit import MMDiTConfig, forward, param_specs, streams

__all__ = ["CONFIGS", "PUBLISHED_BLOCKS", "forward", "param_specs", "streams"]

_HUNYUAN = MMDiTConfig(latent="video", text_first=False, chunks="contiguous")

# The published model's block counts (``perfkit cost --model`` costs the whole model): HunyuanVideo,
# 20 dual-stream and 40 single-stream blocks (Kong et al. 2024, the 13B model).
PUBLISHED_BLOCKS = {"double_blocks": 20, "single_blocks": 40}

CONFIGS = {
    # 64 video + 12 text rows: at 4 devices the chunks of 19 rows straddle the boundary.
    "tiny": dataclasses.replace(_HUNYUAN, grid=(2, 4, 8), text_len=12),
    # HunyuanVideo block dimensions at 320x512x61 (16 x 20 x 32 latent tokens of 1x2x2 packed
    # 16-channel patches; with 256 text tokens the 10496 joined rows the reference PR split 4 x 2624);
    # 2 + 2 of its 20 + 40 blocks.
    "real": dataclasses.replace(_HUNYUAN, dim=3072, heads=24, ffn=12288, double_blocks=2, single_blocks=2,
                                grid=(16, 20, 32), in_channels=64, text_len=256, text_dim=4096,
                                rope_axes=(16, 56, 56)),
}
