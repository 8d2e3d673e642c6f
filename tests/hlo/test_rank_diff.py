"""hlo-diff across ranks on real multi-process CPU dumps, and on synthetic edits of them: an extra
instruction, a changed constant, a changed slice offset, a shifted receive offset, renamed instructions."""

import json
import re
import shutil
import subprocess
import sys

import pytest
from hlo_dumps import REPO, hlo_file, rename_everything, rename_module

from perfkit.errors import BadInput
from perfkit.hlo import load
from perfkit.hlo.consistency import variant_check
from perfkit.hlo.diff import compare_ranks
from perfkit.hlo.dumps import RankDumps, dump_files, resolve
from perfkit.hlo.fingerprint import Signer, computation_fingerprints, flatten
from perfkit.hlo.parse import parse_module

# The demonstration program: 4 ranks of 64 rows, 4 * 64 - 10 rows in all, so rank 3 holds 54 valid rows.
VALID_ON_LAST = 54
ROW_BYTES = 128 * 4  # one f32 row of width 128


def check(folder):
    return compare_ranks(resolve([folder])[0])


def perfkit(*args):
    return subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def test_python_constant_offset_makes_the_last_rank_diverge(real_dumps):
    r = check(real_dumps["constant"])
    assert r["consistent"] is False and r["groups"] == [[0, 1, 2], [3]] and r["divergent_ranks"] == [3]
    (m,) = r["modules"]
    assert m["name"] == "jit_step" and m["groups"] == [[0, 1, 2], [3]] and m["collectives"] == 1
    (d,) = m["divergences"]
    assert d["ranks"] == [3] and d["against_rank"] == 0 and not d["same_program"]
    assert d["entry_ops"]["delta"] == 1  # the slice is its own fusion on rank 3
    first = d["first_difference"]["rank"]
    assert first["opcode"] == "slice" and f"slice={{[0:{VALID_ON_LAST}], [0:128]}}" in first["text"]
    assert {"slice", "pad"} <= {i["opcode"] for i in d["only_rank"]}
    assert {o["opcode"]: o["delta"] for o in d["opcodes"]}["slice"] == 1
    # XLA CPU (jax 0.10.2) keeps rank 3's sliced matmul input, f32[54,128], as one more temp buffer.
    assert d["buffers"]["temp_bytes"]["delta"] == VALID_ON_LAST * ROW_BYTES


def test_runtime_array_offset_is_one_program(real_dumps):
    r = check(real_dumps["array"])
    assert r["consistent"] is True and r["groups"] == [[0, 1, 2, 3]]
    (m,) = r["modules"]
    assert len(m["fingerprints"]) == 1 and m["divergences"] == [] and m["buffers_compared"]


def test_names_counters_metadata_and_headers_are_ignored(dumps_copy):
    folder = dumps_copy("array")
    mapping = rename_everything(folder, 2)
    assert len(mapping) > 10
    r = check(folder)
    assert r["consistent"] is True and r["groups"] == [[0, 1, 2, 3]]


def test_extra_instruction_on_one_rank(dumps_copy):
    folder = dumps_copy("array")
    hlo = hlo_file(folder / "rank1")
    lines = hlo.read_text().splitlines()
    entry = next(k for k, ln in enumerate(lines) if ln.startswith("ENTRY"))
    param = next(k for k in range(entry, len(lines)) if " parameter(0)" in lines[k])
    name = re.match(r"\s*%(\S+) = (\S+)", lines[param])
    extra = f"  %copy.99 = {name.group(2)} copy(%{name.group(1)})"
    lines.insert(param + 1, extra)
    hlo.write_text("\n".join(lines) + "\n")
    r = check(folder)
    assert r["groups"] == [[0, 2, 3], [1]] and r["divergent_ranks"] == [1]
    (d,) = r["modules"][0]["divergences"]
    assert d["entry_ops"]["delta"] == 1 and d["instructions"]["delta"] == 1
    assert [i["text"] for i in d["only_rank"]] == [extra.strip()] and d["only_majority_count"] == 0
    assert d["first_difference"]["rank"]["text"] == extra.strip() and d["first_difference"]["majority"] is None
    assert d["opcodes"] == [{"opcode": "copy", "majority": 0, "rank": 1, "delta": 1}] and d["changed_count"] == 0


