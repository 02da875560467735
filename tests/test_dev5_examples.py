"""DEV5 on whole programs (issue #17): the five example programs under examples/dev5,
fixed with `--extend-select DEV5 --unsafe-fixes`, name no backend any more and compute
the same numbers on shadow CUDA, on a shadow Mac (`shadow:mps`) and on the CPU."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from devlint.config import load_config_file
from devlint.engine import fix_source

pytest.importorskip("torch")

from devlint.harness.verify import verify  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "dev5"
PROGRAMS = sorted(p.name for p in EXAMPLES.glob("*.py"))
# a backend named by an API or a literal (the file's own names, such as a `use_cuda`
# flag or a `--no-cuda` option, are the user's and stay)
_BACKEND = re.compile(r'torch\.(cuda|xpu|mps|backends\.mps)\b|"(cuda|mps|xpu|nccl)(:\d+)?"|\.cuda\(')


def _fixed(name: str) -> tuple[str, str]:
    path = EXAMPLES / name
    original = path.read_text(encoding="utf-8")
    config = load_config_file(str(EXAMPLES / "pyproject.toml"))
    result = fix_source(original, str(path), config, unsafe=True)
    assert not result.errors, result.errors
    return original, result.output


def test_there_are_five_programs() -> None:
    assert len(PROGRAMS) >= 5


@pytest.mark.parametrize("name", PROGRAMS)
def test_fixed_program_names_no_backend(name: str) -> None:
    original, fixed = _fixed(name)
    assert _BACKEND.search(original), "the example should start CUDA-only"
    code = "\n".join(line for line in fixed.splitlines() if not line.lstrip().startswith("#"))
    assert not _BACKEND.search(code), _BACKEND.search(code)


@pytest.mark.parametrize("name", PROGRAMS)
def test_fixed_program_agrees_on_cuda_mac_and_cpu(name: str) -> None:
    original, fixed = _fixed(name)
    report = verify(str(EXAMPLES / name), original, fixed, device="shadow")
    runs = {run.spec.name: run for run in report.runs}
    for run in ("fixed@shadow", "fixed@shadow:mps", "fixed@cpu"):
        assert runs[run].status == "ok", (run, runs[run].error)
    assert report.verdict == "PASS", [(r.spec.name, r.status, r.error, r.differences) for r in report.runs]
