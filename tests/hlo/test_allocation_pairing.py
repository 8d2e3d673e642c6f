"""hlo-diff pairs two ranks' allocations by what they are, not by number: XLA numbers allocations in order, so
one allocation more on a rank renumbers every later one, and a receive buffer in the same allocation under
another number has not moved. The data: the skipped-collective repro's real CPU dumps (ranks 0 and 3), hand-edited."""

import re
import shutil
import subprocess
import sys

from hlo_dumps import REPO

from perfkit.hlo.diff import compare_ranks
from perfkit.hlo.dumps import resolve

DATA = REPO / "tests" / "hlo" / "data" / "skipped_collective"
# one more allocation for rank 3, after its allocation 0: a constant, as XLA CPU allocates one per constant
CONSTANT = "allocation 1: size 4, constant:\n value: <30 constant.5 @0> (size=4,offset=0): f32[]\n"


def edited(tmp_path, extra_on_3: str, *edits: tuple[int, str, str]):
    """The repro's dumps with ``extra_on_3`` inserted as rank 3's allocation 1 (the later ones renumbered), then
    each (rank, old, new) replaced once in that rank's buffer assignment."""
    folder = tmp_path / "dumps"
    shutil.copytree(DATA, folder)
    paths = {r: next((folder / f"rank{r}").glob("*-buffer-assignment.txt")) for r in (0, 3)}
    text = re.sub(r"(?m)^allocation (\d+):", lambda m: f"allocation {int(m.group(1)) + 1}:", paths[3].read_text())
    head, rest = text.split("allocation 2:", 1)
    paths[3].write_text(head.replace("allocation 1:", "allocation 0:") + extra_on_3 + "allocation 2:" + rest)
    for rank, old, new in edits:
        text = paths[rank].read_text()
        assert text.count(old) == 1, old
        paths[rank].write_text(text.replace(old, new))
    return folder


def buffers(folder):
    (d,) = compare_ranks(resolve([folder])[0])["modules"][0]["divergences"]
    return d["buffers"]


def rows(b):
    return [(r["collective"], r["majority"], r["rank"], r["allocation"], r["moved"]) for r in b["receive"]]


def test_an_allocation_more_on_one_rank_moves_no_receive_buffer(tmp_path):
    """Rank 3 has a constant allocation more, so its temp allocation is 4 (rank 0's 3) and its output allocation 2
    (rank 0's 1). By hand: %ppermute.6 / .7 sit where %ppermute.9 / .11 do, offset 0 of the temp and the output
    allocation; none moved. Compared by number, both read as moved (receive_moved 2)."""
    folder = edited(tmp_path, CONSTANT)
    text = next((folder / "rank3").glob("*-buffer-assignment.txt")).read_text()
    assert "allocation 4: size 32768, preallocated-temp:\n value: <19 ppermute.6 @0>" in text
    assert "allocation 2: size 32768, output shape is |f32[64,128]|, maybe-live-out:" in text
    b = buffers(folder)
    assert [r["moved"] for r in b["receive"]] == [False, False, False]
    assert (b["receive_moved"], b["receive_undecided"], b["receive_only_majority"]) == (0, 0, 1)
    assert rows(b) == [
        ("collective-permute #1", 0, 0, {"majority": 3, "rank": 4, "same": True}, False),
        ("collective-permute #2", 0, None, {"majority": 3, "rank": None, "same": None}, False),
        ("collective-permute #3", 0, 0, {"majority": 1, "rank": 2, "same": True}, False)]
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", str(folder)], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    assert "0 of 2 collective receive buffers on both moved; 1 missing on rank 3" in res.stdout
    assert "allocation 1 -> 2" not in res.stdout and "allocation 3 -> 4" not in res.stdout


def test_a_receive_buffer_in_another_allocation_moved_though_numbers_shift(tmp_path):
    """As above, and rank 3's %ppermute.7 (the counterpart of rank 0's %ppermute.11, in the output allocation) placed
    in its temp allocation instead, at offset 32,768 of 65,536: by hand, #3 moved to another allocation, #1 did not."""
    folder = edited(tmp_path, CONSTANT, (3, "allocation 4: size 32768", "allocation 4: size 65536"),
                    (3, " value: <24 ppermute.7 @0> (size=32768,offset=0): f32[64,128]{1,0}\n", ""),
                    (3, " value: <19 ppermute.6 @0>", " value: <24 ppermute.7 @0> (size=32768,offset=32768): "
                                                      "f32[64,128]{1,0}\n value: <19 ppermute.6 @0>"))
    b = buffers(folder)
    assert [r["moved"] for r in b["receive"]] == [False, False, True]
    assert (b["receive_moved"], b["receive_undecided"]) == (1, 0)
    assert [r[3:] for r in rows(b)] == [({"majority": 3, "rank": 4, "same": True}, False),
                                        ({"majority": 3, "rank": None, "same": None}, False),
                                        ({"majority": 1, "rank": 4, "same": False}, True)]


def test_allocations_that_cannot_be_paired_leave_the_move_undecided(tmp_path):
    """Rank 0 with two 32,768 B temp allocations, rank 3 with three, their contents all different (rank 0's
    allocation 3, %ppermute.9's, given a fourth value): which of rank 3's is the counterpart of rank 0's
    allocation 3 the files cannot tell, so #1 is neither moved nor in place. #3 (the output allocation, one a rank)
    did not move."""
    extra = "allocation {}: size 32768, preallocated-temp:\n value: <{} fusion.{} @0> (size=32768,offset=0): {}\n"
    folder = edited(tmp_path, CONSTANT,
                    (0, " value: <24 wrapped_tanh.2 @0> (size=32768,offset=0): f32[64,128]{1,0}\n",
                     " value: <24 wrapped_tanh.2 @0> (size=32768,offset=0): f32[64,128]{1,0}\n"
                     " value: <26 fusion.9 @0> (size=32768,offset=0): f32[64,128]{1,0}\n"
                     + extra.format(4, 40, 1, "f32[8192]{0}")),
                    (3, " value: <23 wrapped_tanh.2 @0> (size=32768,offset=0): f32[64,128]{1,0}\n",
                     " value: <23 wrapped_tanh.2 @0> (size=32768,offset=0): f32[64,128]{1,0}\n"
                     + extra.format(5, 40, 2, "f32[4096,2]{1,0}") + extra.format(6, 41, 3, "s32[8192]{0}")))
    b = buffers(folder)
    assert [r["moved"] for r in b["receive"]] == [None, False, False]
    assert (b["receive_moved"], b["receive_undecided"]) == (0, 1)
    assert [r[3:] for r in rows(b)] == [({"majority": 3, "rank": 4, "same": None}, None),
                                        ({"majority": 3, "rank": None, "same": None}, False),
                                        ({"majority": 1, "rank": 2, "same": True}, False)]
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", str(folder)], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    assert "0 of 2 collective receive buffers on both moved; 1 missing on rank 3" in res.stdout
    assert "1 undecided (in allocations not paired across ranks)" in res.stdout
    assert ("collective-permute #1 receive offset 0 -> 0 in allocation 3 -> 4 (not paired across ranks: moved or "
            "not, undecided), 32,768 B") in res.stdout
