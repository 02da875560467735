"""The version table (devlint/analysis/versions.py): every API a fix writes exists, and a
fix is offered only where `torch-version` has what it writes."""

from __future__ import annotations

import importlib

import pytest

from devlint.analysis.versions import FIRST_RELEASE
from devlint.config import Config
from devlint.engine import lint_source


@pytest.mark.parametrize("api", sorted(FIRST_RELEASE))
def test_every_api_in_the_table_exists_in_the_installed_torch(api: str) -> None:
    pytest.importorskip("torch")
    module, _, name = api.rpartition(".")
    assert hasattr(importlib.import_module(module), name), api
    assert FIRST_RELEASE[api][1], f"{api}: no source"


SOURCE = """import torch
import torch.distributed as dist

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if torch.cuda.is_available():
    torch.cuda.synchronize()
    print(torch.cuda.memory_allocated())
dist.init_process_group("nccl")
model = torch.nn.Linear(2, 2).to(device)
"""


def _fixable(version: tuple[int, int]) -> dict[str, list[bool]]:
    config = Config(torch_version=version).with_overrides(extend_select=["DEV5"])
    found: dict[str, list[bool]] = {}
    for d in lint_source(SOURCE, "t.py", config).diagnostics:
        if d.code.startswith("DEV5"):
            found.setdefault(d.code, []).append(d.fix is not None)
    return found


def test_below_2_6_no_dev5_rewrite_is_offered() -> None:
    found = _fixable((2, 5))
    assert found and not any(any(fixes) for fixes in found.values()), found


def test_memory_statistics_wait_for_2_8() -> None:
    at_2_6, at_2_8 = _fixable((2, 6)), _fixable((2, 8))
    assert at_2_6["DEV503"] == [True, False]
    assert at_2_8["DEV503"] == [True, True]
    assert at_2_6["DEV502"] == [True] and at_2_6["DEV504"] == [True]
