"""Notebooks (SPEC §1 "Jupyter notebooks"): fixtures/notebooks/ and the notebook layer.

Each `<case>.ipynb` carries its expectations as the rule fixtures do: a trailing
`# expect: DEV102` on a line of a code cell marks a finding on that line of that cell.
Beside an input the fixes change lies `<case>.fixed.ipynb`, compared byte for byte.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output, new_raw_cell

from devlint.config import Config
from devlint.engine import FixResult
from devlint.notebook import (
    Notebook,
    NotebookError,
    Program,
    fix_notebook,
    lint_notebook,
    notebook_to_script,
)
from devlint.notebook_json import JsonStyle, render_source, source_spans, split_source_lines

NOTEBOOKS = Path(__file__).resolve().parent.parent / "fixtures" / "notebooks"
UNREADABLE = {"broken.ipynb", "nbformat3.ipynb"}
_EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>DEV\d{3}(?:\s*,\s*DEV\d{3})*)")


def _inputs() -> list[Path]:
    return sorted(
        p for p in NOTEBOOKS.glob("*.ipynb") if not p.name.endswith(".fixed.ipynb") and p.name not in UNREADABLE
    )


def _expected(data: bytes) -> list[tuple[int, int, str]]:
    found = []
    for number, cell in enumerate(json.loads(data)["cells"], start=1):
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for line_number, line in enumerate(split_source_lines(source), start=1):
            match = _EXPECT.search(line)
            if match and cell["cell_type"] == "code":
                found.extend((number, line_number, c.strip()) for c in match.group("codes").split(","))
    return sorted(found)


def _validate(data: bytes) -> None:
    nbformat.validate(nbformat.reads(data.decode("utf-8"), as_version=nbformat.NO_CONVERT))


# ------------------------------------------------------------------------- fixtures


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: p.name)
def test_findings_match_markers(path: Path) -> None:
    data = path.read_bytes()
    result = lint_notebook(data, str(path))
    assert not result.errors, result.errors
    actual = sorted((d.cell, d.diagnostic.line, d.diagnostic.code) for d in result.diagnostics)
    assert actual == _expected(data), [
        f"{d.location()} {d.diagnostic.code} {d.diagnostic.message}" for d in result.diagnostics
    ]


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: p.name)
def test_fixes_match_expected_notebook(path: Path) -> None:
    data = path.read_bytes()
    result = fix_notebook(data, str(path))
    assert not result.errors, result.errors
    expected_path = path.with_name(path.stem + ".fixed.ipynb")
    if not expected_path.exists():
        assert result.output == data, "a fix changed a notebook that has no .fixed.ipynb"
        return
    assert result.output == expected_path.read_bytes()
    _validate(result.output)
    again = fix_notebook(result.output, str(path))
    assert again.output == result.output, "fixing the fixed notebook changed it again"
    assert not [d for d in again.remaining if d.diagnostic.fix and d.diagnostic.fix.is_safe]


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: p.name)
def test_fix_rewrites_only_the_sources_of_changed_cells(path: Path) -> None:
    data = path.read_bytes()
    result = fix_notebook(data, str(path))
    before, after = json.loads(data), json.loads(result.output)
    changed = {change.cell - 1 for change in result.changes}
    for index, (old, new) in enumerate(zip(before["cells"], after["cells"], strict=True)):
        assert {k: v for k, v in old.items() if k != "source"} == {k: v for k, v in new.items() if k != "source"}
        assert (old["source"] != new["source"]) == (index in changed)
        assert type(old["source"]) is type(new["source"])
    assert {k: v for k, v in before.items() if k != "cells"} == {k: v for k, v in after.items() if k != "cells"}
    assert data.endswith(b"\n") == result.output.endswith(b"\n")
    assert data[:30] == result.output[:30]


def test_invalid_json_is_one_dev000_at_the_json_error() -> None:
    data = (NOTEBOOKS / "broken.ipynb").read_bytes()
    [finding] = lint_notebook(data, "broken.ipynb").diagnostics
    assert finding.cell is None and finding.diagnostic.code == "DEV000"
    assert "not valid JSON" in finding.diagnostic.message
    assert (finding.diagnostic.line, finding.location()) == (7, "broken.ipynb:7:1")
    fixed = fix_notebook(data, "broken.ipynb")
    assert fixed.output == data and not fixed.changed and [d.diagnostic.code for d in fixed.remaining] == ["DEV000"]


def test_nbformat_3_is_one_dev000_that_says_how_to_convert() -> None:
    data = (NOTEBOOKS / "nbformat3.ipynb").read_bytes()
    [finding] = lint_notebook(data, "old.ipynb").diagnostics
    assert finding.diagnostic.code == "DEV000" and finding.cell is None
    assert "nbformat 3" in finding.diagnostic.message and "nbconvert" in finding.diagnostic.message
    assert fix_notebook(data, "old.ipynb").output == data


def test_dev000_for_unreadable_notebooks_follows_the_selection() -> None:
    config = Config().with_overrides(ignore=["DEV000"])
    assert lint_notebook(b"{", "x.ipynb", config).diagnostics == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"[1, 2]", "not an object"),
        (b'{"cells": []}', "no `nbformat`"),
        (b'{"nbformat": 5, "cells": []}', "unsupported notebook format 5"),
        (b'{"nbformat": 4, "nbformat_minor": 5}', "`cells` is missing"),
        (b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": 3}]}', "`source` of cell 1"),
        (b'{"nbformat": 4, "cells": [{"source": ""}]}', "cell 1 has no `cell_type`"),
        (b'{"nbformat": 4, "cells": ["x"]}', "cell 1 is not a JSON object"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_not_a_notebook(data: bytes, message: str) -> None:
    with pytest.raises(NotebookError, match=re.escape(message)):
        Notebook.from_bytes(data)


# ------------------------------------------------------------------------- masking


def _program(*sources: str) -> Program:
    return Program.build(list(enumerate(sources)))


def _masked(source: str) -> list[str]:
    """Lines of the program that are masks (their text without devlint's marker)."""
    return [line.split("  #", 1)[0] for line in _program(source).text.splitlines() if "#__devlint__m" in line]


@pytest.mark.parametrize(
    ("line", "mask"),
    [
        ("%matplotlib inline", "pass"),
        ("%%time", "pass"),
        ("!pip install torch", "pass"),
        ("!!ls", "pass"),
        ("files = !ls *.pt", "files = ..."),
        ("a, b = !echo 1 2", "a, b = ..."),
        ("self.out = %time f()", "self.out = ..."),
        ("t = %timeit -o f()", "t = ..."),
        ("?torch.zeros", "pass"),
        ("??torch.zeros", "pass"),
        ("torch.zeros?", "pass"),
        ("torch.zeros??", "pass"),
        ("%timeit?", "pass"),
        ("/print 1 2", "pass"),
        (",print a b", "pass"),
        (";print a b", "pass"),
        ("pip install numpy", "pass"),
        ("cd ..", "pass"),
        ("    %time f()", "    pass"),
        ("\t!echo", "\tpass"),
    ],
)
def test_ipython_lines_are_masked_at_their_indentation(line: str, mask: str) -> None:
    assert _masked(line) == [mask]


@pytest.mark.parametrize(
    "source",
    [
        "x = 1 % 2",
        "ratio = (len(a)\n         % 7)",
        "s = '''\n!not a shell line\n%nor a magic\nwhy?\n'''",
        's = "text \\\n!continued string"',
        "total = a + \\\n    b",
        "x = y  # why?",
        "cd = 3",
        "time = 3",
        "pip = 1\npip += 1",
        "run(x)",
        "x != 3",
        "d = {\n  'a': 1,\n  !b\n}",
    ],
)
def test_python_is_never_masked(source: str) -> None:
    assert _program(source).text == source + ("\n" if not source.endswith("\n") else "")


def test_a_backslash_continued_magic_is_masked_on_every_line_at_its_indentation() -> None:
    source = "for f in files:\n    !echo {f} \\\n        >> seen.txt\n    print(f)"
    assert _masked(source) == ["    pass", "    pass"]
    compile(_program(source).text, "<program>", "exec")


def test_masking_keeps_lines_and_the_program_parses() -> None:
    source = "%load_ext autoreload\nimport torch\nfor i in range(2):\n    %time f(i)\n    !echo {i}\nx = !ls\nx?"
    program = _program(source)
    assert len(program.text.splitlines()) == len(source.splitlines())
    compile(program.text, "<program>", "exec")


def test_cell_magics_that_are_not_notebook_python_are_left_out() -> None:
    nb = new_notebook()
    nb.cells = [
        new_code_cell("%%bash\necho torch.zeros(1).cuda()"),
        new_code_cell("%%writefile train.py\nimport torch\nx = torch.zeros(1).cuda()"),
        new_code_cell("%%python3\nimport torch\nx = torch.zeros(1).cuda()"),
        new_code_cell("\n%%html\n<b>cuda</b>"),
        new_code_cell("%%time\nimport torch\ny = torch.zeros(1).cuda()"),
        new_code_cell("%%capture out\nz = torch.zeros(1).cuda()"),
    ]
    result = lint_notebook(nbformat.writes(nb).encode(), "nb.ipynb")
    assert [(d.cell, d.diagnostic.line, d.diagnostic.code) for d in result.diagnostics] == [
        (5, 3, "DEV102"),
        (6, 2, "DEV102"),
    ]


def test_cells_in_another_language_are_skipped() -> None:
    nb = new_notebook()
    nb.cells = [new_code_cell("import torch"), new_code_cell("x = torch.zeros(1).cuda()")]
    nb.cells[1].metadata["vscode"] = {"languageId": "r"}
    assert lint_notebook(nbformat.writes(nb).encode(), "nb.ipynb").diagnostics == []
    nb.cells[1].metadata = {}
    nb.metadata["language_info"] = {"name": "julia"}
    assert lint_notebook(nbformat.writes(nb).encode(), "nb.ipynb").diagnostics == []


# ------------------------------------------------------------------------- positions


def test_positions_count_every_cell_as_ruff_does() -> None:
    nb = new_notebook()
    nb.cells = [
        new_markdown_cell("# Title"),
        new_code_cell("import torch"),
        new_raw_cell("raw"),
        new_code_cell("\n\nx = torch.zeros(2).cuda()"),
    ]
    [finding] = lint_notebook(nbformat.writes(nb).encode(), "nb.ipynb").diagnostics
    assert finding.cell == 4 and finding.location() == "nb.ipynb:cell 4:3:5"
    as_json = finding.to_json()
    assert (as_json["cell"], as_json["line"], as_json["col"], as_json["end_line"]) == (4, 3, 5, 3)
    binding, *move = sorted(as_json["fix"]["edits"], key=lambda e: (e["cell"], e["location"]["column"]))
    # the binding goes after the import, at the end of cell 2 (which has no final line break)
    assert (binding["cell"], binding["location"]) == (2, {"row": 1, "column": 13})
    assert binding["content"].startswith("\n\ndevice = ") and not binding["content"].endswith("\n")
    # `.cuda()` -> `.to(device)` edits the attribute and the arguments, in cell 4
    assert [(e["cell"], e["location"]["row"], e["content"]) for e in move] == [(4, 3, "to"), (4, 3, "device")]


def test_the_boundary_after_a_cell_belongs_to_that_cell() -> None:
    program = _program("a = 1", "b = 2\n", "")
    lines = program.text.splitlines()
    assert lines[1].startswith("#__devlint__cell")
    assert (program.position(2, 0).cell, program.position(2, 0).line, program.position(2, 0).col) == (1, 1, 5)
    assert program.position(4, 0) == type(program.position(4, 0))(2, 2, 0)
    assert program.position(3, 4).cell == 2
    assert program.position(5, 0).cell == 3


def test_text_position_points_into_the_json_for_sarif() -> None:
    nb = new_notebook()
    nb.cells = [new_code_cell("import torch\nx = 'é'; y = torch.zeros(1).cuda()")]
    text = nbformat.writes(nb)
    notebook = Notebook.from_bytes(text.encode())
    line, col = notebook.text_position(1, 2, 9)
    assert text.splitlines()[line - 1][col:].startswith("y = torch")
    escaped = json.dumps(nb, indent=1)  # ensure_ascii: 'é' is six characters in the file
    notebook = Notebook.from_bytes(escaped.encode())
    line, col = notebook.text_position(1, 2, 9)
    assert escaped.splitlines()[line - 1][col:].startswith("y = torch")


def test_messages_name_lines_of_other_cells_by_cell() -> None:
    data = (NOTEBOOKS / "bound_device.ipynb").read_bytes()
    [mixed] = [d for d in lint_notebook(data, "nb.ipynb").diagnostics if d.diagnostic.code == "DEV201"]
    assert "cell 3, line 1: torch.FloatTensor" in mixed.diagnostic.message


# ------------------------------------------------------------------------- fixes


def _notebook(*sources: str) -> bytes:
    nb = new_notebook()
    nb.cells = [new_code_cell(s) for s in sources]
    return nbformat.writes(nb).encode()


def _sources(data: bytes) -> list[str]:
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in json.loads(data)["cells"]]


