"""The HLO text parser on TPU- and GPU-style dumps (written to match real XLA syntax) and on modules
that jax compiles here, and its refusals of files that are not HLO text."""

import gc
import json
import re
from pathlib import Path

import pytest

from perfkit.errors import BadInput
from perfkit.hlo.buffers import read_buffer_assignment, receive_buffers
from perfkit.hlo.fingerprint import flatten
from perfkit.hlo import parse
from perfkit.hlo.dumps import DumpFiles
from perfkit.hlo.load import load_module, summarize
from perfkit.hlo.parse import Instruction, parse_instruction, parse_module, read_module

DATA = Path(__file__).parent / "data"


def inst(module, name):
    return next(i for c in module.computations.values() for i in c.instructions if i.name == name)


def attrs(i):
    return dict(i.attrs)


def test_tpu_module_structure_and_headers():
    m = read_module(DATA / "tpu_ring.txt")
    assert m.name == "jit_ring_step" and m.entry == "main.42_spmd"
    assert list(m.computations) == ["add.clone", "pad_slice_fusion", "fused_matmul", "while_cond", "while_body",
                                    "branch_zero", "branch_one", "main.42_spmd"]
    entry = m.entry_computation.instructions
    assert len(entry) == 21 and entry[-1].root and entry[-1].opcode == "tuple"
    # FileNames / StackFrames sections are not instructions; metadata is dropped from every line.
    assert all("metadata" not in attrs(i) and "source_file" not in i.text
               for c in m.computations.values() for i in c.instructions)


def test_tpu_async_pairs_tiled_layouts_and_memory_spaces():
    m = read_module(DATA / "tpu_ring.txt")
    cs = inst(m, "copy-start")
    assert cs.opcode == "copy-start" and cs.operands == ("param.2",)
    assert cs.shape == ("(bf16[3072,3072]{1,0:T(8,128)(2,1)S(1)}, bf16[3072,3072]{1,0:T(8,128)(2,1)}, "
                        "u32[]{:S(2)})")
    assert attrs(cs) == {"cross_program_prefetch_index": "0"}
    cd = inst(m, "copy-done")
    assert cd.shape == "bf16[3072,3072]{1,0:T(8,128)(2,1)S(1)}" and cd.operands == ("copy-start",)
    cps = inst(m, "collective-permute-start.1")
    assert attrs(cps)["source_target_pairs"] == "{{0,1},{1,2},{2,3},{3,0}}"
    assert json.loads(attrs(cps)["backend_config"])["barrier_config"] == {"barrier_type": "CUSTOM", "id": "0"}
    ag = inst(m, "all-gather-start")
    assert attrs(ag)["replica_groups"] == "[1,4]<=[4]" and attrs(ag)["dimensions"] == "{0}"
    ar = inst(m, "all-reduce-start")
    assert attrs(ar)["replica_groups"] == "{{0,1,2,3}}" and ar.calls == ("add.clone",)


def test_fusions_while_conditional_control_predecessors():
    m = read_module(DATA / "tpu_ring.txt")
    f = inst(m, "pad_slice_fusion")
    assert f.operands == ("param.1", "param.3") and attrs(f)["kind"] == "kLoop"
    assert f.calls == ("pad_slice_fusion",)
    assert json.loads(attrs(f)["backend_config"])["output_chunk_bound_config"] == {"output_chunk_bound": ["1", "3072"]}
    assert attrs(inst(m, "fusion.5"))["control-predecessors"] == "{%all-gather-done}"
    assert inst(m, "while.1").calls == ("while_cond", "while_body")
    assert inst(m, "conditional.1").calls == ("branch_zero", "branch_one")
    ds = inst(m, "dynamic-slice.2")
    assert ds.operands == ("param_0.7", "param_1.3", "constant.21") and attrs(ds) == {"dynamic_slice_sizes": "{576,3072}"}
    assert inst(m, "constant.41").literal == "{...}" and inst(m, "constant.41").operands == ()


def test_quoted_backend_config_and_unknown_syntax_kept_opaque():
    m = read_module(DATA / "tpu_ring.txt")
    cc = attrs(inst(m, "custom-call.3"))
    assert cc["custom_call_target"] == '"tpu_custom_call"'
    config = json.loads(json.loads(cc["backend_config"]))  # a JSON string holding JSON
    assert config["custom_call_config"]["cost_estimate"] == {"flops": 8, "transcendentals": 0}
    opaque = inst(m, "opaque.7")
    assert opaque.opcode == "" and opaque.text == "%opaque.7 = this line is ((not HLO that the parser knows"


