"""A dump folder where some modules were dumped after optimizations and one only before them: its compile did not
finish its optimization passes (a jax CPU compile killed part-way leaves its text before optimizations alone), so
perfkit has neither its cost nor its program. `perfkit cost` costed the finished modules and `perfkit hlo-diff` read
the module as never compiled on that rank without a word; both now say in a note (stderr) which modules they
left out. The dumps are XLA's own; the edit deletes one module's files after optimizations, as the kill does."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from hlo_dumps import one_process_dump

REPO = Path(__file__).resolve().parents[2]
CUSTOM_CALLS = REPO / "tests" / "hlo" / "data" / "custom_calls"


def perfkit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def note(folder: Path, module: str) -> str:
    return (f"perfkit: note: {folder}: 1 module with no *after_optimizations.txt, only *.before_optimizations.txt "
            f"({module}), left out: XLA writes a module's text after optimizations once its optimization passes "
            "finish (the compile was stopped, failed or is still running, or those files were not kept)\n")


def stop_after_passes_start(folder: Path, module: str) -> None:
    """``module``'s dump as its compile leaves it when killed between XLA's first dump and its last."""
    after = list(folder.glob(f"{module}.*after_optimizations*"))
    assert after and (folder / f"{module}.before_optimizations.txt").is_file()
    for path in after:
        path.unlink()


def test_cost_notes_the_module_it_found_only_before_optimizations(tmp_path):
    folder = tmp_path / "dump"
    one_process_dump(folder)
    finished = sorted(p.name.split(".")[1] for p in folder.glob("*after_optimizations.txt"))
    (killed,) = [p.name.removesuffix(".before_optimizations.txt") for p in folder.glob("module_*.jit__lambda.before*")]
    stop_after_passes_start(folder, killed)
    res = perfkit("cost", "--json", folder)
    assert (res.returncode, res.stderr) == (0, note(folder, killed))
    costed = sorted(p["module"] for p in json.loads(res.stdout)["cost"][str(folder)]["programs"])
    assert costed == [m for m in finished if m != "jit__lambda"] and len(costed) == len(finished) - 1

    run = tmp_path / "run"  # a run's variant, costed from its trial's lowest rank, says it too
    shutil.copytree(folder, run / "trials" / "00-a" / "rank0" / "xla_dump")
    res = perfkit("cost", run)
    assert (res.returncode, res.stderr) == (0, note(run / "trials" / "00-a" / "rank0" / "xla_dump", killed))


def test_hlo_diff_notes_a_rank_that_did_not_finish_a_module_the_others_did(dumps_copy):
    """Rank 3's step compile stopped before its passes ended: the step is missing there (its collectives wait for
    rank 3: divergent, exit 1), and the note says why it is missing."""
    folder = dumps_copy("array")
    for r in range(4):  # a second module every rank finished: rank 3 still has one to compare
        for path in CUSTOM_CALLS.glob("module_0000.*"):
            shutil.copy(path, folder / f"rank{r}" / path.name.replace("module_0000", "module_0001"))
    stop_after_passes_start(folder / "rank3", "module_0000.jit_step")
    res = perfkit("hlo-diff", folder)
    assert (res.returncode, res.stderr) == (1, note(folder / "rank3", "module_0000.jit_step"))
    assert "jit_step missing on rank 3" in res.stdout
