"""``--plot`` of every command that has one: a suffix matplotlib writes no file of is refused in one line before any
work; a name without a suffix is written, and said, as NAME.png."""

import numpy as np
import pytest
from click.testing import CliRunner

from perfkit.cli import cli

# the formats matplotlib 3.x's savefig writes, from its documentation (FigureCanvasBase.filetypes), not from perfkit
MATPLOTLIB_WRITES = (".eps", ".jpeg", ".jpg", ".pdf", ".pgf", ".png", ".ps", ".raw", ".rgba", ".svg", ".svgz", ".tif",
                     ".tiff")


def _commands(fixtures_dir, tmp_path):
    trace = str(fixtures_dir / "kineto" / "rank-0.json.gz")
    np.save(tmp_path / "a.npy", np.ones((3, 4), np.float32))
    np.save(tmp_path / "b.npy", np.full((3, 4), 1.5, np.float32))
    return {"trace breakdown": ["trace", "breakdown", trace],
            "quality --drift": ["quality", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--drift"],
            "quality taps": ["quality", str(tmp_path / "no-such-run")]}


@pytest.mark.parametrize("command", ["trace breakdown", "quality --drift", "quality taps"])
def test_a_plot_suffix_matplotlib_cannot_write_is_refused_up_front(fixtures_dir, tmp_path, command):
    """Before, trace breakdown ran its analysis, then matplotlib's ValueError ("Format 'txt' is not supported") came
    out as a traceback, exit 1, the table never printed."""
    target = tmp_path / "x.txt"
    result = CliRunner().invoke(cli, [*_commands(fixtures_dir, tmp_path)[command], "--plot", str(target)])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.output
    line = result.stderr
    assert line.startswith(f"perfkit: {target}: --plot: matplotlib writes no .txt file; give one of "), line
    assert all(s in line.split("give one of ")[1] for s in MATPLOTLIB_WRITES), line
    assert not target.exists()


def test_a_plot_without_suffix_says_the_file_it_wrote(fixtures_dir, tmp_path):
    """Before, `--plot x` printed `plot: x` while matplotlib wrote x.png."""
    target = tmp_path / "steps"
    result = CliRunner().invoke(cli, [*_commands(fixtures_dir, tmp_path)["trace breakdown"], "--plot", str(target)])
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith(f"\nplot: {target}.png\n"), result.stdout[-200:]
    assert not target.exists() and (tmp_path / "steps.png").read_bytes()[:4] == b"\x89PNG"
    drift = CliRunner().invoke(cli, [*_commands(fixtures_dir, tmp_path)["quality --drift"], "--plot",
                                     str(tmp_path / "drift")])
    assert drift.exit_code == 0, drift.output
    assert (tmp_path / "drift.png").read_bytes()[:4] == b"\x89PNG"


def test_a_plot_suffix_matplotlib_writes_is_kept(fixtures_dir, tmp_path):
    target = tmp_path / "steps.SVG"  # (matplotlib reads the suffix in any case)
    result = CliRunner().invoke(cli, [*_commands(fixtures_dir, tmp_path)["trace breakdown"], "--plot", str(target)])
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith(f"\nplot: {target}\n") and b"<svg" in target.read_bytes()[:400]
