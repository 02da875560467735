"""Rules register themselves by subclassing `Rule`; importing this package loads them all."""

from __future__ import annotations

from devlint.rules import base
from devlint.rules.base import REGISTRY, Rule

_LOADED = False


def all_rules() -> list[type[Rule]]:
    """Every rule class, sorted by code."""
    global _LOADED
    if not _LOADED:
        import importlib
        import pkgutil

        for info in pkgutil.iter_modules(__path__):
            if info.name != "base":
                importlib.import_module(f"{__name__}.{info.name}")
        _LOADED = True
    return [REGISTRY[code] for code in sorted(REGISTRY)]


__all__ = ["REGISTRY", "Rule", "all_rules", "base"]