def test_a_binding_after_the_last_line_of_a_cell_goes_to_that_cell() -> None:
    fixed = fix_notebook(_notebook("import torch", "x = torch.zeros(1).cuda()"), "nb.ipynb")
    first, second = _sources(fixed.output)
    assert first.startswith("import torch\n\ndevice = ") and not first.endswith("\n")
    assert second == "x = torch.zeros(1).to(device)"
    assert [c.cell for c in fixed.changes] == [1, 2]


def test_a_device_bound_in_cell_one_serves_cell_five() -> None:
    data = _notebook(
        'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
        "a = 1",
        "b = 2",
        "c = 3",
        "x = torch.zeros(1).cuda()",
    )
    fixed = fix_notebook(data, "nb.ipynb")
    assert _sources(fixed.output)[:4] == _sources(data)[:4]
    assert _sources(fixed.output)[4] == "x = torch.zeros(1).to(device)"


def test_noqa_works_per_line_in_a_cell() -> None:
    data = _notebook("import torch", "a = torch.ones(1).cuda()  # noqa: DEV102\nb = torch.ones(1).cuda()")
    assert [(d.cell, d.diagnostic.line) for d in lint_notebook(data, "nb.ipynb").diagnostics] == [(2, 2)]


def test_skip_file_anywhere_skips_the_notebook() -> None:
    data = _notebook("# devlint: skip-file\nimport torch", "a = torch.ones(1).cuda()")
    assert lint_notebook(data, "nb.ipynb").diagnostics == []


