"""Availability guards: is this code only reached when an accelerator is present?

`if torch.cuda.is_available():`, `"cuda" if use_cuda else "cpu"`, `if x.is_cuda:`,
`if device.type == "cuda":`, `if not torch.cuda.is_available(): return` before it, a
`skipif(not torch.cuda.is_available())` decorator, and names assigned from any of these.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from devlint.analysis import device_tables as T
from devlint.analysis.tree import dotted_name, string_value


AVAILABILITY_CALLS = frozenset(
    {
        "torch.cuda.is_available", "torch.accelerator.is_available",
        "torch.backends.mps.is_available", "torch.mps.is_available",
        "torch.xpu.is_available", "torch.npu.is_available", "torch.hpu.is_available",
        "torch.cuda.device_count", "torch.accelerator.device_count",
        "torch.cuda.is_initialized",
    }
)  # fmt: skip

_ACCELERATOR_ATTRS = frozenset({"is_cuda", "is_mps", "is_xpu"})


def named_for_cuda(name: str) -> bool:
    """`benchmark_cuda`, `CUDAPrefetcher`, `requires_gpu`: code named for CUDA is CUDA-only
    by intent."""
    lowered = name.lower()
    return "cuda" in lowered or "gpu" in lowered


def accelerator_type(literal: str) -> str | None:
    """`"cuda:1"` -> `"cuda"`; None for `"cpu"`, `"meta"` and anything not a device."""
    kind = literal.split(":", 1)[0].strip()
    return kind if kind in T.ACCELERATOR_TYPES else None


class GuardOracle:
    """Decides whether a test expression implies that an accelerator is present.

    `qualify` resolves import aliases; `guard_names` holds names (and attribute names)
    assigned from availability checks so far.
    """

    def __init__(self, qualify: Callable[[cst.BaseExpression], str | None]) -> None:
        self._qualify = qualify
        self.guard_names: set[str] = set()

    def mentions_guard(self, expr: cst.BaseExpression) -> bool:
        """For assignments: does the value carry availability knowledge at all?"""
        return self.when_true(expr) or self.when_false(expr)

    def when_true(self, expr: cst.BaseExpression) -> bool:
        """True if `expr` being truthy implies an accelerator."""
        if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Not:
            return self.when_false(expr.expression)
        if type(expr) is cst.BooleanOperation:
            if type(expr.operator) is cst.And:
                return self.when_true(expr.left) or self.when_true(expr.right)
            return self.when_true(expr.left) and self.when_true(expr.right)
        if type(expr) is cst.Comparison:
            return self._comparison(expr, positive=True)
        return self._is_check(expr)

    def when_false(self, expr: cst.BaseExpression) -> bool:
        """True if `expr` being falsy implies an accelerator."""
        if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Not:
            return self.when_true(expr.expression)
        if type(expr) is cst.BooleanOperation:
            if type(expr.operator) is cst.And:
                return self.when_false(expr.left) and self.when_false(expr.right)
            return self.when_false(expr.left) or self.when_false(expr.right)
        if type(expr) is cst.Comparison:
            return self._comparison(expr, positive=False)
        return False

    def _is_check(self, expr: cst.BaseExpression) -> bool:
        if type(expr) is cst.Call:
            return self._qualify(expr.func) in AVAILABILITY_CALLS or _is_accelerator_prefix_test(expr)
        if type(expr) is cst.Attribute:
            if expr.attr.value in _ACCELERATOR_ATTRS or expr.attr.value in self.guard_names:
                return True
        if type(expr) is cst.Name:
            return expr.value in self.guard_names
        return False

    def _comparison(self, expr: cst.Comparison, *, positive: bool) -> bool:
        if len(expr.comparisons) != 1:
            return False
        target = expr.comparisons[0]
        op = target.operator
        sides = (expr.left, target.comparator)
        literals = [string_value(side) for side in sides]
        accelerator = any(v is not None and accelerator_type(v) for v in literals)
        cpu = any(v is not None and v.split(":", 1)[0] == "cpu" for v in literals)
        equal = type(op) in (cst.Equal, cst.Is, cst.In)
        unequal = type(op) in (cst.NotEqual, cst.IsNot, cst.NotIn)
        if accelerator:
            return equal if positive else unequal
        if cpu:
            return unequal if positive else equal
        # `torch.cuda.device_count() > 1` and friends
        if positive and type(op) in (cst.GreaterThan, cst.GreaterThanEqual, cst.NotEqual):
            return self._is_check(expr.left)
        return False


def _is_accelerator_prefix_test(call: cst.Call) -> bool:
    """`device.startswith("cuda")`, `str(device).startswith(("cuda", "xpu"))`."""
    func = call.func
    if type(func) is not cst.Attribute or func.attr.value != "startswith" or len(call.args) != 1:
        return False
    prefix = call.args[0].value
    options = [e.value for e in prefix.elements] if type(prefix) is cst.Tuple else [prefix]
    literals = [string_value(o) for o in options]
    return all(v is not None and accelerator_type(v) for v in literals)


_FALLBACK_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError", "TypeError"})


def in_compat_fallback(ancestors: list[cst.CSTNode]) -> bool:
    """Is the innermost node of `ancestors` in code that runs only where a newer API is
    missing? `except (ImportError, AttributeError):` handlers, and the branch of
    `if hasattr(torch.amp, ...)` where the attribute is absent."""
    for child, parent in zip(ancestors[1:], ancestors):
        if type(parent) is cst.ExceptHandler and child is parent.body:
            caught = parent.type
            names = [e.value for e in caught.elements] if type(caught) is cst.Tuple else [caught]
            if caught is None or any((dotted_name(n) or "").rsplit(".", 1)[-1] in _FALLBACK_ERRORS for n in names):
                return True
        elif type(parent) is cst.If:
            test, negated = parent.test, False
            if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
                test, negated = test.expression, True
            is_hasattr = type(test) is cst.Call and dotted_name(test.func) == "hasattr"
            if is_hasattr and child is (parent.body if negated else parent.orelse):
                return True
    return False


def assigned_guard_names(target: cst.BaseExpression) -> list[str]:
    """`use_cuda = ...` -> ["use_cuda"]; `args.cuda = ...` -> ["cuda"]."""
    if type(target) is cst.Name:
        return [target.value]
    if type(target) is cst.Attribute:
        return [target.attr.value]
    return []


def exits_block(stmt: cst.BaseStatement) -> bool:
    """Does this block body end by leaving (`return`, `raise`, `continue`, a skip call)?"""
    if type(stmt) is cst.SimpleStatementLine:
        small = stmt.body[-1]
        if type(small) in (cst.Return, cst.Raise, cst.Continue, cst.Break):
            return True
        if type(small) is cst.Expr and type(small.value) is cst.Call:
            name = dotted_name(small.value.func) or ""
            return name.split(".")[-1] in {"skip", "skipTest", "exit", "_exit"}
    return False
