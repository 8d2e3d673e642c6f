"""Case files: load, override (``--set``), validate and expand a ``case.yaml`` into a typed ``Case``.

Field names are a contract (docs/architecture.md). Every refusal is a ``BadInput`` naming
the file and the field, with the nearest valid key for a misspelt one.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import difflib
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

import yaml

from perfkit.common.keys import check_keys
from perfkit.errors import BadInput
from perfkit.rundata import placement, serve_spec

# Each known key: its type(s) and default. Nested mappings have their own tables.
MODEL_KEYS = {"name": (str, None), "config": (str, "tiny"), "steps": (int, 8), "guidance": ((int, float), None),
              "dtype": (str, "float32")}
MODEL_DTYPES = ("float32", "bfloat16", "float16", "float64")  # the bundled models' parameter and activation types
REPEATS_KEYS = {"min": (int, 3), "max": (int, 8)}
CAPTURE_KEYS = {"xla_dump": (str, "first"), "trace": (list, []), "outputs": (bool, True),
                "taps": (list, []), "tap_arrays": (str, "first")}  # taps: steps (perfkit.record.tap)
# `perfkit check` thresholds (perfkit.report.check.Thresholds); its flags override them.
CHECK_KEYS = {"ratio_tolerance": ((int, float), 0.10), "psnr_drop_db": ((int, float), 0.5),
              "min_psnr_db": ((int, float), None), "cost_tolerance": ((int, float), 0.01)}
VARIANT_KEYS = {"options": (dict, {}), "env": (dict, {}), "args": (list, []), "description": (str, ""),
                "serve": (dict, {}), "compile_cache": (str, None), "model": (dict, {})}
# The model fields a variant may set over the case's (``variants.<v>.model``): A in float32 against B in bfloat16.
VARIANT_MODEL_KEYS = {"dtype": (str, None)}
COMPILE_CACHE_MODES = ("cold", "warm")  # a fresh empty persistent cache per trial | one primed cache per variant
TOP_KEYS = {
    "name": (str, None), "description": (str, ""), "model": (dict, None), "command": (list, None),
    "devices": (int, 1), "processes": (int, 1), "steps": (int, None), "warmup": (int, 2),
    "repeats": (dict, None), "order": (str, "abba"), "seed": (int, 0), "timeout": ((int, float), 300),
    "min_effect": ((int, float), 0.02), "capture": (dict, None), "variants": (dict, None),
    "matrix": (dict, {}), "oracle": (str, None), "step_regex": (str, None), "aa": (bool, False),
    "mesh": (dict, None), "serve": (dict, None), "check": (dict, None), "placement": ((str, dict), None),
}
NESTED = {"model": MODEL_KEYS, "repeats": REPEATS_KEYS, "capture": CAPTURE_KEYS, "check": CHECK_KEYS}
MINIMUMS = {"devices": 1, "processes": 1, "warmup": 0, "seed": 0}  # integer fields with a lower bound
# Bounds that keep a mistyped number from planning a billion processes, trials or matrix cells.
MAXIMUMS = {"devices": 1 << 20, "processes": 1 << 16}
MAX_REPEATS = 10_000
MAX_COMBINATIONS = 10_000
MAX_VALUES = 100_000  # scalars, mappings and lists of a case file, aliases expanded
CASE_DIR = "{case_dir}"  # in a case's strings: the folder of its file
# libyaml's loader where built: it refuses nesting past 1000 at once (the Python one takes minutes)
_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _OnceLoader(_BASE_LOADER):
    """The safe loader refusing a mapping key given twice: YAML keeps the last silently, so ``variants: {a: {},
    a: {}}`` read as one variant. A merge (``<<: *base``) may still be overridden by the keys beside it."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=False)
                if not isinstance(key, collections.abc.Hashable):
                    continue  # the base constructor refuses it in its own words
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicated key {key!r}, first on line {seen[key] + 1}", key_node.start_mark)
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 reads a figure with an exponent but no dot or no exponent sign (1e9, 1.5e3) as a string, refused as no
# number where a key asks for one; YAML 1.2 and JSON read it as the number it plainly is, and so does a case.
_OnceLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
                                                                        r"[eE][-+]?[0-9]+$"), list("-+.0123456789"))
SAFE_LOADER = _OnceLoader
XLA_DUMP_MODES = ("all", "first", "none")
ORDERS = ("abba", "random")
AA_SUFFIX = "-aa"  # the A/A control variant is the baseline's name plus this


