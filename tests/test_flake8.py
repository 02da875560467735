"""The flake8 plugin, through the real flake8: same findings, same columns as the CLI."""

from __future__ import annotations

import re

from tests.test_cli import write

SOURCE = """import torch
import torch.nn as nn

device = torch.device("cuda:0")
w = torch.FloatTensor([4.0, 5.0, 6.0])
model = nn.Linear(3, 1).cuda()
x = torch.zeros(3, device="cuda")  # noqa: DEV101
print(torch.cuda.current_device())
"""

_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>DEV\d{3})")


def findings(output: str) -> list[tuple[int, int, str]]:
    return [(int(m["line"]), int(m["col"]), m["code"]) for m in map(_LINE.match, output.splitlines()) if m]


def test_flake8_matches_cli(tmp_path, run):
    path = write(tmp_path, "train.py", SOURCE)
    cli = findings(run("devlint", str(path)).stdout)
    flake8 = findings(run("flake8", "--select", "DEV", str(path)).stdout)
    assert cli == flake8
    assert [code for *_, code in cli] == ["DEV101", "DEV104", "DEV102", "DEV106"]
    assert (4, 10, "DEV101") in flake8  # 1-based in the display, 0-based from the plugin


def test_flake8_stdin_like_an_editor(tmp_path, run):
    result = run("flake8", "--select", "DEV", "--stdin-display-name", "editor/train.py", "-", stdin=SOURCE, cwd=tmp_path)
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("editor/train.py:") for line in lines)
    assert len(findings(result.stdout)) == 4


def test_flake8_dev4_is_off_by_default(tmp_path, run):
    path = write(tmp_path, "loop.py", SOURCE)
    result = run("flake8", str(path))
    assert "DEV4" not in result.stdout
    assert "DEV101" in result.stdout


def test_rules_flake8_would_discard_are_not_run(monkeypatch):
    from flake8.main.options import register_default_options
    from flake8.options.manager import OptionManager

    from devlint.flake8_plugin import Plugin

    manager = OptionManager(version="0", plugin_versions="", parents=[], formatter_names=[])
    register_default_options(manager)
    Plugin.add_options(manager)
    monkeypatch.setattr(Plugin, "_discarded", ())
    monkeypatch.setattr(Plugin, "_configs", {})
    options = manager.parse_args(["--select", "DEV1", "--ignore", "DEV102"])
    options.extended_default_ignore = manager.extended_default_ignore  # as flake8's aggregator does
    options.extended_default_select = manager.extended_default_select
    Plugin.parse_options(options)
    assert "DEV102" in Plugin._discarded and "DEV201" in Plugin._discarded and "DEV401" in Plugin._discarded
    assert "DEV101" not in Plugin._discarded
    reported = [message.split()[0] for *_, message, _ in Plugin(None, "t.py", SOURCE.splitlines(True)).run()]
    assert set(reported) == {"DEV101", "DEV104", "DEV106"}  # `# noqa` is flake8's to apply
