"""A hang's parting compares the parted ranks' programs against a majority rank's program: where the majority's first
chip's rank has no dump, against the next majority rank with one, named; where none has one, it says the programs
were not compared, and why. The dumps: the skipped-collective repro's real ones (tests/hlo/data/skipped_collective,
`perfkit run cases/repro/skipped_collective.yaml`, jax 0.10.2 on CPU): rank 0's three collective-permutes
(%ppermute.9, .10, .11) for ranks 0-2, rank 3's two (%ppermute.6, .7, the counterparts of .9 and .11: it skips the
second hop, .10, collective 2 of 3, read by hand off the two files). The traces: one hand-built XSpace per rank, as
that hang leaves them: rank 3 runs ahead, two steps of its two hops; ranks 0-2 run step 0's three hops, then step 1's
first before the profile is cut."""

import re
import shutil
from pathlib import Path

from test_tail_parting import rank_trace

from perfkit.trace import parting

DUMPS = Path(__file__).resolve().parents[1] / "hlo" / "data" / "skipped_collective"
MAJORITY_HOPS = ["ppermute.9", "ppermute.10", "ppermute.11"]
SKIPPING_HOPS = ["ppermute.6", "ppermute.7"]


def permutes(rank: int) -> list[str]:
    """The collective-permutes of a rank's dump, in order, by a regex of their own."""
    text = next((DUMPS / f"rank{rank}").glob("*after_optimizations.txt")).read_text()
    return re.findall(r"%(\S+) = f32\[64,128\]\{1,0\} collective-permute\(", text)


def hang(tmp_path: Path, dumped: list[int]) -> list[Path]:
    """The four ranks' traces, and the real dumps of the ranks ``dumped`` beside them (rank 0's for ranks 0-2)."""
    assert permutes(0) == MAJORITY_HOPS and permutes(3) == SKIPPING_HOPS
    for rank in range(4):
        folder = tmp_path / f"rank{rank}"
        if rank == 3:
            rank_trace(folder / "trace" / "h.xplane.pb", [SKIPPING_HOPS] * 2, [], permutes=tuple(SKIPPING_HOPS))
        else:
            rank_trace(folder / "trace" / "h.xplane.pb", [MAJORITY_HOPS], MAJORITY_HOPS[:1],
                       permutes=tuple(MAJORITY_HOPS))
        if rank in dumped:
            shutil.copytree(DUMPS / f"rank{0 if rank < 3 else 3}", folder / "xla_dump")
    return sorted(tmp_path.glob("rank*/trace"))


def test_without_the_first_majority_rank_s_dump_another_majority_rank_s_is_compared(tmp_path):
    """Rank 0's dump removed: rank 3's program is compared with rank 1's, which lacks nothing of it, and the parting
    says whose it read. It said nothing of programs before (no `programs`, no sentence on rank 3's program)."""
    chips, first = parting.parting_traces(hang(tmp_path, [1, 2, 3]))
    assert [c["rank"] for c in first["majority"]] == [0, 1, 2]
    assert [(p["rank"], p["how"]) for p in first["parted"]] == [(3, "skipped")]
    assert first["program_rank"] == 1
    change = first["programs"]["3"]
    assert [(c["op"], c["index"]) for c in change["lacks"]] == [("ppermute.10", 1)] and change["adds"] == []
    assert (change["majority_count"], change["count"], first["program_count"]) == (3, 2, 3)
    text = parting.describe(first, chips, "hung")
    assert "Rank 3's program has 2 collectives where the majority's has 3: it lacks ppermute.10 (collective 2 of 3)" \
        in text
    assert text.endswith("; the program compared with is rank 1's (rank 0 has no dump of jit_step beside its trace)")


def test_with_no_majority_rank_s_dump_the_programs_are_said_not_compared(tmp_path):
    """Only rank 3's dump: no program to compare it with; the parting says so and why."""
    chips, first = parting.parting_traces(hang(tmp_path, [3]))
    assert first["program_rank"] is None and "programs" not in first
    assert parting.describe(first, chips, "hung").endswith(
        ". Programs not compared: no rank of the majority (ranks 0, 1, 2) has a dump of jit_step beside its trace")


def test_with_the_first_majority_rank_s_dump_it_is_compared(tmp_path):
    chips, first = parting.parting_traces(hang(tmp_path, [0, 1, 2, 3]))
    assert first["program_rank"] == 0 and [c["op"] for c in first["programs"]["3"]["lacks"]] == ["ppermute.10"]
    assert first["majority_program"] == [] and "compared with is" not in parting.describe(first, chips, "hung")
