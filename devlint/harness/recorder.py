"""What a run did with its devices: torch calls per device, mixed-device calls, copies, syncs.

Counting happens once per torch call (a function mode), not once per aten op: a
dispatch mode costs about 10 µs an op, which would swamp the small ops of the programs
the harness runs. The shadow accelerator counts into a `DeviceCounts` itself; runs on
real devices use `recording()`. `torch.tensor(data, device=...)` copies host data
straight into device memory with no aten copy op, which is one more reason to count at
the function level. Which calls make the host wait is read from the aten ops' own tags.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator

import torch
from torch.overrides import TorchFunctionMode

_SYNC_TAGS = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape)
_HOST_DATA_FACTORIES = frozenset({torch.tensor, torch.as_tensor, torch.asarray})
# Python entry points whose aten op carries no tag of its own.
_SYNCING_METHODS = {
    "item": "_local_scalar_dense",
    "__bool__": "is_nonzero",
    "__float__": "_local_scalar_dense",
    "__int__": "_local_scalar_dense",
    "__index__": "_local_scalar_dense",
    "tolist": "_local_scalar_dense",
    "__getitem__": "index",
    "__setitem__": "index_put",
}
_syncs_by_function: dict = {}


@dataclass
class DeviceCounts:
    ops: Counter = field(default_factory=Counter)
    mixed: int = 0
    host_to_device: int = 0
    device_to_host: int = 0
    syncs: int = 0

    def to_json(self) -> dict:
        return {
            "ops": dict(sorted(self.ops.items())),
            "mixed": self.mixed,
            "host_to_device": self.host_to_device,
            "device_to_host": self.device_to_host,
            "syncs": self.syncs,
        }


def _tagged_as_syncing(function) -> bool:
    """Whether the aten op behind a torch function is tagged data-dependent."""
    name = getattr(function, "__name__", "")
    name = _SYNCING_METHODS.get(name, name)
    if name == "is_nonzero":
        return True
    packet = getattr(torch.ops.aten, name, None) if name and not name.startswith("__") else None
    if packet is None:
        return False
    try:
        overloads = [getattr(packet, overload) for overload in packet.overloads()]
    except (AttributeError, RuntimeError):
        return False
    return any(tag in _SYNC_TAGS for op in overloads for tag in op.tags)


def call_syncs(function, args) -> bool:
    """Whether this call, on an accelerator, makes the host wait for the device.

    `.item()` and friends (`data_dependent_output`), `nonzero` and `masked_select`
    (`dynamic_output_shape`), and indexing with a boolean mask (integer indexing shares
    the aten op and its tag, but its output shape is known without a sync).
    """
    syncs = _syncs_by_function.get(function)
    if syncs is None:
        syncs = _syncs_by_function[function] = _tagged_as_syncing(function)
    if not syncs:
        return False
    name = getattr(function, "__name__", "")
    if name in ("__getitem__", "__setitem__"):
        return _has_mask(args[1] if len(args) > 1 else None)
    return True


def _has_mask(index) -> bool:
    if isinstance(index, torch.Tensor):
        return index.dtype in (torch.bool, torch.uint8)
    if isinstance(index, (tuple, list)):
        return any(_has_mask(item) for item in index)
    return False


def is_accelerator(device) -> bool:
    if device is None:
        return False
    if isinstance(device, int):
        return True
    return torch.device(device).type not in ("cpu", "meta")


class _Recorder(TorchFunctionMode):
    def __init__(self, counts: DeviceCounts):
        super().__init__()
        self.counts = counts

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        devices = set()
        _collect_devices(args, devices)
        if kwargs:
            _collect_devices(kwargs.values(), devices)
        target = kwargs.get("device")
        if not devices and target is None:
            return func(*args, **kwargs)
        counts = self.counts
        if func in _HOST_DATA_FACTORIES and is_accelerator(target):
            counts.host_to_device += 1
        result = func(*args, **kwargs)
        if not devices:
            counts.ops[str(torch.device(target))] += 1
            return result
        if type(result) is torch.Tensor and result.device not in devices:
            _count_copy(counts, next(iter(devices)), result.device)
        elif func is torch.Tensor.copy_:
            _count_copy(counts, args[1].device, args[0].device)
        elif func is torch.Tensor.tolist and is_accelerator(args[0].device):
            _count_copy(counts, args[0].device, "cpu")
        elif len(devices) > 1:
            counts.mixed += 1
        device = next(iter(devices)) if len(devices) == 1 else max(devices, key=is_accelerator)
        counts.ops[str(device)] += 1
        if device.type != "cpu" and call_syncs(func, args):
            counts.syncs += 1
        return result


def _collect_devices(values, devices: set) -> None:
    for value in values:
        kind = type(value)
        if kind is list or kind is tuple:
            _collect_devices(value, devices)
        elif isinstance(value, torch.Tensor):
            devices.add(value.device)


def _count_copy(counts: DeviceCounts, source, target) -> None:
    if is_accelerator(target) and not is_accelerator(source):
        counts.host_to_device += 1
    elif is_accelerator(source) and not is_accelerator(target):
        counts.device_to_host += 1
        counts.syncs += 1


@contextlib.contextmanager
def recording(counts: DeviceCounts) -> Iterator[DeviceCounts]:
    """Count what the code inside does with its devices, on real CPU or CUDA tensors."""
    with _Recorder(counts):
        yield counts
