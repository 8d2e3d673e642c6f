"""The chips' interconnect figures as Google's TPU pages state them: 'bidirectional inter-chip interconnect
(ICI) bandwidth (per chip)' 400 GB/s on v5e, 1200 GB/s on v5p, 800 GB/s on v6e. A chip sends half of it. The
older pages' per-chip figures in Gbps (v5e 1600, v5p 4800) are one direction: 200 and 600 GB/s."""

import pytest

from perfkit.cost.chips import chip
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
