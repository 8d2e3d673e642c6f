"""The ``serve`` section of a case: what a serve case sends, to which server, how often.

A serve case measures served systems by closed-loop load. Shared (``serve:``): the prompts with their
seeds, the concurrency levels, measured requests per level (after the case's ``warmup`` requests),
fresh server processes per variant, the per-request timeout, the only host contacted besides loopback,
extra template values (``params``) and the codec of the quality floor (checked by the serve case kind
before any trial: reading a case needs no PyAV). Per variant (``serve:`` at the top as the default,
``variants.<v>.serve`` to override, mapping by mapping): the server argv (``{port}``,
``{host}`` filled in), the readiness URL and its start-up timeout, the request (URL, method, a JSON body
template with ``{prompt}``, ``{seed}``, ``{name}``, ``{width}`` ... placeholders, headers) and how the
output comes back: the response ``body`` itself, a ``base64`` JSON field, or a JSON field holding a
``url`` to fetch or a local ``path`` to copy.

Placeholders: a string that is exactly ``"{seed}"`` becomes the value itself (an integer stays an
integer in the JSON body); inside longer strings values are written as text. Every placeholder must be
known when the case loads: a request's are those of every prompt, ``params`` and the server's; the server's argv,
its variant's ``args`` and ``env`` and the readiness URL know ``{host}`` and ``{port}`` alone (a server starts before
any request). A prompts file (``.txt`` one prompt a line, ``.json`` / ``.yaml`` a list, ``.jsonl`` one item a
line; a relative path is taken from the working directory) is read when the case loads, so the resolved
``case.yaml`` of a run holds the prompts it sent.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import yaml

from perfkit.common.keys import check_keys
from perfkit.errors import BadInput

SERVER_KEYS = {"server": (list, None), "ready": (dict, None), "request": (dict, None), "output": (dict, None)}
SERVE_KEYS = {
    "prompts": ((list, str), None), "concurrency": (list, [1, 2, 4]), "requests": (int, 20),
    "server_restarts": (int, 2), "request_timeout": ((int, float), 600), "host": (str, "127.0.0.1"),
    "params": (dict, {}), "codec": (str, "libx264:crf=18:pix_fmt=yuv420p"), **SERVER_KEYS,
}
READY_KEYS = {"url": (str, "/health"), "timeout": ((int, float), 120)}
REQUEST_KEYS = {"url": (str, None), "method": (str, "POST"), "body": ((dict, list, str), None), "headers": (dict, {})}
OUTPUT_KEYS = {"kind": (str, "body"), "field": (str, None), "suffix": (str, ".mp4")}
OUTPUT_KINDS = ("body", "base64", "url", "path")
METHODS = ("GET", "POST", "PUT")
MAX_CONCURRENCY = 4096  # load threads of one level
MAX_RESTARTS = 10_000  # as a case's repeats
LOOPBACK = ("127.0.0.1", "localhost", "::1")
PER_REQUEST = ("prompt", "seed", "name")  # placeholders every prompt fills
PER_SERVER = ("host", "port")  # placeholders of the server process (its free port)
# ``{word}`` a placeholder; ``{{word}}`` the text ``{word}`` (a server's own template in its argv or env)
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}|\{(\w+)\}")
NAME = re.compile(r"[A-Za-z0-9_.-]+")


class Prompt(NamedTuple):
    """One prompt of the request set: ``name`` names its output files; ``extra`` holds more placeholders."""
    name: str
    text: str
    seed: int
    extra: dict

    def values(self) -> dict:
        return {**self.extra, "prompt": self.text, "seed": self.seed, "name": self.name}


@dataclasses.dataclass(frozen=True)
class Ready:
    """Readiness: poll ``url`` (GET, 2xx = ready) for at most ``timeout`` seconds after the start."""
    url: str
    timeout: float


@dataclasses.dataclass(frozen=True)
class RequestSpec:
    """One generation request: URL (a path on the server, or a full URL), method, body template, headers."""
    url: str
    method: str
    body: Any
    headers: dict


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """Where the output is: the response ``body``, or a JSON ``field`` (dotted; list items by index)
    holding base64 bytes, a URL to fetch or a local path; ``suffix`` names saved files when the URL or
    path has none."""
    kind: str
    field: str | None
    suffix: str


@dataclasses.dataclass(frozen=True)
class ServerSpec:
    """One variant's server: its argv (the variant's ``args`` go after it), readiness, request, output."""
    argv: tuple[str, ...]
    ready: Ready
    request: RequestSpec
    output: OutputSpec

    def as_raw(self) -> dict:
        return {"server": list(self.argv), "ready": dataclasses.asdict(self.ready),
                "request": dataclasses.asdict(self.request), "output": dataclasses.asdict(self.output)}


@dataclasses.dataclass(frozen=True)
class ServeSpec:
    """The shared part of a serve case."""
    prompts: tuple[Prompt, ...]
    concurrency: tuple[int, ...]  # levels, ascending; the first is the single-request latency level
    requests: int  # measured requests per level, after the case's `warmup` requests
    server_restarts: int  # fresh server processes per variant, interleaved like trials
    request_timeout: float  # seconds without an answer before a request counts as hung
    host: str  # the host of the server's URLs; nothing else but loopback is contacted
    params: dict  # more placeholders, the same for every request (width, height, frames ...)
    codec: str  # encoder of the quality floor (``perfkit quality --codec`` syntax; checked before any trial)

    def as_raw(self) -> dict:
        d = dataclasses.asdict(self)
        d["prompts"] = [{"name": p.name, "prompt": p.text, "seed": p.seed, **p.extra} for p in self.prompts]
        d["concurrency"] = list(self.concurrency)
        return d

    def values(self, prompt: Prompt, port: int) -> dict:
        """Every placeholder of one request."""
        return {**self.params, **prompt.values(), "host": self.host, "port": port}


def fill(template: Any, values: dict) -> Any:
    """``template`` (a string, or a list / mapping of them) with its known placeholders filled in."""
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    if not isinstance(template, str):
        return template
    whole = PLACEHOLDER.fullmatch(template)
    if whole and whole[2] in values:
        return values[whole[2]]
    return PLACEHOLDER.sub(lambda m: f"{{{m[1]}}}" if m[1] else str(values[m[2]]) if m[2] in values else m[0],
                           template)


def placeholders(template: Any) -> set[str]:
    if isinstance(template, dict):
        return set().union(*map(placeholders, template.values()))
    if isinstance(template, list):
        return set().union(*map(placeholders, template))
    return {m[2] for m in PLACEHOLDER.finditer(template) if m[2]} if isinstance(template, str) else set()


def allowed_host(hostname: str | None, host: str) -> bool:
    return hostname in (host, *LOOPBACK)


def check_placeholders(template: Any, known: set[str] | tuple[str, ...], path: str, field: str) -> None:
    unknown = placeholders(template) - set(known)
    if unknown:
        raise BadInput(f"unknown placeholder {{{sorted(unknown)[0]}}} (known: {', '.join(sorted(known))})",
                       path=path, field=field)


def _check_url(url: str, host: str, path: str, field: str) -> None:
    """A path on the server, or an http(s) URL to loopback or the case's host."""
    if url.startswith("/"):
        return
    parts = urlsplit(fill(url, {"host": host, "port": 1}))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"expected a path (/generate) or an http URL, got {url!r}", path=path, field=field)
    if not allowed_host(parts.hostname, host):
        raise BadInput(f"contacts {parts.hostname}, which is neither loopback nor serve.host ({host})", path=path,
                       field=field)


