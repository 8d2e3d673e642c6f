"""A dump folder holding modules only as XLA dumped them before optimizations: it was dumped as text, so the hint
to add ``--xla_dump_hlo_as_text`` (what ``perfkit cost`` and ``hlo-diff`` said) was wrong. XLA writes a module's
``*.before_optimizations.txt`` as its compile starts and its ``*after_optimizations.txt`` once its optimization
passes finish: a jax compile killed in between leaves the first alone (seen on jax 0.10.2, CPU), while
``--xla_dump_hlo_module_re`` keeps or drops both and ``--xla_dump_hlo_pass_re`` keeps the second. The file is a
real one: XLA's dump of tests/hlo/custom_call_dumps.py's program."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BEFORE = next((REPO / "tests" / "hlo" / "data" / "custom_calls").glob("*.before_optimizations.txt"))


def perfkit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def test_a_folder_dumped_only_before_optimizations_says_what_is_missing(tmp_path):
    for rank in (0, 1):
        (tmp_path / f"rank{rank}" / "xla_dump").mkdir(parents=True)
        shutil.copy(BEFORE, tmp_path / f"rank{rank}" / "xla_dump" / BEFORE.name)
    rank0, dump0, dump1 = tmp_path / "rank0", tmp_path / "rank0" / "xla_dump", tmp_path / "rank1" / "xla_dump"

    def refusal(folder: Path) -> str:
        return (f"perfkit: {folder}: no *after_optimizations.txt here, only 1 *.before_optimizations.txt: XLA writes "
                "a module's text after optimizations once its optimization passes finish (the compile was stopped, "
                "failed or is still running, or those files were not kept)\n")

    for args, folder in [(["cost", dump0], dump0), (["cost", rank0], dump0), (["hlo-diff", dump0], dump0),
                         (["hlo-diff", "--ab", dump0, dump1], dump0), (["hlo-diff", dump0, dump1], dump0),
                         (["hlo-diff", tmp_path], dump0)]:
        res = perfkit(*args)
        assert (res.returncode, res.stderr) == (2, refusal(folder)), args


def test_a_run_whose_ranks_dumped_only_before_optimizations_says_what_is_missing(tmp_path):
    """A run directory's trials are read for dumps rank by rank: where none holds a module after optimizations, the
    variant whose rank folder holds one before them is named, with that folder, not 'no trial wrote XLA dumps'."""
    (tmp_path / "trials" / "00-a" / "rank0").mkdir(parents=True)  # a rank that wrote no dumps at all comes first
    for trial, rank in (("01-b", 0), ("01-b", 1)):
        folder = tmp_path / "trials" / trial / f"rank{rank}" / "xla_dump"
        folder.mkdir(parents=True)
        shutil.copy(BEFORE, folder / BEFORE.name)
    dump = tmp_path / "trials" / "01-b" / "rank0" / "xla_dump"
    for command in ("cost", "hlo-diff"):
        res = perfkit(command, tmp_path)
        assert (res.returncode, res.stderr) == (2, f"perfkit: {tmp_path}: variant b: {dump}: no "
                                                   "*after_optimizations.txt here, only 1 "
                                                   "*.before_optimizations.txt: XLA writes a module's text after "
                                                   "optimizations once its optimization passes finish (the compile "
                                                   "was stopped, failed or is still running, or those files were not "
                                                   "kept)\n"), command


def test_a_variant_dumped_only_before_optimizations_is_named_beside_one_with_dumps(tmp_path):
    """Variant a's trial holds XLA's full dump, b's only the text before optimizations: cost costed a and said
    nothing of b, hlo-diff refused with "1 variant with dumps". Each now names b, and why."""
    a, b = (tmp_path / "trials" / trial / "rank0" / "xla_dump" for trial in ("00-a", "01-b"))
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    for path in BEFORE.parent.glob("module_*"):
        shutil.copy(path, a / path.name)
    shutil.copy(BEFORE, b / BEFORE.name)
    why = (f"{b}: no *after_optimizations.txt here, only 1 *.before_optimizations.txt: XLA writes a module's text "
           "after optimizations once its optimization passes finish (the compile was stopped, failed or is still "
           "running, or those files were not kept)")

    res = perfkit("cost", tmp_path)
    costed = a / "module_0000.jit_eigh_and_callback.cpu_after_optimizations.txt"
    assert (res.returncode, res.stdout.splitlines()[0]) == (0, f"a: step program jit_eigh_and_callback ({costed})")
    assert [line for line in res.stdout.splitlines() if line.startswith("b:")] == [f"b: not costed: {why}"]
    res = perfkit("cost", "--json", tmp_path)
    assert (res.returncode, json.loads(res.stdout)["cost"]["b"]) == (0, {"dumps": str(b), "error": why})

    res = perfkit("hlo-diff", tmp_path)
    assert (res.returncode, res.stderr) == (2, f"perfkit: {tmp_path}: variant b: {why}\n")


def _b_before_optimizations_only(run: Path) -> None:
    """Two ranks a trial in ``run``: a's dumps whole, b's only the text before optimizations."""
    for trial, rank in [(t, r) for t in ("00-a", "01-b") for r in (0, 1)]:
        folder = run / "trials" / trial / f"rank{rank}" / "xla_dump"
        folder.mkdir(parents=True)
        for path in BEFORE.parent.glob("module_*"):
            if trial == "00-a" or path == BEFORE:
                shutil.copy(path, folder / path.name)


def test_a_multi_rank_variant_dumped_only_before_optimizations_is_named_beside_one_compared(tmp_path):
    """Two ranks a trial: a's compiled one program, b's dumped only the text before optimizations. hlo-diff compared
    a's ranks, said "consistent" and nothing of b; a note now says b's ranks were not compared, and why."""
    _b_before_optimizations_only(tmp_path)
    b = tmp_path / "trials" / "01-b" / "rank0" / "xla_dump"
    res = perfkit("hlo-diff", tmp_path)
    assert res.stdout.startswith("trials/00-a: 2 ranks, 1 module: consistent")
    assert (res.returncode, res.stderr) == (0, f"perfkit: note: variant b's ranks are not compared: {b}: no "
                                               "*after_optimizations.txt here, only 1 *.before_optimizations.txt: XLA "
                                               "writes a module's text after optimizations once its optimization "
                                               "passes finish (the compile was stopped, failed or is still running, "
                                               "or those files were not kept)\n")


def test_a_variant_passed_over_for_the_next_with_dumps_is_named_in_the_note(tmp_path):
    """One process a trial, variants a, b, c: b's dumps hold only the text before optimizations, so hlo-diff compares
    a with c; its note said so and nothing of b, as if a and c were the run's first two variants."""
    for trial in ("00-a", "01-b", "02-c"):
        folder = tmp_path / "trials" / trial / "rank0" / "xla_dump"
        folder.mkdir(parents=True)
        for path in BEFORE.parent.glob("module_*"):
            if trial != "01-b" or path == BEFORE:
                shutil.copy(path, folder / path.name)
    a, b, c = (tmp_path / "trials" / trial / "rank0" / "xla_dump" for trial in ("00-a", "01-b", "02-c"))
    res = perfkit("hlo-diff", tmp_path)
    assert (res.returncode, res.stderr) == (0, f"{tmp_path}: each trial is one process, so there are no ranks to "
                                               f"compare; comparing variant a's programs (A) with c's (B), as "
                                               f"`perfkit hlo-diff --ab {a} {c}` does (ranks: a multi-process case, "
                                               f"e.g. `perfkit run repro/rank_constant`); variant b's are not "
                                               f"compared: {b}: no *after_optimizations.txt here, only 1 "
                                               "*.before_optimizations.txt: XLA writes a module's text after "
                                               "optimizations once its optimization passes finish (the compile was "
                                               "stopped, failed or is still running, or those files were not kept)\n")


