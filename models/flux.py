"""A FLUX.1-like image MMDiT: dual-stream (joint) blocks over image and text streams, then
single-stream blocks over [text | image] whose output projection has two row-parallel halves.

The blocks are ``perfkit.models.mmdit``'s. Under sequence plans both streams are row-sharded, and the
single blocks join the shards each rank holds ("interleaved"): no communication at the join, and the
RoPE rows are permuted to the gathered order [text 0, image 0, text 1, image 1, ...].
"""

from __future__ import annotations

from perfkit.models.mmdit import MMDiTConfig, forward, param_specs, streams

__all__ = ["CONFIGS", "PUBLISHED_BLOCKS", "forward", "param_specs", "streams"]

# The published model's block counts (``perfkit cost --model`` costs the whole model): FLUX.1-dev.
PUBLISHED_BLOCKS = {"double_blocks": 19, "single_blocks": 38}

CONFIGS = {
    "tiny": MMDiTConfig(grid=(1, 8, 8), text_len=16),
    # FLUX.1-dev block dimensions at 1024x1024 (64x64 latent tokens of 2x2 packed 16-channel patches),
    # 512 T5 tokens; 2 + 2 of its 19 + 38 blocks.
    "real": MMDiTConfig(dim=3072, heads=24, ffn=12288, double_blocks=2, single_blocks=2, grid=(1, 64, 64),
                        in_channels=64, text_len=512, text_dim=4096, rope_axes=(16, 56, 56)),
}
