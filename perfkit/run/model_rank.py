"""One rank of a bundled-model trial: ``python -m perfkit.run.model_rank SPEC_JSON``.

The runner starts this in a fresh process per trial, with XLA flags (fake devices, dump folder) already
in the environment, so env switches take effect at import as they do in users' programs. It speaks the
metrics protocol like any user command: one synced ``step`` event per denoise step (the first one
compiles), then a natural pass (the same steps again from the same noise, dispatched without waiting,
one wait at the end), ``compile_s`` of the steps from jax's own compile timers (``setup_compile_s``
for building the model), ``compile_cache_hits`` / ``compile_cache_writes`` (programs read from / written to
jax's persistent cache), frames written to ``PERFKIT_OUTPUTS``, and at the steps ``record.tapping``
names (``capture.taps``) the model's taps (``perfkit.models.taps``: each block's attention, MLP and
output, whole) through ``record.tap``, from a second program run on that step's input after the timed
steps, so the timed steps and ``compile_s`` are those of an untapped run. Its marks: ``ready``, then past the timed
steps ``taps`` and ``natural`` (``AFTER_STEPS``), so that a trial running on there is not read as stepping still.

With ``PERFKIT_WORLD`` > 1 each rank is one process of a ``jax.distributed`` job (one process per rank,
as on multi-host TPU); the mesh spans every process's devices, so the same model case runs as one SPMD
controller or as N processes.
"""

from __future__ import annotations

import json
import os
import sys
import time

# jax's monitoring events for tracing, lowering and compiling a program (jax/_src/dispatch.py).
COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")
# jax's persistent-cache events (jax/_src/compiler.py, compilation_cache.py): a program read from the
# cache, and one compiled and written to it ("misses").
CACHE_HIT_EVENT, CACHE_WRITE_EVENT = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"
# the marks of the phases after the timed steps, and what the progress line says of a rank in one (the taps' program
# compiles then, so a trial may run on past its steps for a while)
AFTER_STEPS = {"taps": "taking its taps", "natural": "timing its natural pass"}


class CompileMeter:
    """Seconds this process spent compiling, and persistent compilation-cache hits and writes (0 with
    --salt or without a cache)."""

    def __init__(self, monitoring):
        self.seconds, self.cache_hits, self.cache_writes = 0.0, 0, 0
        monitoring.register_event_duration_secs_listener(self._duration)
        monitoring.register_event_listener(self._event)

    def _duration(self, event: str, seconds: float, **_) -> None:
        if event in COMPILE_EVENTS:
            self.seconds += seconds

    def _event(self, event: str, **_) -> None:
        if event == CACHE_HIT_EVENT:
            self.cache_hits += 1
        elif event == CACHE_WRITE_EVENT:
            self.cache_writes += 1


def start_distributed(jax) -> None:
    """Join the trial's jax.distributed job when the runner started one process per rank."""
    world = int(os.environ.get("PERFKIT_WORLD", "1"))
    if world > 1:  # CPU collectives use gloo; timeouts well under the trial's, so a lost peer ends the rank, not the watchdog
        jax.distributed.initialize(coordinator_address=os.environ["PERFKIT_COORDINATOR"], num_processes=world,
                                   process_id=int(os.environ["PERFKIT_RANK"]), initialization_timeout=60,
                                   heartbeat_timeout_seconds=10, shutdown_timeout_seconds=10)


def host_latents(jax, den):
    """The whole latents (batch, tokens, channels) as float32 numpy on this process, gathered from
    every process in a multi-process job (a collective: every rank calls it)."""
    # the worker imports jax and numpy only once XLA_FLAGS are set (main)
    import numpy as np

    if jax.process_count() == 1:
        return np.asarray(jax.device_get(den.latents), np.float32)
    # multi-process jobs only: an experimental module a single process never needs
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(den.latents, tiled=True), np.float32)


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    import jax  # after the runner's XLA_FLAGS are in place

    # the worker imports jax and numpy only once XLA_FLAGS are set (main)
    import numpy as np

    # jax-dependent: after XLA_FLAGS are in place
    from perfkit import record
    from perfkit.models import plan_for
    from perfkit.models.pipeline import DenoiseConfig, Denoiser, decode

    start_distributed(jax)
    compiles = CompileMeter(jax.monitoring)

    model, options = spec["model"], dict(spec["options"])
    save_latents = bool(options.get("save_latents", False))  # opt-in: outputs/latents.npy for drift
    plan = plan_for(model["name"], model["config"], options, spec["devices"])
    devices = jax.devices()
    if len(devices) < spec["devices"]:
        print(f"perfkit worker: case wants {spec['devices']} devices, jax sees {len(devices)}", file=sys.stderr)
        return 2
    run = DenoiseConfig(steps=model["steps"], guidance=model.get("guidance"), seed=spec["seed"],
                        dtype=model.get("dtype", "float32"))
    t0 = time.perf_counter()
    den = Denoiser(model["name"], model["config"], plan, devices[: spec["devices"]], run)
    start = den.latents
    record.value("setup_s", time.perf_counter() - t0)
    setup_compile_s = compiles.seconds  # parameter init and placement programs
    record.value("setup_compile_s", setup_compile_s)
    own = jax.local_devices()  # this process's chips (one process per chip: its placement's)
    record.mark("ready", platform=own[0].platform, device_kind=own[0].device_kind, devices=spec["devices"],
                local_devices=[d.id for d in own])

    latents = []
    tap_inputs = {}  # step -> the state it started from (device arrays: immutable)
    trace_steps = set(spec.get("trace_steps", []))
    trace_dir = spec.get("trace_dir")
    for i in range(run.steps):
        if record.tapping(i):
            tap_inputs[i] = den.state
        with record.jax_trace(trace_dir if i in trace_steps else None, i):
            t = time.perf_counter()
            den.step().block_until_ready()
            ms = (time.perf_counter() - t) * 1e3
        record.step(ms, index=i, **({"traced": True} if i in trace_steps and trace_dir else {}))
        if save_latents:  # after the timed step; float32 because npy has no bfloat16
            latents.append(host_latents(jax, den))
    record.value("compile_s", compiles.seconds - setup_compile_s)  # the step program(s)

    out = record.outputs_dir()
    if spec.get("outputs", True):
        frames = decode(host_latents(jax, den)[0], den.cfg.grid)
        if out is not None:
            np.save(out / "frames.npy", frames)
            if save_latents:
                np.save(out / "latents.npy", np.stack(latents))  # (steps, batch, tokens, channels)

    if tap_inputs:
        record.mark("taps")
    for i, state in tap_inputs.items():
        den.index, den.state = i, state
        taps = den.taps()  # a collective program: every process runs it
        if jax.process_index() == 0:  # replicated, the same on every process: one writes them
            for name, value in taps:
                record.tap(name, value.addressable_data(0), step=i)

    record.mark("natural")
    den.index, den.latents = 0, start  # the natural pass: the same steps, one wait at the end
    t = time.perf_counter()
    for _ in range(run.steps):
        last = den.step()
    last.block_until_ready()
    record.natural((time.perf_counter() - t) * 1e3 / run.steps, run.steps)
    # every program this process ran: setup, steps, output gathering
    record.value("compile_cache_hits", compiles.cache_hits)
    record.value("compile_cache_writes", compiles.cache_writes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