@dataclasses.dataclass(frozen=True)
class Variant:
    """One side of the comparison: plan options (model cases), extra argv (command cases), env."""

    name: str
    options: dict
    env: dict[str, str]
    args: list[str]
    description: str = ""
    serve: serve_spec.ServerSpec | None = None  # serve cases: this variant's server
    compile_cache: str | None = None  # cold | warm: the persistent compile caches its trials start with
    model: dict = dataclasses.field(default_factory=dict)  # model cases: fields over the case's (VARIANT_MODEL_KEYS)


@dataclasses.dataclass(frozen=True)
class Case:
    """A validated case. ``variants[0]`` is the baseline (A), ``variants[1]`` is B."""

    name: str
    description: str
    model: dict | None
    command: list[str] | None
    devices: int
    mesh: dict[str, int] | None  # named axes and sizes (product = devices), passed as PERFKIT_MESH
    processes: int
    steps: int | None
    warmup: int
    repeats: dict
    order: str
    seed: int
    timeout: float
    min_effect: float
    capture: dict
    variants: list[Variant]
    matrix: dict
    oracle: str | None
    step_regex: str | None
    aa: bool = False  # also run the baseline again, interleaved, as an A/A control (the noise floor)
    check: dict = dataclasses.field(default_factory=dict)  # `perfkit check` thresholds (CHECK_KEYS)
    serve: serve_spec.ServeSpec | None = None  # serve cases: prompts, levels, requests
    placement: dict | None = None  # each rank's chips (perfkit.rundata.placement.normalize's mapping)
    source: str = "<case>"
    raw: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def kind(self) -> str:
        return "model" if self.model is not None else "serve" if self.serve is not None else "command"

    @property
    def aa_name(self) -> str | None:
        """Name of the A/A control variant, when the case runs one."""
        return self.variants[0].name + AA_SUFFIX if self.aa else None

    def run_variants(self) -> list[Variant]:
        """The variants trials run: the case's, then the A/A control (the baseline again) if ``aa``."""
        if not self.aa:
            return list(self.variants)
        a = self.variants[0]
        return [*self.variants, dataclasses.replace(a, name=self.aa_name,
                                                    description=f"A/A control: {a.name} again")]

    def looks(self, hosts: int, only: str | None = None) -> tuple[int, int]:
        """The trials a side at the verdict's first and last look: on one host, a look after every round from
        ``repeats.min`` to ``repeats.max`` (the run stops at the first that decides it); on several, ``repeats.min``
        alone (each host runs its rounds without reading the others' trials), as with ``--only`` a variant (no B/A
        verdict for the rounds to read)."""
        first = self.repeats["min"]
        return first, self.repeats["max"] if hosts == 1 and only is None else first

    def model_of(self, variant: Variant) -> dict:
        """The model a variant's ranks build: the case's ``model`` with the variant's own fields over it."""
        return {**self.model, **variant.model}

    def variant(self, name: str) -> Variant:
        for v in self.run_variants():
            if v.name == name:
                return v
        raise KeyError(name)


def _check_mesh(top: dict, raw: dict, has_model: bool, path: str) -> None:
    """Mesh axes are positive sizes whose product is the device count (``devices`` follows the mesh
    when not given); the bundled models run on a 1-D mesh."""
    mesh = top["mesh"]
    if not mesh or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in mesh.values()):
        raise BadInput("must map axis names to sizes >= 1, e.g. {dp: 2, sp: 4}", path=path, field="mesh")
    size = math.prod(mesh.values())
    if "devices" not in raw:
        top["devices"] = size
    elif size != top["devices"]:
        raise BadInput(f"axes multiply to {size} devices, but devices is {top['devices']}", path=path, field="mesh")
    if has_model and sum(v > 1 for v in mesh.values()) > 1:
        raise BadInput("the bundled models run on a 1-D mesh (one axis larger than 1)", path=path, field="mesh")
    top["mesh"] = {str(k): v for k, v in mesh.items()}


def parse_value(text: str) -> Any:
    """A ``--set`` value, read as a case file's YAML (so ``4`` is an int, ``1e9`` a float, ``[3]`` a list, ``sp`` a
    string)."""
    try:
        return yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError:
        return text


