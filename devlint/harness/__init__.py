"""The runtime harness behind `devlint verify`: the only part of devlint that imports torch.

`shadow_accelerator()` is imported lazily, so that `devlint.harness.cli` can say
"install devlint[harness]" instead of failing on `import torch`.
"""

__all__ = ["shadow_accelerator"]


def __getattr__(name: str):
    if name == "shadow_accelerator":
        from devlint.harness.machine import shadow_accelerator

        return shadow_accelerator
    raise AttributeError(f"module 'devlint.harness' has no attribute {name!r}")
