"""Placement end to end (DEV3): programs written for CUDA, fixed, run on this machine.

Every program runs in its own subprocess with the venv's python and no accelerator.
The checks that need CUDA's device rules run under the shadow accelerator
(`devlint.harness`), which raises PyTorch's own errors where a GPU would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devlint import check_source

torch = pytest.importorskip("torch")
if torch.cuda.is_available():
    pytest.skip("these checks are about a machine without CUDA", allow_module_level=True)

# A training script written on and for a CUDA machine: the model, the batches and the
# checkpoint it resumes from are all on "cuda".
CUDA_SCRIPT = """\
import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


features = torch.randn(48, 4)
labels = torch.randint(0, 3, (48,))
loader = DataLoader(TensorDataset(features, labels), batch_size=16)

model = Net().cuda()
model.load_state_dict(torch.load(sys.argv[1]))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
criterion = nn.CrossEntropyLoss()

for epoch in range(3):
    total = 0.0
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch}: loss {total / len(loader):.6f}")

model.eval()
correct = 0
with torch.no_grad():
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        correct += (model(x).argmax(1) == y).sum().item()
print("accuracy", correct / len(features))
print("first weight", model.hidden.weight[0, 0].item())
"""

# The same script as one would write it by hand for the CPU.
CPU_SCRIPT = (
    CUDA_SCRIPT.replace("Net().cuda()", "Net()")
    .replace("        x, y = x.cuda(), y.cuda()\n", "")
    .replace("torch.load(sys.argv[1])", 'torch.load(sys.argv[1], map_location="cpu")')
)

# The checkpoint, saved from the GPU: its tensors say "cuda:0".
SAVE_ON_CUDA = """
import sys, torch
from devlint.harness import shadow_accelerator
torch.manual_seed(1)
with shadow_accelerator():
    net = torch.nn.ModuleDict({"hidden": torch.nn.Linear(4, 8), "out": torch.nn.Linear(8, 3)}).cuda()
    torch.save(net.state_dict(), sys.argv[1])
try:
    torch.load(sys.argv[1])
except RuntimeError as error:
    print(error)
"""

# The article's story: a network built and never moved, called with a moved sample.
STORY = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 10)

    def forward(self, x):
        return torch.tanh(self.fc(x))


torch.manual_seed(0)
network = Net()
sample = torch.randn(1, 10)
pred = network(sample.to("cuda"))
print([round(v, 6) for v in pred[0].tolist()])
"""

# A loop that moves the model but not the batches (DEV302), dict batches included.
BATCHES = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
rows = [{"x": torch.randn(4), "y": torch.tensor(1.0)} for _ in range(8)]
loader = DataLoader(rows, batch_size=4)
model = nn.Linear(4, 1).to(device)
with torch.no_grad():
    for batch in loader:
        error = (model(batch["x"]).squeeze(1) - batch["y"]).abs().mean()
        print(round(error.item(), 6))
"""

UNDER_SHADOW = """
import runpy, sys
from devlint.harness import shadow_accelerator
with shadow_accelerator():
    runpy.run_path(sys.argv[1], run_name="__main__")
"""


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def _fix(script: Path) -> None:
    result = _run("-m", "devlint", "--fix", str(script), cwd=script.parent)
    assert "internal error" not in result.stderr, result.stderr


def test_cuda_training_script_runs_on_the_cpu_after_fix(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint.pt"
    saved = _run("-c", SAVE_ON_CUDA, str(checkpoint), cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    assert "CUDA" in saved.stdout, "the checkpoint must say it was saved from the GPU"

    script = tmp_path / "train.py"
    script.write_text(CUDA_SCRIPT)
    codes = sorted(d.code for d in check_source(CUDA_SCRIPT, str(script)))
    assert codes == ["DEV102"] * 5 + ["DEV303"], codes
    original = _run(str(script), str(checkpoint), cwd=tmp_path)
    assert original.returncode != 0, "the original script needs CUDA"

    _fix(script)
    fixed_text = script.read_text()
    assert ".cuda()" not in fixed_text and 'map_location="cpu"' in fixed_text
    fixed = _run(str(script), str(checkpoint), cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr

    by_hand = tmp_path / "train_cpu.py"
    by_hand.write_text(CPU_SCRIPT)
    expected = _run(str(by_hand), str(checkpoint), cwd=tmp_path)
    assert expected.returncode == 0, expected.stderr
    assert fixed.stdout == expected.stdout
    assert fixed.stdout.count("epoch") == 3


@pytest.mark.parametrize(
    ("program", "codes", "fixed_line"),
    [
        (STORY, ["DEV101", "DEV301"], "network = Net().to(device)"),
        (BATCHES, ["DEV302"], "batch = {k: v.to(device) for k, v in batch.items()}"),
    ],
    ids=["article-story", "batches"],
)
def test_fixed_program_runs_where_the_original_failed(
    tmp_path: Path, program: str, codes: list[str], fixed_line: str
) -> None:
    script = tmp_path / "program.py"
    script.write_text(program)
    assert sorted(d.code for d in check_source(program, str(script))) == codes
    runner = tmp_path / "shadow_run.py"
    runner.write_text(textwrap.dedent(UNDER_SHADOW))

    original = _run(str(runner), str(script), cwd=tmp_path)
    assert original.returncode != 0
    assert "Expected all tensors to be on the same device" in original.stderr, original.stderr

    _fix(script)
    assert fixed_line in script.read_text()
    on_gpu = _run(str(runner), str(script), cwd=tmp_path)
    assert on_gpu.returncode == 0, on_gpu.stderr
    on_cpu = _run(str(script), cwd=tmp_path)
    assert on_cpu.returncode == 0, on_cpu.stderr
    assert on_gpu.stdout == on_cpu.stdout and on_cpu.stdout.strip()
