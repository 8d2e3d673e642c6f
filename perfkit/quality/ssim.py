"""SSIM as ffmpeg's ``ssim`` filter gives it, the figure people quote for video: ``ffmpeg -i A -i B -lavfi ssim
-f null -`` prints it per plane (Y U V, or R G B) and ``All``. Measured by that filter itself, libavfilter's
``ssim`` run through PyAV's filter graph on the frames perfkit has decoded (and hashed): per plane, 8x8 windows on
a 4-sample grid from 4x4 block sums (Wang et al.'s SSIM with the filter's integer constants), the plane's SSIM
their mean; ``All`` the planes weighted by their sizes (4:2:0: Y 4/6, U and V 1/6 each). No Gaussian window,
unlike scikit-image's SSIM.

Each frame's figures are the filter's frame metadata (``lavfi.ssim.Y`` ... ``lavfi.ssim.All``, six decimals);
the summary (each plane's and All's mean over frames, dB = -10 log10(1 - SSIM)) is the line the filter logs as
its graph is freed, six decimals as printed: pooling the frames' six-decimal figures again would miss its last
decimals (its dB most, which magnifies All's error by 4.3 / (1 - All)). Frames in RGB (arrays, images, an RGB
video) are measured in ``gbrp``, as ffmpeg measures them after ``format=rgb24,format=gbrp``: each channel a plane,
named R G B; a fourth (alpha) channel is left out, as ``gbrp`` drops it. (A YUV video taken straight to ``gbrp``
is converted by another path in some ffmpeg versions, 5.1 for one, and its figures part from these.)

ffmpeg builds whose x86 ``ssim_end_line`` predates the fix of its last 1-3 windows of a row (Debian 12's 5.1, for
one) differ from the filter's C code on planes (width // 4 - 1) mod 4 = 1 wide (a 720-wide 4:2:0 video's U and V; a
424-, 426- or 568-wide one's Y alone; all three planes of a 425-wide 4:4:4 one) that A and B do not hold alike; the
libavfilter PyAV bundles (11) has the fix, as ffmpeg 9 does.
"""

from __future__ import annotations

import re

import av
import av.logging
import numpy as np

from perfkit.errors import BadInput

DEFINITION = ("ffmpeg's ssim filter: 8x8 windows on a 4-sample grid from 4x4 block sums, per plane, "
              "All weighted by plane size")
REPRODUCE = {
    "yuv": "ffmpeg -i A -i B -lavfi ssim -f null -",
    "rgb": ("ffmpeg -i A -i B -lavfi '[0:v]format=rgb24,format=gbrp[a];[1:v]format=rgb24,format=gbrp[b];[a][b]ssim' "
            "-f null -"),
}
# the filter's frame format for RGB frames by channel count (as ``channels`` gives them), and where each
# RGB channel lies in it (gbrp: G B R)
RGB_FORMATS = {1: ("gray", (0,)), 3: ("gbrp", (2, 0, 1))}
SUMMARY = re.compile(r"(\w+):([0-9.]+|inf) \(([0-9.]+|inf)\)")  # the logged line's "Y:0.991049 (20.481258)"


def channels(frame: np.ndarray) -> tuple[np.ndarray, ...]:
    """An (H, W, C) frame's planes as the filter sees it: in gbrp (R, G, B; alpha dropped), or in gray8 (one)."""
    return tuple(frame[..., k] for k in range(3 if frame.shape[-1] >= 3 else 1))


