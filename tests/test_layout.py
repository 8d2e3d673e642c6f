"""The house is one-way: no import cycle among perfkit's modules (kernels/ and models/ included), every
import placed inside a function says why in a comment (a heavy library off a fast path), so none hides a
cycle, and no package imports another that docs/architecture.md's "may import" table does not allow.
Read from the source with ast: nothing is imported. And one module starts processes and shares memory
with them: the words for it are in ``perfkit.common.workers`` alone."""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

REPO = Path(__file__).resolve().parent.parent
# Source folder -> the import name it installs as (pyproject.toml's package-dir).
ROOTS = {"perfkit": "perfkit", "kernels": "perfkit.kernels", "models": "perfkit.models"}


def module_files() -> dict[str, Path]:
    out = {}
    for folder, name in ROOTS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([name, *parts])] = path
    return out


def imported_modules(node: ast.AST, module: str, known: set[str], is_package: bool) -> list[str]:
    """The perfkit modules one import statement loads (``from pkg import mod`` names a module too)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    if node.level:  # relative: resolve against this module's package
        base = module.split(".")
        base = base[:len(base) - node.level + (1 if is_package else 0)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    hits = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in known]
    return hits + ([source] if source in known else [])


def cycles(edges: set[tuple[str, str]], nodes: list[str]) -> list[set[str]]:
    """The strongly connected components of more than one module: each is an import cycle."""
    index = {n: i for i, n in enumerate(nodes)}
    rows, cols = zip(*((index[a], index[b]) for a, b in edges)) if edges else ((), ())
    adjacency = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(nodes), len(nodes)))
    _, labels = connected_components(adjacency, directed=True, connection="strong")
    groups: dict[int, set[str]] = {}
    for node, label in zip(nodes, labels):
        groups.setdefault(label, set()).add(node)
    return [g for g in groups.values() if len(g) > 1]


def import_graph() -> tuple[list[set[str]], tuple[str, ...]]:
    """The import cycles among perfkit's modules; and each function-local import without a comment
    saying why."""
    edges, unexplained = scan()
    return cycles(edges, sorted(module_files())), unexplained


def scan() -> tuple[frozenset[tuple[str, str]], tuple[str, ...]]:
    """Every import between perfkit's modules (importer, imported); and each function-local import
    without a comment saying why."""
    return _scan(REPO, tuple(ROOTS.items()))


@functools.cache  # keyed on the tree read: three tests read this one, a planted one (its own REPO) apart
def _scan(repo: Path, roots: tuple[tuple[str, str], ...]) -> tuple[frozenset[tuple[str, str]], tuple[str, ...]]:
    files = module_files()
    known = set(files)
    edges = set()
    unexplained = []
    for module, path in files.items():
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source)
        in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                       for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = imported_modules(node, module, known, path.name == "__init__.py")
            for target in targets:
                if target != module:
                    edges.add((module, target))
            if id(node) in in_function and not _explained(lines, node):
                unexplained.append(f"{path.relative_to(REPO)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return frozenset(edges), tuple(unexplained)


_PRAGMA = re.compile(r"noqa(:\s*[A-Z]+\d+(\s*,\s*[A-Z]+\d+)*)?|type:\s*ignore(\[[^]]*\])?|pragma:.*", re.I)


def _reason(line: str) -> bool:
    """Whether a line's comment gives a reason: words beyond a linter's pragma (``# noqa: F401`` gives none)."""
    _, sep, comment = line.partition("#")
    return bool(sep) and re.search(r"[A-Za-z]{2}", _PRAGMA.sub("", comment)) is not None


def _explained(lines: list[str], node: ast.stmt) -> bool:
    """A comment giving a reason on the import's own lines, or just above the run of imports it belongs to."""
    if any(_reason(line) for line in lines[node.lineno - 1:node.end_lineno]):
        return True
    i = node.lineno - 2
    while i >= 0 and (not lines[i].strip() or lines[i].lstrip().startswith(("import ", "from "))):
        if _reason(lines[i]):
            return True
        i -= 1
    return i >= 0 and lines[i].lstrip().startswith("#") and _reason(lines[i])


def test_no_import_cycle():
    found, _ = import_graph()
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(sorted(c)) for c in found)


