"""hlo-diff pairs each side's collectives as the alignment does, and compares where they receive as (allocation,
offset): programs written by hand here, and edits of the real dumps."""

import re
import subprocess
import sys

from hlo_dumps import REPO

from perfkit.hlo.consistency import first_difference
from perfkit.hlo.diff import compare_ranks
from perfkit.hlo.dumps import resolve

PERMUTE = """HloModule jit_step, is_scheduled=true

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %cp = f32[8]{0} collective-permute(%x), channel_id=1, source_target_pairs={{0,1},{1,2},{2,0}}
  ROOT %n = f32[8]{0} negate(%cp)
}
"""
# %cp receives at offset 0 of the temp allocation 2; RECEIVE_IN_OUTPUT puts it at offset 0 of the output allocation 1
RECEIVE_IN_TEMP = """BufferAssignment:
allocation 0: size 32, parameter 0, shape |f32[8]| at ShapeIndex {}:
 value: <0 x @0> (size=32,offset=0): f32[8]{0}
allocation 1: size 32, output shape is |f32[8]|, maybe-live-out:
 value: <2 n @0> (size=32,offset=0): f32[8]{0}
allocation 2: size 32, preallocated-temp:
 value: <1 cp @0> (size=32,offset=0): f32[8]{0}
"""
RECEIVE_IN_OUTPUT = RECEIVE_IN_TEMP.replace(" value: <1 cp @0> (size=32,offset=0): f32[8]{0}\n", "").replace(
    "maybe-live-out:\n", "maybe-live-out:\n value: <1 cp @0> (size=32,offset=0): f32[8]{0}\n")
STEM = "module_0001.jit_step.cpu_after_optimizations"


def check(folder) -> dict:
    return compare_ranks(resolve([folder])[0])


def perfkit(*args):
    return subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def write_ranks(root, programs: list[str], assignments: list[str] | None = None) -> None:
    for r, text in enumerate(programs):
        (root / f"rank{r}").mkdir()
        (root / f"rank{r}" / f"{STEM}.txt").write_text(text)
        if assignments:
            (root / f"rank{r}" / f"{STEM}-buffer-assignment.txt").write_text(assignments[r])


def test_a_receive_buffer_in_another_allocation_at_the_same_offset_has_moved(tmp_path):
    """One program; rank 2 receives %cp at offset 0 of the output allocation (1), ranks 0 and 1 at offset 0 of the
    temp allocation (2). By offset alone nothing moved and the ranks read as one group; a peer writing where its own
    program receives writes into another buffer."""
    write_ranks(tmp_path, [PERMUTE] * 3, [RECEIVE_IN_TEMP, RECEIVE_IN_TEMP, RECEIVE_IN_OUTPUT])
    (m,) = check(tmp_path)["modules"]
    assert m["groups"] == [[0, 1], [2]] and not m["consistent"]
    (d,) = m["divergences"]
    assert d["same_program"] is True
    b = d["buffers"]
    assert b["receive_moved"] == 1
    (row,) = b["receive"]
    assert (row["majority"], row["rank"], row["delta"], row["allocation"], row["moved"]) == (
        0, 0, 0, {"majority": 2, "rank": 1, "same": False}, True)
    assert first_difference(check(tmp_path))["receive_moved"] == [row]  # (summary.json's ranks.<v>)
    res = perfkit(tmp_path)
    assert res.returncode == 1
    assert "buffers: temp 32 -> 32 B (+0); 1 of 1 collective receive buffers moved\n" in res.stdout
    assert "collective-permute #1 receive offset 0 -> 0 in allocation 2 -> 1, 32 B" in res.stdout


def test_a_receive_buffer_in_the_same_place_has_not_moved(tmp_path):
    write_ranks(tmp_path, [PERMUTE] * 2, [RECEIVE_IN_OUTPUT] * 2)
    (m,) = check(tmp_path)["modules"]
    assert m["consistent"] and m["groups"] == [[0, 1]]


def test_a_real_receive_buffer_moved_to_the_temp_allocation_has_moved(dumps_copy):
    """The demonstration program's runtime-array dumps (one program on all 4 ranks): rank 3's %ppermute.3, read off
    its buffer assignment at offset 0 of the output allocation 1, moved to offset 0 of the temp allocation 4."""
    folder = dumps_copy("array")
    (path,) = (folder / "rank3").glob("*jit_step*after_optimizations-buffer-assignment.txt")
    text = path.read_text()
    (value,) = re.findall(r"(?m)^ value: <\d+ ppermute\.3 @0> \(size=32768,offset=0\).*\n", text)
    head = "allocation 4: size 32768, preallocated-temp:\n"
    assert head in text and text.index("allocation 1: size 32768, output") < text.index(value) < text.index(head)
    path.write_text(text.replace(value, "").replace(head, head + value))
    (m,) = [m for m in check(folder)["modules"] if m["name"] == "jit_step"]
    assert m["groups"] == [[0, 1, 2], [3]]
    (d,) = m["divergences"]
    assert d["same_program"] is True and d["buffers"]["receive_moved"] == 1
    assert [(r["collective"], r["allocation"], r["delta"]) for r in d["buffers"]["receive"]] == [
        ("collective-permute #1", {"majority": 1, "rank": 4, "same": False}, 0)]