def _read_prompts(source: str, path: str) -> list:
    p = Path(source)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot read the prompts file {source}: {exc.strerror}", path=path, field="serve.prompts")
    except UnicodeDecodeError as exc:
        raise BadInput(f"prompts file {source} is not UTF-8 text (byte {exc.start})", path=path,
                       field="serve.prompts") from None
    try:
        if p.suffix == ".txt":
            return [line.strip() for line in text.splitlines() if line.strip()]
        if p.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        items = yaml.safe_load(text)  # .json is YAML too
    except (ValueError, RecursionError, yaml.YAMLError) as exc:
        raise BadInput(f"prompts file {source} is not readable ({exc})", path=path, field="serve.prompts") from None
    if not isinstance(items, list):
        raise BadInput(f"prompts file {source} must hold a list", path=path, field="serve.prompts")
    return items


def _prompts(items: list | str, base_seed: int, path: str) -> tuple[Prompt, ...]:
    """Prompts from inline items or a file: a string (seed: the case's seed plus its index) or a mapping
    with ``prompt`` and optionally ``seed``, ``name`` and more placeholders."""
    if isinstance(items, str):
        items = _read_prompts(items, path)
    if not items:
        raise BadInput("no prompts", path=path, field="serve.prompts")
    out = []
    for i, item in enumerate(items):
        field = f"serve.prompts[{i}]"
        item = {"prompt": item} if isinstance(item, str) else item
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
            raise BadInput("a prompt is a string or a mapping with a 'prompt' string", path=path, field=field)
        extra = {k: v for k, v in item.items() if k not in PER_REQUEST}
        seed, name = item.get("seed", base_seed + i), str(item.get("name", f"p{i:02d}"))
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise BadInput(f"seed must be an integer, got {seed!r}", path=path, field=field)
        if not NAME.fullmatch(name) or name in {p.name for p in out}:
            raise BadInput(f"name {name!r} must be unique and made of letters, digits, '_', '-', '.' (it names "
                           "output files)", path=path, field=field)
        if not all(isinstance(v, (str, int, float, bool)) for v in extra.values()):
            raise BadInput("extra prompt fields must be plain values", path=path, field=field)
        out.append(Prompt(name, item["prompt"], seed, extra))
    return tuple(out)