def test_changed_constant_on_one_rank(dumps_copy):
    folder = dumps_copy("array")
    hlo = hlo_file(folder / "rank2")
    text = hlo.read_text()
    m = re.search(r"(%\S+ = \S+ constant\()([^)]*)\)", text)
    old = m.group(2)
    hlo.write_text(text[:m.start(2)] + "7.5" + text[m.end(2):])
    r = check(folder)
    assert r["groups"] == [[0, 1, 3], [2]]
    (d,) = r["modules"][0]["divergences"]
    literal = [c for c in d["changed"] if c["field"] == "literal"]
    assert literal == [{"opcode": "constant", "field": "literal", "computation": literal[0]["computation"],
                        "majority": old, "rank": "7.5", "lines": literal[0]["lines"]}]
    assert d["entry_ops"]["delta"] == 0 and d["only_rank_count"] == 0 and d["only_majority_count"] == 0


def test_changed_slice_offsets_are_named(dumps_copy, tmp_path):
    """Two ranks whose programs differ only in a slice's offsets (rank 3's program of the demo)."""
    folder = dumps_copy("constant")
    shifted = tmp_path / "shifted"
    (tmp_path / "shifted").mkdir()
    src = hlo_file(folder / "rank3")
    dst = shifted / src.name
    dst.write_text(src.read_text().replace(f"slice={{[0:{VALID_ON_LAST}], [0:128]}}",
                                           f"slice={{[10:{VALID_ON_LAST + 10}], [0:128]}}"))
    r = compare_ranks(RankDumps("pair", None, {0: src.parent, 1: shifted}))
    assert r["groups"] == [[0], [1]]
    (d,) = r["modules"][0]["divergences"]
    changed = [(c["opcode"], c["field"], c["majority"], c["rank"]) for c in d["changed"]]
    assert ("slice", "slice", f"{{[0:{VALID_ON_LAST}], [0:128]}}",
            f"{{[10:{VALID_ON_LAST + 10}], [0:128]}}") in changed
    assert d["first_difference"]["majority"]["opcode"] == "slice" == d["first_difference"]["rank"]["opcode"]


def test_shifted_receive_offset_with_the_same_program(dumps_copy):
    folder = dumps_copy("array")
    ba = next((folder / "rank3").glob("*jit_step*after_optimizations-buffer-assignment.txt"))
    text = ba.read_text()
    m = re.search(r"( value: <\d+ ppermute[^>]*> \(size=\d+,offset=)(\d+)\)", text)
    offset = int(m.group(2))
    ba.write_text(text[:m.start(2)] + str(offset + 4096) + text[m.end(2):])
    r = check(folder)
    assert r["consistent"] is False and r["groups"] == [[0, 1, 2], [3]]
    (d,) = r["modules"][0]["divergences"]
    assert d["same_program"] is True and d["first_difference"] is None
    assert d["buffers"]["receive_moved"] == 1
    (row,) = d["buffers"]["receive"]
    assert row["collective"] == "collective-permute #1" and (row["majority"], row["rank"], row["delta"]) == (
        offset, offset + 4096, 4096)
    res = perfkit(folder)
    assert res.returncode == 1 and f"collective-permute #1 receive offset {offset:,} -> {offset + 4096:,} (+4,096)" in res.stdout


HELPER_MODULE = """HloModule jit_log_value, entry_computation_layout={(f32[])->f32[]}

ENTRY %main.3 (Arg_0.1: f32[]) -> f32[] {
  %Arg_0.1 = f32[] parameter(0)
  ROOT %log.2 = f32[] log(%Arg_0.1)
}
"""


def test_modules_match_by_name_not_counter_and_missing_ones_are_listed(dumps_copy):
    folder = dumps_copy("array")
    rank1 = folder / "rank1"
    for p in sorted(rank1.glob("module_0000.*"), reverse=True):  # shift rank 1's counter: 0000 -> 0001
        p.rename(p.with_name(p.name.replace("module_0000", "module_0001")))
    (rank1 / "module_0000.jit_log_value.cpu_after_optimizations.txt").write_text(HELPER_MODULE)
    r = check(folder)
    by_name = {m["name"]: m for m in r["modules"]}
    assert by_name["jit_step"]["groups"] == [[0, 1, 2, 3]] and by_name["jit_step"]["consistent"]
    helper = by_name["jit_log_value"]
    assert helper["groups"] == [[1]] and helper["missing_ranks"] == [0, 2, 3] and helper["collectives"] == 0
    assert r["consistent"] is True  # a module without collectives that one rank alone compiled is harmless


