"""``perfkit quality``: the command line and its text report. numpy, PyAV and the figures are imported when
the command runs, so ``perfkit quality --help`` costs click alone."""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path

import click

from perfkit.common.digits import share_text
from perfkit.common.figures import plot_file
from perfkit.common.json_figures import db_cell, json_safe
from perfkit.errors import BadInput, DefinitionNote

SPACE_NAMES = {"yuv": "source planes", "rgb": "RGB24"}


def _db(x: float) -> str:
    return f"{db_cell(x)} dB"


def _ffmpeg_line(space: str, line: dict) -> str:
    """One space's figures as ffmpeg's psnr filter prints them, with the command that does."""
    fig = line["psnr_db"]
    what = f"{line['pix_fmt']} planes" if "pix_fmt" in line else SPACE_NAMES[space]
    figures = " ".join(f"{p} {db_cell(fig[p])}" for p in (*line["planes"], "average", "min", "max"))
    return f"PSNR in {what}: {figures} dB ({_command(line)})"


def _command(line: dict) -> str:
    """The command that gives a block's figures, or why there is none (an input ffmpeg does not read)."""
    return f"as `{line['reproduce']}`" if line.get("reproduce") else line["no_reproduce"]


def _ssim_line(line: dict) -> str:
    """The ssim filter's summary line (its decimals), with the command that prints it and its definition."""
    what = f"{line['pix_fmt']} planes" if "pix_fmt" in line else "RGB channels"
    figures = " ".join(f"{p.upper()} {line['ssim'][p]:.6f}" for p in line["planes"])
    return (f"SSIM in {what}: {figures} All {line['ssim']['all']:.6f} ({line['ssim_db']['all']:.6f} dB) "
            f"({_command(line)}{': ' if line.get('reproduce') else '; '}{line['definition']})")


def _deep_frames(deep: dict[str, str]) -> str:
    """The inputs of more than 8 bits a sample (``over_8_bits``) as a sentence names their frames: ``A's and B's
    gray16be``, ``A's yuv420p10le and B's gray16be`` (one format named once)."""
    sides = [f"{side}'s" for side in deep]
    return (f"{' and '.join(sides)} {next(iter(deep.values()))}" if len(set(deep.values())) == 1 else
            " and ".join(f"{side} {fmt}" for side, fmt in zip(sides, deep.values())))


def _reduced_line(r: dict) -> str | None:
    """Where an input holds more than 8 bits a sample, that the figures' 8 bits of it are FFmpeg's conversion's,
    not its values rounded: swscale maps 52690 of 65535 to 206 where rounding gives 205, so a max |d| of 1 against
    the same picture at 8 bits can be the conversion alone. None where no input does."""
    deep = r.get("over_8_bits")
    if not deep:
        return None
    tail = ("a max |d| of 1 may be that conversion alone" if r["identical_frames"] < r["frames"] else
            "the frames are identical as it converts them")
    return (f"{_deep_frames(deep)} frames are reduced to 8 bits by FFmpeg's conversion (swscale, as format=rgb24 "
            f"makes them), which can differ from rounding by 1: {tail}")


def _older_release(r: dict) -> str | None:
    """Where FFmpeg 5.1's filters part from these figures: its ssim on this pair's planes, only where SSIM is shown
    (or that it agrees on them), and its conversion to 8 bits of the inputs that decode to more (``over_8_bits``);
    None where neither is."""
    deep = r.get("over_8_bits", {})
    convert = f"5.1 converts {_deep_frames(deep)} frames to 8 bits differently"
    line = r.get("ssim")
    if line is None:
        return f"an older one may part: FFmpeg {convert}" if deep else None
    parts = line["older_ffmpeg_parts"]
    rule = "(width // 4 - 1) mod 4 = 1"
    ssim = "FFmpeg 5.1's ssim, as Debian 12 builds it,"
    if parts:
        return (f"an older one may part: {ssim} gives other {' and '.join(p.upper() for p in parts)} figures here: "
                f"it parts on planes {rule} wide" + (f"; and {convert}" if deep else ""))
    # said where it agrees too: a reader on 5.1 could not tell otherwise
    return f"{ssim} gives these SSIM figures too: it parts only where {rule}" + (
        f"; an older one may part: {convert}" if deep else "")


