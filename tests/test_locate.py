"""Findings are placed from their innermost statement (devlint.locate) exactly where
libcst's whole-module position pass puts them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from devlint import engine
from devlint.analysis.context import FileContext
from devlint.config import Config
from devlint.locate import needed_nodes, positions_of

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CONFIG = Config().with_overrides(extend_select=["DEV4", "DEV5"])

NESTED = """\
import torch


class A:
\t# a comment, then a blank line

\t@staticmethod
\t@other(
\t\t"x")
\tdef f(device="cuda"):
\t\tif device:
\t\t\tx = torch.zeros(3).cuda()
\t\telif device == 2:
\t\t\ty = (torch.ones(2)
\t\t\t     .cuda())
\t\telse:
\t\t\tfor i in range(3):
\t\t\t\tpass
\t\t\telse:
\t\t\t\tz = torch.zeros(1, \\
\t\t\t\t\tdevice="cuda")
\t\twith torch.no_grad():
\t\t\tw = torch.ones(1).cuda(); v = torch.ones(2).cuda()
\t\ttry:
\t\t\tq = torch.ones(1).cuda()
\t\texcept Exception:
\t\t\tr = torch.ones(1).cuda()
\t\tif x: s = torch.ones(1).cuda()


async def g(dev="cuda:0"):
    while True:
        t = torch.ones(1).cuda()
        break
    return torch.device("cuda")
"""


def _compare(text: str, path: str) -> int:
    module = engine.parse_module(text)
    ctx = FileContext(module, path, CONFIG)
    reports = engine._walk(ctx, path, CONFIG, [])
    ctx.close()
    mine = positions_of(module, text, reports, ast.parse(text))
    full = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = needed_nodes(reports, module)
    for node in nodes:
        assert mine[node] == full[node], (path, type(node).__name__, mine[node], full[node])
    return len(nodes)


def test_nested_blocks_tabs_decorators_and_continuations():
    assert _compare(NESTED, "nested.py") >= 25


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("DEV[1-9]*/*.py")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture(path):
    text = path.read_text(encoding="utf-8")
    if engine.needs_parse(text):
        _compare(text, str(path))