def test_cli_text_json_markdown_and_exit_codes(real_dumps):
    res = perfkit(real_dumps["constant"])
    assert res.returncode == 1 and res.stderr == ""
    assert "rank 3 compiled a different jit_step than ranks 0-2" in res.stdout
    assert f"slice={{[0:{VALID_ON_LAST}], [0:128]}}" in res.stdout
    res = perfkit(real_dumps["array"], "--json")
    assert res.returncode == 0
    out = json.loads(res.stdout)
    assert out["consistent"] is True and [m["name"] for m in out["modules"]] == ["jit_step"]
    assert set(out["modules"][0]) >= {"name", "groups", "divergent_ranks"}
    # One folder per rank, given in any order: ranks come from the rank<R> names.
    res = perfkit(*(real_dumps["constant"] / f"rank{r}" for r in (3, 1, 2, 0)), "--markdown")
    assert res.returncode == 1 and "- module ``jit_step``: **2 programs**, ranks 0-2 | 3" in res.stdout
    assert "  - rank 3 against rank 0 (ranks 0-2)" in res.stdout
    # two folders that part: perhaps two variants' dumps (a newcomer's tp and sp), which --ab compares
    res = perfkit(*(real_dumps["constant"] / f"rank{r}" for r in (0, 3)))
    assert res.returncode == 1 and res.stderr == ("perfkit: note: the two folders are compared as two ranks of one "
                                                  "program; two variants' dumps (A, B) compare with --ab A B\n")
    assert perfkit(*(real_dumps["constant"] / f"rank{r}" for r in (0, 1))).stderr == ""  # one program: no note
    checks = json.loads(perfkit(real_dumps["array"], "--json").stdout)["checks"]
    assert checks[0]["compared"] == 1  # jit_step, on every rank


def test_ranks_sharing_no_module_are_not_called_consistent():
    """Two unrelated real dumps (a newcomer's): each module compiled by one rank, nothing compared. It read
    "consistent (every module identical on every rank that compiled it)"."""
    real = REPO / "tests" / "data" / "real" / "hlo"
    res = perfkit(real / "amd_te_fused_attn", real / "mi300_jax08_attention")
    assert res.returncode == 0 and res.stdout.splitlines()[0].endswith(
        ": 2 ranks in 2 roles, 2 modules: nothing compared (each module compiled by one rank only: these ranks share "
        "no program to differ in)")
    # a module one rank alone compiled is not "identical" (to nothing): it read "rank 0 identical"
    modules = [line for line in res.stdout.splitlines() if line.startswith("  module ")]
    assert modules and all(": rank 0 alone (fingerprint " in m or ": rank 1 alone (fingerprint " in m for m in modules)
    check, = json.loads(perfkit(real / "amd_te_fused_attn", real / "mi300_jax08_attention", "--json").stdout)["checks"]
    assert check["compared"] == 0 and check["consistent"] is True


HEAVY = ("jax", "torch", "pandas", "numpy")