def test_hlo_diff_json_carries_the_notes_it_printed(tmp_path):
    """Rank mode over a run whose variant b dumped only before optimizations, and a rank of a whose folder holds a
    module dumped only before optimizations beside the compiled one: both were said on stderr alone, so a script
    reading --json saw a consistent run and nothing of b. The JSON's ``notes`` holds them, as stderr says them."""
    _b_before_optimizations_only(tmp_path)
    a1 = tmp_path / "trials" / "00-a" / "rank1" / "xla_dump"
    shutil.copy(BEFORE, a1 / "module_0009.jit_g.before_optimizations.txt")
    b = tmp_path / "trials" / "01-b" / "rank0" / "xla_dump"
    res = perfkit("hlo-diff", "--json", tmp_path)
    skipped = (f"variant b's ranks are not compared: {b}: no *after_optimizations.txt here, only 1 "
               "*.before_optimizations.txt: XLA writes a module's text after optimizations once its optimization "
               "passes finish (the compile was stopped, failed or is still running, or those files were not kept)")
    left_out = (f"{a1}: 1 module with no *after_optimizations.txt, only *.before_optimizations.txt "
                "(module_0009.jit_g), left out: XLA writes a module's text after optimizations once its optimization "
                "passes finish (the compile was stopped, failed or is still running, or those files were not kept)")
    assert res.returncode == 0, res.stderr
    assert res.stderr == f"perfkit: note: {skipped}\nperfkit: note: {left_out}\n"
    assert json.loads(res.stdout)["notes"] == [skipped, left_out]


def test_hlo_diff_json_of_a_single_process_run_carries_its_notes(tmp_path):
    """One process a trial: the note saying which variants are compared was ``note`` already; a module a variant
    dumped only before optimizations beside its compiled ones was said on stderr alone."""
    for trial in ("00-a", "01-b"):
        folder = tmp_path / "trials" / trial / "rank0" / "xla_dump"
        folder.mkdir(parents=True)
        for path in BEFORE.parent.glob("module_*"):
            shutil.copy(path, folder / path.name)
    b = tmp_path / "trials" / "01-b" / "rank0" / "xla_dump"
    shutil.copy(BEFORE, b / "module_0009.jit_g.before_optimizations.txt")
    res = perfkit("hlo-diff", "--json", tmp_path)
    left_out = (f"{b}: 1 module with no *after_optimizations.txt, only *.before_optimizations.txt "
                "(module_0009.jit_g), left out: XLA writes a module's text after optimizations once its optimization "
                "passes finish (the compile was stopped, failed or is still running, or those files were not kept)")
    assert res.returncode == 0, res.stderr
    assert f"perfkit: note: {left_out}\n" in res.stderr
    assert json.loads(res.stdout)["notes"] == [left_out]
