"""Frames and tensors from files, read one frame at a time: videos, GIFs and APNGs (PyAV), folders of PNG / JPEG
frames, ``.npy`` / ``.npz`` arrays, and a run's ``outputs/`` folder; and video encoding for the codec floor.

Every input opens as a ``Media``: ``kind`` "frames" (uint8 frames, each (H, W, C)) or "tensor" (any
other array, read whole). Frames stream, so comparing two long videos holds a few frames, not two
videos. Videos are decoded to RGB24 as ffmpeg's ``format=rgb24`` filter converts them; a video in an 8-bit
planar YUV format (``pix_fmt``) also gives its frames' own planes, undecoded further (``VideoFile.planes``).
A video's frames are counted from its packets; an incomplete packet, an MP4 index listing more packets than
the file holds, an error its demuxer logs (Matroska's "File ended prematurely") or a GIF without its trailer
catches truncated files. Anything unreadable is a ``BadInput`` naming the file.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import queue
import re
import threading
import tokenize
import zlib
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

import av
import numpy as np

from perfkit.errors import BadInput
from perfkit.quality.planes import Decoded
from perfkit.rundata.rundir import rank_dirs

# (the last five: elementary streams)
VIDEO_SUFFIXES = (".mp4", ".mkv", ".webm", ".mov", ".avi", ".gif", ".apng", ".m4v", ".3gp", ".ts", ".flv", ".ogv",
                  ".mpg", ".mpeg", ".y4m", ".ivf", ".h264", ".264", ".hevc", ".h265", ".265")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
IMAGE_RATE = 25  # frames a second ffmpeg's image sequence reader gives a folder of frames (its -framerate default)
_NUMBERED = re.compile(r"(.*?)(\d+)(\.\w+)")  # a frame's file name: prefix, number, suffix
ARRAY_SUFFIXES = (".npy", ".npz")
RGB_FORMATS = ("rgb24", "bgr0", "gbrp")  # pixel formats that hold uint8 RGB exactly
# 8-bit planar YUV: such videos are compared in their own planes, as ffmpeg's psnr filter does.
YUV_FORMATS = ("yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p", "yuv440p", "yuvj440p",
               "yuv411p", "yuv410p")
FULL_RANGE = 2  # AVCOL_RANGE_JPEG: a YUV stream's planes span 0-255
# containers without an index that counts their frames, whose last packets, cut short, the demuxer still gives
UNINDEXED = ("mpegts", "h264", "hevc", "mpegvideo", "m4v", "flv", "mpeg")
_CUT_SAID_IN_LOG = ("matroska,webm",)  # demuxers whose errors, logged as they read, mean the file is cut or damaged
LATENTS_FILE = "latents.npy"  # per-step latents (steps, ...) a run may save; compared as drift, not as output
# A comparison decodes its two videos at once, each in a thread of its own, and each video on one decoding thread:
# under ffmpeg's frame or slice threads a damaged frame's corrupt flag, and err_detect's error, can be lost (a
# damaged clip of 8 frames decoded on 8 threads: every frame whole, measured), and a concealed frame would be
# measured as if whole. On 2 cores both stay busy, with less CPU than ffmpeg's own choice (cores + 1 frame threads
# per video: benchmarks/quality_throughput.py); on more, perfkit leaves cores to ffmpeg's speed.
DECODE_THREADS = 1
# whose filters the figures are (the commands they name give them with it; other releases' filters part in
# places: 5.1's ssim on planes whose width / 4 - 1 leaves 1 divided by 4 (``perfkit.quality.ssim``), its conversion
# to rgb24 of frames of more than 8 bits a sample, ``Media.over_8_bits``)
FFMPEG_RELEASE = (f"FFmpeg {av.ffmpeg_version_info} (PyAV's libavfilter "
                  f"{'.'.join(map(str, av.library_versions['libavfilter']))})")


class Media:
    """An opened input. ``count`` is the number of frames (leading entries) when known before reading."""

    label: str
    kind: str = "frames"
    count: int | None = None
    frame_shape: tuple[int, ...] | None = None
    detail: str = ""
    pix_fmt: str | None = None  # one of YUV_FORMATS for a video that decodes to it: it has source planes
    # whether those planes are full range (0-255: yuvj formats, or a yuv one its stream tags so, as VP9, AV1 and
    # HEVC decoders give it), not the limited range (16-235) a yuv format's planes otherwise hold
    full_range: bool = False
    # a video's or an image folder's decoded pixel format, whichever it is (yuv420p10le, gbrp, pal8, ...): a folder's
    # first frame's
    decoded_format: str | None = None
    # the pixel format of its decoded frames where they hold an alpha plane (an RGBA PNG, a GIF's bgra), which
    # RGB24 drops, as the commands' format=rgb24 does: known once its frames are read (an image folder's any frame)
    alpha: str | None = None
    # the pixel format of its decoded frames where they hold more than 8 bits a sample (rgb48be, yuv420p10le), which
    # RGB24, as the commands' format=rgb24, converts to 8 bits: known once its frames are read (an image folder's
    # any frame)
    over_8_bits: str | None = None
    # a video stream's tag saying it holds an alpha plane its decoder does not give (alpha_mode=1: a WebM's VP8 or
    # VP9 alpha, kept beside the colour in Matroska BlockAdditional data, which FFmpeg's own decoders skip)
    alpha_tag: str | None = None

    def frames(self, start: int = 0, stop: int | None = None) -> Iterator[np.ndarray]:
        """uint8 frames ``start:stop``, each (H, W, C), one at a time."""
        raise NotImplementedError

    def array(self) -> np.ndarray:
        raise BadInput("holds frames, not a tensor", path=self.label)

    def describe(self) -> str:
        return f"{self.label} ({self.detail})"

    def times(self) -> list[Fraction] | None:
        """Its frames' presentation times (s) as ffmpeg reads them, where it reads the input (None: it cannot)."""
        return None

    def ffmpeg_input(self, name: str) -> str | None:
        """How ffmpeg is to be given it, called ``name``, where ``-i NAME`` is not the way (None: it is)."""
        return None

    def ffmpeg_unreadable(self) -> str | None:
        """What it is, where ffmpeg cannot read it (no command measures it); None where it can."""
        return None


