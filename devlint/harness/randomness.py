"""Device-independent randomness: draw on the CPU generator, then move.

A CUDA run and a CPU run of the same program start from the same numbers only if
both draw them from the CPU generator. `cpu_randomness()` redirects random factories
with an accelerator `device=`, the `*_like` random factories and the in-place random
ops (`normal_`, `uniform_`, ... which `nn.init` uses) on accelerator tensors, and
`F.dropout`, whose CUDA kernel has a generator of its own. On CPU tensors it changes
nothing, so the CPU run needs no such mode.
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


class _CpuRandomness(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if kwargs.get("generator") is not None:
            return func(*args, **kwargs)
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
            drawn = torch.empty(target.shape, dtype=target.dtype)
            func(drawn, *args[1:], **kwargs)
            with torch.no_grad():
                target.copy_(drawn)
            return target
        if func is F.dropout and args and is_accelerator(args[0].device):
            return _dropout(*args, **kwargs)
        return func(*args, **kwargs)


def _dropout(input, p=0.5, training=True, inplace=False):
    """CPU dropout's own arithmetic (a Bernoulli mask scaled by 1/(1-p)), drawn on the CPU."""
    if not training or p == 0:
        return input
    if p == 1:
        return input.mul_(0) if inplace else input * 0
    noise = torch.empty(input.shape, dtype=input.dtype).bernoulli_(1 - p).div_(1 - p).to(input.device)
    return input.mul_(noise) if inplace else input * noise


@contextlib.contextmanager
def cpu_randomness() -> Iterator[None]:
    """Make random numbers on accelerators come from the CPU generator."""
    with _CpuRandomness():
        yield
