"""The plugin's marker, for runs where devlint is not installed (no pytest11 entry point)."""

from devlint.harness.pytest_plugin import pytest_configure  # noqa: F401 -- registers the marker