class VideoFile(Media):
    """A video container (mp4 / mkv / webm / ...), a path or the bytes of one."""

    def __init__(self, source: Path | bytes, label: str):
        self.source, self.label = source, label
        with self._open() as container:
            stream = container.streams.video[0]
            if stream.codec_context is None:  # the stream names a codec ffmpeg has no decoder for
                raise BadInput("its video stream has no decoder (an unknown or damaged codec id)", path=label)
            self._read_packets(container, stream)
            self.rate = stream.average_rate or stream.guessed_rate  # frames a second, a Fraction (None if unknown)
            self.frame_shape = (stream.height, stream.width, 3)
            fmt = stream.format.name if stream.format else None
            self.pix_fmt, self.decoded_format = (fmt if fmt in YUV_FORMATS else None), fmt
            self.alpha, self.over_8_bits = _alpha(stream.format), _over_8_bits(stream.format)
            self.decoder = stream.codec_context.codec.name  # the one ffmpeg -i picks, as PyAV does (vp9, libdav1d)
            tags = [f"{key}={value}" for key, value in stream.metadata.items()
                    if key.lower() == "alpha_mode" and value != "0"]  # the key's case varies by writer
            self.alpha_tag = tags[0] if tags and not self.alpha else None
            self.full_range = bool(self.pix_fmt) and (self.pix_fmt.startswith("yuvj") or
                                                      stream.codec_context.color_range == FULL_RANGE)
            tagged = ", full range" if self.full_range and not self.pix_fmt.startswith("yuvj") else ""
            self.video_streams = len(container.streams.video)  # the first is the one compared
            first = f", the first of its {self.video_streams} video streams" if self.video_streams > 1 else ""
            # the codec's name (av1), not its decoder's (libdav1d)
            self.detail = (f"video {stream.codec_context.codec.canonical_name} {fmt or '?'}{tagged}, "
                           f"{self.count or '?'} frames of {stream.width}x{stream.height}{first}")

    def _read_packets(self, container, stream) -> None:
        """Its frames from its packets (nothing decoded): ``count``, those shown (a packet an edit list discards, or
        an empty one, as AVI's dropped frames are, shows none), and their timestamps; BadInput where the file is
        cut short: a packet incomplete, or fewer packets than an MP4 / MOV index lists."""
        shown, packets, k = [], 0, 0
        head: list[tuple[bool, int | None]] = []  # (keyframe, pts) of its packets before its second keyframe
        self.demuxer = demuxer = container.format.name
        try:
            with _LIBAV_ERRORS.logged() as logged:
                for k, packet in enumerate(container.demux(stream)):
                    if packet.is_corrupt:  # the demuxer read fewer bytes than the index promised
                        raise BadInput(f"truncated or damaged: packet {k} is incomplete", path=self.label)
                    if packet.size:
                        packets += 1
                        if not (packet.is_keyframe and head) and len(head) == packets - 1:
                            head.append((packet.is_keyframe, packet.pts))
                        if not packet.is_discard:
                            shown.append(packet.pts if packet.pts is not None else -1)
        except av.error.FFmpegError as exc:  # a damaged header or size field (two Y4M files joined, a zeroed IVF)
            raise BadInput(f"damaged: its packets cannot be read after packet {k} ({exc.strerror})",
                           path=self.label) from None
        # Matroska's demuxer stops at a cut file's end, or where a cut in the middle loses its place, as at the
        # file's end: only its log says so
        said = [message.strip() for _, name, message in logged if name == demuxer and name in _CUT_SAID_IN_LOG]
        if said:
            raise BadInput(f"truncated or damaged after {packets} frames: its {demuxer} demuxer says {said[0]!r}",
                           path=self.label)
        if demuxer == "gif" and not self._ends_with(b";"):  # a GIF cut short ends mid-frame, which decodes in part
            raise BadInput(f"truncated: a GIF ends with a trailer byte (0x3B), this one does not (its last of "
                           f"{packets} frames may be cut)", path=self.label)
        listed = stream.frames  # an MP4's sample table lists every packet; AVI's and MKV's counts are no such list
        if container.format.name.startswith("mov,") and listed > packets:
            raise BadInput(f"truncated, or its index damaged: the index lists {listed} frames, the file holds "
                           f"{packets}", path=self.label)
        self.count, self._pts = len(shown), sorted(shown)
        self._head, self._begins_inside = len(head), _begins_inside(head)
        self._time_base, self._start_us, self._codec_rate = stream.time_base, container.start_time, stream.guessed_rate

    def _ends_with(self, tail: bytes) -> bool:
        """Whether its bytes end with ``tail``, zero bytes after it aside (padding, as some writers leave)."""
        if isinstance(self.source, bytes):
            return self.source.rstrip(b"\0").endswith(tail)
        with open(self.source, "rb") as file:
            file.seek(max(file.seek(0, os.SEEK_END) - 4096, 0))
            return file.read().rstrip(b"\0").endswith(tail)

    def rotation(self) -> int:
        """Degrees counter-clockwise its frames are to be turned when shown (a display matrix, as phones record
        video), in (-180, 180], 0 for none: its first frame's."""
        for frame in self._decoded(0, 1):
            degrees = int(frame.rotation or 0) % 360  # (a matrix may say -180 or 270)
            return degrees - 360 if degrees > 180 else degrees
        return 0

    def times(self) -> list[Fraction] | None:
        """Its frames' presentation times (s; exact), in order, from its packets' timestamps (nothing decoded), on
        the clock ffmpeg gives an input: from the file's start, its earliest stream's (an audio stream may start
        first), rounded to the video's time base as ffmpeg rounds it; an elementary stream's (no timestamps) at the
        rate its codec says (a raw H.264 stream's parameter sets), as ffmpeg's reader times it; None where only some
        packets have one."""
        pts, base, start_us = self._pts, self._time_base, self._start_us
        if pts and pts[-1] < 0 and self._codec_rate:
            return [Fraction(i) / self._codec_rate for i in range(len(pts))]
        if not pts or pts[0] < 0:
            return None
        # av_rescale_q's rounding: to the nearest tick, halves away from zero
        start = pts[0] if start_us is None else _nearest(Fraction(start_us, av.time_base) / base)
        return [(p - start) * base for p in pts]

    def _open(self):
        src = io.BytesIO(self.source) if isinstance(self.source, bytes) else str(self.source)
        try:
            container = av.open(src)
        except av.error.FFmpegError as exc:
            raise BadInput(f"not a readable video ({exc.strerror})", path=self.label) from None
        except UnicodeDecodeError:  # PyAV decodes the container's metadata as UTF-8
            raise BadInput("not a readable video (its metadata is not UTF-8)", path=self.label) from None
        if not container.streams.video:
            container.close()
            raise BadInput("holds no video stream", path=self.label)
        return container

    def frames(self, start: int = 0, stop: int | None = None) -> Iterator[np.ndarray]:
        rgb24 = _RGB24()
        for frame in self._decoded(start, stop):
            yield rgb24(frame)

    def decoded(self, start: int = 0, stop: int | None = None) -> Iterator[av.VideoFrame]:
        """Frames ``start:stop`` as the decoder gives them, ready for an encoder: without the source's picture
        types (libx264 would keep its frame types)."""
        for frame in self._decoded(start, stop):
            frame.pict_type = av.video.frame.PictureType.NONE
            yield frame

    def planes(self, start: int = 0, stop: int | None = None, rgb: bool = False) -> Iterator[Decoded]:
        """Frames ``start:stop`` in the source's own planes (each (h, w) uint8, a view of the decoder's
        buffer without its line padding) and, with ``rgb``, as RGB24 too. Only for a ``pix_fmt`` video."""
        rgb24 = _RGB24() if rgb else None
        for frame in self._decoded(start, stop):
            if frame.format.name != self.pix_fmt:
                raise BadInput(f"pixel format changes from {self.pix_fmt} to {frame.format.name} mid-stream",
                               path=self.label)
            planes = tuple(np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, :p.width]
                           for p in frame.planes)
            yield Decoded(planes, rgb24(frame) if rgb24 else None, frame)

    def _decoded(self, start: int, stop: int | None) -> Iterator[av.VideoFrame]:
        with self._open() as container:
            stream = container.streams.video[0]
            stream.codec_context.thread_count = DECODE_THREADS
            # a damaged packet fails, where ffmpeg's default conceals it (grey or smeared blocks, a plausible PSNR;
            # ffmpeg logs the error and measures the concealment)
            stream.codec_context.options = {"err_detect": "explode"}
            index, first, sent = 0, None, 0
            try:
                for packet in container.demux(stream):
                    sent += bool(packet.size)
                    for frame in packet.decode():
                        if stop is not None and index >= stop:
                            return
                        # damage the decoder conceals without failing (grey or smeared blocks): the frame is
                        # flagged, where ffmpeg logs "corrupt decoded frame" and measures the concealment (on one
                        # decoding thread: see DECODE_THREADS)
                        if frame.is_corrupt:
                            raise BadInput(f"corrupt: frame {index} is damaged, its decoder concealing the errors "
                                           "(ffmpeg logs 'corrupt decoded frame' and measures the concealment)",
                                           path=self.label)
                        # a stream whose frames change size (joined streams, a resolution switch): the figures'
                        # per-plane sample counts are the first frame's, and ffmpeg's filters rescale the rest
                        size = (frame.width, frame.height)
                        first = first or size
                        if size != first:
                            raise BadInput(f"frame size changes from {first[0]}x{first[1]} to {size[0]}x{size[1]} "
                                           f"mid-stream (frame {index})", path=self.label)
                        if index >= start:
                            yield frame
                        index += 1
            except av.error.FFmpegError as exc:
                if self._begins_inside and sent <= self._head:
                    raise BadInput(f"its first frames do not decode whole: {self._begins_inside} ({exc.strerror} at "
                                   f"packet {sent - 1}); ffmpeg drops or conceals such frames and measures the rest, "
                                   "perfkit measures whole frames only: compare the streams it was cut from, or cut "
                                   "it at a keyframe of a closed GOP", path=self.label) from None
                raise BadInput(f"corrupt: decoding failed after {index} frames ({exc.strerror})",
                               path=self.label) from None
        if index < self.count:
            raise BadInput(f"damaged: its packets hold {self.count} frames, only {index} decode", path=self.label)


