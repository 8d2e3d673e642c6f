"""One real video re-encoded by PyAV alone: a B that differs from A in every frame, for the tests that sweep
``perfkit quality`` over the real files (the corpus and the light install)."""

from fractions import Fraction
from pathlib import Path

import av


def crf30(src: Path, dst: Path, rate: int = 8) -> Path:
    """``src`` through x264 at CRF 30 (yuv420p, the source's size): frame i at i / ``rate`` s, as the source."""
    with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
        source = inp.streams.video[0]
        stream = out.add_stream("libx264", rate=rate, options={"crf": "30", "preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = source.width, source.height, "yuv420p"
        for index, frame in enumerate(inp.decode(source)):
            frame = frame.reformat(format="yuv420p")
            frame.pts, frame.time_base = index, Fraction(1, rate)
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    return dst
