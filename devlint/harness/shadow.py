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

import contextlib
import copy
import os
import sys
import threading
import types
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.utils._device
from torch._utils import ExceptionWrapper, _get_device_index
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from devlint.harness.recorder import DeviceCounts, call_syncs

_aten = torch.ops.aten
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
_STRUCTURED = frozenset({"addmm", "mm", "bmm", "baddbmm", "addmv", "addbmm", "mv"})
_INDEX_PUT = frozenset({"index_put", "index_put_", "_index_put_impl_"})

INVALID_ORDINAL = (
    "CUDA error: invalid device ordinal\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, "
    "so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
# torch/cuda/__init__.py `_lazy_init` and torch/csrc/utils/device_lazy_init.cpp; XPU's
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

    def invalid_ordinal(self, index: int) -> str:
        if self.kind == "cuda":
            return INVALID_ORDINAL
        # c10/core/Device.cpp and the MPS/XPU device guards: no launch-error suffix.
        return f"Invalid device index {index} for {self.kind}"


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
        self.outputs = {
            arg.name for arg in schema.arguments if arg.alias_info is not None and arg.alias_info.is_write
        }


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
            "Expected all tensors to be on the same device, but found at least two "
            f"devices, {common} and {device}!"
        )


def _check_common_device(rule: _Rule, operands) -> None:
    """The check generated into every CUDA (XPU) kernel wrapper, in argument order.

    MPS kernels have no generated check; their graph placeholders refuse a CPU tensor
    (aten/src/ATen/native/mps/OperationUtils.mm, `Placeholder::Placeholder`).
    """
    if _backend.wrapper is None:
        raise RuntimeError("Placeholder storage has not been allocated on MPS device!")
    prefix = f"wrapper_{_backend.wrapper}_" if rule.name in _STRUCTURED else f"wrapper_{_backend.wrapper}__"
    common = None
    for name, tensor in operands:
        device = _device_of(tensor)
        if common is None:
            common = device
        elif device != common:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but got {name} is on "
                f"{device}, different from other tensors on {common} (when checking "
                f"argument in method {prefix}{rule.name})"
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
    tensor_input, weight, bias = args[0], args[1], args[2]
    for role, parameter in (("weight", weight), ("bias", bias)):
        if parameter is None:
            continue
        if _device_of(tensor_input) != _device_of(parameter) or tensor_input.dtype != parameter.dtype:
            raise RuntimeError(
                f"Input type ({_type_string(tensor_input)}) and {role} type "
                f"({_type_string(parameter)}) should be the same or input should be a "
                f"MKLDNN tensor and {role} is a dense tensor"
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
        if rule.pointwise:
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
        raise RuntimeError(_backend.invalid_ordinal(index))


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


def _factory(func, args, kwargs):
    index = _shadow_index(kwargs["device"])
    _check_ordinal(index)
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


class _ShadowMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        special = _special.get(func)
        if special is not None:
            return special(func, args, kwargs or {})
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
    touches = any(type(value) is ShadowTensor for value in values) or _wants_shadow(kwargs.get("device"))
    if touches or func in _ACCELERATOR_METHODS.values():
        raise RuntimeError(BAD_FORK.format(kind=_backend.kind.upper()))
    return _ShadowMode._in_parent(self, func, types, args, kwargs)


def _after_fork_in_child() -> None:
    # Only a fork with the accelerator in use poisons it (CUDA registers its
    # pthread_atfork handler at initialisation: torch/csrc/cuda/Module.cpp `poison_fork`).
    if _active and not _backend.forks:
        _ShadowMode.__torch_function__ = _in_forked_child


_ShadowMode._in_parent = _ShadowMode.__torch_function__
os.register_at_fork(after_in_child=_after_fork_in_child)


class _LegacyTypeMeta(type):
    def __instancecheck__(cls, instance) -> bool:
        return type(instance) is ShadowTensor and instance.dtype is cls.dtype


def _legacy_type(name: str, dtype: torch.dtype) -> type:
    """`torch.cuda.FloatTensor` and its kin: construct on the host, then move."""

    def construct(cls, *args, **kwargs):
        counts = _state.counts
        counts.host_to_device += 1
        counts.ops[_backend.names[_state.current]] += 1
        return _mark(getattr(torch, name)(*args, **kwargs), _state.current)

    namespace = {"__new__": construct, "__module__": "torch.cuda", "dtype": dtype, "is_cuda": True}
    return _LegacyTypeMeta(name, (), namespace)


# torch.cuda (torch.mps, torch.xpu) and torch.accelerator as the shadow machine answers --


class _Properties(types.SimpleNamespace):
    pass


def _checked_index(device) -> int:
    """`get_device_properties`' check (torch/cuda/__init__.py): "Invalid device id",
    which is also what DataParallel's constructor raises for a missing `device_ids` entry."""
    index = _shadow_index(device)
    if index < 0 or index >= _state.device_count:
        raise AssertionError("Invalid device id")
    return index


def _device_properties(device=None) -> _Properties:
    _checked_index(device)
    return _Properties(
        name="devlint shadow accelerator",
        major=9,
        minor=0,
        total_memory=80 * 2**30,
        multi_processor_count=132,
        is_integrated=False,
    )


def _device_name(device=None) -> str:
    return _device_properties(device).name


def _device_capability(device=None) -> tuple[int, int]:
    properties = _device_properties(device)
    return properties.major, properties.minor


class _DeviceContext:
    """`with torch.cuda.device(i):` (and `torch.accelerator.device_index(i)`) under the shadow."""

    def __init__(self, device):
        self.index = _shadow_index(device) if device is not None else None

    def __enter__(self):
        self.previous = _state.current
        if self.index is not None:
            _state.current = self.index
        return self

    def __exit__(self, *exc):
        _state.current = self.previous
        return False


def _set_device(device) -> None:
    index = _shadow_index(device)
    _check_ordinal(index)
    _state.current = index


def _synchronize(device=None) -> None:
    _state.counts.syncs += 1


class _Stream:
    """A stream or event under the shadow: work is already done when it is queued."""

    def __init__(self, *args, **kwargs):
        self.device = _backend.devices[_state.current]

    def is_capturing(self) -> bool:
        return False

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        _synchronize()

    def wait_stream(self, stream) -> None:
        return None

    def wait_event(self, event) -> None:
        return None

    def wait(self, stream=None) -> None:
        return None

    def record(self, stream=None) -> None:
        return None

    def record_event(self, event=None):
        return event or _Stream()

    def elapsed_time(self, end_event) -> float:
        return 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False


def _answer(function):
    """A function object of its own for each patched name (torch._dynamo's rule map
    refuses one object registered under two names)."""

    def answer(*args, **kwargs):
        return function(*args, **kwargs)

    return answer


def _nothing(*args, **kwargs) -> None:
    return None


def _device_module(backend: Backend) -> dict:
    """`torch.cuda` / `torch.xpu` / `torch.mps`, as a machine with that accelerator answers."""
    answers = {
        "is_available": lambda: True,
        "device_count": lambda: _state.device_count,
        "synchronize": _synchronize,
        "manual_seed": _nothing,
        "seed": _nothing,
        "empty_cache": _nothing,
    }
    if backend.kind == "mps":
        answers["current_allocated_memory"] = answers["driver_allocated_memory"] = lambda: 0
        return answers
    answers.update(
        {
            "is_initialized": lambda: True,
            "current_device": lambda: _state.current,
            "set_device": _set_device,
            "get_device_name": _device_name,
            "get_device_capability": _device_capability,
            "get_device_properties": _device_properties,
            "is_bf16_supported": lambda including_emulation=True: True,
            "current_stream": lambda device=None: _Stream(),
            "default_stream": lambda device=None: _Stream(),
            "stream": lambda stream=None: _Stream(),
            "is_current_stream_capturing": lambda: False,
        }
    )
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        answers[name] = lambda device=None: 0
    for name in ("init", "reset_peak_memory_stats", "manual_seed_all", "seed_all"):
        answers[name] = _nothing
    return answers


def _queries(backend: Backend) -> dict:
    accelerator = {
        "is_available": lambda: True,
        "current_accelerator": lambda check_available=False: torch.device(backend.kind),
        "device_count": lambda: _state.device_count,
        "current_device_index": lambda: _state.current,
        "current_device_idx": lambda: _state.current,
        "set_device_index": _set_device,
        "set_device_idx": _set_device,
        "synchronize": _synchronize,
        "current_stream": lambda device=None: _Stream(),
    }
    module = getattr(torch, backend.kind)
    patches = {
        module: {name: _answer(function) for name, function in _device_module(backend).items()},
        torch.accelerator: {name: _answer(function) for name, function in accelerator.items()},
    }
    patches[torch.accelerator]["device_index"] = _DeviceContext
    if backend.kind == "mps":
        patches[torch.backends.mps] = {"is_available": _answer(lambda: True), "is_built": _answer(lambda: True)}
        return patches
    patches[module]["device"] = _DeviceContext
    patches[module]["Stream"] = patches[module]["Event"] = _Stream
    if backend.kind == "cuda":
        for dtype, name in _LEGACY_NAMES.items():
            patches[module][name] = _legacy_type(name, dtype)
        patches.update(_data_parallel())
    return patches


# (Distributed)DataParallel: torch.cuda.comm's primitives (torch/csrc/cuda/comm.cpp) ------
# They also run inside backward passes, where the autograd engine runs without this
# thread's function modes and hands host-class gradients: so they work on plain aliases
# and mark what they return themselves.


def _on(tensor, index: int) -> torch.Tensor:
    """`tensor` on shadow device `index` (-1: the host): an alias if it is there, else a copy."""
    if index == -1:
        return tensor if type(tensor) is not ShadowTensor else _move(tensor, None, None, False)
    if type(tensor) is ShadowTensor and tensor._index == index:
        return tensor
    return _move(tensor, index, None, False)


def _scatter(tensor, devices, chunk_sizes=None, dim=0, streams=None):
    source = _index_of(tensor)
    plain = _plain(tensor) if source is not None else tensor
    chunks = plain.split(list(chunk_sizes), dim) if chunk_sizes else plain.chunk(len(devices), dim)
    return tuple(
        _mark(chunk.contiguous(), device) if device == source else _move(chunk, device, None, False)
        for chunk, device in zip(chunks, devices)
    )


def _gather(tensors, dim=0, destination=None):
    for position, tensor in enumerate(tensors):
        if type(tensor) is not ShadowTensor:
            raise RuntimeError(
                f"Expected all input tensors to be CUDA tensors, but tensor at index {position} "
                f"has device '{tensor.device}'"
            )
    index = -1 if destination == -1 else _shadow_index(destination)
    parts = [_plain(_on(tensor, index)) if index != -1 else _on(tensor, index) for tensor in tensors]
    gathered = torch.cat(parts, dim)
    return gathered if index == -1 else _mark(gathered, index)


def _broadcast_coalesced(tensors, devices, buffer_size=None):
    for tensor in tensors:
        if tensor.get_device() != devices[0]:
            raise RuntimeError(f"All tensors must be on devices[0]: {devices[0]}")
    # comm.cpp hands the inputs themselves to devices[0]; an autograd Function would then
    # re-wrap them as host tensors, so devices[0] gets aliases marked as its own.
    first = [_mark(_plain(tensor).detach(), devices[0]) for tensor in tensors]
    return [first] + [[_move(tensor, device, None, True) for tensor in tensors] for device in devices[1:]]


def _broadcast(tensor, devices):
    return [replicas[0] for replicas in _broadcast_coalesced([tensor], devices)]


def _reduce_add_coalesced(inputs, destination=None, buffer_size=None):
    """torch/nn/parallel/comm.py `reduce_add`, per tensor: the destination's copy plus the
    others in device order (flattening into buckets does not change elementwise sums)."""
    index = _shadow_index(destination)
    root = next((position for position, tensors in enumerate(inputs) if tensors[0].get_device() == index), 0)
    others = [tensors for position, tensors in enumerate(inputs) if position != root]
    results = []
    for position, tensor in enumerate(inputs[root]):
        total = _plain(tensor) if type(tensor) is ShadowTensor else tensor
        for tensors in others:
            other = tensors[position]
            total = total + (_plain(other) if type(other) is ShadowTensor else other)
        results.append(_mark(total, index))
    return tuple(results)


def _marked(tensor, index: int):
    return _mark(tensor, index) if type(tensor) is torch.Tensor and index != -1 else tensor


def _parallel_functions() -> dict:
    """DataParallel's autograd Functions, with the gradients their backward receives put on
    the devices the forward's outputs were on (as the real engine would hand them)."""
    functions = sys.modules["torch.nn.parallel._functions"]
    # The originals, bound now: the module's names are these subclasses while patched.
    base_scatter, base_gather, base_broadcast = functions.Scatter, functions.Gather, functions.Broadcast

    class Scatter(base_scatter):
        @staticmethod
        def forward(ctx, target_gpus, chunk_sizes, dim, input):
            ctx.target_gpus = [_get_device_index(device, True) for device in target_gpus]
            return base_scatter.forward(ctx, target_gpus, chunk_sizes, dim, input)

        @staticmethod
        def backward(ctx, *grad_output):
            grads = [_marked(grad, index) for grad, index in zip(grad_output, ctx.target_gpus)]
            return base_scatter.backward(ctx, *grads)

    class Gather(base_gather):
        @staticmethod
        def backward(ctx, grad_output):
            return base_gather.backward(ctx, _marked(grad_output, ctx.target_device))

    class Broadcast(base_broadcast):
        @staticmethod
        def backward(ctx, *grad_outputs):
            grads = [
                _marked(grad, ctx.target_gpus[position // ctx.num_inputs]) for position, grad in enumerate(grad_outputs)
            ]
            return base_broadcast.backward(ctx, *grads)

    classes = {"Scatter": Scatter, "Gather": Gather, "Broadcast": Broadcast}
    return {
        functions: {**classes, "_get_stream": lambda device: None},
        sys.modules["torch.nn.parallel.scatter_gather"]: {"Scatter": Scatter, "Gather": Gather},
    }


def _parallel_apply(modules, inputs, kwargs_tup=None, devices=None):
    """torch/nn/parallel/parallel_apply.py, one replica after the other: the shadow's
    mode and counts live in this thread, and the replicas' numbers do not depend on the
    order. The first failing replica raises what its thread would have."""
    kwargs_tup = kwargs_tup or ({},) * len(modules)
    devices = devices or [None] * len(modules)
    outputs = []
    for position, (module, input, kwargs, device) in enumerate(zip(modules, inputs, kwargs_tup, devices)):
        if device is None:
            device = sys.modules["torch.nn.parallel.parallel_apply"].get_a_var(input).get_device()
        index = _get_device_index(device, True)
        try:
            with _DeviceContext(index):
                output = module(*(input if isinstance(input, (list, tuple)) else (input,)), **kwargs)
        except Exception:
            ExceptionWrapper(where=f"in replica {position} on device {index}").reraise()
        outputs.append(output)
    return outputs


def _init_process_group(original):
    """NCCL is CUDA's collective backend; the shadow's tensors are CPU tensors underneath,
    which gloo reduces with the same arithmetic for DistributedDataParallel."""

    def init_process_group(backend=None, *args, **kwargs):
        return original("gloo" if backend == "nccl" else backend, *args, **kwargs)

    return init_process_group


def _data_parallel() -> dict:
    comm = {"_scatter": _scatter, "_gather": _gather, "_broadcast_coalesced": _broadcast_coalesced,
            "_broadcast": _broadcast}
    return {
        **_parallel_functions(),
        torch._C: comm,
        sys.modules["torch.nn.parallel.data_parallel"]: {"parallel_apply": _parallel_apply},
        torch.nn.parallel: {"parallel_apply": _parallel_apply},
        sys.modules["torch.nn.parallel.comm"]: {"reduce_add_coalesced": _reduce_add_coalesced},
        torch.distributed: {
            "init_process_group": _init_process_group(torch.distributed.init_process_group),
            "is_nccl_available": _answer(lambda: True),
        },
    }


# torch.save / torch.load keep the device a tensor was saved from --------------------------

_saved_locations: dict = {}


def _location_tag(original):
    def location_tag(storage):
        return _saved_locations.get(storage.data_ptr()) or original(storage)

    return location_tag


def _save(original):
    def save(obj, f, *args, **kwargs):
        _saved_locations.clear()
        try:
            return original(obj, f, *args, **kwargs)
        finally:
            _saved_locations.clear()

    return save


def _load(original):
    def load(f, map_location=None, *args, **kwargs):
        targets = {}

        def restore(storage, location):
            target = _map_location(map_location, storage, location)
            targets[storage.data_ptr()] = target
            return storage

        return _place(original(f, restore, *args, **kwargs), targets, {})

    return load


def _map_location(map_location, storage, location) -> str:
    if map_location is None:
        return location
    if isinstance(map_location, dict):
        return map_location.get(location, location)
    if isinstance(map_location, (str, torch.device, int)):
        return str(torch.device(map_location) if not isinstance(map_location, int) else _backend.devices[map_location])
    try:
        result = map_location(storage, location)
    except (RuntimeError, AssertionError):
        return location
    return location if result is None else "cpu"


def _place(value, targets: dict, memo: dict):
    """Loaded CPU tensors moved to where the checkpoint (or map_location) puts them."""
    if isinstance(value, torch.Tensor) and type(value) is not ShadowTensor:
        if id(value) not in memo:
            target = targets.get(value.untyped_storage().data_ptr(), "cpu")
            moved = value
            if target.startswith(_backend.kind):
                moved = _mark(value.detach(), _shadow_index(target))
                if isinstance(value, torch.nn.Parameter):
                    moved = torch.nn.Parameter(moved, value.requires_grad)
                elif value.requires_grad:
                    moved.requires_grad_(True)
            memo[id(value)] = moved
        return memo[id(value)]
    if isinstance(value, dict):
        for key in list(value):
            value[key] = _place(value[key], targets, memo)
        return value
    if isinstance(value, list):
        value[:] = [_place(item, targets, memo) for item in value]
        return value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_place(item, targets, memo) for item in value)
    if isinstance(value, torch.nn.Module):
        return value._apply(lambda tensor: _place(tensor, targets, memo))
    return value


# Defaults a script may change: the default tensor type and the default device -----------


def _set_default_tensor_type(original):
    """`torch.set_default_tensor_type(torch.cuda.FloatTensor)`: the default dtype becomes
    float32 and factories build on the current device (torch/csrc/tensor/python_tensor.cpp).
    The real call refuses the shadow's stand-in types, so the host type is set instead
    and the device is remembered here."""

    def set_default_tensor_type(t) -> None:
        name = t if isinstance(t, str) else f"{t.__module__}.{t.__name__}"
        accelerator = name.startswith(f"torch.{_backend.kind}.")
        original("torch." + name.rsplit(".", 1)[-1] if accelerator else t)
        _state.default_index = _state.current if accelerator else None

    return set_default_tensor_type


def _default_device_context():
    return getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)


def _restore_defaults(dtype: torch.dtype, device_context, set_default_device) -> None:
    """Undo what the script set, so the harness's own work after it runs on the host."""
    torch.set_default_dtype(dtype)
    if _default_device_context() is not device_context:
        set_default_device(None if device_context is None else device_context.device)


# The context manager ----------------------------------------------------------------------


def _patches(backend: Backend) -> dict:
    patches = _queries(backend)
    extra = {
        torch.serialization: {"location_tag": _location_tag(torch.serialization.location_tag)},
        torch: {
            "load": _load(torch.load),
            "save": _save(torch.save),
            "set_default_tensor_type": _set_default_tensor_type(torch.set_default_tensor_type),
        },
        torch.Tensor: {
            "pin_memory": lambda self, device=None: self,
            "is_pinned": lambda self, device=None: False,
            "record_stream": lambda self, stream: None,
        },
        torch.autograd.Variable: {"__new__": _variable_new(torch.autograd.Variable.__new__)},
    }
    for namespace, attributes in extra.items():
        patches.setdefault(namespace, {}).update(attributes)
    return patches


@contextlib.contextmanager
def shadow_accelerator(
    kind: str = "cuda", device_count: int = 1, counts: DeviceCounts | None = None
) -> Iterator[DeviceCounts]:
    """Run the code inside as if `device_count` accelerators of `kind` were present.

    `kind` is "cuda" (the default), "mps" (a Mac: `torch.cuda.is_available()` is False,
    `torch.backends.mps.is_available()` True) or "xpu". Tensors put on the accelerator
    are CPU tensors that report it as their device and obey its device rules: mixing
    them with CPU tensors raises the error the real machine would raise. Yields the
    `DeviceCounts` the run is recorded into.
    """
    global _backend, _special, _active
    if kind not in BACKENDS:
        raise ValueError(f"kind must be one of {', '.join(BACKENDS)}, not {kind!r}")
    if not 1 <= device_count <= _MAX_DEVICES:
        raise ValueError(f"device_count must be between 1 and {_MAX_DEVICES}")
    previous = (_state.device_count, _state.current, _state.counts, _state.default_index, _backend, _special)
    backend = BACKENDS[kind]
    _state.device_count, _state.current, _state.default_index = device_count, 0, None
    _state.counts = counts if counts is not None else DeviceCounts()
    set_default_device = torch.set_default_device
    defaults = (torch.get_default_dtype(), _default_device_context(), set_default_device)
    replaced = []
    _backend, _special = backend, _specials(backend)
    _active += 1
    try:
        for namespace, attributes in _patches(backend).items():
            for name, value in attributes.items():
                replaced.append((namespace, name, namespace.__dict__.get(name, _MISSING)))
                setattr(namespace, name, value)
        with _ShadowMode():
            yield _state.counts
    finally:
        _active -= 1
        _restore_defaults(*defaults)
        for namespace, name, value in reversed(replaced):
            if value is _MISSING:
                delattr(namespace, name)
            else:
                setattr(namespace, name, value)
        (_state.device_count, _state.current, _state.counts, _state.default_index, _backend, _special) = previous


_MISSING = object()