def test_cli_starts_without_jax_torch_or_pandas(real_dumps, tmp_path):
    """Neither the command nor its worker processes import jax, torch, pandas or numpy. The demo's dumps are
    small, so the workers are forced (two, whatever the machine has) where the CLI asks for them."""
    log = tmp_path / "workers.log"
    code = f"""import os, sys
import perfkit.hlo.load as load
load.pool_size = lambda workers, distinct: 2 if workers is None else workers
parse = load.load_module
def logged(rank, files):
    print(os.getpid(), files.hlo.parent.name, sorted(m for m in {HEAVY!r} if m in sys.modules), file=open({str(log)!r}, "a"))
    return parse(rank, files)
load.load_module = logged
from perfkit.cli import cli
try:
    cli.main(["hlo-diff", sys.argv[1]], standalone_mode=False)
except SystemExit:
    pass
print(os.getpid(), sorted(m for m in {HEAVY!r} if m in sys.modules))
"""
    res = subprocess.run([sys.executable, "-c", code, str(real_dumps["constant"])], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    pid, heavy = res.stdout.strip().splitlines()[-1].split(" ", 1)
    assert heavy == "[]", res.stdout + res.stderr
    parses = [line.split(" ", 2) for line in log.read_text().splitlines()]
    # Ranks 0-2 dumped byte-identical files: rank 0's parses here, rank 3's in the worker, which sends
    # its whole parse over for the divergence (not parsed again here).
    assert sorted((p == pid, rank) for p, rank, _ in parses) == [(False, "rank3"), (True, "rank0")]
    assert {h for _, _, h in parses} == {"[]"}


def test_identical_dumps_are_parsed_once(real_dumps, monkeypatch):
    """The demo's ranks 0-2 (real jax.distributed processes) dumped byte-identical files: one parse serves
    them all, and each rank's results still name its own file."""
    parsed = []
    parse = load.load_module
    monkeypatch.setattr(load, "load_module", lambda rank, files: parsed.append(files.hlo.parent.name)
                        or parse(rank, files))
    r = check(real_dumps["constant"])
    assert parsed == ["rank0", "rank3"]
    (m,) = r["modules"]
    assert m["groups"] == [[0, 1, 2], [3]] and m["file"] == str(hlo_file(real_dumps["constant"] / "rank0"))
    assert m["divergences"][0]["file"] == str(hlo_file(real_dumps["constant"] / "rank3"))


def small_module(op: str) -> load.RankModule:
    text = (f"HloModule m\n\nf {{\n  p = f32[4]{{0}} parameter(0)\n  ROOT r = f32[4]{{0}} {op}(p, p)\n}}\n\n"
            "ENTRY main {\n  x = f32[4]{0} parameter(0)\n  ROOT y = f32[4]{0} fusion(x), kind=kLoop, calls=f\n}\n")
    module = parse_module(text)
    fps = computation_fingerprints(module)
    return load.RankModule(0, None, module, fps, flatten(module), {}, None, None, None, None)


def test_signatures_are_worked_out_once_per_fingerprint(real_dumps):
    """Signer.signatures takes a computation's signatures from an equal fingerprint's (``known``, shared by
    both sides): the same as each instruction's own signature, on both sides of the real divergence and
    where both modules name a different computation alike."""
    add, mul = small_module("add"), small_module("multiply")
    known: dict[str, list[str]] = {}
    sa, sm = Signer(add.module, add.fps), Signer(mul.module, mul.fps)
    param, p0 = "opcode=parameter | shape=f32[4]{0} | operands= | literal=0", "parameter(0) f32[4]{0}"
    for m, signer, op in ((add, sa, "add"), (mul, sm, "multiply")):  # flat: x, then f's p and r, then y
        assert signer.signatures(m.flat, known) == [
            param, param, f"opcode={op} | shape=f32[4]{{0}} | operands={p0}; {p0} | literal=",
            f"opcode=fusion | shape=f32[4]{{0}} | operands={p0} | literal= | kind=kLoop | calls={m.fps['f']}"]
    assert len(known) == 4  # f and main, of each
    known = {}
    for r in (0, 3):
        (files,) = [f for f in dump_files(real_dumps["constant"] / f"rank{r}") if "jit_step" in f.hlo.name]
        m = load.load_module(r, files)
        signer = Signer(m.module, m.fps)
        assert signer.signatures(m.flat, known) == [signer.signature(f) for f in m.flat]


def test_a_parse_not_kept_is_parsed_again_when_needed(real_dumps, monkeypatch):
    """Past KEEP_BYTES a process keeps only its first parse: rank 3's, needed for the divergence, is then
    parsed a second time, to the same result."""
    alone = check(real_dumps["constant"])
    parsed = []
    parse = load.load_module
    monkeypatch.setattr(load, "load_module", lambda rank, files: parsed.append(files.hlo.parent.name)
                        or parse(rank, files))
    monkeypatch.setattr(load, "KEEP_BYTES", 0)
    assert check(real_dumps["constant"]) == alone and parsed == ["rank0", "rank3", "rank3"]


def test_files_are_shared_out_by_size():
    # By hand: index 0 to this process first, then the largest to the least loaded share (of equals, the
    # last: this process has the comparing to do after).
    assert load.shares([5] * 8, 2) == [[0, 3, 5, 7], [1, 2, 4, 6]]
    assert load.shares([5] * 9, 2) == [[0, 3, 5, 7], [1, 2, 4, 6, 8]]
    assert load.shares([1, 10, 3, 8], 2) == [[0, 2, 3], [1]]
    assert load.shares([4, 4, 4], 3) == [[0], [2], [1]]


def in_two_workers(folder, keep_bytes=load.KEEP_BYTES, prelude=""):
    """compare_ranks in two processes (this one and a worker), in a fresh process: workers are forked, and
    this one may hold jax's threads (fork is safe only from a single-threaded process, as the CLI is).
    ``prelude``: code run there first."""
    code = ("import json, os, sys\nfrom perfkit.errors import BadInput\nfrom perfkit.hlo import load\n"
            "from perfkit.hlo.diff import compare_ranks\nfrom perfkit.hlo.dumps import resolve\n"
            f"load.KEEP_BYTES = {keep_bytes}\n{prelude}try:\n"
            "    print(json.dumps(compare_ranks(resolve([sys.argv[1]])[0], workers=2)))\n"
            "except BadInput as exc:\n    print(json.dumps({'path': exc.path, 'reason': exc.reason}))")
    res = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, cwd=REPO,
                         timeout=120)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return json.loads(res.stdout)


