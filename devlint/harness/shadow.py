"""The shadow accelerator: CUDA's (or MPS's, or XPU's) device rules, simulated on the CPU.

A `ShadowTensor` is a CPU tensor whose Python class says it lives on `cuda:N` (or
`mps:0`, `xpu:N`). Its C++ device stays `cpu` (a wrapper made with device='cuda' aborts
the process at its first autograd use on a CPU-only build), so every kernel runs on the
CPU, with the CPU generator, and a shadow run equals a CPU run bit for bit.

`_ShadowMode`, a function mode, sees every torch call. It has to: factories with
device='cuda', `.to("cuda")` and `.cuda()` fail with "Torch not compiled with CUDA
enabled" before any dispatch mode could see them. When all the tensors of a call are on
one shadow device it runs the call and marks the tensors it returns (the fast path: no
Python per aten op). When a call mixes devices it runs it again op by op under
`_DeviceChecker`, which applies the backend's rules to each aten op and raises PyTorch's
own message where the real device would. The `torch.cuda` (`torch.mps`, `torch.xpu`) and
`torch.accelerator` queries are replaced for the duration of the context (not
`torch.cuda._lazy_init`: C++ remembers that it ran).

Moving a module changes its parameters in place, as on a GPU: `Module._apply` assigns
`param.data = moved`, and the mode turns the parameter object itself into a shadow
tensor. (Swapping tensor objects instead, `torch.__future__`'s other path, fails on
parameters that hold weakrefs, as RNNs' do, or that an optimizer still references.)
"""

from __future__ import annotations

import copy
import os
import threading
from dataclasses import dataclass

import torch
import torch.utils._device
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from devlint.harness.recorder import DeviceCounts, call_syncs

_aten = torch.ops.aten
# storage -> the shadow device it was saved from (`torch.save` records it; see machine.py)
_saved_locations: dict = {}
_CPU = torch.device("cpu")
_MAX_DEVICES = 64

_LEGACY_NAMES = {
    torch.float32: "FloatTensor",
    torch.float64: "DoubleTensor",
    torch.float16: "HalfTensor",
    torch.bfloat16: "BFloat16Tensor",
    torch.int64: "LongTensor",
    torch.int32: "IntTensor",
    torch.int16: "ShortTensor",
    torch.int8: "CharTensor",
    torch.uint8: "ByteTensor",
    torch.bool: "BoolTensor",
}
_DTYPES_BY_LEGACY_NAME = {name: dtype for dtype, name in _LEGACY_NAMES.items()}

# Structured kernels are registered as `wrapper_CUDA_<op>`; the others get a double
# underscore (`wrapper_CUDA__index_select`). Only the structured ones need listing.
_STRUCTURED = frozenset({"addmm", "mm", "bmm", "baddbmm", "addmv", "addbmm", "mv", "cat", "gather", "nll_loss_forward"})
# Composite ops whose check is their inner kernel's, with its argument names (seen on an
# H200: `torch.stack` fails in `wrapper_CUDA_cat`, an embedding in `index_select`).
_REPORTED_AS = {"stack": ("cat", {}), "embedding": ("index_select", {"weight": "self", "indices": "index"})}
# Not tagged pointwise, but computed by a TensorIterator, whose message they give.
_TENSOR_ITERATOR_OPS = frozenset({"mse_loss"})
_INDEX_PUT = frozenset({"index_put", "index_put_", "_index_put_impl_"})

