"""The chips' interconnect figures as Google's TPU pages state them: 'bidirectional inter-chip interconnect
(ICI) bandwidth (per chip)' 400 GB/s on v5e, 1200 GB/s on v5p, 800 GB/s on v6e. A chip sends half of it. The
older pages' per-chip figures in Gbps (v5e 1600, v5p 4800) are one direction: 200 and 600 GB/s."""

import pytest

from perfkit.cost.chips import chip, from_device_kind
from perfkit.errors import BadInput
from perfkit.cost.roofline import roofline

COST = {"dot_flops": 0.0, "hbm_bytes": 0.0, "interconnect_bytes": 1.2e9}  # 1.2 GB sent by each device


@pytest.mark.parametrize("name, egress_gbs, interconnect_ms", [
    ("v5e", 200, 6.0),   # 1.2e9 B / 200e9 B/s = 6 ms
    ("v5p", 600, 2.0),   # 1.2e9 / 600e9
    ("v6e", 400, 3.0),   # 1.2e9 / 400e9
])
def test_tpu_interconnect_bounds_send_at_half_the_bidirectional_figure(name, egress_gbs, interconnect_ms):
    assert chip(name).egress_gbs == egress_gbs
    r = roofline(COST, chip(name))
    assert r["interconnect_ms"] == pytest.approx(interconnect_ms) and r["binding"] == "interconnect"


# Parts whose names hold a table chip's name but whose figures are their own (vendors' pages: H100 PCIe 2.0 TB/s and
# 756 TFLOP/s dense bf16 against the SXM's 3.35 TB/s and 989; MI300A 981 TFLOP/s against the MI300X's 1307; TPU v4
# lite, v4i, 138 TFLOP/s and 614 GB/s), and misspellings: each took the table chip's figures without a word.
@pytest.mark.parametrize("kind", ["NVIDIA H100 PCIe", "NVIDIA H100 NVL", "h100x", "h1000", "NVIDIA H200 NVL",
                                  "NVIDIA GH200 480GB", "NVIDIA GB200", "AMD Instinct MI300A", "mi300", "TPU v4 lite"])
def test_a_sibling_or_misspelt_part_is_no_table_chip(kind):
    assert from_device_kind(kind) is None
    with pytest.raises(BadInput, match=rf"^--chip: unknown chip '{kind}'; known: v4, v5e"):
        chip(kind)


@pytest.mark.parametrize("kind, name", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("H100 SXM5", "h100"), ("NVIDIA H200", "h200"), ("NVIDIA B200", "b200"),
    ("AMD Instinct MI300X", "mi300x"), ("TPU v4", "v4"), ("TPU v5 lite", "v5e"), ("v5litepod-16", "v5e"),
    ("TPU v5", "v5p"), ("v5p-8", "v5p"), ("TPU v6 lite", "v6e"), ("trillium", "v6e")])
def test_device_kinds_name_their_chip(kind, name):
    assert from_device_kind(kind).name == name
