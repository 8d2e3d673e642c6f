"""`perfkit hlo-diff --ab A B`: what a change did to the compiled program, counted by hand."""

import json
import subprocess
import sys
from pathlib import Path

from hlo_dumps import REPO

from perfkit.hlo import render
from perfkit.hlo.diff import compare_ab

DATA = Path(__file__).parent / "data"
EXTRA_ALL_GATHER = ("  %all-gather.9 = f32[4096]{0} all-gather(f32[1024]{0} %get-tuple-element.5), channel_id=11, "
                    "replica_groups={{0,1,2,3}}, dimensions={0}\n")


def dump(folder: Path, text: str, name: str = "module_0003.jit_ulysses_attention.sm_9.0_gpu_after_optimizations.txt"):
    folder.mkdir(parents=True)
    (folder / name).write_text(text)
    return folder


def test_added_collective_and_shapes_by_opcode(tmp_path):
    a_text = (DATA / "gpu_async.txt").read_text()
    b_text = a_text.replace("  ROOT %tuple.3", EXTRA_ALL_GATHER + "  ROOT %tuple.3")
    # B's numbering differs too (module counter): matched by name.
    r = compare_ab(dump(tmp_path / "a", a_text), dump(tmp_path / "b", b_text, "module_0009.jit_ulysses_attention."
                                                                            "sm_9.0_gpu_after_optimizations.txt"))
    assert r["only_a"] == [] and r["only_b"] == [] and r["consistent"] is False
    (m,) = r["modules"]
    assert m["name"] == "jit_ulysses_attention" and not m["same_program"]
    assert m["entry_ops"] == [13, 14] and m["collectives"] == [4, 5]
    assert m["opcodes"] == [{"opcode": "all-gather", "a": 0, "b": 1, "delta": 1,
                             "shapes_added": [{"shape": "f32[4096]{0}", "count": 1}], "shapes_removed": []}]
    assert m["collectives_added"] == [{"what": "all-gather f32[4096]{0}, replica_groups={{0,1,2,3}}, dimensions={0}",
                                       "count": 1}]
    assert m["collectives_removed"] == []


def test_demo_variants_a_against_b(real_dumps):
    """Rank 3's program under the Python-constant offset (A) against the runtime-array one (B)."""
    a = real_dumps["constant"] / "rank3"
    b = real_dumps["array"] / "rank3"
    (m,) = compare_ab(a, b)["modules"]
    deltas = {o["opcode"]: o["delta"] for o in m["opcodes"]}
    assert deltas["slice"] == -1 and deltas["pad"] == -1  # B drops the slice and pad ...
    assert deltas["select"] == 1 and deltas["iota"] == 1 and deltas["compare"] == 1  # ... for a runtime mask
    assert m["collectives"] == [1, 1] and m["collectives_added"] == [] == m["collectives_removed"]
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", str(a), str(b)],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert res.returncode == 0 and "slice 1 -> 0 (-1)" in res.stdout
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", "--json", str(a), str(a)],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    out = json.loads(res.stdout)
    assert res.returncode == 0 and out["consistent"] is True and out["modules"][0]["opcodes"] == []


def test_modules_only_on_one_side(tmp_path):
    a = dump(tmp_path / "a", (DATA / "gpu_async.txt").read_text())
    b = dump(tmp_path / "b", (DATA / "tpu_ring.txt").read_text(), "module_0001.jit_ring_step.tpu_after_optimizations.txt")
    r = compare_ab(a, b)
    assert r["modules"] == [] and r["only_a"] == ["jit_ulysses_attention"] and r["only_b"] == ["jit_ring_step"]
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", str(a)], capture_output=True,
                         text=True, cwd=REPO, timeout=60)
    assert res.returncode == 2 and "--ab takes two dump folders" in res.stderr


