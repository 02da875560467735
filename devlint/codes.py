"""Rule families, known without loading the rules (a cached run never imports libcst).

The one place that says which families run by default: the configuration's default
selection, each rule's `default`, and the flake8 plugin's default ignore list derive from
it.
"""

from __future__ import annotations

FAMILIES = {
    "DEV0": "files that cannot be checked",
    "DEV1": "non-portable device selection",
    "DEV2": "tensors on different devices",
    "DEV3": "models, batches and checkpoints left behind",
    "DEV4": "device performance",
    "DEV5": "accelerator-agnostic modernisation",
}
OPT_IN = frozenset({"DEV4", "DEV5"})  # run only when selected
DEFAULT_SELECT = tuple(family for family in FAMILIES if family not in OPT_IN)


def is_default(code: str) -> bool:
    """Does rule `code` run without being selected?"""
    return code[:4] not in OPT_IN
