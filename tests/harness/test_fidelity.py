"""The shadow fails exactly where CUDA fails: one test per behaviour, each naming the
PyTorch source or documentation of the CUDA behaviour it mirrors, and one pair of
programs per defect (fixtures/harness/fidelity/: the original fails on shadow CUDA with
the GPU's error, the `.fixed.py` version runs and equals a CPU run)."""

import contextlib
import io
import re
import weakref
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from devlint.harness.runner import _execute, _observables
from devlint.harness.machine import shadow_accelerator

FIDELITY = Path(__file__).resolve().parents[2] / "fixtures" / "harness" / "fidelity"
ORIGINALS = sorted(path for path in FIDELITY.glob("*.py") if not path.name.endswith(".fixed.py"))
INDICES = "indices should be either on cpu or on the same device as the indexed tensor (cpu)"


def test_variable_keeps_the_device_tensor(shadow_cuda):
    """`Variable(t)` is a detached alias of `t`, on `t`'s device
    (torch/csrc/autograd/python_legacy_variable.cpp, THPVariable_pynew: `var = data.detach()`)."""
    from torch.autograd import Variable

    x = torch.ones(3, device="cuda")
    wrapped = Variable(x)
    assert wrapped.is_cuda and wrapped.device == torch.device("cuda", 0)
    assert not wrapped.requires_grad and Variable(x, requires_grad=True).requires_grad
    assert wrapped.data_ptr() == x.data_ptr()
    assert not Variable(torch.ones(2)).is_cuda


def test_cpu_tensor_indexed_by_a_device_index_or_mask_fails(shadow_cuda):
    """`index`'s meta function allows indices on the CPU or on the indexed tensor's device only
    (aten/src/ATen/native/TensorAdvancedIndexing.cpp, check_indices_on_cpu_or_selfdevice,
    pytorch/pytorch#69607)."""
    table = torch.arange(5.0)
    with pytest.raises(RuntimeError, match=re.escape(INDICES)):
        table[torch.tensor([1, 3], device="cuda")]
    with pytest.raises(RuntimeError, match=re.escape(INDICES)):
        table[torch.ones(5, dtype=torch.bool, device="cuda")]
    on_device = torch.arange(5.0, device="cuda")
    assert on_device[torch.tensor([1, 3])].tolist() == [1.0, 3.0]


@pytest.mark.shadow_cuda(device_count=2)
def test_device_tensor_indexed_from_another_device_fails(shadow_cuda):
    """The same check names the indexed tensor's device (TensorAdvancedIndexing.cpp)."""
    with pytest.raises(RuntimeError, match=re.escape("indexed tensor (cuda:0)")):
        torch.arange(4.0, device="cuda:0")[torch.tensor([0], device="cuda:1")]


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU])
def test_load_state_dict_into_rnns_works(shadow_cuda, kind):
    """`load_state_dict` copies into the existing parameters (`param.copy_(input_param)`,
    torch/nn/modules/module.py `_load_from_state_dict`); RNNs keep weakrefs to them
    (`_flat_weight_refs`), which only the swap path refuses."""
    source = kind(3, 4).cuda()
    target = kind(3, 4)
    assert str(target.load_state_dict(source.state_dict())) == "<All keys matched successfully>"
    assert not target.weight_ih_l0.is_cuda
    target.cuda()
    assert target.weight_ih_l0.is_cuda
    output, _ = target(torch.ones(2, 1, 3, device="cuda"))
    assert output.is_cuda


def test_module_cuda_after_an_optimizer_keeps_the_parameter_objects(shadow_cuda):
    """`Module._apply` moves parameters in place with `param.data = moved` by default
    (torch/nn/modules/module.py `_apply`; `torch.__future__.get_swap_module_params_on_conversion()`
    is False), so an optimizer built before `.cuda()` trains the moved parameters, however
    its constructor touched them (references, weakrefs, autograd graphs)."""
    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    references = [weakref.ref(p) for p in model.parameters()]
    start = nn.utils.parameters_to_vector(model.parameters())
    weight = model.weight
    model.cuda()
    assert model.weight is weight and weight.is_cuda and isinstance(weight, nn.Parameter)
    assert optimizer.param_groups[0]["params"][0] is weight and references[0]() is weight
    model(torch.ones(1, 2, device="cuda")).sum().backward()
    optimizer.step()
    assert weight.grad.is_cuda and start.grad_fn is not None
    model.cpu()
    assert type(weight) is nn.Parameter and not weight.is_cuda