INVALID_ORDINAL = (
    "CUDA error: invalid device ordinal\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, "
    "so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
# c10/cuda/CUDAException.h: what any CUDA runtime call returns in a process forked after
# CUDA was initialised, as an op on a tensor the parent had there makes one.
FORKED_CUDA = (
    "CUDA error: initialization error\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, "
    "so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
# CUDA's runtime errors are `torch.AcceleratorError` (a RuntimeError) since PyTorch 2.8;
# c10::Error, a plain RuntimeError, before.
ACCELERATOR_ERROR = getattr(torch, "AcceleratorError", RuntimeError)
# torch/cuda/__init__.py `_lazy_init` and torch/csrc/utils/device_lazy_init.cpp, for what
# initialises the device (a factory or move to it, `.cuda()`); XPU's
# torch/xpu/__init__.py says the same of XPU.
BAD_FORK = (
    "Cannot re-initialize {kind} in forked subprocess. To use {kind} with multiprocessing, "
    "you must use the 'spawn' start method"
)


@dataclass(frozen=True)
class Backend:
    """One kind of accelerator the shadow can present."""

    kind: str  # the device type: "cuda", "mps" or "xpu"
    wrapper: str | None  # the dispatch key in generated device checks; MPS kernels have none
    forks: bool  # whether a forked child may use it (CUDA and XPU refuse)

    @property
    def devices(self) -> tuple[torch.device, ...]:
        return _DEVICES[self.kind]

    @property
    def names(self) -> tuple[str, ...]:
        return _NAMES[self.kind]

    def invalid_ordinal(self, index: int) -> Exception:
        if self.kind == "cuda":
            return ACCELERATOR_ERROR(INVALID_ORDINAL)
        # c10/core/Device.cpp and the MPS/XPU device guards: no launch-error suffix.
        return RuntimeError(f"Invalid device index {index} for {self.kind}")

    def used_in_forked_child(self, initialises: bool) -> Exception:
        """What touching the accelerator raises in a child forked while it was in use:
        initialising it refuses; a CUDA op on a tensor the parent made there gets the
        runtime's own error. (XPU's runtime error there was not seen: it keeps the refusal.)"""
        if initialises or self.kind != "cuda":
            return RuntimeError(BAD_FORK.format(kind=self.kind.upper()))
        return ACCELERATOR_ERROR(FORKED_CUDA)


BACKENDS = {
    "cuda": Backend("cuda", "CUDA", forks=False),
    "mps": Backend("mps", None, forks=True),
    "xpu": Backend("xpu", "XPU", forks=False),
}
_DEVICES = {kind: tuple(torch.device(kind, i) for i in range(_MAX_DEVICES)) for kind in BACKENDS}
_NAMES = {kind: tuple(f"{kind}:{i}" for i in range(_MAX_DEVICES)) for kind in BACKENDS}


class _State(threading.local):
    """What the innermost active `shadow_accelerator()` says."""

    def __init__(self):
        self.device_count = 1
        self.current = 0
        self.counts = DeviceCounts()
        self.default_index: int | None = None  # set by set_default_tensor_type(torch.cuda.X)


_state = _State()
# The backend of the innermost active context. Module-level, not per thread: every
# `.device` reads it, and a module global is the cheapest lookup there is.
_backend = BACKENDS["cuda"]
_active = 0  # how many shadow contexts are open, for the fork hook


def legacy_type_name(tensor: torch.Tensor) -> str:
    """`torch.cuda.FloatTensor` / `torch.FloatTensor`: what `Tensor.type()` returns."""
    name = _LEGACY_NAMES.get(tensor.dtype, str(tensor.dtype))
    return f"torch.{_backend.kind}.{name}" if type(tensor) is ShadowTensor else f"torch.{name}"


def _type_string(tensor: torch.Tensor) -> str:
    """How `Tensor::toString()` names a tensor's type in messages (aten/src/ATen/core/
    DeprecatedTypeProperties.h): the legacy name where one is registered (CPU, CUDA),
    `MPSFloatType` and the like elsewhere."""
    if type(tensor) is not ShadowTensor or _backend.kind == "cuda":
        return legacy_type_name(tensor)
    scalar = _LEGACY_NAMES.get(tensor.dtype, "Float").removesuffix("Tensor")
    return f"{_backend.kind.upper()}{scalar}Type"


class ShadowTensor(torch.Tensor):
    """A CPU tensor that tells Python it lives on the shadow accelerator.

    Never constructed: `_mark` turns the fresh CPU tensor an operation returned into
    one, so autograd history and storage stay as they are.
    """

    _index: int

    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def device(self) -> torch.device:
        return _backend.devices[self._index]

    @property
    def is_cuda(self) -> bool:
        return _backend.kind == "cuda"

    @property
    def is_mps(self) -> bool:
        return _backend.kind == "mps"

    @property
    def is_xpu(self) -> bool:
        return _backend.kind == "xpu"

    @property
    def is_cpu(self) -> bool:
        return False

    def get_device(self) -> int:
        return self._index

    def numpy(self, *, force=False):
        if not force:
            raise TypeError(
                f"can't convert {self.device} device type tensor to numpy. "
                "Use Tensor.cpu() to copy the tensor to host memory first."
            )
        return _plain(self).numpy(force=True)

    def __array__(self, dtype=None, copy=None):
        return self.numpy()

    def __repr__(self, *, tensor_contents=None) -> str:
        _count_transfer_to_host()
        return _shadow_repr(self)

    def __format__(self, format_spec: str) -> str:
        if self.dim() == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            copied = _mark(_plain(self).clone(), self._index)
        copied.requires_grad_(self.requires_grad)
        memo[id(self)] = copied
        for name, value in self.__dict__.items():
            if name != "_index":
                setattr(copied, name, copy.deepcopy(value, memo))
        return copied

    def __reduce_ex__(self, protocol):
        # Pickled (torch.save above all) as the plain CPU tensor it is; `_location_tag`
        # records its storage as `cuda:N`, as a CUDA tensor's would be.
        plain = _plain(self).detach()
        plain.requires_grad_(self.requires_grad)
        if getattr(self, "_is_param", False):
            plain = torch.nn.Parameter(plain, self.requires_grad)
        _saved_locations[plain.untyped_storage().data_ptr()] = _backend.names[self._index]
        return plain.__reduce_ex__(protocol)


def _mark(tensor: torch.Tensor, index: int) -> torch.Tensor:
    tensor.__class__ = ShadowTensor
    tensor._index = index
    return tensor


def _unmark(tensor: ShadowTensor) -> torch.Tensor:
    """Back to the host class, in place: a parameter stays the object optimizers hold."""
    del tensor._index
    tensor.__class__ = torch.nn.Parameter if getattr(tensor, "_is_param", False) else torch.Tensor
    return tensor


def _plain(shadow: ShadowTensor) -> torch.Tensor:
    """A plain CPU alias of a shadow tensor, for the calls that must see the host type."""
    with torch._C.DisableTorchFunction():
        return torch.Tensor.as_subclass(shadow, torch.Tensor)


def _mark_results(value, index: int, args):
    """Mark the fresh tensors a call on `cuda:index` returned (never one passed in)."""
    kind = type(value)
    if kind is torch.Tensor:
        for arg in args:
            if arg is value:
                return value
        return _mark(value, index)
    if kind is tuple or kind is list or isinstance(value, tuple):
        for item in value:
            if type(item) is torch.Tensor:
                _mark_results(item, index, args)
    return value


def _index_of(tensor) -> int | None:
    return tensor._index if type(tensor) is ShadowTensor else None


def _device_of(tensor) -> str:
    return _backend.names[tensor._index] if type(tensor) is ShadowTensor else str(tensor.device)


# The device rules, per aten op (only for calls that mix devices) -------------------------


class _Rule:
    """How one aten op is checked, computed once per op."""

    __slots__ = ("pointwise", "name", "arguments", "outputs")

    def __init__(self, func):
        schema = func._schema
        self.pointwise = torch.Tag.pointwise in func.tags
        self.name = schema.name.split("::")[-1]
        self.arguments = [(arg.name, arg.kwarg_only) for arg in schema.arguments]
        self.outputs = {arg.name for arg in schema.arguments if arg.alias_info is not None and arg.alias_info.is_write}


_RULES: dict = {}


def _named_tensors(rule: _Rule, args, kwargs) -> list:
    named = []
    positional = iter(args)
    for name, kwarg_only in rule.arguments:
        if kwarg_only:
            if name not in kwargs:
                continue
            value = kwargs[name]
        else:
            value = next(positional, None)
        if isinstance(value, torch.Tensor):
            named.append((name, value))
        elif isinstance(value, (list, tuple)):
            named.extend((name, item) for item in value if isinstance(item, torch.Tensor))
    return named


def _check_tensor_iterator(rule: _Rule, operands) -> None:
    """TensorIterator's rule: one 0-dim CPU input may ride along; a CPU output may not."""
    ordered = [(True, t) for name, t in operands if name in rule.outputs]
    ordered += [(False, t) for name, t in operands if name not in rule.outputs or name == "self"]
    common = next(_device_of(t) for _, t in ordered if type(t) is ShadowTensor)
    cpu_scalars = 0
    for is_output, tensor in ordered:
        device = _device_of(tensor)
        if device == common:
            continue
        if device == "cpu" and not is_output and tensor.dim() == 0:
            cpu_scalars += 1
            if cpu_scalars > 1:
                raise RuntimeError("Trying to pass too many CPU scalars to non-CPU kernel!")
            continue
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, {common} and {device}!"
        )


def _check_common_device(rule: _Rule, operands) -> None:
    """The check generated into every CUDA (XPU) kernel wrapper, in argument order.

    MPS kernels have no generated check; their graph placeholders refuse a CPU tensor
    (aten/src/ATen/native/mps/OperationUtils.mm, `Placeholder::Placeholder`).
    """
    if _backend.wrapper is None:
        raise RuntimeError("Placeholder storage has not been allocated on MPS device!")
    method, names = _REPORTED_AS.get(rule.name, (rule.name, {}))
    prefix = f"wrapper_{_backend.wrapper}_" if method in _STRUCTURED else f"wrapper_{_backend.wrapper}__"
    common = None
    for name, tensor in operands:
        name = names.get(name, name)
        device = _device_of(tensor)
        if common is None:
            common = device
        elif device != common:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but got {name} is on "
                f"{device}, different from other tensors on {common} (when checking "
                f"argument in method {prefix}{method})"
            )


