"""A measured program for the runner's quality tests: three timed steps, then the same frames as an
``.npy``, an ffv1 ``.mkv`` and a folder of PNGs, and per-step ``latents.npy`` (4, 2, 8).

NOISE (env) adds seeded noise of that amplitude to frames and latents; with NOISE_PER_TRIAL=1 the
seed is the trial index, so repeats differ.
"""

import os

import numpy as np
from skimage import io as skio

from perfkit import record
from perfkit.quality import media

for _ in range(3):
    record.step(1.0)
noise = int(os.environ.get("NOISE", "0"))
seed = int(os.environ["PERFKIT_TRIAL"]) if os.environ.get("NOISE_PER_TRIAL") else 0
rng = np.random.default_rng(seed)
t, y, x = np.meshgrid(np.arange(5), np.arange(32), np.arange(48), indexing="ij")
frames = np.stack([(x * 5 + t * 7) % 256, (y * 6) % 256, (x + y + t) % 256], axis=-1)
frames = np.clip(frames + rng.integers(-noise, noise + 1, frames.shape), 0, 255).astype(np.uint8)
latents = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
latents = np.stack([latents + noise * 1e-3 * s * rng.standard_normal(latents.shape).astype(np.float32)
                    for s in range(4)])

out = record.outputs_dir()
np.save(out / "frames.npy", frames)
np.save(out / "latents.npy", latents)
media.write_video(iter(frames), out / "clip.mkv", media.parse_codec("ffv1"))
(out / "pngs").mkdir()
for i, f in enumerate(frames):
    skio.imsave(out / "pngs" / f"{i}.png", f, check_contrast=False)