def tp_step(groups: str, reducer: str = "add") -> str:
    """A tensor-parallel step on 8 devices: a row-parallel matmul's partial sums all-reduced over ``groups``
    (the reducer computation named ``reducer``)."""
    return ("HloModule jit_step, entry_computation_layout={(f32[256,64]{1,0}, f32[64,64]{1,0})->f32[256,64]{1,0}}, "
            f"num_partitions=8\n\n{reducer} {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            "  ROOT c = f32[] add(a, b)\n}\n\n"
            "ENTRY main {\n  x = f32[256,64]{1,0} parameter(0)\n  w = f32[64,64]{1,0} parameter(1)\n"
            "  d = f32[256,64]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
            f"  ROOT ar = f32[256,64]{{1,0}} all-reduce(d), channel_id=1, replica_groups={groups}, "
            f"use_global_device_ids=true, to_apply={reducer}\n}}\n")


def test_tp2_against_tp8_says_the_groups_changed(tmp_path):
    """tp=2 (groups of 2 of 8 devices) against tp=8 (one group of 8): the same all-reduce of a 64 KiB stream,
    so the same kinds and sizes, but over 8 devices a device sends 2 x 7/8 of it, not 2 x 1/2: +75%. The
    sentence says what the table shows (changed replica groups), never "the same collectives"."""
    a = dump(tmp_path / "tp2", tp_step("{{0,1},{2,3},{4,5},{6,7}}"), "module_0001.jit_step.cpu_after_optimizations.txt")
    b = dump(tmp_path / "tp8", tp_step("{{0,1,2,3,4,5,6,7}}"), "module_0001.jit_step.cpu_after_optimizations.txt")
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", "--json", a, b],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    (m,) = out["modules"]
    assert [r["what"] for r in m["collectives_removed"]] == [
        "all-reduce f32[256,64]{1,0}, replica_groups={{0,1},{2,3},{4,5},{6,7}}, to_apply=add"]
    assert [r["what"] for r in m["collectives_added"]] == [
        "all-reduce f32[256,64]{1,0}, replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=add"]
    change = out["cost"]["change"]
    stream = 256 * 64 * 4
    assert change["interconnect_bytes"] == [stream * 2 * 1 / 2, stream * 2 * 7 / 8]
    assert change["collectives_regrouped"] == [{"kind": "all-reduce", "buffer_bytes": stream, "count": 1,
                                                "groups": [2, 8]}]
    assert change["collectives_added"] == [] == change["collectives_removed"]
    assert change["sentence"] == ("B runs 1 all-reduce of 64 KiB over groups of 8 devices, not 2 (against A); "
                                  "FLOPs unchanged; HBM bytes unchanged; bytes sent a device +75.0%")
    text = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", a, b], capture_output=True,
                          text=True, cwd=REPO, timeout=60).stdout
    assert "same collectives" not in text and "over groups of 8 devices, not 2" in text


def test_the_same_collective_with_its_reducer_named_apart_is_the_same(tmp_path):
    """Two programs whose all-reduce differs only in its reducer's name (region_13.14 in one, region_6.7 in the
    other, as XLA numbers them): no collective added or removed in the table, as the sentence says."""
    groups = "{{0,1,2,3,4,5,6,7}}"
    a = dump(tmp_path / "a", tp_step(groups, "region_13.14"), "module_0001.jit_step.cpu_after_optimizations.txt")
    b = dump(tmp_path / "b", tp_step(groups, "region_6.7"), "module_0001.jit_step.cpu_after_optimizations.txt")
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", "--json", a, b],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    out = json.loads(res.stdout)
    (m,) = out["modules"]
    assert m["collectives_added"] == [] == m["collectives_removed"]
    assert out["cost"]["change"]["sentence"].startswith(
        "B runs collectives of the same kinds, sizes and group sizes (against A)")
    (row,) = compare_ab(a, a)["modules"]
    assert m["collectives"] == [1, 1] and row["collectives_added"] == []