def space_name(r: dict) -> str:
    """The headline space of a frame comparison, as its text names it."""
    return f"{r['yuv']['pix_fmt']} planes" if r["space"] == "yuv" else SPACE_NAMES["rgb"]


def floor_line(r: dict, floor: dict) -> str:
    """B's figures beside the codec floor's, measured in the same space: the verdict from the averages, each
    over all frames (ffmpeg's average), like with like; the means beside them are each over its own differing
    frames, which may be other frames (B's identical ones left out)."""
    if floor["bit_identical"]:
        return f"against the codec floor: {floor['codec']} is lossless on A, so any difference of B is not the codec's"
    gap = float(db_cell(floor["psnr_pooled_db"])) - float(db_cell(r["psnr_pooled_db"]))  # of the figures shown
    said = "B is identical to A" if r["bit_identical"] else (
        f"B {abs(gap):.2f} dB {'below' if gap > 0 else 'above'} the floor")
    # with no differing frame B has no mean over them (it is no "inf"): the floor's alone, as report.md's row says
    means = (f"the floor's mean over its differing frames {_db(floor['psnr_mean_db'])} (B has no differing frames)"
             if r["bit_identical"] else
             f"means over each one's differing frames {_db(r['psnr_mean_db'])} against {_db(floor['psnr_mean_db'])}")
    return (f"against the codec floor, both in {space_name(r)}: PSNR average over all frames "
            f"{_db(r['psnr_pooled_db'])} against the floor's {_db(floor['psnr_pooled_db'])} ({said}); {means}")


# A's own encode this far off (an rms error of a tenth of the range) keeps little of A: libx264 at crf 18 scores
# about 40 dB on a real clip, uniform noise, which no codec compresses, about 13 dB
LOW_FLOOR_DB = 20.0


def low_floor_line(floor: dict) -> str | None:
    """Where the codec floor is too low to judge B by, a line that says so; None where it is not. The floor as
    shown decides (19.996 dB reads 20.00)."""
    shown = db_cell(floor["psnr_pooled_db"])
    if floor["bit_identical"] or shown in ("-", "inf") or float(shown) >= LOW_FLOOR_DB:
        return None
    return (f"the floor is below {LOW_FLOOR_DB:.0f} dB: the codec keeps little of A (frames like noise do not "
            "compress), so it is no floor to judge B by")


def format_frames(r: dict) -> list[str]:
    """The text report of one frame comparison: each space's ffmpeg-style line, then the headline space's
    mean, worst frame and |d| figures."""
    n, k = r["frames"], r["identical_frames"]
    where = "" if r.get("range", "0:") == "0:" else f" (frames {r['range']})"
    space = r["space"]
    lines = [f"{n} frames{where}, data range 255: {k} of {n} frames identical"]
    if k < n:
        lines += [_ffmpeg_line(s, r[s]) for s in ("yuv", "rgb") if s in r]
        mean_of = f"over the {n - k} differing frames" if k else "of per-frame PSNR"
        samples = "samples of all planes" if space == "yuv" else "channel values"
        lines += [f"{SPACE_NAMES[space]}: PSNR mean {_db(r['psnr_mean_db'])} ({mean_of}), worst "
                  f"{_db(r['psnr_min_db'])} (frame {r['worst_frame']}); mean |d| {r['mean_abs_diff']:.3f}/255, "
                  f"max |d| {r['max_abs_diff']}, |d| > 16 in {share_text(r['share_over_16'], 3)} of {samples}"]
        if "rgb" not in r:
            lines.append("RGB not computed (--rgb adds it)")
    reduced = _reduced_line(r)
    if reduced:
        lines.append(reduced)
    if "ssim" in r:
        lines.append(_ssim_line(r["ssim"]))
    return lines


def _per_frame_text(rows: list[dict]) -> str:
    import pandas as pd  # slow to import: only --per-frame prints a table

    table = pd.DataFrame(rows)
    if "share_over_16" in table:  # a percentage, as the summary line gives it (--json keeps the fraction)
        table = table.assign(share_over_16=100 * table["share_over_16"]).rename(
            columns={"share_over_16": "over_16_%"})
    return table.to_string(index=False, float_format=lambda x: f"{x:.4f}")


