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
     "torch.amp.autocast_mode.autocast", "torch.distributed.device_mesh.init_device_mesh",
     "torch.distributed.init_device_mesh"}
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
    cpu_alternative: bool = False  # one branch of `"cuda" if c else "cpu"`: a choice, not a hardcode

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


def device_string(node: cst.CSTNode) -> str | None:
    """The device a string names: `"cuda:1"`, or `f"cuda:{rank}"` as `"cuda:{}"` (a
    variable index); None for anything else."""
    if type(node) is cst.FormattedString:
        parts = node.parts
        if len(parts) >= 2 and type(parts[0]) is cst.FormattedStringText and parts[0].value.endswith(":"):
            head = parts[0].value
            if accelerator_type(head) is not None and head.count(":") == 1:
                return head + "{}"
        return None
    return string_value(node)


def torch_device_call(ctx: FileContext, node: cst.CSTNode) -> tuple[str, str, int | None] | None:
    """For `torch.device("cuda", 1)`: ("cuda", '"cuda", 1', 1); None if not an accelerator."""
    if type(node) is not cst.Call or ctx.qualify(node.func) != "torch.device" or not node.args:
        return None
    first = node.args[0]
    if first.keyword is not None and first.keyword.value != "type":
        return None
    literal = device_string(first.value)
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
    return ctx.answer(node, "device_literal", lambda: _device_literal(ctx, node))


def _device_literal(ctx: FileContext, node: cst.CSTNode) -> DeviceLiteral | None:
    if type(node) is cst.SimpleString or type(node) is cst.FormattedString:
        literal = device_string(node)
        if literal is None or accelerator_type(literal) is None:
            return None
        parent = ctx.parent(node)
        if type(parent) is cst.Arg and torch_device_call(ctx, ctx.parent(parent)) is not None:
            return None
        text = (
            node.value
            if type(node) is cst.SimpleString
            else node.start
            + "".join(p.value if type(p) is cst.FormattedStringText else "{...}" for p in node.parts)
            + node.end
        )
        kind, index = accelerator_type(literal), parse_index(literal)
    else:
        described = torch_device_call(ctx, node)
        if described is None:
            return None
        kind, text, index = described
    assert kind is not None
    where = _position(ctx, node)
    position = where.position
    if position is None:
        if type(node) is not cst.Call or type(ctx.parent(node)) in (cst.Comparison, cst.ComparisonTarget):
            return None  # `d == torch.device("cuda")` tests a device; it chooses none
        position = "torch.device"
    return DeviceLiteral(node, text, kind, index, position, where.nested, where.target, where.cpu_alternative)


@dataclass(frozen=True)
class _Position:
    position: str | None
    nested: bool = False
    target: cst.BaseExpression | None = None
    cpu_alternative: bool = False


def _position(ctx: FileContext, node: cst.CSTNode) -> _Position:
    nested = cpu_alternative = False
    child = node
    parent = ctx.parent(child)
    while type(parent) in (cst.IfExp, cst.BooleanOperation):
        if type(parent) is cst.IfExp:
            if child is parent.test:
                return _Position(None)
            other = parent.orelse if child is parent.body else parent.body
            cpu_alternative = cpu_alternative or _is_cpu(ctx, other)
        nested = True
        child, parent = parent, ctx.parent(parent)
    position, target = _position_of(ctx, child, parent)
    return _Position(position, nested, target, cpu_alternative)


def _position_of(
    ctx: FileContext, child: cst.CSTNode, parent: cst.CSTNode | None
) -> tuple[str | None, cst.BaseExpression | None]:
    if type(parent) is cst.Arg:
        call = ctx.parent(parent)
        if type(call) is not cst.Call:
            return None, None
        keyword = parent.keyword.value if parent.keyword is not None else None
        if keyword in DEVICE_KEYWORDS:
            return ("device_type" if keyword == "device_type" else "device"), None
        name = ctx.qualify(call.func)
        if name == "torch.device" and keyword in (None, "type") and call.args[0] is parent:
            return "torch.device", None  # `torch.device("cuda:4" if ... else "cpu")`
        if keyword is not None or parent.star or call.args[0] is not parent:
            return None, None
        if name in _DEVICE_TYPE_FIRST:
            return "device_type", None
        if name in _GENERATOR:
            return "device", None
        if type(call.func) is cst.Attribute and call.func.attr.value == "to" and name is None:
            return "device", None
        return None, None
    if type(parent) is cst.Assign and child is parent.value:
        for target in parent.targets:
            if _is_device_target(ctx, target.target):
                return "assign", target.target
        return None, None
    if type(parent) is cst.AnnAssign and child is parent.value and _is_device_target(ctx, parent.target):
        return "assign", parent.target
    if type(parent) is cst.Param and child is parent.default and is_device_parameter(ctx, parent.name.value):
        return "default", None
    return None, None


def is_device_parameter(ctx: FileContext, name: str) -> bool:
    """`device`, `map_location`, `output_device`, `device_type`: a parameter that takes a
    device. `backend="cuda"` may name a kernel library rather than a device."""
    return (
        name in ("device", "dev", "map_location", ctx.config.device_name)
        or name.endswith("_device")
        or name.startswith("device_")
    )


def _is_cpu(ctx: FileContext, node: cst.BaseExpression) -> bool:
    """`"cpu"` or `torch.device("cpu")`."""
    if type(node) is cst.Call and ctx.qualify(node.func) == "torch.device" and node.args:
        node = node.args[0].value
    literal = string_value(node)
    return literal is not None and literal.split(":", 1)[0] == "cpu"


def _is_device_target(ctx: FileContext, target: cst.BaseExpression) -> bool:
    if type(target) is cst.Name:
        name = target.value
    elif type(target) is cst.Attribute:
        name = target.attr.value
    else:
        return False
    name = name.lower()  # `DEVICE = "cuda"`, `TRAIN_DEVICE`: a constant is a device all the same
    return name in ("device", ctx.config.device_name.lower()) or name.endswith("_device")


_CONFIG_ROOTS = frozenset({"self", "args", "opt", "opts", "cfg", "config", "options", "hparams", "params", "conf"})


def is_device_attribute(node: cst.BaseExpression) -> bool:
    """Is `node` a tensor's `.device` (a torch.device), as in `x.device` or
    `next(model.parameters()).device`? `self.device`, `args.device`, `cfg.model.device` and
    `self.opt.device` are often strings, and are not."""
    if type(node) is not cst.Attribute or node.attr.value != "device":
        return False
    receiver = node.value
    root = receiver
    plain = True  # attributes only so far (`self.opt.device`), no index or call
    while type(root) in (cst.Attribute, cst.Subscript, cst.Call):
        if type(root) is not cst.Attribute:
            plain = False  # `self.opt.param_groups[0]["params"][0].device`: a tensor's
        elif plain and root.attr.value in _CONFIG_ROOTS - {"self", "params"}:
            return False  # `self.opt.device`, `self.cfg.model.device`: a setting
        root = root.value if type(root) is not cst.Call else root.func
    if type(receiver) is cst.Name and receiver.value in _CONFIG_ROOTS:
        return False
    return not (type(receiver) is cst.Attribute and type(root) is cst.Name and root.value in _CONFIG_ROOTS - {"self"})
