"""pytest plugin: `shadow_cuda` runs a test as if a CUDA GPU were present, `shadow_mps` as
if on a Mac (an accelerator that is not CUDA: `torch.cuda.is_available()` is False).

    def test_training_step(shadow_cuda):
        model = Net().to("cuda")
        ...
        assert shadow_cuda.ops["cuda:0"] > 0

Mixing devices raises the error a GPU machine raises, so CPU-only CI catches the bugs
that otherwise show up on the first GPU run. `@pytest.mark.shadow_cuda(device_count=2)`
simulates more than one GPU.
"""

from __future__ import annotations

import pytest


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "shadow_cuda(device_count=1): how many GPUs the shadow_cuda fixture simulates")


@pytest.fixture
def shadow_cuda(request):
    """The test body sees `device_count` CUDA devices; yields the run's DeviceCounts."""
    from devlint.harness.machine import shadow_accelerator

    marker = request.node.get_closest_marker("shadow_cuda")
    device_count = marker.kwargs.get("device_count", 1) if marker else 1
    with shadow_accelerator(device_count=device_count) as counts:
        yield counts


@pytest.fixture
def shadow_mps():
    """The test body sees an Apple GPU (`mps:0`) and no CUDA; yields the run's DeviceCounts."""
    from devlint.harness.machine import shadow_accelerator

    with shadow_accelerator("mps") as counts:
        yield counts