def test_magic_lines_survive_a_fix_byte_for_byte() -> None:
    magic = "!echo 'torch.zeros(1).cuda()'  \\\n  | tee log.txt\nout = %time torch.zeros(1).cuda()\n"
    data = _notebook("import torch\n" + magic + "y = torch.ones(1).cuda()")
    fixed = _sources(fix_notebook(data, "nb.ipynb").output)[0]
    assert magic in fixed and fixed.endswith("y = torch.ones(1).to(device)")


def test_the_diff_is_one_per_changed_cell() -> None:
    fixed = fix_notebook(_notebook("import torch", "n = 1", "x = torch.zeros(1).cuda()"), "nb.ipynb")
    diff = fixed.diff("nb.ipynb")
    assert "--- nb.ipynb:cell 1\n+++ nb.ipynb:cell 1\n" in diff
    assert "--- nb.ipynb:cell 3\n" in diff and "cell 2" not in diff
    assert "-x = torch.zeros(1).cuda()\n+x = torch.zeros(1).to(device)\n" in diff


def test_a_fix_that_breaks_a_cell_boundary_leaves_the_notebook_unchanged(monkeypatch) -> None:
    import devlint.engine

    def merging_fix(text, path, config, unsafe=False):
        return FixResult(text, re.sub(r"#__devlint__cell\d+\n", "", text))

    monkeypatch.setattr(devlint.engine, "fix_source", merging_fix)
    data = _notebook("import torch", "x = torch.zeros(1).cuda()")
    fixed = fix_notebook(data, "nb.ipynb")
    assert fixed.output == data and "boundary" in str(fixed.errors[0])


