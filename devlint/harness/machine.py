"""The simulated machine around the shadow tensor: stand-ins for `torch.cuda` (`torch.mps`,
`torch.xpu`) and `torch.accelerator` queries, streams and device contexts, the legacy
`torch.cuda.*Tensor` types, DataParallel's collectives on N shadow devices, checkpoints
saved from and loaded onto the shadow, the default tensor type, and
`shadow_accelerator()`, which installs all of it for the duration of a context.
"""

from __future__ import annotations

import contextlib
import sys
import types
from typing import Iterator

import torch
from torch._utils import ExceptionWrapper, _get_device_index

from devlint.harness import shadow as core
from devlint.harness.recorder import DeviceCounts
from devlint.harness.shadow import (
    BACKENDS,
    Backend,
    ShadowTensor,
    _LEGACY_NAMES,
    _MAX_DEVICES,
    _ShadowMode,
    _check_ordinal,
    _index_of,
    _mark,
    _move,
    _plain,
    _saved_locations,
    _shadow_index,
    _specials,
    _state,
    _variable_new,
)


class _LegacyTypeMeta(type):
    def __instancecheck__(cls, instance) -> bool:
        return type(instance) is ShadowTensor and instance.dtype is cls.dtype


def _legacy_type(name: str, dtype: torch.dtype) -> type:
    """`torch.cuda.FloatTensor` and its kin: construct on the host, then move."""

    def construct(cls, *args, **kwargs):
        counts = _state.counts
        counts.host_to_device += 1
        counts.ops[core._backend.names[_state.current]] += 1
        return _mark(getattr(torch, name)(*args, **kwargs), _state.current)

    namespace = {"__new__": construct, "__module__": "torch.cuda", "dtype": dtype, "is_cuda": True}
    return _LegacyTypeMeta(name, (), namespace)


class _GeneratorMeta(type(torch.Generator)):
    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, _HOST_GENERATOR)  # the host's generators are generators too


_HOST_GENERATOR = torch.Generator


class ShadowGenerator(_HOST_GENERATOR, metaclass=_GeneratorMeta):
    """`torch.Generator(device="cuda")`: the host has no CUDA generator, so this one draws
    with the CPU's algorithm (as the shadow's random factories do) and says it belongs to
    the accelerator, which is what the device checks of the random factories look at."""

    def __new__(cls, device="cpu"):
        generator = _HOST_GENERATOR.__new__(cls, "cpu")
        generator.shadow_index = _shadow_index(device) if core._wants_shadow(device) else None
        return generator

    def __init__(self, device="cpu") -> None:
        pass

    @property
    def device(self) -> torch.device:
        if self.shadow_index is None:
            return torch.device("cpu")
        return torch.device(core._backend.kind, self.shadow_index)


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


def _exchange_device(index: int) -> int:
    """torch.cuda._exchange_device, under `torch.cuda.device(i)` and `device_of(t)`: a CUDA
    build with no GPU (a CI machine) would ask the driver."""
    previous = _state.current
    if index < 0:
        return -1
    _check_ordinal(index)
    _state.current = index
    return previous


def _shadow_device_of(original):
    def device_of(obj):
        return _DeviceContext(obj.get_device()) if type(obj) is ShadowTensor else original(obj)

    return device_of


def _cudnn_is_acceptable(original):
    """The shadow computes on the CPU: no cuDNN for its tensors. (On a CUDA build, an RNN
    asked cuDNN to flatten its weights and failed; seen on an H200 machine.)"""

    def is_acceptable(tensor):
        return False if type(tensor) is ShadowTensor else original(tensor)

    return is_acceptable


def _set_device(device) -> None:
    index = _shadow_index(device)
    _check_ordinal(index)
    _state.current = index


def _synchronize(device=None) -> None:
    _state.counts.syncs += 1


