"""`perfkit.hlo.program_cost` on collectives XLA's GPU compiler puts inside a fusion, counted by hand.

The modules are written as XLA prints them after optimization, from openxla/xla's own tests (Apache-2.0): its GPU
compiler's ``DynamicSliceFusionWithCollectiveShouldWrapInAsyncAndTestE2E`` and
``DynamicSliceFusionReduceScatterMultipleBuffers`` (with ``--xla_gpu_enable_dynamic_slice_fusion`` a reduce-scatter
of a slice runs inside a ``dynamic-slice-fusion``, called by a ``fusion-start`` or a ``fusion``), and the Triton
dialect's ``HloAllReduceIsLoweredToStableHloAllReduce`` (an ``all-reduce-start`` inside a ``__triton_collective``
fusion, as its collective emitter writes it). They had read as no collectives at all.
"""

import pytest

from perfkit.hlo.parse import parse_module
from perfkit.hlo.program_cost import program_cost

ADD = "%add (x: s32[], y: s32[]) -> s32[] {\n  %x = s32[] parameter(0)\n  %y = s32[] parameter(1)\n" \
      "  ROOT %add = s32[] add(s32[] %x, s32[] %y)\n}\n\n"

DYNAMIC_SLICE_FUSION = "\n".join([
    "%dynamic-slice-fusion (p0: s32[8,32], p1: s32[2,2,32], p2: s32[], p3: s32[]) -> s32[2,2,32] {",
    "  %p0 = s32[8,32]{1,0} parameter(0)",
    "  %slice = s32[4,32]{1,0} slice(s32[8,32]{1,0} %p0), slice={[4:8], [0:32]}",
    "  %rs = s32[2,32]{1,0} reduce-scatter(s32[4,32]{1,0} %slice), replica_groups={{0,1}}, dimensions={0}, "
    "to_apply=%add",
    "  %p1 = s32[2,2,32]{2,1,0} parameter(1)",
    "  %bitcast = s32[1,2,32]{2,1,0} bitcast(s32[2,32]{1,0} %rs)",
    "  %p2 = s32[] parameter(2)",
    "  %p3 = s32[] parameter(3)",
    "  ROOT %dus = s32[2,2,32]{2,1,0} dynamic-update-slice(s32[2,2,32]{2,1,0} %p1, s32[1,2,32]{2,1,0} %bitcast, "
    "s32[] %p2, s32[] %p3, s32[] %p3)",
    "}", "", ""])
CONFIG = ('backend_config={"operation_queue_id":"0","wait_on_operation_queues":[],"fusion_backend_config":{"kind":'
          '"__custom_fusion","custom_fusion_config":{"name":"dynamic_address_computation"}},'
          '"force_earliest_schedule":false}')
START = "((s32[8,32]{1,0}, s32[2,2,32]{2,1,0}, s32[], s32[]), s32[2,2,32]{2,1,0}, s32[])"
ASYNC_ENTRY = "\n".join([
    "ENTRY %main (destination: s32[2,2,32], source: s32[8,32]) -> s32[2,2,32] {",
    "  %source = s32[8,32]{1,0} parameter(1)",
    "  %destination = s32[2,2,32]{2,1,0} parameter(0)",
    "  %c1 = s32[] constant(1)",
    "  %c0 = s32[] constant(0)",
    f"  %fusion-start = {START} fusion-start(s32[8,32]{{1,0}} %source, s32[2,2,32]{{2,1,0}} %destination, "
    f"s32[] %c1, s32[] %c0), kind=kCustom, calls=%dynamic-slice-fusion, {CONFIG}",
    f"  ROOT %fusion-done = s32[2,2,32]{{2,1,0}} fusion-done({START} %fusion-start), {CONFIG}",
    "}", ""])

TWO_BUFFERS = "\n".join([
    "%dynamic-slice-fusion (p0: s32[8,32]) -> (s32[2,32], s32[2,32]) {",
    "  %p0 = s32[8,32]{1,0} parameter(0)",
    "  %slice = s32[4,32]{1,0} slice(s32[8,32]{1,0} %p0), slice={[4:8], [0:32]}",
    "  %slice2 = s32[4,32]{1,0} slice(s32[8,32]{1,0} %p0), slice={[0:4], [0:32]}",
    "  ROOT %rs = (s32[2,32]{1,0}, s32[2,32]{1,0}) reduce-scatter(s32[4,32]{1,0} %slice, s32[4,32]{1,0} %slice2), "
    "replica_groups={{0,1}}, dimensions={0}, to_apply=%add",
    "}", "",
    "ENTRY %main (p1: s32[8,32]) -> (s32[2,32], s32[2,32]) {",
    "  %p1 = s32[8,32]{1,0} parameter(0)",
    "  ROOT %fusion = (s32[2,32]{1,0}, s32[2,32]{1,0}) fusion(s32[8,32]{1,0} %p1), kind=kCustom, "
    f"calls=%dynamic-slice-fusion, {CONFIG}",
    "}", ""])

TRITON_ALL_REDUCE = "\n".join([
    "%apply_op (x: f32[], y: f32[]) -> f32[] {",
    "  %x = f32[] parameter(0)",
    "  %y = f32[] parameter(1)",
    "  ROOT %apply_op = f32[] add(f32[] %x, f32[] %y)",
    "}", "",
    "%wrapped_all-reduce-start (param: f32[65536]) -> f32[65536] {",
    "  %param = f32[65536]{0} parameter(0)",
    "  ROOT %all-reduce-start = f32[65536]{0} all-reduce-start(f32[65536]{0} %param), replica_groups={{0,1}}, "
    "to_apply=%apply_op",
    "}", "",
    "ENTRY %entry (param: f32[65536]) -> f32[65536] {",
    "  %param = f32[65536]{0} parameter(0)",
    "  ROOT %fusion = f32[65536]{0} fusion(f32[65536]{0} %param), kind=kLoop, calls=%wrapped_all-reduce-start, "
    'backend_config={"fusion_backend_config":{"kind":"__triton_collective"}}',
    "}", ""])

HEADER = "HloModule test, is_scheduled=true, replica_count=2\n\n"
# (module, its collectives by hand: 2 devices in the group; a reduce-scatter sends (n-1)/n of what it scatters, an
# all-reduce 2(n-1)/n of its buffer)
MODULES = {
    "fusion-start of a reduce-scatter": (HEADER + ADD + DYNAMIC_SLICE_FUSION + ASYNC_ENTRY,
                                         {"reduce-scatter": {"count": 1, "buffer_bytes": 4 * 32 * 4,
                                                             "sent_bytes": 4 * 32 * 4 / 2}}),
    "fusion of a two-buffer reduce-scatter": (HEADER + ADD + TWO_BUFFERS,
                                              {"reduce-scatter": {"count": 1, "buffer_bytes": 2 * 4 * 32 * 4,
                                                                  "sent_bytes": 2 * 4 * 32 * 4 / 2}}),
    "triton collective fusion": (HEADER + TRITON_ALL_REDUCE,
                                 {"all-reduce": {"count": 1, "buffer_bytes": 65536 * 4,
                                                 "sent_bytes": 2 * 65536 * 4 / 2}}),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_collective_inside_a_fusion_is_counted(name):
    text, by_hand = MODULES[name]
    cost = program_cost(parse_module(text), 2)
    assert cost.by_kind() == by_hand
    assert cost.interconnect_bytes == sum(k["sent_bytes"] for k in by_hand.values())
