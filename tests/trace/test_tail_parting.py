"""Where chips part (perfkit.trace.parting, perfkit trace tail): hand-built per-chip traces of a hang, one
TPU-shaped XSpace per rank, whose collective sequences are written out below, and per-rank XLA dumps."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from report.run_fixtures import whole_record
from trace_builders import TPU_START_NS, U, started

from perfkit.cli import cli
from perfkit.trace import events, parting, shards, xplane
from perfkit.trace.synthetic import XSpaceWriter

PERMUTES = ("cp.1", "cp.2", "cp.3")  # one ring hop each, f32[64,128]


def rank_trace(path, steps: list[list[str]], cut: list[str] | None, first: int = 0,
               permutes: tuple[str, ...] = PERMUTES) -> None:
    """One chip: each step [100 us apart), numbered from ``first``, runs a fusion then the listed collective-permutes
    (5 us each; its program's are ``permutes``); after the last step, a fusion and the ``cut`` ones ran with no step
    marker (the profile stopped by a timer), none where ``cut`` is None (the profile stopped after the last step).
    Its host is named for its rank folder (``rank<R>/trace/``): each rank a process of its own, as no copy is."""
    space = XSpaceWriter(path.parent.parent.name)
    space.program(5, "jit_step", [("fusion.1", "fusion", "f32[64,128]")]
                  + [(n, "collective-permute", "f32[64,128]") for n in permutes])
    plane = space.plane("/device:TPU:0")
    marks, ops = plane.line("Steps", 0), plane.line("XLA Ops", 0)

    def run(start, names):
        ops.event(plane.op("fusion.1", program_id=5, hlo_category="loop fusion"), start * U, 10 * U)
        for i, name in enumerate(names):
            ops.event(plane.op(name, program_id=5, hlo_category="collective-permute"), (start + 10 + 5 * i) * U, 5 * U)

    for s, names in enumerate(steps):
        marks.event(plane.op(str(first + s)), 100 * s * U, 100 * U)
        run(100 * s, names)
    if cut is not None:
        run(100 * len(steps), cut)
    started(space, TPU_START_NS).save(path)  # the ranks' profiles started together, as one launch's do


def dump(folder, names: tuple[str, ...]) -> None:
    """A rank's XLA dump of jit_step: a hop (collective-permute) per name, a matmul before each."""
    lines = ["HloModule jit_step, is_scheduled=true", "",
             "ENTRY %main (p: f32[64,128], w: f32[128,128]) -> f32[64,128] {",
             "  %p = f32[64,128]{1,0} parameter(0)", "  %w = f32[128,128]{1,0} parameter(1)"]
    x = "p"
    for i, name in enumerate(PERMUTES):
        lines.append(f"  %dot.{i} = f32[64,128]{{1,0}} dot(%{x}, %w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}")
        x = f"dot.{i}"
        if name in names:
            lines.append(f"  %{name} = f32[64,128]{{1,0}} collective-permute(%{x}), channel_id=1, "
                         "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}")
            x = name
    lines += [f"  ROOT %out = f32[64,128]{{1,0}} copy(%{x})", "}", ""]
    folder.mkdir(parents=True)
    (folder / "module_0000.jit_step.cpu_after_optimizations.txt").write_text("\n".join(lines))


@pytest.fixture
def hung_trial(tmp_path):
    """Four ranks; rank 3's program lacks cp.2. Its collectives pair with the others' in the order they come,
    so it runs ahead: steps 0 and 1 with two hops each, then waits. Ranks 0-2 ran step 0 whole, and in
    step 1 (its marker never closed) rank 0 and 1 cp.1, rank 2 cp.1 and cp.2, before the cut."""
    skipped = ["cp.1", "cp.3"]
    for rank in range(4):
        folder = tmp_path / f"rank{rank}"
        if rank == 3:
            rank_trace(folder / "trace" / "h.xplane.pb", [skipped, skipped], [])
        else:
            rank_trace(folder / "trace" / "h.xplane.pb", [list(PERMUTES)], ["cp.1", "cp.2"] if rank == 2 else ["cp.1"])
        dump(folder / "xla_dump", tuple(skipped) if rank == 3 else PERMUTES)
    return tmp_path


@pytest.fixture(params=["together", "apart"])
def read(request, monkeypatch):
    """The traces read together, or each rank's file a shard of its own in a worker (the size thresholds
    lowered; reading them together fails the test)."""
    if request.param == "apart":
        monkeypatch.setattr(xplane, "PARALLEL_BYTES", 0)
        monkeypatch.setattr(shards, "may_start_workers", lambda: True)
        monkeypatch.setattr(shards, "usable_cores", lambda: 2)
        monkeypatch.setattr(events, "load", lambda *args, **kwargs: pytest.fail("read together"))
    return request.param


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's, where other tests imported it
def test_the_rank_and_the_collective_named(hung_trial, read):
    paths = sorted(hung_trial.glob("rank*/trace"))
    chips, first = parting.parting_traces(paths)
    assert chips[["rank", "completed", "last_op", "waiting_at", "waiting_from"]].values.tolist() == [
        [0, 4, "cp.1", "cp.2", "program"], [1, 4, "cp.1", "cp.2", "program"], [2, 5, "cp.2", "cp.3", "program"],
        [3, 4, "cp.3", "cp.1", "program"]]
    # step 0: all ran cp.1 and a second permute alike; at the third, rank 3 has none and went on to step 1
    assert (first["step"], first["index"], first["op"], first["in_step"]) == (0, 2, "cp.3", 3)
    assert [c["rank"] for c in first["majority"]] == [0, 1, 2]
    assert first["parted"] == [{"rank": 3, "device": 0, "how": "skipped", "op": None, "kind": None, "in_step": 2}]
    # the programs tell which one it skipped: the traces cannot (cp.2 and cp.3 look alike)
    assert first["programs"] == {"3": {"lacks": [{"op": "cp.2", "opcode": "collective-permute", "index": 1}],
                                       "adds": [], "majority_count": 3, "count": 2}}
    assert "rank 3 device 0 skipped, 2 collectives there against 3" in parting.describe(first)
    assert "it lacks cp.2 (collective 2 of 3)" in parting.describe(first)
    # which is where they part, said (a newcomer read "collective 3 there" and "collective 2 of 3" as two answers)
    assert parting.describe(first).endswith("it lacks cp.2 (collective 2 of 3); so the chips first differ at "
                                            "collective 2, the first it lacks (the traces, paired in order, part "
                                            "only at 3)")


def test_a_rank_running_an_extra_collective_is_the_one_named(tmp_path):
    """The mirror of the hang above: rank 3's program adds cp.2 to the others' cp.1, cp.3, so it runs three hops a
    step where they run two. In order, the chips agree on two places of step 0 (cp.2 and cp.3 look alike); at the
    third, rank 3 ran cp.3 and ranks 0-2, with none there, went on to step 1. They are the majority and rank 3 ran
    an extra collective (a newcomer's: ranks 0, 2, 3 were each said to lack a collective the majority's program
    has, the majority being rank 1 alone, the only chip with a collective there)."""
    for rank in range(4):
        folder = tmp_path / f"rank{rank}"
        if rank == 3:
            rank_trace(folder / "trace" / "h.xplane.pb", [list(PERMUTES)], ["cp.1"])
        else:
            rank_trace(folder / "trace" / "h.xplane.pb", [["cp.1", "cp.3"]] * 2, [])
        dump(folder / "xla_dump", PERMUTES if rank == 3 else ("cp.1", "cp.3"))
    chips, first = parting.parting_traces(sorted(tmp_path.glob("rank*/trace")))
    assert (first["step"], first["index"], first["op"], first["in_step"], first["extra"]) == (0, 2, "cp.3", 2, True)
    assert [c["rank"] for c in first["majority"]] == [0, 1, 2]
    assert first["parted"] == [{"rank": 3, "device": 0, "how": "extra collective", "op": "cp.3",
                               "kind": "collective-permute", "in_step": 3}]
    added = {"op": "cp.2", "opcode": "collective-permute", "index": 1}
    assert first["programs"] == {"3": {"lacks": [], "adds": [added], "majority_count": 2, "count": 3}}
    assert parting.describe(first) == (
        "chips part at step 0, collective 3 there: rank 0 device 0, rank 1 device 0, rank 2 device 0 ran none and "
        "went on; rank 3 device 0 ran an extra collective (cp.3), 3 collectives there against 2. Rank 3's program has "
        "3 "
        "collectives where the majority's has 2: it adds cp.2; so the chips first differ at collective 2, the first "
        "it adds (the traces, paired in order, part only at 3)")


def test_an_extra_collective_in_the_one_traced_step(tmp_path):
    """As above with one traced step a chip, each whole (its marker closed): the chips without a third collective
    finished the step, so they went on too, and rank 3's is the extra one (with nothing after it, the others had
    read as never arriving there)."""
    for rank in range(4):
        rank_trace(tmp_path / f"rank{rank}" / "trace" / "h.xplane.pb", [list(PERMUTES) if rank == 3 else
                                                                         ["cp.1", "cp.3"]], [])
    chips, first = parting.parting_traces(sorted(tmp_path.glob("rank*/trace")))
    assert (first["step"], first["index"], first["op"], first["extra"]) == (0, 2, "cp.3", True)
    assert [c["rank"] for c in first["majority"]] == [0, 1, 2]
    assert first["parted"] == [{"rank": 3, "device": 0, "how": "extra collective", "op": "cp.3",
                               "kind": "collective-permute", "in_step": 3}]


def rank0_ran_the_second_hop_alone(root: Path) -> None:
    """Four ranks' traces under ``root`` with no step marker: rank 0 ran cp.1 and cp.2, ranks 1-3 cp.1 alone."""
    rank_trace(root / "rank0" / "trace" / "h.xplane.pb", [], ["cp.1", "cp.2"])
    for rank in (1, 2, 3):
        rank_trace(root / f"rank{rank}" / "trace" / "h.xplane.pb", [], ["cp.1"])


def test_the_ranks_that_run_the_majority_s_program_are_said_so(tmp_path):
    """A hang where one rank's program differs and the others wait: rank 0 ran cp.2, ranks 1-3 have no record of it,
    but only rank 2's program lacks it (a newcomer's: three ranks 'never arrived' and the one chip that ran the
    collective named, the rank at fault only in the program sentence after)."""
    rank0_ran_the_second_hop_alone(tmp_path)
    for rank in range(4):
        dump(tmp_path / f"rank{rank}" / "xla_dump", ("cp.1", "cp.3") if rank == 2 else PERMUTES)
    chips, first = parting.parting_traces(sorted(tmp_path.glob("rank*/trace")))
    assert [p["how"] for p in first["parted"]] == ["not completed"] * 3 and first["majority_program"] == [1, 3]
    # a newcomer's: rank 0 completed the hop, which receives from rank 3, so rank 3 entered it; its trace ends
    # inside it (an op is written when it ends), yet the sentence said ranks 1-3 'never arrived'
    not_done = "did not complete it in its trace, 1 collective there against 2"
    assert parting.describe(first).startswith(
        f"chips part at collective 2 of the traces (they hold no step marker): cp.2 (collective-permute) on rank 0 "
        f"device 0; rank 1 device 0 "
        f"{not_done}; rank 2 device 0 {not_done}; rank 3 device 0 {not_done} (a profiler writes an op when it ends: "
        "rank 1 device 0 and rank 3 device 0, whose traces lack it, may be waiting inside it; rank 2's program lacks "
        "it). Rank 2's program")
    # rank 0 alone ran cp.2: its program is named, not 'the majority's' (a newcomer's: one chip of four)
    assert parting.describe(first).endswith("it lacks cp.2 (collective 2 of 3). Ranks 1, 3 run rank 0's "
                                            "program: rank 2's differs")


def test_a_rank_whose_hop_has_other_pairs_is_the_one_named(tmp_path):
    """A review's hang: rank 2's second hop reverses the ring's source_target_pairs (same opcode, shape and count).
    Programs compared by opcode and shape alone called ranks 1-3 the majority's program; rank 2's differs, as
    hlo-diff says."""
    rank0_ran_the_second_hop_alone(tmp_path)
    for rank in range(4):
        dump(tmp_path / f"rank{rank}" / "xla_dump", PERMUTES)
    ring, reversed_ring = "{{0,1},{1,2},{2,3},{3,0}}", "{{1,0},{2,1},{3,2},{0,3}}"
    hlo = tmp_path / "rank2" / "xla_dump" / "module_0000.jit_step.cpu_after_optimizations.txt"
    hop = "collective-permute(%dot.1), channel_id=1, source_target_pairs="
    hlo.write_text(hlo.read_text().replace(hop + ring, hop + reversed_ring))
    chips, first = parting.parting_traces(sorted(tmp_path.glob("rank*/trace")))
    assert first["majority_program"] == [1, 3] and first["program_count"] == 3
    assert first["programs"] == {"2": {
        "lacks": [{"op": "cp.2", "opcode": "collective-permute", "index": 1, "attrs": {"source_target_pairs": ring}}],
        "adds": [{"op": "cp.2", "opcode": "collective-permute", "index": 1,
                  "attrs": {"source_target_pairs": reversed_ring}}], "majority_count": 3, "count": 3}}
    assert parting.describe(first).endswith(
        f"Rank 2's program has as many collectives as rank 0's (3), but it runs cp.2 (collective-permute, "
        f"source_target_pairs={reversed_ring}) in place of cp.2 (collective 2 of 3), source_target_pairs={ring} in "
        "rank 0's. Ranks 1, 3 run rank 0's program: rank 2's differs")
    assert "rank 2's program runs cp.2 (collective-permute) with other source_target_pairs in its place" in \
        parting.describe(first)


def test_a_rank_with_no_dump_is_not_said_to_run_the_majority_s_program(tmp_path):
    """Rank 3 has no dump: its program is unknown, not the majority's."""
    rank0_ran_the_second_hop_alone(tmp_path)
    for rank in range(3):
        dump(tmp_path / f"rank{rank}" / "xla_dump", ("cp.1", "cp.3") if rank == 2 else PERMUTES)
    chips, first = parting.parting_traces(sorted(tmp_path.glob("rank*/trace")))
    assert first["majority_program"] == [1] and first["program_unknown"] == [3] and list(first["programs"]) == ["2"]
    assert parting.describe(first).endswith("Rank 1 runs rank 0's program: rank 2's differs; rank 3's program is "
                                            "unknown (no dump of jit_step beside its trace)")


def test_a_rank_that_runs_another_collective_in_a_hop_s_place_is_said_to(tmp_path):
    """A planted hang: rank 2 sums (an all-reduce) where the others pass the second hop. The sentence read 'it lacks
    ppermute.10 (collective 2 of 3); it adds psum_invariant.7', two changes where the program has one: another
    collective in that place, which the run's line says ('runs psum_invariant.7 where the others' run
    ppermute.10')."""
    rank0_ran_the_second_hop_alone(tmp_path)
    for rank in range(4):
        dump(tmp_path / f"rank{rank}" / "xla_dump", PERMUTES)
    hlo = tmp_path / "rank2" / "xla_dump" / "module_0000.jit_step.cpu_after_optimizations.txt"
    text = hlo.read_text().replace(
        "  %cp.2 = f32[64,128]{1,0} collective-permute(%dot.1), channel_id=1, "
        "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}",
        "  %ar.1 = f32[64,128]{1,0} all-reduce(%dot.1), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=%add"
    ).replace("dot(%cp.2", "dot(%ar.1")
    hlo.write_text(text.replace("ENTRY", "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
                                "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n\nENTRY"))
    chips, first = parting.parting_traces(sorted(tmp_path.glob("rank*/trace")))
    assert first["programs"] == {"2": {"lacks": [{"op": "cp.2", "opcode": "collective-permute", "index": 1}],
                                       "adds": [{"op": "ar.1", "opcode": "all-reduce", "index": 1}],
                                       "majority_count": 3, "count": 3}}
    assert parting.describe(first).endswith(
        "Rank 2's program has as many collectives as rank 0's (3), but it runs ar.1 (all-reduce) in place of cp.2 "
        "(collective 2 of 3). Ranks 1, 3 run rank 0's program: rank 2's differs")
    # rank 2's program has no cp.2 there, so its chip cannot be inside it: the clause said 'a chip whose trace lacks it
    # may be waiting inside it' of every chip (a newcomer's: psum_invariant.7 where the others ran ppermute.10)
    assert ("rank 3 device 0 did not complete it in its trace, 1 collective there against 2 (a profiler writes an op "
            "when it ends: rank 1 device 0 and rank 3 device 0, whose traces lack it, may be waiting inside it; "
            "rank 2's program runs ar.1 (all-reduce) in its place). Rank 2's program") in parting.describe(first)
    alone = {**first, "parted": [p for p in first["parted"] if p["rank"] == 2], "majority_program": []}
    assert parting.describe(alone).startswith(
        "chips part at collective 2 of the traces (they hold no step marker): cp.2 (collective-permute) on rank 0 "
        "device 0; rank 2 device 0 did not complete it in its trace, 1 collective there against 2 (rank 2's program "
        "runs ar.1 (all-reduce) in its place, so its chip is not inside it). Rank 2's program")
    # programs unknown: every such chip may be inside it, as before
    assert ("1 collective there against 2 (a profiler writes an op when it ends: a chip whose trace lacks it may be "
            "waiting inside it)") in parting.describe({**alone, "programs": None})
    lacking = {**alone, "programs": {"2": {**first["programs"]["2"], "adds": []}}}
    assert "against 2 (rank 2's program lacks it, so its chip is not inside it). Rank 2's program has" in \
        parting.describe(lacking)
    # where the traces, paired in order, part later (an all-reduce and a hop alike on a trace), the place is said as
    # the one it runs another collective at (it read 'the first it adds')
    later = {**first, "step": 0, "index": 2, "op": "cp.3", "majority_program": [],
             "parted": [{"rank": 2, "device": 0, "how": "not completed", "op": None, "kind": None, "in_step": 2}]}
    assert parting.describe(later).endswith("in place of cp.2 (collective 2 of 3); so the chips first differ at "
                                            "collective 2, where it runs another (the traces, paired in order, part "
                                            "only at 3)")


@pytest.mark.parametrize("feeds", [
    "  %cp.3 = f32[64,128]{1,0} collective-permute(%ar.1)",
    # through another op: cp.3's operands differ from the others' (read through cp.2 there), yet it is the same hop
    # (a newcomer's psum then divide before ppermute.10 read 'it lacks ppermute.10 (collective 2 of 3); it adds
    # psum_invariant.7, ppermute.10')
    "  %neg.1 = f32[64,128]{1,0} negate(%ar.1)\n  %cp.3 = f32[64,128]{1,0} collective-permute(%neg.1)",
])
def test_a_collective_added_before_another_is_added_not_swapped_for_it(tmp_path, feeds):
    """Rank 1's program puts an all-reduce between the last matmul and cp.3, which then reads the all-reduce's
    output: cp.3's operand changes, not cp.3 (a newcomer's hang, rank 1 adding a psum before its third hop: 'it
    lacks ppermute.11 (collective 3 of 3); it adds psum_invariant.7, ppermute.11', lacking and adding one op)."""
    rank_trace(tmp_path / "rank0" / "trace" / "h.xplane.pb", [], ["cp.1", "cp.2", "cp.3"])
    for rank in (1, 2, 3):
        rank_trace(tmp_path / f"rank{rank}" / "trace" / "h.xplane.pb", [], ["cp.1", "cp.2"])
    for rank in range(4):
        dump(tmp_path / f"rank{rank}" / "xla_dump", PERMUTES)
    hlo = tmp_path / "rank1" / "xla_dump" / "module_0000.jit_step.cpu_after_optimizations.txt"
    text = hlo.read_text().replace(
        "  %cp.3 = f32[64,128]{1,0} collective-permute(%dot.2)",
        "  %ar.1 = f32[64,128]{1,0} all-reduce(%dot.2), channel_id=2, replica_groups={{0,1,2,3}}, to_apply=%add\n"
        + feeds)
    hlo.write_text(text.replace("ENTRY", "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
                                "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n\nENTRY"))
    chips, first = parting.parting_traces(sorted(tmp_path.glob("rank*/trace")))
    assert first["programs"] == {"1": {"lacks": [], "adds": [{"op": "ar.1", "opcode": "all-reduce", "index": 2}],
                                       "majority_count": 3, "count": 4}}
    assert parting.describe(first).endswith("Rank 1's program has 4 collectives where rank 0's has 3: it adds "
                                            "ar.1. Ranks 2, 3 run rank 0's program: rank 1's differs")


def test_the_programs_beside_a_trial_folder_are_found(hung_trial):
    """A newcomer's: the trial's folder given (its rank<R>/trace and rank<R>/xla_dump inside), the programs beside
    the traces were not read, and tail said less than on the rank<R>/trace folders."""
    assert parting.dumps_beside([hung_trial]) == {r: hung_trial / f"rank{r}" / "xla_dump" for r in range(4)}
    chips, first = parting.parting_traces([hung_trial])
    assert chips["waiting_from"].tolist() == ["program"] * 4 and "it lacks cp.2" in parting.describe(first)


def test_without_programs_and_without_a_parting(hung_trial, tmp_path_factory):
    paths = sorted(hung_trial.glob("rank*/trace"))
    frame = events.load(paths, columns=parting.EVENT_COLUMNS)
    chips, first = parting.parting(frame)
    assert chips["waiting_from"].tolist() == ["own", "own", "own", "own"]  # what each ran next the time before
    assert chips["waiting_at"].tolist() == ["cp.2", "cp.2", "cp.3", "cp.1"]
    from perfkit.report.hangs import lines

    hang = {"chips": json.loads(chips.to_json(orient="records")), "parting": first, "text": "..."}
    assert lines(hang, "t")[2] == ("    - rank 0 device 0: 4 completed, the last `cp.1`; waiting at `cp.2`, the "
                                   "collective it ran after `cp.1` the time before")
    assert first["parted"][0]["how"] == "skipped" and "programs" not in first
    alike = tmp_path_factory.mktemp("alike")
    for rank in range(2):
        rank_trace(alike / f"rank{rank}" / "trace" / "h.xplane.pb", [list(PERMUTES)], [])
    assert parting.parting_traces(sorted(alike.glob("rank*/trace")))[1] is None


@pytest.mark.parametrize("programs", [True, False])
def test_chips_whose_traces_end_after_their_last_collective_wait_at_none(tmp_path, programs):
    """A finished trial's traces: every chip ran steps 0 and 1 whole (their markers closed), nothing after. Tail said
    the chips' collectives agree, then listed each chip waiting at its program's first collective (without programs,
    the one it ran next the time before), the next step's, which no trace shows begun: a newcomer's healthy
    quickstart trial read as four chips hung at ppermute.216 after 72 of 72."""
    for rank in range(3):
        rank_trace(tmp_path / f"rank{rank}" / "trace" / "h.xplane.pb", [list(PERMUTES)] * 2, None)
        if programs:
            dump(tmp_path / f"rank{rank}" / "xla_dump", PERMUTES)
    paths = [str(p) for p in sorted(tmp_path.glob("rank*/trace"))]
    chips, first = parting.parting_traces(paths)
    assert first is None
    assert chips[["completed", "last_step", "last_op", "waiting_at", "waiting_from"]].values.tolist() == [
        [6, 1, "cp.3", None, "ended"]] * 3
    said = ("the chips' collectives agree: no chip parts from the others in the traced sequence, and every chip's "
            "trace ends after its last collective (6 completed each, the last in step 1, whose marker closed with no "
            "op after it): none is waiting at one")
    assert parting.describe(first, chips) == said
    text = CliRunner().invoke(cli, ["trace", "tail", *paths]).stdout
    assert text.startswith(said + "\n")
    table = text[text.index("rank device completed"):].splitlines()
    assert [line.split()[-2:] for line in table[1:]] == [["-", "ended"]] * 3
    assert json.loads(CliRunner().invoke(cli, ["trace", "tail", "--json", *paths]).stdout)["why_none_waits"] == \
        "traces ended"
    from perfkit.report.hangs import lines

    hang = {"chips": json.loads(chips.to_json(orient="records")), "parting": first, "text": said}
    assert lines(hang, "t")[2] == ("    - rank 0 device 0: 6 completed, the last `cp.3`; waiting at unknown: its "
                                   "trace ends after its last collective, its step's marker closed with no op after "
                                   "it (whether it waits at its program's next collective or has left the program, "
                                   "its trace cannot say)")
    # one chip's trace runs on past its last marker (the next step's fusion): that chip began another step and waits
    # at its next collective; the others may be inside their next step's first collective (a trace writes an op when
    # it ends) or may have left the program: their traces cannot say which, so name no wait for them
    rank_trace(tmp_path / "rank1" / "trace" / "h.xplane.pb", [list(PERMUTES)] * 2, [])
    chips, first = parting.parting_traces(paths)
    assert first is None and chips["waiting_at"].fillna("-").tolist() == ["-", "cp.1", "-"]
    assert chips["waiting_from"].tolist() == ["ended", "program" if programs else "own", "ended"]
    ended = ("; rank 0 device 0's trace ends after its last collective (cp.3, step 1) with no later op; rank 2 device "
             "0's trace ends after its last collective (cp.3, step 1) with no later op, each in a step whose marker "
             "closed: those traces cannot say whether each chip waits at its program's next collective or has left "
             "the program")
    # (where no trial record says whether they hung, said so)
    assert parting.describe(first, chips, "hung") == "the chips' collectives agree: no chip parts from the others in " \
        "the traced sequence" + ended
    assert parting.describe(first, chips).endswith("; nothing here says whether the chips hung (no trials.jsonl "
                                                   "records their trial): if they did, rank 1 device 0 would wait at "
                                                   "the collective after the last it completed (its program's next, "
                                                   "else the one it ran after that one the time before)" + ended)


def test_a_trial_that_ended_ok_has_no_chip_waiting(tmp_path):
    """A healthy trial's traces: every chip ran steps 0 and 1 and then an op after the last step's marker (an eval
    or copy program), or the same collectives in traces with no step marker. Tail listed every chip waiting_at cp.1
    (own), which reads as a hang: the run's trials.jsonl says the trial ended ok, so no chip waits. A hung trial's
    chips keep their wait; traces of no recorded trial say where each would wait if it hung."""
    run = tmp_path / "run"
    (run / "trials").mkdir(parents=True)
    (run / "case.yaml").write_text("name: t\n")
    shapes = {"00-ok": ([list(PERMUTES)] * 2, []), "01-ok": ([], list(PERMUTES) * 2),
              "02-hung": ([list(PERMUTES)] * 2, []), "03-crashed": ([list(PERMUTES)] * 2, [])}
    for name, (steps, cut) in shapes.items():
        for rank in range(3):
            rank_trace(run / "trials" / name / f"rank{rank}" / "trace" / "h.xplane.pb", steps, cut)
    records = [whole_record(i, n[3:], n[3:], dir=f"trials/{n}") for i, n in enumerate(shapes)]
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[:-1]))  # 03: not recorded

    def tail(*paths, as_json=False):
        result = CliRunner().invoke(cli, ["trace", "tail", *map(str, paths), *["--json"] * as_json])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout) if as_json else result.stdout

    def table(text):
        rows = text.split("\ncollectives per chip (")[1].splitlines()[1:]
        return [line.split()[-2:] for line in rows[rows[0].startswith("waiting_from: "):]]

    agree = "the chips' collectives agree: no chip parts from the others in the traced sequence"
    ok = f"the trial ended ok per trials.jsonl and its chips' traces end after 6 collectives each: none is waiting " \
         f"at one; {agree}"
    trial = run / "trials" / "00-ok"
    for paths in ([trial], sorted(trial.glob("rank*/trace")), sorted(trial.glob("rank*")), [run / "trials" / "01-ok"]):
        text = tail(*paths)
        assert text.startswith(ok + "\n")
        assert table(text) == [["waiting_at", "waiting_from"]] + [["-", "-"]] * 3
        assert "; waiting_at, waiting_from: none, the trial ended ok per trials.jsonl; -: none)" in text
        assert "the parting above the cause" not in text
    doc = tail(trial, as_json=True)
    assert doc["trial"] == {"run": str(run), "dir": "trials/00-ok", "status": "ok"}
    # why none waits is a field of its own: each chip's waiting_from held "ok", a source it waits from by its name
    assert [(c["waiting_at"], c["waiting_from"]) for c in doc["collectives"]] == [(None, None)] * 3
    assert doc["why_none_waits"] == "trial ok"
    assert doc["if_hung"] is False
    # a hung trial's chips wait as they did
    text = tail(run / "trials" / "02-hung")
    assert text.startswith(agree + "\n")
    assert table(text) == [["waiting_at", "waiting_from"]] + [["cp.1", "own"]] * 3
    doc = tail(run / "trials" / "02-hung", as_json=True)
    assert doc["trial"]["status"] == "hung" and doc["if_hung"] is False and doc["why_none_waits"] is None
    # traces that no trials.jsonl records (the trial's line not written, or not a run's): where each would wait
    alone = tmp_path / "alone"
    (run / "trials" / "03-crashed").rename(alone)
    (run / "trials" / "02-hung").rename(run / "trials" / "03-crashed")
    hedged = (f"{agree}; nothing here says whether the chips hung (no trials.jsonl records their trial): the last "
              "collective each completed is cp.3; if they hung, each would wait at cp.1")
    for paths in ([run / "trials" / "03-crashed"], sorted(alone.glob("rank*/trace"))):
        text = tail(*paths)
        assert text.startswith(hedged + "\n")
        assert table(text) == [["if_hung_at", "waiting_from"]] + [["cp.1", "own"]] * 3
        # the legend defines each column once, and what the rows show (own), not what none shows (ended, program)
        legend = text.split("\ncollectives per chip (")[1].splitlines()[:2]
        assert legend == ["completed in the traces; last_step: after a chip's last step marker, the next, as a hung "
                          "step's marker never closes; if_hung_at: where each chip would wait if they hung, which "
                          "nothing here says; -: none)", "waiting_from: own: the one it ran after its last the time "
                          "before"]
        assert "\nif_hung_at: " not in text
    # --json hedges as the text does: these waits are where each chip would wait if they hung, not that they did
    doc = tail(alone, as_json=True)
    assert doc["trial"] is None and doc["if_hung"] is True and doc["why_none_waits"] is None
    assert [(c["waiting_at"], c["waiting_from"]) for c in doc["collectives"]] == [("cp.1", "own")] * 3
    doc = tail(run / "trials" / "03-crashed", as_json=True)
    assert doc["trial"] == {"run": str(run), "dir": "trials/03-crashed", "status": None} and doc["if_hung"] is True