def _check_indices(tensor, indices) -> None:
    """`index`'s meta function (aten/src/ATen/native/TensorAdvancedIndexing.cpp,
    `check_indices_on_cpu_or_selfdevice`): indices on the CPU or on the indexed tensor's
    device, so a CPU tensor indexed by an accelerator index or mask fails."""
    device = _device_of(tensor)
    for index in indices:
        if type(index) is ShadowTensor and _device_of(index) != device:
            raise RuntimeError(
                f"indices should be either on cpu or on the same device as the indexed tensor ({device})"
            )


def _check_convolution(args) -> None:
    """aten/src/ATen/native/Convolution.cpp, `check_input_same_type_as_parameters`, for an
    input on the accelerator. A host input with CUDA weights reaches CUDA's slow 2-d kernel
    (1-d and 2-d convolutions, seen on an H200); elsewhere the CPU's MKLDNN check (not seen)."""
    tensor_input, weight, bias = args[0], args[1], args[2]
    on_host = type(tensor_input) is not ShadowTensor
    if on_host and _backend.kind == "cuda" and weight.dim() in (3, 4) and type(weight) is ShadowTensor:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but got weight is on {_device_of(weight)}, "
            f"different from other tensors on cpu (when checking argument in method "
            f"wrapper_CUDA___slow_conv2d_forward)"
        )
    for role, parameter in (("weight", weight), ("bias", bias)):
        if parameter is None:
            continue
        if _device_of(tensor_input) != _device_of(parameter) or tensor_input.dtype != parameter.dtype:
            raise RuntimeError(
                f"Input type ({_type_string(tensor_input)}) and {role} type "
                f"({_type_string(parameter)}) should be the same"
                + (f" or input should be a MKLDNN tensor and {role} is a dense tensor" if on_host else "")
            )


