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
    # the same program, not identical dumps: its buffer assignment differs
    assert "identical" not in res.stdout and "ranks 0, 1 one program (fingerprint" in res.stdout
    assert "consistent (every module the same program on every rank that compiled it)" in res.stdout


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


def extra_temp(tmp_path, inserted: str, *edits: tuple[str, str], rank: int = 1, folder=None):
    """Rank 0's dump as ranks 0 and 1 (in ``folder``, where given, as made before), ``rank``'s buffer assignment
    with the temp allocation ``inserted`` (its head line and values) as its allocation 3, before the temp one holding
    the receive buffers (now its allocation 4), then each (old, new) replaced once there."""
    if folder is None:
        folder = tmp_path / "dumps"
        for r in (0, 1):
            shutil.copytree(RANK0, folder / f"rank{r}")
    (path,) = (folder / f"rank{rank}").glob("*-buffer-assignment.txt")
    text = path.read_text()
    assert text.count("allocation 3: size 32768, preallocated-temp:\n") == 1
    text = text.replace("allocation 3: size 32768, preallocated-temp:\n",
                        inserted + "allocation 4: size 32768, preallocated-temp:\n")
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text)
    return folder


SMALL_TEMP = "allocation 3: size 4096, preallocated-temp:\n value: <31 copy.7 @0> (size=4096,offset=0): f32[1024]{0}\n"


def test_an_extra_temp_allocation_before_the_receiving_one_splits_no_group(tmp_path):
    """By hand: rank 1 has a second temp allocation (4,096 B, one f32[1024] value) before the one holding
    %ppermute.9 and .10 at offset 0, which is its second temp allocation where rank 0's is its first; the pairing
    pairs the two 32,768 B temps (the only ones alike in contents), so no receive buffer moved. Grouped by the
    allocations' places among their kind, rank 1 read as another program whose divergence said '0 of 3 collective
    receive buffers moved'."""
    folder = extra_temp(tmp_path, SMALL_TEMP)
    assert [allocation_of(folder, 0, f"ppermute.{k}") for k in (9, 10, 11)] == [3, 3, 1]
    assert [allocation_of(folder, 1, f"ppermute.{k}") for k in (9, 10, 11)] == [4, 4, 1]
    r = compare_ranks(resolve([folder])[0])
    (m,) = r["modules"]
    assert (r["consistent"], r["groups"], m["groups"], m["divergences"]) == (True, [[0, 1]], [[0, 1]], [])
    assert m["renumbered_ranks"] == [1]
    res = hlo_diff(folder)
    assert res.returncode == 0, res.stderr
    assert "2 ranks, 1 module: consistent" in res.stdout


# a temp allocation alike in contents to the one holding the receive buffers: three f32[64,128] values at offset 0
ALIKE_TEMP = "allocation 3: size 32768, preallocated-temp:\n" + "".join(
    f" value: <{31 + k} copy.{7 + k} @0> (size=32768,offset=0): f32[64,128]{{1,0}}\n" for k in range(3))


def test_an_extra_temp_allocation_alike_to_the_receiving_one_leaves_the_ranks_split_undecided(tmp_path):
    """The inserted temp allocation is 32,768 B with three f32[64,128] values at offset 0, as the receiving one:
    by hand, nothing in the files tells which of rank 1's two is rank 0's, so collective-permutes #1 and #2 are
    undecided and the ranks stay two groups (never merged on a guess); #3 (in the output allocation) did not move."""
    folder = extra_temp(tmp_path, ALIKE_TEMP)
    assert [allocation_of(folder, 1, f"ppermute.{k}") for k in (9, 10, 11)] == [4, 4, 1]
    r = compare_ranks(resolve([folder])[0])
    (m,) = r["modules"]
    assert (r["consistent"], m["groups"]) == (False, [[0], [1]])
    (d,) = m["divergences"]
    assert (d["buffers"]["receive_moved"], d["buffers"]["receive_undecided"]) == (0, 2)
    assert [(x["collective"], x["moved"]) for x in d["buffers"]["receive"]] == [
        ("collective-permute #1", None), ("collective-permute #2", None), ("collective-permute #3", False)]
    assert "2 undecided" in hlo_diff(folder).stdout


def test_a_receive_buffer_moved_past_an_extra_temp_allocation_still_splits(tmp_path):
    """As the first case, and rank 1's %ppermute.10 placed in its output allocation (offset 0), not in its temp
    one: by hand, the 32,768 B temps still pair (the only ones of that size), so collective-permute #2 moved to
    another allocation and rank 1 is another group."""
    moved = " value: <22 ppermute.10 @0> (size=32768,offset=0): f32[64,128]{1,0}\n"
    folder = extra_temp(tmp_path, SMALL_TEMP, (moved, ""),
                        (" value: <25 ppermute.11 @0>", moved + " value: <25 ppermute.11 @0>"))
    assert [allocation_of(folder, 1, f"ppermute.{k}") for k in (9, 10, 11)] == [4, 1, 1]
    r = compare_ranks(resolve([folder])[0])
    (m,) = r["modules"]
    assert (r["consistent"], m["groups"], m["renumbered_ranks"]) == (False, [[0], [1]], [])
    (d,) = m["divergences"]
    assert (d["buffers"]["receive_moved"], d["buffers"]["receive_undecided"]) == (1, 0)
    assert [(x["collective"], x["moved"]) for x in d["buffers"]["receive"]] == [
        ("collective-permute #1", False), ("collective-permute #2", True), ("collective-permute #3", False)]


def test_receive_buffers_at_the_same_place_among_temps_in_allocations_the_pairing_tells_apart_split(tmp_path):
    """Rank 0: a 4,096 B temp allocation (3) before the receiving one (4, as before). Rank 1: a temp allocation (3)
    alike in contents to rank 0's receiving one, then the receiving one (4), grown to 65,536 B with
    %wrapped_tanh.2 at offset 32,768. %ppermute.9 and .10 sit at offset 0 of the second temp allocation on both
    ranks, but by hand the pairing pairs rank 0's 4 with rank 1's 3 (the only ones alike in contents), then the
    last two (rank 0's 3, rank 1's 4): collective-permutes #1 and #2 moved to another allocation. Grouped by the
    allocations' places among their kind, the two ranks were one group."""
    folder = extra_temp(tmp_path, SMALL_TEMP, rank=0)
    extra_temp(tmp_path, ALIKE_TEMP, ("allocation 4: size 32768", "allocation 4: size 65536"),
               ("<24 wrapped_tanh.2 @0> (size=32768,offset=0)", "<24 wrapped_tanh.2 @0> (size=32768,offset=32768)"),
               folder=folder)
    assert [allocation_of(folder, r, f"ppermute.{k}") for r in (0, 1) for k in (9, 10, 11)] == [4, 4, 1] * 2
    r = compare_ranks(resolve([folder])[0])
    (m,) = r["modules"]
    assert (r["consistent"], m["groups"]) == (False, [[0], [1]])
    (d,) = m["divergences"]
    assert (d["buffers"]["receive_moved"], d["buffers"]["receive_undecided"]) == (2, 0)
    assert [(x["collective"], x["allocation"]["same"], x["moved"]) for x in d["buffers"]["receive"]] == [
        ("collective-permute #1", False, True), ("collective-permute #2", False, True),
        ("collective-permute #3", True, False)]
