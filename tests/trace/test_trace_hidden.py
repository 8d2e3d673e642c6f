"""Hidden and exposed communication in the breakdown, against hand-computed TPU- and GPU-shaped traces,
against a plain per-picosecond model of the definitions (docs/architecture.md, Trace breakdown) on
random nested multi-line layouts, and in the run summary. HTA is the referee on real GPU traces
(test_trace_hta.py)."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trace_builders import U, gpu_trace, one_step_trace

from perfkit.analysis.summary import trace_summary
from perfkit.trace import breakdown, events, synthetic
from perfkit.trace.events import CATEGORY_VALUES

# One TPU chip, one step [0, 100) us, all on XLA Ops; (name, opcode, start, end). Worked out by hand:
ASYNC_OPS = [
    # an all-gather in flight [0, 20): hidden under fusion.1 8, exposed in its halves 2 + 6; during the
    # flight the chip also copies (DMA 2) and idles 2, which are neither hidden nor exposed ICI
    ("all-gather-start.1", "all-gather-start", 0, 2), ("fusion.1", "fusion", 2, 10),
    ("copy-start.1", "copy-start", 12, 13), ("copy-done.1", "copy-done", 13, 14),
    ("all-gather-done.1", "all-gather-done", 14, 20),
    # a collective-permute inside a while [30, 60): in flight [31, 45) = 14, hidden fusion.2 8, exposed 1 + 5;
    # the while's own time [30, 31) and [45, 60) is compute, the second part after the flight
    ("while.1", "while", 30, 60), ("collective-permute-start.1", "collective-permute-start", 31, 32),
    ("fusion.2", "fusion", 32, 40), ("collective-permute-done.1", "collective-permute-done", 40, 45),
    # two pairs in flight at once [60, 77) = 17: hidden fusion.3 8 + fusion.4 3, exposed 1 + 1 + 2 + 2
    ("all-reduce-start.1", "all-reduce-start", 60, 61), ("all-gather-start.3", "all-gather-start", 61, 62),
    ("fusion.3", "fusion", 62, 70), ("all-reduce-done.1", "all-reduce-done", 70, 72), ("fusion.4", "fusion", 72, 75),
    ("all-gather-done.3", "all-gather-done", 75, 77),
    # a start whose done is not in the step: its own 1 us only, fusion.5 after it is not hidden
    ("all-gather-start.2", "all-gather-start", 90, 91), ("fusion.5", "fusion", 91, 95),
]
# span, compute, ici, dma, idle, comm, hidden (us)
ASYNC_EXPECTED = (100, 8 + 16 + 8 + 8 + 3 + 4, 8 + 6 + 6 + 1, 2, 2 + 10 + 13 + 5, 20 + 14 + 17 + 1, 8 + 8 + 11)
FIGURES = ["span_ps", "compute_ps", "ici_ps", "dma_ps", "idle_ps", "comm_ps", "hidden_ps"]


def test_tpu_async_pairs_hand_computed(tmp_path):
    rows = breakdown.breakdown(events.load([one_step_trace(tmp_path / "a.xplane.pb", ASYNC_OPS)]))
    assert len(rows) == 1
    row = rows.iloc[0]
    assert tuple(int(row[c]) // U for c in FIGURES) == ASYNC_EXPECTED
    assert row["overlap"] == pytest.approx(27 / 52)
    assert row[["compute_ps", "ici_ps", "dma_ps", "idle_ps"]].sum() == row["span_ps"]


def test_only_a_compute_ops_dma_stall_moves_to_dma(tmp_path):
    """By hand: fusion.1 [0, 10) stalls 3 us (compute 7, DMA 3); the all-gather-done [10, 20) and the
    copy-done [20, 25) carry stalls of 4 and 1 us that stay where their ops are (ICI 10, DMA 5)."""
    ops = [("fusion.1", "fusion", 0, 10), ("all-gather-done.1", "all-gather-done", 10, 20),
           ("copy-done.1", "copy-done", 20, 25)]
    path = one_step_trace(tmp_path / "a.xplane.pb", ops, stalls={"fusion.1": 3, "all-gather-done.1": 4, "copy-done.1": 1})
    row = breakdown.breakdown(events.load([path])).iloc[0]
    assert {c: int(row[c]) // U for c in FIGURES[:5]} == {"span_ps": 100, "compute_ps": 7, "ici_ps": 10,
                                                          "dma_ps": 5 + 3, "idle_ps": 75}


# synthetic.tpu_profile's 130 us step (perfkit/trace/synthetic.py TPU_STEP), by hand: compute fusion.1 40
# less its 2 us DMA stall, fusion.2 18, while.1 30 (its body inside); ICI all-reduce-start.1 2,
# all-reduce-done.1 10, the reduce-scatter fusion 6; DCN the megascale all-reduce.2 8 (its Megascale
# plane transfers [113, 116) inside it add nothing); DMA copy-start/done 1 + 3 and the stall 2; idle
# [110, 112) and [120, 130). In flight: the async pair [40, 70) 30, 18 of it under fusion.2; fusion.3 6
# and all-reduce.2 8 their own time.
V6E_EXPECTED = {"span_ps": 130, "compute_ps": 38 + 18 + 30, "ici_ps": 2 + 10 + 6, "dcn_ps": 8, "dma_ps": 1 + 3 + 2,
                "idle_ps": 2 + 10, "comm_ps": 30 + 6 + 8, "hidden_ps": 18}


def test_v6e_shaped_profile_dcn_apart_async_line_not_counted_twice(tmp_path):
    """Every figure of the synthetic v6e step by hand: DCN apart from ICI, both communication; the async
    pair's span on ``Async XLA Ops`` adds nothing."""
    rows = breakdown.breakdown(events.load([synthetic.tpu_profile(tmp_path / "v6e.xplane.pb", chips=2)]))
    assert len(rows) == 4  # 2 chips x 2 steps
    for _, row in rows.iterrows():
        assert {k: int(row[k]) / U for k in V6E_EXPECTED} == V6E_EXPECTED
        assert sum(int(row[f"{p}_ps"]) for p in breakdown.PARTS) == row["span_ps"]