def check_op(func, args, kwargs) -> int | None:
    """Raise what the device raises for this aten op; else return its device (None: the host)."""
    rule = _RULES.get(func)
    if rule is None:
        rule = _RULES[func] = _Rule(func)
    operands = _named_tensors(rule, args, kwargs)
    indices = [t._index for _, t in operands if type(t) is ShadowTensor]
    if not indices:
        return None
    if func is _aten.copy_.default:
        return _index_of(args[0])
    if func is _aten.convolution.default:
        _check_convolution(args)
    if rule.name == "index":
        _check_indices(args[0], args[1])
        return _index_of(args[0])
    if rule.name in _INDEX_PUT:
        # AdvancedIndex moves the indices to the indexed tensor's device, and a 0-dim
        # value is moved too (`_index_put_impl_`), so neither takes part in the check.
        operands = [(n, t) for n, t in operands if n != "indices" and not (n == "values" and t.dim() == 0)]
        indices = [t._index for _, t in operands if type(t) is ShadowTensor]
        if not indices:
            return None
    if len(indices) < len(operands) or len(set(indices)) > 1:
        if rule.pointwise or rule.name in _TENSOR_ITERATOR_OPS:
            _check_tensor_iterator(rule, operands)
        else:
            _check_common_device(rule, operands)
    return indices[0]