def _begins_inside(head: list[tuple[bool, int | None]]) -> str | None:
    """Where a video's first frames depend on pictures before its start, how (from its packets' keyframe flags and
    timestamps up to its second keyframe, in decode order); None where it begins with a closed GOP."""
    if not head:
        return None
    key, pts = head[0]
    if not key:
        return "its first packet is no keyframe (a stream cut inside a GOP)"
    if pts is not None and any(later is not None and later < pts for _, later in head[1:]):
        return ("it begins with an open GOP, frames shown before its first keyframe referring to pictures before "
                "the file's start (a segment cut from a longer stream)")
    return None


class _LibavErrors:
    """The errors libav logs in a thread while ``logged()`` is open, as (level, its source's name, message). PyAV
    passes on none unless asked (its level None: a message costs a Python call), and the level is the process's:
    raised while any thread reads, restored when the last is done. Repeats are passed on while reading (PyAV's
    default holds back a message like the last it passed, which a second file cut alike repeats)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._readers = 0
        self._saved: tuple[int | None, bool] = (None, True)

    @contextlib.contextmanager
    def logged(self) -> Iterator[list[tuple[int, str, str]]]:
        with self._lock:
            if not self._readers:
                level = av.logging.get_level()
                self._saved = (level, av.logging.get_skip_repeated())
                av.logging.set_level(av.logging.ERROR if level is None else max(level, av.logging.ERROR))
                av.logging.set_skip_repeated(False)
            self._readers += 1
        try:
            with av.logging.Capture(local=True) as logged:
                yield logged
        finally:
            with self._lock:
                self._readers -= 1
                if not self._readers:
                    av.logging.set_level(self._saved[0])
                    av.logging.set_skip_repeated(self._saved[1])
        logged[:] = [entry for entry in logged if entry[0] <= av.logging.ERROR]


_LIBAV_ERRORS = _LibavErrors()


def size_text(shape: tuple[int, ...]) -> str:
    """A frame's (H, W[, C]) as ffmpeg writes a size, width first: ``720x480``, its channels where not 3."""
    if len(shape) not in (2, 3):
        return str(shape)
    channels = shape[2] if len(shape) == 3 else 1
    return f"{shape[1]}x{shape[0]}" + ("" if channels == 3 else f" ({channels} channel{'s' * (channels != 1)})")