def _nonfinite_lines(r: dict) -> tuple[list[str], dict]:
    """A tensor pair's NaN and inf, counted as a tap's ``nonfinite`` is, in a line before the figures (none
    where there are none), and the figures to show: where the two part at a NaN or inf, the figures over the
    values finite in both (the top-level ones are undefined there)."""
    counts = r["nonfinite"]
    if not any(counts):
        return [], r
    sides = ", ".join(f"{side} {f'{n} ({nan} NaN, {n - nan} inf)' if n else 'none'}"
                      for side, n, nan in zip("AB", counts, r["nan"]))
    parted, finite = r["nonfinite_parted"], r["finite"]
    values = finite["values"]
    if parted:
        where = f"they part at {parted} place{'s' * (parted != 1)}: no figure is defined over all values" + (
            f"; these are over the {values} values finite in both:" if values else ", and no value is finite in both")
    else:
        where = "at the same places: " + (f"the figures are over the {values} values finite in both" if values else
                                          "no value is finite in both, so no figure is defined")
    return [f"non-finite values of {math.prod(r['shape'])}: {sides}; {where}"], (finite if parted else r)


def format_result(r: dict, per_frame: bool = False) -> list[str]:
    if r["kind"] == "tensor":
        lines, fig = _nonfinite_lines(r)
        # the range is over the values the figures are (finite in both), of which there may be none
        span = ("no data range: no value is finite in both" if math.isnan(r["data_range"]) else
                f"data range {r['data_range']:.4g}, A's max - min" + " over the values finite in both" * bool(lines))
        lines.append(f"tensor {r['dtype']}{r['shape']}: rel L2 {fig['rel_l2']:.3e}, cosine {fig['cosine']:.8f}, "
                     f"max |d| {fig['max_abs_diff']:.4g}, mean |d| {fig['mean_abs_diff']:.4g}, "
                     f"PSNR {_db(fig['psnr_db'])} ({span})")
    else:
        lines = [f"A: {r['inputs'][0]}", f"B: {r['inputs'][1]}", *format_frames(r)]
        shown = r["identical_frames"] < r["frames"] or "ssim" in r  # format_frames' lines that name a command
        commands = shown and any(r[k]["reproduce"] for k in ("yuv", "rgb", "ssim") if k in r)
        if shown:
            older = _older_release(r) if commands else None
            lines.append(f"figures as the filters of {r['ffmpeg']} give them" + (
                ": the commands give them with that release" if commands else "") + (
                f" ({older})" if older else ""))
        if "frames_paired" in r:
            paired = r["frames_paired"] if commands else r["frames_paired"].split(": the commands given")[0]
            lines.insert(2, f"frames paired {paired}")
        if "rotation" in r:
            lines.insert(2, r["rotation"])
        if "space_note" in r:
            lines.insert(2, r["space_note"])
        if "alpha" in r:
            lines.insert(2, r["alpha"])
        if per_frame:
            lines.append(_per_frame_text(r["per_frame"]))
    sha, of = r["sha256"], f" of the {r['sha256_of']}" if "sha256_of" in r else ""
    what = "colour planes bit-identical" if "alpha" in r else "bit-identical"  # (the alpha plane not compared)
    lines.append(f"{what}: {'yes' if r['bit_identical'] else 'no'} (sha256{of} {sha[0][:12]} vs {sha[1][:12]})")
    return lines


@click.command("quality")
@click.argument("a")
@click.argument("b", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the fields are a contract).")
@click.option("--per-frame", is_flag=True, help="Also give every frame's figures.")
@click.option("--rgb", is_flag=True, help="YUV videos: also measure in RGB24 and headline it (slower).")
@click.option("--ssim", is_flag=True, help="Also compute SSIM as ffmpeg's ssim filter does: Y, U, V and All in the "
              "source planes (R, G, B and All for RGB frames).")
