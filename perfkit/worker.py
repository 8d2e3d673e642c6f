"""One rank of a bundled-model trial: ``python -m perfkit.worker SPEC_JSON``.

The runner starts this in a fresh process per trial, with XLA flags (fake devices, dump folder) already
in the environment, so env switches take effect at import as they do in users' programs. It speaks the
metrics protocol like any user command: one ``step`` event per denoise step (synced), frames written
to ``PERFKIT_OUTPUTS``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    import jax  # after the runner's XLA_FLAGS are in place
    import numpy as np

    from perfkit import record
    from perfkit.models.pipeline import DenoiseConfig, Denoiser
    from perfkit.models.plans import make_plan

    model, options = spec["model"], dict(spec["options"])
    save_latents = bool(options.pop("save_latents", False))  # opt-in: outputs/latents.npy for drift
    plan = make_plan(options.pop("plan", "local"), **options)
    devices = jax.devices()
    if len(devices) < spec["devices"]:
        print(f"perfkit worker: case wants {spec['devices']} devices, jax sees {len(devices)}", file=sys.stderr)
        return 2
    run = DenoiseConfig(steps=model["steps"], guidance=model.get("guidance"), seed=spec["seed"],
                        dtype=model.get("dtype", "float32"))
    t0 = time.perf_counter()
    den = Denoiser(model["name"], model["config"], plan, devices[: spec["devices"]], run)
    record.value("setup_s", time.perf_counter() - t0)
    record.mark("ready", platform=devices[0].platform, device_kind=devices[0].device_kind,
                devices=spec["devices"])

    latents = []
    trace_steps = set(spec.get("trace_steps", []))
    trace_dir = spec.get("trace_dir")
    for i in range(run.steps):
        tracing = i in trace_steps and trace_dir
        if tracing:
            jax.profiler.start_trace(str(Path(trace_dir) / f"step{i}"))
        t = time.perf_counter()
        den.step().block_until_ready()
        ms = (time.perf_counter() - t) * 1e3
        if tracing:
            jax.profiler.stop_trace()
        record.step(ms, index=i)
        if save_latents:  # after the timed step; float32 because npy has no bfloat16
            latents.append(np.asarray(jax.device_get(den.latents), np.float32))

    out = record.outputs_dir()
    if out is not None and spec.get("outputs", True):
        np.save(out / "frames.npy", den.frames())
        if save_latents:
            np.save(out / "latents.npy", np.stack(latents))  # (steps, batch, tokens, channels)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
