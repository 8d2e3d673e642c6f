"""Real profiles from other projects (../shared/fixtures): they parse, their ops are what the fixture
README says, and their breakdowns add up to the step spans."""

from perfkit.trace import breakdown, events

PARTS = ["compute_ps", "ici_ps", "dma_ps", "idle_ps"]


def test_rocm_xplane_eight_gpus(fixtures_dir):
    ev = events.load([fixtures_dir / "xplane" / "mi300_jax_conv_8gpu.xplane.pb"])
    ops = events.device_ops(ev)
    assert ops.groupby("device").size().to_dict() == {0: 60, **{d: 25 for d in range(1, 8)}}
    # opcodes come from the program's HLO in /host:metadata, not from kernel names
    conv = ops[ops["hlo_op"].astype(str).str.startswith("cudnn-conv")]
    assert len(conv) and (conv["kind"] == "custom-call").all()
    assert set(ops.loc[ops["hlo_op"].astype(str).str.contains("fusion"), "kind"]) == {"fusion"}
    assert (ops["category"] == "compute").all()  # the README: no collectives
    rows = breakdown.breakdown(ev)
    assert sorted(rows["device"]) == list(range(8)) and (rows["step"] == -1).all()  # no step markers
    assert (rows[PARTS].sum(axis=1) == rows["span_ps"]).all() and (rows[PARTS] >= 0).all().all()
    first = ops.groupby("device")["start_ps"].min()
    last = (ops["start_ps"] + ops["dur_ps"]).groupby(ops["device"]).max()
    assert (rows.set_index("device")["span_ps"] == last - first).all()


def test_kineto_two_ranks(fixtures_dir):
    ev = events.load([fixtures_dir / "kineto" / f"rank-{r}.json.gz" for r in (0, 1)])
    ops = events.device_ops(ev)
    assert sorted(ops["rank"].unique()) == [0, 1]  # from distributedInfo.rank
    nccl = ops[ops["name"].astype(str).str.startswith("ncclKernel_SendRecv")]
    assert nccl.groupby("rank").size().to_dict() == {0: 10, 1: 10}
    assert (nccl["category"] == "ici").all() and (nccl["kind"] == "nccl SendRecv").all()
    assert set(ops.loc[ops["name"].astype(str).str.startswith("Memcpy"), "category"]) == {"dma"}
    steps = ev[ev["category"] == "step"]
    assert sorted(steps["step"].unique()) == [551, 552]
    rows = breakdown.breakdown(ev)
    assert sorted(zip(rows["rank"], rows["step"])) == [(0, 551), (0, 552), (1, 551), (1, 552)]
    assert (rows[PARTS].sum(axis=1) == rows["span_ps"]).all() and (rows[PARTS] >= 0).all().all()
    marked = steps.set_index(["rank", "step"])["dur_ps"]
    assert (rows.set_index(["rank", "step"])["span_ps"] >= marked).all()  # a span covers its annotation
    assert (rows["ici_ps"] > 0).all()
