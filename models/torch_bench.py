"""One rank of a torch denoise benchmark: ``python -m perfkit.models.torch_bench --plan ulysses ...``.

A case with ``processes: N`` starts N of these; each joins the process group from the launcher
variables the runner sets (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``;
torchrun sets the same), over gloo on CPU, nccl on CUDA and torch_tpu's backend on a TPU VM. It runs
the flow-matching Euler loop of ``perfkit.models.pipeline`` on the torch Wan model with a plan applied,
and speaks the metrics protocol:

- one ``step`` per denoise step (device synchronised), then a natural pass of the same steps (one
  wait at the end), ``setup_s`` and, when compiled, ``recompiles`` (dynamo guard failures of this rank);
- ``frames.npy`` (T, H, W, 3) uint8 from rank 0 into ``PERFKIT_OUTPUTS``;
- for the steps ``record.tapping`` names (``capture.taps``): each block's attention, FFN and output
  (``torch_wan.tap_modules``, whole: gathered under a sequence plan) through ``record.tap``, from an
  eager forward on that step's input after the timed passes;
- for the steps in ``PERFKIT_TRACE_STEPS``: a torch.profiler Kineto trace ``rank<R>.json`` (with
  ``distributedInfo``) in ``PERFKIT_TRACE_DIR``, one ``ProfilerStep#<i>`` span per step from the first
  to the last listed; on TPU, torch_tpu's XSpace (``plugins/profile/<ts>/*.xplane.pb``) there instead.
  Steps with the profiler on (the traced ones and one warm-up step before them) carry ``traced``.

``--input-layout transposed`` hands the model a transposed view of the latents from step 1 on (same
values, other strides): a stride guard fails and torch.compile recompiles, for A/B cases on recompiles.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import click

from perfkit import record
from perfkit.errors import BadInput, ExitCode

COMPILE_BACKENDS = ("none", "eager", "aot_eager", "inductor")
DTYPES = ("float32", "bfloat16")


def _device(kind: str, local_rank: int):
    # torch is optional: the module's CLI help and argument checks run without it
    import torch

    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cuda":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    if kind == "tpu":
        # torch_tpu exists only on TPU VMs
        from perfkit.adapters import torch_tpu

        return torch_tpu.device(local_rank)
    return torch.device("cpu")


def _backend(device) -> str:
    if device.type == "tpu":
        # torch_tpu exists only on TPU VMs
        from perfkit.adapters import torch_tpu

        return torch_tpu.BACKEND
    return {"cuda": "nccl"}.get(device.type, "gloo")


def _synchronize(device) -> None:
    # torch is optional: the module's CLI help and argument checks run without it
    import torch

    if device.type != "cpu":
        torch.accelerator.synchronize()


def _trace_steps() -> list[int]:
    text = os.environ.get("PERFKIT_TRACE_STEPS", "").strip()
    try:
        return sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError:
        raise BadInput(f"not a comma-separated list of step indices: {text!r}", field="PERFKIT_TRACE_STEPS") from None


def _profiler(device, steps: list[int], trace_dir: str | None, rank: int):
    """torch.profiler recording steps ``min(steps)..max(steps)`` after one warm-up step (call
    ``.step()`` after every step), or a null context when nothing is to be traced."""
    if not steps or not trace_dir:
        return contextlib.nullcontext()
    # the profiler: only when steps are traced
    from torch.profiler import ProfilerAction, ProfilerActivity, profile

    first, last = steps[0], steps[-1]

    def schedule(step: int) -> ProfilerAction:
        # A warm-up step first takes the profiler's start-up cost (and the ranks' skew from it), so the
        # traced steps do not; it is timed as a traced step too.
        if step == first - 1:
            return ProfilerAction.WARMUP
        if first <= step < last:
            return ProfilerAction.RECORD
        return ProfilerAction.RECORD_AND_SAVE if step == last else ProfilerAction.NONE

    out = Path(trace_dir)
    out.mkdir(parents=True, exist_ok=True)
    if device.type == "tpu":  # torch_tpu writes host and device events as XSpace under `out` itself
        # torch_tpu exists only on TPU VMs
        from perfkit.adapters import torch_tpu

        return profile(activities=[ProfilerActivity.CPU, torch_tpu.profiler_activity()], schedule=schedule,
                       experimental_config=torch_tpu.profiler_config(out))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    return profile(activities=activities, schedule=schedule,
                   on_trace_ready=lambda p: p.export_chrome_trace(str(out / f"rank{rank}.json")))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--plan", type=click.Choice(["local", "tp", "ulysses", "ring"]), default="local", show_default=True)
@click.option("--config", default="tiny", show_default=True, help="A config of perfkit.models.wan.")
@click.option("--steps", type=click.IntRange(1), default=8, show_default=True)
@click.option("--guidance", type=float, default=None, help="Classifier-free guidance scale (batch 2).")
@click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--compile", "compile_backend", type=click.Choice(COMPILE_BACKENDS), default="none", show_default=True,
              help="torch.compile the model with this backend.")
@click.option("--input-layout", type=click.Choice(["contiguous", "transposed"]), default="contiguous",
              show_default=True, help="transposed: from step 1 on, latents reach the model as a transposed view.")
@click.option("--device", "device_kind", type=click.Choice(["auto", "cpu", "cuda", "tpu"]), default="auto",
              show_default=True)
def main(plan, config, steps, guidance, dtype, seed, compile_backend, input_layout, device_kind):
    """One rank of a torch Wan denoise run with a parallel plan."""
    try:
        run(plan, config, steps, guidance, dtype, seed, compile_backend, input_layout, device_kind)
    except BadInput as exc:
        click.echo(f"torch_bench: {exc.line()}", err=True)
        sys.exit(ExitCode.BAD_INPUT)


def _launched(plan: str) -> tuple[int, int, int, int]:
    """World size, rank, local rank and local world size from the launcher's variables, checked against the
    plan."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    if plan != "local" and "MASTER_ADDR" not in os.environ:
        raise BadInput(f"plan {plan} needs the launcher variables (MASTER_ADDR, RANK, WORLD_SIZE ...): run it "
                       "from a case with 'processes: N' or under torchrun", field="--plan")
    if plan == "local" and world > 1:
        raise BadInput(f"plan local runs on one process, but WORLD_SIZE is {world}", field="--plan")
    return world, rank, local_rank, local_world


