"""``perfkit trace collectives``: the group size n of a Kineto collective whose trace does not record it is
unknown, never the ranks given, even where they are every rank of the job (HTA 0.5.0 reads a kernel's
``Group size`` as 0, unknown, where its trace has none, and derives no bytes or bandwidth from it)."""

import gzip
import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from perfkit.cli import cli

REAL_KINETO = Path(__file__).resolve().parents[1] / "data" / "real" / "kineto"
NEGATIVE_QUEUE = REAL_KINETO / "hta_negative_queue_rank0.json.gz"


def _nccl_spans_by_hand(trace: list[dict]) -> dict[str, list[int]]:
    """The rows of each nccl:* span's first recorded input (``Input Dims``), by span name: a plain reading of the
    JSON."""
    out: dict[str, list[int]] = {}
    for e in trace:
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("nccl:") and e.get("args", {}).get("Input Dims"):
            out.setdefault(e["name"], []).append(e["args"]["Input Dims"][0][0])
    return out


def _kept(e: dict, correlations: set) -> bool:
    """The events the collectives of a Kineto trace are read from: its NCCL kernels, their launches, the
    torch.distributed spans around those, and the step markers."""
    name = str(e.get("name", ""))
    if e.get("cat") == "kernel":
        return "nccl" in name
    if e.get("cat") == "cuda_runtime":
        return e.get("args", {}).get("correlation") in correlations
    return name.startswith(("nccl:", "record_param_comms", "ProfilerStep#"))


def test_no_group_size_is_taken_from_every_rank_given(tmp_path):
    """HTA's negative_queue_length_values_check rank 0 (distributedInfo world_size 16, no pg_config, no Group size
    on any kernel or record_param_comms), given as all 16 ranks of its job (copies cut to their NCCL kernels, their
    launches, the spans around those and the step markers; each its rank in distributedInfo). By hand every
    nccl:_reduce_scatter_base records an input of 65536 rows and every nccl:_all_gather_base one of 8192 rows, of
    the same widths: a shard is 1/8 of the whole, so these ran on groups of 8 ranks, not of the 16 given. The trace
    records no group size, so n is unknown: every collective's bytes are (null), and a note says why, where perfkit
    took the 16 chips matched for n (the reduce-scatters 15/16 x 65536 x 384 x 4 bytes, ...)."""
    raw = json.loads(gzip.decompress(NEGATIVE_QUEUE.read_bytes()))
    trace = raw["traceEvents"]
    info = raw["distributedInfo"]
    assert info["world_size"] == 16 and "pg_config" not in info
    assert not any({"Group size", "Process Group Ranks", "Process Group Name"} & e.get("args", {}).keys()
                   for e in trace)
    rows = _nccl_spans_by_hand(trace)
    assert set(rows["nccl:_reduce_scatter_base"]) == {65536} and set(rows["nccl:_all_gather_base"]) == {8192}
    assert 65536 // 8192 == 8 != info["world_size"]
    correlations = {e["args"]["correlation"] for e in trace if e.get("cat") == "kernel" and "nccl" in e["name"]}
    raw["traceEvents"] = [e for e in trace if _kept(e, correlations)]
    for rank in range(16):
        info["rank"] = rank
        (tmp_path / f"rank-{rank}.json.gz").write_bytes(gzip.compress(json.dumps(raw).encode()))
    result = CliRunner().invoke(cli, ["trace", "collectives", "--json", str(tmp_path)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    inst = doc["instances"]
    assert len(inst) == 16 * 80 and {r["chips"] for r in inst} == {16}
    assert {r["kind"] for r in inst} == {"all-to-all", "reduce-scatter", "all-reduce", "all-gather",
                                         "collective-permute"}
    assert all(r["bytes"] is None for r in inst), sorted({r["bytes"] for r in inst if r["bytes"] is not None})
    assert all(r["group"] == 0 for r in inst if r["kind"] != "collective-permute")
    assert all(o["gbps"] is None for o in doc["ops"])
    (note,) = [n for n in doc["notes"] if n.startswith("communication kernels without bytes")]
    assert ("1200 (720 all-to-all, 160 reduce-scatter, 160 all-reduce, 160 all-gather) record no group size (Group "
            "size), nor do the torch.distributed spans around their launch, nor does their trace list its process "
            "groups (distributedInfo pg_config): n is unknown, not taken from the ranks given (a job's collectives "
            "may run on groups of fewer of its ranks)") in note


def test_gloo_spans_of_a_trace_listing_no_process_group_have_no_n(fixtures_dir, tmp_path):
    """The newcomer's block on 2 gloo ranks (record_shapes on) with its one process group taken out of
    distributedInfo: each gloo span still records its input, but nothing in the trace says its group's size, so
    n is unknown: bytes null and a note saying why, where the 2 chips matched were taken for n (all-reduce
    2(n-1)/n of its input)."""
    folder = fixtures_dir.parent / "torch_gloo" / "shapes"
    for rank in (0, 1):
        raw = json.loads(gzip.decompress((folder / f"rank{rank}.json.gz").read_bytes()))
        assert [g["pg_size"] for g in raw["distributedInfo"].pop("pg_config")] == [2]
        spans = [e for e in raw["traceEvents"] if e.get("name", "").startswith("gloo:")]
        assert len(spans) == 3 and all(np.prod(e["args"]["Input Dims"][0]) > 0 for e in spans)
        (tmp_path / f"rank{rank}.json.gz").write_bytes(gzip.compress(json.dumps(raw).encode()))
    result = CliRunner().invoke(cli, ["trace", "collectives", "--json", str(tmp_path)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(doc["instances"]) == 6 and {r["chips"] for r in doc["instances"]} == {2}
    assert all(r["bytes"] is None and r["group"] == 0 for r in doc["instances"])
    (note,) = [n for n in doc["notes"] if n.startswith("gloo collectives without bytes")]
    assert note == ("gloo collectives without bytes and GB/s (?): 6 (4 all-gather, 2 all-reduce) record no group "
                    "size, nor does their trace list its process groups (distributedInfo pg_config): n is unknown, "
                    "not taken from the ranks given (a job's collectives may run on groups of fewer of its ranks)")