def _nearest(x: Fraction) -> int:
    """``x`` rounded to the nearest integer, halves away from zero."""
    whole = math.floor(abs(x) + Fraction(1, 2))
    return whole if x >= 0 else -whole


class _RGB24:
    """Decoded frames as RGB24 (H, W, 3) uint8, as ffmpeg's ``format=rgb24`` filter makes them (the command the
    figures name): libavfilter's conversion, one graph per frame size and pixel format. PyAV's own
    ``to_ndarray(format="rgb24")`` scales otherwise where a 4:2:0 frame is odd-sized or deeper than 8 bits."""

    def __init__(self):
        self._key, self._ends, self._graph = None, None, None  # the graph is kept while its ends are used

    def __call__(self, frame: av.VideoFrame) -> np.ndarray:
        key = (frame.width, frame.height, frame.format.name)
        if key != self._key:
            graph = av.filter.Graph()
            source = graph.add_buffer(width=frame.width, height=frame.height, format=frame.format.name,
                                      time_base=frame.time_base or Fraction(1, 1000))
            convert, sink = graph.add("format", "pix_fmts=rgb24"), graph.add("buffersink")
            source.link_to(convert)
            convert.link_to(sink)
            graph.configure()
            self._key, self._ends, self._graph = key, (source, sink), graph
        source, sink = self._ends
        source.push(frame)
        return sink.pull().to_ndarray()


