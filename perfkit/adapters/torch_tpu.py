"""Optional adapter for torch_tpu (PyTorch on TPU: one process per chip, custom JAX kernels as torch ops).

Nothing here imports torch or torch_tpu at module level; each function imports what it needs when
called, so perfkit works where torch_tpu is absent (it has no CPU mode: the tests use fakes).

- ``BACKEND``, ``device``: the process group backend and this rank's chip.
- ``profiler_activity``, ``profiler_config``: torch.profiler on TPU. torch_tpu writes the device
  profile as XSpace to ``run_dir/plugins/profile/<ts>/<host>[_<rank>].xplane.pb`` (what
  ``perfkit trace`` reads), beside the host-side Kineto JSON.
- ``xla_env``: XLA dump flags (``XLA_FLAGS``) and TPU flags (``LIBTPU_INIT_ARGS``) for a rank's
  environment; libtpu reads both when the process starts.
- ``KernelRegistry``: registers custom JAX kernels as torch ops under names that carry a hash of their
  source. torch_tpu caches an op by name, so a changed kernel under an old name silently runs stale
  code, and a bench measures the old kernel; registering one name twice with different code is refused.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterable

BACKEND = "tpu_dist"  # torch.distributed backend torch_tpu registers
HASH_CHARS = 12
_OP_NAME = re.compile(r"^[A-Za-z_]\w*::[A-Za-z_]\w*$")


def device(local_rank: int):
    """This process's TPU chip as a torch device (torch_tpu: one process per chip)."""
    # torch and torch_tpu are optional: imported when a TPU is used
    import torch
    import torch_tpu  # noqa: F401  (registers the "tpu" device)

    return torch.device("tpu", local_rank)


def profiler_activity():
    """``torch.profiler.ProfilerActivity.TPU`` (exists once torch_tpu is loaded)."""
    # torch_tpu exists only on TPU VMs: imported when a TPU is used
    import torch_tpu  # noqa: F401
    from torch.profiler import ProfilerActivity

    return ProfilerActivity.TPU


@dataclasses.dataclass(frozen=True)
class ProfileLevels:
    """Tracer verbosity, as torch_tpu's TpuProfilerConfig takes it (its defaults = JAX's)."""

    host_tracer_level: int = 2  # 0 off, 1 user TraceMes, 2 + XLA TraceMes, 3 + low-level XLA
    device_tracer_level: int = 1  # 0 off, 1 TPU device activity
    python_tracer_level: int = 0  # 0 off, 1 Python function calls


def profiler_config(run_dir: str | Path, levels: ProfileLevels = ProfileLevels(), *, tpu_profiler=None):
    """The ``experimental_config=`` for ``torch.profiler.profile`` that writes the XSpace under
    ``run_dir``. ``tpu_profiler`` stands in for ``torch.tpu.profiler`` (tests)."""
    if tpu_profiler is None:
        # torch_tpu exists only on TPU VMs: imported when a TPU is used
        import torch_tpu  # noqa: F401
        from torch.tpu import profiler as tpu_profiler
    return tpu_profiler.TpuProfilerConfig(run_dir=Path(run_dir), **dataclasses.asdict(levels))


def xla_env(env: dict[str, str], dump_dir: str | Path | None = None,
            libtpu_args: Iterable[str] = ()) -> dict[str, str]:
    """``XLA_FLAGS`` and ``LIBTPU_INIT_ARGS`` for a rank: ``env``'s own flags kept (a flag given again
    replaces the old value), text HLO dumps to ``dump_dir`` added, ``libtpu_args`` appended."""

    def merge(current: str, extra: list[str]) -> str:
        names = {f.split("=", 1)[0] for f in extra}
        return " ".join([f for f in current.split() if f.split("=", 1)[0] not in names] + extra)

    dump = [f"--xla_dump_to={dump_dir}", "--xla_dump_hlo_as_text"] if dump_dir is not None else []
    return {"XLA_FLAGS": merge(env.get("XLA_FLAGS", ""), dump),
            "LIBTPU_INIT_ARGS": merge(env.get("LIBTPU_INIT_ARGS", ""), list(libtpu_args))}


def source_hash(objects: Iterable[Any], options: dict | None = None) -> str:
    """A short sha256 over the source text of ``objects`` (functions, classes, modules) and the JSON of
    ``options`` (static settings that change the compiled kernel)."""
    digest = hashlib.sha256()
    for obj in objects:
        while isinstance(obj, functools.partial):  # bound arguments change the kernel too
            digest.update(repr((obj.args, sorted(obj.keywords.items()))).encode())
            obj = obj.func
        try:
            text = inspect.getsource(inspect.unwrap(obj))
        except (OSError, TypeError):
            raise ValueError(f"no source text for {obj!r}: pass the functions or modules it runs") from None
        digest.update(text.encode())
    digest.update(json.dumps(options or {}, sort_keys=True, default=repr).encode())
    return digest.hexdigest()[:HASH_CHARS]


class KernelConflict(ValueError):
    """One op name registered twice with different code in one process."""


@dataclasses.dataclass(frozen=True)
class RegisteredKernel:
    name: str  # the name asked for, "ns::op"
    op_name: str  # the name torch_tpu caches it under, "ns::op_<hash>"
    source_hash: str
    op: Callable


class KernelRegistry:
    """Custom JAX kernels as torch ops, named by their source hash.

    ``jax_op`` stands in for ``torch.tpu.pallas.jax_op(name, fn, **kwargs)`` (tests); by default it is
    looked up when the first kernel is registered."""

    def __init__(self, jax_op: Callable | None = None):
        self._jax_op = jax_op
        self._kernels: dict[str, RegisteredKernel] = {}

    def register(self, name: str, fn: Callable, *, sources: Iterable[Any] = (), options: dict | None = None,
                 **jax_op_kwargs) -> Callable:
        """Register ``fn`` as op ``ns::op_<hash>``, the hash covering ``fn``, the extra ``sources`` it
        calls (kernel bodies, helper modules) and ``options``; returns the torch-callable op. The same
        name with the same code returns the op already registered."""
        if not _OP_NAME.match(name):
            raise ValueError(f"op name {name!r} must be 'namespace::name' (torch_tpu refuses names without one)")
        digest = source_hash([fn, *sources], options)
        known = self._kernels.get(name)
        if known is not None:
            if known.source_hash != digest:
                raise KernelConflict(f"op {name} is already registered with other code (source hash "
                                     f"{known.source_hash}, now {digest}): give the changed kernel a new name")
            return known.op
        if self._jax_op is None:
            # torch_tpu exists only on TPU VMs: imported when a TPU is used
            import torch_tpu  # noqa: F401
            from torch.tpu.pallas import jax_op

            self._jax_op = jax_op
        op_name = f"{name}_{digest}"
        op = self._jax_op(op_name, fn, **jax_op_kwargs)
        self._kernels[name] = RegisteredKernel(name, op_name, digest, op)
        return op

    def registered(self) -> list[RegisteredKernel]:
        return list(self._kernels.values())
