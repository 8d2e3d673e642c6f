"""`perfkit.hlo.cost` on the async forms XLA prints in real GPU and TPU dumps, against XLA's own figures.

The modules are openxla/xla's own test text (Apache-2.0), one instruction a line as XLA dumps them:
``xla/service/gpu/model/gpu_hlo_cost_analysis_test.cc`` @ ef634337 (``AsyncAllGather``: a combined all-gather,
which XLA's all-gather combiner writes for FSDP's gathers; its test expects ``BytesTransferred`` of the results,
4096 x 4 + 2048 x 4 bytes). The referee is XLA's ``HloCostAnalysis`` (jaxlib, CPU) of the synchronous op, which
``perfkit cost`` says an async pair is costed as.
"""

import pytest

from perfkit.hlo.cost import program_cost
from perfkit.hlo.parse import parse_module

ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT t = f32[] add(a, b)\n}\n\n"


def xla_cost(text: str) -> dict:
    """XLA's HloCostAnalysis of an HLO text module, on the CPU client (jax only here: the referee)."""
    import jax
    from jax._src.lib import xla_client

    module = xla_client.hlo.hlo_module_from_text(text)
    return xla_client._xla.hlo_module_cost_analysis(jax.devices("cpu")[0].client, module)


def _module(*lines: str, before: str = "") -> str:
    return "\n".join(["HloModule m, num_partitions=4", "", before + "ENTRY entry_computation {",
                      "  p.0 = f32[1024] parameter(0)", "  p.1 = f32[512] parameter(1)", *lines, "}", ""])


# (async pair as XLA prints it, the synchronous op): combined ops return a tuple of results.
VARIADIC = {
    "all-gather": (["  ag-start = ((f32[1024],f32[512]), (f32[4096],f32[2048])) all-gather-start(p.0,p.1), "
                    "dimensions={0}, use_global_device_ids=true, replica_groups={{0,1,2,3}}, channel_id=1",
                    "  ROOT _ = (f32[4096],f32[2048]) all-gather-done(ag-start)"],
                   ["  ROOT _ = (f32[4096],f32[2048]) all-gather(p.0,p.1), dimensions={0}, "
                    "use_global_device_ids=true, replica_groups={{0,1,2,3}}, channel_id=1"]),
    "all-reduce": (["  ar-start = (f32[1024],f32[512]) all-reduce-start(p.0,p.1), replica_groups={{0,1,2,3}}, "
                    "to_apply=add, channel_id=2, use_global_device_ids=true",
                    "  ROOT _ = (f32[1024],f32[512]) all-reduce-done(ar-start)"],
                   ["  ROOT _ = (f32[1024],f32[512]) all-reduce(p.0,p.1), replica_groups={{0,1,2,3}}, "
                    "to_apply=add, channel_id=2, use_global_device_ids=true"]),
}


@pytest.mark.parametrize("kind", sorted(VARIADIC))
def test_combined_async_collectives_cost_all_their_results(kind):
    """A combined all-gather-start's result is its tuple's element 1, both arrays (it was the flattened tuple's
    second array: the second operand, f32[512]: 2048 bytes gathered of 24576); a variadic all-reduce-start's
    shape is all its results (its reducer ran on 512 of 1536 elements)."""
    pair, sync = (_module(*lines, before=ADD) for lines in VARIADIC[kind])
    mine, alone = program_cost(parse_module(pair), 4), program_cost(parse_module(sync), 4)
    xla = xla_cost(sync)
    assert mine.other_flops == alone.other_flops == xla.get("flops", 0)
    assert mine.hbm_bytes == alone.hbm_bytes == xla["bytes accessed"]
    assert mine.by_kind() == alone.by_kind()
    if kind == "all-gather":  # gpu_hlo_cost_analysis_test's expectation, and 3/4 of it sent a device
        assert mine.by_kind()["all-gather"] == {"count": 1, "buffer_bytes": 4096 * 4 + 2048 * 4,
                                                "sent_bytes": (4096 * 4 + 2048 * 4) * 3 / 4}
