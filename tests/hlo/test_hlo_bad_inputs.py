"""The bad-input campaign for HLO text, buffer assignments and memory reports (issue 19; the other readers
are in tests/campaign): damaged copies of real dumps through ``perfkit hlo-diff``, ranks and ``--ab``. Each
ends with exit 0, 1 or 2, a refusal in one line, never a traceback, within ``TIME_CAP_S``.

The seeds are real: the TPU and GPU dumps in tests/hlo/data and the suite's own 4-process jax.distributed
dumps. The damage is tests/campaign's (truncated, bits flipped, bytes inserted or zeroed, blocks
duplicated, lines deleted or garbled), plus invalid UTF-8. CI runs a few derandomized examples (seconds);
``PERFKIT_CAMPAIGN=1`` runs 2,000.
"""

import os
import random
import re
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "campaign"))
import campaign_inputs as ci  # noqa: E402 - tests/campaign's mutations, caps and checks

DATA = Path(__file__).resolve().parent / "data"
LONG = os.environ.get("PERFKIT_CAMPAIGN") == "1"
TIME_CAP_S = 10.0  # per attempt: the largest seed parses in ~0.05 s; a regex that backtracks takes minutes


def invalid_utf8(data: bytes, rng: random.Random) -> bytes:
    """A byte sequence that is not UTF-8 (a stray Latin-1 byte, a lone continuation byte, a cut sequence)."""
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice([b"\xe9", b"\x80", b"\xff\xfe", "é".encode()[:1]]) + data[at:]


@pytest.fixture(scope="module")
def seed_sets(real_dumps, tmp_path_factory) -> dict[str, Path]:
    """Rank folders of real dumps: the TPU ring on two ranks, the TPU ring against the GPU async module, and
    the demo's four ranks (program, buffer assignment and memory report)."""
    sets = dict(real_dumps)
    for name, ranks in (("tpu", ["tpu_ring", "tpu_ring"]), ("tpu_gpu", ["tpu_ring", "gpu_async"])):
        folder = sets[name] = tmp_path_factory.mktemp(name)
        for r, module in enumerate(ranks):
            (folder / f"rank{r}").mkdir()
            stem = f"module_0001.jit_{module}.tpu_after_optimizations"
            shutil.copy(DATA / f"{module}.txt", folder / f"rank{r}" / f"{stem}.txt")
            shutil.copy(DATA / f"{module}-buffer-assignment.txt", folder / f"rank{r}" / f"{stem}-buffer-assignment.txt")
    return sets


def damaged_copy(seed: Path, rng: random.Random, work: Path) -> tuple[Path, str]:
    """``work/in``: a copy of a seed set's dump files with one of them damaged; (folder, what was done)."""
    dest = work / "in"
    files = sorted(p for p in seed.rglob("*after_optimizations*.txt") if not p.name.endswith("-values.txt")
                   and "live-range" not in p.name)
    for p in files:
        (dest / p.parent.relative_to(seed)).mkdir(parents=True, exist_ok=True)
        shutil.copy(p, dest / p.relative_to(seed))
    victim = rng.choice(files)
    data, ops = ci.mutate(victim.read_bytes(), rng)
    if rng.random() < 0.25:
        data, ops = invalid_utf8(data, rng), ops + ["invalid_utf8"]
    (dest / victim.relative_to(seed)).write_bytes(data)
    return dest, f"{victim.relative_to(seed)} {'+'.join(ops) or 'unchanged'}"


@settings(max_examples=2000 if LONG else 12, deadline=None, derandomize=not LONG, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), ab=st.booleans())
def test_a_damaged_dump_ends_in_an_exit_code_never_a_traceback(rng, ab, seed_sets, tmp_path_factory):
    work = tmp_path_factory.mktemp("hlo")
    (work / "tmp").mkdir()
    seed = seed_sets[rng.choice(sorted(seed_sets))]
    folder, what = damaged_copy(seed, rng, work)
    args = ["hlo-diff", "--ab", str(folder / "rank0"), str(folder / "rank1")] if ab else ["hlo-diff", str(folder)]
    with ci.time_limit(TIME_CAP_S):
        out = ci.run_cli([*args, "--json"])
    problems = ci.problems(out, work) + ([f"exit code {out.exit_code}"] if out.exit_code not in (0, 1, 2) else [])
    assert not problems, f"{what} ({' '.join(args[:2])}): {problems}\n{out.output[-2000:]}"
    shutil.rmtree(work)


def test_truncated_metadata_is_parsed_in_linear_time(real_dumps, tmp_path):
    """A dump cut inside a line's metadata={...}: the metadata regex backtracked for minutes on such a line
    (exponential in the quoted op_name's length); now a one-line refusal at once."""
    work = tmp_path
    (work / "tmp").mkdir()
    for r in range(2):
        src = next((real_dumps["constant"] / f"rank{r}").glob("*jit_step*after_optimizations.txt"))
        (work / "in" / f"rank{r}").mkdir(parents=True)
        text = src.read_text()
        # Cut just after the longest op_name's closing quote: metadata={op_name="..." and no closing brace.
        names = re.finditer(r'metadata=\{op_name="[^"]*"', text)
        cut = max(names, key=lambda m: len(m.group())).end() if r else len(text)
        (work / "in" / f"rank{r}" / src.name).write_text(text[:cut])
    with ci.time_limit(TIME_CAP_S):
        out = ci.run_cli(["hlo-diff", str(work / "in")])
    assert out.exit_code == 2 and not ci.problems(out, work) and "is not closed" in out.output, out.output


@pytest.mark.parametrize("cut", ["line", "mid-line"])
def test_a_truncated_buffer_assignment_is_refused_not_a_divergence(tmp_path, cut):
    """A rank's buffer assignment cut short (at a line's start, or inside a line) lost its later collectives'
    receive buffers: hlo-diff read that as the rank's receive buffers moving (exit 1, a divergence that is not
    there). The program beside it has the collective, so the file is refused."""
    (tmp_path / "tmp").mkdir()
    folder = tmp_path / "in"
    stem = "module_0001.jit_tpu_ring.tpu_after_optimizations"
    for r in range(2):
        (folder / f"rank{r}").mkdir(parents=True)
        shutil.copy(DATA / "tpu_ring.txt", folder / f"rank{r}" / f"{stem}.txt")
    text = (DATA / "tpu_ring-buffer-assignment.txt").read_text()
    at = text.index(" value: <6 collective-permute-start.1{1}") + (0 if cut == "line" else 20)
    (folder / "rank0" / f"{stem}-buffer-assignment.txt").write_text(text)
    damaged = folder / "rank1" / f"{stem}-buffer-assignment.txt"
    damaged.write_text(text[:at])
    out = ci.run_cli(["hlo-diff", str(folder)])
    assert out.exit_code == 2 and not ci.problems(out, tmp_path), out.output
    assert out.output.startswith(f"perfkit: {damaged}: "), out.output