def test_a_fix_that_edits_a_masked_line_leaves_the_notebook_unchanged(monkeypatch) -> None:
    import devlint.engine

    def editing_fix(text, path, config, unsafe=False):
        return FixResult(text, text.replace("pass  #", "x = 1  #"))

    monkeypatch.setattr(devlint.engine, "fix_source", editing_fix)
    data = _notebook("import torch\n%matplotlib inline", "x = torch.zeros(1).cuda()")
    fixed = fix_notebook(data, "nb.ipynb")
    assert fixed.output == data and "IPython line" in str(fixed.errors[0])


# ------------------------------------------------------------------------- writers


def _rich_notebook() -> nbformat.NotebookNode:
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [
        new_markdown_cell("# Entraînement sur GPU — 学習"),
        new_code_cell("import torch\nimport torch.nn as nn", execution_count=1),
        new_code_cell(
            "# données: «x»\nx = torch.randn(4, 3).cuda()\nprint('été', x.sum())",
            execution_count=2,
            outputs=[new_output("stream", name="stdout", text="été tensor(1.)\n")],
        ),
        new_code_cell("", execution_count=None),
        new_code_cell(
            "model = nn.Linear(3, 1).cuda()\nmodel(x)",
            execution_count=3,
            outputs=[new_output("execute_result", data={"text/plain": "tensor([[0.1]])"}, execution_count=3)],
        ),
    ]
    return nb