def test_every_import_inside_a_function_says_why():
    _, unexplained = import_graph()
    assert not unexplained, "function-local imports without a reason:\n" + "\n".join(unexplained)


@pytest.mark.parametrize("planted", ["cycle", "silent", "pragma"])
def test_the_checks_see_a_planted_defect(tmp_path, monkeypatch, planted):
    """The graph check is not vacuous: a two-module cycle, an unexplained local import, and one whose only comment
    is a linter's pragma are found."""
    pkg = tmp_path / "perfkit"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from perfkit import b\n")
    (pkg / "b.py").write_text({"cycle": "def f():\n    from perfkit import a  # planted\n",
                               "silent": "def f():\n    from perfkit import errors\n",
                               "pragma": "def f():\n    from perfkit import errors  # noqa: F401\n"}[planted])
    (pkg / "errors.py").write_text("")
    here = sys.modules[__name__]
    monkeypatch.setattr(here, "REPO", tmp_path)
    monkeypatch.setattr(here, "ROOTS", {"perfkit": "perfkit"})
    found, unexplained = import_graph()
    if planted == "cycle":
        assert found == [{"perfkit.a", "perfkit.b"}] and not unexplained
    else:
        assert not found and len(unexplained) == 1 and "from perfkit import errors" in unexplained[0]


# -- the "may import" table of docs/architecture.md, package to package

DOC = REPO / "docs" / "architecture.md"


