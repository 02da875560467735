"""The shadow accelerator: CUDA's device rules, simulated on the CPU.

A `ShadowTensor` is a CPU tensor whose Python class says it lives on `cuda:N`. Its C++
device stays `cpu` (a wrapper made with device='cuda' aborts the process at its first
autograd use on a CPU-only build), so every kernel runs on the CPU, with the CPU
generator, and a shadow run equals a CPU run bit for bit.

`_ShadowMode`, a function mode, sees every torch call. It has to: factories with
device='cuda', `.to("cuda")` and `.cuda()` fail with "Torch not compiled with CUDA
enabled" before any dispatch mode could see them. When all the tensors of a call are on
one shadow device it runs the call and marks the tensors it returns (the fast path: no
Python per aten op). When a call mixes devices it runs it again op by op under
`_DeviceChecker`, which applies CUDA's rules to each aten op and raises PyTorch's own
message where a GPU would. The `torch.cuda` and `torch.accelerator` queries are replaced
for the duration of the context (not `torch.cuda._lazy_init`: C++ remembers that it ran).
"""

from __future__ import annotations

import contextlib
import copy
import threading
import types
from typing import Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from devlint.harness.recorder import DeviceCounts, call_syncs

_aten = torch.ops.aten
_CPU = torch.device("cpu")

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
_INDEXING = frozenset({"index", "index_put", "index_put_", "_index_put_impl_"})

INVALID_ORDINAL = (
    "CUDA error: invalid device ordinal\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, "
    "so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)


class _State(threading.local):
    """What the innermost active `shadow_accelerator()` says."""

    def __init__(self):
        self.device_count = 1
        self.current = 0
        self.counts = DeviceCounts()


_state = _State()
_device_names = [f"cuda:{i}" for i in range(64)]
_devices = [torch.device("cuda", i) for i in range(64)]


def legacy_type_name(tensor: torch.Tensor) -> str:
    """`torch.cuda.FloatTensor` / `torch.FloatTensor`, as PyTorch's messages spell types."""
    name = _LEGACY_NAMES.get(tensor.dtype, str(tensor.dtype))
    return f"torch.cuda.{name}" if tensor.is_cuda else f"torch.{name}"


class ShadowTensor(torch.Tensor):
    """A CPU tensor that tells Python it lives on `cuda:N`.

    Never constructed: `_mark` turns the fresh CPU tensor an operation returned into
    one, so autograd history and storage stay as they are.
    """

    _index: int

    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def device(self) -> torch.device:
        return _devices[self._index]

    @property
    def is_cuda(self) -> bool:
        return True

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
        _saved_locations[plain.untyped_storage().data_ptr()] = _device_names[self._index]
        return plain.__reduce_ex__(protocol)


def _mark(tensor: torch.Tensor, index: int) -> torch.Tensor:
    tensor.__class__ = ShadowTensor
    tensor._index = index
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
    return _device_names[tensor._index] if type(tensor) is ShadowTensor else str(tensor.device)


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
    """The check generated into every CUDA kernel wrapper, in argument order."""
    method = f"wrapper_CUDA_{rule.name}" if rule.name in _STRUCTURED else f"wrapper_CUDA__{rule.name}"
    common = None
    for name, tensor in operands:
        device = _device_of(tensor)
        if common is None:
            common = device
        elif device != common:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but got {name} is on "
                f"{device}, different from other tensors on {common} (when checking "
                f"argument in method {method})"
            )


def _check_convolution(args) -> None:
    tensor_input, weight, bias = args[0], args[1], args[2]
    for role, parameter in (("weight", weight), ("bias", bias)):
        if parameter is None:
            continue
        if _device_of(tensor_input) != _device_of(parameter) or tensor_input.dtype != parameter.dtype:
            raise RuntimeError(
                f"Input type ({legacy_type_name(tensor_input)}) and {role} type "
                f"({legacy_type_name(parameter)}) should be the same or input should be a "
                f"MKLDNN tensor and {role} is a dense tensor"
            )


def check_op(func, args, kwargs) -> int | None:
    """Raise what CUDA raises for this aten op; else return its device (None: the host)."""
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
    if rule.name in _INDEXING:
        operands = [(n, t) for n, t in operands if n != "indices" and not (n == "values" and t.dim() == 0)]
    if len(indices) < len(operands) or len(set(indices)) > 1:
        if rule.pointwise:
            _check_tensor_iterator(rule, operands)
        else:
            _check_common_device(rule, operands)
    return indices[0]


