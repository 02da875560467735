"""The engine's promises: bytes kept, noqa, skip-file, crash isolation, atomic writes."""

from __future__ import annotations

import os

import pytest

from devlint import check_source, fix_source
from devlint.config import Config, ConfigError, parse_config
from devlint.engine import lint_source
from devlint.fix.plan import FixPlan, Replace
from devlint.rules.base import REGISTRY, Rule
from devlint.source import SourceText, write_atomic
from tests.test_cli import write


def codes(text: str, config: Config | None = None) -> list[str]:
    return [d.code for d in check_source(text, "t.py", config)]


def test_noqa_forms():
    base = "import torch\nx = torch.zeros(3).cuda()"
    assert codes(base + "\n") == ["DEV102"]
    assert codes(base + "  # noqa\n") == []
    assert codes(base + "  # noqa: DEV102\n") == []
    assert codes(base + "  # NOQA:DEV1\n") == []
    assert codes(base + "  # noqa: DEV101\n") == ["DEV102"]
    assert codes(base + "  # noqa: E501, DEV102\n") == []


def test_skip_file_and_prefilter():
    assert codes("# devlint: skip-file\nimport torch\nx = torch.zeros(3).cuda()\n") == []
    # no `torch` or `cuda` in the bytes: not even parsed, so a syntax error is not reported
    assert codes("def f(:\n") == []
    assert codes("import torch\ndef f(:\n") == ["DEV000"]


def test_crlf_bom_and_encoding_are_kept(tmp_path, run):
    text = "import torch\r\nx = torch.zeros(3).cuda()\r\n"
    path = write(tmp_path, "crlf.py", b"\xef\xbb\xbf" + text.encode())
    run("devlint", "--fix", str(path))
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert b"x = torch.zeros(3).to(device)\r\n" in data

    latin = "# -*- coding: latin-1 -*-\nimport torch\n# caf\xe9\nx = torch.zeros(3).cuda()\n"
    path = write(tmp_path, "latin.py", latin.encode("latin-1"))
    run("devlint", "--fix", str(path))
    assert path.read_bytes().decode("latin-1").count("caf\xe9") == 1
    assert "to(device)" in path.read_bytes().decode("latin-1")


def test_no_trailing_newline_and_tabs():
    text = "import torch\nif True:\n\tx = torch.zeros(3).cuda()"
    fixed = fix_source(text).output
    assert fixed.endswith("\tx = torch.zeros(3).to(device)")
    assert fix_source(fixed).output == fixed


def test_source_round_trip():
    for data in (b"x = 1\n", b"\xef\xbb\xbfx = 1\r\n", "# coding: latin-1\ns = '\xe9'\n".encode("latin-1")):
        source = SourceText.from_bytes(data)
        assert source.to_bytes() == data


class _Crashing(Rule):
    """
    ## What it does
    Crashes, for the test.
    """

    name = "crashing"

    def visit_Call(self, node):
        raise RuntimeError("boom")


class _BreaksFiles(Rule):
    """
    ## What it does
    Proposes a fix that does not parse, for the test.
    """

    name = "breaks-files"

    def visit_Call(self, node):
        self.report(node, "bad fix", FixPlan.safe(Replace(node, "(((")))


@pytest.fixture
def with_rule():
    added = []

    def add(rule_type, code):
        rule_type.code = code
        REGISTRY[code] = rule_type
        added.append(code)
        return Config(select=("DEV",))

    yield add
    for code in added:
        REGISTRY.pop(code)


def test_a_crashing_rule_is_reported_and_others_run(with_rule):
    config = with_rule(_Crashing, "DEV990")
    result = lint_source("import torch\nx = torch.zeros(3).cuda()\n", "t.py", config)
    assert [d.code for d in result.diagnostics] == ["DEV102"]
    assert len(result.errors) == 1 and result.errors[0].code == "DEV990"
    assert "boom" in str(result.errors[0]) and "t.py" in str(result.errors[0])


