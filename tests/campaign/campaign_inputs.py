"""The bad-input campaign: real inputs, damaged the ways files get damaged, fed to every reader perfkit
has. Every attempt must end with an exit code of 0-3 (a refusal is one line), never a traceback, within
``TIME_CAP_S`` seconds and ``MEMORY_CAP_MB`` of Python allocations (tracemalloc), writing nothing
outside its own working folder and nothing under it but its run directory.

The seeds are real files: the repository's (tests/data/real: an MI300 xplane, HTA's Kineto traces, a CogVideoX video)
and what the suite makes from them (frames of that video as ``.npy`` / ``.npz`` / PNG / mkv, the shipped
case files, the test server's answers, a synthetic TPU profile). The mutations take a ``random.Random``:
Hypothesis drives them in tests/campaign (``st.randoms()``, shrinkable), a plain seeded generator in
benchmarks/bad_inputs.py (thousands, fast). HLO text is the HLO tests' own campaign.

A module of its own, not conftest.py (several test folders have one).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import gzip
import io
import json
import os
import random
import signal
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Callable

import numpy as np
from click.testing import CliRunner

from perfkit.cli import cli
from perfkit.run.serve_load import Deadline, Reply, RequestFailed, take_output
from perfkit.rundata.metrics import read_metrics
from perfkit.rundata.serve_spec import OutputSpec

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "data" / "real"
TIME_CAP_S = 30.0  # per attempt, on a loaded 2-core machine
MEMORY_CAP_MB = 400  # peak Python allocations of one attempt (tracemalloc)
NO_VARIANT = "campaign-no-such-variant"  # `run --only` this: a case that loads is refused before any trial


# ---- mutations: each returns a damaged copy of ``data`` --------------------------------------------

def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:rng.randrange(len(data) + 1)]


def flip_bits(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 16)):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def insert_bytes(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.randbytes(rng.randint(1, 64)) + data[at:]


def zero_bytes(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    n = rng.randint(1, max(1, min(4096, len(data) - at)))
    return data[:at] + bytes(n) + data[at + n:]


def duplicate_block(data: bytes, rng: random.Random) -> bytes:
    start = rng.randrange(len(data))
    block = data[start:start + rng.randint(1, 4096)]
    at = rng.randrange(len(data) + 1)
    return data[:at] + block + data[at:]


def delete_lines(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    for _ in range(min(len(lines) - 1, rng.randint(1, 3))):
        del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def garble_lines(data: bytes, rng: random.Random) -> bytes:
    """Up to 256 bytes of a line shuffled or replaced by noise (a trace's JSON may be one long line)."""
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        line = lines[i]
        start = rng.randrange(max(1, len(line) - 256))
        span = bytearray(line[start:start + 256])
        rng.shuffle(span)
        garbled = bytes(span) if rng.random() < 0.5 else rng.randbytes(len(span) or 1)
        lines[i] = line[:start] + garbled + line[start + 256:]
    return b"\n".join(lines)


MUTATIONS = (truncate, flip_bits, insert_bytes, zero_bytes, duplicate_block, delete_lines, garble_lines)


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, list[str]]:
    """One to three mutations in a row; the damaged bytes and the mutations' names."""
    names = []
    for _ in range(rng.randint(1, 3)):
        if not data:
            break
        op = rng.choice(MUTATIONS)
        data = op(data, rng)
        names.append(op.__name__)
    return data, names


# ---- seeds: real inputs ------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Seed:
    """A real input: its bytes, the suffix its file needs, and ``gz``: mutate the text, then compress
    (a valid gzip of damaged JSON), else the bytes as stored."""

    name: str
    suffix: str
    data: bytes
    gz: bool = False


@functools.cache
def clip() -> np.ndarray:
    """Three frames of the CogVideoX fixture, a quarter of their size each way: (3, 120, 180, 3) uint8."""
    import av  # the video fixture's decoder; only the media seeds need it

    with av.open(str(FIXTURES / "video" / "cogvideox_horse_720x480_49f.mp4")) as container:
        frames = [f.to_ndarray(format="rgb24")[::4, ::4] for _, f in zip(range(3), container.decode(video=0))]
    return np.ascontiguousarray(np.stack(frames))


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _png(frame: np.ndarray) -> bytes:
    import imageio.v3 as iio  # skimage's image plugin, already a dependency of image folders

    return iio.imwrite("<bytes>", frame, extension=".png")


