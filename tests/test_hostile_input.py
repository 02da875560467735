"""Hostile but possible input: nesting that crashes parsers, code deeper than Python's
default recursion limit, syntax of other Python versions. Each is a finding or is
checked; none kills the run or loses its output (issue 19, items 1, 2 and 11)."""

from __future__ import annotations

import ast
import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devlint import cli, engine
from devlint.engine import fix_source, lint_source
from tests.test_cli import write

FINDING = "x = torch.zeros(3).cuda()\n"


def _deep_parens(depth: int = 5000) -> str:
    return "import torch\ny = " + "(" * depth + "1" + ")" * depth + "\n"


def _long_sum(terms: int = 5000) -> str:
    return "import torch\ny = " + " + ".join(["a"] * terms) + "\n"


def _crashers() -> dict[str, str]:
    """Files that crash libcst's native parser (SIGSEGV) when it is given them."""
    return {"parens.py": _deep_parens(), "sum.py": _long_sum()}


def _codes(diagnostics) -> list[str]:
    return [d.code for d in diagnostics]


# -- item 1: what crashes libcst never reaches it ---------------------------------------


def test_a_file_that_crashes_libcst_is_dev000_and_the_run_goes_on(tmp_path, run):
    for name, text in _crashers().items():
        write(tmp_path, name, text)
    write(tmp_path, "train.py", "import torch\n" + FINDING)
    result = run("devlint", "--no-cache", "--jobs", "1", str(tmp_path), check=1)
    assert result.stdout.count("DEV000") == 2, result.stdout + result.stderr
    assert "parens.py:2:" in result.stdout and "too many nested parentheses" in result.stdout
    assert "sum.py:" in result.stdout and "train.py:2:5: DEV102" in result.stdout


def test_a_file_that_crashes_libcst_does_not_break_the_process_pool(tmp_path, run):
    for name, text in _crashers().items():
        write(tmp_path, name, text)
    for index in range(cli._PARALLEL_THRESHOLD):  # enough files for the pool
        write(tmp_path, f"train{index}.py", "import torch\n" + FINDING)
    result = run("devlint", "--no-cache", "--jobs", "2", str(tmp_path), check=1)
    assert "BrokenProcessPool" not in result.stderr
    assert result.stdout.count("DEV000") == 2 and result.stdout.count("DEV102") == cli._PARALLEL_THRESHOLD


def test_the_language_server_survives_a_file_that_crashes_libcst(workspace_client):
    from tests.test_lsp import open_document

    client, workspace = workspace_client
    deep = open_document(client, workspace / "deep.py", _deep_parens())
    assert [d["code"] for d in deep] == ["DEV000"]
    later = open_document(client, workspace / "train.py", "import torch\n" + FINDING)
    assert [d["code"] for d in later] == ["DEV102"]


@pytest.fixture
def workspace_client(tmp_path):
    from tests.test_lsp import start

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    client = start(tmp_path, ["utf-16"])
    yield client, tmp_path
    client.close()


# -- item 2: deeper than Python's default recursion limit --------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("y = " + "f(" * 1000 + "x.cuda()" + ")" * 1000 + "\n", id="1000-nested-calls"),
        pytest.param("y = " + "[" * 900 + "x.cuda()" + "]" * 900 + "\n", id="900-nested-lists"),
        pytest.param("y = a" + ".b" * 5000 + ".cuda()\n", id="5000-long-attribute-chain"),
    ],
)
def test_nesting_python_rejects_is_dev000_not_a_traceback(text):
    """These overflowed the recursion limit while positions were computed; Python itself
    refuses them (more than 200 brackets, or an AST too deep to build)."""
    result = lint_source("import torch\n" + text, "deep.py")
    assert _codes(result.diagnostics) == ["DEV000"] and not result.errors


@pytest.mark.parametrize(
    ("text", "findings"),
    [
        pytest.param("y = " + " + ".join(["a"] * 500) + " + x.cuda()\n", 1, id="500-term-sum"),
        pytest.param("y = a" + ".b()" * 1000 + ".cuda()\n", 1, id="1000-long-call-chain"),
        pytest.param("y = " + " if c else ".join(["a.cuda()"] * 500) + "\n", 500, id="500-branch-conditional"),
    ],
)
def test_valid_code_deeper_than_the_recursion_limit_is_checked(text, findings):
    """Valid Python that the rules used to crash on (RecursionError): now checked."""
    before = sys.getrecursionlimit()
    result = lint_source("import torch\n" + text, "deep.py")
    assert not result.errors, result.errors
    assert _codes(result.diagnostics) == ["DEV102"] * findings
    assert sys.getrecursionlimit() == before


