"""The serve section of a case: defaults, per-variant overrides, prompts files, placeholders, loopback
only, one-line refusals naming file and field, and the resolved case.yaml reloading to the same case."""

import copy

import pytest
import yaml
from serve_testing import REPO, SERVER, perfkit, serve_case

from perfkit.errors import BadInput
from perfkit.rundata import case as case_mod
from perfkit.rundata.serve_spec import fill

GOOD = serve_case({"a": {}, "b": {"args": ["--max-concurrency", "2"],
                                  "serve": {"request": {"url": "/v2/generate"}}}})


def refusal(raw: dict) -> str:
    with pytest.raises(BadInput) as err:
        case_mod.validate(raw, "c.yaml")
    return err.value.line()


def changed(path: str, value) -> dict:
    """GOOD with the dotted ``path`` set to ``value`` (None removes the key)."""
    raw = copy.deepcopy(GOOD)
    parts = path.split(".")
    target = raw
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    if value is None:
        target.pop(parts[-1], None)
    else:
        target[parts[-1]] = value
    return raw


def test_a_serve_case_resolves_defaults_and_variant_overrides_mapping_by_mapping():
    case = case_mod.validate(GOOD, "c.yaml")
    assert case.kind == "serve" and case.repeats == {"min": 1, "max": 1}
    s = case.serve
    assert s.concurrency == (1, 2) and s.requests == 4 and s.host == "127.0.0.1"
    assert [(p.name, p.seed) for p in s.prompts] == [("fox", 3), ("owl", 4)]
    a, b = case.variants
    assert a.serve.request.url == "/generate" and b.serve.request.url == "/v2/generate"
    # b changed only the URL of the request: the shared body and method stay.
    assert b.serve.request.body == a.serve.request.body and b.serve.request.method == "POST"
    assert a.serve.ready.url == "/health" and a.serve.output.kind == "body" and a.serve.output.suffix == ".mkv"
    assert b.args == ["--max-concurrency", "2"] and "--max-concurrency" not in b.serve.argv


def test_the_resolved_case_yaml_reloads_to_the_same_case(tmp_path):
    case = case_mod.validate(GOOD, "c.yaml")
    path = tmp_path / "case.yaml"
    path.write_text(case_mod.to_yaml(case))
    again = case_mod.load(path)
    assert again.serve == case.serve
    assert [(v.name, v.args, v.serve) for v in again.variants] == [(v.name, v.args, v.serve) for v in case.variants]
    assert case_mod.to_yaml(again) == path.read_text()


def test_string_prompts_take_the_case_seed_plus_their_index_and_prompts_files_are_inlined(tmp_path, monkeypatch):
    case = case_mod.validate(dict(changed("serve.prompts", ["one", "two", "three"]), seed=10), "c.yaml")
    assert [(p.name, p.text, p.seed) for p in case.serve.prompts] == [("p00", "one", 10), ("p01", "two", 11),
                                                                       ("p02", "three", 12)]
    monkeypatch.chdir(tmp_path)  # a relative prompts path is taken from the working directory
    (tmp_path / "p.txt").write_text("a cat\n\n  a dog  \n")
    (tmp_path / "p.jsonl").write_text('{"prompt": "a cat", "seed": 7, "name": "cat", "style": "ink"}\n'
                                      '{"prompt": "a dog", "seed": 8, "name": "dog", "style": "oil"}\n')
    (tmp_path / "p.yaml").write_text(yaml.safe_dump([{"prompt": "a cat", "seed": 5}]))
    assert [p.text for p in case_mod.validate(changed("serve.prompts", "p.txt"), "c.yaml").serve.prompts] == \
        ["a cat", "a dog"]
    from_jsonl = case_mod.validate(changed("serve.prompts", "p.jsonl"), "c.yaml")
    assert [(p.name, p.seed, p.extra) for p in from_jsonl.serve.prompts] == [("cat", 7, {"style": "ink"}),
                                                                             ("dog", 8, {"style": "oil"})]
    assert case_mod.validate(changed("serve.prompts", "p.yaml"), "c.yaml").serve.prompts[0].seed == 5
    # A placeholder every prompt fills (style) may be used; the resolved case holds the prompts themselves.
    raw = changed("serve.request.body", {"prompt": "{prompt} in {style}"})
    raw["serve"]["prompts"] = "p.jsonl"
    case = case_mod.validate(raw, "c.yaml")
    assert "p.jsonl" not in case_mod.to_yaml(case) and "in {style}" in case_mod.to_yaml(case)