def test_a_chip_whose_trace_ends_before_a_collective(tmp_path):
    """Rank 1's trace ends inside step 0, before the others' second collective: it did not complete one there."""
    rank_trace(tmp_path / "rank0" / "trace" / "h.xplane.pb", [list(PERMUTES)], [])
    rank_trace(tmp_path / "rank1" / "trace" / "h.xplane.pb", [], ["cp.1"])
    rank_trace(tmp_path / "rank2" / "trace" / "h.xplane.pb", [list(PERMUTES)], [])
    chips, first = parting.parting_traces(sorted(tmp_path.glob("rank*/trace")))
    assert chips["completed"].tolist() == [3, 1, 3]
    # rank 1's cp.1 ran in its first step, its marker never written: step 0; its trace holds no second
    assert (first["step"], first["index"], first["op"]) == (0, 1, "cp.2")
    assert first["parted"] == [{"rank": 1, "device": 0, "how": "not completed", "op": None, "kind": None, "in_step": 1}]


def test_traces_with_no_step_marker_number_no_step(tmp_path):
    """No chip's trace holds a step marker: its collectives are in no step, where the collectives table had said
    last_step 0 beside an ops table of step -1 (an invented step)."""
    from perfkit.report.line import parted

    rank_trace(tmp_path / "rank0" / "trace" / "h.xplane.pb", [], ["cp.1", "cp.2"])
    rank_trace(tmp_path / "rank1" / "trace" / "h.xplane.pb", [], ["cp.1"])
    paths = [str(p) for p in sorted(tmp_path.glob("rank*/trace"))]
    chips, first = parting.parting_traces(paths)
    assert chips["last_step"].tolist() == [None, None] and chips["completed"].tolist() == [2, 1]
    assert (first["step"], first["index"], first["op"]) == (None, 1, "cp.2")
    assert parting.describe(first, chips).startswith(
        "chips part at collective 2 of the traces (they hold no step marker): cp.2 (collective-permute) on rank 0")
    # what the count counts: rank 0's trace, cut inside the step (it read "of 2", as if the step had two)
    assert parted(first) == ("rank 1 has no record in its trace of cp.2 (collective 2 of 2 in rank 0's trace, in "
                             "traces with no step marker)")
    doc = json.loads(CliRunner().invoke(cli, ["trace", "tail", *paths, "--json"]).stdout)
    assert [c["last_step"] for c in doc["collectives"]] == [None, None] and doc["parting"]["step"] is None
    text = CliRunner().invoke(cli, ["trace", "tail", *paths]).stdout
    assert "last_step: -, these traces hold no step marker;" in text and "step -: these traces hold no step marker" \
        in text
    table = text[text.index("rank device completed"):].splitlines()
    assert [line.split()[3] for line in table[1:]] == ["-", "-"]
    # the last ops' step: "-" as last_step's, where it was printed -1 (no marker: rank 0's fusion.1, cp.1 and cp.2,
    # rank 1's fusion.1 and cp.1, fewer than 5 each)
    ops = text.split("\nlast 5 ops per chip (")[1].split("\n\n")[0].splitlines()[2:]
    assert [line.split()[2] for line in ops] == ["-"] * 5


