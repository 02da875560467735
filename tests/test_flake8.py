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
    result = run(
        "flake8", "--select", "DEV", "--stdin-display-name", "editor/train.py", "-", stdin=SOURCE, cwd=tmp_path
    )
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
    monkeypatch.setattr(Plugin, "_resolver", None)
    options = manager.parse_args(["--select", "DEV1", "--ignore", "DEV102"])
    options.extended_default_ignore = manager.extended_default_ignore  # as flake8's aggregator does
    options.extended_default_select = manager.extended_default_select
    Plugin.parse_options(options)
    assert "DEV102" in Plugin._discarded and "DEV201" in Plugin._discarded and "DEV401" in Plugin._discarded
    assert "DEV101" not in Plugin._discarded
    reported = [message.split()[0] for *_, message, _ in Plugin(None, "t.py", SOURCE.splitlines(True)).run()]
    assert set(reported) == {"DEV101", "DEV104", "DEV106"}


NOQA_SPELLINGS = """import torch
a = x.cuda()  #noqa
b = x.cuda()  # noqa: dev102
c = x.cuda()  # NOQA:DEV1
d = x.cuda()  # noqa: dev101
e = x.cuda()
"""


def test_noqa_spellings_are_read_alike_by_cli_and_flake8(tmp_path, run):
    path = write(tmp_path, "spellings.py", NOQA_SPELLINGS)
    cli = findings(run("devlint", "--no-cache", str(path)).stdout)
    flake8 = findings(run("flake8", "--select", "DEV", str(path)).stdout)
    assert cli == flake8 == [(5, 5, "DEV102"), (6, 5, "DEV102")]


DEV4_SOURCE = """import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
for step in range(10):
    loss = torch.ones(3, device=device).sum()
    print(loss.item())
"""


def test_select_dev_does_not_opt_in_to_dev4(tmp_path, run):
    """DEV4 is opt-in: `--select DEV` (the README's example) keeps it off, as the CLI does."""
    path = write(tmp_path, "loop.py", DEV4_SOURCE)
    assert "DEV401" in run("devlint", "--no-cache", "--extend-select", "DEV4", str(path)).stdout
    assert "DEV4" not in run("devlint", "--no-cache", str(path)).stdout
    assert "DEV4" not in run("flake8", "--select", "DEV", str(path)).stdout
    assert "DEV401" in run("flake8", "--select", "DEV4", str(path)).stdout
    assert "DEV401" in run("flake8", "--extend-select", "DEV401", str(path)).stdout


def test_a_broken_configuration_fails_flake8_as_it_fails_the_cli(tmp_path, run):
    write(tmp_path, "pyproject.toml", '[tool.devlint]\nselect = ["DEV999"]\n')
    path = write(tmp_path, "train.py", SOURCE)
    cli = run("devlint", "--no-cache", str(path), cwd=tmp_path, check=2)
    assert "'DEV999' names no devlint rule" in cli.stderr
    flake8 = run("flake8", "--select", "DEV", str(path), cwd=tmp_path)
    assert flake8.returncode == 1 and "'DEV999' names no devlint rule" in flake8.stdout + flake8.stderr
    assert not findings(flake8.stdout)  # not checked with the defaults instead
