"""The key of dumps equal up to naming (``renaming.renamed_key``), on real multi-process CPU dumps: one
program printed under other names, metadata and source sections keeps the key; any change to the program
or to where it receives (operands, shapes, names merged, offsets) changes it. And ``hlo-diff`` gives what
it gives when every rank is parsed, parsing a renamed rank's file not at all."""

import json
import re

import pytest
from hlo_dumps import hlo_file, rename_everything

from perfkit.errors import BadInput
from perfkit.hlo import load
from perfkit.hlo.diff import compare_ranks
from perfkit.hlo.dumps import dump_files, resolve
from perfkit.hlo.renaming import renamed_key


def key(folder, rank):
    (files,) = [f for f in dump_files(folder / f"rank{rank}") if "jit_step" in f.hlo.name]
    return renamed_key(files)


def edit(path, old, new, count=1):
    text = path.read_text()
    assert text.count(old) >= count, old
    path.write_text(text.replace(old, new, count))


def test_one_program_under_other_names_has_one_key(dumps_copy):
    folder = dumps_copy("constant")
    mapping = rename_everything(folder, 1)
    assert len(mapping) > 10 and hlo_file(folder / "rank1").read_text() != hlo_file(folder / "rank0").read_text()
    assert key(folder, 1) == key(folder, 0) == key(folder, 2)
    assert key(folder, 3) != key(folder, 0)  # the real divergence: one more slice fusion


def first_binary_op(text):
    """An instruction with two different operands, in the real dump: (its text, the operands swapped)."""
    m = re.search(r"(\w+\()%([\w.\-]+), %([\w.\-]+)\)", text)
    assert m and m.group(2) != m.group(3)
    return m.group(), f"{m.group(1)}%{m.group(3)}, %{m.group(2)})"


def swap_operands(hlo):
    old, new = first_binary_op(hlo.read_text())
    edit(hlo, old, new)


def merge_two_names(hlo):
    """One instruction's uses refer to another one: the renaming is no longer one-to-one."""
    text = hlo.read_text()
    a, b = re.findall(r"(?m)^  %([\w.\-]+) = ", text)[:2]
    hlo.write_text(re.sub(rf"%{re.escape(b)}\b(?! =)", f"%{a}", text))


@pytest.mark.parametrize("change", ["operands swapped", "names merged", "shape", "attribute", "receive offset",
                                    "total bytes", "computation name"])
def test_a_change_to_the_program_or_its_buffers_changes_the_key(dumps_copy, change):
    folder = dumps_copy("constant")
    rename_everything(folder, 1)  # the change is found under a renaming too
    hlo = hlo_file(folder / "rank1")
    stem = hlo.name.removesuffix(".txt")
    before = key(folder, 1)
    if change == "operands swapped":
        swap_operands(hlo)
    elif change == "names merged":
        merge_two_names(hlo)
    elif change == "shape":
        edit(hlo, "f32[64,128]{1,0} parameter(0)", "f32[64,129]{1,0} parameter(0)")
    elif change == "attribute":
        edit(hlo, "kind=kLoop", "kind=kInput")
    elif change == "receive offset":
        edit(hlo.with_name(stem + "-buffer-assignment.txt"), "offset=0)", "offset=64)")
    elif change == "total bytes":
        edit(hlo.with_name(stem + "-memory-usage-report.txt"), "Total bytes: ", "Total bytes: 1")
    else:  # a fusion calls another computation than the one it called
        text = hlo.read_text()
        called = re.search(r"calls=%([\w.\-]+)", text).group(1)
        other = next(n for n in re.findall(r"(?m)^%([\w.\-]+) ", text) if n != called)
        edit(hlo, f"calls=%{called}", f"calls=%{other}")
    assert key(folder, 1) != before


def test_metadata_source_sections_and_parameter_lists_are_left_out(dumps_copy):
    folder = dumps_copy("constant")
    hlo = hlo_file(folder / "rank1")
    before = key(folder, 1)
    edit(hlo, 'FileNames\n1 "', 'FileNames\n1 "/elsewhere')
    edit(hlo, "stack_frame_id=", "stack_frame_id=1", count=2)
    header = re.search(r"(?m)^%\S+ \((\w+): ", hlo.read_text())
    edit(hlo, f"({header.group(1)}: ", "(renamed_parameter: ")
    assert key(folder, 1) == before


def parsed_in(monkeypatch, folder, **options):
    """compare_ranks of ``folder`` (as JSON), and the ranks whose files were parsed."""
    parsed = []
    parse = load.load_module
    monkeypatch.setattr(load, "load_module", lambda rank, files: parsed.append(files.hlo.parent.name)
                        or parse(rank, files))
    result = json.loads(json.dumps(compare_ranks(resolve([folder])[0], **options)))
    monkeypatch.undo()
    return result, parsed


def test_a_renamed_rank_is_not_parsed_and_the_result_is_parsing_each_ranks(dumps_copy, monkeypatch):
    """Ranks 1 and 2 renamed: only rank 0's and the divergent rank 3's files are parsed. The referee: the
    same comparison with every distinct file parsed (the key made unique to each file)."""
    folder = dumps_copy("constant")
    for r in (1, 2):
        rename_everything(folder, r, tag=f"rank{r}")
    result, parsed = parsed_in(monkeypatch, folder)
    assert parsed == ["rank0", "rank3"]
    monkeypatch.setattr(load, "renamed_key", lambda files: str(files.hlo))
    each, parsed_each = parsed_in(monkeypatch, folder)
    assert parsed_each == ["rank0", "rank1", "rank2", "rank3"]
    assert result == each and result["modules"][0]["groups"] == [[0, 1, 2], [3]]
    assert result["modules"][0]["divergences"][0]["file"] == str(hlo_file(folder / "rank3"))


def test_an_unreadable_file_is_parsed_alone_and_refused(dumps_copy, monkeypatch):
    folder = dumps_copy("constant")
    bad = hlo_file(folder / "rank2")
    bad.write_bytes(b"\xff\xfe" + bad.read_bytes())
    with pytest.raises(BadInput) as refused:
        parsed_in(monkeypatch, folder)
    assert refused.value.path == str(bad) and "not a text file" in refused.value.reason
