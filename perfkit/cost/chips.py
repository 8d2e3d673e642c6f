"""Accelerator chips as their vendors publish them: dense bf16 peak, HBM, interconnect (stdlib only).

``interconnect_gbs`` is the vendor's per-chip figure, counted both ways (what Google calls the
bidirectional ICI bandwidth per chip, NVIDIA the NVLink bandwidth per GPU, AMD the sum of its
Infinity Fabric links); a chip sends at most half of it, ``egress_gbs``. Figures are the SXM / OAM
parts where a GPU comes in several.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from perfkit.errors import BadInput


class Chip(NamedTuple):
    name: str
    bf16_tflops: float        # dense (no sparsity) peak bf16 matrix throughput, TFLOP/s
    hbm_gbs: float            # HBM bandwidth, GB/s
    hbm_gb: float             # HBM capacity, GB
    interconnect_gbs: float | None  # chip-to-chip bandwidth per chip, both directions together, GB/s
    links: str                # link layout
    source: str

    @property
    def egress_gbs(self) -> float | None:
        return None if self.interconnect_gbs is None else self.interconnect_gbs / 2

    def as_json(self) -> dict:
        return {**self._asdict(), "egress_gbs": self.egress_gbs}


CHIPS = {c.name: c for c in (
    Chip("v4", 275, 1200, 32, 300, "6 ICI links a chip, 3D torus (4096-chip pods)",
         "cloud.google.com/tpu/docs/v4 (275 TFLOP/s bf16, 32 GiB HBM2 at 1200 GB/s); ICI: Jouppi et al., "
         "'TPU v4', ISCA 2023 (six 50 GB/s links a chip)"),
    Chip("v5e", 197, 819, 16, 400, "4 ICI links a chip, 2D torus (256-chip pods)",
         "cloud.google.com/tpu/docs/v5e (197 TFLOP/s bf16; 16 GB HBM2 at 819 GB/s; bidirectional ICI 400 GB/s a chip)"),
    Chip("v5p", 459, 2765, 95, 1200, "6 ICI links a chip, 3D torus (8960-chip pods)",
         "cloud.google.com/tpu/docs/v5p (459 TFLOP/s bf16; 95 GB HBM2e at 2765 GB/s; bidirectional ICI 1200 GB/s "
         "a chip, where older pages gave one direction, 4800 Gbps)"),
    Chip("v6e", 918, 1640, 32, 800, "4 ICI links a chip, 2D torus (256-chip pods)",
         "cloud.google.com/tpu/docs/v6e (918 TFLOP/s bf16; 32 GB HBM at 1640 GB/s; bidirectional ICI 800 GB/s a "
         "chip)"),
    Chip("h100", 989, 3350, 80, 900, "18 NVLink 4 links a GPU, through NVSwitch",
         "nvidia.com/en-us/data-center/h100 (H100 SXM: 1979 TFLOP/s bf16 with sparsity, 989 dense; 80 GB HBM3 "
         "at 3.35 TB/s; NVLink 900 GB/s)"),
    Chip("h200", 989, 4800, 141, 900, "18 NVLink 4 links a GPU, through NVSwitch",
         "nvidia.com/en-us/data-center/h200 (H200 SXM: 1979 TFLOP/s bf16 with sparsity, 989 dense; 141 GB HBM3e "
         "at 4.8 TB/s; NVLink 900 GB/s)"),
    Chip("b200", 2250, 8000, 180, 1800, "18 NVLink 5 links a GPU, through NVSwitch",
         "nvidia.com/en-us/data-center/hgx (HGX B200, 8 GPUs: 36 PFLOP/s bf16 with sparsity, 1.44 TB HBM3e at "
         "64 TB/s; NVLink 5 1.8 TB/s a GPU): per GPU 2.25 PFLOP/s dense, 180 GB at 8 TB/s"),
    Chip("mi300x", 1307, 5300, 192, 896, "7 Infinity Fabric links to peers (8 GPUs, fully connected)",
         "amd.com/en/products/accelerators/instinct/mi300/mi300x (1307.4 TFLOP/s bf16 dense; 192 GB HBM3 at "
         "5.3 TB/s; Infinity Fabric links of 128 GB/s, 7 to peers)"),
)}

# device_kind strings (jax ``Device.device_kind``, xplane ``device_type_string``, torch device names, Cloud TPU
# accelerator types) -> chip. Each names its part as a whole word: a sibling part with other figures (H100 PCIe and
# NVL, H200 NVL, GH200, GB200, MI300A, TPU v4 lite) or a misspelt one matches none, rather than take this one's.
_KINDS = [(re.compile(p, re.I), name) for p, name in (
    (r"\bv4\b(?!\s*lite)", "v4"), (r"\bv5\s*(lite(pod)?|e)\b", "v5e"), (r"\bv5p\b|\bv5\b(?!\s*(lite|e))", "v5p"),
    (r"\bv6\s*(lite|e)\b|\btrillium\b", "v6e"), (r"\bh100\b(?!\s*(pcie|nvl))", "h100"),
    (r"\bh200\b(?!\s*nvl)", "h200"), (r"\bb200\b", "b200"), (r"\bmi300x\b", "mi300x"))]


def chip(name: str) -> Chip:
    """A chip by its table name (``v5e``, ``h100`` ...) or by a device kind (``TPU v5 lite``); a bare ``v5``,
    which people write for either, is refused (as a device kind, JAX's ``TPU v5`` is v5p)."""
    if name.strip().lower() == "v5":
        raise BadInput(f"{name!r} could be v5e or v5p (JAX's device kind 'TPU v5' is v5p, 'TPU v5 lite' v5e): "
                       "name one", field="--chip")
    found = CHIPS.get(name.lower()) or from_device_kind(name)
    if found is None:
        raise BadInput(f"unknown chip {name!r}; known: {', '.join(CHIPS)}", field="--chip")
    return found


def from_device_kind(kind: str | None) -> Chip | None:
    """The chip a device kind names, or None (``cpu``, an unknown part)."""
    if not kind:
        return None
    return next((CHIPS[name] for pattern, name in _KINDS if pattern.search(kind)), None)


def from_plane_stats(stats: dict) -> Chip | None:
    """A chip from an xplane device plane's stats: the table's entry for its ``device_type_string`` with
    the plane's own peaks (``peak_teraflops_per_second``, ``peak_hbm_bw_gigabytes_per_second``) where given."""
    known = from_device_kind(stats.get("device_type_string"))
    tflops, hbm = stats.get("peak_teraflops_per_second"), stats.get("peak_hbm_bw_gigabytes_per_second")
    if known is None and (tflops is None or hbm is None):
        return None
    if known is None:
        return Chip(str(stats.get("device_type_string") or "xplane"), float(tflops), float(hbm), 0.0, None, "",
                    "the profile's plane stats (no interconnect figure)")
    return known._replace(bf16_tflops=float(tflops or known.bf16_tflops), hbm_gbs=float(hbm or known.hbm_gbs),
                          source=known.source + "; peaks from the profile's plane stats" if tflops or hbm else known.source)