def _check_mps_linear(args, kwargs) -> None:
    """MPS runs `linear` as one kernel that checks its arguments in order
    (aten/src/ATen/native/mps/operations/Linear.mm, `_mps_linear`)."""
    names = ("input", "weight", "bias")
    values = list(args[:3]) + [kwargs.get(name) for name in names[len(args) :]]
    for name, value in zip(names, values):
        if isinstance(value, torch.Tensor) and type(value) is not ShadowTensor:
            raise RuntimeError(f"Tensor for argument {name} is on {value.device} but expected on mps")


_RNNS = frozenset({torch._VF.lstm, torch._VF.gru, torch._VF.rnn_tanh, torch._VF.rnn_relu})


def _check_rnn(args) -> None:
    """The RNN entry points compare every hidden state and weight with the input's device
    first (aten/src/ATen/native/RNN.cpp, `check_attributes`), before any kernel runs."""
    packed = not isinstance(args[3], bool)  # lstm.data(data, batch_sizes, hx, params, ...)
    hiddens, params = (args[2], args[3]) if packed else (args[1], args[2])
    device = _device_of(args[0])
    roles = [("hidden", h) for h in ([hiddens] if isinstance(hiddens, torch.Tensor) else hiddens)]
    roles += [("parameter", p) for p in params]
    for role, tensor in roles:
        if _device_of(tensor) != device:
            raise RuntimeError(
                f"Input and {role} tensors are not at the same device, found input tensor at "
                f"{device} and {role} tensor at {_device_of(tensor)}"
            )


