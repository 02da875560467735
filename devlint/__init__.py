"""devlint: find and fix PyTorch code that only runs on one kind of machine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from devlint.config import Config  # noqa: E402
from devlint.diagnostics import Diagnostic, Edit, Fix, Safety  # noqa: E402

if TYPE_CHECKING:
    from devlint.engine import FixResult, check_source, fix_source

_ENGINE = ("FixResult", "check_source", "fix_source")


def __getattr__(name: str) -> Any:
    # The engine (and libcst) load on first use, so a cached run never pays for them.
    if name in _ENGINE:
        from devlint import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'devlint' has no attribute {name!r}")


__all__ = ["Config", "Diagnostic", "Edit", "Fix", "FixResult", "Safety", "__version__", "check_source", "fix_source"]
