"""The referee of the video figures, with no ffmpeg binary: libavfilter's own two-input filters (psnr, ssim) run
through PyAV as ``ffmpeg -i A -i B -lavfi NAME`` runs them, and PyAV's encoders to make the pairs they measure."""

from fractions import Fraction

import av


def decoded(path) -> list:
    with av.open(str(path)) as c:
        return list(c.decode(video=0))


def encode(frames, path, codec: str, pix_fmt: str, options: dict, rate: int = 8, size=None):
    """Decoded frames (or RGB arrays) through PyAV's encoder, frame i at i / ``rate`` s (the filters pair frames by
    time); frames already in ``pix_fmt`` and ``size`` go in as they are (no RGB trip)."""
    with av.open(str(path), "w") as container:
        stream = None
        for index, frame in enumerate(frames):
            if not isinstance(frame, av.VideoFrame):
                frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            if stream is None:
                stream = container.add_stream(codec, rate=rate, options=options)
                stream.width, stream.height = size or (frame.width, frame.height)
                stream.pix_fmt = pix_fmt
            if (frame.format.name, frame.width, frame.height) != (pix_fmt, stream.width, stream.height):
                frame = frame.reformat(width=stream.width, height=stream.height, format=pix_fmt)
            frame.pts, frame.time_base = index, Fraction(1, rate)
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path


def filter_metadata(a, b, name: str, pix_fmt: str | None = None, pre: tuple[tuple[str, str], ...] = ()
                    ) -> list[dict[str, str]]:
    """libavfilter's filter ``name`` on videos A and B (each through the filters ``pre``, (name, arguments) in
    order, e.g. ``("setpts", "N/TB")``, then converted to ``pix_fmt`` when given, as ``format=PIX_FMT`` does: by
    libswscale): each output frame's metadata, as the filter writes it. The filter logs its summary line as the
    graph is freed, when this returns."""
    rows = []
    with av.open(str(a)) as ca, av.open(str(b)) as cb:
        sa, sb = ca.streams.video[0], cb.streams.video[0]
        graph = av.filter.Graph()
        ins = graph.add_buffer(template=sa), graph.add_buffer(template=sb)
        node, sink = graph.add(name), graph.add("buffersink")
        for k, src in enumerate(ins):
            for filter_name, args in pre:
                step = graph.add(filter_name, args)
                src.link_to(step)
                src = step
            if pix_fmt:
                fmt = graph.add("format", f"pix_fmts={pix_fmt}")
                src.link_to(fmt)
                src = fmt
            src.link_to(node, 0, k)
        node.link_to(sink)
        graph.configure()

        def drain():
            while True:
                try:
                    frame = sink.pull()
                except (av.error.BlockingIOError, av.error.EOFError):
                    return
                rows.append(dict(frame.metadata))

        try:
            for fa, fb in zip(ca.decode(sa), cb.decode(sb)):
                ins[0].push(fa)
                ins[1].push(fb)
                drain()
            for src in ins:
                src.push(None)
        except av.error.EOFError:  # the graph has ended (a trim took its last frame)
            pass
        drain()
    return rows