class _Stream:
    """A stream or event under the shadow: work is already done when it is queued."""

    def __init__(self, *args, **kwargs):
        self.device = core._backend.devices[_state.current]

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
    # torch.accelerator's memory statistics (2.8) answer as the backend's own do
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        accelerator[name] = lambda device_index=None: 0
    for name in ("reset_peak_memory_stats", "empty_cache"):
        accelerator[name] = _nothing
    module = getattr(torch, backend.kind)
    patches = {
        module: {name: _answer(function) for name, function in _device_module(backend).items()},
        torch.accelerator: {name: _answer(function) for name, function in accelerator.items()},
    }
    patches[torch.accelerator]["device_index"] = _DeviceContext
    # The machine presented has no other accelerator, also where this one has a real GPU:
    # a shadow Mac on a CUDA machine must not take a script's `cuda` branch.
    if backend.kind != "cuda":
        patches[torch.cuda] = {"is_available": _answer(lambda: False), "device_count": _answer(lambda: 0)}
    if backend.kind != "xpu" and hasattr(torch, "xpu"):
        patches[torch.xpu] = {"is_available": _answer(lambda: False), "device_count": _answer(lambda: 0)}
    if backend.kind != "mps":
        patches[torch.backends.mps] = {"is_available": _answer(lambda: False)}
    if backend.kind == "mps":
        patches[torch.backends.mps] = {"is_available": _answer(lambda: True), "is_built": _answer(lambda: True)}
        return patches
    patches[module]["device"] = _DeviceContext
    patches[module]["Stream"] = patches[module]["Event"] = _Stream
    if backend.kind == "cuda":
        patches[module]["device_of"] = _shadow_device_of(torch.cuda.device_of)
        patches[module]["_exchange_device"] = patches[module]["_maybe_exchange_device"] = _exchange_device
        patches[torch.backends.cudnn] = {"is_acceptable": _cudnn_is_acceptable(torch.backends.cudnn.is_acceptable)}
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
            # The original, less the side streams it copies a host input through
            # (`torch.device(0)` and `torch.cuda.Stream` need a real accelerator).
            ctx.target_gpus = [_get_device_index(device, True) for device in target_gpus]
            ctx.dim = dim
            ctx.input_device = input.get_device() if input.device.type != "cpu" else -1
            outputs = sys.modules["torch.nn.parallel.comm"].scatter(input, ctx.target_gpus, chunk_sizes, dim, None)
            if input.is_complex():
                outputs = tuple(torch.view_as_complex(output) for output in outputs)
            return outputs

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
    comm = {
        "_scatter": _scatter,
        "_gather": _gather,
        "_broadcast_coalesced": _broadcast_coalesced,
        "_broadcast": _broadcast,
    }
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
        return str(
            torch.device(map_location) if not isinstance(map_location, int) else core._backend.devices[map_location]
        )
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
            if target.startswith(core._backend.kind):
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


# Mixed precision -------------------------------------------------------------------------


def _autocast(backend: Backend) -> dict:
    """`torch.autocast("cuda")` casts only CUDA tensors, and the shadow's are CPU tensors
    underneath: the CPU's autocast, in the accelerator's lower precision, runs beside it.
    Its op lists are the CPU's (matmul, linear and convolutions are in both)."""
    autocast = torch.amp.autocast_mode.autocast
    enter, exit_ = autocast.__enter__, autocast.__exit__

    def __enter__(self):
        result = enter(self)
        host = None
        if self.device == backend.kind:  # disabled too: a block that turns it off inside one
            host = torch.autocast("cpu", dtype=self.fast_dtype, enabled=self._enabled, cache_enabled=False)
            host.__enter__()
        self.__dict__.setdefault("_shadow_hosts", []).append(host)
        return result

    def __exit__(self, *exc):
        hosts = self.__dict__.get("_shadow_hosts")
        host = hosts.pop() if hosts else None
        if host is not None:
            host.__exit__(*exc)
        return exit_(self, *exc)

    return {autocast: {"__enter__": __enter__, "__exit__": __exit__}}


# Defaults a script may change: the default tensor type and the default device -----------


def _set_default_tensor_type(original):
    """`torch.set_default_tensor_type(torch.cuda.FloatTensor)`: the default dtype becomes
    float32 and factories build on the current device (torch/csrc/tensor/python_tensor.cpp).
    The real call refuses the shadow's stand-in types, so the host type is set instead
    and the device is remembered here."""

    def set_default_tensor_type(t) -> None:
        name = t if isinstance(t, str) else f"{t.__module__}.{t.__name__}"
        accelerator = name.startswith(f"torch.{core._backend.kind}.")
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
            "Generator": ShadowGenerator,
        },
        torch.Tensor: {
            "pin_memory": lambda self, device=None: self,
            "is_pinned": lambda self, device=None: False,
            "record_stream": lambda self, stream: None,
        },
        torch.autograd.Variable: {"__new__": _variable_new(torch.autograd.Variable.__new__)},
    }
    extra.update(_autocast(backend))
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
    if kind not in BACKENDS:
        raise ValueError(f"kind must be one of {', '.join(BACKENDS)}, not {kind!r}")
    if not 1 <= device_count <= _MAX_DEVICES:
        raise ValueError(f"device_count must be between 1 and {_MAX_DEVICES}")
    previous = (_state.device_count, _state.current, _state.counts, _state.default_index, core._backend, core._special)
    backend = BACKENDS[kind]
    _state.device_count, _state.current, _state.default_index = device_count, 0, None
    _state.counts = counts if counts is not None else DeviceCounts()
    set_default_device = torch.set_default_device
    defaults = (torch.get_default_dtype(), _default_device_context(), set_default_device)
    replaced = []
    core._backend, core._special = backend, _specials(backend)
    core._active += 1
    try:
        for namespace, attributes in _patches(backend).items():
            for name, value in attributes.items():
                replaced.append((namespace, name, namespace.__dict__.get(name, _MISSING)))
                setattr(namespace, name, value)
        with _ShadowMode():
            yield _state.counts
    finally:
        core._active -= 1
        _restore_defaults(*defaults)
        for namespace, name, value in reversed(replaced):
            if value is _MISSING:
                delattr(namespace, name)
            else:
                setattr(namespace, name, value)
        (_state.device_count, _state.current, _state.counts, _state.default_index, core._backend, core._special) = (
            previous
        )


_MISSING = object()
