"""Writing matplotlib figures (drawn on ``Figure``, never pyplot's global state) as PNG, and the colours
every plot of a traced step shares; a command's ``--plot`` file checked before any work."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from perfkit.errors import BadInput

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# (label, colour) of each part of a traced step, in perfkit.trace.breakdown order
PART_STYLE = {"compute": ("compute", "#4c72b0"), "ici": ("exposed ICI", "#dd8452"),
              "dcn": ("exposed DCN", "#8172b3"), "dma": ("local DMA", "#55a868"),
         "idle": ("idle", "#c8c8c8")}
DPI = 100


def save_figure(fig: Figure, path: Path) -> Path:
    """Lay out and write a figure, as its suffix says (``plot_file``; folders made as needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def plot_file(ctx, param, value: str | None) -> str | None:
    """A click callback of a ``--plot`` option: the file the plot will be written to, refused up front where
    matplotlib writes no file of its suffix (it would fail after the command's work, its table unprinted); a
    name without a suffix gets ``.png``, as matplotlib would add to it, so the name said is the file written."""
    if value is None:
        return None
    suffix = Path(value).suffix
    if not suffix:
        return f"{value}.png"
    # matplotlib: only where a plot is asked for (never for --help)
    from matplotlib.backend_bases import FigureCanvasBase

    kinds = sorted(FigureCanvasBase.get_supported_filetypes())
    if suffix[1:].lower() not in kinds:
        raise BadInput(f"matplotlib writes no {suffix} file; give one of {', '.join('.' + k for k in kinds)} "
                       "(none: .png)", path=value, field=param.opts[-1])
    return value
