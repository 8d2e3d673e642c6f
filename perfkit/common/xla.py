"""The ``XLA_FLAGS`` of a process that runs N host-platform devices: what a run's ranks, ``perfkit env
--devices`` and ``python -m perfkit.kernels.bench --devices`` start JAX with, spelled alike."""

from __future__ import annotations

from pathlib import Path


def xla_flags(base: str, devices: int, dump_dir: Path | None) -> str:
    """``base`` (the inherited flags) with its device count and dump folder replaced: ``devices`` host
    devices, and HLO text dumped to ``dump_dir`` where given."""
    flags = [f for f in base.split() if not f.startswith(("--xla_force_host_platform_device_count",
                                                          "--xla_dump_to"))]
    flags.append(f"--xla_force_host_platform_device_count={devices}")
    if dump_dir is not None:
        flags += [f"--xla_dump_to={dump_dir}", "--xla_dump_hlo_as_text"]
    return " ".join(dict.fromkeys(flags))
