"""A buffer-assignment file cut at a line end is refused by ``perfkit cost`` and ``perfkit hlo-diff`` (exit 2, one
line naming it), where its temp read too small. Nothing in the file marks its end (XLA writes its allocations
alone, the totals in the files beside it), and XLA puts the temp allocation last, so such a cut loses it first;
its allocations must add up to the memory-usage report's total. Read by hand, the demo's ``jit_step`` on rank 0
(tests/hlo/hlo_dumps.py, jax 0.10.2 on CPU) holds allocations of 65,536, 32,768, 32,768, 4 and, last, a
preallocated temp of 32,768 B: 163,844 B, its report's ``Total bytes: 163844``. Cut before the temp: 131,076 B,
and the temp read 0 B (cost: ``temp 0 MiB``; hlo-diff: ``temp_bytes`` 0, ranks consistent, exit 0)."""

import json
import subprocess
import sys

from hlo_dumps import REPO

TEMP_LINE = "allocation 4: size 32768, preallocated-temp:\n"


def _perfkit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def _cut_before_the_temp(folder):
    (path,) = (folder / "rank0").glob("*jit_step*after_optimizations-buffer-assignment.txt")
    text = path.read_text()
    assert text.count(TEMP_LINE) == 1 and text.count("\nallocation ") == 5
    path.write_text(text[:text.index(TEMP_LINE)])
    return path


def test_the_whole_file_reads_its_temp(real_dumps):
    res = _perfkit("cost", real_dumps["array"] / "rank0", "--json")
    assert res.returncode == 0, res.stderr
    (label,) = json.loads(res.stdout)["cost"].values()
    assert label["step"]["temp_bytes"] == 32768 and label["step"]["peak_bytes"] == 163844


def test_a_file_cut_before_its_temp_is_refused_by_cost_and_hlo_diff(dumps_copy):
    folder = dumps_copy("array")
    path = _cut_before_the_temp(folder)
    reason = (f"perfkit: {path}: its allocations add up to 131,076 B where the memory-usage report beside it "
              f"({path.name.replace('buffer-assignment', 'memory-usage-report')}) says 163,844 B: lines are missing "
              "(a file cut short at a line end?)")
    for command in (["cost", folder / "rank0"], ["hlo-diff", folder]):
        res = _perfkit(*command)
        assert (res.returncode, res.stdout, res.stderr.splitlines()) == (2, "", [reason]), (command, res.stderr)
