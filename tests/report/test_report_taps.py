"""A run whose trials tapped (``perfkit.record.tap``): summary.json's ``taps``, report.md's "First
departure" with its plot, from the hand-made run directories of ``run_fixtures``."""

import json

import numpy as np

from perfkit import record
from perfkit.run import finish
from run_fixtures import ab_trials, frames, outputs_for, write_run

X = np.linspace(-1.0, 1.0, 8, dtype=np.float32)


def tapped_run(folder, monkeypatch, off=1.01):
    """A rendered run whose trials tapped two blocks, b's second ``off`` times a's (1.01: off by 1e-2 relative,
    where float32 allows 3.5e-4: the first departure)."""
    trials = ab_trials(values=False)
    run = write_run(folder, trials, outputs_for(trials, frames(), frames()))
    for t in trials:
        rank = run / t["dir"] / "rank0"
        monkeypatch.setenv("PERFKIT_METRICS", str(rank / "metrics.jsonl"))
        monkeypatch.setenv("PERFKIT_TAP_ARRAYS", "1")
        state = {"path": None, "handle": None, "count": 0}
        monkeypatch.setattr(record, "_taps", state)
        record.tap("block0.out", X, step=0)
        record.tap("block1.out", X * (off if t["variant"] == "b" else 1.0), step=0)
        state["handle"].close()
    finish.render(run)
    return run


def test_a_tapped_run_reports_its_first_departure(tmp_path, monkeypatch):
    run = tapped_run(tmp_path / "run", monkeypatch)

    taps = json.loads((run / "summary.json").read_text())["taps"]
    assert (taps["a"]["trial"], taps["b"]["trial"], taps["repeats"], taps["basis"]) == (0, 1, 2, "dtype")
    assert taps["first"]["name"] == "block1.out" and abs(taps["first"]["rel_l2"] - 0.01) < 1e-6
    report = (run / "report.md").read_text()
    quality = report[report.index("## Quality"):report.index("## Rank consistency")]
    assert "### First departure" in quality and "First departure: **`block1.out` at step 0** (tap 1)" in quality
    # (it said "a's 2 repeat(s)", which a newcomer read as two runs where there were three)
    assert "a's 3 trials (the compared one and 2 more) were bit-identical at every tap" in quality
    assert "![Agreement by layer (taps), B vs A](plots/taps.png)" in report
    assert (run / "plots" / "taps.png").stat().st_size > 0


def test_the_summary_line_names_the_first_departure(tmp_path, monkeypatch):
    """The one line a run prints answers where B's outputs first part from A's, as it gives the PSNR: a newcomer
    planting a fault in layer 5 of 8 read 'PSNR fault vs clean 79.5 dB' and had to open the report for the layer.
    Without a departure the line says nothing of taps."""
    from perfkit.report.line import summary_line  # (the line alone, as perfkit run prints it)

    for off, said in ((1.01, "; first departure b vs a (taps): block1.out at step 0"), (1.0, None)):
        run = tapped_run(tmp_path / f"run{off}", monkeypatch, off)
        line = summary_line(json.loads((run / "summary.json").read_text()), run / "report.md")
        if said:
            assert said + "; report" in line
        else:
            assert "departure" not in line and "taps" not in line



def _tap(index: int, rel_l2: float, psnr_db, allowance: float, bit_identical: bool = False) -> dict:
    return {"index": index, "step": 0, "name": f"block{index}.out", "rel_l2": rel_l2, "psnr_db": psnr_db,
            "allowance": allowance, "basis": "dtype", "bit_identical": bit_identical, "departs": False,
            "repeat_rel_l2": 0.0}


def demo_taps_section() -> str:
    """The First departure section of a hand-made summary like the demo's: no departure, three taps."""
    from perfkit.report.departure import departure_section  # (the section alone)

    rows = [_tap(0, 0.0026, 68.49, 0.088), _tap(1, 0.00485, 63.92, 0.01), _tap(2, 0.0, "inf", 0.088, True)]
    taps = {"a": {"variant": "tp", "trial": 0, "dir": "trials/00-tp/rank0"},
            "b": {"variant": "sp", "trial": 1, "dir": "trials/01-sp/rank0"}, "taps": 3, "rows": rows,
            "repeats": 0, "allowances": {"bfloat16": 0.088}, "first": None, "mismatch": None}
    return "\n".join(departure_section({"taps": taps}))


def test_the_taps_table_says_its_psnr_is_over_a_range():
    """A newcomer's, on the demo's table: the PSNR column did not say over which range; only a departure's sentence
    did, so a run without one never said it."""
    text = demo_taps_section()
    assert "First departure:" not in text
    assert "| tap | step | name | relative L2 | PSNR over tp's range, max - min (dB) | allowance |" in text


def test_the_taps_table_shows_each_column_to_its_significant_figures():
    """A newcomer's, on the demo's table: relative L2 read 0.0026 beside 0.00485 (.3g drops a trailing 0), as an
    allowance 0.01 would beside 0.088. By hand: relative L2 to 3 significant figures, 0.0026 -> 0.00260, 0 (a
    bit-identical tap) -> 0; allowances to 2, 0.01 -> 0.010."""
    text = demo_taps_section()
    assert "No departure: sp stays within the allowance at all 3 taps (1 bit-identical, largest relative L2 " \
           "0.00485)." in text
    assert "| 0 | 0 | `block0.out` | 0.00260 | 68.49 | 0.088 |" in text
    assert "| 1 | 0 | `block1.out` | 0.00485 | 63.92 | 0.010 |" in text
    assert "| 2 | 0 | `block2.out` | 0 | inf | 0.088 |" in text


def test_the_summary_line_says_bit_identical_frames_are_8_bit_where_taps_differ(tmp_path, monkeypatch):
    """A newcomer's case wrote uint8 frames: the line said 'PSNR ring vs ulysses inf (bit-identical)' where none of its
    taps was bit-identical (relative L2 up to 3.4e-7), the float differences lost in the 8-bit frames. Here b's second
    tap is off by 3e-7 relative (inside float32's allowance: no departure), its frames a's."""
    from perfkit.report.line import summary_line

    run = tapped_run(tmp_path / "run", monkeypatch, off=1.0000003)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["quality"]["bit_identical"] and summary["taps"]["first"] is None
    assert [r["bit_identical"] for r in summary["taps"]["rows"]] == [True, False]
    line = summary_line(summary, run / "report.md")
    assert "; PSNR b vs a inf (frames bit-identical (8-bit); 1 of 2 taps not bit-identical); report" in line
    # taps all bit-identical: the outputs are said to be, as before
    run = tapped_run(tmp_path / "same", monkeypatch, off=1.0)
    assert "; PSNR b vs a inf (bit-identical); report" in summary_line(
        json.loads((run / "summary.json").read_text()), run / "report.md")
