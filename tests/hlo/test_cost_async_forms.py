"""`perfkit.hlo.program_cost` on the async forms XLA prints in real GPU and TPU dumps, against XLA's own figures.

The modules are openxla/xla's own test text (Apache-2.0), one instruction a line as XLA dumps them:
``xla/service/gpu/model/gpu_hlo_cost_analysis_test.cc`` @ ef634337 (``AsyncAllGather``: a combined all-gather,
which XLA's all-gather combiner writes for FSDP's gathers; its test expects ``BytesTransferred`` of the results,
4096 x 4 + 2048 x 4 bytes). The referee is XLA's ``HloCostAnalysis`` (jaxlib, CPU) of the synchronous op, which
``perfkit cost`` says an async pair is costed as.
"""

import pytest

from perfkit.hlo.program_cost import program_cost
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


# XLA prints an async-start wrapping one op X as X-start / X-update / X-done, X's operands and attributes on the
# start. As openxla/xla's tests print them: xla/backends/gpu/transforms/dynamic_slice_copy_fusion_async_wrapper_test.cc
# @ d5717bd4 (an async dynamic-update-slice fusion), xla/service/latency_hiding_scheduler_test.cc (an async loop
# fusion), xla/hlo/ir/hlo_instruction_test.cc @ 24911902 (StringifyAsyncOps: an async custom-call).
WRAPPED = {  # (computations, parameters, the async ops ending in ROOT d, the synchronous op as ROOT d)
    "fusion-dus": ("dus {\n  p0 = s32[4]{0} parameter(0)\n  p1 = s32[1]{0} parameter(1)\n  c1 = s32[] constant(1)\n"
                   "  ROOT update = s32[4]{0} dynamic-update-slice(p0, p1, c1)\n}\n\n",
                   ["p0 = s32[4]{0} parameter(0)", "p1 = s32[1]{0} parameter(1)"],
                   ["s = ((s32[4]{0}, s32[1]{0}), s32[4]{0}, u32[]) fusion-start(p0, p1), kind=kLoop, calls=dus",
                    "ROOT d = s32[4]{0} fusion-done(s)"],
                   "ROOT d = s32[4]{0} fusion(p0, p1), kind=kLoop, calls=dus"),
    "fusion-add": ("op1 {\n  p0 = f32[2,2]{1,0} parameter(0)\n  ROOT add = f32[2,2]{1,0} add(p0, p0)\n}\n\n",
                   ["p0 = f32[2,2]{1,0} parameter(0)"],
                   ["s = ((f32[2,2]{1,0}), f32[2,2]{1,0}, s32[]) fusion-start(p0), kind=kLoop, calls=op1",
                    "ROOT d = f32[2,2]{1,0} fusion-done(s)"],
                   "ROOT d = f32[2,2]{1,0} fusion(p0), kind=kLoop, calls=op1"),
    "custom-call": ("", ["p0 = f32[10]{0} parameter(0)"],
                    ['s = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-start(p0), '
                     'async_execution_thread="parallel_thread", custom_call_target="foo"',
                     "u = ((f32[10]{0}), f32[20]{0}, s32[]) custom-call-update(s)",
                     "ROOT d = f32[20]{0} custom-call-done(u)"],
                    'ROOT d = f32[20]{0} custom-call(p0), custom_call_target="foo"'),
    # the general form: an async-start whose wrapped computation holds the custom-call
    "async-custom-call": ('wrapped {\n  p0 = f32[10]{0} parameter(0)\n  ROOT cc = f32[20]{0} custom-call(p0), '
                          'custom_call_target="foo"\n}\n\n', ["p0 = f32[10]{0} parameter(0)"],
                          ["s = ((f32[10]{0}), f32[20]{0}, s32[]) async-start(p0), "
                           'async_execution_thread="parallel_thread", calls=wrapped',
                           "ROOT d = f32[20]{0} async-done(s)"],
                          'ROOT d = f32[20]{0} custom-call(p0), custom_call_target="foo"'),
}


def _wrapped(computations: str, params: list[str], ops: list[str]) -> str:
    return "\n".join(["HloModule m", "", computations + "ENTRY e {", *("  " + line for line in params + ops), "}", ""])


@pytest.mark.parametrize("kind", sorted(WRAPPED))
def test_async_wrapped_ops_cost_the_op_they_wrap(kind):
    """A ``fusion-start`` costs its fusion (its FLOPs were 0, its bytes the flattened tuple's second array), a
    ``custom-call-start`` of an unknown target, or an ``async-start`` wrapping one, is listed as not costed (it was
    0 FLOPs, unsaid), and an
    ``X-update`` touches no memory (it was counted as reading and writing the whole start tuple)."""
    computations, params, ops, sync = WRAPPED[kind]
    pair, alone = _wrapped(computations, params, ops), _wrapped(computations, params, [sync])
    mine, theirs = program_cost(parse_module(pair)), program_cost(parse_module(alone))
    assert (mine.dot_flops, mine.other_flops, mine.hbm_bytes, mine.uncosted) == \
           (theirs.dot_flops, theirs.other_flops, theirs.hbm_bytes, theirs.uncosted)
    assert mine.async_pairs == 1
    xla = xla_cost(alone)
    if kind.endswith("custom-call"):  # XLA knows no cost of it either: -1, its mark for unknown
        assert xla["flops"] == -1 and dict(mine.uncosted) == {"foo": 1}
    else:
        assert mine.other_flops == xla.get("flops", 0) and mine.hbm_bytes == xla["bytes accessed"]
