"""`perfkit.hlo.program_cost` and `perfkit cost`: program cost against XLA's own cost analysis, and against counts
worked out by hand from shapes.

The oracle is ``compiled.cost_analysis()`` / ``compiled.memory_analysis()`` of the bundled model's step on
4 simulated CPU devices. Measured on every bundled family and plan (wan, flux, hunyuan, ltx2 x local, tp,
sp ring, sp xla, ulysses): FLOPs agree to 0.003% or better (ltx2: a few hundred FLOPs of 9e6 apart),
transcendentals exactly, bytes accessed to 0.6% (wan sp ring, -0.57%; most agree to a few bytes). The
tests hold FLOPs to 1e-4 and bytes to 1%.
"""

import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import cost_dumps
import pytest

from perfkit.cost import chips
from perfkit.cost.roofline import roofline
from perfkit.errors import BadInput
from perfkit.hlo.program_cost import program_cost, shape_bytes
from perfkit.hlo.parse import parse_module, read_module
from perfkit.models.plans import make_plan

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
FLOPS_TOLERANCE = 1e-4
BYTES_TOLERANCE = 0.01


@functools.cache  # the by-hand tests read the programs the XLA comparison compiled: one compile each
def compiled_step(family: str, plan: str, **options):
    return cost_dumps.compiled_step(family, make_plan(plan, **options))


@pytest.mark.parametrize("family, plan, options", [
    ("wan", "tp", {}), ("wan", "sp", {"impl": "ring"}), ("wan", "sp", {"impl": "xla"}), ("wan", "ulysses", {}),
    ("flux", "sp", {"impl": "ring"}), ("hunyuan", "sp", {"impl": "ring"}), ("ltx2", "tp", {}),
])
def test_against_xla_cost_analysis(family, plan, options):
    compiled = compiled_step(family, plan, **options)
    xla = compiled.cost_analysis()
    mine = program_cost(parse_module(compiled.as_text()), 4)
    assert mine.dot_flops + mine.other_flops == pytest.approx(xla["flops"], rel=FLOPS_TOLERANCE)
    assert mine.transcendentals == xla["transcendentals"]
    assert mine.hbm_bytes == pytest.approx(xla["bytes accessed"], rel=BYTES_TOLERANCE)
    assert mine.dot_flops > 0.8 * xla["flops"]  # a DiT step is dots, mostly


# Tiny Wan (models/wan.py): dim 64, ffn 256, 4 x 8 x 8 = 256 video rows, 16 text rows, 2 blocks, on 4 devices.
# Activations are float32 on the wire although weights are bfloat16: the adaLN shift / scale come from the
# float32 time embedding, and the modulated rows promote to it. A block has three column-parallel inputs of
# video rows (self-attention q/k/v, cross-attention q, FFN up) and three row-parallel outputs (self-attention
# out, cross-attention out, FFN down); the text's k/v run as under tp, without a collective.
ROWS, DIM, BLOCKS, N = 256, 64, 2, 4
STREAM = ROWS * DIM * 4  # one whole (1, 256, 64) float32 stream: 65536 bytes


def test_tiny_wan_sp_xla_collectives_by_hand():
    cost = program_cost(parse_module(compiled_step("wan", "sp", impl="xla").as_text()), N).by_kind()
    # one all-gather per column-parallel input, one reduce-scatter per row-parallel output, each of the whole
    # stream; a device sends (n-1)/n of it.
    assert cost["all-gather"] == {"count": 3 * BLOCKS, "buffer_bytes": 3 * BLOCKS * STREAM,
                                  "sent_bytes": 3 * BLOCKS * STREAM * 3 / 4}
    assert cost["reduce-scatter"] == {"count": 3 * BLOCKS, "buffer_bytes": 3 * BLOCKS * STREAM,
                                      "sent_bytes": 3 * BLOCKS * STREAM * 3 / 4}
    assert set(cost) == {"all-gather", "reduce-scatter"}


