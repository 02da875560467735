"""The shadow accelerator, in process: CUDA's answers and CUDA's errors on a CPU-only machine."""

import copy
import io

import pytest
import torch

from devlint.harness import shadow_accelerator
from devlint.harness.randomness import cpu_randomness

SAME_DEVICE = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"


def test_queries_answer_like_a_gpu_machine_and_are_restored():
    before = torch.cuda.is_available()
    with shadow_accelerator():
        assert torch.cuda.is_available() and torch.accelerator.is_available()
        assert torch.accelerator.current_accelerator() == torch.device("cuda")
        assert torch.cuda.device_count() == 1
    assert torch.cuda.is_available() is before


def test_tensors_report_cuda_and_print_like_cuda_tensors(shadow_cuda):
    x = torch.arange(3.0, device="cuda")
    assert x.device == torch.device("cuda", 0) and x.is_cuda and x.get_device() == 0
    assert repr(x) == "tensor([0., 1., 2.], device='cuda:0')"
    assert x.type() == "torch.cuda.FloatTensor"
    assert f"{x.sum():.1f}" == "3.0"
    assert x.cpu().device == torch.device("cpu") and type(x.cpu()) is torch.Tensor
    assert torch.ones(2).cuda().device.type == "cuda"
    assert torch.ones(2).to("cuda:0").is_cuda
    assert torch.cuda.FloatTensor([1.0]).is_cuda
    assert isinstance(x, torch.cuda.FloatTensor)


def test_cpu_tensor_meeting_a_device_tensor_raises_pytorchs_message(shadow_cuda):
    x = torch.ones(5, device="cuda")
    with pytest.raises(RuntimeError, match="^" + SAME_DEVICE.replace("!", "!$").replace("(", r"\(")):
        x + torch.zeros(5)


def test_one_0_dim_cpu_input_rides_along_but_a_cpu_output_does_not(shadow_cuda):
    x = torch.ones(5, device="cuda")
    scale = torch.tensor(2.0)
    assert (scale * x).is_cuda
    assert shadow_cuda.mixed == 1
    with pytest.raises(RuntimeError, match="found at least two devices, cuda:0 and cpu"):
        scale -= x.sum()


def test_cpu_indices_into_a_device_tensor_are_legal(shadow_cuda):
    x = torch.arange(10.0, device="cuda")
    picked = x[torch.tensor([1, 3])]
    assert picked.is_cuda and picked.tolist() == [1.0, 3.0]
    masked = x[x > 4]
    assert masked.is_cuda
    assert shadow_cuda.syncs >= 1


def test_module_left_on_cpu(shadow_cuda):
    with pytest.raises(RuntimeError, match="but got mat1 is on cuda:0, different from other tensors on cpu"):
        torch.nn.Linear(3, 1)(torch.ones(2, 3, device="cuda"))
    # As an H200 says: a host input with CUDA weights reaches CUDA's slow 2-d kernel.
    with pytest.raises(RuntimeError) as caught:
        torch.nn.Conv2d(1, 1, 3)(torch.ones(1, 1, 5, 5, device="cuda"))
    assert (
        str(caught.value)
        == "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same"
    )
    del caught
    with pytest.raises(RuntimeError) as caught:
        torch.nn.Conv2d(1, 1, 3).cuda()(torch.ones(1, 1, 5, 5))
    assert str(caught.value) == (
        "Expected all tensors to be on the same device, but got weight is on cuda:0, different from other "
        "tensors on cpu (when checking argument in method wrapper_CUDA___slow_conv2d_forward)"
    )


def test_numpy_on_device(shadow_cuda):
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        torch.ones(2, device="cuda").numpy()


@pytest.mark.shadow_cuda(device_count=2)
def test_two_devices(shadow_cuda):
    assert torch.cuda.device_count() == 2
    with pytest.raises(RuntimeError, match="cuda:0 and cuda:1!"):
        torch.ones(2, device="cuda:0") + torch.ones(2, device="cuda:1")


def test_device_index_past_the_count(shadow_cuda):
    """CUDA's runtime errors are `torch.AcceleratorError` (seen on an H200)."""
    with pytest.raises(torch.AcceleratorError, match="invalid device ordinal"):
        torch.ones(2, device="cuda:1")


def test_training_a_moved_model_matches_the_cpu_bit_for_bit():
    def train(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        data, target = torch.randn(16, 4).to(device), torch.randn(16, 1).to(device)
        for _ in range(5):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(data), target)
            loss.backward()
            optimizer.step()
        assert all(p.device.type == torch.device(device).type for p in model.parameters())
        assert all(p.grad.device.type == torch.device(device).type for p in model.parameters())
        return [p.detach().cpu() for p in model.parameters()], loss.item()

    plain, plain_loss = train("cpu")
    with shadow_accelerator():
        shadow, shadow_loss = train("cuda")
    assert plain_loss == shadow_loss
    assert all(torch.equal(a, b) for a, b in zip(plain, shadow))


def test_gradients_flow_across_moves(shadow_cuda):
    w = torch.ones(3, requires_grad=True)
    (w.to("cuda") * 2).sum().backward()
    assert w.grad.tolist() == [2.0, 2.0, 2.0]
    v = torch.ones(3, device="cuda", requires_grad=True)
    (v.cpu() * 3).sum().backward()
    assert v.grad.is_cuda and v.grad.tolist() == [3.0, 3.0, 3.0]