def package_of(module: str) -> str | None:
    """The table's row a perfkit module belongs to: ``perfkit.run.runner`` -> run, ``perfkit.cli`` -> cli."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


# One entry of a "may import" cell: a package (all of it) or "pkg's `a`/`b`" (only those modules), then
# optionally "(from `x`, `y`)": only those modules of the row's package may. No other parenthesis: reasons go in
# the "what lives there" column, so a cell says nothing the check does not enforce.
ENTRY = re.compile(r"(?:(?P<owner>\w+)'s? (?P<modules>`\w+`(?:/`\w+`)*)|(?P<package>\w+))"
                   r"(?: \(from (?P<importers>`\w+`(?:, `\w+`)*)\))?")


def may_import_table(text: str) -> dict[str, dict[str, set[str] | None] | set[str] | None]:
    """Each row's package -> what it may import: ``pkg`` (all of it) or ``pkg.module`` -> the row's modules that
    may import it (None: any of them); None: everything ("everything"); {}: nothing of perfkit ("—", not even
    what every package may). "never ..." restates what is left out. Under "*" the packages the text above the
    table says every package may import, under "* but" the rows that may not. A cell this does not read is
    refused (ValueError), a parenthesis other than "(from ...)" among them."""
    section = text.split("## Inside `perfkit/`", 1)[1].split("\n## ", 1)[0]
    everyone = re.search(r"Every\s+package\s+(?:but\s+`(\w+)`\s+\([^)]*\)\s+)?may\s+import\s+([^.]+)\.", section)
    table: dict = {"*": set(re.findall(r"`(\w+)`", everyone[2])) if everyone else set(),
                   "* but": {everyone[1]} if everyone and everyone[1] else set()}
    for row in re.findall(r"^\| (`perfkit/[^|]*) \|.*\| ([^|]*) \|$", section, flags=re.M):
        folders, cell = row
        names = [Path(f).stem for f in re.findall(r"`perfkit/([^`]+)`", folders)]
        allowed: dict[str, set[str] | None] | None = None if cell.strip() == "everything" else {}
        if cell.strip() == "—":
            table["* but"] |= set(names)
        elif allowed is not None:
            # split at commas and semicolons, not at those inside "(from ...)"
            for entry in (e.strip() for e in re.split(r"[,;]\s*(?![^()]*\))", cell)):
                if entry.startswith("never "):
                    continue
                m = ENTRY.fullmatch(entry)
                if m is None:
                    raise ValueError(f"docs/architecture.md, {', '.join(names)}'s may import: {entry!r} is neither "
                                     "`pkg` nor \"pkg's `module`\", each with at most \"(from `module`, ...)\"")
                targets = ([f"{m['owner']}.{t}" for t in re.findall(r"`(\w+)`", m["modules"])] if m["owner"]
                           else [m["package"]])
                importers = set(re.findall(r"`(\w+)`", m["importers"])) if m["importers"] else None
                for target in targets:
                    allowed[target] = importers
        for name in names:
            table[name] = allowed
    return table


def against_the_table(edges: set[tuple[str, str]], table: dict) -> list[str]:
    """Each import from one package into another that the table does not allow."""
    wrong = []
    for source, target in sorted(edges):
        mine, theirs = package_of(source), package_of(target)
        if mine is None or theirs is None or mine == theirs or mine not in table:
            continue
        if theirs in table["*"] and mine not in table["* but"]:
            continue
        allowed = table[mine]
        if allowed is None:
            continue
        here = source.split(".")[2] if source.count(".") >= 2 else "__init__"  # the importing module, in its package
        module = ".".join(target.split(".")[1:3])
        rules = [allowed.get(theirs, False), allowed.get(module, False)]
        if module == theirs:  # the package, for `from perfkit.quality import media`: its module is checked on its own
            rules += [importers for key, importers in allowed.items() if key.startswith(theirs + ".")]
        if any(importers is None or (importers is not False and here in importers) for importers in rules):
            continue
        wrong.append(f"{source} imports {target}")
    return wrong


def test_packages_import_only_what_the_table_allows():
    wrong = against_the_table(scan()[0], may_import_table(DOC.read_text()))
    assert not wrong, "imports docs/architecture.md's table does not allow:\n" + "\n".join(wrong)


def test_the_table_check_sees_a_planted_import():
    """Not vacuous: the run data importing the orchestration, analysis or report importing run, report
    importing analysis (the table says never), quality importing trace, run importing a module of quality
    the table does not name, a reference kernel importing the orchestration, common importing the run data
    (below all) fail; run importing the one it names, any stage importing the run data, and the kernels' bench
    importing common pass."""
    table = may_import_table(DOC.read_text())
    assert table["rundata"] == {"common": None, "errors": None} and table["cli"] is None
    assert table["*"] == {"rundata", "errors"} and table["* but"] == {"common", "errors", "record"}
    planted = {("perfkit.rundata.case", "perfkit.run.placement"), ("perfkit.analysis.summary", "perfkit.run.runner"),
               ("perfkit.report.markdown", "perfkit.run.launch"),
               ("perfkit.report.markdown", "perfkit.analysis.summary"),
               ("perfkit.quality.compare", "perfkit.trace.events"),
               ("perfkit.run.serve_trial", "perfkit.quality.compare"),
               ("perfkit.run.serve_trial", "perfkit.quality.media"), ("perfkit.run.serve_trial", "perfkit.rundata.case"),
               ("perfkit.analysis.summary", "perfkit.rundata.rundir"), ("perfkit.report.check", "perfkit.rundata.case"),
               ("perfkit.kernels.bench", "perfkit.run.ranks"), ("perfkit.kernels.bench", "perfkit.common.xla"),
               ("perfkit.common.json_figures", "perfkit.rundata.case")}
    assert against_the_table(planted, table) == ["perfkit.analysis.summary imports perfkit.run.runner",
                                                 "perfkit.common.json_figures imports perfkit.rundata.case",
                                                 "perfkit.kernels.bench imports perfkit.run.ranks",
                                                 "perfkit.quality.compare imports perfkit.trace.events",
                                                 "perfkit.report.markdown imports perfkit.analysis.summary",
                                                 "perfkit.report.markdown imports perfkit.run.launch",
                                                 "perfkit.run.serve_trial imports perfkit.quality.compare",
                                                 "perfkit.rundata.case imports perfkit.run.placement"]


def test_the_table_check_sees_an_import_from_a_module_it_does_not_name():
    """Not vacuous: "(from ...)" limits who imports, and "—" allows nothing. run importing the bundled models or
    record outside the modules named, cost's `programs` importing the xplane reader (only `profile_chip` may), a report
    module other than `plots` importing quality, the report importing the trace analyses' `collectives`, and the
    public `record` or `errors` importing the run data or common fail; the modules named pass."""
    table = may_import_table(DOC.read_text())
    assert table["run"]["models"] == {"model_rank", "ranks"} and table["record"] == {} and table["errors"] == {}
    planted = {("perfkit.run.serve_trial", "perfkit.models.pipeline"),
               ("perfkit.run.model_rank", "perfkit.models.pipeline"), ("perfkit.run.ranks", "perfkit.models"),
               ("perfkit.run.ranks", "perfkit.record"), ("perfkit.run.model_rank", "perfkit.record"),
               ("perfkit.cost.programs", "perfkit.trace.xplane"), ("perfkit.cost.profile_chip", "perfkit.trace.xplane"),
               ("perfkit.report.markdown", "perfkit.quality.compare"),
               ("perfkit.report.plots", "perfkit.quality.compare"),
               ("perfkit.report.markdown", "perfkit.trace.collectives"), ("perfkit.record", "perfkit.rundata.metrics"),
               ("perfkit.errors", "perfkit.common.units")}
    assert against_the_table(planted, table) == ["perfkit.cost.programs imports perfkit.trace.xplane",
                                                 "perfkit.errors imports perfkit.common.units",
                                                 "perfkit.record imports perfkit.rundata.metrics",
                                                 "perfkit.report.markdown imports perfkit.quality.compare",
                                                 "perfkit.report.markdown imports perfkit.trace.collectives",
                                                 "perfkit.run.ranks imports perfkit.record",
                                                 "perfkit.run.serve_trial imports perfkit.models.pipeline"]


def test_the_table_reads_one_way():
    """A reason in parentheses, the old "models (`model_rank`, `ranks`)" or a cell of other words is refused: the
    column says only what the check enforces."""
    text = DOC.read_text()
    for old, new in [("quality's `media` (from `serve_trial`)", "quality's `media` (the serve codec's check)"),
                     ("models (from `model_rank`, `ranks`)", "models (`model_rank`, `ranks`)"),
                     ("record (from `model_rank`)", "record if need be")]:
        assert old in text
        with pytest.raises(ValueError, match="run's may import"):
            may_import_table(text.replace(old, new))


def test_the_table_names_modules_that_exist():
    """Every package, module and importing module the table names is one: a misspelt name would allow nothing,
    or let no module import what its row meant to allow."""
    files = module_files()
    missing = []
    for row, allowed in may_import_table(DOC.read_text()).items():
        if row.startswith("*") or not allowed:
            continue
        for target, importers in allowed.items():
            missing += [name for name in [f"perfkit.{target}"] + [f"perfkit.{row}.{m}" for m in importers or ()]
                        if name not in files]
    assert not missing, missing


PROCESS_WORDS = re.compile(r"fork|memfd|mmap|Pipe")  # the ways to start processes and share memory with them
WORKERS = "perfkit.common.workers"


def modules_naming_processes(files: dict[str, Path]) -> list[str]:
    """The modules whose text (code, comments, docstrings) names a fork, a memfd, a mapping or a Pipe."""
    return [module for module, path in files.items() if PROCESS_WORDS.search(path.read_text())]


def test_one_module_starts_processes_and_shares_memory():
    assert modules_naming_processes(module_files()) == [WORKERS]


def test_the_process_words_check_sees_a_second_module(tmp_path):
    """Not vacuous: a comment saying "forked" in another module, a memfd, a mapping or a Pipe there fails it."""
    files = {WORKERS: module_files()[WORKERS]}
    for i, text in enumerate(["# in the workers forked after", "os.memfd_create('x')", "import mmap",
                              "from multiprocessing import Pipe"]):
        other = tmp_path / f"m{i}.py"
        other.write_text(f"x = 1\n{text}\n")
        assert modules_naming_processes({**files, "perfkit.other": other}) == [WORKERS, "perfkit.other"], text