class ImageFolder(Media):
    """PNG / JPEG frames: a folder of them in natural name order (frame2 before frame10), or one file."""

    def __init__(self, files: list[Path], label: str, folder: bool = True):
        if not files:
            raise BadInput(f"holds no {' / '.join(IMAGE_SUFFIXES)} frames", path=label)
        self.files, self.label, self.folder = files, label, folder
        self._numbered = self._numbered_names()
        self.count = len(files)
        self._rgb24 = _RGB24()
        first, fmt = _read_image(files[0], self._rgb24)
        self.decoded_format, self.alpha = fmt.name, _alpha(fmt)  # (the first frame's)
        self.frame_shape = first.shape
        self.detail = f"{len(files)} image file(s) of {size_text(self.frame_shape)}"

    def _numbered_names(self) -> list[re.Match] | None:
        """The files' names as a folder's numbered frames (one prefix and suffix), or None where they are not;
        BadInput where a number is missing (a frame lost: the frames after it would pair with the other input's
        one frame out of step, and ffmpeg's reader stops there)."""
        names = [_NUMBERED.fullmatch(path.name) for path in self.files]
        if not self.folder or not all(names) or len({(m[1], m[3]) for m in names}) != 1:
            return None
        numbers = [int(m[2]) for m in names]
        for before, (after, path) in zip(numbers, zip(numbers[1:], self.files[1:])):
            if after != before + 1:
                raise BadInput(f"frame numbers skip from {before} to {after} (a frame missing?): frames pair by "
                               "their order, so those after it would be one out of step; number them without a gap",
                               path=path)
        return names

    def times(self) -> list[Fraction]:
        """As ffmpeg's image sequence reader times them: ``IMAGE_RATE`` frames a second."""
        return [Fraction(i, IMAGE_RATE) for i in range(self.count)]

    def ffmpeg_input(self, name: str) -> str | None:
        """The folder, called ``name``, as ffmpeg's image sequence reader takes it (``-i NAME/%03d.png``, with
        ``-start_number`` where the first is not 0), where its file names number it so; None where they do not
        (or it is one file)."""
        names = self._numbered
        if names is None:
            return None
        written = [m[2] for m in names]
        if all(text == str(int(text)) for text in written):  # no leading zeros
            digits = "%d"
        elif len({len(text) for text in written}) == 1:
            digits = f"%0{len(written[0])}d"
        else:
            return None
        first = int(written[0])
        start = f"-start_number {first} " if first else ""
        return f"{start}-i {name}/{names[0][1]}{digits}{names[0][3]}"

    def ffmpeg_unreadable(self) -> str | None:
        if self.folder and self.ffmpeg_input("X") is None:
            # (ffmpeg's image sequence reader takes a folder's frames by one pattern, NAME%03d.png)
            return "a folder of frames not named as one numbered sequence of one kind (000.png, 001.png, ...)"
        return None

    def frames(self, start: int = 0, stop: int | None = None) -> Iterator[np.ndarray]:
        for path in self.files[start:stop]:
            image, fmt = _read_image(path, self._rgb24)
            self.alpha, self.over_8_bits = self.alpha or _alpha(fmt), self.over_8_bits or _over_8_bits(fmt)
            if image.shape != self.frame_shape:
                raise BadInput(f"frame size {size_text(image.shape)} differs from the first frame's "
                               f"{size_text(self.frame_shape)}",
                               path=path)
            yield image


def _animated_png(path: Path) -> bool:
    """Whether a PNG file is an animated one, as ffmpeg's apng demuxer probes it: an acTL chunk before the first
    IDAT."""
    with open(path, "rb") as file:
        if file.read(8) != b"\x89PNG\r\n\x1a\n":
            return False
        while len(header := file.read(8)) == 8:
            length, kind = int.from_bytes(header[:4], "big"), header[4:]
            if kind in (b"acTL", b"IDAT"):
                return kind == b"acTL"
            file.seek(length + 4, os.SEEK_CUR)  # the chunk's data and CRC
    return False


def _alpha(fmt: av.VideoFormat | None) -> str | None:
    """A pixel format's name where it holds an alpha plane, else None."""
    return fmt.name if fmt and any(component.is_alpha for component in fmt.components) else None


def _over_8_bits(fmt: av.VideoFormat | None) -> str | None:
    """A pixel format's name where a sample of it holds more than 8 bits, else None."""
    return fmt.name if fmt and any(component.bits > 8 for component in fmt.components) else None


