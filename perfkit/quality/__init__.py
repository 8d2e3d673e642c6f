"""Output quality: videos, image folders, arrays and run outputs compared frame by frame (PSNR in the
source's own planes as ffmpeg's psnr filter gives it, and in RGB; abs diffs, SSIM, hashes) or as
tensors (rel L2, cosine, max |d|).

In a notebook::

    from perfkit import quality
    r = quality.measure("a.mp4", "b.mp4")   # B against A, as `perfkit quality --json` prints it
    quality.measure(frames_a, frames_b)     # numpy arrays: uint8 frames, or tensors of any dtype
    quality.codec_floor("a.mp4")            # what re-encoding alone costs
    quality.drift(latents_a, latents_b)     # per denoising step, B against A
"""

from perfkit.common.lazy import exports

__all__ = ["measure", "codec_floor", "drift", "open_media"]
__getattr__, __dir__ = exports(__name__, {"measure": "compare:compare", "codec_floor": "compare", "drift": "compare",
                                          "open_media": "media"})
