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
    assert torch.cuda.is_available() is before is False


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
    with pytest.raises(
        RuntimeError, match=r"Input type \(torch.cuda.FloatTensor\) and weight type \(torch.FloatTensor\)"
    ):
        torch.nn.Conv2d(1, 1, 3)(torch.ones(1, 1, 5, 5, device="cuda"))


def test_numpy_on_device(shadow_cuda):
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        torch.ones(2, device="cuda").numpy()


@pytest.mark.shadow_cuda(device_count=2)
def test_two_devices(shadow_cuda):
    assert torch.cuda.device_count() == 2
    with pytest.raises(RuntimeError, match="cuda:0 and cuda:1!"):
        torch.ones(2, device="cuda:0") + torch.ones(2, device="cuda:1")


def test_device_index_past_the_count(shadow_cuda):
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
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
