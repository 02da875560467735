"""The first torch release of each device-neutral API a fix may write.

A fix that writes one of these checks it against `torch-version` (the oldest torch the
code must run on). One table, shared by DEV106 and DEV5; each row says where the
release was read.
"""

from __future__ import annotations

_NOTES_2_6 = "PyTorch 2.6 release notes: torch.accelerator (is_available, current_accelerator, ...)"
_GENERIC_STREAMS = "pytorch/pytorch#123611 (device-generic torch.Stream/torch.Event, April 2024): first in 2.4"
_NOTES_2_8 = "PyTorch 2.8 release notes / docs torch.accelerator.memory: memory_* added"

# API -> (first release, source)
FIRST_RELEASE: dict[str, tuple[tuple[int, int], str]] = {
    "torch.accelerator.is_available": ((2, 6), _NOTES_2_6),
    "torch.accelerator.current_accelerator": ((2, 6), _NOTES_2_6),
    "torch.accelerator.device_count": ((2, 6), _NOTES_2_6),
    "torch.accelerator.set_device_index": ((2, 6), _NOTES_2_6),
    "torch.accelerator.current_device_index": ((2, 6), _NOTES_2_6),
    "torch.accelerator.synchronize": ((2, 6), _NOTES_2_6),
    "torch.accelerator.current_stream": ((2, 6), _NOTES_2_6),
    "torch.accelerator.set_stream": ((2, 6), _NOTES_2_6),
    "torch.accelerator.device_index": ((2, 7), "docs torch.accelerator.device_index: context manager, 2.7"),
    "torch.accelerator.memory_allocated": ((2, 8), _NOTES_2_8),
    "torch.accelerator.max_memory_allocated": ((2, 8), _NOTES_2_8),
    "torch.accelerator.memory_reserved": ((2, 8), _NOTES_2_8),
    "torch.accelerator.max_memory_reserved": ((2, 8), _NOTES_2_8),
    "torch.accelerator.reset_peak_memory_stats": ((2, 8), _NOTES_2_8),
    "torch.accelerator.empty_cache": ((2, 8), _NOTES_2_8),
    "torch.Stream": ((2, 4), _GENERIC_STREAMS),
    "torch.Event": ((2, 4), _GENERIC_STREAMS),
    "torch.distributed.get_default_backend_for_device": (
        (2, 6),
        "PyTorch 2.6 release notes, distributed: get_default_backend_for_device",
    ),
}


def first_release(api: str) -> tuple[int, int]:
    """The first torch release that has `api` (a qualified name from the table)."""
    return FIRST_RELEASE[api][0]


def available(api: str, torch_version: tuple[int, int]) -> bool:
    """May a fix write `api` for code that must run on `torch_version`?"""
    return api in FIRST_RELEASE and torch_version >= first_release(api)


def release_text(api: str) -> str:
    major, minor = first_release(api)
    return f"{major}.{minor}"