def test_worker_processes_give_what_one_process_gives(dumps_copy, real_dumps):
    folder = dumps_copy("array")
    rename_everything(folder, 2)  # a distinct file of the same program
    ba = next((folder / "rank3").glob("*jit_step*after_optimizations-buffer-assignment.txt"))
    ba.write_text(ba.read_text().replace("offset=0)", "offset=64)"))  # the same program, another assignment
    for ranks in (folder, real_dumps["constant"]):
        alone = json.loads(json.dumps(check(ranks)))
        assert in_two_workers(ranks) == alone
        assert in_two_workers(ranks, keep_bytes=0) == alone  # each process keeps its first parse only
    bad = hlo_file(folder / "rank1")
    bad.write_text(bad.read_text()[:-40])
    with pytest.raises(BadInput) as refused:
        check(folder)
    assert refused.value.path == str(bad) and "is not closed" in refused.value.reason
    assert in_two_workers(folder) == {"path": str(bad), "reason": refused.value.reason}


def test_bad_input_is_one_line_exit_2(tmp_path, real_dumps):
    res = perfkit(tmp_path / "absent")
    assert res.returncode == 2 and res.stderr.strip() == f"perfkit: {tmp_path / 'absent'}: no such file or directory"
    (tmp_path / "rank0").mkdir()
    (tmp_path / "rank1").mkdir()
    res = perfkit(tmp_path)
    assert res.returncode == 2 and "no *after_optimizations.txt" in res.stderr and len(res.stderr.splitlines()) == 1
    broken = tmp_path / "broken"
    for r in range(2):
        src = hlo_file(real_dumps["array"] / f"rank{r}")
        (broken / f"rank{r}").mkdir(parents=True)
        text = src.read_text()
        (broken / f"rank{r}" / src.name).write_text(text if r == 0 else text[:text.index("ROOT")])
    res = perfkit(broken)
    bad = broken / "rank1" / hlo_file(real_dumps["array"] / "rank1").name
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1
    assert res.stderr.startswith(f"perfkit: {bad}: line ") and "is not closed" in res.stderr
    res = perfkit(real_dumps["array"] / "rank0")
    assert res.returncode == 2 and "hlo-diff compares ranks" in res.stderr
    (tmp_path / "empty").mkdir()
    res = perfkit(tmp_path / "empty")  # it said "one dump folder: hlo-diff compares ranks" of a folder of nothing
    assert res.returncode == 2 and res.stderr == (f"perfkit: {tmp_path / 'empty'}: no *after_optimizations.txt here "
                                                  "(XLA dumps them with --xla_dump_to=DIR, and beside another format "
                                                  "asked for, --xla_dump_hlo_as_proto or the like, only with "
                                                  "--xla_dump_hlo_as_text)\n")
    # a folder of dump folders not named rank<R> (the real dumps'): it said how to make dumps
    real = REPO / "tests" / "data" / "real" / "hlo"
    res = perfkit(real)
    assert res.returncode == 2 and res.stderr == (
        f"perfkit: {real}: no *after_optimizations.txt here, but 4 of its folders hold dumps (amd_te_fused_attn, "
        f"mi300_jax08_attention, mi300_jax08_gemm, mi300_jax_conv_08): give one per rank "
        f"(`perfkit hlo-diff {real}/*`)\n")


def test_module_filter(dumps_copy):
    folder = dumps_copy("array")
    (folder / "rank1" / "module_0005.jit_log_value.cpu_after_optimizations.txt").write_text(HELPER_MODULE)
    assert [m["name"] for m in check(folder)["modules"]] == ["jit_step", "jit_log_value"]
    r = compare_ranks(resolve([folder])[0], module_filter="jit_step")
    assert [m["name"] for m in r["modules"]] == ["jit_step"]
    res = perfkit(folder, "--module", "no_such")
    assert res.returncode == 2 and "no module whose name contains 'no_such'" in res.stderr


HELD_PARSES = ("import perfkit.hlo.load as load\n"
               "load.pool_size = lambda workers, distinct: 2  # a worker for these small dumps\n"
               "load.load_module = busy  # the parses busy until stopped\n")


@pytest.mark.parametrize("stop", ["Ctrl-C", "the command killed"])  # as HeldCommand.ends_with_its_workers takes them
def test_parse_workers_end_with_the_command(real_dumps, held_command, stop):
    """Ctrl-C (to the process group, as a terminal sends it) stops hlo-diff with one line and no worker's
    traceback, also when it comes while the worker is still being set up; a SIGKILL of the command takes its
    parse worker with it."""
    held_command.ends_with_its_workers(HELD_PARSES, ["hlo-diff", str(real_dumps["constant"])], stop, n=1)


def test_a_worker_killed_mid_parse_ends_with_one_line(dumps_copy):
    """The out-of-memory killer's SIGKILL of a parse worker: one line (BadInput's), not a traceback."""
    folder = dumps_copy("array")
    rename_everything(folder, 2)  # two distinct files: the worker parses one of them
    kill = ("here, answers = os.getpid(), load._answers\n"
            "load._answers = lambda *a: answers(*a) if os.getpid() == here else os.kill(os.getpid(), 9)\n")
    assert in_two_workers(folder, prelude=kill) == {
        "path": None, "reason": "an hlo parse worker process ended before its task was done (killed? out of memory?)"}


