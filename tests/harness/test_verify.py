"""`devlint verify` end to end: subprocess runs, the run matrix, the table, the verdict."""

import json
import re
from pathlib import Path

from devlint.harness.cli import main
from devlint.harness.runner import printed_numbers

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "harness"

GPU_STYLE_SCRIPT = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


model = Net().cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
data = torch.randn(32, 10).cuda()
labels = (data[:, 0] > 0).long().to("cuda:0")
for epoch in range(10):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(data), labels)
    loss.backward()
    optimizer.step()
    print("epoch", epoch, loss.item())
torch.save(model.state_dict(), CHECKPOINT)
restored = Net()
restored.load_state_dict(torch.load(CHECKPOINT, map_location="cuda:0"))
restored.cuda()
accuracy = (restored(data).argmax(1) == labels).float().mean().item()
"""


def test_reference_passes_bit_for_bit_and_lands_near_the_optimum(tmp_path, capsys):
    report_path = tmp_path / "report.json"
    assert main(["--reference", "--json", str(report_path), "--device", "shadow"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("PASS")
    assert "original@cpu: AssertionError: Torch not compiled with CUDA enabled" in out
    report = json.loads(report_path.read_text())
    runs = {run["run"]: run for run in report["runs"]}
    assert set(runs) == {"original@shadow", "fixed@shadow", "fixed@shadow:mps", "fixed@cpu", "original@cpu"}
    assert all(runs[name]["max_abs_diff"] == 0 for name in ("fixed@shadow", "fixed@shadow:mps", "fixed@cpu"))
    assert runs["fixed@shadow:mps"]["counts"]["ops"].get("mps:0", 0) > 0
    assert runs["original@cpu"]["status"] == "error"
    assert {code.split()[0] for code in report["fixes_applied"]} >= {"DEV101", "DEV102", "DEV104"}
    result = re.search(r"Result: y = (\S+) \+ (\S+) x \+ (\S+) x\^2 \+ (\S+) x\^3", runs["fixed@cpu"]["stdout_tail"])
    a, b, c, d = map(float, result.groups())
    assert abs(b - 0.857) < 0.03 and abs(d + 0.0933) < 0.005
    final_loss = float(runs["fixed@cpu"]["stdout_tail"].splitlines()[-2].split()[1])
    assert 9 <= final_loss <= 13
    assert runs["original@shadow"]["counts"]["syncs"] >= 2000  # one .item() a step


def test_a_wrong_fixed_program_fails_and_shows_the_differences(capsys):
    wrong = FIXTURES / "small_polyfit_wrong_fix.py"
    code = main([str(FIXTURES / "small_polyfit.py"), "--fixed", str(wrong), "--device", "shadow"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL" in out and "fixed@shadow computed something else than original@shadow" in out
    assert "fixed@shadow: printed numbers:" in out and "instead of" in out
    assert "fixed@shadow: `a`:" in out


def test_a_gpu_style_training_script_with_a_checkpoint_is_fixed_and_passes(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(f"CHECKPOINT = {str(tmp_path / 'model.pt')!r}\n" + GPU_STYLE_SCRIPT)
    assert main([str(script)]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "fixes applied: DEV102" in out and "DEV101" in out


def test_usage_errors_exit_2(capsys):
    assert main([]) == 2
    assert main(["x.py", "--reference"]) == 2
    assert main(["--device", "tpu", "x.py"]) == 2
    assert main(["does-not-exist.py"]) == 2


def test_printed_numbers_ignore_devices_and_dtypes():
    assert printed_numbers("tensor([1.5, -2.0], device='cuda:0', dtype=torch.float64) on cuda:1") == [1.5, -2.0]
    assert printed_numbers("99 12.5 1e-06 nan")[:3] == [99.0, 12.5, 1e-06]
    assert printed_numbers("tensor(3., grad_fn=<AddBackward0>)") == [3.0]


def test_a_fixed_run_that_raised_alongside_the_others_is_judged_by_its_run_alone(monkeypatch, capsys):
    from devlint.harness import verify as verify_module

    real_run_program = verify_module.run_program
    calls = []

    def meets_another_run_once(spec, *args, **kwargs):
        calls.append(spec.name)
        result = real_run_program(spec, *args, **kwargs)
        if spec.name == "fixed@cpu" and calls.count("fixed@cpu") == 1:
            result.status, result.error = "error", "EOFError: Ran out of input"
        return result

    monkeypatch.setattr(verify_module, "run_program", meets_another_run_once)
    monkeypatch.setattr(verify_module.os, "cpu_count", lambda: 2)
    assert main([str(FIXTURES / "small_polyfit.py"), "--device", "shadow"]) == 0
    out = capsys.readouterr().out
    assert calls.count("fixed@cpu") == 2 and calls.count("fixed@shadow") == 1
    assert "fixed@cpu: failed while the other runs ran (EOFError: Ran out of input)" in out
    assert out.rstrip().endswith("PASS")


def test_a_fixed_run_that_fails_alone_too_still_fails(monkeypatch, capsys):
    from devlint.harness import verify as verify_module

    real_run_program = verify_module.run_program

    def always_fails_on_the_cpu(spec, *args, **kwargs):
        result = real_run_program(spec, *args, **kwargs)
        if spec.name == "fixed@cpu":
            result.status, result.error = "error", "RuntimeError: broken"
        return result

    monkeypatch.setattr(verify_module, "run_program", always_fails_on_the_cpu)
    monkeypatch.setattr(verify_module.os, "cpu_count", lambda: 2)
    assert main([str(FIXTURES / "small_polyfit.py")]) == 1
    out = capsys.readouterr().out
    assert "FAIL: fixed@cpu failed: RuntimeError: broken" in out
    assert "failed while the other runs ran" not in out