def test_dcn_shown_only_where_a_profile_has_it(tmp_path):
    """``perfkit trace breakdown`` text: a dcn column for the Megascale profile, none for one without;
    --json keeps dcn_ps always."""
    from click.testing import CliRunner

    from perfkit.cli import cli

    run = lambda *a: CliRunner().invoke(cli, ["trace", "breakdown", *map(str, a)])  # noqa: E731
    v6e = run(synthetic.tpu_profile(tmp_path / "v6e.xplane.pb", chips=2))
    assert v6e.exit_code == 0, v6e.output
    assert " dcn " in v6e.stdout and "0.008 (6.2%)" in v6e.stdout  # 8 of 130 us
    plain = run(one_step_trace(tmp_path / "a.xplane.pb", ASYNC_OPS))
    assert plain.exit_code == 0 and " dcn " not in plain.stdout and " ici " in plain.stdout
    assert '"dcn_ps": 0' in run(tmp_path / "a.xplane.pb", "--json").stdout


def test_gpu_collective_kernel_overlapped_by_another_stream(tmp_path):
    """gpu_trace step 0: the NCCL kernel of all-reduce-start.1 [5, 15) on its own stream, fusion_1 [0, 10)
    on another: 10 us of collective, 5 hidden, 5 exposed (a GPU start kernel is the transfer itself,
    with no done on its stream). Step 1 has no collective."""
    rows = breakdown.breakdown(events.load([gpu_trace(tmp_path / "g.xplane.pb")])).set_index("step")
    assert (rows.loc[0, "comm_ps"], rows.loc[0, "hidden_ps"], rows.loc[0, "ici_ps"]) == (10 * U, 5 * U, 5 * U)
    assert rows.loc[0, "overlap"] == 0.5
    assert rows.loc[1, "comm_ps"] == 0 and np.isnan(rows.loc[1, "overlap"])


def test_run_summary_reports_hidden_communication(tmp_path):
    def trial(index, variant, ops):
        one_step_trace(tmp_path / f"trials/{index:02d}-{variant}/rank0/trace/step0/h.xplane.pb", ops)
        return {"index": index, "variant": variant, "status": "ok", "dir": f"trials/{index:02d}-{variant}"}

    pair = lambda compute: [("all-gather-start.1", "all-gather-start", 0, 1),  # noqa: E731
                            ("fusion.1", "fusion", 1, 1 + compute), ("all-gather-done.1", "all-gather-done", 1 + compute, 12)]
    trials = [trial(0, "tp", [("fusion.1", "fusion", 0, 10), ("all-reduce.1", "all-reduce", 10, 14)]),
              trial(1, "sp", pair(8)), trial(2, "sp", pair(4))]
    got = trace_summary(tmp_path, trials)["variants"]
    assert (got["tp"]["comm_ms"], got["tp"]["hidden_ms"], got["tp"]["overlap"]) == pytest.approx((0.004, 0, 0))
    # sp: 12 us in flight each trial, hidden 8 and 4 -> 6 a step, half of it
    assert (got["sp"]["comm_ms"], got["sp"]["hidden_ms"], got["sp"]["overlap"]) == pytest.approx((0.012, 0.006, 0.5))
    assert got["sp"]["ici_ms"] == pytest.approx(0.006)

    from perfkit.report.markdown import _breakdown

    text = "\n".join(_breakdown({"breakdown": trace_summary(tmp_path, trials)}))
    assert "- tp's collectives take 0.004 ms a step, 0.000 ms of it hidden under compute (0%)." in text
    assert "- sp's collectives take 0.012 ms a step, 0.006 ms of it hidden under compute (50%)." in text
    assert "- sp against tp: +0.008 ms of collectives a step, +0.006 ms hidden." in text


