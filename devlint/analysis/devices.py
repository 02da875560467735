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

from typing import TYPE_CHECKING

import libcst as cst
from libcst._nodes.internal import CodegenState

from devlint.analysis.lattice import UNKNOWN, AbstractValue, Conflict, Source
from devlint.analysis.tree import dotted_name


if TYPE_CHECKING:
    from devlint.analysis.context import FileContext
    from devlint.analysis.contexts import CallRecord
    from devlint.analysis.interpreter import ScopeResult


# -- the analysis ----------------------------------------------------------------------


class DeviceAnalysis:
    """The device analysis of one file, computed lazily, one scope at a time."""

    def __init__(self, ctx: FileContext) -> None:
        from devlint.analysis.model import FileModel

        self.ctx = ctx
        self.model = FileModel(ctx)
        self._lines: dict[int, int] | None = None
        # the answer of `_results` for each innermost function (None: the module body)
        self._results_by_scope: dict[int, tuple[cst.CSTNode | None, list[ScopeResult]]] = {}
        self._left_on_cpu: dict[int, list[tuple[Conflict, cst.CSTNode]]] | None = None
        self._passed: dict[int, Conflict | None] = {}  # by call: see `_passed_conflict`
        self._records: dict[int, tuple[ScopeResult, dict[int, CallRecord]]] = {}  # a scope's calls, by call

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
                found = result.conflicts.get(id(node))
                if found is None and type(node) is cst.Call and result.calls:
                    found = self._passed_conflict(result, node)
                return found
        return None

    def _passed_conflict(self, result: ScopeResult, node: cst.Call) -> Conflict | None:
        """A CPU tensor the call hands to a function of the file, where it meets an
        accelerator operand (`FileModel.passed_conflicts`); asked once per call."""
        key = id(node)
        if key not in self._passed:
            record = self.record_of(result, node)
            caller = self.ctx.innermost_function()
            found = []
            if record is not None and (caller is None or type(caller) is cst.FunctionDef):
                found = self.model.passed_conflicts(record, result.values, caller)
            self._passed[key] = found[0] if found else None
        return self._passed[key]

    def record_of(self, result: ScopeResult, node: cst.Call) -> CallRecord | None:
        """The call of a function of the file that `node` is, in `result`'s scope."""
        held = self._records.get(id(result))
        if held is None or held[0] is not result:
            held = self._records[id(result)] = (result, {id(record.call): record for record in result.calls})
        return held[1].get(id(node))

    def in_current_scope(self, node: cst.CSTNode) -> bool:
        """Was `node` evaluated in the innermost function (or module body) being walked?"""
        return id(node) in self._scope_result().values

    def names_at(self, node: cst.CSTNode) -> dict[str, AbstractValue] | None:
        """The local names (and `self.<attr>`s) bound just before factory call `node`."""
        for result in self._results():
            snapshot = result.snapshots.get(id(node))
            if snapshot is not None:
                params, mark = snapshot
                return {**params, **mark.names()}
        return None

    def models_left_on_cpu(self) -> dict[int, list[tuple[Conflict, cst.CSTNode]]]:
        """Every call of a model built on the CPU with an accelerator tensor, in the
        whole file, by the model's construction: (the conflict, the scope it is in)."""
        if self._left_on_cpu is None:
            uses: dict[int, list[tuple[Conflict, cst.CSTNode]]] = {}
            scopes = [(self.ctx.module, ()), *self.ctx.tree.functions(self.ctx.module)]
            for scope, enclosing in scopes:
                for conflict in self.scope(scope, enclosing).conflicts.values():
                    cpu = conflict.cpu.value
                    if conflict.kind == "module" and cpu.is_module and cpu.source is Source.CONSTRUCTION:
                        if cpu.origin is not None:
                            uses.setdefault(id(cpu.origin), []).append((conflict, scope))
                        else:  # `self.model`, built by one of several constructions
                            for origin in self._attribute_constructions(conflict.cpu.expr, scope):
                                uses.setdefault(id(origin), []).append((conflict, scope))
            self._left_on_cpu = uses
        return self._left_on_cpu

    def _attribute_constructions(self, expr: cst.BaseExpression, scope: cst.CSTNode) -> list[cst.Call]:
        """The models `self.<attr>` (`expr`, in method `scope`) is built as, where each
        assignment of the attribute in the class builds one on the CPU (`if name ==
        "WaveMix": self.model = WaveMix() elif ...: self.model = SpinalVGG()`)."""
        if type(expr) is not cst.Attribute or type(expr.value) is not cst.Name or type(scope) is not cst.FunctionDef:
            return []
        params = scope.params.params
        if not params or params[0].name.value != expr.value.value:
            return []
        cls = self.class_of(scope)
        if cls is None:
            return []
        key = f"{expr.value.value}.{expr.attr.value}"
        built = []
        for method, enclosing in self.ctx.tree.functions(cls):
            if type(method) is not cst.FunctionDef:
                continue
            for node in self.ctx.tree.walk_scope(method):
                if type(node) is not cst.Assign or not any(
                    type(t.target) is cst.Attribute and dotted_name(t.target) == key for t in node.targets
                ):
                    continue
                value = self.scope(method, enclosing).values.get(id(node.value), UNKNOWN)
                if not (value.is_module and value.origin is node.value and value.source is Source.CONSTRUCTION):
                    return []
                if not (value.device.is_cpu and value.holds_params):
                    return []
                built.append(node.value)
        return built if len(built) > 1 else []

    def local_class(self, name: str) -> cst.ClassDef | None:
        """The class the file defines under `name` (the first one), or None."""
        return self.model.classes.get(name)

    def class_of(self, method: cst.FunctionDef) -> cst.ClassDef | None:
        """The class whose body defines `method` (directly, or under `if`/`try`), or None."""
        return self.model.class_of.get(id(method))

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
        results = [self.model.scope(f, functions[i + 1 :]) for i, f in enumerate(functions)]
        if results and not results[0].interpreted:
            results = []  # a scope the analysis does not interpret: nothing is known in it
        else:
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