@functools.cache
def seeds(reader: str) -> tuple[Seed, ...]:
    """The real inputs of one reader."""
    if reader == "xplane":
        from perfkit.trace import synthetic  # the suite's TPU-shaped XSpace writer

        with tempfile.TemporaryDirectory(prefix="perfkit-campaign-") as d:
            tpu = synthetic.tpu_profile(Path(d) / "tpu.xplane.pb", chips=2, steps=2).read_bytes()
        return (Seed("mi300", ".xplane.pb", (FIXTURES / "xplane" / "mi300_jax_conv_8gpu.xplane.pb").read_bytes()),
                Seed("tpu", ".xplane.pb", tpu))
    if reader in ("kineto", "kineto_gz"):
        out = []
        for name in ("rank-0", "rank-1"):
            gz = (FIXTURES / "kineto" / f"{name}.json.gz").read_bytes()
            out.append(Seed(name, ".json", gzip.decompress(gz), gz=reader == "kineto_gz") if reader == "kineto"
                       else Seed(name, ".json.gz", gz))
            if reader == "kineto_gz":
                out.append(Seed(name + "-text", ".json.gz", gzip.decompress(gz), gz=True))
        return tuple(out)
    if reader == "case":
        files = sorted(REPO.glob("cases/**/*.yaml"))
        return tuple(Seed(str(p.relative_to(REPO)), ".yaml", p.read_bytes()) for p in files)
    if reader == "metrics":
        lines = [{"event": "mark", "name": "ready"}, {"event": "value", "name": "compile_s", "value": 1.25},
                 *({"event": "step", "ms": 12.5 + i, **({"traced": True} if i == 3 else {})} for i in range(6)),
                 {"event": "step", "kind": "natural", "ms": 11.0, "steps": 4}]
        return (Seed("metrics", ".jsonl", "".join(json.dumps(x) + "\n" for x in lines).encode()),)
    if reader == "npy":
        latents = np.linspace(-3, 3, 2 * 4 * 8 * 8, dtype=np.float32).reshape(2, 4, 8, 8)
        buf = io.BytesIO()
        np.savez_compressed(buf, frames=clip()[:2, :32, :32])
        return (Seed("frames", ".npy", _npy(clip())), Seed("latents", ".npy", _npy(latents)),
                Seed("frames", ".npz", buf.getvalue()))
    if reader == "png":
        return tuple(Seed(f"frame{i}", ".png", _png(frame)) for i, frame in enumerate(clip()))
    if reader == "video":
        from perfkit.quality.media import write_video

        buf = io.BytesIO()
        write_video(iter(clip()), buf)
        return (Seed("clip", ".mkv", buf.getvalue()),
                Seed("cogvideox", ".mp4", (FIXTURES / "video" / "cogvideox_horse_720x480_49f.mp4").read_bytes()))
    if reader == "serve":
        data = _npy(clip()[:1, :16, :16])
        return (Seed("body", "", data), Seed("base64", "", json.dumps({"video": base64.b64encode(data).decode()}).encode()),
                Seed("url", "", b'{"video": {"url": "/outputs/0001.npy"}}'),
                Seed("path", "", json.dumps({"path": "served/0001.npy"}).encode()))
    raise KeyError(reader)


READERS = ("xplane", "kineto", "kineto_gz", "case", "metrics", "npy", "png", "video", "serve")


# ---- feeding a damaged input to its reader -------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    exit_code: int
    output: str
    error: BaseException | None  # an exception perfkit let out (a traceback for the user)
    seconds: float = 0.0
    peak_mb: float = 0.0


def run_cli(args: list[str]) -> Outcome:
    res = CliRunner().invoke(cli, args, catch_exceptions=True)
    error = None if isinstance(res.exception, SystemExit) or res.exception is None else res.exception
    return Outcome(res.exit_code, res.output, error)


def _write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


def feed(reader: str, seed: Seed, data: bytes, work: Path) -> Outcome:
    """Run ``reader`` on ``data`` (a damaged copy of ``seed``) inside ``work`` (the current folder)."""
    if seed.gz:
        data = gzip.compress(data, mtime=0)
    if reader in ("xplane", "kineto", "kineto_gz"):
        return run_cli(["trace", "breakdown", str(_write(work / "in", seed.name + seed.suffix, data)), "--json"])
    if reader == "case":
        return run_cli(["run", str(_write(work / "in", "case.yaml", data)), "--only", NO_VARIANT, "--out",
                     str(work / "run")])
    if reader == "metrics":
        try:
            read_metrics(_write(work / "in", "metrics.jsonl", data))
        except Exception as exc:  # noqa: BLE001 - anything the reader lets out is the finding
            return Outcome(1, "", exc)
        return Outcome(0, "", None)
    if reader in ("npy", "video"):
        a = _write(work / "a", seed.name + seed.suffix, seed.data)
        return run_cli(["quality", str(a), str(_write(work / "b", seed.name + seed.suffix, data)), "--json"])
    if reader == "png":
        for folder in ("a", "b"):
            for other in seeds("png"):
                _write(work / folder, other.name + ".png", other.data)
        _write(work / "b", seed.name + ".png", data)
        return run_cli(["quality", str(work / "a"), str(work / "b"), "--json"])
    if reader == "serve":
        return _serve_answer(seed, data, work)
    raise KeyError(reader)