def _synced_pass(euler_step, start, steps: int, device, rank: int):
    """Every step waited for and recorded (the first one compiles), the traced steps under the profiler; returns
    the last latents and, per tapped step, the latents it started from."""
    traced = _trace_steps()
    tap_inputs = {}
    x = start
    with _profiler(device, traced, os.environ.get("PERFKIT_TRACE_DIR"), rank) as prof:
        for i in range(steps):
            if record.tapping(i):
                tap_inputs[i] = x
            t0 = time.perf_counter()
            x = euler_step(i, x)
            _synchronize(device)
            profiled = prof is not None and traced[0] - 1 <= i <= traced[-1]  # profiler on (warm-up too)
            record.step((time.perf_counter() - t0) * 1e3, index=i, **({"traced": True} if profiled else {}))
            if prof is not None:
                prof.step()
    return x, tap_inputs


def _natural_pass(euler_step, start, steps: int, device) -> None:
    """The same steps from the same noise, one wait at the end, recorded as the natural step."""
    natural = start
    t0 = time.perf_counter()
    for i in range(steps):
        natural = euler_step(i, natural)
    _synchronize(device)
    record.natural((time.perf_counter() - t0) * 1e3 / steps, steps)


def run(plan, config, steps, guidance, dtype, seed, compile_backend, input_layout, device_kind) -> None:
    t_setup = time.perf_counter()
    # numpy, torch and the torch model: only once the arguments are good
    import numpy as np
    # torch is optional: the module's CLI help and argument checks run without it
    import torch
    import torch.distributed as dist

    from perfkit.models import torch_wan
    from perfkit.models.pipeline import decode, euler_sigmas
    from perfkit.models.wan import CONFIGS
    from perfkit.adapters import torch_taps
    from perfkit.adapters.torch_recompiles import RecompileCounter

    if config not in CONFIGS:
        raise BadInput(f"unknown config {config!r} (known: {', '.join(CONFIGS)})", field="--config")
    world, rank, local_rank, local_world = _launched(plan)
    device = _device(device_kind, local_rank)
    # The host's ranks share its cores: torch's default, a thread per core in every rank, puts ranks x cores
    # threads on the host's cores, which then wait on each other; each rank takes its share instead.
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    if plan != "local":
        dist.init_process_group(_backend(device), device_id=device if device.type == "cuda" else None)

    cfg = CONFIGS[config]
    torch_dtype = getattr(torch, dtype)
    model = torch_wan.build_model(cfg, seed, device=device, dtype=torch_dtype)
    try:
        placement = torch_wan.apply_plan(model, plan)
    except ValueError as exc:
        raise BadInput(str(exc), field="--plan") from None
    forward = model if compile_backend == "none" else torch.compile(model, backend=compile_backend)

    # The JAX pipeline's draws, so both frameworks start from the same noise and text.
    draws = np.random.default_rng(seed + 1)
    noise = torch.from_numpy(draws.standard_normal((1, cfg.tokens, cfg.in_channels)).astype(np.float32))
    text = torch.from_numpy(draws.standard_normal((1, cfg.text_len, cfg.text_dim)).astype(np.float32))
    start = placement.shard(noise.to(device, torch_dtype))
    text = text.to(device, torch_dtype)
    if guidance is not None:
        text = torch.cat([text, torch.zeros_like(text)])
    sigmas = euler_sigmas(steps)

    def velocity(fn, i: int, x):  # x: (1, S', C) this rank's latent rows
        t = torch.full((x.shape[0],), float(sigmas[i]), device=device)
        if guidance is None:
            return fn(x, t, text)
        # one batch of 2: conditional, then unconditional (text zeroed), as the JAX pipeline
        v_cond, v_uncond = fn(torch.cat([x, x]), torch.cat([t, t]), text).chunk(2)
        return v_uncond + guidance * (v_cond - v_uncond)

    def euler_step(i: int, x):
        x_in = x.transpose(1, 2).contiguous().transpose(1, 2) if input_layout == "transposed" and i else x
        return (x.float() + float(sigmas[i + 1] - sigmas[i]) * velocity(forward, i, x_in).float()).to(torch_dtype)

    _synchronize(device)
    record.value("setup_s", time.perf_counter() - t_setup)
    record.mark("ready", device=str(device), plan=plan, world=world)

    with torch.no_grad(), RecompileCounter() as recompiles:
        x, tap_inputs = _synced_pass(euler_step, start, steps, device, rank)
        _natural_pass(euler_step, start, steps, device)
        for i, x_in in tap_inputs.items():  # eager, after the timed passes
            with torch_taps.tapping(model, torch_wan.tap_modules(model), step=i, gather=placement.gather):
                velocity(model, i, x_in)
    if compile_backend != "none":
        record.value("recompiles", recompiles.count)

    latents = placement.gather(x).float().cpu().numpy()[0]  # every rank takes part in the gather
    out = record.outputs_dir()
    if rank == 0 and out is not None:
        np.save(out / "frames.npy", decode(latents, cfg.grid))
    if plan != "local":
        # Every rank past its last collective before any tears down: a gloo peer that closed its pairs
        # while another still drained one aborted that rank at exit ("terminate called ...", seen on ring).
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
