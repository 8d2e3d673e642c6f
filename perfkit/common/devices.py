"""Whether a run's figures come from XLA's CPU devices: threads sharing the host's cores, so neither a speed on TPU
or GPU nor a straggling chip. Read by the analysis (what the run did not verify) and the report (why a skew is the
host's scheduling)."""

from __future__ import annotations


def on_cpu_devices(summary: dict) -> bool:
    """Whether the run's devices were probed as CPU, or, a command case probing none, any variant's traces say its
    ops ran on CPU devices (its breakdown's ``cpu_devices``)."""
    devices = (summary.get("env") or {}).get("devices") or {}
    variants = ((summary.get("breakdown") or {}).get("variants") or {}).values()
    return devices.get("platform") == "cpu" or any(v.get("cpu_devices") for v in variants)
