"""Lower bounds on a step's time from what it costs and what a chip can do (stdlib only).

Per device: compute from the dot and convolution FLOPs at the chip's dense bf16 peak (elementwise work
runs on other units and is left out, so the bound stays a lower one), memory from the HBM bytes at the
HBM bandwidth, interconnect from the bytes the device sends at its egress bandwidth. ``bound_ms`` is
their maximum (everything overlapped), ``serial_ms`` their sum (nothing overlapped), ``binding`` the
largest. A measured step below ``bound_ms`` means a wrong bound (or a wrong chip).
"""

from __future__ import annotations

from perfkit.cost.chips import Chip

RESOURCES = ("compute", "memory", "interconnect")


def roofline(cost: dict, chip: Chip, measured_ms: float | None = None) -> dict:
    """``roofline.<variant>`` of summary.json for one step's ``cost`` (``ProgramCost.as_json`` form)."""
    parts = {"compute": cost["dot_flops"] / (chip.bf16_tflops * 1e12) * 1e3,
             "memory": cost["hbm_bytes"] / (chip.hbm_gbs * 1e9) * 1e3,
             "interconnect": (cost["interconnect_bytes"] / (chip.egress_gbs * 1e9) * 1e3
                              if chip.egress_gbs else 0.0)}
    binding = max(RESOURCES, key=lambda r: parts[r])
    out = {"chip": chip.name, **{f"{r}_ms": parts[r] for r in RESOURCES},
           "bound_ms": parts[binding], "serial_ms": sum(parts.values()), "binding": binding,
           "measured_ms": measured_ms, "measured_over_bound": None}
    if measured_ms is not None and parts[binding] > 0:
        out["measured_over_bound"] = measured_ms / parts[binding]
    return out


def describe(r: dict) -> str:
    """One line: the three bounds, the binding one, and the measured step against it."""
    line = (f"on {r['chip']}: compute {r['compute_ms']:.4g} ms, memory {r['memory_ms']:.4g} ms, interconnect "
            f"{r['interconnect_ms']:.4g} ms; bound {r['bound_ms']:.4g} ms ({r['binding']}), serial "
            f"{r['serial_ms']:.4g} ms (the three one after another)")
    if r.get("measured_over_bound") is not None:
        line += f"; measured {r['measured_ms']:.4g} ms = {r['measured_over_bound']:.2f} x the bound"
    return line