def test_canonical_order_puts_callees_before_their_caller():
    m = read_module(DATA / "tpu_ring.txt")
    order = [(f.computation, f.inst.name) for f in flatten(m)]
    names = [n for _, n in order]
    assert names.index("pad.4") < names.index("pad_slice_fusion") < names.index("all-gather-start")
    assert names.index("collective-permute-start.1") < names.index("while.1")
    assert names.index("abs.1") < names.index("conditional.1")
    assert len(order) == sum(len(c.instructions) for c in m.computations.values())  # each once


def test_gpu_async_wrapper_send_recv_and_execution_thread():
    m = read_module(DATA / "gpu_async.txt")
    assert list(m.computations) == ["add.f32", "wrapped_reduce_scatter", "fused_convert", "main.77"]
    rs = inst(m, "reduce-scatter-start")
    assert rs.opcode == "async-start" and rs.shape == "((f32[4096]{0}), f32[1024]{0}, u32[])"
    assert rs.calls == ("wrapped_reduce_scatter",)
    recv = attrs(inst(m, "recv.1"))
    assert recv["frontend_attributes"] == '{_xla_send_recv_source_target_pairs="{{0,1},{1,2},{2,3}}",_xla_send_recv_pipeline="0"}'
    assert recv["control-predecessors"] == "{%reduce-scatter-done}" and recv["channel_id"] == "9"
    assert inst(m, "send.1").operands == ("reduce-scatter-done", "after-all.1")
    assert inst(m, "after-all.1").operands == ()


@pytest.mark.parametrize("name,temp_bytes,receive", [
    ("tpu_ring", 48824320 + 18874368, [("all-gather #1", "1", 3555328), ("collective-permute #1", "1", 29884416),
                                       ("all-reduce #1", "", 17760288)]),
    ("gpu_async", 28688 + 1024, [("all-to-all #1", "", 0), ("reduce-scatter #1", "1", 16400),
                                 ("recv #1", "0", 20500), ("send #1", "0", 24592)]),
])
def test_receive_buffers_from_buffer_assignment(name, temp_bytes, receive):
    """Hand-read from the buffer-assignment snippets: the receive part of each collective's output."""
    m = read_module(DATA / f"{name}.txt")
    ba = read_buffer_assignment(DATA / f"{name}-buffer-assignment.txt")
    assert ba.temp_bytes == temp_bytes
    assert [(b.label, b.index, b.offset) for b in receive_buffers(flatten(m), m.root_opcodes(), ba)] == receive


TILED = "bf16[578,3072]{1,0:T(8,128)(2,1)}"
TUPLE_LINES = [  # (line, the shape read by hand; "" where the brackets do not balance: kept opaque)
    (f"  %cps.1 = ({TILED}, {TILED[:-1]}S(1)}}, u32[]{{:S(2)}}) collective-permute-start(%fusion.1), channel_id=1, "
     'source_target_pairs={{0,1},{1,0}}, metadata={op_name="jit(step)/ppermute" source_line=89}',
     f"({TILED}, {TILED[:-1]}S(1)}}, u32[]{{:S(2)}})"),
    ("  %t = ((f32[2]{0}, s32[]), u32[]{:S(2)}) tuple(%a, %b)", "((f32[2]{0}, s32[]), u32[]{:S(2)})"),  # nested
    ("  %t = (f32[8]{0:T(8,(2))}, s32[]) tuple(%a, %b)", "(f32[8]{0:T(8,(2))}, s32[])"),  # parens two deep
    ("  %t = () tuple()", "()"),
    ("  %t = (f32[8]{0:T(8,(8)}, u32[]) tuple(%a)", ""),  # a ( left open in the layout
    ("  %t = (f32[8{]{0}, u32[]) tuple(%a)", ""),         # a { left open in the dimensions
]


