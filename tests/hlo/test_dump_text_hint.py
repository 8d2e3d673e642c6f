"""What perfkit says of a dump folder without HLO text. It asked for ``--xla_dump_hlo_as_text`` wherever no
``*after_optimizations.txt`` was found, but XLA (jax 0.10.2, CPU) writes the text with ``--xla_dump_to=DIR`` alone;
it leaves the text out where another format is asked for (``--xla_dump_hlo_as_proto``) without that flag. The
folders are XLA's own, written by a jax program here."""

import subprocess
import sys
from pathlib import Path

from hlo_dumps import one_process_dump

REPO = Path(__file__).resolve().parents[2]
GENERIC = ("no *after_optimizations.txt here (XLA dumps them with --xla_dump_to=DIR, and beside another format "
           "asked for, --xla_dump_hlo_as_proto or the like, only with --xla_dump_hlo_as_text)")


def perfkit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def test_xla_dumps_text_without_the_text_flag(tmp_path):
    """The fact the hint rests on: --xla_dump_to alone gives the text perfkit reads (costed, exit 0)."""
    one_process_dump(tmp_path / "dump", as_text=False)
    assert list((tmp_path / "dump").glob("*.cpu_after_optimizations.txt"))
    res = perfkit("cost", tmp_path / "dump")
    assert res.returncode == 0, res.stderr


def test_a_folder_dumped_as_proto_alone_says_the_text_flag_is_what_is_missing(tmp_path):
    folder = tmp_path / "dump"
    one_process_dump(folder, "--xla_dump_hlo_as_proto", as_text=False)
    protos = sorted(folder.glob("*after_optimizations.hlo.pb"))
    assert protos and not list(folder.glob("*.txt"))  # what XLA wrote, by eye
    refusal = (f"perfkit: {folder}: no *after_optimizations.txt here, only {len(protos)} modules after optimizations "
               "in another format (*after_optimizations.hlo.pb): XLA dumps the text beside another format only with "
               "--xla_dump_hlo_as_text\n")
    for args in (["cost", folder], ["hlo-diff", folder], ["hlo-diff", "--ab", folder, folder]):
        res = perfkit(*args)
        assert (res.returncode, res.stderr) == (2, refusal), args


def test_an_empty_folder_names_no_flag_as_required_that_is_not(tmp_path):
    (tmp_path / "empty").mkdir()
    res = perfkit("cost", tmp_path / "empty")
    assert (res.returncode, res.stderr) == (2, f"perfkit: {tmp_path / 'empty'}: {GENERIC}\n")


def test_a_binary_file_named_as_text_is_not_blamed_on_a_flag(tmp_path):
    """XLA never writes other bytes under that name, whatever its flags: the file is damaged or not XLA's."""
    folder = tmp_path / "dump"
    folder.mkdir()
    bad = folder / "module_0000.jit_f.cpu_after_optimizations.txt"
    bad.write_bytes(b"HloModule \xff\xfe\n")
    res = perfkit("cost", folder)
    assert (res.returncode, res.stderr) == (2, f"perfkit: {bad}: not a text file: not UTF-8, as XLA's text dumps are\n")