def test_fill_keeps_the_type_of_a_whole_placeholder_and_leaves_unknown_braces():
    values = {"seed": 7, "prompt": "a fox", "width": 64}
    assert fill({"seed": "{seed}", "text": "{prompt}, seed {seed}", "n": 3, "raw": '{"a": 1} {other}'}, values) == \
        {"seed": 7, "text": "a fox, seed 7", "n": 3, "raw": '{"a": 1} {other}'}
    assert fill(["{width}", {"w": "{width}px"}], values) == [64, {"w": "64px"}]


def test_a_named_host_may_be_contacted_as_well_as_loopback():
    raw = changed("serve.request.url", "http://gpu-box:{port}/generate")
    raw["serve"]["host"] = "gpu-box"
    assert case_mod.validate(raw, "c.yaml").variants[0].serve.request.url == "http://gpu-box:{port}/generate"
    assert case_mod.validate(changed("serve.ready.url", "http://localhost:{port}/health"), "c.yaml")


@pytest.mark.parametrize("path,value,line", [
    ("serve.concurency", [1], "c.yaml: serve.concurency: unknown key (did you mean 'concurrency'?)"),
    ("serve.request.body", {"w": "{widht}"},
     "c.yaml: serve.request.body: unknown placeholder {widht} (known: frames, height, host, name, port, prompt, "
     "seed, width)"),
    ("variants.b.serve.request.url", "http://example.com/generate",
     "c.yaml: variants.b.serve.request.url: contacts example.com, which is neither loopback nor serve.host "
     "(127.0.0.1)"),
    ("serve.ready.url", "health", "c.yaml: serve.ready.url: expected a path (/generate) or an http URL, got 'health'"),
    ("serve.output", {"kind": "url"}, "c.yaml: serve.output.field: output kind url needs the JSON field that holds it"),
    ("serve.output.kind", "file", "c.yaml: serve.output.kind: must be one of body, base64, url, path"),
    ("serve.output.suffix", "mkv", "c.yaml: serve.output.suffix: a file suffix such as .mp4, got 'mkv'"),
    ("serve.concurrency", [1, 1], "c.yaml: serve.concurrency: must be a list of distinct integers in 1..4096, "
                                  "e.g. [1, 2, 4]"),
    ("serve.concurrency", [0], "c.yaml: serve.concurrency: must be a list of distinct integers in 1..4096, e.g. [1, 2, 4]"),
    ("serve.requests", 0, "c.yaml: serve.requests: must be >= 1"),
    ("serve.server", None, "c.yaml: serve.server: the server's argv: a non-empty list of strings (never a shell "
                           "string)"),
    # A variant's empty argv was taken as none given: the variant ran the shared server as if it were A.
    ("variants.b.serve.server", [], "c.yaml: variants.b.serve.server: the server's argv: a non-empty list of strings "
                                    "(never a shell string)"),
    ("serve.server", "python server.py", "c.yaml: serve.server: must be a list, got str 'python server.py'"),
    ("serve.request.method", "fetch", "c.yaml: serve.request.method: must be one of GET, POST, PUT"),
    ("serve.params", {"seed": 1}, "c.yaml: serve.params: 'seed' is filled by perfkit"),
    ("serve.prompts", [{"prompt": "a"}, {"prompt": "b", "name": "p00"}],
     "c.yaml: serve.prompts[1]: name 'p00' must be unique and made of letters, digits, '_', '-', '.' (it names "
     "output files)"),
    ("serve.prompts", [{"text": "a"}], "c.yaml: serve.prompts[0]: a prompt is a string or a mapping with a 'prompt' "
                                       "string"),
    ("serve.prompts", "no-such-prompts.txt",
     "c.yaml: serve.prompts: cannot read the prompts file no-such-prompts.txt: No such file or directory"),
    ("repeats", {"min": 3, "max": 3}, "c.yaml: repeats: a serve case repeats through serve.server_restarts (leave "
                                      "repeats out)"),
    ("processes", 2, "c.yaml: processes: a serve case starts one server process per trial (its own ranks are its "
                     "business)"),
    ("command", ["python", "x.py"], "c.yaml: model: a case has exactly one of 'model', 'command' and 'serve'"),
])
def test_bad_serve_fields_are_refused_in_one_line_naming_the_field(path, value, line):
    assert refusal(changed(path, value)) == line