def test_rnn_hidden_state_on_another_device_fails(shadow_cuda):
    """RNNs compare hidden states and weights with the input's device before any kernel
    (aten/src/ATen/native/RNN.cpp, check_attributes)."""
    lstm = nn.LSTM(3, 4).cuda()
    hidden = (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
    with pytest.raises(
        RuntimeError,
        match="^Input and hidden tensors are not at the same device, found input "
        "tensor at cuda:0 and hidden tensor at cpu$",
    ):
        lstm(torch.ones(5, 2, 3, device="cuda"), hidden)


def test_default_tensor_type_to_a_cuda_type_is_simulated_and_undone(shadow_cuda):
    """`set_default_tensor_type(torch.cuda.FloatTensor)` sets float32 as the default dtype and
    builds new tensors on the current CUDA device; integer types are refused
    (torch/csrc/tensor/python_tensor.cpp, py_set_default_tensor_type)."""
    torch.set_default_tensor_type("torch.cuda.DoubleTensor")
    assert torch.zeros(2).device == torch.device("cuda", 0) and torch.zeros(2).dtype == torch.float64
    # get_default_device() looks for a DeviceContext only, and the legacy default type sets
    # none (torch/__init__.py): it answers "cpu" on a GPU too.
    assert torch.get_default_device() == torch.device("cpu")
    torch.set_default_tensor_type(torch.cuda.FloatTensor)
    assert torch.randn(2).dtype == torch.float32 and torch.randn(2).is_cuda
    assert not torch.from_numpy(torch.ones(2).cpu().numpy()).is_cuda
    with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
        torch.set_default_tensor_type("torch.cuda.LongTensor")
    torch.set_default_tensor_type(torch.FloatTensor)
    assert not torch.zeros(2).is_cuda


def test_a_shuffling_loader_under_a_cuda_default_fails_and_a_cuda_generator_fixes_it(shadow_cuda):
    """With CUDA the default tensor type, a shuffling DataLoader's sampler draws `randperm`
    on the GPU with the CPU generator it made, which CUDA refuses
    (aten/src/ATen/core/DistributionsHelper.h, check_generator); a generator on the GPU
    draws there, and one on the GPU refuses a CPU factory in turn."""
    from torch.utils.data import DataLoader

    torch.set_default_tensor_type("torch.cuda.FloatTensor")
    loader = DataLoader(list(range(8)), batch_size=4, shuffle=True)
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator but found 'cpu'"):
        list(loader)
    generator = torch.Generator(device=torch.empty(0).device)
    assert generator.device == torch.device("cuda", 0) and isinstance(generator, torch.Generator)
    assert len(list(DataLoader(list(range(8)), batch_size=4, shuffle=True, generator=generator))) == 2
    torch.set_default_tensor_type(torch.FloatTensor)
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'cuda'"):
        torch.randperm(4, generator=generator)
    assert isinstance(torch.default_generator, torch.Generator)  # the host's generators stay generators


def test_default_device_in_the_script_is_simulated_and_undone():
    """`torch.set_default_device("cuda")` makes factories without `device=` build on CUDA
    (torch/__init__.py set_default_device, torch/utils/_device.py DeviceContext); the
    harness's own work after the script must still run on the host."""
    with shadow_accelerator():
        torch.set_default_device("cuda")
        assert torch.zeros(2).is_cuda and nn.Linear(2, 2).weight.is_cuda
        assert torch.get_default_device() == torch.device("cuda", 0)
        with torch.device("cpu"):
            assert not torch.ones(1).is_cuda
    assert torch.zeros(2).device == torch.device("cpu")
    assert torch.tensor([1.0]).device == torch.device("cpu")
    with shadow_accelerator():
        torch.set_default_tensor_type("torch.cuda.DoubleTensor")
    assert torch.zeros(1).dtype == torch.float32 and not torch.zeros(1).is_cuda


def test_to_with_copy(shadow_cuda):
    """`Tensor.to(..., copy=True)` always returns a new tensor, even on the same device
    (docs: torch.Tensor.to, "When copy is set, a new Tensor is created even when the Tensor
    already matches the desired conversion")."""
    x = torch.ones(3, device="cuda")
    for copied in (x.to("cuda", copy=True), x.to(x, copy=True), x.to(torch.float64, copy=True)):
        assert copied.is_cuda and copied.data_ptr() != x.data_ptr()
    assert x.to("cpu", copy=True).device == torch.device("cpu")
    assert torch.ones(2).to("cuda:0", copy=True).is_cuda
    assert x.to("cuda") is x


@pytest.mark.shadow_cuda(device_count=2)
def test_data_parallel_scatters_and_gathers_over_shadow_devices(shadow_cuda):
    """DataParallel scatters the batch over `device_ids`, replicates the module, runs each
    replica on its device and gathers on `output_device` (torch/nn/parallel/data_parallel.py;
    comm primitives in torch/csrc/cuda/comm.cpp). Its numbers equal the module run alone."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).cuda()
    parallel = nn.DataParallel(model)
    assert parallel.device_ids == [0, 1]
    seen = []
    model[0].register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].device))
    batch = torch.randn(6, 4, device="cuda")
    output = parallel(batch)
    assert output.device == torch.device("cuda", 0) and output.shape == (6, 2)
    assert seen == [torch.device("cuda", 0), torch.device("cuda", 1)]
    torch.testing.assert_close(output, model(batch))
    output.sum().backward()
    assert model[0].weight.grad.is_cuda
    assert nn.DataParallel(model, output_device=1)(batch).device == torch.device("cuda", 1)


def test_data_parallel_with_a_missing_device_id_fails(shadow_cuda):
    """DataParallel's constructor reads each device's properties, and
    `torch.cuda.get_device_properties` raises "Invalid device id" for a missing ordinal
    (torch/cuda/__init__.py; torch/nn/parallel/data_parallel.py `_check_balance`)."""
    with pytest.raises(AssertionError, match="^Invalid device id$"):
        nn.DataParallel(nn.Linear(2, 2).cuda(), device_ids=[0, 1])
    with pytest.raises(AssertionError, match="^Invalid device id$"):
        torch.cuda.get_device_name(3)


@pytest.mark.shadow_cuda(device_count=2)
def test_data_parallel_module_left_on_the_cpu_fails(shadow_cuda):
    """DataParallel.forward checks the module is on device_ids[0] (torch/nn/parallel/data_parallel.py)."""
    with pytest.raises(RuntimeError, match="module must have its parameters and buffers on device cuda:0"):
        nn.DataParallel(nn.Linear(2, 2))(torch.ones(2, 2, device="cuda"))


def test_distributed_data_parallel_on_one_shadow_device(shadow_cuda, monkeypatch):
    """DistributedDataParallel with `device_ids=[0]` copies inputs to that device and
    all-reduces gradients (torch/nn/parallel/distributed.py); NCCL, CUDA's backend, is
    gloo underneath the shadow."""
    import torch.distributed as dist

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        model = nn.Linear(3, 2).cuda()
        parallel = nn.parallel.DistributedDataParallel(model, device_ids=[0])
        output = parallel(torch.ones(4, 3))
        output.sum().backward()
        assert output.is_cuda and model.weight.grad.is_cuda
    finally:
        dist.destroy_process_group()


class _Rows(torch.utils.data.Dataset):
    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index] * 2


class _MovedRows(_Rows):
    def __getitem__(self, index):
        return self.data[index].cuda()


def test_device_tensors_in_forked_dataloader_workers_fail(shadow_cuda):
    """A process forked after CUDA was initialised cannot use it. An op on a tensor the
    parent made there gets the runtime's "CUDA error: initialization error", a
    `torch.AcceleratorError` (seen on an H200 with `scripts/gpu-check`); DataLoader
    re-raises the worker's error with its type."""
    loader = torch.utils.data.DataLoader(_Rows(torch.arange(8.0, device="cuda")), batch_size=4, num_workers=2)
    with pytest.raises(
        torch.AcceleratorError, match="Caught AcceleratorError in DataLoader worker process 0"
    ) as caught:
        list(loader)
    assert "CUDA error: initialization error" in str(caught.value)
    del caught
    host_loader = torch.utils.data.DataLoader(_Rows(torch.arange(8.0)), batch_size=4, num_workers=2)
    assert [batch.cuda().tolist() for batch in host_loader] == [[0, 2, 4, 6], [8, 10, 12, 14]]


def test_initialising_the_accelerator_in_a_forked_worker_is_refused(shadow_cuda):
    """Moving to CUDA (or making a tensor there) in the child initialises it, which
    torch/cuda/__init__.py `_lazy_init` refuses after the fork (the pthread_atfork
    handler of torch/csrc/cuda/Module.cpp)."""
    torch.zeros(1, device="cuda")  # the parent uses CUDA before forking
    loader = torch.utils.data.DataLoader(_MovedRows(torch.arange(8.0)), batch_size=4, num_workers=2)
    with pytest.raises(RuntimeError, match="Caught RuntimeError in DataLoader worker process 0") as caught:
        list(loader)
    assert (
        "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
        "you must use the 'spawn' start method" in str(caught.value)
    )


def _run(path: Path, context) -> tuple[str, dict]:
    torch.manual_seed(0)
    with context, contextlib.redirect_stdout(io.StringIO()) as printed:
        namespace = _execute(path.read_text(), str(path), str(path))
    return printed.getvalue(), _observables(namespace, torch)


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="the fix's plain run would use this machine's GPU; scripts/gpu-check compares"
)
@pytest.mark.parametrize("original", ORIGINALS, ids=lambda path: path.stem)
def test_fidelity_program_fails_like_a_gpu_and_its_fix_runs_like_the_cpu(original):
    expected = re.search(r"^# expect-error: (.+)$", original.read_text(), re.M).group(1)
    with shadow_accelerator(), contextlib.redirect_stdout(io.StringIO()), pytest.raises(Exception) as caught:
        _execute(original.read_text(), str(original), str(original))
    assert f"{type(caught.value).__name__}: {str(caught.value).splitlines()[0]}" == expected
    del caught
    fixed = original.with_name(original.stem + ".fixed.py")
    shadow_printed, shadow_values = _run(fixed, shadow_accelerator())
    cpu_printed, cpu_values = _run(fixed, contextlib.nullcontext())
    assert shadow_printed == cpu_printed
    assert shadow_values.keys() == cpu_values.keys()
    for name in cpu_values:
        torch.testing.assert_close(shadow_values[name], cpu_values[name], rtol=0, atol=0, equal_nan=True)