def test_a_crash_outside_the_rules_loses_nothing_else(tmp_path, monkeypatch, capsys):
    write(tmp_path, "a_broken.py", "import torch\n" + FINDING)
    write(tmp_path, "b_fine.py", "import torch\n" + FINDING)
    real = engine._to_diagnostics

    def positions_overflow(reports, module, text, path, tree, **options):
        if path.endswith("a_broken.py"):
            raise RecursionError("maximum recursion depth exceeded")
        return real(reports, module, text, path, tree, **options)

    monkeypatch.setattr(engine, "_to_diagnostics", positions_overflow)
    code = cli.main(["--no-cache", "--jobs", "1", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 2
    assert "a_broken.py: internal error: the file is too deeply nested to check" in captured.err
    assert "b_fine.py:2:5: DEV102" in captured.out


def test_an_unexpected_engine_crash_is_an_internal_error_for_that_file(tmp_path, monkeypatch, capsys):
    write(tmp_path, "a_broken.py", "import torch\n" + FINDING)
    write(tmp_path, "b_fine.py", "import torch\n" + FINDING)
    real = engine._to_diagnostics

    def crash(reports, module, text, path, tree, **options):
        if path.endswith("a_broken.py"):
            raise KeyError("a node without a position")
        return real(reports, module, text, path, tree, **options)

    monkeypatch.setattr(engine, "_to_diagnostics", crash)
    code = cli.main(["--no-cache", "--jobs", "1", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 2 and "a_broken.py: internal error: KeyError" in captured.err
    assert "b_fine.py:2:5: DEV102" in captured.out


def test_a_rule_crash_is_an_internal_error_never_all_checks_passed(tmp_path, monkeypatch, capsys):
    from devlint.rules import all_rules

    rule = next(r for r in all_rules() if r.code == "DEV102")
    method = next(name for name in dir(rule) if name.startswith("visit_"))

    def crash(self, node):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(rule, method, crash)
    path = write(tmp_path, "train.py", "import torch\n" + FINDING)
    code = cli.main(["--no-cache", "--jobs", "1", str(path)])
    captured = capsys.readouterr()
    assert code == 2
    assert "internal error in DEV102: RecursionError" in captured.err
    assert "All checks passed!" not in captured.out


# -- item 11: the parse verdict is the same for input and fixed output ------------------


def test_newer_syntax_than_this_python_is_checked_and_fixed():
    """Fixed output is validated as input is: libcst judges syntax newer than the running
    Python (here PEP 695, Python 3.12), which used to refuse the fix as an internal error."""
    text = "import torch\n\ntype Alias = list[int]\n\n\ndef f[T](a: T) -> T:\n    return a\n\n\n" + FINDING
    assert _codes(lint_source(text, "new.py").diagnostics) == ["DEV102"]
    fixed = fix_source(text, "new.py")
    assert not fixed.errors, fixed.errors
    assert "torch.zeros(3).to(device)" in fixed.output and "type Alias = list[int]" in fixed.output


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="Python 3.14 accepts `except A, B:` (PEP 758)")
def test_python2_except_comma_is_dev000():
    text = "import torch\ntry:\n    " + FINDING + "except Exception, e:\n    pass\n"
    result = lint_source(text, "old.py")
    assert _codes(result.diagnostics) == ["DEV000"]
    assert result.diagnostics[0].line == 4
    assert fix_source(text, "old.py").output == text


def test_a_5000_line_implicit_concatenation_is_not_dev000():
    """Python accepts it; libcst's parser stops after about 3000 strings."""
    table = "TABLE = (\n" + "".join(f'    "row {i}"\n' for i in range(5000)) + ")\n"
    text = "import torch\n" + FINDING + table
    result = lint_source(text, "table.py")
    assert _codes(result.diagnostics) == ["DEV102"] and not result.errors
    fixed = fix_source(text, "table.py")
    assert not fixed.errors and fixed.output.endswith(table) and ".to(device)" in fixed.output


# -- the property: deep and long valid expressions -------------------------------------

_LEAVES = ["a", "1", "x.cuda()", "torch.zeros(3)", "'cuda'"]


@st.composite
def deep_expressions(draw) -> str:
    """Valid Python: brackets within CPython's limit of 200, chains beyond the default
    recursion limit of 1000 frames."""
    expression = draw(st.sampled_from(_LEAVES))
    for _ in range(draw(st.integers(1, 6))):
        shape = draw(st.sampled_from(["call", "list", "parens", "sum", "chain", "ifexp", "attr"]))
        if shape in ("call", "list", "parens"):
            depth = draw(st.integers(1, 30))  # 6 levels stay within 200 brackets
            opening, closing = {"call": ("f(", ")"), "list": ("[", "]"), "parens": ("(", ")")}[shape]
            expression = opening * depth + expression + closing * depth
        elif shape == "sum":
            expression = " + ".join([expression] + ["a"] * draw(st.integers(1, 400)))
        elif shape == "chain":
            expression = "(" + expression + ")" + ".b()" * draw(st.integers(1, 150))
        elif shape == "ifexp":
            expression = " if c else ".join([expression] + ["a"] * draw(st.integers(1, 300)))
        else:
            expression = "(" + expression + ")" + ".b" * draw(st.integers(1, 150))
    return expression


def _python_accepts(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, RecursionError, MemoryError):
        return False
    return True


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(deep_expressions())
def test_deep_and_long_expressions_never_crash_or_lose_output(tmp_path_factory, expression: str) -> None:
    text = f"import torch\ny = {expression}\n"
    folder = tmp_path_factory.mktemp("deep")
    write(folder, "deep.py", text)
    write(folder, "plain.py", "import torch\n" + FINDING)
    report = folder / "report.json"
    code = cli.main(["--no-cache", "--jobs", "1", "--output-format", "json", "--output-file", str(report), str(folder)])
    assert code == 1  # plain.py's finding, and no internal error
    found = json.loads(report.read_text())
    assert {"path": str(folder / "plain.py"), "code": "DEV102"} in [
        {"path": f["path"], "code": f["code"]} for f in found
    ]
    deep = [f["code"] for f in found if f["path"].endswith("deep.py")]
    # DEV000 exactly when Python itself refuses the file
    assert ("DEV000" in deep) == (not _python_accepts(text)), deep
    if "x.cuda()" in expression and "DEV000" not in deep:
        assert "DEV102" in deep, deep