def test_flat_tuple_shapes_read_as_the_bracket_splitter_reads_them(monkeypatch):
    """Flat tuple shapes with tiled layouts take one regex (_SIMPLE); every line parses to the same
    Instruction as through the general path (_LHS, then _head's bracket splitter), and as read by hand."""
    first = parse_instruction(TUPLE_LINES[0][0], 3)
    assert first == Instruction("cps.1", TUPLE_LINES[0][1], "collective-permute-start", ("fusion.1",), "",
                                (("channel_id", "1"), ("source_target_pairs", "{{0,1},{1,0}}")), (), False, 3,
                                TUPLE_LINES[0][0].strip().split(", metadata=")[0])
    for line, shape in TUPLE_LINES:
        i = parse_instruction(line, 1)
        assert i.shape == shape and bool(i.opcode) == bool(shape), line
    lines = [line for line, _ in TUPLE_LINES]
    lines += [line for f in ("tpu_ring.txt", "gpu_async.txt") for line in (DATA / f).read_text().splitlines()
              if line.startswith("  ")]
    fast = [parse_instruction(line, 1) for line in lines]
    monkeypatch.setattr(parse, "_SIMPLE", re.compile(r"(?!)"))  # matches nothing: every line the general way
    assert [parse_instruction(line, 1) for line in lines] == fast


def test_metadata_is_cut_as_the_regex_cuts_it():
    """The usual metadata={...} is cut at its first closing brace without the regex; every line comes out
    as the regex alone makes it (run over the whole line), and as written by hand."""
    head = "%a = f32[] add(%x, %y)"
    cases = {  # line: the line without its metadata, by hand
        f'{head}, metadata={{op_name="a}}b" source_line=3}}, backend_config={{}}': f"{head}, backend_config={{}}",
        f'{head}, metadata={{op_name="a\\"}}" x=1}}': head,  # an escaped quote, then a brace inside quotes
        f"{head}, metadata={{a=1}}, sharding={{}}, metadata={{b=2}}": f"{head}, sharding={{}}",
        f"{head}, metadata={{a={{1}}}}": f"{head}, metadata={{a={{1}}}}",  # nested braces: not metadata's syntax
        f"{head}, metadata=x": f"{head}, metadata=x",
        f"{head} ,  metadata={{a=1}}": f"{head} ",  # the space before the comma stays
    }
    for line, cut in cases.items():
        assert parse._without_metadata(line) == cut, line
    lines = [*cases, *(line for f in ("tpu_ring.txt", "gpu_async.txt") for line in (DATA / f).read_text().splitlines())]
    assert [parse._without_metadata(line) for line in lines] == [parse._METADATA.sub("", line) for line in lines]


def test_a_load_leaves_no_reference_cycles():
    """hlo-diff runs without the cyclic collector (a worker for good): a whole load (parse, fingerprints,
    canonical order, buffers) must be freed by reference counts alone, leaving the collector nothing."""
    files = DumpFiles(0, DATA / "tpu_ring.txt", DATA / "tpu_ring-buffer-assignment.txt", None)
    gc.collect()
    gc.disable()
    try:
        summarize(load_module(0, files))
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_operands_without_sigils():
    text = ("HloModule m\n\nENTRY main {\n  p = f32[4]{0} parameter(0)\n  c = f32[] constant(2)\n"
            "  b = f32[4]{0} broadcast(c), dimensions={}\n  ROOT m.1 = f32[4]{0} multiply(p, b)\n}\n")
    m = parse_module(text)
    assert [i.operands for i in m.entry_computation.instructions] == [(), (), ("c",), ("p", "b")]