@click.option("--frames", "frame_range", metavar="START:STOP", help="Compare only these frames, e.g. 0:49.")
@click.option("--codec-floor", "with_floor", is_flag=True, help="Also report A against itself through --codec.")
@click.option("--codec", "codec_spec", default="libx264:crf=18:pix_fmt=yuv420p", show_default=True,
              metavar="CODEC[:k=v...]", help="Encoder settings for --codec-floor.")
@click.option("--drift", "as_drift", is_flag=True, help="A and B are per-step latents (steps, ...): a row per step.")
@click.option("--plot", type=click.Path(dir_okay=False), callback=plot_file,
              help="With --drift, or a run directory's taps: write the plot to this PNG (a suffix matplotlib writes, "
                   "e.g. .svg: that format).")
def command(a, b, as_json, per_frame, rgb, ssim, frame_range, with_floor, codec_spec, as_drift, plot):
    """Compare output B against reference A: videos, PNG / JPEG folders, .npy / .npz, a trial's outputs folder.

    Frames: PSNR per plane, average, min and max as ffmpeg's psnr filter gives them: for two videos of
    one YUV format in their own planes (`ffmpeg -i A -i B -lavfi psnr`), otherwise (or with --rgb, too)
    in RGB24 (the same filter after format=rgb24); per-frame PSNR's mean over differing frames, worst
    frame, mean / max |d|, share of |d| > 16, sha256. Tensors: relative L2, cosine, max |d|.

    A alone, a run directory whose trials tapped (capture.taps): the first tap where B departs from A.
    """
    # numpy's OpenBLAS starts a thread per core as it loads, which spin on CPU that the decoders need on
    # 2 cores; no figure uses threaded BLAS. Set while numpy loads (OpenBLAS reads it then); a user's setting stands.
    blas_ours = "OPENBLAS_NUM_THREADS" not in os.environ
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # numpy, PyAV and the figures: imported here so that --help and the other commands need none of them
    from perfkit.quality import compare
    from perfkit.quality.media import named_file, open_media, parse_codec

    if blas_ours:
        del os.environ["OPENBLAS_NUM_THREADS"]

    frames = compare.parse_frame_range(frame_range)
    codec = parse_codec(codec_spec) if with_floor else None
    missing = next((p for p in (a, b) if p is not None and not named_file(p).exists()), None)
    if missing is not None:  # before what the other side is: a missing A is the first thing wrong
        raise BadInput("no such file or folder", path=missing)
    if b is None and Path(a, "trials.jsonl").is_file():
        return _taps_command(a, as_json, plot)
    for side in (p for p in (a, b) if p is not None and Path(p, "trials.jsonl").is_file()):
        # (its folder holds the report's plots, which would read as a folder of frames)
        outputs = sorted(Path(side).glob("trials/*/rank0/outputs"))
        hint = f", e.g. {outputs[0]}" if outputs else ""
        raise BadInput(f"a run directory: compare a trial's outputs (trials/NN-<variant>/rank0/outputs{hint}), or "
                       "give the run directory alone for its taps", path=side)
    if plot and b is not None and not as_drift:  # (a frame comparison has no plot: said, not silently skipped)
        raise BadInput("--plot draws --drift's steps or a run directory's taps (A alone); a frame comparison has "
                       "none: --per-frame gives every frame's figures", field="--plot")
    if b is None and as_drift:
        raise BadInput("--drift compares A's per-step latents with B's: give B", field="B")
    if b is None and not with_floor:
        raise BadInput("give B to compare with A, or --codec-floor", field="B")
    if as_drift:
        return _drift_command(a, b, as_json, plot)
    if codec is not None and b is not None and not rgb:
        # B's figures and the floor in one space: the source planes only where the floor can be measured in them
        ref = open_media(a)
        rgb = not compare.floor_in_planes(ref, codec, rgb=False)
        if rgb and ref.pix_fmt and ref.pix_fmt not in ("rgb24", codec.pix_fmt):
            warnings.warn(f"the floor's encoder takes {codec.pix_fmt}, not A's {ref.pix_fmt}: B and the floor are "
                          f"measured in RGB24 (--codec {codec.name}:pix_fmt={ref.pix_fmt}:... keeps A's planes)",
                          DefinitionNote, stacklevel=1)
    result = compare.compare(a, b, frames, ssim=ssim, per_frame=per_frame, rgb=rgb) if b is not None else {}
    if codec is not None:
        in_rgb = result.get("space") == "rgb" if b is not None else rgb
        result["codec_floor"] = floor = compare.codec_floor(a, codec, frames, ssim=ssim, rgb=in_rgb)
    if as_json:
        click.echo(json.dumps(json_safe(result), indent=2))
        return
    if b is not None:
        for line in format_result(result, per_frame):
            click.echo(line)
    if codec is not None:
        click.echo(f"codec floor: A against itself through {floor['codec']} ({floor['bytes']} bytes):")
        for line in format_frames(floor):
            click.echo("  " + line)
        if low := low_floor_line(floor):
            click.echo("  " + low)
        if b is not None:
            click.echo(floor_line(result, floor))