def test_a_chip_hung_in_the_traces_first_step_is_in_that_step(tmp_path):
    """Rank 1's trace holds no marker: it hung in the traces' first step, step 5 (the profile began there), whose
    marker it never closed; ranks 0 and 2 finished it. Its collectives were numbered step 0, before every other
    chip's, and it read as running an extra collective there."""
    rank_trace(tmp_path / "rank0" / "trace" / "h.xplane.pb", [list(PERMUTES)], [], first=5)
    rank_trace(tmp_path / "rank1" / "trace" / "h.xplane.pb", [], ["cp.1"], first=5)
    rank_trace(tmp_path / "rank2" / "trace" / "h.xplane.pb", [list(PERMUTES)], [], first=5)
    chips, first = parting.parting_traces(sorted(tmp_path.glob("rank*/trace")))
    assert chips["last_step"].tolist() == [5, 5, 5]
    assert (first["step"], first["index"], first["op"]) == (5, 1, "cp.2")
    assert first["parted"] == [{"rank": 1, "device": 0, "how": "not completed", "op": None, "kind": None, "in_step": 1}]
    assert parting.describe(first, chips).startswith("chips part at step 5, collective 2 there: cp.2")


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_trace_tail_command(hung_trial, read):
    """The command reads each shard once for its tail and its parting (``shards.tail_along``)."""
    paths = [str(p) for p in sorted(hung_trial.glob("rank*/trace"))]
    result = CliRunner().invoke(cli, ["trace", "tail", *paths, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {"chips", "last_ops", "collectives", "parting"} <= set(doc)
    assert doc["parting"]["parted"][0]["rank"] == 3 and doc["parting"]["programs"]["3"]["lacks"][0]["op"] == "cp.2"
    assert [c["completed"] for c in doc["collectives"]] == [4, 4, 5, 4]
    text = CliRunner().invoke(cli, ["trace", "tail", *paths, "--hlo", str(hung_trial)])
    assert text.exit_code == 0, text.output
    assert "it lacks cp.2 (collective 2 of 3)" in text.stdout
    # the legend defines what the rows show: each chip's wait from its rank's program
    legend = text.stdout.split("\ncollectives per chip (")[1].splitlines()
    assert legend[0].endswith("; if_hung_at: where each chip would wait if they hung, which nothing here says; "
                              "-: none)")
    assert legend[1] == "waiting_from: program: its program's next"
    # the cause leads: a newcomer read "first to stop: rank 0" as the culprit, the parting was the last line
    first, rest = text.stdout.split("\n", 1)
    assert first.startswith("chips part at step 0") and "rank 3 device 0" in first
    assert rest.lstrip().startswith("trace ends first: ") and "; where the traces end is a symptom, the parting " \
        "above the cause)" in rest
    assert text.stdout.count("chips part at") == 1
    # the ops of the step whose marker never closed are of no step: null, said where it shows (it went unexplained)
    assert any(op["step"] is None for op in doc["last_ops"])
    assert "last 5 ops per chip (ms from the trace start; step -: outside every step's span, e.g. after the last " \
           "step marker closed):" in text.stdout


def test_a_hung_trial_in_the_summary_and_report(hung_trial):
    """``hangs`` (summary.json) and its lines under the trial in report.md's Failed trials."""
    from perfkit.report.hangs import lines

    trial = hung_trial.parent / "run" / "trials" / "01-b"
    trial.parent.mkdir(parents=True)
    hung_trial.rename(trial)
    trials = [{"index": 1, "variant": "b", "status": "hung", "dir": "trials/01-b"},
              {"index": 0, "variant": "a", "status": "ok", "dir": "trials/00-a"}]
    found = parting.run_hangs(trial.parent.parent, trials)
    assert list(found) == ["trials/01-b"]
    hang = json.loads(json.dumps(found["trials/01-b"]))  # as summary.json holds it
    assert hang["parting"]["programs"]["3"]["lacks"][0]["op"] == "cp.2"
    text = "\n".join(lines(hang, "trials/01-b"))
    assert "(`perfkit trace tail trials/01-b/rank*/trace`): chips part at step 0" in text
    # what the name is, said: "(from program)" read as a program of that name
    assert "    - rank 3 device 0: 4 completed, the last `cp.3`; waiting at `cp.1`, its program's next " \
        "collective\n" in text + "\n"
    assert parting.run_hangs(trial.parent.parent, trials[1:]) is None
    # a parting the traces show stands where they end before the hung step (here the ranks finished 4 steps; rank
    # 3's trace marks step 1 and runs on into step 2, the others' into step 1)
    ended = dict(trials[0], traced=[0], ranks=[{"rank": r, "steps_done": 4} for r in range(4)])
    text = parting.run_hangs(trial.parent.parent, [ended])["trials/01-b"]["text"]
    assert text.startswith("chips part at step 0") and text.endswith(
        "; the traces end at step 1, before the hang, which came after every rank had finished step 3")


def test_no_collectives(tmp_path):
    rank_trace(tmp_path / "rank0" / "trace" / "h.xplane.pb", [[]], [])
    chips, first = parting.parting_traces([tmp_path / "rank0" / "trace"])
    assert first is None and chips["completed"].tolist() == [0]
    assert parting.describe(first, chips) == "no collectives in these traces: nothing to compare across chips"


def _sequence(chips: dict[tuple[int, int], list[tuple[int, str, float]]]) -> pd.DataFrame:
    """``parting.sequences``' table by hand: per chip, its collectives in order as (step, kind, bytes), each in a
    step whose marker closed."""
    rows = []
    for (rank, device), found in chips.items():
        for position, (step, kind, size) in enumerate(found):
            index = sum(1 for s, _, _ in found[:position] if s == step)
            rows.append({"rank": rank, "device": device, "step": step, "index": index, "position": position,
                         "op": f"{kind}.{position}", "kind": kind, "bytes": size, "module": "jit_step",
                         "closed": True})
    return pd.DataFrame(rows)


def test_collectives_of_unknown_size_agree_and_the_first_parting_is_found_among_many():
    """Chips whose collectives' bytes are unknown (NaN) agree where kind and order agree (NaN equals no NaN in
    Python: each chip would have parted from the others at the first one); among 2000 places that agree, the
    one where a chip ran another collective is the first parting."""
    steady = [(step, kind, np.nan) for step in range(200) for kind in ["all-gather", "all-reduce"] * 5]
    chips = pd.DataFrame({"rank": [0, 1, 2], "device": [0, 0, 0]})
    seq = _sequence({(r, 0): steady for r in range(3)})
    assert parting.first_parting(seq, chips) is None
    changed = list(steady)
    changed[1234] = (changed[1234][0], "all-to-all", 4096.0)
    first = parting.first_parting(_sequence({(0, 0): steady, (1, 0): changed, (2, 0): steady}), chips)
    assert (first["step"], first["index"], first["kind"]) == (123, 4, "all-gather")
    assert first["parted"] == [{"rank": 1, "device": 0, "how": "different collective", "op": "all-to-all.1234",
                                "kind": "all-to-all", "in_step": 10}]


def test_chips_and_modules_of_ops_in_interleaved_runs():
    """Two chips' and two programs' device ops in runs that come back (rank 1, rank 0, rank 1): each chip
    once, sorted by rank and device, with how far its trace goes; each program's module as its first device op
    names it, programs in the order they first come; a host op and an op of no program count for neither."""
    frame = pd.DataFrame({
        "category": ["compute", "host", "ici", "compute", "compute", "compute", "compute"],
        "rank": np.array([1, 0, 1, 0, 0, 1, 0], np.int32), "device": np.array([0, -1, 0, 1, 0, 0, 1], np.int32),
        "program_id": pd.array([7, 3, 7, None, 5, 7, 5], "UInt64"),
        "hlo_module": pd.Categorical(["b", "host", "b2", None, "a", "b3", "a2"]),
        "step": np.array([0, 3, 0, 2, -1, -1, -1], np.int32), "start_ps": np.array([0, 9, 5, 1, 2, -1, 3]),
    })
    # how far each chip's trace goes (marked, reached): rank 0 device 0 no marker; rank 0 device 1 step 2, an op
    # after it (step 3); rank 1 an op before its step 0 alone
    assert parting._chips(frame).values.tolist() == [[0, 0, -1, -1], [0, 1, 2, 3], [1, 0, 0, 0]]
    modules = parting._modules(frame)
    assert modules.index.tolist() == [7, 5] and modules.astype(str).tolist() == ["b", "a"]


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_the_breakdown_counts_the_ops_after_the_last_step(hung_trial, read):
    """What each rank ran after its last step marker (the cut: fusion.1 of 10 us and 5 us a permute) is in no
    step's span: the breakdown's and the diff's JSON count it per chip, the files read together or apart."""
    paths = [str(p) for p in sorted(hung_trial.glob("rank*/trace"))]
    result = CliRunner().invoke(cli, ["trace", "breakdown", "--json", *paths])
    assert result.exit_code == 0, result.output
    expected = [(0, 0, 2, 15 * U), (1, 0, 2, 15 * U), (2, 0, 3, 20 * U), (3, 0, 1, 10 * U)]
    outside = json.loads(result.stdout)["outside_steps"]
    assert [(c["rank"], c["device"], c["ops"], c["op_ps"]) for c in outside] == expected
    diff = CliRunner().invoke(cli, ["trace", "diff", "--json", str(hung_trial), str(hung_trial)])  # every rank's file
    assert diff.exit_code == 0, diff.output
    for side in ("a", "b"):
        outside = json.loads(diff.stdout)[f"outside_steps_{side}"]
        assert [(c["rank"], c["device"], c["ops"], c["op_ps"]) for c in outside] == expected


def test_traces_that_end_before_the_hung_step_are_not_read_as_the_hang(tmp_path):
    """A newcomer's gloo hang: their profiler traced step 3 alone and a rank hung at step 7 (rank 0 finished 7
    steps, rank 1 all 8); the report said "the chips' collectives agree" and each rank "waiting at" the collective
    after its traced one, as though the traces held the hang. The trial's records say where its traces end."""
    from perfkit.report.hangs import lines

    trial = tmp_path / "run" / "trials" / "01-hang"
    for rank in range(2):  # each chip ran every hop of the one traced step: they agree
        rank_trace(trial / f"rank{rank}" / "trace" / "h.xplane.pb", [list(PERMUTES)], [], first=3)
    ranks = [{"rank": 0, "steps_done": 7}, {"rank": 1, "steps_done": 8}]
    record = {"index": 1, "variant": "hang", "status": "hung", "dir": "trials/01-hang", "traced": [2, 3],
              "ranks": ranks}
    hang = json.loads(json.dumps(parting.run_hangs(tmp_path / "run", [record])["trials/01-hang"]))
    assert (hang["parting"], hang["last_traced_step"], hang["hung_step"]) == (None, 3, 7)
    assert hang["text"] == ("the traces end at step 3, before the hang at step 7 (the first step a rank did not "
                            "finish), so they cannot say where the chips part: each rank's stack dump says where it "
                            "waits (a trace would have to reach step 7, `capture.trace`, and be written before the "
                            "ranks are ended)")
    assert lines(hang, "trials/01-hang")[1:] == [
        "  - collectives completed per chip in the traces (to step 3; the chips went on past them):",
        "    - rank 0 device 0: 3 completed, the last `cp.3`", "    - rank 1 device 0: 3 completed, the last `cp.3`"]
    # traces that reach the hung step (a rank hung in step 3, the one traced) are read as before
    reached = parting.run_hangs(tmp_path / "run", [dict(record, ranks=[dict(ranks[0], steps_done=3), ranks[1]])])
    assert reached["trials/01-hang"]["text"].startswith("the chips' collectives agree")
    assert "hung_step" not in reached["trials/01-hang"]
    # every rank finished its 8 steps and then hung (its teardown): no step 8 to name (a reviewer's)
    after = parting.run_hangs(tmp_path / "run", [dict(record, ranks=[dict(ranks[0], steps_done=8), ranks[1]])])
    assert after["trials/01-hang"]["text"] == (
        "the traces end at step 3, before the hang, which came after every rank had finished step 7, so they cannot "
        "say where the chips part: each rank's stack dump says where it waits")


def test_traces_with_no_step_marker_are_not_given_the_records_steps(tmp_path):
    """Traces with no step marker, whose trial's record lists steps 2 and 3 as traced: the report said "the traces
    end at step 3, before the hang at step 7" and "(to step 3 ...)", steps the traces do not hold (`perfkit trace
    tail` numbers none), and a profile still running when the trial hung reads so too (the record lists only the
    steps that finished). They are read as tail reads them, saying they cannot tell whether they reach the hang."""
    from perfkit.report.hangs import lines

    trial = tmp_path / "run" / "trials" / "01-hang"
    for rank in range(2):
        rank_trace(trial / f"rank{rank}" / "trace" / "h.xplane.pb", [], list(PERMUTES))  # no marker: the ops alone
    record = {"index": 1, "variant": "hang", "status": "hung", "dir": "trials/01-hang", "traced": [2, 3],
              "ranks": [{"rank": 0, "steps_done": 7}, {"rank": 1, "steps_done": 8}]}
    hang = json.loads(json.dumps(parting.run_hangs(tmp_path / "run", [record])["trials/01-hang"]))
    assert "hung_step" not in hang and "last_traced_step" not in hang
    assert [(c["completed"], c["last_step"]) for c in hang["chips"]] == [(3, None), (3, None)]  # as tail's
    assert hang["text"] == ("the chips' collectives agree: no chip parts from the others in the traced sequence; "
                            "these traces hold no step marker, so they cannot say whether they reach the hang at step "
                            "7 (the first step a rank did not finish): where they end before it, each rank's stack "
                            "dump says where it waits")
    assert lines(hang, "trials/01-hang")[1] == ("  - collectives completed per chip in the traces, and the one each "
                                                "waits at:")
    # every rank finished its 8 steps: no step 8 to name
    after = parting.run_hangs(tmp_path / "run", [dict(record, ranks=[{"rank": r, "steps_done": 8} for r in (0, 1)])])
    assert after["trials/01-hang"]["text"].endswith(
        "these traces hold no step marker, so they cannot say whether they reach the hang, which came after every "
        "rank had finished step 7: where they end before it, each rank's stack dump says where it waits")
    # no rank finished a step (a review's hang in step 0): it read "after every rank had finished step -1"
    none = parting.run_hangs(tmp_path / "run", [dict(record, ranks=[{"rank": r, "steps_done": 0} for r in (0, 1)])])
    assert none["trials/01-hang"]["text"].endswith(
        "cannot say whether they reach the hang, which came before any rank had finished a step: where they end "
        "before it, each rank's stack dump says where it waits")


def test_traces_cut_inside_the_hung_step_are_read_as_the_hang(tmp_path):
    """A hang's profile cut by a timer inside the hung step: the trial's record lists as traced the steps that
    finished (0-4; ranks 0 and 1 finished 5, rank 2 all 8), and the report said "the traces end at step 4, before
    the hang at step 5" and dropped each chip's wait, though every trace runs on into step 5: rank 0 and 1 past
    their step 4 marker (rank 1 with its fusion alone: it waits at step 5's first collective), rank 2 through a
    closed step 5."""
    from perfkit.report.hangs import lines

    trial = tmp_path / "run" / "trials" / "00-skip"
    for rank, cut in enumerate([["cp.1"], []]):
        rank_trace(trial / f"rank{rank}" / "trace" / "h.xplane.pb", [list(PERMUTES)] * 5, cut)
    rank_trace(trial / "rank2" / "trace" / "h.xplane.pb", [list(PERMUTES)] * 6, [])
    ranks = [{"rank": 0, "steps_done": 5}, {"rank": 1, "steps_done": 5}, {"rank": 2, "steps_done": 8}]
    record = {"index": 0, "variant": "skip", "status": "hung", "dir": "trials/00-skip", "traced": [0, 1, 2, 3, 4],
              "ranks": ranks}
    hang = json.loads(json.dumps(parting.run_hangs(tmp_path / "run", [record])["trials/00-skip"]))
    assert "hung_step" not in hang and "last_traced_step" not in hang
    assert "the traces end" not in hang["text"]
    assert [(c["completed"], c["last_step"]) for c in hang["chips"]] == [(16, 5), (15, 4), (18, 5)]
    assert lines(hang, "trials/00-skip")[1] == ("  - collectives completed per chip in the traces, and the one each "
                                                "waits at:")
    # (ranks 0 and 2 ran cp.1 in step 5 and part from rank 1 there; rank 1's wait is read from its own hops)
    assert "    - rank 1 device 0: 15 completed, the last `cp.3`; waiting at `cp.1`, the collective it ran after " \
        "`cp.3` the time before" in lines(hang, "trials/00-skip")
    # every rank hung at step 5's first collective: no collective of step 5 in any trace, its fusion alone
    for rank in range(3):
        rank_trace(trial / f"rank{rank}" / "trace" / "h.xplane.pb", [list(PERMUTES)] * 5, [])
    hang = parting.run_hangs(tmp_path / "run", [record])["trials/00-skip"]
    assert "hung_step" not in hang and [c["last_step"] for c in hang["chips"]] == [4, 4, 4]
    # (each ran step 5's fusion: it waits at its first collective, as it ran the time before)
    assert [(c["waiting_at"], c["waiting_from"]) for c in hang["chips"]] == [("cp.1", "own")] * 3


def test_chips_that_hang_where_their_programs_part_are_parted_by_their_programs(tmp_path):
    """A hang at the very collective where the chips part: every chip completed cp.1, then ranks 0 and 1 wait at
    cp.2 and rank 2 at an all-reduce its program runs in cp.2's place. The traces agree (nobody completed the next
    one); the programs part them at collective 2 (a newcomer's extra all-reduce on one rank read 'the chips'
    collectives agree')."""
    for rank in range(3):
        folder = tmp_path / f"rank{rank}"
        rank_trace(folder / "trace" / "h.xplane.pb", [], ["cp.1"])
        dump(folder / "xla_dump", PERMUTES)
    program = tmp_path / "rank2" / "xla_dump" / "module_0000.jit_step.cpu_after_optimizations.txt"
    text = program.read_text().replace("%cp.2 = f32[64,128]{1,0} collective-permute(%dot.1), channel_id=1, "
                                       "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}",
                                       "%ar.2 = f32[64,128]{1,0} all-reduce(%dot.1), channel_id=2, "
                                       "replica_groups={{0,1,2}}, to_apply=%add").replace("(%cp.2)", "(%ar.2)")
    add = "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n" \
          "  ROOT %s = f32[] add(%a, %b)\n}\n\n"
    text = text.replace("ENTRY %main", add + "ENTRY %main")
    program.write_text(text)
    chips, first = parting.parting_traces(sorted(tmp_path.glob("rank*/trace")))
    assert list(chips["waiting_at"]) == ["cp.2", "cp.2", "ar.2"]
    assert (first["index"], first["op"], first["kind"], first["waiting"]) == (1, "cp.2", "collective-permute", True)
    assert [c["rank"] for c in first["majority"]] == [0, 1]
    assert [(p["rank"], p["how"], p["op"]) for p in first["parted"]] == [(2, "different collective", "ar.2")]
    hung = parting.describe(first, status="hung")  # (the trial's record says it hung)
    assert "collective 2 of the traces (they hold no step marker), where they wait (" in hung
    assert "rank 2 device 0 waits at another collective (ar.2)" in hung
    # where nothing says they hung, where they would wait if they did (a healthy trial's programs may part so)
    assert "collective 2 of the traces (they hold no step marker), where they would wait if they hung, which nothing " \
        "here says (no chip completed it; their programs name it)" in parting.describe(first)
    assert "rank 2 device 0 would wait at another collective (ar.2)" in parting.describe(first)


def test_a_chip_with_no_collective_waits_at_the_others_first_as_summary_json_may_hold_it(tmp_path):
    """Rank 1 hung before its first collective (its trace a fusion alone): it waits at the others' first, ``others``,
    which summary.json's schema did not allow (program | own): perfkit check refused the run's own summary."""
    import jsonschema

    from perfkit.rundata import schema

    trial = tmp_path / "run" / "trials" / "00-a"
    rank_trace(trial / "rank0" / "trace" / "h.xplane.pb", [], ["cp.1"])
    rank_trace(trial / "rank1" / "trace" / "h.xplane.pb", [], [])
    record = {"index": 0, "variant": "a", "status": "hung", "dir": "trials/00-a"}
    hang = json.loads(json.dumps(parting.run_hangs(tmp_path / "run", [record])["trials/00-a"]))
    assert [(c["completed"], c["waiting_at"], c["waiting_from"]) for c in hang["chips"]] == [
        (1, None, None), (0, "cp.1", "others")]
    from perfkit.report.hangs import lines

    assert lines(hang, "trials/00-a")[2:] == ["    - rank 0 device 0: 1 completed, the last `cp.1`; waiting at -",
                                              "    - rank 1 device 0: 0 completed; waiting at `cp.1`, the others' "
                                              "first (it completed none)"]
    shipped = schema.shipped("summary")
    jsonschema.validate(hang, {"$defs": shipped["$defs"], "$ref": "#/$defs/Hang"})


def test_kernels_of_one_name_part_by_the_collective_their_launch_ran_under(fixtures_dir):
    """HTA's two ranks of one job: every NCCL kernel is named ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t. By a plain
    reading of the JSON (each kernel's launch by its correlation id, inside the nccl:* span on its thread), step 552
    runs, in start order on stream 84, all_to_all, all_to_all, all_reduce, all_reduce on rank 0 and all_to_all,
    all_reduce, all_to_all, all_reduce on rank 1, then an _all_gather_base on stream 203 on both: the ranks part at
    its collective 2. The line named both chips' kernels alike ('ran a different collective (ncclKernel_SendRecv...)'):
    it names each one's kind."""
    files = [str(fixtures_dir / "kineto" / f"rank-{r}.json.gz") for r in (0, 1)]
    result = CliRunner().invoke(cli, ["trace", "tail", *files, "--json"])
    assert result.exit_code == 0, result.output
    first = json.loads(result.stdout)["parting"]
    assert (first["step"], first["index"], first["kind"]) == (552, 1, "all-to-all")
    assert [(p["rank"], p["how"], p["kind"]) for p in first["parted"]] == [(1, "different collective", "all-reduce")]
    text = CliRunner().invoke(cli, ["trace", "tail", *files]).stdout
    assert ("rank 1 device 1 ran a different collective (ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, "
            "unsigned long, ncclWork*), all-reduce), 5 collectives there against 5") in text


def _ok_and_hung_run(tmp_path, shapes: dict) -> "Path":
    """A run directory whose trials (``shapes``: folder -> per rank (steps, cut)) trials.jsonl records with the status
    their folder names (``NN-<status>``)."""
    run = tmp_path / "run"
    (run / "trials").mkdir(parents=True)
    (run / "case.yaml").write_text("name: t\n")
    for name, ranks in shapes.items():
        for rank, (steps, cut) in enumerate(ranks):
            rank_trace(run / "trials" / name / f"rank{rank}" / "trace" / "h.xplane.pb", steps, cut)
    records = [whole_record(i, "v", n[3:].split("-")[0], dir=f"trials/{n}") for i, n in enumerate(shapes)]
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


def test_a_finished_trial_s_trace_ends_are_not_worded_as_a_hang(tmp_path):
    """Ranks 0 and 2 ran steps 0 and 1 and a fusion after the last marker, [200, 210) us; rank 1's trace ends at its
    step 1's cp.3, [120, 125) us: 85 us (0.085 ms) before the others'. Of a trial recorded ok, tail said that trace
    ends 'at its last op to end: a profiler writes an op when it ends, so one still running, a collective it waits in,
    is not in it', then what the other traces were in then, and that a last_step after a marker is 'as a hung step's
    marker never closes': a hang's words of a trial that finished. A hung trial's (the same traces) keep them: at
    125 us ranks 0 and 2 were in their cp.3 (ended then; their fusion began at 200)."""
    shape = [([list(PERMUTES)] * 2, []), ([list(PERMUTES)] * 2, None), ([list(PERMUTES)] * 2, [])]
    run = _ok_and_hung_run(tmp_path, {"00-ok": shape, "01-hung": shape})
    ok = CliRunner().invoke(cli, ["trace", "tail", str(run / "trials" / "00-ok")]).stdout
    assert "\ntrace ends first: rank 1 device 0, 0.085 ms before the last chip's\n" in ok
    for hang in ("a collective it waits in", "the other traces were then in", "hung"):
        assert hang not in ok
    assert "last_step: after a chip's last step marker, the next; " in ok
    hung = CliRunner().invoke(cli, ["trace", "tail", str(run / "trials" / "01-hung")]).stdout
    assert ("\ntrace ends first: rank 1 device 0, 0.085 ms before the last chip's (at its last op to end: a profiler "
            "writes an op when it ends, so one still running, a collective it waits in, is not in it)\n"
            "the other traces were then in: collective-permute (ici) x2\n") in hung
    assert "last_step: after a chip's last step marker, the next, as a hung step's marker never closes;" in hung


def test_a_trial_that_ended_ok_leads_with_its_outcome_then_where_its_chips_part(tmp_path):
    """Two trials recorded ok whose chips' collectives part: in 00-ok rank 2 ran cp.1 and cp.3 in step 0 (cp.3 looks
    as cp.2 does: the third place is where it has none), then step 1 whole; in 01-ok rank 2's trace holds step 0 and a
    fusion after it, none of step 1's three. The parting came first and the trial's outcome after it; and a chip
    whose trace ends before a collective was said to be perhaps 'waiting inside it', of a trial that ended ok."""
    whole = ([list(PERMUTES)] * 2, [])
    run = _ok_and_hung_run(tmp_path, {"00-ok": [whole, whole, ([["cp.1", "cp.3"], list(PERMUTES)], [])],
                                      "01-ok": [whole, whole, ([list(PERMUTES)], [])]})

    def first_line(trial):
        result = CliRunner().invoke(cli, ["trace", "tail", str(run / "trials" / trial)])
        assert result.exit_code == 0, result.output
        return result.stdout.split("\n", 1)[0]

    assert first_line("00-ok") == (
        "the trial ended ok per trials.jsonl and its chips' traces end after 6, 6 and 5 collectives (by rank and "
        "device): none is waiting at one; yet chips part at step 0, collective 3 there: cp.3 (collective-permute) on "
        "rank 0 device 0, rank 1 device 0; rank 2 device 0 skipped, 2 collectives there against 3")
    assert first_line("01-ok") == (
        "the trial ended ok per trials.jsonl and its chips' traces end after 6, 6 and 3 collectives (by rank and "
        "device): none is waiting at one; yet chips part at step 1, collective 1 there: cp.1 (collective-permute) on "
        "rank 0 device 0, rank 1 device 0; rank 2 device 0 did not complete it in its trace, 0 collectives there "
        "against 3")


@pytest.mark.parametrize("ring_steps", [[PERMUTES] * 2, []])
def test_tail_of_a_run_directory_names_its_hung_trial_first(tmp_path, ring_steps):
    """A review's: tail given a run directory pointed at its first trial, one that ended ok, where tail is for the hung
    one; and where the trials' steps did not collide (the hung one's traces hold no step marker) it read both trials'
    chips as one trial's."""
    run = tmp_path / "run"
    (run / "trials").mkdir(parents=True)
    (run / "case.yaml").write_text("name: hop\n")
    records = [whole_record(0, "ring"), whole_record(1, "skip", "hung")]
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    for rank in range(2):
        rank_trace(run / "trials" / "00-ring" / f"rank{rank}" / "trace" / "h.xplane.pb", ring_steps,
                   None if ring_steps else ["cp.1"])
        rank_trace(run / "trials" / "01-skip" / f"rank{rank}" / "trace" / "h.xplane.pb", [], ["cp.1"])
    for given in ([run], [run / "trials"], sorted(run.glob("trials/*/rank0"))):
        res = CliRunner().invoke(cli, ["trace", "tail", *map(str, given)])
        assert res.exit_code == 2, res.output
        assert f"pass one trial's folder, a failed one first: {run / 'trials/01-skip'} (hung), " \
               f"{run / 'trials/00-ring'} (ok); or the run to `perfkit trace attribution {run}`" in res.output
    assert CliRunner().invoke(cli, ["trace", "tail", str(run / "trials" / "01-skip")]).exit_code == 0
