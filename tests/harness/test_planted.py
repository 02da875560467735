"""Each planted bug under fixtures/harness/ is caught under the shadow with PyTorch's message."""

import re
from pathlib import Path

import pytest

from devlint.harness.runner import _execute
from devlint.harness.machine import shadow_accelerator
from devlint.harness.verify import RunSpec, run_program

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "harness"
PLANTED = sorted(FIXTURES.glob("bug_*.py"))


def expectation(path: Path) -> tuple[str, int]:
    text = path.read_text()
    error = re.search(r"^# expect-error: (.+)$", text, re.M).group(1)
    devices = re.search(r"^# shadow-devices: (\d+)$", text, re.M)
    return error, int(devices.group(1)) if devices else 1


def test_every_issue_bug_is_planted():
    assert {p.stem for p in PLANTED} == {
        "bug_coefficient_on_cpu",
        "bug_zeros_added",
        "bug_linear_on_cpu",
        "bug_conv_on_cpu",
        "bug_numpy_on_device",
        "bug_two_devices",
    }


@pytest.mark.parametrize("path", PLANTED, ids=lambda p: p.stem)
def test_planted_bug_is_caught_with_pytorchs_message(path):
    expected, devices = expectation(path)
    kind, message = expected.split(": ", 1)
    with shadow_accelerator(device_count=devices), pytest.raises(Exception) as caught:
        _execute(path.read_text(), str(path), str(path))
    assert type(caught.value).__name__ == kind
    assert str(caught.value) == message


def test_a_planted_bug_fails_its_subprocess_run_with_the_message_and_line(tmp_path):
    path = FIXTURES / "bug_zeros_added.py"
    result = run_program(
        RunSpec("original", "shadow"),
        path.read_text(),
        str(path),
        seed=0,
        shadow_devices=1,
        workdir=str(tmp_path),
        timeout=120,
    )
    assert result.status == "error"
    assert result.error == expectation(path)[0]
    assert result.location == "line 9: y = torch.sin(x) + offset"
