"""The device analysis (SPEC §4): where each tensor, module and batch lives.

Rules ask questions; they never re-derive the answers:

    analysis = DeviceAnalysis.of(ctx)
    value = analysis.value_of(node)        # AbstractValue at that point of the program
    conflict = analysis.conflict_at(node)  # two operands on different devices, or None

A function (or the module body) is interpreted once, on first question, over abstract
values in statement order: branches joined, loops run to a fixed point, `self.<attr>`
summarised across the methods of a class. The value of every expression is recorded by
node identity, so a question is a dictionary lookup.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import libcst as cst
from libcst._nodes.internal import CodegenState


if TYPE_CHECKING:
    from devlint.analysis.context import FileContext
    from devlint.analysis.device_eval import ScopeResult


# -- the lattice -----------------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    """`cpu`, `accel(symbol)` or `unknown`.

    `symbol` is the code naming an accelerator device (`device`, `x.device`, `"cuda"`);
    None for an accelerator known only to be one (two symbols joined).
    """

    kind: str  # "cpu" | "accel" | "unknown"
    symbol: str | None = None

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    @property
    def is_accel(self) -> bool:
        return self.kind == "accel"

    @property
    def known(self) -> bool:
        return self.kind != "unknown"

    def __str__(self) -> str:
        if self.is_cpu:
            return "CPU"
        if self.is_accel:
            return self.symbol or "an accelerator"
        return "unknown device"


CPU = Device("cpu")
UNKNOWN_DEVICE = Device("unknown")


def accel(symbol: str | None = None) -> Device:
    return Device("accel", symbol)


def join_devices(a: Device, b: Device) -> Device:
    """Where a value lives after two paths meet: equal, both accelerators, or unknown."""
    if a == b:
        return a
    if a.is_accel and b.is_accel:
        return accel(None)
    return UNKNOWN_DEVICE


def join_symbolic(a: Device, b: Device, symbol: str | None) -> Device:
    """Joining two *device values* (not tensors): `"cuda" if ok else "cpu"` is the binding,
    a symbolic accelerator, not an unknown."""
    if a == b:
        return a
    if a.known and b.known:
        return accel(symbol if a.kind != b.kind else None)
    return UNKNOWN_DEVICE


def disagree(a: Device, b: Device) -> bool:
    """CPU against an accelerator: fails the moment the accelerator is real."""
    return (a.is_cpu and b.is_accel) or (a.is_accel and b.is_cpu)


class Kind(str, enum.Enum):
    TENSOR = "tensor"
    MODULE = "module"
    DATALOADER = "dataloader"
    BATCH = "batch"  # an item of a DataLoader: a tensor or a collection of tensors
    DEVICE = "device"  # a torch.device object
    OTHER = "other"  # known not to be any of the above (numbers, strings, lists ...)
    UNKNOWN = "unknown"


class Source(str, enum.Enum):
    """How a value got its device."""

    FACTORY = "factory"  # torch.ones(...), with or without device=
    MOVE = "move"  # .to(d), .cuda(), .cpu()
    PARAMETER = "parameter"  # a module method's parameter used as a tensor
    LOADER = "loader"  # iterating a DataLoader
    CONSTRUCTION = "construction"  # nn.Linear(...), Net(), DataLoader(...)
    NUMPY = "numpy"  # torch.from_numpy
    LITERAL = "literal"  # a device string or torch.device(...)
    NONE = ""


@dataclass(frozen=True)
class AbstractValue:
    """What the analysis knows of one expression's value at one point of the program.

    `zero_dim`: True (0-dim), False (1-d or more), None (not known). `origin`: the node
    where the device was decided (a factory call, a `.to()`, a parameter), None when
    several paths decided it. `how`: that decision in words, for messages.
    """

    kind: Kind = Kind.UNKNOWN
    device: Device = UNKNOWN_DEVICE
    zero_dim: bool | None = None
    origin: cst.CSTNode | None = None
    source: Source = Source.NONE
    how: str = ""
    is_parameter: bool = False  # an nn.Parameter
    holds_params: bool = False  # a module with parameters or buffers
    stateless: bool = False  # a torch.nn module known to hold neither (ReLU, MSELoss)

    @property
    def is_tensor(self) -> bool:
        return self.kind is Kind.TENSOR

    @property
    def is_module(self) -> bool:
        return self.kind is Kind.MODULE

    @property
    def tensor_like(self) -> bool:
        """Good enough for an operand of arithmetic: a tensor, a batch, or a moved thing."""
        return self.kind in (Kind.TENSOR, Kind.BATCH) or (
            self.kind is Kind.UNKNOWN and self.device.known
        )

    def on(self, device: Device, origin: cst.CSTNode | None, source: Source, how: str) -> AbstractValue:
        return replace(self, device=device, origin=origin, source=source, how=how)

    def join(self, other: AbstractValue) -> AbstractValue:
        if self == other:
            return self
        kind = self.kind if self.kind is other.kind else Kind.UNKNOWN
        if kind in (Kind.DEVICE, Kind.OTHER):
            device = join_symbolic(self.device, other.device, None)
        else:
            device = join_devices(self.device, other.device)
        same_origin = self.origin is other.origin and self.device == other.device
        return AbstractValue(
            kind=kind,
            device=device,
            zero_dim=self.zero_dim if self.zero_dim == other.zero_dim else None,
            origin=self.origin if same_origin else None,
            source=self.source if self.source is other.source else Source.NONE,
            how=self.how if same_origin else "",
            is_parameter=self.is_parameter and other.is_parameter,
            holds_params=self.holds_params and other.holds_params,
            stateless=self.stateless and other.stateless,
        )


UNKNOWN = AbstractValue()
OTHER = AbstractValue(Kind.OTHER)


@dataclass(frozen=True)
class Operand:
    expr: cst.BaseExpression
    value: AbstractValue


@dataclass(frozen=True)
class Conflict:
    """An operation whose operands live on different devices, as PyTorch decides it.

    `cpu` is the operand on the CPU and `other` the one on the accelerator. `kind` is
    "operands" (elementwise or not), "inplace" (the CPU side is the output of an
    in-place operation) or "module" (a module called with a tensor; one side is the
    module).
    """

    node: cst.CSTNode
    cpu: Operand
    other: Operand
    kind: str = "operands"


# -- the analysis ----------------------------------------------------------------------


class DeviceAnalysis:
    """The device analysis of one file, computed lazily, one scope at a time."""

    def __init__(self, ctx: FileContext) -> None:
        from devlint.analysis.device_eval import FileModel

        self.ctx = ctx
        self.model = FileModel(ctx)
        self._lines: dict[int, int] | None = None
        # the answer of `_results` for each innermost function (None: the module body)
        self._results_by_scope: dict[int, tuple[cst.CSTNode | None, list[ScopeResult]]] = {}

    @classmethod
    def of(cls, ctx: FileContext) -> DeviceAnalysis:
        """The analysis of `ctx`'s file, created on first use and kept on the context."""
        analysis = ctx.device_analysis
        if analysis is None:
            analysis = ctx.device_analysis = cls(ctx)
        return analysis

    # -- questions ---------------------------------------------------------------------

    def value_of(self, node: cst.CSTNode) -> AbstractValue:
        """The abstract value of expression `node` (inside the current scope) when it is
        evaluated; UNKNOWN for anything the analysis did not evaluate."""
        for result in self._results():
            value = result.values.get(id(node))
            if value is not None:
                return value
        return UNKNOWN

    def scope(self, scope: cst.FunctionDef | cst.Lambda | cst.Module, enclosing: tuple = ()) -> ScopeResult:
        """The interpretation of one scope, independent of where the walk stands:
        `values` and `conflicts` by node id. `enclosing`: the functions around it."""
        if type(scope) is cst.Module:
            return self.model.module_scope()
        return self.model.scope(scope, list(enclosing))

    def conflict_at(self, node: cst.CSTNode) -> Conflict | None:
        """The device conflict of operation `node` (a binary operation, comparison,
        augmented assignment or call), on any path through the scope."""
        for result in self._results():
            if id(node) in result.values or id(node) in result.conflicts:
                return result.conflicts.get(id(node))
        return None

    def in_current_scope(self, node: cst.CSTNode) -> bool:
        """Was `node` evaluated in the innermost function (or module body) being walked?"""
        return id(node) in self._scope_result().values

    def names_at(self, node: cst.CSTNode) -> dict[str, AbstractValue] | None:
        """The local names (and `self.<attr>`s) bound just before factory call `node`."""
        for result in self._results():
            snapshot = result.snapshots.get(id(node))
            if snapshot is not None:
                return snapshot
        return None

    def is_module_class(self, node: cst.ClassDef, *, strict: bool = False) -> bool:
        """Does this class derive from nn.Module (through local classes, or Lightning)?
        Not strict: a class with a `forward` method and some base also counts."""
        return self.model.is_module_class(node, strict=strict)

    def registered_names(self, node: cst.ClassDef) -> frozenset[str] | None:
        """Names registered as buffers/parameters in the class and its local bases;
        None when a registration uses a name the analysis cannot read."""
        return self.model.registered_names(node)

    def line_of(self, node: cst.CSTNode) -> int:
        """The 1-based line where `node` starts (computed for the whole file on first use)."""
        if self._lines is None:
            state = _LineRecorder(
                default_indent=self.ctx.module.default_indent,
                default_newline=self.ctx.module.default_newline,
            )
            self.ctx.module._codegen(state)
            self._lines = state.lines
        return self._lines.get(id(node), 0)

    def code(self, node: cst.CSTNode, limit: int = 60) -> str:
        text = " ".join(self.ctx.module.code_for_node(node).split())
        return text if len(text) <= limit else text[: limit - 1] + "…"

    # -- scopes ------------------------------------------------------------------------

    def _scope_result(self) -> ScopeResult:
        functions = self.ctx.functions()
        if functions:
            return self.model.scope(functions[0], functions[1:])
        return self.model.module_scope()

    def _results(self) -> list[ScopeResult]:
        """The current scope, then the enclosing ones (decorators and defaults are
        evaluated outside the function that carries them)."""
        innermost = self.ctx.innermost_function()
        key = id(innermost)
        cached = self._results_by_scope.get(key)
        if cached is not None and cached[0] is innermost:
            return cached[1]
        functions = self.ctx.functions()
        if functions and not self.model.is_relevant(functions[0]):
            results = []  # a scope the analysis does not interpret: nothing is known in it
        else:
            results = [self.model.scope(f, functions[i + 1 :]) for i, f in enumerate(functions)]
            results.append(self.model.module_scope())
        self._results_by_scope[key] = (innermost, results)
        return results


class _LineRecorder(CodegenState):
    """Generates the module's code only to learn where each node starts."""

    def __init__(self, default_indent: str, default_newline: str) -> None:
        super().__init__(default_indent=default_indent, default_newline=default_newline)
        self.line = 1
        self.lines: dict[int, int] = {}

    def add_token(self, value: str) -> None:
        self.line += value.count("\n")

    def add_indent_tokens(self) -> None:
        pass

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.lines[id(node)] = self.line

    def pop_trailing_newline(self) -> None:
        pass
