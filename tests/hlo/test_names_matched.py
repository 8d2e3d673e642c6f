"""``fingerprint.entry_names_matched`` pairs a collective only with one of A's of the same kind and the same
communication pattern (source_target_pairs, replica_groups): where B's shapes differ (a padding) and its
scheduler ordered the hops apart, a ring's forward hop is never named after A's backward one."""

import gzip
from pathlib import Path

import pytest

from perfkit.hlo.fingerprint import entry_names_matched
from perfkit.hlo.parse import Module, parse_module

FORWARD = "{{0,1},{1,2},{2,3},{3,0}}"
BACKWARD = "{{0,3},{1,0},{2,1},{3,2}}"

_SYNC_A = f"""HloModule jit_ring

ENTRY %main (x: f32[8,16], y: f32[8,16]) -> (f32[8,16], f32[8,16]) {{
  %x = f32[8,16]{{1,0}} parameter(0)
  %y = f32[8,16]{{1,0}} parameter(1)
  %ppermute.1 = f32[8,16]{{1,0}} collective-permute(%x), channel_id=1, source_target_pairs={FORWARD}
  %ppermute.2 = f32[8,16]{{1,0}} collective-permute(%y), channel_id=2, source_target_pairs={BACKWARD}
  ROOT %tuple.3 = (f32[8,16]{{1,0}}, f32[8,16]{{1,0}}) tuple(%ppermute.1, %ppermute.2)
}}
"""
# B: A's ring padded (every shape differs), its scheduler placing the backward hop first
_SYNC_B = f"""HloModule jit_ring

ENTRY %main (x: f32[8,32], y: f32[8,32]) -> (f32[8,32], f32[8,32]) {{
  %x = f32[8,32]{{1,0}} parameter(0)
  %y = f32[8,32]{{1,0}} parameter(1)
  %ppermute.5 = f32[8,32]{{1,0}} collective-permute(%y), channel_id=1, source_target_pairs={BACKWARD}
  %ppermute.6 = f32[8,32]{{1,0}} collective-permute(%x), channel_id=2, source_target_pairs={FORWARD}
  ROOT %tuple.7 = (f32[8,32]{{1,0}}, f32[8,32]{{1,0}}) tuple(%ppermute.6, %ppermute.5)
}}
"""


def _async(shape: str, first: str, second: str, done_first: str) -> str:
    """Two async hops started in the order given, done forward first or backward first."""
    pairs = {"f": FORWARD, "b": BACKWARD}
    lines = [f"  %x = {shape}{{1,0}} parameter(0)"]
    for d in (first, second):
        lines.append(f"  %cp-start.{d} = ({shape}{{1,0}}, {shape}{{1,0}}) collective-permute-start(%x), "
                     f"channel_id=1, source_target_pairs={pairs[d]}")
    for d in (done_first, "b" if done_first == "f" else "f"):
        lines.append(f"  %cp-done.{d} = {shape}{{1,0}} collective-permute-done(%cp-start.{d})")
    lines.append(f"  ROOT %out = ({shape}{{1,0}}, {shape}{{1,0}}) tuple(%cp-done.f, %cp-done.b)")
    return f"HloModule jit_ring\n\nENTRY %main (x: {shape}) -> ({shape}, {shape}) {{\n" + "\n".join(lines) + "\n}\n"


def _renamed(text: str, side: str) -> str:
    """Another program's numbering: every name of ``text`` carries ``side``."""
    return text.replace("%cp-", f"%{side}cp-")


def _pattern(module: Module, name: str) -> str:
    """The source_target_pairs of ``name``, a done's read off its start: from the text, not the matcher."""
    inst = {i.name: i for i in module.entry_computation.instructions}[name]
    if inst.opcode.endswith("-done"):
        inst = {i.name: i for i in module.entry_computation.instructions}[inst.operands[0]]
    return dict(inst.attrs)["source_target_pairs"]


def _assert_partners_talk_alike(a: Module, b: Module) -> int:
    """Every collective of B's that takes a name of A's takes one of A's of its kind and pattern; the count."""
    ops_a = {i.name: i.opcode for i in a.entry_computation.instructions}
    renamed = entry_names_matched(a, b)
    paired = 0
    for inst in b.entry_computation.instructions:
        if not inst.opcode.startswith("collective-permute"):
            continue
        partner = renamed.get(inst.name, inst.name)
        if partner not in ops_a:
            continue
        assert ops_a[partner] == inst.opcode, (inst.name, partner)
        assert _pattern(a, partner) == _pattern(b, inst.name), (inst.name, partner)
        paired += 1
    return paired