def test_pipeline_stages_are_roles_not_missing_modules(dumps_copy):
    """Ranks 0-1 compile ``jit_stage0``, ranks 2-3 ``jit_stage1`` (the demonstration's step, renamed: both
    hold a collective-permute): two roles, each module compared across its own ranks, none missing."""
    folder = dumps_copy("array")
    for r in range(4):
        rename_module(folder, r, f"jit_stage{r // 2}")
    r = check(folder)
    assert r["roles"] == [{"ranks": [0, 1], "modules": ["jit_stage0"]}, {"ranks": [2, 3], "modules": ["jit_stage1"]}]
    assert r["consistent"] is True
    assert [(m["name"], m["groups"], m["missing_ranks"]) for m in r["modules"]] == [
        ("jit_stage0", [[0, 1]], []), ("jit_stage1", [[2, 3]], [])]
    res = perfkit(folder)
    assert res.returncode == 0, res.stdout
    assert "4 ranks in 2 roles, 2 modules: consistent" in res.stdout
    assert "roles (ranks that compile modules of their own by design; each module compared across its role): " \
           "ranks 0, 1: jit_stage0; ranks 2, 3: jit_stage1" in res.stdout
    assert "missing" not in res.stdout


def test_a_run_whose_ranks_share_no_module_has_its_ranks_not_checked(dumps_copy, tmp_path):
    """Each rank a module of its own (four stages of one rank): nothing compared, so a run's summary does not call
    its ranks consistent (as hlo-diff no longer does)."""
    folder = dumps_copy("array")
    trial = tmp_path / "run" / "trials" / "00-a"
    for r in range(4):
        rename_module(folder, r, f"jit_stage{r}")
        shutil.copytree(folder / f"rank{r}", trial / f"rank{r}" / "xla_dump")
    got = variant_check(tmp_path / "run", "a")
    assert (got["consistent"], got["checked"]) == (None, "not checked: no module compiled by two or more ranks "
                                                         "(hlo-diff of trials/00-a: 4 ranks, 4 modules)")


def test_a_stage_whose_ranks_diverge_is_still_found(dumps_copy):
    """The same stages on the constant-offset dumps: rank 3 compiled a different ``jit_stage1`` than rank 2."""
    folder = dumps_copy("constant")
    for r in range(4):
        rename_module(folder, r, f"jit_stage{r // 2}")
    r = check(folder)
    assert len(r["roles"]) == 2 and r["consistent"] is False and r["divergent_ranks"] == [3]
    res = perfkit(folder)
    assert res.returncode == 1 and "rank 3 compiled a different jit_stage1 than rank 2" in res.stdout


def test_a_rank_lacking_a_module_is_no_role(dumps_copy):
    """Every rank compiles a helper module; rank 3 lacks the step (whose collective the others wait for):
    the step is missing there, not a role of its own (a role needs modules of its own on every side)."""
    folder = dumps_copy("array")
    for r in range(4):
        (folder / f"rank{r}" / "module_0009.jit_log_value.cpu_after_optimizations.txt").write_text(HELPER_MODULE)
    for path in (folder / "rank3").glob("module_*jit_step*.txt"):
        path.unlink()
    r = check(folder)
    assert r["roles"] == [] and r["consistent"] is False
    step = next(m for m in r["modules"] if m["name"] == "jit_step")
    assert step["missing_ranks"] == [3]
    assert "jit_step missing on rank 3" in perfkit(folder).stdout


_RING = """HloModule jit_step
{region}
ENTRY %main.0_spmd (p: f32[64,128]) -> f32[64,128] {{
  %p = f32[64,128]{{1,0}} parameter(0)
  %tanh.1 = f32[64,128]{{1,0}} tanh(%p)
  %ppermute.9 = f32[64,128]{{1,0}} collective-permute(%tanh.1), channel_id=1, source_target_pairs={{{{0,1}},{{1,2}},{{2,3}},{{3,0}}}}
  {second}
  ROOT %tanh.2 = f32[64,128]{{1,0}} tanh(%hop.2)
}}
"""
_REDUCER = """
%region_0.0 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add.0 = f32[] add(%a, %b)
}
"""
_HOP = ("%hop.2 = f32[64,128]{1,0} collective-permute(%ppermute.9), channel_id=2, "
        "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}")
_PSUM = "%hop.2 = f32[64,128]{1,0} all-reduce(%ppermute.9), channel_id=2, replica_groups={{0,1,2,3}}, to_apply=%region_0.0"