def test_run_summary_and_report_show_dcn_where_a_variant_has_it(tmp_path):
    """summary.json's breakdown.variants.<v>.dcn_ms (the hand figures above) and the report's exposed DCN
    column, which a run without cross-slice collectives does not get."""
    from perfkit.report.markdown import _breakdown

    synthetic.tpu_profile(tmp_path / "trials/00-a/rank0/trace/step0/h.xplane.pb", chips=2)
    one_step_trace(tmp_path / "trials/01-b/rank0/trace/step0/h.xplane.pb", ASYNC_OPS)
    trials = [{"index": i, "variant": v, "status": "ok", "dir": f"trials/{i:02d}-{v}"} for i, v in enumerate("ab")]
    got = trace_summary(tmp_path, trials)
    a, b = got["variants"]["a"], got["variants"]["b"]
    assert {k.replace("_ms", "_ps"): a[k] * 1e3 for k in a if k.replace("_ms", "_ps") in V6E_EXPECTED} == pytest.approx(
        V6E_EXPECTED)
    assert b["dcn_ms"] == 0
    text = "\n".join(_breakdown({"breakdown": got}))
    assert "| exposed DCN |" in text and "| 0.008 (6.2%) |" in text  # 8 of 130 ps
    only_b = {**got, "variants": {"b": b}, "op_deltas": {}}
    assert "DCN" not in "\n".join(_breakdown({"breakdown": only_b}))


# -- a plain model of the definitions, one picosecond at a time --------------------------------------------

KINDS = {"fusion": "compute", "while": "compute", "all-reduce": "ici", "all-gather-start": "ici",
         "all-gather-done": "ici", "copy-start": "dma"}
LEAF_KINDS = list(KINDS)
PARENT_KINDS = ["while", "fusion", "all-reduce"]  # a collective fusion may have ops inside too


def _layout(rng, lo, hi, depth, out, line):
    """Properly nested random ops on one line inside [lo, hi): (line, start, end, depth, kind). A child
    is never its parent's exact copy (then either could be the parent)."""
    t = lo
    while t < hi - 1 and rng.random() < 0.75:
        a = int(rng.integers(t, hi - 1))
        b = int(rng.integers(a + 1, min(hi, a + 12) + 1))
        if depth and (a, b) == (lo, hi):
            b -= 1
        index = len(out)
        out.append([line, a, b, depth, str(rng.choice(LEAF_KINDS))])
        if depth < 2 and b - a > 2 and rng.random() < 0.4:
            inner = len(out)
            _layout(rng, a, b, depth + 1, out, line)
            if len(out) > inner:
                out[index][4] = str(rng.choice(PARENT_KINDS))
        t = b


def _model(ops):
    """(compute, ici, dma, idle, comm, hidden) of one span over all ops, from the definitions."""
    lo, hi = min(o[1] for o in ops), max(o[2] for o in ops)
    flights = []
    for line in {o[0] for o in ops}:
        mine = sorted((o for o in ops if o[0] == line), key=lambda o: (o[1], -o[2]))
        flights += [(o[1], o[2]) for o in mine if KINDS[o[4]] == "ici"]
        stack = []  # async pairs: a done closes the latest open start on its line
        for o in mine:
            if o[4] == "all-gather-start":
                stack.append(o)
            elif o[4] == "all-gather-done" and stack:
                flights.append((stack.pop()[1], o[2]))
    totals = dict.fromkeys(["compute", "ici", "dma", "idle", "comm", "hidden"], 0)
    for t in range(lo, hi):
        owners = set()
        for line in {o[0] for o in ops}:
            running = [o for o in ops if o[0] == line and o[1] <= t < o[2]]
            if running:
                owners.add(KINDS[max(running, key=lambda o: o[3])[4]])  # the innermost op
        owner = next((c for c in ("compute", "ici", "dma") if c in owners), "idle")
        totals[owner] += 1
        if any(a <= t < b for a, b in flights):
            totals["comm"] += 1
            totals["hidden"] += owner == "compute"
    return tuple(totals.values())