SERVE_OUTPUTS = {"body": OutputSpec("body", None, ".npy"), "base64": OutputSpec("base64", "video", ".npy"),
                 "url": OutputSpec("url", "video.url", ".npy"), "path": OutputSpec("path", "path", ".npy")}


def _serve_answer(seed: Seed, data: bytes, work: Path) -> Outcome:
    """A served answer as the load generator takes it: an output, or a failed request. The URL kind's
    server is a closed port (nothing listens on port 1), so a fetch fails at once."""
    _write(work / "served", "0001.npy", seeds("serve")[0].data)
    try:
        take_output(SERVE_OUTPUTS[seed.name], Reply(200, data), "http://127.0.0.1:1", "127.0.0.1", Deadline.start(2))
    except RequestFailed as exc:
        return Outcome(0, str(exc), None)
    except Exception as exc:  # noqa: BLE001
        return Outcome(1, "", exc)
    return Outcome(0, "", None)


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise TimeoutError in the main thread after ``seconds`` (a reader that never ends)."""
    def expired(_signum, _frame):
        raise TimeoutError(f"no end within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def attempt(reader: str, seed: Seed, data: bytes, work: Path, measure_memory: bool = True) -> Outcome:
    """Feed one damaged input with the caps on, inside ``work`` as the current folder and with
    ``work/tmp`` as the temp folder (what a reader leaves there is found, whoever else uses /tmp)."""
    cwd, temp, env_temp = os.getcwd(), tempfile.tempdir, os.environ.get("TMPDIR")
    term = signal.getsignal(signal.SIGTERM)  # `perfkit run` sets its own
    os.chdir(work)
    (work / "tmp").mkdir(exist_ok=True)
    tempfile.tempdir = os.environ["TMPDIR"] = str(work / "tmp")
    if measure_memory:
        tracemalloc.start()
    t0 = time.monotonic()
    try:
        with time_limit(TIME_CAP_S):
            out = feed(reader, seed, data, work)
    except TimeoutError as exc:
        out = Outcome(1, "", exc)
    finally:
        seconds = time.monotonic() - t0
        peak = tracemalloc.get_traced_memory()[1] / 2**20 if measure_memory else 0.0
        if measure_memory:
            tracemalloc.stop()
        os.chdir(cwd)
        tempfile.tempdir = temp
        if env_temp is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = env_temp
        signal.signal(signal.SIGTERM, term)
    out.seconds, out.peak_mb = seconds, peak
    return out


INPUT_FOLDERS = {"in", "a", "b", "served"}  # what ``feed`` writes itself; ``run`` is the run directory


def problems(out: Outcome, work: Path) -> list[str]:
    """What is wrong with an outcome: a traceback, an exit code outside 0-3, a broken cap, a stray file."""
    found = []
    if out.error is not None:
        found.append(f"{type(out.error).__name__}: {str(out.error)[:300]}")
    if out.exit_code not in (0, 1, 2, 3):
        found.append(f"exit code {out.exit_code}")
    if "Traceback" in out.output:
        found.append("a traceback in the output")
    if out.exit_code == 2 and len([line for line in out.output.splitlines() if line.startswith("perfkit:")]) != 1:
        found.append(f"a refusal is one line, got: {out.output[:300]!r}")
    if out.seconds > TIME_CAP_S:
        found.append(f"took {out.seconds:.1f} s")
    if out.peak_mb > MEMORY_CAP_MB:
        found.append(f"peak {out.peak_mb:.0f} MB of Python allocations")
    stray = {p.split(os.sep)[0] for p in _snapshot(work)} - INPUT_FOLDERS - {"run", "tmp"}
    if stray:
        found.append(f"wrote outside its run directory: {sorted(stray)}")
    if any((work / "tmp").iterdir()):
        found.append(f"left {sorted(p.name for p in (work / 'tmp').iterdir())} in the temp folder")
    return found


def reader_for(reader: str) -> Callable[[random.Random, Path], tuple[Outcome, list[str], str]]:
    """One random attempt at ``reader``: (outcome, problems, description)."""
    def one(rng: random.Random, work: Path):
        seed = rng.choice(seeds(reader))
        data, ops = mutate(seed.data, rng)
        out = attempt(reader, seed, data, work)
        return out, problems(out, work), f"{reader}:{seed.name} {'+'.join(ops) or 'unchanged'}"
    return one