def test_a_collective_run_in_anothers_place_is_the_first_difference_not_its_reducer(tmp_path):
    """A newcomer's: rank 2 runs a psum where the others run the second ring hop. The first differing instruction
    read as the psum's reducer parameter (``%a = f32[] parameter(0)``, region_0.0) against the others' hop; it is
    the psum against the hop, both in the entry computation."""
    for rank in range(4):
        text = _RING.format(region=_REDUCER if rank == 2 else "", second=_PSUM if rank == 2 else _HOP)
        (tmp_path / f"rank{rank}" / "xla_dump").mkdir(parents=True)
        (tmp_path / f"rank{rank}" / "xla_dump" / "module_0000.jit_step.cpu_after_optimizations.txt").write_text(text)
    (d,) = check(tmp_path)["modules"][0]["divergences"]
    assert d["ranks"] == [2]
    first = d["first_difference"]
    assert (first["majority"]["text"], first["majority"]["computation"]) == (_HOP, "main.0_spmd")
    assert (first["rank"]["text"], first["rank"]["computation"]) == (_PSUM, "main.0_spmd")


HEAD = """HloModule jit_step, is_scheduled=true

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}

%scaled (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %neg = f32[8]{0} negate(%p)
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
"""
ALL_REDUCE = "  %ar = f32[8]{0} all-reduce(%x), channel_id=1, replica_groups={{0,1,2}}, to_apply=%sum\n"
PAIRS = "channel_id=2, source_target_pairs={{0,1},{1,2},{2,0}}"


def first_collective(tmp_path, majority: str, rank: str) -> dict:
    """Ranks 0 and 1 compile ``majority``'s ENTRY body, rank 2 ``rank``'s; rank 2's divergence."""
    for r, body in enumerate([majority, majority, rank]):
        (tmp_path / f"rank{r}").mkdir(exist_ok=True)
        (tmp_path / f"rank{r}" / "module_0001.jit_step.cpu_after_optimizations.txt").write_text(HEAD + body + "}\n")
    (d,) = check(tmp_path)["modules"][0]["divergences"]
    return d


def test_the_first_differing_collective_is_named(tmp_path):
    """Rank 2 runs an extra all-reduce before the permute: ranks pair collectives in order, so its second
    collective (the all-reduce, line 18) is where it parts from the others, who have none in its place (their
    permute, line 17, is its permute's counterpart, not the all-reduce's). The first differing instruction is the
    new fusion's body, no collective; the JSON and the text name the collective apart."""
    permute = f"  %cp = f32[8]{{0}} collective-permute(%ar), {PAIRS}\n"
    extra = ("  %f = f32[8]{0} fusion(%ar), kind=kLoop, calls=%scaled\n"
             "  %ar.2 = f32[8]{0} all-reduce(%f), channel_id=3, replica_groups={{0,1,2}}, to_apply=%sum\n")
    root = "  ROOT %out = f32[8]{0} add(%cp, %ar)\n"
    d = first_collective(tmp_path, ALL_REDUCE + permute + root, ALL_REDUCE + extra + permute + root)
    assert d["first_difference"]["rank"]["computation"] == "scaled"
    first = d["first_collective"]
    assert (first["index"], first["count"], first["only_on"]) == (2, {"majority": 2, "rank": 3}, "rank")
    assert first["majority"] is None and first["paths"]["majority"] is None
    assert (first["rank"]["text"].split(" =")[0], first["rank"]["line"]) == ("%ar.2", 18)
    res = perfkit(tmp_path)
    assert res.returncode == 1 and ("first differing collective: #2 (2 on rank 0, 3 on rank 2, rank 2's not on "
                                    "rank 0):\n        rank 0: missing (no collective there pairs with rank 2's #2)\n"
                                    "        rank 2: %ar.2 = ") in res.stdout


def test_a_skipped_hop_is_the_first_differing_collective_not_where_the_count_runs_out(tmp_path):
    """Two hops of equal permutes, a fusion between them; rank 2 skips the first. Paired in order, its
    collectives part only at #3 (its second permute looks like the others' first); the hop it lacks is #2."""
    ring = (ALL_REDUCE + f"  %cp = f32[8]{{0}} collective-permute(%ar), {PAIRS}\n"
            "  %f = f32[8]{0} fusion(%cp), kind=kLoop, calls=%scaled\n"
            f"  ROOT %cp.2 = f32[8]{{0}} collective-permute(%f), {PAIRS}\n")
    skip = (ALL_REDUCE + "  %f = f32[8]{0} fusion(%ar), kind=kLoop, calls=%scaled\n"
            f"  ROOT %cp.2 = f32[8]{{0}} collective-permute(%f), {PAIRS}\n")
    first = first_collective(tmp_path, ring, skip)["first_collective"]
    assert (first["index"], first["count"], first["only_on"]) == (2, {"majority": 3, "rank": 2}, "majority")
    assert (first["majority"]["text"].split(" =")[0], first["majority"]["line"]) == ("%cp", 17)


