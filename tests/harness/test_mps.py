"""The shadow as an accelerator that is not CUDA (`shadow_accelerator("mps")`, `--device shadow:mps`)."""

import re
import textwrap

import pytest
import torch
import torch.nn as nn

from devlint.harness import shadow_accelerator
from devlint.harness.verify import RunSpec, plan, run_program


def test_a_shadow_mac_answers_like_a_mac_and_is_restored():
    before = torch.cuda.is_available(), torch.backends.mps.is_available(), torch.accelerator.current_accelerator()
    with shadow_accelerator("mps"):
        assert not torch.cuda.is_available()
        assert torch.backends.mps.is_available() and torch.accelerator.is_available()
        assert torch.accelerator.current_accelerator() == torch.device("mps")
        x = torch.ones(2, device=torch.accelerator.current_accelerator())
        assert x.device == torch.device("mps", 0) and x.is_mps and not x.is_cuda
        assert repr(x) == "tensor([1., 1.], device='mps:0')"
        assert torch.ones(2).to("mps").is_mps
        with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
            torch.ones(2).cuda()
    after = torch.cuda.is_available(), torch.backends.mps.is_available(), torch.accelerator.current_accelerator()
    assert after == before


def test_a_shadow_xpu_machine():
    with shadow_accelerator("xpu", device_count=2):
        assert torch.xpu.is_available() and torch.xpu.device_count() == 2 and not torch.cuda.is_available()
        assert torch.accelerator.current_accelerator() == torch.device("xpu")
        assert torch.ones(1).xpu(1).device == torch.device("xpu", 1)


def test_mps_keeps_the_device_rules_with_pytorchs_messages(shadow_mps):
    """TensorIterator's message names the devices (aten/src/ATen/TensorIterator.cpp); MPS's
    linear checks its arguments itself (aten/src/ATen/native/mps/operations/Linear.mm)."""
    x = torch.ones(3, device="mps")
    with pytest.raises(RuntimeError, match=re.escape("found at least two devices, mps:0 and cpu!")):
        x + torch.ones(3)
    with pytest.raises(RuntimeError, match="^Tensor for argument weight is on cpu but expected on mps$"):
        nn.Linear(3, 1)(torch.ones(2, 3, device="mps"))
    with pytest.raises(RuntimeError, match="^Tensor for argument input is on cpu but expected on mps$"):
        nn.Linear(3, 1).to("mps")(torch.ones(2, 3))
    with pytest.raises(RuntimeError, match=re.escape(r"Input type (MPSFloatType) and weight type (torch.FloatTensor)")):
        nn.Conv2d(1, 1, 3)(torch.ones(1, 1, 5, 5, device="mps"))
    assert shadow_mps.ops["mps:0"] > 0


def test_the_default_shadow_verification_adds_a_run_on_a_shadow_mac():
    names = [spec.name for spec in plan("shadow")]
    assert names == ["original@shadow", "fixed@shadow", "fixed@shadow:mps", "fixed@cpu", "original@cpu"]
    assert [spec.name for spec in plan("shadow:mps")][:2] == ["original@shadow", "fixed@shadow:mps"]


CUDA_FLAG_FIX = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    cuda = torch.cuda.is_available()
    device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")
    model = nn.Linear(4, 2)
    if cuda:
        model.cuda()
    batch = torch.randn(8, 4).to(device)
    print(model(batch).sum().item())
    """
)


def test_a_fix_that_only_works_where_the_accelerator_is_cuda_fails_on_a_shadow_mac(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(CUDA_FLAG_FIX)
    kwargs = dict(seed=0, shadow_devices=1, workdir=str(tmp_path), timeout=120)
    on_cuda = run_program(RunSpec("fixed", "shadow"), CUDA_FLAG_FIX, str(script), **kwargs)
    assert on_cuda.status == "ok"
    on_mac = run_program(RunSpec("fixed", "shadow:mps"), CUDA_FLAG_FIX, str(script), **kwargs)
    assert on_mac.status == "error"
    assert on_mac.error == "RuntimeError: Tensor for argument weight is on cpu but expected on mps"
    assert on_mac.location == "line 11: print(model(batch).sum().item())"


def test_a_shadow_mac_on_a_cuda_machine_has_no_cuda(monkeypatch):
    """On a GPU machine (as on an H200 with `scripts/gpu-check`) the shadow Mac must still
    be a Mac: a script's `if torch.cuda.is_available()` branch would put real CUDA tensors
    beside the shadow's. A CUDA shadow likewise presents no MPS or XPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    with shadow_accelerator("mps"):
        assert not torch.cuda.is_available() and torch.cuda.device_count() == 0
    with shadow_accelerator("cuda"):
        assert not torch.backends.mps.is_available() and not torch.xpu.is_available()
    assert torch.cuda.is_available() and torch.backends.mps.is_available()