@pytest.mark.parametrize("path,value,line", [
    ("serve.server", ["python", "s.py", "--name", "{variant}"],
     "c.yaml: serve.server: unknown placeholder {variant} (known: host, port)"),
    ("variants.b.serve.server", ["s", "--port", "{port}", "--log", "{seed}.log"],
     "c.yaml: variants.b.serve.server: unknown placeholder {seed} (known: host, port)"),
    ("variants.b.args", ["--name", "{variant}"], "c.yaml: variants.b.args: unknown placeholder {variant} (known: host, "
                                                 "port)"),
    ("variants.a.env", {"NAME": "{variant}"}, "c.yaml: variants.a.env: unknown placeholder {variant} (known: host, "
                                              "port)"),
    ("serve.ready.url", "/health/{prompt}", "c.yaml: serve.ready.url: unknown placeholder {prompt} (known: host, "
                                            "port)"),
])
def test_a_placeholder_a_server_process_does_not_know_is_refused_at_load(path, value, line):
    # The server starts before any request: it knows {host} and {port} alone. {variant} and a request's {seed} were
    # passed to the server as the text '{variant}' and '{seed}.log'.
    assert refusal(changed(path, value)) == line


def test_the_server_s_args_env_and_ready_url_get_its_host_and_port(tmp_path):
    """The docs promise {port} and {host} filled in the server's argv, its variant's args and env: args were passed
    as the text '{port}', and a ready URL naming {port} was polled as 'http://localhost:{port}/health', not a URL,
    so the server was never ready."""
    from perfkit.run.serve_trial import ServedTrial
    from perfkit.run.trial import Trial

    raw = changed("serve.ready", {"url": "http://localhost:{port}/health", "timeout": 20})
    raw["serve"]["server"] = ["python", str(SERVER)]
    raw["variants"]["a"] = {"args": ["--port", "{port}", "--host", "{host}"], "env": {"AT": "{host}:{port}"}}
    case = case_mod.validate(raw, "c.yaml")
    served = ServedTrial(case, case.variants[0], Trial(0, "a", 1), tmp_path / "rank0", None, None)
    assert served.proc.argv[-4:] == ["--port", str(served.port), "--host", "127.0.0.1"]
    assert served.proc.env["AT"] == f"127.0.0.1:{served.port}"
    try:
        assert served.start("", lambda: None) is not None, served.trouble
    finally:
        served.end()


def test_per_variant_server_settings_belong_to_serve_cases_only():
    raw = {"name": "x", "command": ["python", "x.py"], "variants": {"a": {"serve": {"server": ["s"]}}, "b": {}}}
    assert refusal(raw) == "c.yaml: variants.a.serve: only a serve case has per-variant server settings"


def test_the_shipped_example_case_loads():
    case = case_mod.load(REPO / "cases" / "serve" / "test_server.yaml")
    assert case.kind == "serve" and [v.name for v in case.variants] == ["serial", "batched"]


def test_a_server_program_that_is_not_there_is_bad_input_before_any_trial(tmp_path):
    raw = changed("serve.server", ["no-such-server-program", "--port", "{port}"])
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(raw))
    res = perfkit("run", path, "--out", tmp_path / "run")
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == (f"perfkit: {path}: variants.a.serve.server: program 'no-such-server-program' "
                                  "not found on PATH")
    assert not (tmp_path / "run" / "trials").exists()