HEAD = """HloModule jit_step, is_scheduled=true

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
"""
RING = "channel_id=1, source_target_pairs={{0,1},{1,2},{2,0}}"
BACK = "channel_id=2, source_target_pairs={{0,2},{1,0},{2,1}}"
# Ranks 0 and 1 permute around the ring, then back; rank 2 only back. The back permute's operand differs (the ring
# permute's output against the parameter), so both permutes of the majority and rank 2's one form a differing block.
TWO_HOPS = (f"  %ring = f32[8]{{0}} collective-permute(%x), {RING}\n"
            f"  ROOT %back = f32[8]{{0}} collective-permute(%ring), {BACK}\n}}\n")
BACK_ONLY = f"  ROOT %back.1 = f32[8]{{0}} collective-permute(%x), {BACK}\n}}\n"


def test_collectives_in_a_differing_block_pair_as_they_align_not_by_position(tmp_path):
    """[ring, back] against [back]: paired by position, rank 2's back read as the majority's ring with its
    source_target_pairs (and channel_id) changed, and the majority's back as missing on rank 2. Aligned, back pairs
    with back (its operand changed: the parameter where the majority permutes the ring's output) and ring is the
    majority's only."""
    write_ranks(tmp_path, [HEAD + TWO_HOPS, HEAD + TWO_HOPS, HEAD + BACK_ONLY])
    (d,) = check(tmp_path)["modules"][0]["divergences"]
    assert [x["text"].split(" =")[0] for x in d["only_majority"]] == ["%ring"] and d["only_rank"] == []
    assert [(c["field"], c["majority"], c["rank"], c["lines"]) for c in d["changed"]] == [
        ("operands", "collective-permute f32[8]{0}", "parameter(0) f32[8]{0}", [6, 5])]
    first = d["first_collective"]
    assert (first["index"], first["count"], first["only_on"]) == (1, {"majority": 2, "rank": 1}, "majority")
    assert first["majority"]["text"].split(" =")[0] == "%ring"


def test_a_collective_changed_in_place_still_pairs_with_its_counterpart(tmp_path):
    """[ring, back] against [ring', back] where ring' permutes the other way: the alignment leaves the two ring
    permutes a differing stretch of their own, paired there (changed), and back with back."""
    other = TWO_HOPS.replace(RING, BACK.replace("channel_id=2", "channel_id=1"))
    write_ranks(tmp_path, [HEAD + TWO_HOPS, HEAD + TWO_HOPS, HEAD + other])
    (d,) = check(tmp_path)["modules"][0]["divergences"]
    assert d["only_majority"] == [] and d["only_rank"] == []
    assert [(c["field"], c["rank"]) for c in d["changed"]] == [("source_target_pairs", "{{0,2},{1,0},{2,1}}")]
    first = d["first_collective"]
    assert (first["index"], first["only_on"]) == (1, None)
    assert [first[side]["text"].split(" =")[0] for side in ("majority", "rank")] == ["%ring", "%ring"]


def test_a_collective_one_rank_lacks_has_no_counterpart_there(tmp_path):
    """Rank 2 skips the first of two equal ring hops (hand-written): its one permute is the counterpart of the
    others' second (line 7, the ROOT), so the others' first (line 5) is missing on rank 2. The line showed rank 2's
    permute at that place (#2 of the others against rank 2's #1, by position) as if it were the missing one's."""
    last = f"  ROOT %hop.2 = f32[8]{{0}} collective-permute(%n), {RING}\n}}\n"
    two = f"  %hop = f32[8]{{0}} collective-permute(%x), {RING}\n  %n = f32[8]{{0}} negate(%hop)\n" + last
    one = "  %n = f32[8]{0} negate(%x)\n" + last
    write_ranks(tmp_path, [HEAD + two, HEAD + two, HEAD + one])
    (d,) = check(tmp_path)["modules"][0]["divergences"]
    first = d["first_collective"]
    assert (first["index"], first["count"], first["only_on"]) == (1, {"majority": 2, "rank": 1}, "majority")
    assert (first["majority"]["text"].split(" =")[0], first["majority"]["line"]) == ("%hop", 5)
    assert first["rank"] is None and first["paths"]["rank"] is None
    res = perfkit(tmp_path)
    assert ("first differing collective: #1 (2 on rank 0, 1 on rank 2, rank 0's not on rank 2):\n"
            "        rank 0: %hop = ") in res.stdout
    assert "        rank 2: missing (no collective there pairs with rank 0's #1)\n" in res.stdout
    assert "ROOT %hop.2" not in res.stdout.split("first differing collective")[1].split("only on")[0]


def test_the_real_skipped_hop_has_no_counterpart_on_the_rank_that_skips_it():
    """The skipped-collective repro's real dumps: rank 3 lacks rank 0's %ppermute.10 (#2); the line showed rank 3's
    ROOT %ppermute.7, the counterpart of rank 0's %ppermute.11 (#3), as its counterpart."""
    folder = REPO / "tests" / "hlo" / "data" / "skipped_collective"
    (d,) = check(folder)["modules"][0]["divergences"]
    first = d["first_collective"]
    assert (first["index"], first["only_on"], first["rank"]) == (2, "majority", None)
    assert first["majority"]["text"].startswith("%ppermute.10 = ")
    res = perfkit(folder)
    assert "        rank 3: missing (no collective there pairs with rank 0's #2)\n" in res.stdout
    assert "%ppermute.7" not in res.stdout