def _read_image(path: Path, rgb24: "_RGB24") -> tuple[np.ndarray, av.VideoFormat]:
    """An image's frame (H, W, C) uint8 as ffmpeg's image sequence reader decodes it (the decoder its suffix
    names: a JPEG's bytes in a .png file are refused, as ffmpeg refuses them) and ``format=rgb24`` converts it (a
    16-bit or palette PNG, a JPEG's 4:2:0 chroma, which scikit-image's libjpeg upsamples otherwise: up to 0.7 dB
    apart on real frames); a gray one too, whose three channels are then equal, as ffmpeg's psnr and ssim measure
    it after format=rgb24 (r g b). With it, the decoded pixel format (whose alpha plane, where it holds one, the
    frame has dropped). A PNG its decoder logs an error for is refused: ffmpeg's PNG decoder gives a frame
    for a PNG whose rows end early ('IEND without all image', the rest black) or whose IEND is cut off, and reads
    past a chunk's bad CRC unless asked to check it."""
    def said(entry: tuple[int, str, str]) -> str:
        return f"ffmpeg's {entry[1]} decoder says {entry[2].strip()!r}"

    try:
        with _LIBAV_ERRORS.logged() as logged, av.open(str(path), format="image2") as container:
            stream = container.streams.video[0]
            # a cut or damaged file fails, never grey blocks or black rows
            stream.codec_context.options = {"err_detect": "crccheck+explode"}
            frame = next(container.decode(stream))
    except av.error.FFmpegError as exc:
        raise BadInput(f"not a readable image ({exc.strerror}{'; ' + said(logged[0]) if logged else ''})", path=path) from None
    except StopIteration:
        raise BadInput(f"not a readable image (ffmpeg's {path.suffix.lstrip('.').upper()} decoder gives no frame)",
                       path=path) from None
    # (the PNG decoder's alone: the mjpeg decoder logs errors for metadata it cannot parse, a broken EXIF block, and
    # gives the whole picture)
    png = [entry for entry in logged if entry[1] == "png"]
    if png:
        raise BadInput(f"truncated or damaged: {said(png[0])} (and gives a frame, which perfkit does not measure)",
                       path=path)
    return rgb24(frame), frame.format


class NpyFile(NamedTuple):
    """An ``.npy`` file's array, its header read and its data not: frames are read from the file one at a time,
    so two long ones compared hold a few frames, not two arrays."""

    path: Path
    label: str
    offset: int              # where the data starts
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def read(self) -> np.ndarray:
        """The whole array."""
        count = int(np.prod(self.shape))
        data = np.fromfile(self.path, self.dtype, count, offset=self.offset)
        if data.size < count:
            raise BadInput(f"truncated: its header says {count} elements, the file holds {data.size}", path=self.label)
        return data.reshape(self.shape, order="F" if self.fortran_order else "C")


class ArrayMedia(Media):
    """An array, in memory or an ``.npy`` read as needed: uint8 arrays are frames ((T, H, W, C), one frame
    (H, W, C) or one gray frame (H, W)); any other dtype is a tensor (float latents, ...)."""

    def __init__(self, arr: np.ndarray | NpyFile, label: str):
        self.arr, self.label = arr, label
        self.detail = f"array {arr.dtype} {'x'.join(map(str, arr.shape))}"
        if arr.dtype.kind not in "biuf":  # e.g. bfloat16, which numpy saves as raw void bytes
            raise BadInput(f"{arr.dtype} is not a numeric dtype (save bfloat16 as float32)", path=label)
        # refused here, naming the file, rather than as a numpy error in the figures (a 0-d array has no
        # rows to slice, an empty one no range, an empty frame no rows of pixels)
        if not arr.ndim and arr.dtype != np.uint8:
            raise BadInput(f"a 0-d {arr.dtype} array (one value, shape ()): tensors compare as arrays of at least "
                           "one axis (save np.atleast_1d(x))", path=label)
        if 0 in arr.shape:
            raise BadInput(f"an empty {arr.dtype} array (shape {arr.shape}): no values to compare", path=label)
        if arr.dtype != np.uint8:
            self.kind, self.count = "tensor", arr.shape[0]
            return
        if not 2 <= arr.ndim <= 4:
            raise BadInput(f"uint8 array of shape {arr.shape}: frames are (T, H, W, C), (H, W, C) or (H, W)",
                           path=label)
        self.frames_shape = {2: (1, *arr.shape, 1), 3: (1, *arr.shape), 4: arr.shape}[arr.ndim]
        self.count, self.frame_shape = self.frames_shape[0], self.frames_shape[1:]

    def ffmpeg_unreadable(self) -> str | None:
        return "a NumPy array"

    def frames(self, start: int = 0, stop: int | None = None) -> Iterator[np.ndarray]:
        if self.kind != "frames":
            raise BadInput(f"{self.arr.dtype} tensor, not uint8 frames", path=self.label)
        stop = self.count if stop is None else min(stop, self.count)
        if isinstance(self.arr, NpyFile) and not self.arr.fortran_order:
            size = int(np.prod(self.frame_shape))
            with open(self.arr.path, "rb") as f:
                f.seek(self.arr.offset + start * size)
                for index in range(start, stop):
                    data = f.read(size)
                    if len(data) < size:
                        raise BadInput(f"truncated: frame {index} of the {self.count} its header says is incomplete",
                                       path=self.label)
                    yield np.frombuffer(data, np.uint8).reshape(self.frame_shape)
        else:
            yield from self.array().reshape(self.frames_shape)[start:stop]

    def array(self) -> np.ndarray:
        return self.arr.read() if isinstance(self.arr, NpyFile) else np.asarray(self.arr)