def _server(top: dict, own: dict, variant: str, known: set[str], host: str, path: str) -> ServerSpec:
    """One variant's server: its own settings (``own``) over the shared defaults (``top``), mapping by
    mapping."""
    def where(key: str) -> str:
        return f"{'variants.' + variant + '.' if own.get(key) is not None else ''}serve.{key}"

    def merged(key: str, table: dict) -> dict:
        return check_keys({**(top.get(key) or {}), **(own.get(key) or {})}, table, where(key) + ".", path)

    argv = own["server"] if own.get("server") is not None else top.get("server")  # [] is an argv, and refused
    if not argv or not all(isinstance(a, (str, int, float)) for a in argv):
        raise BadInput("the server's argv: a non-empty list of strings (never a shell string)", path=path,
                       field=where("server"))
    check_placeholders(argv, PER_SERVER, path, where("server"))
    ready, request, output = merged("ready", READY_KEYS), merged("request", REQUEST_KEYS), merged("output", OUTPUT_KEYS)
    check_placeholders(ready["url"], PER_SERVER, path, where("ready") + ".url")
    if ready["timeout"] <= 0:
        raise BadInput("must be > 0 seconds", path=path, field=where("ready") + ".timeout")
    _check_url(ready["url"], host, path, where("ready") + ".url")
    if not request["url"]:
        raise BadInput("missing (where requests go, e.g. /generate)", path=path, field=where("request") + ".url")
    _check_url(request["url"], host, path, where("request") + ".url")
    request["method"] = request["method"].upper()
    if request["method"] not in METHODS:
        raise BadInput(f"must be one of {', '.join(METHODS)}", path=path, field=where("request") + ".method")
    for part in ("url", "body", "headers"):
        check_placeholders(request[part], known, path, where("request") + f".{part}")
    if output["kind"] not in OUTPUT_KINDS:
        raise BadInput(f"must be one of {', '.join(OUTPUT_KINDS)}", path=path, field=where("output") + ".kind")
    if output["kind"] != "body" and not output["field"]:
        raise BadInput(f"output kind {output['kind']} needs the JSON field that holds it", path=path,
                       field=where("output") + ".field")
    if not re.fullmatch(r"\.\w+", output["suffix"]):
        raise BadInput(f"a file suffix such as .mp4, got {output['suffix']!r}", path=path,
                       field=where("output") + ".suffix")
    return ServerSpec(tuple(str(a) for a in argv), Ready(ready["url"], float(ready["timeout"])),
                      RequestSpec(**request), OutputSpec(**output))


def validate(top: dict, raw: dict, path: str) -> tuple[ServeSpec, dict[str, ServerSpec]]:
    """The checked ``serve`` section (``top``: the case's checked top-level fields) and each variant's
    server, by variant name."""
    s = check_keys(top["serve"], SERVE_KEYS, "serve.", path)
    if top["processes"] != 1:
        raise BadInput("a serve case starts one server process per trial (its own ranks are its business)",
                       path=path, field="processes")
    restarts = s["server_restarts"]
    if not 1 <= restarts <= MAX_RESTARTS:
        raise BadInput(f"must be in 1..{MAX_RESTARTS}", path=path, field="serve.server_restarts")
    if raw.get("repeats") and top["repeats"] != {"min": restarts, "max": restarts}:
        raise BadInput("a serve case repeats through serve.server_restarts (leave repeats out)", path=path,
                       field="repeats")
    levels = s["concurrency"]
    if not levels or not all(isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= MAX_CONCURRENCY
                             for c in levels) or len(set(levels)) != len(levels):
        raise BadInput(f"must be a list of distinct integers in 1..{MAX_CONCURRENCY}, e.g. [1, 2, 4]", path=path,
                       field="serve.concurrency")
    if s["requests"] < 1:
        raise BadInput("must be >= 1", path=path, field="serve.requests")
    if s["request_timeout"] <= 0:
        raise BadInput("must be > 0 seconds", path=path, field="serve.request_timeout")
    if s["prompts"] is None:
        raise BadInput("missing (an inline list, or a file of prompts)", path=path, field="serve.prompts")
    prompts = _prompts(s["prompts"], top["seed"], path)
    clash = set(s["params"]) & set(PER_REQUEST + PER_SERVER)
    if clash:
        raise BadInput(f"{sorted(clash)[0]!r} is filled by perfkit", path=path, field="serve.params")
    # Placeholders every request can fill: those of every prompt, the shared params, the server's.
    common = set.intersection(*(set(p.extra) for p in prompts))
    known = common | set(s["params"]) | set(PER_REQUEST) | set(PER_SERVER)
    servers = {}
    for name, body in raw["variants"].items():
        own = check_keys((body or {}).get("serve") or {}, SERVER_KEYS, f"variants.{name}.serve.", path)
        for part in ("args", "env"):  # the server's too (the case's checks gave their types)
            check_placeholders((body or {}).get(part) or [], PER_SERVER, path, f"variants.{name}.{part}")
        servers[str(name)] = _server(s, own, str(name), known, s["host"], path)
    spec = ServeSpec(prompts, tuple(sorted(levels)), s["requests"], restarts, float(s["request_timeout"]), s["host"],
                     dict(s["params"]), s["codec"])
    return spec, servers
