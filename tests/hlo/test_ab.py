"""`perfkit hlo-diff --ab A B`: what a change did to the compiled program, counted by hand."""

import json
import subprocess
import sys
from pathlib import Path

from hlo_dumps import REPO

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