class _DeviceChecker(TorchDispatchMode):
    """Runs a call that mixes devices op by op, with the device's rules for each op."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        index = check_op(func, args, kwargs)
        result = func(*args, **kwargs)
        if index is not None and func is not _aten.copy_.default:
            _mark_results(result, index, args)
        return result


# Moves between the host and the shadow devices -------------------------------------------


def _check_ordinal(index: int) -> None:
    if index >= _state.device_count:
        raise _backend.invalid_ordinal(index)


def _move(tensor, index, dtype, copy_always):
    """`tensor` on shadow device `index` (the host for None), converted to `dtype` if given.

    Called inside the mode's handler, where plain calls reach the CPU kernels; the
    copies are ordinary autograd-tracked ops, so gradients flow back across the move.
    """
    source = _index_of(tensor)
    dtype = dtype or tensor.dtype
    if source == index and dtype == tensor.dtype and not copy_always:
        return tensor
    if index is not None:
        _check_ordinal(index)
    counts = _state.counts
    if source is None and index is not None:
        counts.host_to_device += 1
    elif source is not None and index is None:
        counts.device_to_host += 1
        counts.syncs += 1
    moved = torch.Tensor.to(tensor, dtype, copy=True)
    if index is None:
        return moved if type(moved) is torch.Tensor else _plain(moved)
    return _mark(moved if type(moved) is torch.Tensor else _plain(moved), index)


def _shadow_index(device) -> int:
    if device is None:
        return _state.current
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return _state.current if device.index is None else device.index


def _target(device):
    """(known, index) for a device argument: index None is the host; unknown is neither."""
    if isinstance(device, int):
        return True, device
    device = torch.device(device)
    if device.type == _backend.kind:
        return True, _state.current if device.index is None else device.index
    return device.type == "cpu", None


def _to(func, args, kwargs):
    tensor = args[0]
    # `_parse_to` knows device, dtype, non_blocking and memory_format, not `copy`.
    copy_always = bool(kwargs.get("copy", False))
    parsed = {name: value for name, value in kwargs.items() if name != "copy"}
    if len(args) > 1 and isinstance(args[1], torch.Tensor):
        other = args[1]
        return _move(tensor, _index_of(other), other.dtype, copy_always)
    device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args[1:], **parsed)
    if device is None:
        return _move(tensor, _index_of(tensor), dtype, copy_always)
    known, index = _target(device)
    if not known:
        return func(*args, **kwargs)
    return _move(tensor, index, dtype, copy_always)


def _to_accelerator(func, args, kwargs):
    """`Tensor.cuda()` (or `.xpu()`) on the backend of that name."""
    device = args[1] if len(args) > 1 else kwargs.get("device")
    return _move(args[0], _shadow_index(device), None, False)


def _cpu(func, args, kwargs):
    return _move(args[0], None, None, False)


def _type(func, args, kwargs):
    tensor = args[0]
    dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
    if dtype is None:
        return legacy_type_name(tensor)
    if isinstance(dtype, torch.dtype):
        return _move(tensor, _index_of(tensor), dtype, False)
    name = dtype if isinstance(dtype, str) else f"{dtype.__module__}.{dtype.__name__}"
    index = None
    if f".{_backend.kind}." in name:
        index = _state.current if _index_of(tensor) is None else _index_of(tensor)
    return _move(tensor, index, _DTYPES_BY_LEGACY_NAME[name.rsplit(".", 1)[-1]], False)


def _type_as(func, args, kwargs):
    tensor, other = args[0], args[1]
    return _move(tensor, _index_of(other), other.dtype, False)


def _copy(func, args, kwargs):
    target, source = args[0], args[1]
    counts = _state.counts
    target_index, source_index = _index_of(target), _index_of(source)
    if target_index is not None and source_index is None:
        counts.host_to_device += 1
    elif source_index is not None and target_index is None:
        counts.device_to_host += 1
        counts.syncs += 1
    counts.ops[_device_of(target if target_index is not None else source)] += 1
    return func(*args, **kwargs)


def _set_data(func, args, kwargs):
    """`tensor.data = value`: the tensor takes the value's device, keeping its identity.

    This is how `Module._apply` moves parameters and their gradients on a GPU, and why
    an optimizer built before `model.cuda()` still holds the moved parameters.
    """
    tensor, value = args
    func(tensor, value)
    source, target = _index_of(tensor), _index_of(value)
    if target is not None:
        if isinstance(tensor, torch.nn.Parameter):
            tensor._is_param = True
        _mark(tensor, target)
    elif source is not None:
        _unmark(tensor)


def _tolist(func, args, kwargs):
    if type(args[0]) is ShadowTensor:
        _count_transfer_to_host()
    return func(*args, **kwargs)


def _metadata(func, args, kwargs):
    """A question about tensors' C++ types, which are CPU either way: not an op."""
    return func(*args, **kwargs)


def _count_transfer_to_host() -> None:
    _state.counts.device_to_host += 1
    _state.counts.syncs += 1


def _shadow_repr(tensor: ShadowTensor) -> str:
    """What `repr` prints for the same tensor on a real device."""
    plain = _plain(tensor).detach()
    text = repr(plain)
    contents = "[]" if plain.numel() == 0 else torch._tensor_str._tensor_str(plain, len("tensor("))
    head = "tensor(" + contents
    rest = text[len(head) :] if text.startswith(head) else ")"
    suffix = f", device='{tensor.device}'" + rest[:-1]
    if tensor.grad_fn is not None:
        suffix += f", grad_fn=<{type(tensor.grad_fn).__name__}>"
    elif tensor.requires_grad:
        suffix += ", requires_grad=True"
    return head + suffix + ")"


