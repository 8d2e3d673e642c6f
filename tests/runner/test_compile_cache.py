"""Cold against warm compile caches (a variant's ``compile_cache``). The bundled model runs both: warm
trials read every program back from the cache the priming trial filled and compile less; cold ones
start empty and never hit; the outputs are bit-identical. Cache hits are counted twice, independently:
by the program (jax's monitoring events, ``compile_cache_hits`` / ``compile_cache_writes``) and by the
runner on disk (jax's ``*-cache`` entry files before and after each trial)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfkit.errors import BadInput
from perfkit.run.runner import run_cached_trial, run_case
from perfkit.run.trial import RunOptions, Trial, cache_entries, compile_cache_env
from perfkit.rundata import case as case_mod

from runner_testing import read_jsonl

A_B = {"cold": {"options": {"plan": "tp"}, "compile_cache": "cold"},
       "warm": {"options": {"plan": "tp"}, "compile_cache": "warm"}}


def model_case(**over) -> case_mod.Case:
    raw = {"name": "cache", "model": {"name": "wan", "config": "tiny", "steps": 3}, "devices": 2, "warmup": 1,
           "repeats": {"min": 1, "max": 1}, "timeout": 180, "capture": {"xla_dump": "none", "trace": [],
                                                                       "outputs": True}, "variants": A_B}
    return case_mod.validate({**raw, **over}, "cache.yaml")


def test_cold_and_warm_side_by_side_with_the_bundled_model(tmp_path):
    run = tmp_path / "run"
    assert not run_case(model_case(), run).failed
    primed = json.loads((run / "compile_cache" / "warm" / "primed.json").read_text())
    assert primed["status"] == "ok" and primed["index"] == -1
    assert primed["dir"] == "compile_cache/warm/prime" and (run / primed["dir"] / "rank0").is_dir()  # (trials/-1-warm)
    filled = primed["compile_cache"]["after"]["jax_entries"]
    assert filled > 0 and primed["values"]["compile_cache_writes"] == filled  # events agree with the disk
    trials = {t["variant"]: t for t in read_jsonl(run / "trials.jsonl")}
    assert [t["index"] for t in read_jsonl(run / "trials.jsonl")] == [0, 1]  # priming is no trial
    cold, warm = trials["cold"], trials["warm"]
    # cold: an empty cache, every program compiled and written, none read
    assert cold["compile_cache"]["before"]["jax_entries"] == 0
    assert cold["values"]["compile_cache_hits"] == 0
    assert cold["compile_cache"]["after"]["jax_entries"] == cold["values"]["compile_cache_writes"] == filled
    assert not (run / cold["dir"] / "compile_cache").exists()  # a cold cache is removed once counted
    # warm: every program read back from the primed cache, nothing new written
    assert warm["compile_cache"]["before"] == warm["compile_cache"]["after"] == primed["compile_cache"]["after"]
    assert warm["values"]["compile_cache_hits"] == filled and warm["values"]["compile_cache_writes"] == 0
    assert warm["values"]["compile_s"] < cold["values"]["compile_s"]
    assert warm["steps_ms"][0] < cold["steps_ms"][0]  # the first step compiles: from the cache it is shorter
    # the same outputs, byte for byte
    frames = [np.load(run / t["dir"] / "rank0" / "outputs" / "frames.npy") for t in (cold, warm)]
    assert frames[0].dtype == np.uint8 and np.array_equal(*frames)

    summary = json.loads((run / "summary.json").read_text())
    cc = summary["compile_cache"]
    assert cc["outputs"]["bit_identical"] is True and cc["outputs"]["runs"] == 2
    assert (cc["variants"]["cold"]["cache_hits"], cc["variants"]["warm"]["cache_hits"]) == (0, filled)
    assert (cc["variants"]["cold"]["entries_written"], cc["variants"]["warm"]["entries_written"]) == (filled, 0)
    assert cc["variants"]["warm"]["priming"] == {"status": "ok", "wall_s": primed["wall_s"], "entries": filled}
    report = (run / "report.md").read_text()
    section = report.split("## Compile cache", 1)[1].split("\n## ", 1)[0]
    assert "| cold | cold |" in section and "| warm | warm |" in section
    assert "bit-identical across cold and warm: yes, all 2 good trials" in section


def fake_run(written: list):
    """A trial that writes one cache entry into the jax cache its environment names."""
    def run_one(case, trial, trial_dir):
        folder = Path(case.variant(trial.variant).env["JAX_COMPILATION_CACHE_DIR"])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"jit_step-{trial.index}-cache").write_bytes(b"x")
        (folder / f"jit_step-{trial.index}-atime").write_bytes(b"t")  # jax's access times: no entry
        written.append(folder)
        return {"index": trial.index, "variant": trial.variant}
    return run_one


def test_cold_starts_empty_every_trial_and_warm_keeps_one_folder(tmp_path):
    case, written = model_case(), []
    stale = tmp_path / "trials" / "00-cold" / "compile_cache" / "jax"  # what an interrupted attempt left
    stale.mkdir(parents=True)
    (stale / "jit_step-old-cache").write_bytes(b"x")
    records = [run_cached_trial(case, Trial(i, v, i), tmp_path / "trials" / f"{i:02d}-{v}", tmp_path,
                                fake_run(written)) for i, v in enumerate(["cold", "warm", "cold", "warm"])]
    cold, warm = [r["compile_cache"] for r in records[0::2]], [r["compile_cache"] for r in records[1::2]]
    assert [c["before"]["jax_entries"] for c in cold] == [0, 0] and [c["after"]["jax_entries"] for c in cold] == [1, 1]
    assert [c["before"]["jax_entries"] for c in warm] == [0, 1] and warm[1]["after"]["jax_entries"] == 2
    assert written[1] == written[3] == tmp_path / "compile_cache" / "warm" / "jax"
    assert written[0] != written[2] and not written[0].exists()


def test_cache_entries_counts_jax_entries_and_inductor_files(tmp_path):
    (tmp_path / "jax").mkdir()
    for name in ("jit_a-1-cache", "jit_a-1-atime", "jit_b-2-cache"):
        (tmp_path / "jax" / name).write_text("x")
    (tmp_path / "inductor" / "fxgraph" / "ab").mkdir(parents=True)
    (tmp_path / "inductor" / "fxgraph" / "ab" / "entry").write_text("x")
    assert cache_entries(tmp_path) == {"jax_entries": 2, "inductor_files": 1}
    assert cache_entries(tmp_path / "absent") == {"jax_entries": 0, "inductor_files": 0}


def test_bad_compile_cache_settings_are_one_line(tmp_path):
    with pytest.raises(BadInput) as exc:
        model_case(variants={"a": {"compile_cache": "lukewarm"}, "b": {}})
    assert exc.value.field == "variants.a.compile_cache"
    for options, field in ((RunOptions(salt=True), "--salt"),
                           (RunOptions(hosts=2, coordinator="h:1"), "--hosts")):
        with pytest.raises(BadInput) as exc:
            run_case(model_case(), tmp_path / field, options)
        assert exc.value.field == field


SMALL_PROGRAM = """
import jax, jax.numpy as jnp
counts = {"hits": 0, "writes": 0}
names = {"/jax/compilation_cache/cache_hits": "hits", "/jax/compilation_cache/cache_misses": "writes"}
jax.monitoring.register_event_listener(lambda e, **_: e in names and counts.__setitem__(names[e], counts[names[e]] + 1))
jax.jit(lambda x: jnp.sin(x) * 2)(jnp.ones(8)).block_until_ready()
print(counts["hits"], counts["writes"])
"""


def test_small_programs_are_cached_too(tmp_path):
    """A program that compiles in milliseconds (jax writes only those above 1 s by default): the cache
    variables make the second process read what the first wrote."""
    env = {**os.environ, **compile_cache_env(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", SMALL_PROGRAM], env=env, capture_output=True, text=True,
                           timeout=120, check=True).stdout.split() for _ in range(2)]
    (hits0, writes0), (hits1, writes1) = [tuple(map(int, r)) for r in runs]
    assert (hits0, hits1, writes1) == (0, writes0, 0) and writes0 > 0
    assert cache_entries(tmp_path)["jax_entries"] == writes0


def test_a_serve_case_primes_a_server_and_shows_ready_s(tmp_path):
    """Serve variants get the cache variables too (their server is started with the variant's env): the
    warm one is primed by an untimed server, and both rows show the server's ready_s."""
    repo = Path(__file__).resolve().parents[2]
    server = ["python", str(repo / "cases" / "serve" / "server.py"), "--port", "{port}", "--sleep-ms", "5",
              "--startup-ms", "200"]
    case = case_mod.validate({
        "name": "serve-cache", "warmup": 0,
        "serve": {"concurrency": [1], "requests": 2, "server_restarts": 1, "request_timeout": 30,
                  "prompts": ["a fox"], "params": {"width": 16, "height": 16, "frames": 2}, "server": server,
                  "ready": {"url": "/health", "timeout": 30},
                  "request": {"url": "/generate", "method": "POST",
                              "body": {"prompt": "{prompt}", "seed": "{seed}", "width": "{width}",
                                       "height": "{height}", "frames": "{frames}"}},
                  "output": {"kind": "body", "suffix": ".mkv"}},
        "variants": {"cold": {"compile_cache": "cold"}, "warm": {"compile_cache": "warm"}}}, "serve-cache.yaml")
    assert not run_case(case, tmp_path / "run").failed
    primed = json.loads((tmp_path / "run" / "compile_cache" / "warm" / "primed.json").read_text())
    assert primed["status"] == "ok" and primed["values"]["ready_s"] >= 0.2
    rows = json.loads((tmp_path / "run" / "summary.json").read_text())["compile_cache"]["variants"]
    assert all(rows[v]["ready_s"] >= 0.2 for v in ("cold", "warm"))  # the server's 200 ms start-up at least
    assert rows["warm"]["priming"]["status"] == "ok" and rows["cold"]["priming"] is None