# the errors numpy's zip, zlib and header parsers let through on a damaged file
_NUMPY_ERRORS = (ValueError, OSError, EOFError, SyntaxError, MemoryError)


def open_npy(path: Path, label: str | None = None) -> NpyFile:
    """An ``.npy``'s header: its array's shape, dtype and where its data starts."""
    label = label or str(path)
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran_order, dtype = header(f)
            if dtype.hasobject:
                raise BadInput("not a readable numpy file (it holds Python objects, which perfkit does not unpickle)",
                               path=label)
            return NpyFile(path, label, f.tell(), shape, dtype, fortran_order)
    except _NUMPY_ERRORS as exc:
        raise BadInput(f"not a readable numpy file ({exc})", path=label) from None


def load_array(path: Path, key: str | None = None, label: str | None = None) -> np.ndarray:
    """An ``.npy``'s array, or one array of an ``.npz`` (``key``, or its only array)."""
    # the errors of numpy's zip parser: zipfile (with bz2, lzma, shutil) imported here, off every video
    # comparison's start; zlib's and tokenize's, which numpy and PyAV load anyway, come with the module
    import zipfile

    label = label or str(path)
    if path.suffix == ".npy":
        return open_npy(path, label).read()
    try:
        with np.load(path) as npz:
            names = list(npz.files)
            if key is None and len(names) != 1:
                raise BadInput(f"holds arrays {', '.join(names)}; name one as {path.name}:NAME", path=label)
            if (key or names[0]) not in names:
                raise BadInput(f"has no array {key!r} (it holds {', '.join(names)})", path=label)
            return npz[key or names[0]]
    except (*_NUMPY_ERRORS, zipfile.BadZipFile, zlib.error, tokenize.TokenError) as exc:
        raise BadInput(f"not a readable numpy file ({exc})", path=label) from None