def _variable_new(original):
    """`torch.autograd.Variable(t)`: a detached alias of `t` on `t`'s device
    (torch/csrc/autograd/python_legacy_variable.cpp, `THPVariable_pynew`). The C++
    constructor sees through the subclass and would return a host tensor."""

    def new(cls, *args, **kwargs):
        data = args[0] if args else kwargs.get("data")
        if type(data) is not ShadowTensor:
            return original(cls, *args, **kwargs)
        rest = args[1:]
        kwargs = {name: value for name, value in kwargs.items() if name != "data"}
        return _mark(original(cls, _plain(data), *rest, **kwargs), data._index)

    return staticmethod(new)


# The function mode -------------------------------------------------------------------------


def _wants_shadow(device) -> bool:
    if isinstance(device, int):
        return True
    if isinstance(device, str):
        return device.startswith(_backend.kind)
    return isinstance(device, torch.device) and device.type == _backend.kind


_FROM_HOST_DATA = frozenset({torch.tensor, torch.as_tensor, torch.asarray})
# The factories a default device applies to (`torch.set_default_device`,
# `with torch.device(...)`, a CUDA default tensor type).
_DEVICE_CONSTRUCTORS = frozenset(torch.utils._device._device_constructors())


def generator_device(generator) -> str:
    """The device type a generator draws for: a shadow generator's (`ShadowGenerator`
    in machine.py) is the accelerator's, though it draws with the CPU's algorithm."""
    shadow = getattr(generator, "shadow_index", None)
    return _backend.kind if shadow is not None else generator.device.type


def _check_generator(kwargs, device_type: str) -> None:
    """A random factory takes a generator of its own device only
    (aten/src/ATen/core/DistributionsHelper.h, `check_generator`)."""
    generator = kwargs.get("generator")
    if generator is not None and generator_device(generator) != device_type:
        raise RuntimeError(
            f"Expected a '{device_type}' device type for generator but found '{generator_device(generator)}'"
        )


def _factory(func, args, kwargs):
    index = _shadow_index(kwargs["device"])
    _check_ordinal(index)
    _check_generator(kwargs, _backend.kind)
    kwargs = dict(kwargs, device=_CPU)
    kwargs.pop("pin_memory", None)
    result = func(*args, **kwargs)
    counts = _state.counts
    counts.ops[_backend.names[index]] += 1
    if func in _FROM_HOST_DATA:
        counts.host_to_device += 1
    if type(result) is ShadowTensor:
        result = _plain(result)
    return _mark(result, index)


def _default_index() -> int | None:
    """The shadow device that factories without `device=` use, if the script set one.

    `torch.set_default_device("cuda")` pushes a `DeviceContext` below this mode, which
    would add `device=cuda` after the shadow has let the call through.
    """
    if _state.default_index is not None:
        return _state.default_index
    device = torch.utils._device.CURRENT_DEVICE
    if device is None or device.type != _backend.kind:
        return None
    return _state.current if device.index is None else device.index


_SPECIAL = {
    torch.Tensor.to: _to,
    torch.Tensor.cpu: _cpu,
    torch.Tensor.type: _type,
    torch.Tensor.type_as: _type_as,
    torch.Tensor.copy_: _copy,
    torch.Tensor.tolist: _tolist,
    torch.Tensor.data.__set__: _set_data,
    torch._has_compatible_shallow_copy_type: _metadata,
}
_ACCELERATOR_METHODS = {"cuda": torch.Tensor.cuda, "xpu": torch.Tensor.xpu}


def _specials(backend: Backend) -> dict:
    """The calls handled by hand: `.cuda()` exists only where the accelerator is CUDA
    (elsewhere the real method raises "Torch not compiled with CUDA enabled")."""
    special = dict(_SPECIAL)
    method = _ACCELERATOR_METHODS.get(backend.kind)
    if method is not None:
        special[method] = _to_accelerator
    return special


_special = _specials(_backend)