def test_tiny_wan_sp_ring_and_tp_by_hand():
    # The bidirectional ring: each of the 6 collective matmuls a block runs n-1 = 3 hops, each hop one
    # permute a direction of half a shard (32 rows): 2 blocks x 6 x 3 x 2 = 72 permutes of 32 x 64 float32.
    ring = program_cost(parse_module(compiled_step("wan", "sp", impl="ring").as_text()), N)
    half_shard = ROWS // N // 2 * DIM * 4
    assert ring.by_kind() == {"collective-permute": {"count": 72, "buffer_bytes": 72 * half_shard,
                                                     "sent_bytes": 72.0 * half_shard}}
    assert ring.shapes() == {("collective-permute", "f32[1,32,64]", N): 72}
    # tp: an all-reduce of the whole stream after each row-parallel output; a device sends 2(n-1)/n of it.
    tp = program_cost(parse_module(compiled_step("wan", "tp").as_text()), N)
    assert tp.by_kind() == {"all-reduce": {"count": 3 * BLOCKS, "buffer_bytes": 3 * BLOCKS * STREAM,
                                           "sent_bytes": 3 * BLOCKS * STREAM * 2 * 3 / 4}}
    # The ring sends what the all-gathers and reduce-scatters send, and what tp's all-reduces send.
    assert ring.interconnect_bytes == tp.interconnect_bytes == 12 * STREAM * 3 / 4


def test_real_tpu_and_gpu_dumps_by_hand():
    """Dumps of real TPU and GPU programs (async start/done pairs, a while loop, iota replica groups)."""
    tpu = program_cost(read_module(DATA / "tpu_ring.txt"), 4)
    # one (578 x 3072) @ (3072 x 3072) matmul; the all-gather of a (2312, 3072) bf16 buffer over [1,4]<=[4];
    # three hops of a (578, 3072) bf16 permute inside the while loop (known_trip_count 3).
    assert tpu.dot_flops == 2 * 578 * 3072 * 3072
    kinds = tpu.by_kind()
    assert kinds["all-gather"] == {"count": 1, "buffer_bytes": 2312 * 3072 * 2, "sent_bytes": 2312 * 3072 * 2 * 3 / 4}
    assert kinds["collective-permute"] == {"count": 3, "buffer_bytes": 3 * 578 * 3072 * 2,
                                           "sent_bytes": 3.0 * 578 * 3072 * 2}
    gpu = program_cost(read_module(DATA / "gpu_async.txt"), 4).by_kind()
    assert gpu["all-to-all"]["sent_bytes"] == 4 * 1024 * 16 * 128 * 2 * 3 / 4
    assert gpu["reduce-scatter"] == {"count": 1, "buffer_bytes": 4096 * 4, "sent_bytes": 4096 * 4 * 3 / 4}


def test_shape_bytes():
    assert shape_bytes("bf16[578,3072]{1,0:T(8,128)(2,1)}") == 578 * 3072 * 2
    assert shape_bytes("(f32[8]{0}, s8[4], pred[])") == 32 + 4 + 1
    assert shape_bytes("f32[<=16]") == 64


# Dumps written by XLA itself (tests/hlo/cost_dumps.py): buffer assignment and memory report against
# memory_analysis(), the command, and the gate.
def _dump(folder: Path, mode: str) -> None:
    """``mode``'s dumps in ``folder``/dump, XLA's figures of the step in ``folder``/xla.json."""
    (folder / "xla.json").write_text(json.dumps(cost_dumps.write(folder / "dump", mode)))


@pytest.fixture(scope="module")
def wan_sp_dump(built_once):
    folder = built_once("wan_sp_dump", functools.partial(_dump, mode="sp"))
    return folder / "dump", json.loads((folder / "xla.json").read_text())


def test_dump_folder_memory_and_step(wan_sp_dump):
    from perfkit.cost.programs import folder_costs, step_cost

    folder, xla = wan_sp_dump
    step = step_cost(folder_costs(folder))
    assert step.module == "jit__euler_step"
    assert step.temp_bytes == xla["temp"]
    assert step.peak_bytes >= step.temp_bytes
    assert step.dot_flops + step.other_flops == pytest.approx(xla["cost"]["flops"], rel=FLOPS_TOLERANCE)


