"""A dump folder of a process whose ``--xla_dump_hlo_module_re`` matched none of its modules: XLA (jax 0.10.2, CPU)
still writes each compile's inputs to ``module_NNNN.<name>/`` (module.mlir, compile_options.textproto,
topology.textproto) but no module's HLO, in any format. ``perfkit cost`` and ``hlo-diff`` told the user to add
``--xla_dump_hlo_as_text``, which the process had. The folder is XLA's own, written by a jax program here."""

import subprocess
import sys
from pathlib import Path

from hlo_dumps import one_process_dump

REPO = Path(__file__).resolve().parents[2]


def perfkit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def test_a_folder_no_module_was_dumped_in_says_so_not_to_dump_as_text(tmp_path):
    folder = tmp_path / "dump"
    one_process_dump(folder, "--xla_dump_hlo_module_re=nomatch")
    inputs = sorted(p.name for p in folder.iterdir())
    # what XLA wrote, by eye: one folder per compile, no file beside them
    assert inputs and all(p.startswith("module_") and (folder / p).is_dir() for p in inputs), inputs
    refusal = (f"perfkit: {folder}: no *after_optimizations.txt here, nor any module's HLO: only {len(inputs)} "
               "module_NNNN.<name>/ folders (--xla_dump_hlo_module_re may match none of the modules)\n")
    for args in (["cost", folder], ["hlo-diff", folder], ["hlo-diff", "--ab", folder, folder]):
        res = perfkit(*args)
        assert (res.returncode, res.stderr) == (2, refusal), args


def test_debug_options_without_hlo_do_not_blame_the_module_pattern(tmp_path):
    """XLA writes a module's *.debug_options after its HLO (only where the pattern matched it): a folder holding
    them without the HLO says what it holds, and neither flag."""
    folder = tmp_path / "dump"
    one_process_dump(folder, "--xla_dump_hlo_module_re=jit__lambda")
    for p in folder.iterdir():
        if p.is_file() and not p.name.endswith(".debug_options"):
            p.unlink()
    inputs = [p for p in folder.iterdir() if p.is_dir()]
    assert len(list(folder.glob("*.debug_options"))) == 1  # the pattern kept jit__lambda's files alone
    res = perfkit("cost", folder)
    assert (res.returncode, res.stderr) == (2, f"perfkit: {folder}: no *after_optimizations.txt here, nor any "
                                               f"module's HLO: only {len(inputs)} module_NNNN.<name>/ folders and 1 "
                                               "*.debug_options\n")