def _drift_command(a: str, b: str, as_json: bool, plot: str | None) -> None:
    # numpy and pandas: only when the command runs
    from perfkit.quality import compare
    from perfkit.quality.media import open_media

    media = [open_media(p) for p in (a, b)]
    for m in media:  # (uint8 .npy frames too: their PSNR is over 255, a latent's over A's range)
        if m.kind == "frames":
            raise BadInput("holds frames, not per-step latents: compare them without --drift (--per-frame gives a "
                           "row per frame)", path=m.label)
    table = compare.drift(*(m.array() for m in media), labels=(a, b))
    if plot:
        compare.plot_drift(table, Path(plot), f"{b} against {a}")
    if as_json:
        click.echo(json.dumps(json_safe({"kind": "drift", "steps": len(table), "rows": table.to_dict("records")}),
                              indent=2))
    else:
        click.echo(table.to_string(index=False, float_format=lambda x: f"{x:.6g}"))


def _outputs_command(run_dir: Path, trials: list[dict], a: str, b: str) -> str:
    """``; `perfkit quality A B` compares their outputs``, of each variant's first good trial whose rank 0 kept
    outputs; empty where a side has none."""
    folders = []
    for name in (a, b):
        found = [run_dir / t["dir"] / "rank0" / "outputs" for t in trials if t.get("variant") == name
                 and t.get("status") == "ok" and (run_dir / t["dir"] / "rank0" / "outputs").is_dir()]
        if not found:
            return ""
        folders.append(str(found[0]))
    return f"; `perfkit quality {' '.join(folders)}` compares their outputs"


def _taps_command(run_dir: str, as_json: bool, plot: str | None) -> None:
    """A run's first departure, as its report gives it (``perfkit.report.departure``)."""
    # numpy, pandas, yaml (the run's case) and the taps' wording: only when the command runs
    from perfkit.quality import departure
    from perfkit.report.departure import lines
    from perfkit.rundata import case as case_mod
    from perfkit.rundata import rundir

    case = case_mod.load(Path(run_dir) / "case.yaml")
    if len(case.run_variants()) < 2:
        raise BadInput("the run's case has one variant: nothing to compare", path=Path(run_dir) / "case.yaml")
    a, b = (v.name for v in case.run_variants()[:2])
    asked = case.capture.get("taps") or []
    trials = rundir.read_trials(Path(run_dir))
    result = departure.run_departure(Path(run_dir), trials, a, b, asked)
    if result is None and not asked:
        # a command's own program taps only where it calls record.tap, and its outputs may be what was asked for
        who = ("every block at denoise step 0" if case.kind == "model" else
               f"where its program calls record.tap{_outputs_command(Path(run_dir), trials, a, b)}")
        raise BadInput(f"no good trial of both {a} and {b} wrote taps (the case's capture.taps): run it again "
                       f"with them, e.g. `perfkit run {Path(run_dir) / 'case.yaml'} --set 'capture.taps=[0]'` "
                       f"({who})",
                       path=run_dir)
    if result is None:  # the case asked, and neither side tapped
        raise BadInput(departure.untapped([a, b], asked), path=run_dir)
    if "error" in result:
        raise BadInput(result["error"])
    result = json_safe(result)
    if plot and result["rows"]:
        departure.plot_agreement(result["rows"], Path(plot), f"{b} against {a}")
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        for line in lines(result, plot, markdown=False):
            click.echo(line)