def apply_overrides(raw: dict, overrides: list[str], path: str) -> dict:
    """``--set a.b=value`` on the raw mapping, before validation (so overrides are validated too)."""
    raw = copy.deepcopy(raw)
    for item in overrides:
        if "=" not in item:
            raise BadInput(f"--set expects key=value, got {item!r}", path=path)
        key, text = item.split("=", 1)
        node = raw
        parts = key.strip().split(".")
        variants = raw.get("variants")
        if len(parts) > 2 and parts[0] == "variants" and isinstance(variants, dict) and parts[1] not in variants:
            # a field of a variant the case lacks would add that variant, unsaid (a newcomer's typo ran 12 trials)
            near = difflib.get_close_matches(parts[1], [str(v) for v in variants], n=1)
            raise BadInput(f"no variant {parts[1]!r} in this case" + (f" (did you mean {near[0]!r}?)" if near else
                           f" (its variants: {', '.join(map(str, variants))})"), path=path, field=key.strip())
        for part in parts[:-1]:
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise BadInput(f"cannot set inside a {type(nxt).__name__}", path=path, field=key)
            node = nxt
        node[parts[-1]] = parse_value(text)
    return raw


def cases_dir() -> Path:
    """The bundled cases: ``perfkit/cases/`` in an installed wheel (setuptools maps the repository's
    ``cases/`` there), the repository's ``cases/`` in a clone or an editable install."""
    package = Path(__file__).parent.parent
    installed = package / "cases"
    return installed if installed.is_dir() else package.parent / "cases"


def load_raw(path: str | Path) -> dict:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput("no such case file", path=str(path)) from None
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror}", path=str(path)) from None
    except UnicodeDecodeError as exc:
        line = exc.object[:exc.start].count(b"\n") + 1
        raise BadInput(f"line {line}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
                       path=str(path)) from None
    try:
        raw = yaml.load(text, Loader=SAFE_LOADER)
        values = expanded_size(raw, {})
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise BadInput(f"{where}not valid YAML ({getattr(exc, 'problem', exc)})", path=str(path)) from None
    except RecursionError:
        raise BadInput("nested too deep to be a case", path=str(path)) from None
    if values > MAX_VALUES:
        raise BadInput(f"holds {values:,} values once its aliases are expanded (at most {MAX_VALUES:,}: an "
                       "alias bomb?)", path=str(path))
    if not isinstance(raw, dict):
        raise BadInput("a case file must be a YAML mapping", path=str(path))
    return _with_case_dir(raw, str(p.resolve().parent))


def _with_case_dir(node: Any, folder: str) -> Any:
    """``node`` with ``{case_dir}`` in its strings spelt as the case file's folder: a case names the programs
    beside it (a bundled case's scripts), found from whatever folder it runs in."""
    if isinstance(node, str):
        return node.replace(CASE_DIR, folder)
    if isinstance(node, list):
        return [_with_case_dir(x, folder) for x in node]
    if isinstance(node, dict):
        return {k: _with_case_dir(v, folder) for k, v in node.items()}
    return node


def expanded_size(node: Any, memo: dict[int, int | None]) -> int:
    """Values in ``node`` with every YAML alias expanded, counted once per shared object (linear time
    however far aliases multiply). An alias inside itself never ends: YAMLError."""
    if not isinstance(node, (dict, list)):
        return 1
    key = id(node)
    if key in memo:
        if memo[key] is None:
            raise yaml.YAMLError("an alias refers to a mapping or list that holds it")
        return memo[key]
    memo[key] = None
    items = [*node.keys(), *node.values()] if isinstance(node, dict) else node
    memo[key] = 1 + sum(expanded_size(x, memo) for x in items)
    return memo[key]


