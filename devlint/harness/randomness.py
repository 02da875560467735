"""Device-independent randomness: draw on the CPU generator, then move.

A CUDA run and a CPU run of the same program start from the same numbers only if
both draw them from the CPU generator. `cpu_randomness()` redirects random factories
with an accelerator `device=`, the `*_like` random factories and the in-place random
ops (`normal_`, `uniform_`, ... which `nn.init` uses) on accelerator tensors, and
`F.dropout`, whose CUDA kernel has a generator of its own, also where a default device
the program set (`torch.set_default_device("cuda")`, whose mode lies below this one)
would put a factory or the CPU draw itself on the GPU. On CPU tensors it changes nothing,
so the CPU run needs no such mode.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from devlint.harness.recorder import is_accelerator

_FACTORIES = frozenset({torch.rand, torch.randn, torch.randint, torch.randperm, torch.normal})
_LIKE = frozenset({torch.rand_like, torch.randn_like, torch.randint_like})
_ON_INPUT = frozenset({torch.bernoulli, torch.multinomial, torch.poisson})
_IN_PLACE = frozenset(
    {
        torch.Tensor.normal_,
        torch.Tensor.uniform_,
        torch.Tensor.random_,
        torch.Tensor.bernoulli_,
        torch.Tensor.exponential_,
        torch.Tensor.geometric_,
        torch.Tensor.log_normal_,
        torch.Tensor.cauchy_,
    }
)

# nn.init's random initialisers: a module built on the device (`device=`, or under a
# default device) is initialised through them, and the draw inside is not seen here.
_INIT = frozenset(
    getattr(torch.nn.init, name)
    for name in (
        "uniform_",
        "normal_",
        "trunc_normal_",
        "xavier_uniform_",
        "xavier_normal_",
        "kaiming_uniform_",
        "kaiming_normal_",
        "orthogonal_",
        "sparse_",
    )
)


class _CpuRandomness(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if kwargs.get("generator") is not None:
            return func(*args, **kwargs)
        if func in _FACTORIES and "device" not in kwargs and not _has_tensors(args):
            # Where a factory without `device=` builds: a default device the program set
            # (its mode lies below this one) or a CUDA default tensor type.
            kwargs["device"] = torch.empty(0).device
        if func in _FACTORIES and is_accelerator(kwargs.get("device")):
            device = kwargs["device"]
            requires_grad = kwargs.pop("requires_grad", False)
            drawn = func(*args, **dict(kwargs, device="cpu")).to(device)
            return drawn.requires_grad_(requires_grad) if requires_grad else drawn
        if func in _LIKE and args and is_accelerator(kwargs.get("device", args[0].device)):
            device = kwargs.pop("device", args[0].device)
            return func(args[0].cpu(), *args[1:], **kwargs).to(device)
        if func in _ON_INPUT and args and is_accelerator(args[0].device):
            return func(args[0].cpu(), *args[1:], **kwargs).to(args[0].device)
        if func in _IN_PLACE and is_accelerator(args[0].device):
            target = args[0]
            drawn = torch.empty(target.shape, dtype=target.dtype, device="cpu")
            func(drawn, *args[1:], **kwargs)
            with torch.no_grad():
                target.copy_(drawn)
            return target
        if func in _INIT:
            target = args[0] if args else kwargs.get("tensor")
            if isinstance(target, torch.Tensor) and is_accelerator(target.device):
                host = torch.empty(target.shape, dtype=target.dtype, device="cpu")
                func(host, *args[1:], **{name: value for name, value in kwargs.items() if name != "tensor"})
                with torch.no_grad():
                    target.copy_(host)
                return target
        if func is F.dropout and args and is_accelerator(args[0].device):
            return _dropout(*args, **kwargs)
        return func(*args, **kwargs)


def _has_tensors(args) -> bool:
    return any(isinstance(arg, torch.Tensor) for arg in args)


def _dropout(input, p=0.5, training=True, inplace=False):
    """CPU dropout's own arithmetic (a Bernoulli mask scaled by 1/(1-p)), drawn on the CPU."""
    if not training or p == 0:
        return input
    if p == 1:
        return input.mul_(0) if inplace else input * 0
    noise = torch.empty(input.shape, dtype=input.dtype, device="cpu").bernoulli_(1 - p).div_(1 - p).to(input.device)
    return input.mul_(noise) if inplace else input * noise


@contextlib.contextmanager
def cpu_randomness() -> Iterator[None]:
    """Make random numbers on accelerators come from the CPU generator."""
    with _CpuRandomness():
        yield