def test_a_fix_that_breaks_the_file_is_dropped(with_rule):
    config = with_rule(_BreaksFiles, "DEV991")
    text = "import torch\nx = torch.zeros(3).cuda()\n"
    result = fix_source(text, "t.py", config)
    assert result.output == text
    assert result.errors and "invalid code" in str(result.errors[0])


def test_atomic_write_keeps_the_original_when_rename_fails(tmp_path, monkeypatch):
    path = tmp_path / "a.py"
    path.write_text("original\n")

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_atomic(str(path), b"new\n")
    assert path.read_text() == "original\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


def test_unwritable_file_under_fix_is_reported_not_lost(tmp_path, monkeypatch):
    from devlint import cli

    original = "import torch\nx = torch.zeros(3).cuda()\n"
    path = write(tmp_path, "a.py", original)

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cli, "write_atomic", read_only)
    outcome = cli._process_path((str(path), Config(), "fix", False, None))
    assert outcome.errors and "cannot write the fixes: Permission denied" in outcome.errors[0]
    assert outcome.fixed == 0 and [d.code for d in outcome.diagnostics] == ["DEV102"]
    assert path.read_text() == original


def test_config_validation():
    config = parse_config({"select": ["DEV1"], "ignore": ["DEV106"], "torch-version": "2.4"}, root=".")
    assert config.is_enabled("DEV101") and not config.is_enabled("DEV106") and not config.is_enabled("DEV201")
    assert config.torch_version == (2, 4)
    for table in ({"torch-version": "two"}, {"device-name": "1x"}, {"select": "DEV1 x"}, {"nope": 1},
                  {"per-file-ignores": []}):  # fmt: skip
        with pytest.raises(ConfigError):
            parse_config(table, root=".")


def test_per_file_ignores(tmp_path):
    config = parse_config({"per-file-ignores": {"tests/*": ["DEV102"]}}, root=str(tmp_path))
    assert not config.is_enabled("DEV102", str(tmp_path / "tests" / "t.py"))
    assert config.is_enabled("DEV102", str(tmp_path / "src" / "t.py"))


def test_specific_select_beats_broad_ignore():
    config = Config().with_overrides(ignore=["DEV1"], extend_select=["DEV102"])
    assert config.is_enabled("DEV102") and not config.is_enabled("DEV101")


def test_dev4_is_opt_in():
    assert not Config().is_enabled("DEV401")
    assert Config().with_overrides(extend_select=["DEV4"]).is_enabled("DEV401")


def test_linter_never_imports_torch():
    import subprocess
    import sys

    code = "import sys, devlint, devlint.cli, devlint.flake8_plugin; devlint.check_source('import torch\\nx.cuda()\\n'); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_deep_nesting_does_not_crash():
    text = "import torch\nx = " + "(" * 50 + "1" + ")" * 50 + "\n" + "y = " + " + ".join(["a"] * 3000) + "\n"
    lint_source(text, "deep.py")  # must not raise


def test_a_file_that_outlasts_the_analysis_budget_says_so(monkeypatch) -> None:
    """A huge generated module must not stall CI: past its budget the device analysis
    stops, the rest stays unknown (no false findings), and the result says so."""
    from devlint.analysis import model

    monkeypatch.setattr(model, "ANALYSIS_BUDGET", -1.0)
    lines = ["import torch", "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')"]
    lines += [f"x{i} = torch.zeros(3) + torch.ones(3, device=device)" for i in range(600)]
    result = lint_source("\n".join(lines) + "\n", "huge.py")
    mixed = [d for d in result.diagnostics if d.code == "DEV201"]
    assert len(mixed) < 600  # the analysis looks at the clock every 256 statements
    assert any("device analysis stopped" in e.message for e in result.errors)
    assert not lint_source("\n".join(lines[:3]) + "\n", "small.py").errors