def _without_shadows(data):
    """`data` with each shadow tensor in its (nested) lists as a host tensor, and whether it had any."""
    if type(data) is ShadowTensor:
        return _plain(data), True
    if type(data) in (list, tuple):
        items = [_without_shadows(item) for item in data]
        return type(data)(item for item, _ in items), any(had for _, had in items)
    return data, False


def _from_listed_values(func, args, kwargs):
    """`torch.tensor([t0, t1])` reads each element's value, so device scalars in a list make
    a host tensor (seen on an H200), or one on the default device. None: no shadow inside."""
    data, had_shadows = _without_shadows(args[0])
    if not had_shadows:
        return None
    _state.counts.device_to_host += 1
    default = _default_index()
    if default is not None:
        return _factory(func, (data, *args[1:]), dict(kwargs, device=default))
    return func(data, *args[1:], **kwargs)


class _ShadowMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        special = _special.get(func)
        if special is not None:
            return special(func, args, kwargs or {})
        if func in _FROM_HOST_DATA and args and type(args[0]) in (list, tuple) and not (kwargs or {}).get("device"):
            result = _from_listed_values(func, args, kwargs or {})
            if result is not None:
                return result
        index = -1
        foreign = False
        for arg in args:
            kind = type(arg)
            if kind is ShadowTensor:
                if index != arg._index:
                    foreign = foreign or index != -1
                    index = arg._index
            elif kind is list or kind is tuple:
                for item in arg:
                    if type(item) is ShadowTensor:
                        if index != item._index:
                            foreign = foreign or index != -1
                            index = item._index
                    elif isinstance(item, torch.Tensor):
                        foreign = True
            elif isinstance(arg, torch.Tensor):
                foreign = True
        if kwargs:
            device = kwargs.get("device")
            if device is not None:
                if _wants_shadow(device):
                    return _factory(func, args, kwargs)
                return func(*args, **kwargs)
            for value in kwargs.values():
                if type(value) is ShadowTensor:
                    if index != value._index:
                        foreign = foreign or index != -1
                        index = value._index
                elif isinstance(value, torch.Tensor):
                    foreign = True
        else:
            kwargs = {}
        if index == -1:
            if func in _DEVICE_CONSTRUCTORS:
                default = _default_index()
                if default is not None:
                    return _factory(func, args, dict(kwargs, device=default))
                _check_generator(kwargs, "cpu")
            return func(*args, **kwargs)
        counts = _state.counts
        counts.ops[_backend.names[index]] += 1
        if call_syncs(func, args):
            counts.syncs += 1
        if not foreign:
            return _mark_results(func(*args, **kwargs), index, args)
        counts.mixed += 1
        if func in _RNNS:
            _check_rnn(args)
        elif _backend.kind == "mps" and func is torch._C._nn.linear:
            _check_mps_linear(args, kwargs)
        # The checker marks each op's result with the device that op ran on: a call
        # that mixes devices may well return a host tensor (`cpu[accelerator_scalar]`).
        with _DeviceChecker():
            return func(*args, **kwargs)


def _in_forked_child(self, func, types, args=(), kwargs=None):
    """The mode in a process forked while the accelerator was in use: any use of it fails."""
    kwargs = kwargs or {}
    values = [*args, *kwargs.values()]
    values += [item for value in values if type(value) in (list, tuple) for item in value]
    initialises = (
        func in _ACCELERATOR_METHODS.values()
        or _wants_shadow(kwargs.get("device"))
        or (func is torch.Tensor.to and any(_wants_shadow(value) for value in args[1:] if type(value) is not bool))
    )
    if initialises or any(type(value) is ShadowTensor for value in values):
        raise _backend.used_in_forked_child(initialises)
    return _ShadowMode._in_parent(self, func, types, args, kwargs)


def _after_fork_in_child() -> None:
    # Only a fork with the accelerator in use poisons it (CUDA registers its
    # pthread_atfork handler at initialisation: torch/csrc/cuda/Module.cpp `poison_fork`).
    if _active and not _backend.forks:
        _ShadowMode.__torch_function__ = _in_forked_child


_ShadowMode._in_parent = _ShadowMode.__torch_function__
os.register_at_fork(after_in_child=_after_fork_in_child)
