"""Issue #15 on a whole program: examples/reach holds training scripts whose device bugs
cross function boundaries. Their safe fixes make them run on shadow CUDA, on a shadow Mac
and on the CPU with the same numbers, where the original fails on the first GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from devlint.engine import fix_source, lint_source

pytest.importorskip("torch")

from devlint.harness.verify import verify  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "reach"
PROGRAMS = sorted(p.name for p in EXAMPLES.glob("*.py"))


def test_there_are_programs() -> None:
    assert PROGRAMS


@pytest.mark.parametrize("name", PROGRAMS)
def test_fixed_program_is_fixed_on_cuda_mac_and_cpu(name: str) -> None:
    path = EXAMPLES / name
    original = path.read_text(encoding="utf-8")
    assert lint_source(original, str(path)).diagnostics, "the example should have findings"
    fixed = fix_source(original, str(path))
    assert not fixed.errors, fixed.errors
    report = verify(str(path), original, fixed.output, device="shadow")
    runs = {run.spec.name: run for run in report.runs}
    assert runs["original@shadow"].status == "error", "the original should fail on a GPU"
    for run in ("fixed@shadow", "fixed@shadow:mps", "fixed@cpu"):
        assert runs[run].status == "ok", (run, runs[run].error)
    assert report.verdict == "FIXED", [(r.spec.name, r.status, r.error, r.differences) for r in report.runs]