def validate(raw: dict, path: str = "<case>") -> Case:
    """A raw case mapping checked and typed (``Case``): its keys and kind, its figures, its capture, its variants,
    its placement and matrix, a serve case's server; BadInput naming the field at the first fault."""
    top = check_keys(raw, TOP_KEYS, "", path)
    has_model, has_command, has_serve = bool(raw.get("model")), bool(raw.get("command")), bool(raw.get("serve"))
    for key, table in NESTED.items():
        if key != "model" or has_model:
            top[key] = check_keys(top[key] or {}, table, f"{key}.", path)
    if not top["name"]:
        raise BadInput("missing (every case has a name)", path=path, field="name")
    if has_model + has_command + has_serve != 1:
        raise BadInput("a case has exactly one of 'model', 'command' and 'serve'", path=path, field="model")
    if has_model and not top["model"]["name"]:
        raise BadInput("missing (the bundled model to run, e.g. wan)", path=path, field="model.name")
    if has_command and not all(isinstance(a, (str, int, float)) for a in top["command"]):
        raise BadInput("must be a list of strings (an argv, never a shell string)", path=path, field="command")
    _check_figures(top, path)
    _check_capture(top["capture"], path)
    if top["step_regex"] is not None:
        _check_step_regex(top["step_regex"], path)
    if has_model:
        model = top["model"]
        if top["steps"] is not None:
            model["steps"] = top["steps"]
        if model["steps"] <= top["warmup"]:
            raise BadInput(f"{model['steps']} steps leave none after warmup {top['warmup']}", path=path,
                           field="model.steps")
        _check_captured_steps(top["capture"], model["steps"], top["warmup"], path)
        _check_dtype(model["dtype"], path, "model.dtype")
    variants = _variants(top, has_model, has_serve, path)
    if top["mesh"] is not None:
        _check_mesh(top, raw, has_model, path)
    if has_model and top["devices"] % top["processes"]:
        raise BadInput(f"{top['devices']} devices do not split evenly over {top['processes']} processes",
                       path=path, field="processes")
    _check_placement(top, has_model, has_serve, path)
    _check_matrix(top["matrix"], path)
    if has_serve:
        top["serve"], servers = serve_spec.validate(top, raw, path)
        top["repeats"] = {"min": top["serve"].server_restarts, "max": top["serve"].server_restarts}
        variants = [dataclasses.replace(v, serve=servers[v.name]) for v in variants]
    fields = {f.name for f in dataclasses.fields(Case)} - {"source", "raw", "variants"}
    return Case(**{k: top[k] for k in fields}, variants=variants, source=path, raw=raw)


def _check_figures(top: dict, path: str) -> None:
    """The case's counts, limits and tolerances within their ranges."""
    for key, least in MINIMUMS.items():
        if top[key] < least:
            raise BadInput(f"must be >= {least}", path=path, field=key)
    for key, most in MAXIMUMS.items():
        if top[key] > most:
            raise BadInput(f"must be <= {most}", path=path, field=key)
    if top["timeout"] <= 0:
        raise BadInput("must be > 0 seconds", path=path, field="timeout")
    if not 0 <= top["min_effect"] < 1:
        raise BadInput("must be a fraction in [0, 1), e.g. 0.02", path=path, field="min_effect")
    for key in ("ratio_tolerance", "psnr_drop_db", "cost_tolerance"):
        if not top["check"][key] >= 0 or math.isinf(top["check"][key]):  # (.nan is no number; .inf passes all)
            raise BadInput("must be a finite number >= 0", path=path, field=f"check.{key}")
    if top["check"]["min_psnr_db"] is not None and not math.isfinite(top["check"]["min_psnr_db"]):
        raise BadInput("must be a finite number (dB)", path=path, field="check.min_psnr_db")
    if top["order"] not in ORDERS:
        raise BadInput(f"must be one of {', '.join(ORDERS)}", path=path, field="order")
    rep = top["repeats"]
    if rep["min"] < 1 or rep["max"] < rep["min"] or rep["max"] > MAX_REPEATS:
        raise BadInput(f"need 1 <= min <= max <= {MAX_REPEATS}; got min {rep['min']}, max {rep['max']}", path=path,
                       field="repeats")


def _check_capture(cap: dict, path: str) -> None:
    if cap["xla_dump"] not in XLA_DUMP_MODES:
        raise BadInput(f"must be one of {', '.join(XLA_DUMP_MODES)}", path=path, field="capture.xla_dump")
    for key in ("trace", "taps"):
        if not all(isinstance(s, int) and s >= 0 for s in cap[key]):
            raise BadInput("must be a list of step indices", path=path, field=f"capture.{key}")
    if cap["tap_arrays"] not in XLA_DUMP_MODES:  # the same trials as xla_dump: all, first (round 0), none
        raise BadInput(f"must be one of {', '.join(XLA_DUMP_MODES)}", path=path, field="capture.tap_arrays")