def _natural_key(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def _images_in(folder: Path) -> list[Path]:
    return sorted((p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES), key=_natural_key)


def named_file(path: str | Path) -> Path:
    """The file an input names: ``FILE.npz:NAME``'s ``FILE.npz`` (where no file has the whole name), else itself."""
    p = Path(path)
    if not p.exists() and ".npz:" in p.name:
        return p.with_name(p.name.split(".npz:", 1)[0] + ".npz")
    return p


def open_media(path: str | Path | np.ndarray, label: str | None = None) -> Media:
    """Open an input: a video, an image or a folder of them, an ``.npy`` / ``.npz`` (``FILE.npz:NAME``
    for one of several arrays), a run's trial / rank / outputs folder (its main output), or an array."""
    if isinstance(path, np.ndarray):
        return ArrayMedia(path, label or "<array>")
    p = Path(path)
    label = label or str(path)
    if (archive := named_file(p)) != p:
        return ArrayMedia(load_array(archive, p.name.split(".npz:", 1)[1], label), label)
    if p.is_dir():
        images = _images_in(p)
        if images:
            return ImageFolder(images, label)
        outputs = output_files(p)
        if not outputs:
            raise BadInput("no frames, arrays or run outputs in this folder", path=label)
        main = outputs[main_output(outputs)]
        return open_media(main, str(Path(label) / main.relative_to(p)))
    if not p.exists():
        raise BadInput("no such file or folder", path=label)
    suffix = p.suffix.lower()
    if suffix in VIDEO_SUFFIXES:
        return VideoFile(p, label)
    if suffix == ".png" and _animated_png(p):  # ffmpeg -i reads it with its apng demuxer: every frame
        return VideoFile(p, label)
    if suffix in IMAGE_SUFFIXES:
        return ImageFolder([p], label, folder=False)
    if suffix == ".npy":
        return ArrayMedia(open_npy(p, label), label)
    if suffix in ARRAY_SUFFIXES:
        return ArrayMedia(load_array(p, label=label), label)
    kinds = VIDEO_SUFFIXES + IMAGE_SUFFIXES + ARRAY_SUFFIXES
    raise BadInput(f"unknown kind of file (perfkit reads {' '.join(kinds)} and folders of images)", path=label)


def outputs_folder(path: Path) -> Path:
    """Where a run keeps outputs, given a trial, rank or outputs folder."""
    for candidate in (path / "outputs", path / "rank0" / "outputs"):
        if candidate.is_dir():
            return candidate
    return path


def other_rank_outputs(run_dir: Path) -> dict[int, list[str]]:
    """The comparable outputs ranks other than 0 wrote in a run's trials (``rank<R>/outputs``), by rank: a run's
    quality compares rank 0's alone."""
    found: dict[int, set[str]] = {}
    for trial in sorted((run_dir / "trials").glob("*")):
        for rank_dir in rank_dirs(trial):
            rank = int(rank_dir.name.removeprefix("rank"))
            if rank > 0 and (rank_dir / "outputs").exists():
                found.setdefault(rank, set()).update(output_files(rank_dir))
    return {r: sorted(names) for r, names in sorted(found.items()) if names}


def output_files(path: Path) -> dict[str, Path]:
    """Comparable outputs by name: videos, arrays and folders of image frames (not ``latents.npy``)."""
    folder = outputs_folder(path)
    if not folder.is_dir():
        return {}
    found = {}
    for p in sorted(folder.iterdir()):
        if p.name == LATENTS_FILE:
            continue
        if (p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES + ARRAY_SUFFIXES + IMAGE_SUFFIXES) or \
                (p.is_dir() and _images_in(p)):
            found[p.name] = p
    return found


def main_output(files: dict[str, Path]) -> str:
    """The output a comparison headlines: the first (by name) that holds frames, else the first."""
    def holds_frames(path: Path) -> bool:
        try:
            return open_media(path).kind == "frames"
        except BadInput:  # unreadable: the comparison that follows says why
            return False

    return next((n for n, p in files.items() if holds_frames(p)), next(iter(files)))


def prefetch(items: Iterator, depth: int = 3) -> Iterator:
    """Run ``items`` in a background thread, at most ``depth`` ahead. Decoding and sha256 release the
    GIL, so two inputs are read while the caller computes; an error surfaces in the caller."""
    slots: queue.Queue = queue.Queue(depth)
    stop = threading.Event()
    end = object()

    def put(entry) -> bool:
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def fill():
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((end, None))
        except BaseException as exc:  # handed to the consumer, raised there
            put((end, exc))
        finally:
            getattr(items, "close", lambda: None)()  # a stopped generator closes its file here

    worker = threading.Thread(target=fill, daemon=True)
    worker.start()
    try:
        while True:
            item, exc = slots.get()
            if item is end:
                if exc is not None:
                    raise exc
                return
            yield item
    finally:
        stop.set()
        worker.join()


class Codec(NamedTuple):
    """Encoder settings for the codec floor: a PyAV encoder name, pixel format and encoder options."""

    name: str = "libx264"
    pix_fmt: str = "yuv420p"
    options: tuple[tuple[str, str], ...] = (("crf", "18"),)

    def __str__(self) -> str:
        return " ".join([self.name, self.pix_fmt, *(f"{k}={v}" for k, v in self.options)])


DEFAULT_CODEC = Codec()  # x264 CRF 18 on yuv420p: what served videos usually go through


def parse_codec(spec: str) -> Codec:
    """``CODEC[:key=value...]``, e.g. ``libx264:crf=18:pix_fmt=yuv420p:preset=ultrafast`` or ``ffv1``.
    libx264 starts from the defaults (crf 18, yuv420p); another encoder from an RGB pixel format where
    it has one (so ``ffv1`` and ``libx264rgb:crf=0`` are lossless), else its first."""
    name, *fields = spec.split(":")
    name = name or DEFAULT_CODEC.name
    settings = {"pix_fmt": DEFAULT_CODEC.pix_fmt, **dict(DEFAULT_CODEC.options)} if name == DEFAULT_CODEC.name else {}
    for field in fields:
        key, sep, value = field.partition("=")
        if not sep or not key:
            raise BadInput(f"expected CODEC[:key=value...], got {field!r}", field="--codec")
        settings[key] = value
    try:
        encoder = av.codec.Codec(name, "w")
    except (av.error.FFmpegError, ValueError):
        raise BadInput(f"no encoder {name!r} in this PyAV build", field="--codec") from None
    formats = [f.name for f in encoder.video_formats]
    pix_fmt = settings.pop("pix_fmt", None) or next((f for f in RGB_FORMATS if f in formats), formats[0])
    return Codec(name, pix_fmt, tuple(settings.items()))


def write_video(frames: Iterable[np.ndarray | av.VideoFrame], dest: Path | io.BytesIO, codec: Codec = DEFAULT_CODEC,
                fps: Fraction | int = 24) -> None:
    """Encode uint8 RGB frames (H, W, 3), or decoded frames (``VideoFile.decoded``) as they are, frame i at
    i / ``fps`` s; ``dest`` a path (container from its suffix) or a buffer (mkv)."""
    target = str(dest) if isinstance(dest, Path) else dest
    with av.open(target, "w", format=None if isinstance(dest, Path) else "matroska") as container:
        stream = None
        for index, image in enumerate(frames):
            frame = image if isinstance(image, av.VideoFrame) else \
                av.VideoFrame.from_ndarray(np.ascontiguousarray(image[..., :3]), format="rgb24")
            # x264's rate control reads the timestamps: frames without them are coded far worse (the codec floor
            # test in tests/quality/test_quality_ffmpeg.py holds the floor to an encode of timed frames)
            frame.pts, frame.time_base = index, 1 / Fraction(fps)
            if stream is None:
                stream = container.add_stream(codec.name, rate=fps, options=dict(codec.options))
                stream.width, stream.height = frame.width, frame.height
                stream.pix_fmt = codec.pix_fmt
            try:
                container.mux(stream.encode(frame))
            except av.error.FFmpegError as exc:
                raise BadInput(f"{codec} cannot encode {frame.width}x{frame.height} frames ({exc.strerror})",
                               field="--codec") from None
        if stream is not None:
            container.mux(stream.encode())