def test_groups_of_one_size_over_other_devices_are_not_said_to_be_the_same_collectives(tmp_path):
    """An HLO hunt's: a 2x4 mesh's all-reduce groups against a 4x2's, both of 4 devices, read "B runs the same
    collectives" while the module table listed the changed groups. The sentence says what it compared."""
    name = "module_0001.jit_step.cpu_after_optimizations.txt"
    a = dump(tmp_path / "a", tp_step("{{0,1,2,3},{4,5,6,7}}", "region_0.1"), name)
    b = dump(tmp_path / "b", tp_step("{{0,2,4,6},{1,3,5,7}}", "region_0.1"), name)
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", "--json", a, b],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    out = json.loads(res.stdout)
    (m,) = out["modules"]
    assert m["collectives_added"] and m["collectives_removed"]  # the module table tells the groups apart
    assert "the same collectives" not in out["cost"]["change"]["sentence"]
    assert out["cost"]["change"]["sentence"].startswith(
        "B runs collectives of the same kinds, sizes and group sizes (against A)")


def one_process_run(root: Path, variants: dict[str, str]) -> Path:
    """A run directory as a one-process case leaves it: trials/<NN>-<variant>/rank0/xla_dump/ per variant."""
    for k, (variant, text) in enumerate(variants.items()):
        dump(root / "trials" / f"{k:02d}-{variant}" / "rank0" / "xla_dump", text,
             "module_0001.jit_step.cpu_after_optimizations.txt")
    (root / "trials" / f"{len(variants):02d}-{next(iter(variants))}" / "rank0").mkdir(parents=True)  # no dumps
    return root


def test_a_one_process_run_compares_its_variants(tmp_path):
    """``perfkit hlo-diff RUN_DIR`` on a run whose trials are one process each (the quickstart's): no ranks to
    compare, so the first try compares the variants' programs, says so on stderr, names the --ab command
    and a multi-process case, and exits 0."""
    run = one_process_run(tmp_path / "run", {"tp2": tp_step("{{0,1},{2,3},{4,5},{6,7}}"),
                                             "tp8": tp_step("{{0,1,2,3,4,5,6,7}}")})
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", run], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert res.returncode == 0, res.stderr
    a, b = (run / "trials" / f"{k:02d}-{v}" / "rank0" / "xla_dump" for k, v in enumerate(("tp2", "tp8")))
    assert res.stderr.strip() == (
        f"{run}: each trial is one process, so there are no ranks to compare; comparing variant tp2's programs (A) "
        f"with tp8's (B), as `perfkit hlo-diff --ab {a} {b}` does (ranks: a multi-process case, e.g. "
        "`perfkit run repro/rank_constant`)")
    assert res.stdout == subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", a, b],
                                        capture_output=True, text=True, cwd=REPO, timeout=60).stdout
    assert "over groups of 8 devices, not 2" in res.stdout
    out = json.loads(subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--json", run],
                                    capture_output=True, text=True, cwd=REPO, timeout=60).stdout)
    assert out["mode"] == "ab" and out["a"] == str(a) and out["note"] == res.stderr.strip()


def test_a_one_process_run_of_one_variant_leads_the_reader(tmp_path):
    run = one_process_run(tmp_path / "run", {"tp2": tp_step("{{0,1},{2,3},{4,5},{6,7}}")})
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", run], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "1 variant with dumps" in res.stderr and "perfkit run repro/rank_constant" in res.stderr
    assert "perfkit hlo-diff --ab A_DUMP B_DUMP" in res.stderr


def adds(times: dict[str, int], multiply: str) -> str:
    """A program of ``times[shape]`` adds of a parameter of each shape, and one multiply of shape ``multiply``
    (one of them)."""
    body, roots = [], []
    for k, (shape, n) in enumerate(times.items()):
        body.append(f"  p{k} = {shape} parameter({k})")
        body += [f"  a{k}_{j} = {shape} add(p{k}, p{k})" for j in range(n)]
        roots.append(f"a{k}_0")
    body.append(f"  m = {multiply} multiply(p0, p0)")
    return ("HloModule jit_step\n\nENTRY main {\n" + "\n".join(body) + f"\n  ROOT t = ({', '.join(times)}, "
            f"{multiply}) tuple({', '.join(roots)}, m)\n}}\n")