def test_the_same_collectives_around_other_fusions_are_no_differing_collective(tmp_path):
    """A fusion decision moves the all-reduce onto a fusion's output: another program, the same collectives."""
    fused = "  %f = f32[8]{0} fusion(%x), kind=kLoop, calls=%scaled\n" + ALL_REDUCE.replace("(%x)", "(%f)")
    d = first_collective(tmp_path, ALL_REDUCE.replace("%ar =", "ROOT %ar ="), fused.replace("%ar =", "ROOT %ar ="))
    assert d["first_difference"] is not None and d["first_collective"] is None


def test_a_collective_one_rank_skips_has_its_receive_buffer_missing_not_moved():
    """The skipped-collective repro's dumps (rank 3 compiles its step without the second of three collective-permutes):
    hlo-diff said '1 of 3 collective receive buffers moved ... #3 receive offset 0 -> -', where rank 3 has no third
    collective-permute at all. Rank 3's two receive buffers sit where rank 0's first two do (offset 0 in both buffer
    assignments), so none moved; the third is missing on rank 3. The data: trial 01-skip's rank0 and rank3 dumps of
    `perfkit run cases/repro/skipped_collective.yaml` (jax 0.10.2 on CPU), the program and its buffer assignment."""
    folder = REPO / "tests" / "hlo" / "data" / "skipped_collective"
    (d,) = check(folder)["modules"][0]["divergences"]
    b = d["buffers"]
    assert (b["receive_count"], b["receive_moved"], b["receive_only_majority"], b["receive_only_rank"]) == (3, 0, 1, 0)
    res = perfkit(folder)
    assert res.returncode == 1
    assert ("buffers: temp 32,768 -> 32,768 B (+0); 0 of 2 collective receive buffers on both moved; 1 missing on "
            "rank 3 (no such collective there)") in res.stdout
    assert "collective-permute #2 receive buffer missing on rank 3 (offset 0 on rank 0), 32,768 B" in res.stdout
    assert "moved\n" not in res.stdout and "0 -> -" not in res.stdout


def test_receive_buffers_pair_as_the_collectives_align():
    """Hand-read from the two programs: rank 0 runs %ppermute.9, .10, .11 (its collective-permutes #1-#3), rank 3
    %ppermute.6 and .7, the counterparts of rank 0's .9 and .11 (.7 permutes %wrapped_tanh.2 and is ROOT, as .11 is):
    rank 0's #2 is the one rank 3 skips. Both buffer assignments place each at offset 0 (.9 / .6 and .10 in the
    temp allocation 3, .11 / .7 in the output allocation 1), so the pairs did not move."""
    (d,) = check(REPO / "tests" / "hlo" / "data" / "skipped_collective")["modules"][0]["divergences"]
    rows = [(r["collective"], r["majority"], r["rank"], r["delta"]) for r in d["buffers"]["receive"]]
    assert rows == [("collective-permute #1", 0, 0, 0), ("collective-permute #2", 0, None, None),
                    ("collective-permute #3", 0, 0, 0)]


def test_a_buffer_after_a_skipped_collective_is_compared_with_its_counterpart(tmp_path):
    """The skipped-collective dumps with rank 0's %ppermute.11 and rank 3's %ppermute.7 (its counterpart) both
    placed at offset 32,768 of a 65,536 B output allocation: they did not move. Compared by position, rank 0's #2
    (%ppermute.10, offset 0) would read as moved to rank 3's #2 (%ppermute.7, offset 32,768)."""
    folder = tmp_path / "skipped"
    shutil.copytree(REPO / "tests" / "hlo" / "data" / "skipped_collective", folder)
    for rank, name in ((0, "ppermute.11"), (3, "ppermute.7")):
        (path,) = (folder / f"rank{rank}").glob("*-buffer-assignment.txt")
        text = path.read_text().replace("allocation 1: size 32768", "allocation 1: size 65536")
        text = re.sub(rf"(<\d+ {re.escape(name)} @0> \(size=32768,offset=)0\)", r"\g<1>32768)", text)
        assert text.count("offset=32768") == 1
        path.write_text(text)
    b = check(folder)["modules"][0]["divergences"][0]["buffers"]
    assert (b["receive_moved"], b["receive_only_majority"], b["receive_only_rank"]) == (0, 1, 0)
    assert [(r["collective"], r["majority"], r["rank"]) for r in b["receive"]] == [
        ("collective-permute #1", 0, 0), ("collective-permute #2", 0, None), ("collective-permute #3", 32768, 32768)]