def test_a_padded_ring_s_hops_take_the_names_of_a_s_hops_in_their_direction():
    """B ran A's ring at other shapes, the backward hop first: by structure alone its backward ppermute.5 took
    A's forward ppermute.1's name."""
    a, b = parse_module(_SYNC_A), parse_module(_SYNC_B)
    renamed = entry_names_matched(a, b)
    assert renamed["ppermute.5"] == "ppermute.2" and renamed["ppermute.6"] == "ppermute.1"
    assert _assert_partners_talk_alike(a, b) == 2


@pytest.mark.parametrize("shape,started,done", [
    ("f32[8,32]", ("f", "b"), "b"),  # padded, done in the other order: a done tells its direction by its start
    ("f32[8,32]", ("b", "f"), "b"),  # padded, started in the other order
    ("f32[8,16]", ("f", "b"), "b"),  # the same shapes: a done's signature (opcode, shape, its start's) is either's
])
def test_async_hops_take_the_names_of_a_s_hops_in_their_direction(shape, started, done):
    a = parse_module(_renamed(_async("f32[8,16]", "f", "b", "f"), "a"))
    b = parse_module(_renamed(_async(shape, *started, done), "b"))
    renamed = entry_names_matched(a, b)
    names = [f"cp-{kind}.{d}" for kind in ("start", "done") for d in "fb"]
    assert {f"b{n}": renamed.get(f"b{n}") for n in names} == {f"b{n}": f"a{n}" for n in names}
    assert _assert_partners_talk_alike(a, b) == 4


# A user's SP ring plan on 4 CPU devices (jax 0.10.2): the hunyuan-like model's step program unpadded and padded to
# lanes (`perfkit run` of a case with `pad: lanes` on one variant), 42 and 60 ppermutes, half of each forward.
_RING = Path(__file__).parent / "data" / "padded_ring"


def _ring(name: str):
    return parse_module(gzip.decompress((_RING / f"{name}.txt.gz").read_bytes()).decode())


def test_a_user_s_padded_ring_plan_s_hops_keep_their_directions():
    """23 of the 39 ppermutes of B's named after A's took the name of a hop the other way round: B's forward
    ppermute.180 was called A's backward ppermute.159."""
    a, b = _ring("nopad"), _ring("lanes")
    # every one of A's 42 hops (B runs 60) takes a partner of its direction; 3 fed by a bitcast in A and by a hop in
    # B were left out before the pass by kind, and read as removed
    assert sum(i.opcode == "collective-permute" for i in a.entry_computation.instructions) == 42
    assert _assert_partners_talk_alike(a, b) == 42
    renamed = entry_names_matched(a, b)
    assert (_pattern(b, "ppermute.180"), renamed["ppermute.180"]) == (FORWARD, "ppermute.126")


def _wrapped(n: int, order: tuple[str, str]) -> str:
    """An all-gather and a reduce-scatter of f32[n], each run as an ``async-start`` of a wrapped computation, started
    in ``order``."""
    ops = {"ag": f"f32[{4 * n}]{{0}} all-gather(%p), channel_id=1, replica_groups={{{{0,1,2,3}}}}, dimensions={{0}}",
           "rs": f"f32[{n // 4}]{{0}} reduce-scatter(%p), channel_id=2, replica_groups={{{{0,1,2,3}}}}, "
                 "dimensions={0}, to_apply=%add"}
    out = {"ag": f"f32[{4 * n}]{{0}}", "rs": f"f32[{n // 4}]{{0}}"}
    text = ["HloModule jit_wrapped\n", "%add (x: f32[], y: f32[]) -> f32[] {", "  %x = f32[] parameter(0)",
            "  %y = f32[] parameter(1)", "  ROOT %sum = f32[] add(%x, %y)", "}\n"]
    for k in ("ag", "rs"):
        text += [f"%wrapped_{k} (p: f32[{n}]) -> {out[k]} {{", f"  %p = f32[{n}]{{0}} parameter(0)",
                 f"  ROOT %{k} = {ops[k]}", "}\n"]
    text += [f"ENTRY %main (x: f32[{n}]) -> ({out['ag']}, {out['rs']}) {{", f"  %x = f32[{n}]{{0}} parameter(0)"]
    for k in order:
        text.append(f"  %{k}-start.{n} = ((f32[{n}]{{0}}), {out[k]}, u32[]) async-start(%x), calls=%wrapped_{k}")
    for k in order:
        text.append(f"  %{k}-done.{n} = {out[k]} async-done(%{k}-start.{n})")
    text += [f"  ROOT %out = ({out['ag']}, {out['rs']}) tuple(%ag-done.{n}, %rs-done.{n})", "}\n"]
    return "\n".join(text)