def test_shapes_left_out_are_counted_so_the_line_adds_up(tmp_path):
    """More than 3 shapes added (or removed) for an opcode: the line says how many are left out and what they
    sum to, so the parts add up to the count; a line whose shapes all fit is as before."""
    a_times = {"f32[11]{0}": 1, "f32[12]{0}": 1, "f32[13]{0}": 1, "f32[14]{0}": 2}  # 5 adds
    b_times = {"f32[1]{0}": 1, "f32[2]{0}": 2, "f32[3]{0}": 3, "f32[4]{0}": 4, "f32[5]{0}": 5}  # 15 adds
    a = dump(tmp_path / "a", adds(a_times, "f32[11]{0}"), "module_0001.jit_step.cpu_after_optimizations.txt")
    b = dump(tmp_path / "b", adds(b_times, "f32[1]{0}"), "module_0001.jit_step.cpu_after_optimizations.txt")
    lines = render.ab_report(compare_ab(a, b)).splitlines()
    # The largest counts shown: +5 f32[5], +4 f32[4], +3 f32[3]; -2 f32[14], then the 1s in order. Left out: +2 f32[2],
    # +1 f32[1], -1 f32[13]: 3 shapes, +2; 5 + 4 + 3 - 2 - 1 - 1 + 2 = +10.
    assert "    add 5 -> 15 (+10): +5 f32[5]{0}, +4 f32[4]{0}, +3 f32[3]{0}, -2 f32[14]{0}, -1 f32[11]{0}, " \
           "-1 f32[12]{0}, ... 3 more shapes (+2)" in lines
    # Parameters: 5 shapes added, 4 removed, one of each: +1 +1 +1 -1 -1 -1, then 3 more (+1 +1 -1).
    assert "    parameter 4 -> 5 (+1): +1 f32[1]{0}, +1 f32[2]{0}, +1 f32[3]{0}, -1 f32[11]{0}, -1 f32[12]{0}, " \
           "-1 f32[13]{0}, ... 3 more shapes (+1)" in lines
    assert "    multiply 1 -> 1 (+0): +1 f32[1]{0}, -1 f32[11]{0}" in lines  # nothing left out: unchanged
    md = render.ab_report(compare_ab(a, b), markdown=True)
    assert "``f32[12]{0}``, ... 3 more shapes (+2)" in md
    assert lines[0].endswith(": 1 module compared, 1 differ")


def test_programs_of_no_module_in_common_name_the_step_programs_costed(fixtures_dir):
    """Two real dumps with no module in common (MI300 GEMMs against TransformerEngine attention): nothing is
    compared, and the step cost line names the program costed on each side (the costliest: the 8192 x 8192 x
    4096 GEMM, 2 x 8192 x 8192 x 4096 FLOPs by hand), for they are not one module; neither runs a collective."""
    a, b = fixtures_dir / "hlo" / "mi300_jax08_gemm", fixtures_dir / "hlo" / "amd_te_fused_attn"
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", str(a), str(b)],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert res.returncode == 0, res.stderr
    head, cost = res.stdout.splitlines()[:2]
    assert head.endswith(": 0 modules compared (no module name in common), 0 differ")
    assert cost.startswith("  step cost, A's step program jit_dot (module_0049) against B's jit_loss_fn "
                           "(module_0017): B runs no collective, nor does A; FLOPs +")
    out = json.loads(subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", "--json", str(a), str(b)],
                                    capture_output=True, text=True, cwd=REPO, timeout=60).stdout)
    assert out["cost"]["a"]["flops"] == 2 * 8192 * 8192 * 4096


def test_a_step_program_picked_by_its_flops_is_said_to_be_a_guess(fixtures_dir):
    """A newcomer's command case: `perfkit cost` said its step program was a guess (the one with the most FLOPs, a
    tapping program here, where the steps ran another) and named --step-module; `hlo-diff --ab` costed the same
    guess and said nothing of it. Neither real dump holds a bundled step program, so both are guesses."""
    a, b = fixtures_dir / "hlo" / "mi300_jax08_gemm", fixtures_dir / "hlo" / "amd_te_fused_attn"
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", "--ab", str(a), str(b)],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert res.returncode == 0, res.stderr
    assert ("    A's and B's step programs are guesses, the program with the most FLOPs of each dump: `perfkit cost "
            "PATH --step-module NAME` costs the one your steps run") in res.stdout.splitlines()
