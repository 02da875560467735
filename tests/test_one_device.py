"""One device per file (SPEC §3), proven by running: a file that keeps its own CUDA flag
for the models gets fixes that follow the flag, so the fixed program runs on a machine
whose accelerator is not CUDA (`shadow:mps`). A fix that put the tensors on
`torch.accelerator` instead fails there, with PyTorch's own message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devlint import fix_source

pytest.importorskip("torch")

from devlint.harness.verify import verify  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "binding"
GAN = FIXTURES / "gan_flags.py"


def test_the_fixed_gan_script_runs_on_a_shadow_mac() -> None:
    original = GAN.read_text(encoding="utf-8")
    fixed = fix_source(original, path=str(GAN)).output
    assert 'device = torch.device("cuda" if cuda else "cpu")' in fixed
    report = verify(str(GAN), original, fixed, device="shadow")
    runs = {run.spec.name: run for run in report.runs}
    assert runs["fixed@shadow:mps"].status == "ok", runs["fixed@shadow:mps"].error
    assert report.verdict == "PASS", [(r.spec.name, r.status, r.error, r.differences) for r in report.runs]


def test_two_device_notions_fail_on_a_shadow_mac() -> None:
    """What the fixes wrote before: the models follow `cuda`, the tensors `torch.accelerator`.
    Fine on CUDA and on the CPU; on a Mac `cuda` is False while the accelerator is MPS."""
    original = GAN.read_text(encoding="utf-8")
    fixed = fix_source(original, path=str(GAN)).output.replace(
        'device = torch.device("cuda" if cuda else "cpu")',
        'device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")',
    )
    report = verify(str(GAN), original, fixed, device="shadow")
    runs = {run.spec.name: run for run in report.runs}
    assert runs["fixed@shadow"].status == "ok"
    assert runs["fixed@cpu"].status == "ok"
    mac = runs["fixed@shadow:mps"]
    assert mac.status == "error"
    # the first operation that meets a CPU model and an MPS tensor fails, as on a Mac
    assert "mps" in (mac.error or "") and "cpu" in (mac.error or ""), mac.error
    assert report.verdict == "FAIL"


@pytest.mark.parametrize(
    ("name", "binding", "verdict"),
    [
        # the choice named `torch.cuda.is_available` without its call: the fix adds the call,
        # and the binding the other fixes use follows that choice, not torch.accelerator
        ("uncalled_choice.py", 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', "PASS"),
        # `cuda = True`: a literal is no check to follow (it once gave "cpu" if cuda else "cuda")
        ("literal_flag.py", "device = torch.accelerator.current_accelerator()", "PASS"),
        # a user's setting compared with a literal (`if opt.device == 0:`) places the model:
        # the batch the fix moves follows it (the original fails on CUDA: the batch stays behind)
        (
            "user_flags.py",
            'device = torch.device("cuda" if opt.device == 0 and torch.cuda.is_available() else "cpu")',
            "FIXED",
        ),
        (
            "user_flags_checked.py",
            'device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")',
            "PASS",
        ),
    ],
)
def test_fixed_scripts_keep_one_device_on_a_shadow_mac(name: str, binding: str, verdict: str) -> None:
    path = FIXTURES / name
    original = path.read_text(encoding="utf-8")
    fixed = fix_source(original, path=str(path)).output
    assert binding in fixed
    report = verify(str(path), original, fixed, device="shadow")
    runs = {run.spec.name: run for run in report.runs}
    assert runs["fixed@shadow:mps"].status == "ok", runs["fixed@shadow:mps"].error
    assert report.verdict == verdict, [(r.spec.name, r.status, r.error, r.differences) for r in report.runs]