def perfkit_cost(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit.cli", "cost", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=120, **kw)


def test_cost_command_on_dumps_needs_no_jax(wan_sp_dump):
    folder, xla = wan_sp_dump
    res = perfkit_cost(folder, "--chip", "v5e", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    (label,) = out["cost"]
    r = out["roofline"][label]
    step = out["cost"][label]["step"]
    # v5e by hand: 197 TFLOP/s dense bf16, 819 GB/s HBM, 400 GB/s ICI both ways (200 out).
    assert r["chip"] == "v5e"
    assert r["compute_ms"] == pytest.approx(step["dot_flops"] / 197e12 * 1e3)
    assert r["memory_ms"] == pytest.approx(step["hbm_bytes"] / 819e9 * 1e3)
    assert r["interconnect_ms"] == pytest.approx(72 * 32 * 64 * 4 / 200e9 * 1e3)
    assert r["binding"] == "memory" and r["bound_ms"] == r["memory_ms"]
    assert r["serial_ms"] == pytest.approx(r["compute_ms"] + r["memory_ms"] + r["interconnect_ms"])
    text = perfkit_cost(folder, "--chip", "h100")
    assert text.returncode == 0 and "72 collective-permute" in text.stdout and "on h100" in text.stdout
    # a newcomer found "serial" nowhere defined, and transcendentals read as a part of the FLOPs they are not in
    assert "ms (the three one after another)" in text.stdout and "; beside them, transcendentals " in text.stdout
    probe = subprocess.run([sys.executable, "-c", "import sys; from perfkit.cli.cost import cost\n"
                            f"cost.main([{str(folder)!r}, '--chip', 'v5e'], standalone_mode=False)\n"
                            "assert 'jax' not in sys.modules, 'jax imported'"],
                           capture_output=True, text=True, cwd=REPO, timeout=60)
    assert probe.returncode == 0, probe.stderr[-2000:]


def test_cost_command_refusals(tmp_path):
    res = perfkit_cost(tmp_path / "nowhere")
    assert res.returncode == 2 and "nowhere" in res.stderr and "Traceback" not in res.stderr
    res = perfkit_cost(tmp_path)
    assert res.returncode == 2 and "after_optimizations" in res.stderr
    res = perfkit_cost(tmp_path, "--chip", "tpu9")
    assert res.returncode == 2 and "unknown chip 'tpu9'" in res.stderr


def test_a_bare_v5_is_refused_not_taken_for_v5p():
    """`--chip v5` was v5p, whose memory bound is 3.4x v5e's (the chip a newcomer meant); JAX's own device kind
    `TPU v5` is v5p and stays so."""
    for name in ("v5", "V5 "):
        with pytest.raises(BadInput, match="could be v5e or v5p"):
            chips.chip(name)
    assert chips.chip("TPU v5").name == "v5p" and chips.chip("v5p").name == "v5p" and chips.chip("v5e").name == "v5e"


def test_chips_from_device_kinds():
    assert chips.from_device_kind("TPU v5 lite").name == "v5e"
    assert chips.from_device_kind("TPU v5").name == "v5p"
    assert chips.from_device_kind("TPU v6 lite").name == "v6e"
    assert chips.from_device_kind("TPU v4").name == "v4"
    assert chips.from_device_kind("NVIDIA H100 80GB HBM3").name == "h100"
    assert chips.from_device_kind("AMD Instinct MI300X").name == "mi300x"
    assert chips.from_device_kind("cpu") is None
    # A profile's plane stats override the table's peaks (a v6e plane as xprof reads it).
    v6e = chips.from_plane_stats({"device_type_string": "TPU v6 Lite", "peak_teraflops_per_second": 918.0,
                                  "peak_hbm_bw_gigabytes_per_second": 1640.0})
    assert (v6e.name, v6e.bf16_tflops, v6e.hbm_gbs) == ("v6e", 918.0, 1640.0)
    assert all(c.source and c.links for c in chips.CHIPS.values())


def test_roofline_by_hand():
    cost = {"dot_flops": 197e12, "hbm_bytes": 819e9 / 2, "interconnect_bytes": 200e9 / 4}
    r = roofline(cost, chips.chip("v5e"), measured_ms=1250.0)
    assert (r["compute_ms"], r["memory_ms"], r["interconnect_ms"]) == pytest.approx((1000, 500, 250))
    assert r["bound_ms"] == pytest.approx(1000) and r["binding"] == "compute"
    assert r["serial_ms"] == pytest.approx(1750) and r["measured_over_bound"] == pytest.approx(1.25)


def test_gate_fails_on_a_second_gather_and_passes_on_a_rerun(wan_sp_dump, tmp_path):
    from perfkit.report.cost_check import baseline_cost, cost_rows
    from perfkit.cost.programs import cost_block

    folder, _ = wan_sp_dump
    baseline = {"cost": baseline_cost({"cost": {"sp": cost_block(folder, None)}})}
    cost_dumps.write(tmp_path / "rerun", "sp")
    cost_dumps.write(tmp_path / "twice", "sp-gathers-twice")
    rerun = cost_rows(baseline, {"cost": {"sp": cost_block(tmp_path / "rerun", None)}}, 0.01)
    assert rerun and all(r["passed"] for r in rerun), rerun
    assert {r["subject"] for r in rerun} >= {"sp: collective-permute per step", "sp: temp memory"}
    twice = cost_rows(baseline, {"cost": {"sp": cost_block(tmp_path / "twice", None)}}, 0.01)
    failed = {r["subject"]: r for r in twice if not r["passed"]}
    # one more all-gather of a whole stream per column-parallel input: 3 a block, 2 blocks
    assert failed["sp: all-gather per step"]["current"] == 6 and failed["sp: all-gather per step"]["baseline"] == 0
    assert "sp: bytes sent a device per step" in failed
    assert next(r for r in twice if r["subject"] == "sp: collective-permute per step")["passed"]


@pytest.fixture(scope="module")
def wan_tp_dump(built_once):
    return built_once("wan_tp_dump", functools.partial(_dump, mode="tp")) / "dump"


def test_hlo_diff_ab_says_what_sp_changes(wan_sp_dump, wan_tp_dump):
    folder, _ = wan_sp_dump
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", wan_tp_dump, folder, "--chip",
                          "v5e", "--json"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    change = json.loads(res.stdout)["cost"]["change"]
    # by hand (see above): 72 permutes of a 32 x 64 float32 half shard in, 6 all-reduces of a 256 x 64 stream out
    assert change["collectives_added"] == [{"kind": "collective-permute", "buffer_bytes": 8192, "group": 4, "count": 72}]
    assert change["collectives_removed"] == [{"kind": "all-reduce", "buffer_bytes": 65536, "group": 4, "count": 6}]
    assert change["collectives_regrouped"] == []
    assert change["sentence"].startswith("B adds 72 collective-permutes of 8 KiB a step and removes 6 all-reduces "
                                         "of 64 KiB (against A)")
    assert change["interconnect_bytes"] == [12 * STREAM * 3 / 4] * 2
    # counts of four digits or more are grouped alike on every line (a newcomer read "1392 -> 3954 (+2,562)")
    text = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", wan_tp_dump, folder],
                          capture_output=True, text=True, cwd=REPO, timeout=120).stdout
    module = next(line for line in text.splitlines() if line.lstrip().startswith("module ") and "ENTRY ops" in line)
    assert re.search(r"\d,\d{3}", module) and not re.search(r"(?<![\d,.])\d{4,}(?![\d,.])", module), module


def test_run_chip_from_a_profile_and_the_timed_step(wan_sp_dump, tmp_path):
    """A run whose env.json names no chip: the chip comes from its profile's device plane stats (a
    v6e-shaped XSpace, perfkit.trace.synthetic), and the step timed on it is set beside the bound."""
    import shutil

    from perfkit.cost.programs import run_costs
    from perfkit.trace.synthetic import tpu_profile

    folder, _ = wan_sp_dump
    rank = tmp_path / "trials" / "00-sp" / "rank0"
    shutil.copytree(folder, rank / "xla_dump")
    tpu_profile(rank / "trace" / "step3" / "host.xplane.pb")
    (tmp_path / "env.json").write_text(json.dumps({"devices": {"platform": "tpu", "kind": "unknown"}}))
    cost, roof = run_costs(tmp_path, {"variants": {"sp": {"step_ms": {"median": 0.5}}}})
    r = roof["sp"]
    assert r["chip"] == "v6e"
    assert r["memory_ms"] == pytest.approx(cost["sp"]["step"]["hbm_bytes"] / 1640e9 * 1e3)  # the plane's HBM peak
    assert r["measured_ms"] == 0.5 and r["measured_over_bound"] == pytest.approx(0.5 / r["bound_ms"])
    # the same run with --chip another: no measured step beside a bound of a chip it did not run on
    _, other = run_costs(tmp_path, {"variants": {"sp": {"step_ms": {"median": 0.5}}}}, chips.chip("h100"))
    assert other["sp"]["chip"] == "h100" and other["sp"]["measured_ms"] is None


def test_report_section(wan_sp_dump, wan_tp_dump):
    from perfkit.cost.programs import cost_block
    from perfkit.report.cost import section

    folder, _ = wan_sp_dump
    cost = {"tp": cost_block(wan_tp_dump, None), "sp": cost_block(folder, None)}
    roof = {v: roofline(c["step"], chips.chip("v5e"), measured_ms=1.0) for v, c in cost.items()}
    lines = section({"baseline": "tp", "cost": cost, "roofline": roof})
    assert lines[0] == "## Cost"
    assert "| all-reduce per step | 6 | 0 |" in lines and "| collective-permute per step | 0 | 72 |" in lines
    assert any(x.startswith("| roofline on v5e: memory |") for x in lines)
    assert any(x.startswith("| measured step / bound |") for x in lines)
    assert lines[-2].startswith("sp adds 72 collective-permutes of 8 KiB a step and removes 6 all-reduces of 64 KiB")
    assert section({"baseline": "tp", "cost": {}}) == []


def test_a_dump_is_found_from_a_rank_folder_and_a_trial(wan_sp_dump, tmp_path):
    """``perfkit cost`` / ``hlo-diff --ab`` take a dump folder, a rank folder (its ``xla_dump/``) or a trial
    (its lowest rank with dumps); a folder without any is refused in one line."""
    from perfkit.errors import BadInput
    from perfkit.hlo.dumps import single_dump

    folder, _ = wan_sp_dump
    (tmp_path / "trial" / "rank0").mkdir(parents=True)  # a rank that wrote no dumps
    shutil.copytree(folder, tmp_path / "trial" / "rank1" / "xla_dump")
    assert single_dump(folder) == folder
    assert single_dump(tmp_path / "trial" / "rank1") == tmp_path / "trial" / "rank1" / "xla_dump"
    assert single_dump(tmp_path / "trial") == tmp_path / "trial" / "rank1" / "xla_dump"
    with pytest.raises(BadInput, match="no \\*after_optimizations.txt here"):
        single_dump(tmp_path / "trial" / "rank0")


def test_program_lines_say_why_memory_is_unknown():
    """A program as lowered (``cost --model``) has no buffer assignment: its temp and peak memory are said to be
    unknown, and why (the line read "temp -, peak -"). Bytes from 1 GiB on show in GiB (a Wan step's HBM bytes read
    "1.89e+04 MiB", a newcomer's), said as the bytes a step moves ("HBM 18.45 GiB" beside temp and peak memory read
    as a footprint larger than v5e's 16 GiB, a reviewer's)."""
    from perfkit.cli.cost import program_lines

    step = {"module": "wan step", "flops": 4.22e14, "dot_flops": 4.2e14, "other_flops": 2.34e12,
            "transcendentals": 4.41e11, "hbm_bytes": 1 << 30, "temp_bytes": None, "peak_bytes": None,
            "collectives": {}}
    line = program_lines("wan", step, None)[1]
    assert line.endswith("HBM bytes accessed 1 GiB a step; temp and peak memory unknown (a program as lowered has no buffer assignment; "
                         "XLA's dump after optimizations has)")
    # a dump's optimized program without its buffer assignment beside it (a real ROCm dump's): that file is named
    line = program_lines("conv", {**step, "file": "module_0015.jit_forward_3d_conv.gpu_after_optimizations.txt"},
                         None)[1]
    assert line.endswith("temp and peak memory unknown (no *-buffer-assignment.txt beside the program: XLA writes one "
                         "beside each program it dumps optimized, as text)")


_DOT = """HloModule {name}

ENTRY %main (a: f32[{n},{n}], b: f32[{n},{n}]) -> f32[{n},{n}] {{
  %a = f32[{n},{n}]{{1,0}} parameter(0)
  %b = f32[{n},{n}]{{1,0}} parameter(1)
  ROOT %dot = f32[{n},{n}]{{1,0}} dot(%a, %b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"""


def test_a_step_program_picked_by_its_flops_is_said_to_be_a_guess(tmp_path):
    """A newcomer's command case: its dump held the random-number init (``jit__normal``) beside its ``jit_step``,
    no bundled step program, and the report costed the init as the step without a word. Here the init's dot
    costs 2 x 64**3 FLOPs against the step's 2 x 8**3: the init is picked, and the output says it is a guess."""
    from perfkit.report.cost import section

    for i, (name, n) in enumerate((("jit__normal", 64), ("jit_step", 8))):
        (tmp_path / f"module_{i:04d}.{name}.cpu_after_optimizations.txt").write_text(_DOT.format(name=name, n=n))
    res = perfkit_cost(tmp_path, "--json")
    block = json.loads(res.stdout)["cost"][str(tmp_path)]
    assert (block["step"]["module"], block["step"]["flops"], block["step_from"]) == ("jit__normal", 2 * 64**3,
                                                                                     "most_flops")
    assert "(the step program is a guess, the one with the most FLOPs; --step-module TEXT names" in \
        perfkit_cost(tmp_path).stdout
    named = perfkit_cost(tmp_path, "--step-module", "jit_step")
    assert "step program jit_step" in named.stdout and "a guess" not in named.stdout
    text = "\n".join(section({"baseline": "a", "cost": {"a": block, "b": block}}))
    assert ("The step program of a, b is a guess, the program with the most FLOPs of its dump (no bundled step "
            "program there): `perfkit cost RUN_DIR --step-module NAME` costs the one your steps run.") in text