class _DeviceChecker(TorchDispatchMode):
    """Runs a call that mixes devices op by op, with CUDA's rules for each op."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        index = check_op(func, args, kwargs)
        result = func(*args, **kwargs)
        if index is not None and func is not _aten.copy_.default:
            _mark_results(result, index, args)
        return result


# Moves between the host and the shadow devices -------------------------------------------


def _move(tensor, index, dtype, copy_always):
    """`tensor` on `cuda:index` (the host for None), converted to `dtype` if given.

    Called inside the mode's handler, where plain calls reach the CPU kernels; the
    copies are ordinary autograd-tracked ops, so gradients flow back across the move.
    """
    source = _index_of(tensor)
    dtype = dtype or tensor.dtype
    if source == index and dtype == tensor.dtype and not copy_always:
        return tensor
    if index is not None and index >= _state.device_count:
        raise RuntimeError(INVALID_ORDINAL)
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


def _cuda_index(device) -> int:
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
    if device.type == "cuda":
        return True, _state.current if device.index is None else device.index
    return device.type == "cpu", None


def _to(func, args, kwargs):
    tensor = args[0]
    if len(args) > 1 and isinstance(args[1], torch.Tensor):
        other = args[1]
        return _move(tensor, _index_of(other), other.dtype, bool(kwargs.get("copy", False)))
    device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args[1:], **kwargs)
    copy_always = bool(kwargs.get("copy", False))
    if device is None:
        return _move(tensor, _index_of(tensor), dtype, copy_always)
    known, index = _target(device)
    if not known:
        return func(*args, **kwargs)
    return _move(tensor, index, dtype, copy_always)


def _cuda(func, args, kwargs):
    device = args[1] if len(args) > 1 else kwargs.get("device")
    return _move(args[0], _cuda_index(device), None, False)


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
    if ".cuda." in name:
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


def _tolist(func, args, kwargs):
    if type(args[0]) is ShadowTensor:
        _count_transfer_to_host()
    return func(*args, **kwargs)


def _count_transfer_to_host() -> None:
    _state.counts.device_to_host += 1
    _state.counts.syncs += 1


def _shadow_repr(tensor: ShadowTensor) -> str:
    """What `repr` prints for the same tensor on a real CUDA device."""
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


# The function mode -------------------------------------------------------------------------


def _wants_shadow(device) -> bool:
    if isinstance(device, int):
        return True
    if isinstance(device, str):
        return device.startswith("cuda")
    return isinstance(device, torch.device) and device.type == "cuda"


_FROM_HOST_DATA = frozenset({torch.tensor, torch.as_tensor, torch.asarray})


def _factory(func, args, kwargs):
    index = _cuda_index(kwargs["device"])
    if index >= _state.device_count:
        raise RuntimeError(INVALID_ORDINAL)
    kwargs = dict(kwargs, device=_CPU)
    kwargs.pop("pin_memory", None)
    result = func(*args, **kwargs)
    counts = _state.counts
    counts.ops[_device_names[index]] += 1
    if func in _FROM_HOST_DATA:
        counts.host_to_device += 1
    if type(result) is ShadowTensor:
        result = _plain(result)
    return _mark(result, index)


_SPECIAL = {
    torch.Tensor.to: _to,
    torch.Tensor.cuda: _cuda,
    torch.Tensor.cpu: _cpu,
    torch.Tensor.type: _type,
    torch.Tensor.type_as: _type_as,
    torch.Tensor.copy_: _copy,
    torch.Tensor.tolist: _tolist,
}


class _ShadowMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        special = _SPECIAL.get(func)
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
            return func(*args, **kwargs)
        counts = _state.counts
        counts.ops[_device_names[index]] += 1
        if call_syncs(func, args):
            counts.syncs += 1
        if foreign:
            with _DeviceChecker():
                result = func(*args, **kwargs)
            counts.mixed += 1
        else:
            result = func(*args, **kwargs)
        return _mark_results(result, index, args)


class _LegacyCudaTypeMeta(type):
    def __instancecheck__(cls, instance) -> bool:
        return type(instance) is ShadowTensor and instance.dtype is cls.dtype


def _legacy_cuda_type(name: str, dtype: torch.dtype) -> type:
    """`torch.cuda.FloatTensor` and its kin: construct on the host, then move."""

    def construct(cls, *args, **kwargs):
        counts = _state.counts
        counts.host_to_device += 1
        counts.ops[_device_names[_state.current]] += 1
        return _mark(getattr(torch, name)(*args, **kwargs), _state.current)

    namespace = {"__new__": construct, "__module__": "torch.cuda", "dtype": dtype, "is_cuda": True}
    return _LegacyCudaTypeMeta(name, (), namespace)


# torch.cuda and torch.accelerator as a machine with `device_count` GPUs answers them ------


class _Properties(types.SimpleNamespace):
    pass


def _device_properties(device=None) -> _Properties:
    return _Properties(
        name="devlint shadow accelerator",
        major=9,
        minor=0,
        total_memory=80 * 2**30,
        multi_processor_count=132,
        is_integrated=False,
    )


class _DeviceContext:
    """`with torch.cuda.device(i):` under the shadow."""

    def __init__(self, device):
        self.index = _cuda_index(device) if device is not None else None

    def __enter__(self):
        self.previous = _state.current
        if self.index is not None:
            _state.current = self.index
        return self

    def __exit__(self, *exc):
        _state.current = self.previous
        return False


def _set_device(device) -> None:
    index = _cuda_index(device)
    if index >= _state.device_count:
        raise RuntimeError(INVALID_ORDINAL)
    _state.current = index


def _synchronize(device=None) -> None:
    _state.counts.syncs += 1


class _Stream:
    """A CUDA stream or event under the shadow: work is already done when it is queued."""

    def __init__(self, *args, **kwargs):
        self.device = _devices[_state.current]

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


def _queries() -> dict:
    cuda = {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "device_count": lambda: _state.device_count,
        "current_device": lambda: _state.current,
        "set_device": _set_device,
        "synchronize": _synchronize,
        "get_device_name": lambda device=None: "devlint shadow accelerator",
        "get_device_capability": lambda device=None: (9, 0),
        "get_device_properties": _device_properties,
        "is_bf16_supported": lambda including_emulation=True: True,
        "current_stream": lambda device=None: _Stream(),
        "default_stream": lambda device=None: _Stream(),
        "stream": lambda stream=None: _Stream(),
        "is_current_stream_capturing": lambda: False,
    }
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        cuda[name] = lambda device=None: 0
    for name in ("init", "reset_peak_memory_stats", "empty_cache", "manual_seed", "manual_seed_all", "seed", "seed_all"):
        cuda[name] = lambda *args, **kwargs: None
    accelerator = {
        "is_available": lambda: True,
        "current_accelerator": lambda check_available=False: torch.device("cuda"),
        "device_count": lambda: _state.device_count,
        "current_device_index": lambda: _state.current,
        "current_device_idx": lambda: _state.current,
        "set_device_index": _set_device,
        "set_device_idx": _set_device,
        "synchronize": _synchronize,
        "current_stream": lambda device=None: _Stream(),
    }
    patches = {
        torch.cuda: {name: _answer(function) for name, function in cuda.items()},
        torch.accelerator: {name: _answer(function) for name, function in accelerator.items()},
    }
    patches[torch.cuda]["device"] = _DeviceContext
    patches[torch.cuda]["Stream"] = patches[torch.cuda]["Event"] = _Stream
    for dtype, name in _LEGACY_NAMES.items():
        patches[torch.cuda][name] = _legacy_cuda_type(name, dtype)
    return patches


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
        return str(torch.device(map_location) if not isinstance(map_location, int) else _devices[map_location])
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
            if target.startswith("cuda"):
                moved = _mark(value.detach(), _cuda_index(target))
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


# The context manager ----------------------------------------------------------------------


@contextlib.contextmanager
def shadow_accelerator(device_count: int = 1, counts: DeviceCounts | None = None) -> Iterator[DeviceCounts]:
    """Run the code inside as if `device_count` CUDA devices were present.

    Tensors put on `cuda:N` are CPU tensors that report `cuda:N` and obey CUDA's device
    rules: mixing them with CPU tensors raises the error a GPU machine would raise.
    Yields the `DeviceCounts` the run is recorded into.
    """
    if device_count < 1:
        raise ValueError("device_count must be at least 1")
    previous = (_state.device_count, _state.current, _state.counts)
    _state.device_count, _state.current = device_count, 0
    _state.counts = counts if counts is not None else DeviceCounts()
    replaced = []
    patches = _queries()
    patches[torch.serialization] = {"location_tag": _location_tag(torch.serialization.location_tag)}
    patches[torch] = {"load": _load(torch.load), "save": _save(torch.save)}
    patches[torch.Tensor] = {"pin_memory": lambda self, device=None: self, "is_pinned": lambda self, device=None: False}
    swap = torch.__future__.get_swap_module_params_on_conversion()
    try:
        for namespace, attributes in patches.items():
            for name, value in attributes.items():
                replaced.append((namespace, name, namespace.__dict__.get(name, _MISSING)))
                setattr(namespace, name, value)
        torch.__future__.set_swap_module_params_on_conversion(True)
        with _ShadowMode():
            yield _state.counts
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swap)
        for namespace, name, value in reversed(replaced):
            if value is _MISSING:
                delattr(namespace, name)
            else:
                setattr(namespace, name, value)
        _state.device_count, _state.current, _state.counts = previous


_MISSING = object()