def test_every_instruction_of_jax_compiled_modules_parses():
    """Real optimized HLO from jax (scan -> while, cond -> conditional, sort comparator, dynamic slices,
    scatter, reductions): no line is left opaque, and every operand names an instruction."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def f(x, i):
        y, s = jax.lax.scan(lambda c, _: (c * 2 + 1, c.sum()), x, None, length=3)
        z = jax.lax.cond(i > 0, lambda a: a + 1, lambda a: jnp.exp(a), y)
        z = z.at[i].add(1.0)
        return jnp.sort(z, axis=0), s, jax.lax.dynamic_slice(z, (i, 0), (2, 4)), jnp.argmax(z, axis=1)

    def g(a, b):
        return jnp.einsum("bij,bjk->bik", a, b).astype(jnp.bfloat16), jnp.cumsum(a, axis=1)

    texts = [jax.jit(f).lower(jnp.ones((8, 4)), 1).compile().as_text(),
             jax.jit(g).lower(jnp.ones((2, 8, 8)), jnp.ones((2, 8, 16))).compile().as_text()]
    for text in texts:
        m = parse_module(text)
        lines = [ln for ln in text.splitlines() if " = " in ln and ln.startswith("  ")]
        parsed = [i for c in m.computations.values() for i in c.instructions]
        assert len(parsed) == len(lines)
        assert all(i.opcode and i.shape for i in parsed), [i.text for i in parsed if not i.opcode]
        for c in m.computations.values():
            names = {i.name for i in c.instructions}
            assert all(o in names for i in c.instructions for o in i.operands)
            for i in c.instructions:
                assert all(callee in m.computations for callee in i.calls)


@pytest.mark.parametrize("text, reason", [
    ("", "no 'HloModule' line"),
    ("just some text\n", "no 'HloModule' line"),
    ("HloModule m\n\n%f (p: f32[]) -> f32[] {\n  ROOT %p = f32[] parameter(0)\n}\n", "no ENTRY computation"),
    ("HloModule m\n\nENTRY %main (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n  ROOT %n = f32[] neg",
     "line 3: computation main is not closed"),
])
def test_not_hlo_is_refused_naming_file_and_line(text, reason, tmp_path):
    path = tmp_path / "module_0001.bad.cpu_after_optimizations.txt"
    path.write_text(text)
    with pytest.raises(BadInput) as exc:
        read_module(path)
    assert exc.value.path == str(path) and reason in exc.value.reason


# An XLA test's hand-written HLO (openxla/xla dot_batch.hlo, its instructions over several lines), and HLO text
# put together by hand or pasted twice: each had been read into figures that leave part of it out (a hunt's).
_DOT = ("  p0 = f32[2,16,32] parameter(0)\n  p1 = f32[2,32,8] parameter(1)\n  ROOT dot = f32[2,16,8] dot(p0, p1),\n"
        "    lhs_batch_dims={0}, rhs_batch_dims={0},\n    lhs_contracting_dims={2}, rhs_contracting_dims={1}\n}\n")
_ENTRY = "ENTRY %main (p: f32[8]) -> f32[8] {\n  %p = f32[8] parameter(0)\n  ROOT %n = f32[8] negate(%p)\n}\n"


@pytest.mark.parametrize("text, reason", [
    (f"HloModule m\n\nENTRY main {{\n{_DOT}",
     "line 6: an instruction goes on over the next line; perfkit reads HLO as XLA dumps it, an instruction a line"),
    ("HloModule m\n\nENTRY main {\n  p0 = f32[8] parameter(0)\n  ROOT c = f32[8] custom-call(p0), "
     "custom_call_target=\"x\", backend_config={\n    \"k\": 1\n  }\n}\n",
     "line 5: an instruction goes on over the next line"),
    (f"HloModule m\n\n{_ENTRY}\nHloModule m\n\n{_ENTRY}", "line 8: a second HloModule (m after m); a dump file holds "
     "one module"),
    ("HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n  %p = f32[8] parameter(0)\n  ROOT %f = f32[8] "
     "fusion(%p), kind=kLoop, calls=%fused\n}\n", "line 5: f calls fused, a computation this file does not hold"),
    ("HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n  %p = f32[8] parameter(0)\n  %n = f32[8] negate(%p)\n"
     "  ROOT %n = f32[8] abs(%p)\n}\n", "line 6: n is defined twice in main (first at line 5)"),
])
def test_hlo_text_not_as_xla_dumps_it_is_refused(text, reason, tmp_path):
    path = tmp_path / "module_0001.bad.cpu_after_optimizations.txt"
    path.write_text(text)
    with pytest.raises(BadInput) as exc:
        read_module(path)
    assert exc.value.path == str(path) and exc.value.reason.startswith(reason)


def test_binary_and_missing_files_are_refused(tmp_path):
    path = tmp_path / "x_after_optimizations.txt"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(BadInput, match="not a text file"):
        read_module(path)
    with pytest.raises(BadInput, match="no such file"):
        read_module(tmp_path / "absent.txt")


def test_lines_without_an_assignment_are_kept_opaque():
    text = "HloModule m\n\nENTRY %main {\n  %p = f32[] parameter(0)\n  something new here\n  ROOT %n = f32[] negate(%p)\n}\n"
    m = parse_module(text)
    ops = [(i.name, i.opcode, i.text) for i in m.entry_computation.instructions]
    assert ops == [("p", "parameter", "%p = f32[] parameter(0)"), ("", "", "something new here"),
                   ("n", "negate", "ROOT %n = f32[] negate(%p)")]
