"""Writing matplotlib figures (drawn on ``Figure``, never pyplot's global state) as PNG, and the colours
every plot of a traced step shares."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

# (label, colour) of each part of a traced step, in perfkit.trace.breakdown order
PART_STYLE = {"compute": ("compute", "#4c72b0"), "ici": ("exposed ICI", "#dd8452"),
              "dcn": ("exposed DCN", "#8172b3"), "dma": ("local DMA", "#55a868"),
         "idle": ("idle", "#c8c8c8")}
DPI = 100


def save_figure(fig: Figure, path: Path) -> Path:
    """Lay out and write a figure as PNG (folders made as needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path