WRITERS = {
    "jupyter": lambda nb: nbformat.writes(nb) + "\n",
    "indent2": lambda nb: json.dumps(nb, indent=2),
    "indent4-ascii": lambda nb: json.dumps(nb, indent=4, ensure_ascii=True) + "\n",
    "compact": lambda nb: json.dumps(nb, separators=(",", ":"), ensure_ascii=False),
    "default-dumps": lambda nb: json.dumps(nb),
    "sorted-crlf": lambda nb: (
        json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False).replace("\n", "\r\n") + "\r\n"
    ),
}


def _as_lists(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    for cell in nb.cells:
        cell["source"] = split_source_lines(cell["source"])
    return nb


@pytest.mark.parametrize("shape", ["lists", "strings"])
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_fixes_keep_every_writers_style(writer: str, shape: str) -> None:
    nb = _rich_notebook()
    if shape == "lists":
        nb = _as_lists(nb)
    data = WRITERS[writer](nb).encode("utf-8")
    fixed = fix_notebook(data, "nb.ipynb")
    assert not fixed.errors
    _validate(fixed.output)
    sources = _sources(fixed.output)
    assert sources[2].endswith("x = torch.randn(4, 3).to(device)\nprint('été', x.sum())")
    # the JSON outside the edited cells' sources is byte-identical
    old_text, new_text = data.decode(), fixed.output.decode()
    old_spans, new_spans = source_spans(old_text), source_spans(new_text)
    edited = {c.cell - 1 for c in fixed.changes}
    assert edited == {1, 2, 4}
    old_pieces = _outside(old_text, [s for i, s in enumerate(old_spans) if i in edited])
    new_pieces = _outside(new_text, [s for i, s in enumerate(new_spans) if i in edited])
    assert old_pieces == new_pieces
    # the new sources are written as the file writes: Jupyter's own serialiser agrees
    if writer == "jupyter" and shape == "lists":
        assert fixed.output.decode() == nbformat.writes(nbformat.reads(fixed.output.decode(), 4)) + "\n"
    if "ascii" in writer:
        assert fixed.output.isascii()
    assert fix_notebook(fixed.output, "nb.ipynb").output == fixed.output


def _outside(text: str, spans) -> list[str]:
    pieces, position = [], 0
    for span in spans:
        pieces.append(text[position : span.start])
        position = span.end
    pieces.append(text[position:])
    return pieces


def test_an_unchanged_notebook_is_returned_as_it_was() -> None:
    data = WRITERS["indent4-ascii"](_rich_notebook()).encode()
    notebook = Notebook.from_bytes(data)
    assert notebook.with_sources({c.index: c.source for c in notebook.cells}) == data


def test_a_bom_is_kept() -> None:
    data = b"\xef\xbb\xbf" + _notebook("import torch", "x = torch.zeros(1).cuda()")
    fixed = fix_notebook(data, "nb.ipynb")
    assert fixed.output.startswith(b"\xef\xbb\xbf") and b".to(device)" in fixed.output


@pytest.mark.parametrize(
    ("original", "value", "expected"),
    [
        ('{\n "source": []\n}', "a\nb", '[\n  "a\\n",\n  "b"\n ]'),
        ('{"source": []}', "a\nb", '["a\\n", "b"]'),
        ('{"source":[]}', "a\nb", '["a\\n","b"]'),
        ('{"source":["x"]}', "x\ny", '["x\\n","y"]'),
        ('{\n    "source": [\n        "x"\n    ]\n}', "y\nx", '[\n        "y\\n",\n        "x"\n    ]'),
        ('{\n "source": ["x"]\n}', "", "[]"),
        ('{\n "source": "x"\n}', "é\n", '"é\\n"'),
        ('{\n "source": "\\u00e9"\n}', "é\nz", '"\\u00e9\\nz"'),
        ('{\n "source": [\n  "caf\\u00e9\\n",\n  "x"\n ]\n}', "café\ny", '[\n  "caf\\u00e9\\n",\n  "y"\n ]'),
    ],
)
def test_render_source_in_the_shape_of_the_old_value(original: str, value: str, expected: str) -> None:
    text = '{\n "cells": [' + original + "]\n}" if "\n" in original else '{"cells":[' + original + "]}"
    [span] = source_spans(text)
    assert span is not None
    assert render_source(text, span, value, JsonStyle.of(text)) == expected


def test_source_spans_find_every_cell_whatever_the_json_holds() -> None:
    nb = _rich_notebook()
    nb.cells[2].outputs.append(new_output("display_data", data={"image/png": "iVBOR" * 200, "text/plain": '"[{]}"\\'}))
    nb.metadata['weird "key"'] = {"cells": [], "source": "not this one"}
    for text in (json.dumps(nb, indent=1), json.dumps(nb)):
        spans = source_spans(text)
        decoded = [json.loads(text[s.start : s.end]) for s in spans]
        assert decoded == [cell["source"] for cell in json.loads(text)["cells"]]


# ------------------------------------------------------------------------- verify


def test_notebook_to_script_runs_the_code_cells_without_magics() -> None:
    data = (NOTEBOOKS / "magics.ipynb").read_bytes()
    script = notebook_to_script(data)
    compile(script, "magics.py", "exec")
    assert "!echo" not in script and "%matplotlib" not in script and "%time" not in script
    assert "files = None\n" in script and "# %% cell 4\npass\nbatch = torch.randn(4, 3).cuda()" in script
    assert "# %% cell 5" not in script  # %%bash


def test_notebook_to_script_of_a_broken_notebook_raises() -> None:
    with pytest.raises(NotebookError):
        notebook_to_script((NOTEBOOKS / "broken.ipynb").read_bytes())


def test_the_notebook_layer_does_not_load_torch_or_libcst() -> None:
    import subprocess
    import sys

    code = "import sys, devlint.notebook; print('torch' in sys.modules, 'libcst' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