def _frame(ops, order):
    n = len(ops)
    rows = [ops[i] for i in order]
    cat = lambda values, cats=None: pd.Categorical(values, categories=cats)  # noqa: E731
    return pd.DataFrame({
        "rank": np.zeros(n, np.int32), "device": np.zeros(n, np.int32),
        # lines where ops nest (a GPU stream's never do: timeline._skewed)
        "line": cat([f"host/{o[0]}" for o in rows]), "name": cat([f"op{i}" for i in order]),
        "kind": cat([o[4] for o in rows]), "category": cat([KINDS[o[4]] for o in rows], list(CATEGORY_VALUES)),
        "start_ps": np.array([o[1] for o in rows], np.int64),
        "dur_ps": np.array([o[2] - o[1] for o in rows], np.int64),
        "step": np.full(n, -1, np.int32), "stall_ps": np.zeros(n, np.int64)})


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_breakdown_equals_a_per_picosecond_model(seed, lines):
    rng = np.random.default_rng(seed)
    ops = []
    for line in range(lines):
        _layout(rng, 0, 60, 0, ops, line)
    if not ops:
        return
    expected = _model(ops)
    # as a reader gives them (line by line, in time order, outer op first), and shuffled
    in_order = sorted(range(len(ops)), key=lambda i: (ops[i][0], ops[i][1], -ops[i][2]))
    for order in (in_order, list(rng.permutation(len(ops)))):
        rows = breakdown.breakdown(_frame(ops, order))
        got = tuple(int(rows.iloc[0][c]) for c in FIGURES[1:])
        assert got == expected


def test_the_op_delta_table_subtracts_its_shown_figures(tmp_path):
    """A newcomer's: `fusion | 2.982 | 3.535 | +0.554` (3.535 - 2.982 = 0.553) in report.md's largest changes by op
    kind. Each delta is the difference of the two times shown beside it, to the microsecond as every time in the
    report (2.98249 and 3.53551 differ by 0.55302: shown, 0.554)."""
    from perfkit.report.markdown import _breakdown

    one_step_trace(tmp_path / "trials/00-a/rank0/trace/step0/h.xplane.pb", ASYNC_OPS)
    one_step_trace(tmp_path / "trials/01-b/rank0/trace/step0/h.xplane.pb", ASYNC_OPS)
    trials = [{"index": i, "variant": v, "status": "ok", "dir": f"trials/{i:02d}-{v}"} for i, v in enumerate("ab")]
    got = trace_summary(tmp_path, trials)
    got["op_deltas"] = {"b": [{"key": "fusion", "category": "compute", "a_ms": 2.98249, "b_ms": 3.53551,
                               "delta_ms": 3.53551 - 2.98249},
                              {"key": "dot", "category": "compute", "a_ms": 0.0126, "b_ms": 0.0114,
                               "delta_ms": 0.0114 - 0.0126}]}
    text = "\n".join(_breakdown({"breakdown": got}))
    assert "| `fusion` | compute | 2.982 | 3.536 | +0.554 |" in text
    assert "| `dot` | compute | 0.013 | 0.011 | -0.002 |" in text


def test_the_breakdown_shares_add_up_to_100(tmp_path):
    """A newcomer's: 2.960 (36%), 3.301 (40%), 0.000 (0%), 2.072 (25%) of an 8.333 ms span: 101%. Shares to 0.1%
    adding to 100.0, the tenths left to the largest remainders (35.521, 39.613, 0, 24.865: 35.5, 39.6, 0.0, 24.9),
    each within 0.1% of its figure (whole ones read 8.818 of 14.139 ms as 63%, another newcomer's)."""
    from perfkit.report.markdown import _breakdown

    one_step_trace(tmp_path / "trials/00-a/rank0/trace/step0/h.xplane.pb", ASYNC_OPS)
    trials = [{"index": 0, "variant": "a", "status": "ok", "dir": "trials/00-a"}]
    got = trace_summary(tmp_path, trials)
    got["variants"]["a"].update(span_ms=8.333, compute_ms=2.960, ici_ms=3.301, dcn_ms=0.0, dma_ms=0.0, idle_ms=2.072)
    text = "\n".join(_breakdown({"breakdown": got}))
    assert "| 8.333 | 2.960 (35.5%) | 3.301 (39.6%) | 0.000 (0.0%) | 2.072 (24.9%) |" in text
