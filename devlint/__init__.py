"""devlint: find and fix PyTorch code that only runs on one kind of machine."""

from __future__ import annotations

__version__ = "0.1.0"

from devlint.config import Config  # noqa: E402
from devlint.diagnostics import Diagnostic, Edit, Fix, Safety  # noqa: E402
from devlint.engine import FixResult, check_source, fix_source  # noqa: E402

__all__ = ["Config", "Diagnostic", "Edit", "Fix", "FixResult", "Safety", "__version__", "check_source", "fix_source"]
