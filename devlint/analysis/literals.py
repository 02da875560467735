"""Accelerator literals and the device positions they stand in (SPEC §2, DEV1).

An accelerator literal is a string naming a non-CPU device (`"cuda"`, `"cuda:1"`,
`"mps"`) or a `torch.device(...)` call built from one. Where it stands decides what it
is: an argument `device=`, `.to(...)`, an assignment to `device`, a parameter default.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from devlint.analysis.context import FileContext
from devlint.analysis.guards import accelerator_type
from devlint.analysis.tree import int_value, string_value

DEVICE_KEYWORDS = frozenset({"device", "map_location", "device_type"})
_DEVICE_TYPE_FIRST = frozenset(
    {"torch.autocast", "torch.amp.autocast", "torch.amp.GradScaler", "torch.GradScaler",
     "torch.amp.autocast_mode.autocast"}
)  # fmt: skip
_GENERATOR = frozenset({"torch.Generator"})
VARIABLE = -1  # an index given by a variable: `torch.device("cuda", rank)`


@dataclass(frozen=True)
class DeviceLiteral:
    """An accelerator literal found in a device position."""

    unit: cst.BaseExpression  # the string, or the whole torch.device(...) call
    text: str  # the literal as written, for messages
    kind: str  # "cuda", "mps", ...
    index: int | None  # None: no index; VARIABLE: not a literal
    position: str  # "device" | "device_type" | "assign" | "default" | "torch.device"
    nested: bool  # inside a conditional expression or boolean operation
    target: cst.BaseExpression | None = None  # for "assign": the assigned name or attribute

    @property
    def has_other_index(self) -> bool:
        return self.index is not None and self.index not in (0, VARIABLE)


def parse_index(text: str) -> int | None:
    _, sep, index = text.partition(":")
    if not sep:
        return None
    try:
        return int(index)
    except ValueError:
        return VARIABLE


def torch_device_call(ctx: FileContext, node: cst.CSTNode) -> tuple[str, str, int | None] | None:
    """For `torch.device("cuda", 1)`: ("cuda", '"cuda", 1', 1); None if not an accelerator."""
    if not isinstance(node, cst.Call) or ctx.qualify(node.func) != "torch.device" or not node.args:
        return None
    first = node.args[0]
    if first.keyword is not None and first.keyword.value != "type":
        return None
    literal = string_value(first.value)
    if literal is None:
        return None
    kind = accelerator_type(literal)
    if kind is None:
        return None
    index = parse_index(literal)
    if len(node.args) > 1:
        second = node.args[1].value
        value = int_value(second)
        index = value if value is not None else VARIABLE
    return kind, ctx.module.code_for_node(node), index


def device_literal(ctx: FileContext, node: cst.CSTNode) -> DeviceLiteral | None:
    """If `node` (the current node of the walk) is an accelerator literal in a device
    position, describe it. Strings inside `torch.device(...)` are described by the call."""
    if isinstance(node, cst.SimpleString):
        literal = string_value(node)
        if literal is None or accelerator_type(literal) is None:
            return None
        parent = ctx.parent(node)
        if isinstance(parent, cst.Arg) and torch_device_call(ctx, ctx.parent(parent)) is not None:
            return None
        kind, text, index = accelerator_type(literal), node.value, parse_index(literal)
    else:
        described = torch_device_call(ctx, node)
        if described is None:
            return None
        kind, text, index = described
    assert kind is not None
    position, nested, target = _position(ctx, node)
    if position is None:
        if isinstance(node, cst.Call):
            position = "torch.device"
        else:
            return None
    return DeviceLiteral(node, text, kind, index, position, nested, target)


def _position(ctx: FileContext, node: cst.CSTNode) -> tuple[str | None, bool, cst.BaseExpression | None]:
    nested = False
    child = node
    parent = ctx.parent(child)
    while isinstance(parent, (cst.IfExp, cst.BooleanOperation)):
        if isinstance(parent, cst.IfExp) and child is parent.test:
            return None, False, None
        nested = True
        child, parent = parent, ctx.parent(parent)
    if isinstance(parent, cst.Arg):
        call = ctx.parent(parent)
        if not isinstance(call, cst.Call):
            return None, nested, None
        keyword = parent.keyword.value if parent.keyword is not None else None
        if keyword in DEVICE_KEYWORDS:
            return ("device_type" if keyword == "device_type" else "device"), nested, None
        if keyword is None and not parent.star:
            name = ctx.qualify(call.func)
            if name in _DEVICE_TYPE_FIRST and call.args[0] is parent:
                return "device_type", nested, None
            if name in _GENERATOR:
                return "device", nested, None
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "to" and name is None:
                return "device", nested, None
        return None, nested, None
    if isinstance(parent, cst.Assign) and child is parent.value:
        for target in parent.targets:
            if _is_device_target(ctx, target.target):
                return "assign", nested, target.target
        return None, nested, None
    if isinstance(parent, cst.AnnAssign) and child is parent.value and _is_device_target(ctx, parent.target):
        return "assign", nested, parent.target
    if isinstance(parent, cst.Param) and child is parent.default:
        return "default", nested, None
    return None, nested, None


def _is_device_target(ctx: FileContext, target: cst.BaseExpression) -> bool:
    if isinstance(target, cst.Name):
        name = target.value
    elif isinstance(target, cst.Attribute):
        name = target.attr.value
    else:
        return False
    return name in ("device", ctx.config.device_name) or name.endswith("_device")
