"""hlo-diff names the first differing instruction inside a called computation with the calls that reach it from
ENTRY: a fusion's body, a fusion in a while loop's body. Real CPU dumps (jax 0.10.2, tests/hlo/called_dumps.py):
ranks 0 and 1 compiled with the constant 2.0, rank 2 with 3.0; read by hand, the two compiles differ in one
constant each, inside the called computation ``fused_computation`` (jit_f: line 32, reached by ENTRY's
``%ynn_fusion``, line 45; jit_g: line 31, reached by ENTRY's ``%while.5``, line 72, whose body ``region_0.2`` runs
``%multiply_add_fusion``, line 48). The report named the computation alone, which names nothing across two
programs, and which of its callers it was left unsaid."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from hlo_dumps import REPO

DATA = Path(__file__).resolve().parent / "data" / "called"


def _ranks(tmp_path: Path) -> Path:
    for rank, constant in enumerate(("c2", "c2", "c3")):
        shutil.copytree(DATA / constant, tmp_path / f"rank{rank}")
    return tmp_path


def _hlo_diff(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit.cli", "hlo-diff", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def _first(result: dict, module: str) -> dict:
    (m,) = [m for m in result["modules"] if m["name"] == module]
    (d,) = m["divergences"]
    assert d["ranks"] == [2] and d["against_rank"] == 0
    return d["first_difference"]


def test_the_first_difference_inside_a_fusion_and_a_while_body_names_its_path(tmp_path):
    folder = _ranks(tmp_path)
    res = _hlo_diff(folder, "--json")
    assert res.returncode == 1, res.stderr
    result = json.loads(res.stdout)["checks"][0]

    fusion = _first(result, "jit_f")
    assert (fusion["majority"]["text"], fusion["rank"]["text"]) == ("%constant.2 = f32[] constant(2)",
                                                                    "%constant.2 = f32[] constant(3)")
    assert (fusion["rank"]["computation"], fusion["rank"]["line"]) == ("fused_computation", 32)
    through_fusion = [{"computation": "main.2", "instruction": "ynn_fusion", "line": 45, "via": "calls",
                       "calls": "fused_computation"}]
    assert fusion["paths"] == {"majority": through_fusion, "rank": through_fusion, "majority_next": None}

    loop = _first(result, "jit_g")
    assert (loop["majority"]["text"], loop["rank"]["text"]) == ("%constant.1 = f32[] constant(2)",
                                                                "%constant.1 = f32[] constant(3)")
    assert (loop["rank"]["computation"], loop["rank"]["line"]) == ("fused_computation", 31)
    through_loop = [{"computation": "main.4", "instruction": "while.5", "line": 72, "via": "body",
                     "calls": "region_0.2"},
                    {"computation": "region_0.2", "instruction": "multiply_add_fusion", "line": 48, "via": "calls",
                     "calls": "fused_computation"}]
    assert loop["paths"] == {"majority": through_loop, "rank": through_loop, "majority_next": None}

    text = _hlo_diff(folder).stdout.splitlines()
    rank_line = text.index("        rank 2: %constant.1 = f32[] constant(3) (fused_computation, line 31)")
    assert text[rank_line + 1] == ("          inside main.4: %while.5 (line 72) -body-> region_0.2: "
                                   "%multiply_add_fusion (line 48) -calls-> fused_computation")
    assert ("          inside main.2: %ynn_fusion (line 45) -calls-> fused_computation") in text


def test_an_entry_instruction_has_an_empty_path(tmp_path):
    """The path lists calls only: an instruction of ENTRY itself has none (nothing printed under it)."""
    folder = _ranks(tmp_path)
    for rank in (0, 1):
        path = next((folder / f"rank{rank}").glob("*jit_f*"))
        # rank 2 keeps an extra copy of ENTRY's parameter on the others: the first difference is in ENTRY
        path.write_text(path.read_text().replace("  ROOT %ynn_fusion", "  %copy.9 = f32[64,128]{1,0} copy(%x.1)\n"
                                                                       "  ROOT %ynn_fusion"))
    result = json.loads(_hlo_diff(folder, "--json", "--module", "jit_f").stdout)["checks"][0]
    first = _first(result, "jit_f")
    assert first["majority"]["text"] == "%copy.9 = f32[64,128]{1,0} copy(%x.1)"
    assert first["paths"]["majority"] == []
