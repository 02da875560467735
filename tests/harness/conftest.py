"""The plugin's fixture and marker, for runs where devlint is not installed (no pytest11 entry point)."""

from devlint.harness.pytest_plugin import pytest_configure, shadow_cuda, shadow_mps

__all__ = ["pytest_configure", "shadow_cuda", "shadow_mps"]