@pytest.mark.parametrize("codec,reason", [
    ("nocodec", "no encoder 'nocodec' in this PyAV build"),
    ("libx264:crf", "expected CODEC[:key=value...], got 'crf'"),
])
def test_a_quality_floor_codec_this_pyav_lacks_is_bad_input_before_any_trial(tmp_path, codec, reason):
    """Reading a case needs no PyAV: the serve case kind's check, before any trial, refuses the codec."""
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(changed("serve.codec", codec)))
    assert case_mod.load(path).serve.codec == codec
    res = perfkit("run", path, "--out", tmp_path / "run")
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == f"perfkit: {path}: serve.codec: {reason}"
    assert not (tmp_path / "run" / "trials").exists()


def test_a_server_starts_with_the_rank_environment_salt_included(tmp_path, monkeypatch):
    """A served trial's environment comes from the runner's process_env: the variant's env with
    placeholders filled, the PERFKIT_ variables, the stack-dump hook, and with --salt the caches off."""
    from perfkit.run import stackdump
    from perfkit.run.trial import SALT_ENV, Trial
    from perfkit.run.serve_trial import ServedTrial

    monkeypatch.setenv(stackdump.OWNER_ENV, "perfkit's own")
    case = case_mod.validate(serve_case({"a": {"env": {"SERVE_PORT": "{port}"}}, "b": {}}), "c.yaml")
    served = ServedTrial(case, case.variants[0], Trial(3, "a", 1), tmp_path / "rank0", tmp_path / "hook", "5a17")
    env = served.proc.env
    assert env["SERVE_PORT"] == str(served.port) and env["PERFKIT_TRIAL"] == "3" and env["PERFKIT_VARIANT"] == "a"
    assert env["PERFKIT_SALT"] == "5a17" and all(env[k] == v for k, v in SALT_ENV.items())
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path / "hook") and stackdump.OWNER_ENV not in env
    assert env[stackdump.STACKS_ENV] == str(tmp_path / "rank0" / "stacks.txt")
    unsalted = ServedTrial(case, case.variants[1], Trial(4, "b", 1), tmp_path / "r", None, None).proc.env
    assert "PERFKIT_SALT" not in unsalted


def test_a_served_trial_ends_its_server_s_group_once(tmp_path, monkeypatch):
    """A load the server stopped ends the trial from the load's abort, then again at the trial's end: the second
    call signalled the group id again, which an unrelated group may hold by then."""
    from perfkit.run import serve_trial
    from perfkit.run.trial import Trial

    ended = []
    monkeypatch.setattr(serve_trial, "end_group", lambda pgid, ranks, dump_stacks: ended.append(pgid))
    case = case_mod.validate(serve_case({"a": {}, "b": {}}), "c.yaml")
    served = serve_trial.ServedTrial(case, case.variants[0], Trial(0, "a", 1), tmp_path / "rank0", None, None)
    served.pgid = 4242  # (a group as start() records it; none is started here)
    served.end()
    served.end()
    assert ended == [4242]


def test_doubled_braces_are_the_text_of_a_server_s_own_template():
    """Any {word} in a server's argv or env but {host} and {port} is refused at load: a server's own template
    (a log format's '{levelname}') is written '{{levelname}}', which it receives as '{levelname}'."""
    raw = changed("serve.server", ["python", "srv.py", "--log-format", "{{levelname}}: {{message}} on {port}"])
    raw["variants"]["a"] = {"env": {"FMT": "{{asctime}}"}}
    case = case_mod.validate(raw, "c.yaml")
    assert fill(list(case.variants[0].serve.argv), {"host": "h", "port": 9}) == [
        "python", "srv.py", "--log-format", "{levelname}: {message} on 9"]
    assert fill(case.variants[0].env, {"host": "h", "port": 9}) == {"FMT": "{asctime}"}
    assert fill('{"a": {"b": 1}}', {}) == '{"a": {"b": 1}}'  # a JSON text's braces are no escape