def test_checkpoints_keep_their_device_and_honour_map_location(shadow_cuda):
    model = torch.nn.Linear(2, 2).to("cuda")
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    assert all(t.is_cuda for t in torch.load(buffer).values())
    buffer.seek(0)
    assert all(not t.is_cuda for t in torch.load(buffer, map_location="cpu").values())
    assert copy.deepcopy(model).weight.is_cuda


def test_counts(shadow_cuda):
    x = torch.tensor([1.0, 2.0], device="cuda")
    x.sum().item()
    x.cpu()
    assert shadow_cuda.host_to_device == 1
    assert shadow_cuda.device_to_host == 1
    assert shadow_cuda.syncs == 2
    assert shadow_cuda.ops["cuda:0"] >= 3


def test_cpu_randomness_draws_the_cpu_numbers_on_a_device():
    torch.manual_seed(0)
    expected = torch.randn(4), torch.empty(3).uniform_()
    with shadow_accelerator(), cpu_randomness():
        torch.manual_seed(0)
        drawn = torch.randn(4, device="cuda"), torch.empty(3, device="cuda").uniform_()
        assert all(t.is_cuda for t in drawn)
        assert all(torch.equal(a, b.cpu()) for a, b in zip(expected, drawn))


def test_cpu_randomness_draws_on_the_cpu_under_a_default_device_the_program_set():
    """On an H200, a fixed program that calls `torch.set_default_device("cuda")` and builds
    its model trained to other numbers on CUDA than on the CPU: the default device's mode
    lies below the harness's, and put its CPU draws for `nn.init` on the GPU. On the
    shadow, the accelerator is simulated and the draws come out as on the CPU."""
    torch.manual_seed(0)
    expected = torch.nn.Linear(3, 2).weight.detach().clone(), torch.randn(4)
    with shadow_accelerator(), cpu_randomness():
        torch.manual_seed(0)
        torch.set_default_device("cuda")
        try:
            drawn = torch.nn.Linear(3, 2).weight.detach(), torch.randn(4)
        finally:
            torch.set_default_device(None)
    assert all(t.device == torch.device("cuda:0") for t in drawn)
    assert all(torch.equal(a, b.cpu()) for a, b in zip(expected, drawn))


def test_cpu_randomness_draws_below_a_default_device_mode_on_the_cpu_generator(monkeypatch):
    """The same without the shadow, whose own mode would catch the factories first: a
    default device below the harness's mode (the meta device standing in for CUDA) must not
    take the draws, so the CPU generator moves on as on a CPU run."""
    from devlint.harness import randomness

    monkeypatch.setattr(randomness, "is_accelerator", lambda device: device is not None and str(device) == "meta")
    torch.manual_seed(0)
    with cpu_randomness():
        torch.set_default_device("meta")
        try:
            layer, noise = torch.nn.Linear(3, 2), torch.randn(4)
        finally:
            torch.set_default_device(None)
    after_the_meta_run = torch.random.get_rng_state()
    assert layer.weight.device.type == "meta" and noise.device.type == "meta"
    torch.manual_seed(0)
    torch.nn.Linear(3, 2), torch.randn(4)
    assert torch.equal(after_the_meta_run, torch.random.get_rng_state())


def test_rnns_run_where_torch_is_a_cuda_build_with_no_gpu(monkeypatch):
    """On a CUDA build of PyTorch with the GPU hidden (a CI machine, or verify's shadow run
    on a GPU machine), cuDNN accepts a tensor that says it is on CUDA, and the RNN then asks
    the driver to flatten its weights: "no CUDA-capable device is detected" (seen on an
    H200 machine). This build is CPU-only, so both halves of that are put in place here."""

    def no_device(index):
        raise torch.AcceleratorError("CUDA error: no CUDA-capable device is detected")

    monkeypatch.setattr(torch.backends.cudnn, "is_acceptable", lambda tensor: tensor.device.type == "cuda")
    monkeypatch.setattr(torch.cuda, "_exchange_device", no_device)
    monkeypatch.setattr(torch.cuda, "_maybe_exchange_device", no_device)
    with shadow_accelerator():
        lstm = torch.nn.LSTM(3, 4).cuda()
        output, _ = lstm(torch.ones(2, 1, 3, device="cuda"))
        output.sum().backward()
        assert output.device == torch.device("cuda:0") and lstm.weight_ih_l0.grad.device == torch.device("cuda:0")
        with torch.cuda.device_of(output):
            assert torch.cuda.current_device() == 0


def test_autocast_on_the_accelerator_computes_in_half_precision_and_ends_with_its_block():
    layer = torch.nn.Linear(2, 2)
    with shadow_accelerator():
        layer.cuda()
        with torch.autocast("cuda"):
            assert layer(torch.ones(1, 2, device="cuda")).dtype == torch.float16
            with torch.autocast("cuda", enabled=False):
                assert layer(torch.ones(1, 2, device="cuda")).dtype == torch.float32
            assert layer(torch.ones(1, 2, device="cuda")).dtype == torch.float16
        assert layer(torch.ones(1, 2, device="cuda")).dtype == torch.float32
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert layer(torch.ones(1, 2, device="cuda")).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")
