"""Ranks running one program whose buffer assignments differ only in how allocations are numbered are one group:
XLA numbers allocations in order, so one allocation more on a rank (a constant) renumbers every later one, and its
collectives still receive in the same places. A receive buffer that really moved still splits the ranks. The data:
the skipped-collective repro's real CPU dump of rank 0 (tests/hlo/data/skipped_collective), copied as rank 1 and
hand-edited there."""

import re
import shutil
import subprocess
import sys

from hlo_dumps import REPO

from perfkit.hlo.diff import compare_ranks
from perfkit.hlo.dumps import resolve

RANK0 = REPO / "tests" / "hlo" / "data" / "skipped_collective" / "rank0"
CONSTANT = "allocation 1: size 4, constant:\n value: <30 constant.5 @0> (size=4,offset=0): f32[]\n"


def renumbered(tmp_path, *edits: tuple[str, str]):
    """Rank 0's dump as ranks 0 and 1, rank 1's buffer assignment with a constant allocation inserted as its
    allocation 1 (every later one renumbered), then each (old, new) replaced once there."""
    folder = tmp_path / "dumps"
    for r in (0, 1):
        shutil.copytree(RANK0, folder / f"rank{r}")
    (path,) = (folder / "rank1").glob("*-buffer-assignment.txt")
    text = re.sub(r"(?m)^allocation (\d+):", lambda m: f"allocation {int(m.group(1)) + 1}:", path.read_text())
    head, rest = text.split("allocation 2:", 1)
    text = head.replace("allocation 1:", "allocation 0:") + CONSTANT + "allocation 2:" + rest
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text)
    return folder


def allocation_of(folder, rank: int, name: str) -> int:
    """The number of the allocation holding ``name``'s value, read off the file by a regex of its own."""
    (path,) = (folder / f"rank{rank}").glob("*-buffer-assignment.txt")
    number = None
    for line in path.read_text().splitlines():
        head = re.match(r"allocation (\d+):", line)
        number = int(head.group(1)) if head else number
        if re.match(rf" value: <\d+ {re.escape(name)} @0>", line):
            return number
    raise AssertionError(name)


def hlo_diff(folder):
    return subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", str(folder)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def test_ranks_whose_allocations_are_only_renumbered_are_one_group(tmp_path):
    """By hand: on rank 1 the three collective-permutes (%ppermute.9, .10, .11) sit at offset 0 of allocations 4, 4
    and 2, on rank 0 at offset 0 of allocations 3, 3 and 1: the same temp and output allocations, numbered one more
    past the inserted constant. Grouped by number, rank 1 read as another program whose divergence said '0 of 3
    collective receive buffers moved'."""
    folder = renumbered(tmp_path)
    assert [allocation_of(folder, 0, f"ppermute.{k}") for k in (9, 10, 11)] == [3, 3, 1]
    assert [allocation_of(folder, 1, f"ppermute.{k}") for k in (9, 10, 11)] == [4, 4, 2]
    r = compare_ranks(resolve([folder])[0])
    (m,) = r["modules"]
    assert (r["consistent"], r["groups"], m["groups"], m["divergences"]) == (True, [[0, 1]], [[0, 1]], [])
    assert m["buffers_compared"] is True and m["renumbered_ranks"] == [1]
    res = hlo_diff(folder)
    assert res.returncode == 0, res.stderr
    assert "2 ranks, 1 module: consistent" in res.stdout
    assert "allocations numbered apart on rank 1 (buffer assignment), the same receive places" in res.stdout


def test_ranks_numbered_alike_note_no_renumbering(tmp_path):
    folder = tmp_path / "dumps"
    for r in (0, 1):
        shutil.copytree(RANK0, folder / f"rank{r}")
    (m,) = compare_ranks(resolve([folder])[0])["modules"]
    assert (m["groups"], m["renumbered_ranks"]) == ([[0, 1]], [])
    assert "numbered apart" not in hlo_diff(folder).stdout


def test_a_receive_buffer_moved_to_another_allocation_still_splits_renumbered_ranks(tmp_path):
    """As above, and rank 1's %ppermute.11 placed in its temp allocation (grown to 65,536 B) at offset 32,768, not
    in its output allocation: by hand, collective-permute #3 moved, so rank 1 is another group."""
    folder = renumbered(tmp_path, ("allocation 4: size 32768", "allocation 4: size 65536"),
                        (" value: <25 ppermute.11 @0> (size=32768,offset=0): f32[64,128]{1,0}\n", ""),
                        (" value: <19 ppermute.9 @0>", " value: <25 ppermute.11 @0> (size=32768,offset=32768): "
                                                       "f32[64,128]{1,0}\n value: <19 ppermute.9 @0>"))
    assert allocation_of(folder, 1, "ppermute.11") == 4
    r = compare_ranks(resolve([folder])[0])
    (m,) = r["modules"]
    assert (r["consistent"], m["groups"], m["renumbered_ranks"]) == (False, [[0], [1]], [])
    (d,) = m["divergences"]
    assert d["same_program"] is True and d["buffers"]["receive_moved"] == 1
    assert [(x["collective"], x["moved"]) for x in d["buffers"]["receive"]] == [
        ("collective-permute #1", False), ("collective-permute #2", False), ("collective-permute #3", True)]


def test_a_receive_offset_moved_in_the_same_allocation_still_splits(tmp_path):
    """Rank 1's %ppermute.10 at offset 32,768 of its temp allocation (grown to 65,536 B), the others in place."""
    folder = renumbered(tmp_path, ("allocation 4: size 32768", "allocation 4: size 65536"),
                        ("<22 ppermute.10 @0> (size=32768,offset=0)", "<22 ppermute.10 @0> (size=32768,offset=32768)"))
    (m,) = compare_ranks(resolve([folder])[0])["modules"]
    assert m["groups"] == [[0], [1]]
    (d,) = m["divergences"]
    assert [(x["collective"], x["delta"], x["moved"]) for x in d["buffers"]["receive"]] == [
        ("collective-permute #1", 0, False), ("collective-permute #2", 32768, True),
        ("collective-permute #3", 0, False)]