def _check_captured_steps(cap: dict, steps: int, warmup: int, path: str) -> None:
    """A model case's traced and tapped steps within its ``steps`` (else no trial captures them, found only once the
    run is over), and a step after warmup left untraced: a traced step is never timed (``metrics.is_timed``), so
    with none left every trial ends with no timed step and the run with no verdict."""
    for key, verb in (("trace", "trace"), ("taps", "tap")):
        past = [s for s in cap[key] if s >= steps]
        if past:
            raise BadInput(f"step {max(past)} is past model.steps {steps} (steps 0 to {steps - 1}): no trial would "
                           f"{verb} it", path=path, field=f"capture.{key}")
    traced = sorted(set(cap["trace"]))
    if set(range(warmup, steps)) <= set(traced):
        raise BadInput(f"no timed step left: steps {steps}, warmup {warmup}, traced step{'s' * (len(traced) > 1)} "
                       f"{', '.join(map(str, traced))} (a traced step is never timed: trace fewer steps, or run more)",
                       path=path, field="capture.trace")


def _check_step_regex(pattern: str, path: str) -> None:
    try:
        groups = re.compile(pattern).groups
    except re.error as exc:
        raise BadInput(f"not a valid regular expression ({exc})", path=path, field="step_regex") from None
    if not groups:
        raise BadInput("needs a group that captures the step time in ms", path=path, field="step_regex")


def _check_dtype(dtype: str, path: str, field: str) -> None:
    if dtype not in MODEL_DTYPES:  # else every trial crashes on it, after the case was taken
        raise BadInput(f"{dtype!r} is not one of {', '.join(MODEL_DTYPES)}", path=path, field=field)


def _variants(top: dict, has_model: bool, has_serve: bool, path: str) -> list[Variant]:
    """The case's variants, each checked, the baseline first."""
    variants_raw = top["variants"]
    if not variants_raw or len(variants_raw) < 2:
        raise BadInput("need at least two variants (the first is the baseline A)", path=path, field="variants")
    variants = []
    for name, body in variants_raw.items():
        if body is not None and not isinstance(body, dict):
            raise BadInput(f"must be a mapping (options, env, args), got {type(body).__name__}", path=path,
                           field=f"variants.{name}")
        body = check_keys(body or {}, VARIANT_KEYS, f"variants.{name}.", path)
        if body["serve"] and not has_serve:
            raise BadInput("only a serve case has per-variant server settings", path=path,
                           field=f"variants.{name}.serve")
        if body["compile_cache"] not in (None, *COMPILE_CACHE_MODES):
            raise BadInput(f"must be one of {', '.join(COMPILE_CACHE_MODES)}", path=path,
                           field=f"variants.{name}.compile_cache")
        if body["model"] and not has_model:
            raise BadInput("only a model case has per-variant model fields", path=path, field=f"variants.{name}.model")
        model = {k: v for k, v in check_keys(body["model"], VARIANT_MODEL_KEYS, f"variants.{name}.model.",
                                             path).items() if v is not None}
        if "dtype" in model:
            _check_dtype(model["dtype"], path, f"variants.{name}.model.dtype")
        env = {str(k): str(v) for k, v in body["env"].items()}
        variants.append(Variant(str(name), dict(body["options"]), env, [str(a) for a in body["args"]],
                                body["description"], compile_cache=body["compile_cache"], model=model))
    if top["aa"] and f"{next(iter(variants_raw))}{AA_SUFFIX}" in variants_raw:
        raise BadInput(f"a variant is already named like the A/A control ('{AA_SUFFIX}' suffix)", path=path,
                       field="aa")
    return variants


def _check_placement(top: dict, has_model: bool, has_serve: bool, path: str) -> None:
    """``placement`` normalized in place, and checked against the case's processes and devices."""
    top["placement"] = placement.normalize(top["placement"], path)
    if has_serve and top["placement"]:
        raise BadInput("a serve case's server process holds the chips itself", path=path, field="placement")
    per_process = (top["placement"] or {}).get("per_process")
    if has_model and per_process is not None and per_process * top["processes"] != top["devices"]:
        raise BadInput(f"{top['processes']} processes x {per_process} chips are not the case's {top['devices']} "
                       "devices", path=path, field="placement.per_process")


