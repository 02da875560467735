"""Bad input gets a clear message and loses nothing; fixes never break a file."""

from __future__ import annotations

import difflib
import os
import random

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devlint.engine import fix_source, lint_source
from tests.test_cli import write

SNIPPET = "import torch\nx = torch.zeros(3).cuda()\n"


def test_nul_bytes_are_a_finding(tmp_path, run):
    path = write(tmp_path, "nul.py", b"import torch\x00\nx = 1\n")
    result = run("devlint", str(path), check=1)
    assert "DEV000" in result.stdout and "NUL" in result.stdout
    assert run("devlint", "--fix", str(path)).returncode == 1
    assert path.read_bytes() == b"import torch\x00\nx = 1\n"


def test_undecodable_bytes_are_a_finding(tmp_path, run):
    path = write(tmp_path, "bad.py", b"import torch\ns = '\xe9\xff'\n")
    result = run("devlint", str(path), check=1)
    assert "DEV000" in result.stdout and "utf-8" in result.stdout


def test_empty_file_and_whitespace_only(tmp_path, run):
    write(tmp_path, "empty.py", "")
    write(tmp_path, "blank.py", "\n\n   \n")
    run("devlint", str(tmp_path), check=0)


def test_a_directory_named_like_a_file_and_a_symlink_loop(tmp_path, run):
    write(tmp_path, "x.py/inner.py", SNIPPET)
    os.symlink(tmp_path, tmp_path / "x.py" / "loop")
    result = run("devlint", str(tmp_path / "x.py"), check=1)
    assert result.stdout.count("DEV102") == 1


@pytest.mark.slow
def test_five_megabyte_file(tmp_path, run):
    data = "DATA = [\n" + "".join(f"    {i}.5, {i}.25, {i}.125, {i}.0625,\n" for i in range(110000)) + "]\n"
    path = write(tmp_path, "big.py", "import torch\nx = torch.zeros(3).cuda()\n" + data)
    assert path.stat().st_size > 5_000_000
    result = run("devlint", "--fix", str(path), check=0)
    assert "1 fixed, 0 remaining" in result.stdout
    assert path.read_text().endswith("    109999.5, 109999.25, 109999.125, 109999.0625,\n]\n")


def test_many_findings_in_one_file():
    from devlint.engine import lint_source

    body = "".join(f"def f{i}(x):\n    return x.cuda() + {i}\n" for i in range(2000))
    result = lint_source("import torch\n" + body, "many.py")
    assert len(result.diagnostics) == 2000 and result.diagnostics[-1].line == 4001


def test_fixed_file_keeps_missing_trailing_newline(tmp_path, run):
    path = write(tmp_path, "a.py", SNIPPET.rstrip("\n"))
    run("devlint", "--fix", str(path))
    assert path.read_text().endswith("torch.zeros(3).to(device)")


# -- properties ----------------------------------------------------------------------

hypothesmith = pytest.importorskip("hypothesmith")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(hypothesmith.from_grammar())
def test_engine_never_raises_on_valid_python(source: str) -> None:
    text = "import torch\n" + source
    try:
        cst.parse_module(text)
    except Exception:
        return  # hypothesmith can produce code libcst rejects; the engine reports DEV000 then
    result = lint_source(text, "gen.py")
    assert not result.errors, result.errors
    fixed = fix_source(text, "gen.py")
    assert not fixed.errors, fixed.errors
    cst.parse_module(fixed.output)


_LINES = [
    "x = torch.zeros(3).cuda()",
    "y = torch.ones(2, device='cuda')",
    "device = torch.device('cuda:0')",
    "w = torch.FloatTensor([1.0, 2.0])",
    "v = torch.cuda.LongTensor(3, 4)",
    "m = model.cuda(non_blocking=True)",
    "z = x.to('cuda').cuda()",
    "s = torch.cuda.amp.GradScaler()",
    "torch.cuda.synchronize()",
    "t = x.type(torch.cuda.FloatTensor)",
    "ok = torch.zeros(3)",
    "if torch.cuda.is_available():\n    g = torch.ones(1, device='cuda')",
    "def f(a, device='cuda'):\n    return a.cuda()",
    "def g(a):\n    return torch.zeros(3, device='mps') + a",
    "class M:\n    def forward(self, x):\n        return x.cuda()",
    "with torch.cuda.amp.autocast():\n    pass",
    "# a comment with cuda in it",
]

# every header imports torch: code that names an unimported `torch` is a NameError, and
# adding `import torch` for one fix would make its other lines resolvable only then
_HEADERS = ["import torch\n", "import torch as th\nimport numpy as np\n", '"""Doc."""\nimport torch\nfrom torch import nn\n',
            "from __future__ import annotations\nimport os\nimport torch\n", "#!/usr/bin/env python\nimport torch"]  # fmt: skip


@st.composite
def programs(draw) -> str:
    header = draw(st.sampled_from(_HEADERS))
    lines = draw(st.lists(st.sampled_from(_LINES), min_size=1, max_size=8))
    if header.startswith("import torch as th"):
        lines = [line.replace("torch.", "th.") for line in lines]
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    trailing = draw(st.booleans())
    text = (
        header + ("\n" if header and not header.endswith("\n") else "") + "\n".join(lines) + ("\n" if trailing else "")
    )
    return text.replace("\n", newline)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(programs())
def test_fixes_parse_are_idempotent_and_local(text: str) -> None:
    result = fix_source(text, "prog.py")
    assert not result.errors, result.errors
    cst.parse_module(result.output)
    compile(result.output, "prog.py", "exec")
    again = fix_source(result.output, "prog.py")
    assert again.output == result.output
    # every original line that changed holds a finding with a fix (later rounds of fixing
    # report positions in the partly fixed text, so compare with the original's findings)
    fixable_lines = set()
    for diagnostic in lint_source(text, "prog.py").diagnostics:
        if diagnostic.fix is not None:
            fixable_lines.update(range(diagnostic.line, diagnostic.end_line + 1))
    original = text.splitlines()
    matcher = difflib.SequenceMatcher(a=original, b=result.output.splitlines(), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            changed = [line + 1 for line in range(i1, i2)]
            assert all(line in fixable_lines for line in changed), (changed, result.output)


def test_random_programs_smoke():
    rng = random.Random(0)
    for _ in range(50):
        text = "import torch\n" + "\n".join(rng.choice(_LINES) for _ in range(6)) + "\n"
        out = fix_source(text).output
        assert fix_source(out).output == out


def test_unreadable_file_is_an_error_and_the_rest_is_checked(tmp_path, monkeypatch, capsys):
    import builtins

    from devlint import cli

    locked = write(tmp_path, "locked.py", SNIPPET)
    write(tmp_path, "open.py", SNIPPET)
    real_open = builtins.open

    def guarded_open(file, *args, **kwargs):
        if str(file) == str(locked):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    code = cli.main(["--no-cache", "--jobs", "1", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 2
    assert f"{locked}: cannot read: Permission denied" in captured.err
    assert "open.py:2:5: DEV102" in captured.out