class SsimTally:
    """Per-frame, per-plane SSIM of one space, a frame pair at a time through libavfilter's ssim filter; ``line``
    the filter's summary."""

    def __init__(self, space: str, planes: tuple[str, ...], pix_fmt: str | None = None):
        self.space, self.planes, self.pix_fmt = space, planes, pix_fmt
        self.format, self.order = (pix_fmt, tuple(range(len(planes)))) if space == "yuv" else RGB_FORMATS[len(planes)]
        self.keys = [f"lavfi.ssim.{p.upper()}" for p in planes] + ["lavfi.ssim.All"]
        self.rows: list[list[float]] = []
        self.graph = self.sources = self.sink = None
        self.pushed = 0
        self.widths: tuple[int, ...] = ()  # each plane's width, as the filter measures it
        self.alike: list[bool] = []  # per plane, whether A's and B's are bit-identical in every frame so far
        self.summary: dict[str, tuple[float, float]] = {}  # plane (upper case) or All -> (SSIM, dB) as logged

    def _open(self, width: int, height: int) -> None:
        self.graph = av.filter.Graph()
        self.sources = [self.graph.add_buffer(width=width, height=height, format=self.format, time_base="1/1")
                        for _ in range(2)]
        node, self.sink = self.graph.add("ssim"), self.graph.add("buffersink")
        for k, source in enumerate(self.sources):
            source.link_to(node, 0, k)
        node.link_to(self.sink)
        self.graph.configure()

    def _frame(self, planes: tuple[np.ndarray, ...]) -> av.VideoFrame:
        """The planes copied into a frame of the filter's format (its planes' rows are padded)."""
        frame = av.VideoFrame(planes[0].shape[1], planes[0].shape[0], self.format)
        for index, plane in zip(self.order, planes):
            target = frame.planes[index]
            np.frombuffer(target, np.uint8).reshape(target.height, target.line_size)[:, :target.width] = plane
        return frame

    def _drain(self) -> None:
        while True:
            try:
                metadata = self.sink.pull().metadata
            except (av.error.BlockingIOError, av.error.EOFError):
                return
            self.rows.append([float(metadata[k]) for k in self.keys])

    def add(self, a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...], sources: tuple | None = None) -> None:
        """Measure one frame pair's planes; ``sources``: the decoder's frames they view, pushed as they are where
        they are in the filter's format (no copy)."""
        if min(min(p.shape) for p in a) < 8:
            small = min(a, key=lambda p: min(p.shape))
            raise BadInput(f"SSIM needs planes of at least 8x8 samples, got {small.shape[1]}x{small.shape[0]}")
        if self.graph is None:
            self._open(a[0].shape[1], a[0].shape[0])
            self.widths = tuple(p.shape[1] for p in a)
            self.alike = [True] * len(a)
        # a plane found to differ is not compared again
        self.alike = [same and np.array_equal(x, y) for same, x, y in zip(self.alike, a, b)]
        for source, planes, decoded in zip(self.sources, (a, b), sources or (None, None)):
            if decoded is None or decoded.format.name != self.format:
                decoded = self._frame(planes)
            decoded.pts = self.pushed
            source.push(decoded)
        self.pushed += 1
        self._drain()

    def _flush(self) -> None:
        """Every pushed frame's figures, then the graph freed and the summary line the filter logs then read."""
        if self.graph is None:
            return
        for source in self.sources:
            source.push(None)
        self._drain()
        level, skip = av.logging.get_level(), av.logging.get_skip_repeated()
        av.logging.set_level(av.logging.INFO)  # the filter logs its summary at INFO; PyAV's default is silent
        av.logging.set_skip_repeated(False)  # else a pair measured twice logs its line once
        try:
            with av.logging.Capture(local=True) as logs:
                self.graph = self.sources = self.sink = None  # the last references: the graph is freed here
        finally:
            av.logging.set_level(level)
            av.logging.set_skip_repeated(skip)
        line = next((text for _, name, text in logs if name == "ssim" and text.startswith("SSIM ")), None)
        if line is None:  # a reference to the graph outlived it: no figure rather than one pooled otherwise
            raise RuntimeError("libavfilter's ssim filter logged no summary line")
        self.summary = {k: (float(v), float(db)) for k, v, db in SUMMARY.findall(line)}

    def per_frame(self) -> dict[str, np.ndarray]:
        """``ssim_<plane>`` and ``ssim_all`` per frame."""
        self._flush()
        values = np.asarray(self.rows, np.float64).reshape(len(self.rows), len(self.keys))
        return {f"ssim_{p}": values[:, i] for i, p in enumerate((*self.planes, "all"))}

    def line(self) -> dict:
        """The filter's summary line: each plane's and All's mean over frames, with dB, as it logs them; the
        definition, the command that prints it, and the planes on which older builds part from it (none that A
        and B hold alike: equal block sums give every window SSIM 1 in any build)."""
        self._flush()
        names = {p: p.upper() for p in self.planes} | {"all": "All"}
        older = [p for p, width, same in zip(self.planes, self.widths, self.alike)
                 if not same and older_release_parts(width)]
        return {"definition": DEFINITION, "space": self.space, **({"pix_fmt": self.pix_fmt} if self.pix_fmt else {}),
                "planes": list(self.planes), "ssim": {k: self.summary[n][0] for k, n in names.items()},
                "ssim_db": {k: self.summary[n][1] for k, n in names.items()}, "reproduce": REPRODUCE[self.space],
                "older_ffmpeg_parts": older}


def older_release_parts(width: int) -> bool:
    """Whether ffmpeg builds before the fix of x86 ``ssim_end_line`` (Debian 12's 5.1) give a plane of this width
    other figures: where (width // 4 - 1) mod 4 = 1, the row's last windows they get wrong."""
    return (width // 4 - 1) % 4 == 1