def _keys_ordered(value: Any) -> Any:
    """``value`` with each mapping's keys in one order, by their text: YAML's keys may be of several types
    (``{1: a, K: b}``), which ``sorted`` cannot order."""
    if isinstance(value, dict):
        return {str(k): _keys_ordered(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list):
        return [_keys_ordered(v) for v in value]
    return value


def _check_matrix(matrix: dict, path: str) -> None:
    for key, values in matrix.items():
        if not isinstance(values, list) or not values:
            raise BadInput("a matrix entry is a non-empty list of values", path=path, field=f"matrix.{key}")
    if math.prod(len(v) for v in matrix.values()) > MAX_COMBINATIONS:
        raise BadInput(f"more than {MAX_COMBINATIONS} combinations", path=path, field="matrix")
    for key, values in matrix.items():
        # two equal values would run one combination twice, under one name (values may be lists or mappings, a
        # mapping's keys in any order); two that read alike ('1' and 1) share the name, and where the field is text
        # (env), the setting too
        equal: dict[str, int] = {}
        named: dict[str, int] = {}
        for i, v in enumerate(values):
            if equal.setdefault(f"{type(v).__name__}:{json.dumps(_keys_ordered(v), default=str)}", i) != i:
                raise BadInput(f"{v} is given twice", path=path, field=f"matrix.{key}")
            if (first := named.setdefault(f"{v}", i)) != i:
                raise BadInput(f"{values[first]!r} and {v!r} both read {v} in a combination's name", path=path,
                               field=f"matrix.{key}")


def load(path: str | Path, overrides: list[str] | None = None) -> Case:
    """Load, override and validate a case file, every matrix combination included."""
    raw = load_raw(path)
    try:
        case = validate(apply_overrides(raw, overrides or [], str(path)), str(path))
    except BadInput as exc:  # a value or key given on the command line: named as the user wrote it
        given = next((o for o in overrides or [] if exc.field and o.split("=", 1)[0].strip() == exc.field), None)
        if given is None:
            raise
        raise BadInput(exc.reason, path=str(path), field=f"--set {given}") from None
    expand_matrix(case)
    return case


def expand_matrix(case: Case) -> list[tuple[dict, Case]]:
    """One (assignment, case) per combination of ``matrix`` values; a single pair without a matrix."""
    if not case.matrix:
        return [({}, case)]
    keys = list(case.matrix)
    out = []
    base = {k: v for k, v in case.raw.items() if k != "matrix"}
    for combo in itertools.product(*(case.matrix[k] for k in keys)):
        assignment = dict(zip(keys, combo))
        raw = apply_overrides(base, [f"{k}={yaml.safe_dump(v, default_flow_style=True).strip()}"
                                     for k, v in assignment.items()], case.source)
        raw["name"] = f"{case.name}[{combination_label(assignment)}]"
        try:
            out.append((assignment, validate(raw, case.source)))
        except BadInput as exc:
            raise in_combination(exc, assignment) from None
    return out


def empty_matrix(case: Case) -> bool:
    """Whether the case file gives ``matrix`` with no field in it (``matrix: {}``, or its entries all commented
    out): the case runs once, as without one, which whoever wrote the key may not have meant. (The run directory's
    case.yaml leaves an empty matrix out: ``to_yaml``.)"""
    return "matrix" in case.raw and not case.matrix


def combination_label(assignment: dict) -> str:
    """A matrix combination as its cell's name and the messages about it spell it: ``key=value,...``."""
    return ",".join(f"{k}={v}" for k, v in assignment.items())


def in_combination(exc: BadInput, assignment: dict) -> BadInput:
    """``exc``, found in one matrix combination, saying which."""
    return BadInput(f"{exc.reason} (in matrix combination {combination_label(assignment)})", path=exc.path,
                    field=exc.field)


def to_yaml(case: Case) -> str:
    """The resolved case, as written into a run directory."""
    d = {f.name: getattr(case, f.name) for f in dataclasses.fields(case) if f.name not in ("raw", "source")}
    d["variants"] = {v.name: {"options": v.options, "env": v.env, "args": v.args, "description": v.description,
                              **({"serve": v.serve.as_raw()} if v.serve else {}),
                              **({"compile_cache": v.compile_cache} if v.compile_cache else {}),
                              **({"model": v.model} if v.model else {})}
                     for v in case.variants}
    if case.serve:
        d["serve"] = case.serve.as_raw()
    # (an empty matrix left out: running a run's own case again is no case that gave one)
    d = {k: v for k, v in d.items() if v is not None and not (k == "matrix" and not v)}
    return yaml.safe_dump(d, sort_keys=False)