def test_a_wrapped_collective_takes_the_name_of_one_of_its_kind():
    """B's all-gather and reduce-scatter, padded and started in the other order: each an ``async-start`` of
    operands of one opcode, told apart only by the op it wraps."""
    a, b = parse_module(_wrapped(1024, ("ag", "rs"))), parse_module(_wrapped(1280, ("rs", "ag")))
    renamed = entry_names_matched(a, b)
    assert {k: renamed[k] for k in ("ag-start.1280", "rs-start.1280", "ag-done.1280", "rs-done.1280")} == {
        "ag-start.1280": "ag-start.1024", "rs-start.1280": "rs-start.1024",
        "ag-done.1280": "ag-done.1024", "rs-done.1280": "rs-done.1024"}


def _sends(n: int, first: str) -> str:
    """Sends of f32[n] to the forward and the backward neighbour (peers as XLA notes them), ``first`` first."""
    peers = {"f": FORWARD, "b": BACKWARD}
    order = (first, "b" if first == "f" else "f")
    lines = [f"  %x = f32[{n}]{{0}} parameter(0)", "  %t = token[] after-all()"]
    lines += [f"  %send.{d}{n} = (f32[{n}]{{0}}, u32[], token[]) send(%x, %t), channel_id=1, "
              f'frontend_attributes={{_xla_send_recv_source_target_pairs="{peers[d]}"}}' for d in order]
    lines += [f"  %send-done.{d}{n} = token[] send-done(%send.{d}{n}), channel_id=1" for d in order]
    lines.append(f"  ROOT %out = (token[], token[]) tuple(%send-done.f{n}, %send-done.b{n})")
    return f"HloModule jit_p2p\n\nENTRY %main (x: f32[{n}]) -> (token[], token[]) {{\n" + "\n".join(lines) + "\n}\n"


def test_sends_take_the_names_of_sends_to_their_peers():
    """A send's peers are in its frontend attributes, a send-done's are its send's."""
    a, b = parse_module(_sends(1024, "f")), parse_module(_sends(1280, "b"))
    renamed = entry_names_matched(a, b)
    assert {k: renamed[k] for k in ("send.f1280", "send.b1280", "send-done.f1280", "send-done.b1280")} == {
        "send.f1280": "send.f1024", "send.b1280": "send.b1024",
        "send-done.f1280": "send-done.f1024", "send-done.b1280": "send-done.b1024"}


_MATMUL_A = """HloModule jit_step

ENTRY %main (p: f32[8,16], w: f32[16,16]) -> f32[8,16] {
  %p = f32[8,16]{1,0} parameter(0)
  %w = f32[16,16]{1,0} parameter(1)
  %dot.1 = f32[8,16]{1,0} dot(%p, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %tanh.2 = f32[8,16]{1,0} tanh(%dot.1)
}
"""
# B: A's rows padded from 8 to 12 before the matmul and cut after it: the matmul's operand is the pad now
_MATMUL_PADDED = """HloModule jit_step

ENTRY %main (p: f32[8,16], w: f32[16,16]) -> f32[8,16] {
  %p = f32[8,16]{1,0} parameter(0)
  %w = f32[16,16]{1,0} parameter(1)
  %c = f32[] constant(0)
  %pad.3 = f32[12,16]{1,0} pad(%p, %c), padding=0_4x0_0
  %dot.1 = f32[12,16]{1,0} dot(%pad.3, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %tanh.2 = f32[12,16]{1,0} tanh(%dot.1)
  ROOT %slice.4 = f32[8,16]{1,0} slice(%tanh.2), slice={[0:8], [0:16]}
}
"""


@pytest.mark.parametrize("numbered", [{}, {"dot.1": "dot.5", "tanh.2": "tanh.6"}])
def test_an_op_whose_input_a_padding_replaced_takes_a_s_name(numbered):
    """A padding planted before a matmul (rows 256 -> 512 a device): B's matmul, reading the pad where A's read the
    parameter, was marked B's own and A's removed, so the op table read one op's change as a 10.6 ms op added and
    an 8.2 ms one removed. An op of A's left unpaired takes B's op of its kind, peers and operand count in its place;
    the pad and the slice, which A has none of, stay B's."""
    b_text = _MATMUL_PADDED
    for old, new in numbered.items():
        b_text = b_text.replace(f"%{old}", f"%{new}")
    renamed = entry_names_matched(parse_module(_MATMUL_A), parse_module(b_text))
    assert renamed == {new: old for old, new in numbered.items()}
