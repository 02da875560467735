"""File-wide facts the device analysis shares across scopes, computed once: the file's
classes, which are nn.Modules, what they register and own, and the summary of
`self.<attr>` across a class's methods.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import libcst as cst

from devlint.analysis import device_tables as T
from devlint.analysis.lattice import (
    CPU,
    NO_ITEMS,
    NONE,
    OTHER,
    UNKNOWN,
    UNKNOWN_DEVICE,
    AbstractValue,
    Conflict,
    Device,
    Kind,
    Operand,
    accel,
    is_constant,
)
from devlint.analysis.tree import (
    assignment_targets,
    bound_names,
    call_parameters,
    decorator_names,
    dotted_name,
    innermost_call,
    keyword_arg,
    move_target,
    positional_args,
    statement_suites,
    statements,
    string_value,
)
from devlint.analysis.calls import is_true_arg
from devlint.analysis.context import FileContext
from devlint.analysis.guards import Implication, accelerator_type
from devlint.analysis.contexts import ENTRY_POINTS, CallContext, CallContexts, CallRecord, matters, self_name
from devlint.analysis.interpreter import ScopeEvaluator, ScopeResult, State, evident_modules
from devlint.analysis.relevance import (
    RelevanceGate,
    _self_assigning_statements,
    _self_assignments,
    _self_attributes_assigned,
    _self_targets,
)


# CPU seconds the device analysis may spend on one file before it stops (a generated
# module of a million lines must not stall CI); what it did not reach stays unknown.
ANALYSIS_BUDGET = 60.0

# Decorators that leave what a function returns as it is: its summary holds at a call.
_TRANSPARENT_DECORATORS = frozenset(
    {
        "staticmethod", "classmethod", "torch.no_grad", "no_grad", "torch.inference_mode", "inference_mode",
        "torch.enable_grad", "functools.lru_cache", "lru_cache", "functools.cache", "cache",
        # Streamlit's caches hand back what the function returned (a model loaded once per app)
        "st.cache", "st.cache_resource", "st.cache_data", "st.experimental_singleton", "st.experimental_memo",
        "streamlit.cache", "streamlit.cache_resource", "streamlit.cache_data",
    }
)  # fmt: skip


@dataclass(frozen=True)
class CallRerun:
    """A function interpreted with one call's arguments (`result`), beside its
    interpretation for any caller (`generic`)."""

    result: ScopeResult
    generic: ScopeResult


# how deep `returns_for_call` follows a function's calls of other functions of the file
# (`extract(img)` calls `crop(img)`, which calls `resize(img)`)
_RERUN_DEPTH = 3


_OTHER_ACCELERATOR_MODULES = ("torch.backends.mps", "torch.mps", "torch.xpu", "torch.accelerator", "torch.npu")


def _parameters_given(helper: cst.FunctionDef, call: cst.Call, names: frozenset[str]) -> frozenset[str]:
    """The parameters of `helper` that `call` (`self.helper(...)`) fills with one of `names`."""
    positional = call_parameters(helper, True)
    given = set()
    for index, arg in enumerate(call.args):
        if arg.star or dotted_name(arg.value) not in names:
            continue
        if arg.keyword is not None:
            given.add(arg.keyword.value)
        elif index < len(positional):
            given.add(positional[index].name.value)
    return frozenset(given)


class FileModel(RelevanceGate, CallContexts):
    """File-wide facts the scopes share, computed once."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._other_accelerators: bool | None = None
        self.imports = ctx.imports
        self._started = time.process_time()
        self.exhausted = False  # the budget ran out: some scopes were left unknown
        self.ticks = 0  # statements interpreted, to look at the clock now and then
        self.classes: dict[str, cst.ClassDef] = {}
        self.class_of: dict[int, cst.ClassDef] = {}
        self.sets_default_device = False
        self._scopes: dict[int, ScopeResult] = {}
        self._module: ScopeResult | None = None
        self._module_classes: dict[tuple[int, bool], bool] = {}
        self._summaries: dict[int, dict[str, AbstractValue]] = {}
        self._evident: dict[int, frozenset[str]] = {}
        self._registered: dict[int, frozenset[str] | None] = {}
        self._holds_params: dict[int, bool] = {}
        self._relevant: dict[int, bool] = {}
        self._passed_on: dict[int, tuple | None] = {}
        self._forward_tensor: dict[int, str] = {}
        self._relevant_globals: frozenset[str] | None = None
        self._source_callables: tuple[frozenset[str], frozenset[str], frozenset[str]] | None = None
        self.functions: dict[str, cst.FunctionDef | None] = {}  # module-level defs (None: defined twice)
        self._top_classes: set[int] = set()
        self._module_running = False
        self._module_now: State | None = None  # the module body's names at the call it is making
        self._early_scopes: dict[tuple[int, int, int], ScopeResult] = {}
        self._running: set[int] = set()  # scopes being interpreted (a call back into one is unknown)
        self._per_call = 0  # how deep `returns_for_call` interpretations are nested
        self._per_calls = 0  # how many this file has run
        self._changed: dict[int, frozenset[str] | None] = {}
        self._setters_outside: dict[str, frozenset[int]] | None = None
        self._cuda_types: frozenset[str] | None = None
        self._cuda_default: bool | None = None
        self._calls: dict[int, list] | None = None  # see CallContexts.calls_of
        self._contexts: dict[int, object] = {}
        self._contexts_running: set[int] = set()
        self._specialized: dict[int, ScopeResult] = {}
        self._init_values: dict[int, dict[str, AbstractValue]] = {}  # what a class's `__init__` leaves
        self._setters: dict[tuple[int, str], frozenset[int]] = {}  # see `first_call_value`
        self._kept: dict[tuple[int, str], bool] = {}  # see `kept_by_forward`
        self._settings: dict[tuple[int, str], bool] = {}  # see `configuration`
        self._called: dict[int, frozenset[str]] = {}  # see `_called_attributes`
        self._others: frozenset[str] | None = None  # see `_set_on_others`
        self._moved_globals: frozenset[str] | None = None  # see `moved_in_functions`
        self._globals_declared: dict[str, list[cst.FunctionDef]] | None = None  # see `lazy_global`
        self._assigned_names: dict[int, frozenset[str]] = {}  # see `assigned_names`
        # by nested function: (from a walk with call contexts?, the enclosing names it reads
        # that the enclosing function binds once, as they are where it is defined)
        self.closures: dict[int, tuple[bool, dict[str, AbstractValue]]] = {}
        self._binding_spans: dict[int, dict[str, list]] = {}  # see `settled_before`
        self._nonlocals: dict[int, frozenset[str]] = {}  # see `nonlocal_names`
        self._walks_submodules: bool | None = None  # see `walks_submodules`
        self._formatted: frozenset[str] | None = None  # see `formatted_on_device`
        # see `rerun_for_call`: by call and the caller's values (kept, so that their id stays theirs)
        self._reruns: dict[tuple[int, int], tuple[dict, CallRerun | None]] = {}
        self._method_names: dict[str, cst.FunctionDef] | None = None
        self._implications: dict[int, Implication] = {}
        self._building = 0  # class summaries being built
        self._provisional: dict[int, ScopeResult] = {}  # scopes interpreted meanwhile
        self._index()

    def _index(self) -> None:
        """Classes, methods, and whether the default device is ever changed: statements
        only, not expressions, since that is where they stand."""
        for stmt in self.ctx.module.body:
            if type(stmt) is cst.FunctionDef:
                name = stmt.name.value
                self.functions[name] = None if name in self.functions else stmt
            elif type(stmt) is cst.ClassDef:
                self._top_classes.add(id(stmt))
        stack: list[cst.CSTNode] = list(self.ctx.module.body)
        while stack:
            stmt = stack.pop()
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Expr and type(small.value) is cst.Call:
                        name = dotted_name(small.value.func) or ""
                        if name.endswith(("set_default_device", "set_default_tensor_type")):
                            self.sets_default_device = True
                continue
            if type(stmt) is cst.ClassDef:
                self.classes.setdefault(stmt.name.value, stmt)
                for method in self._methods(stmt):
                    self.class_of[id(method)] = stmt
            for suite in statement_suites(stmt):
                if type(suite) is cst.IndentedBlock:
                    stack.extend(suite.body)
                elif type(suite) is cst.SimpleStatementSuite:
                    stack.append(cst.SimpleStatementLine(body=suite.body))

    @staticmethod
    def _methods(node: cst.ClassDef) -> list[cst.FunctionDef]:
        methods = []
        stack = list(node.body.body) if type(node.body) is cst.IndentedBlock else []
        while stack:
            stmt = stack.pop(0)
            if type(stmt) is cst.FunctionDef:
                methods.append(stmt)
            elif type(stmt) in (cst.If, cst.Try) and type(stmt.body) is cst.IndentedBlock:
                stack.extend(stmt.body.body)
        return methods

    def qualify(self, node: cst.BaseExpression, shadowed: frozenset[str]) -> str | None:
        return self.imports.qualify(node, shadowed)

    # -- scopes ------------------------------------------------------------------------

    def out_of_time(self) -> bool:
        """Has this file's analysis used up its budget (ANALYSIS_BUDGET seconds)? Then
        the scopes not yet interpreted are left unknown, and `exhausted` says so."""
        if not self.exhausted and time.process_time() - self._started > ANALYSIS_BUDGET:
            self.exhausted = True
        return self.exhausted

    def scope(self, function: cst.FunctionDef | cst.Lambda, enclosing: list) -> ScopeResult:
        """The interpretation of `function` the rules see: with what the file's calls pass
        to it (`contexts.py`) where they pass anything the analysis can use."""
        if enclosing and type(enclosing[0]) is cst.FunctionDef and id(function) not in self.closures:
            # a nested function: the walk of the function around it records what it closes over
            self.scope(enclosing[0], enclosing[1:])
        if type(function) is cst.FunctionDef and not self._module_running and self._takes_context(function):
            found = self._specialized.get(id(function))
            if found is not None:
                return found
            context = self.context_of(function)
            if context is not None and id(function) not in self._running and not self.out_of_time():
                self._running.add(id(function))
                try:
                    found = ScopeEvaluator(self, function, enclosing, context=context).run()
                finally:
                    self._running.discard(id(function))
                self._specialized[id(function)] = found
                return found
        return self.generic_scope(function, enclosing)

    def _takes_context(self, function: cst.FunctionDef) -> bool:
        """A module-level function, or a method of a top-level class: the calls the
        interpreter resolves."""
        cls = self.class_of.get(id(function))
        if cls is not None:
            return id(cls) in self._top_classes
        return self.functions.get(function.name.value) is function

    def generic_scope(self, function: cst.FunctionDef | cst.Lambda, enclosing: list) -> ScopeResult:
        """The interpretation of `function` whoever calls it: its parameters unknown (but
        for what its body shows of them). Summaries come from here."""
        # a function called by the module body while it runs sees the module's names as
        # they are at that call: that answer is kept only until the module body is done
        if self._module_running and self.is_relevant(function):
            now = self._module_now
            key = (id(function), id(now.log) if now is not None else 0, len(now.log) if now is not None else 0)
            scopes: dict = self._early_scopes
        elif self._building:
            # called while a class's summary is built: what it sees of `self` is not done yet
            key, scopes = id(function), self._provisional
        else:
            key, scopes = id(function), self._scopes
        result = scopes.get(key)
        if result is None:
            if id(function) in self._running:
                return ScopeResult()  # recursion: what the running call returns is not known yet
            if self.is_relevant(function) and not self.out_of_time():
                self._running.add(id(function))
                try:
                    result = ScopeEvaluator(self, function, enclosing).run()
                finally:
                    self._running.discard(id(function))
            else:
                result = ScopeResult(interpreted=False)  # every value unknown: nothing to report
            scopes[key] = result
        return result

    # -- function summaries --------------------------------------------------------------

    def implication(self, test: cst.BaseExpression) -> Implication:
        """What `test` implies of the machine (guards.py), asked once per test."""
        found = self._implications.get(id(test))
        if found is None:
            found = self._implications[id(test)] = self.ctx.guards.implication(test)
        return found

    def callers(self) -> list[cst.FunctionDef]:
        """The module-level functions and the methods of top-level classes."""
        found = [f for f in self.functions.values() if f is not None]
        for stmt in self.ctx.module.body:
            if type(stmt) is cst.ClassDef:
                found.extend(self._methods(stmt))
        return found

    def callee(self, name: str) -> cst.FunctionDef | None:
        """The module-level function `name`, when the file defines it once."""
        return self.functions.get(name)

    def method(self, cls: cst.ClassDef, name: str, _seen: frozenset = frozenset()) -> cst.FunctionDef | None:
        """Method `name` of a top-level class `cls` (or of a local base)."""
        if id(cls) not in self._top_classes or id(cls) in _seen:
            return None
        for method in self._methods(cls):
            if method.name.value == name:
                return method
        for base in self.local_bases(cls):
            found = self.method(base, name, _seen | {id(cls)})
            if found is not None:
                return found
        return None

    def forward_returns(self, class_name: str) -> str:
        """What the `forward` of the file's module class `class_name` returns on every
        path: "tensor" for one torch function's result (`F.interpolate(...)`) or a
        tensor-only method's (calling an instance gives a tensor, and indexing it gives
        tensors); "other" where some path returns what a torch utility module makes
        (`pad_packed_sequence`: its lengths stay on the CPU); "" where it does not say."""
        cls = self.classes.get(class_name)
        if cls is None:
            return ""
        known = self._forward_tensor.get(id(cls))
        if known is None:
            forward = self.method(cls, "forward")
            returns = [] if forward is None else [
                n.value for n in statements(forward.body, enter_definitions=False) if type(n) is cst.Return
            ]  # fmt: skip
            if any(self._returns_from_utilities(value) for value in returns):
                known = "other"
            elif returns and all(self._returns_a_tensor(value) for value in returns):
                known = "tensor"
            else:
                known = ""
            self._forward_tensor[id(cls)] = known
        return known

    def _returns_from_utilities(self, value: cst.BaseExpression | None) -> bool:
        if type(value) is not cst.Call:
            return False
        return (self.qualify(value.func, frozenset()) or "").startswith(T.NOT_TENSOR_MODULES)

    def _returns_a_tensor(self, value: cst.BaseExpression | None) -> bool:
        if type(value) is not cst.Call:
            return False
        func = value.func
        if type(func) is cst.Attribute and func.attr.value in T.TENSOR_ONLY_METHODS - {"size", "dim", "numel"}:
            return True
        qualified = self.qualify(func, frozenset()) or ""
        last = qualified.rsplit(".", 1)[-1]
        # a function (not a class such as a distribution or a layer) of torch's tensor API
        return (
            qualified.startswith("torch.")
            and not qualified.startswith(T.NOT_TENSOR_MODULES)
            and last[:1].islower()
            and last not in T.SEVERAL_TENSORS
        )

    def only_method_named(self, name: str) -> cst.FunctionDef | None:
        """The method `name` when one top-level class of the file alone defines it, and
        it is not a name tensors, modules or the interpreter give meaning to."""
        if self._method_names is None:
            found: dict[str, list[cst.FunctionDef]] = {}
            for stmt in self.ctx.module.body:
                if type(stmt) is cst.ClassDef:
                    for method in self._methods(stmt):
                        found.setdefault(method.name.value, []).append(method)
            self._method_names = {n: m[0] for n, m in found.items() if len(m) == 1 and n not in self.functions}
        if name.startswith("_") or name in T.TENSOR_METHODS or name in T.MODULE_EVIDENCE or name in T.MOVE_METHODS:
            return None
        if name in T.TENSOR_ONLY_METHODS or name in ("forward", "backward", "step", "train", "eval", "load"):
            return None
        return self._method_names.get(name)

    def summary_of(self, function: cst.FunctionDef) -> ScopeResult | None:
        """The interpretation of `function`, when a call to it returns what its body
        returns (no decorator that could change it)."""
        if not decorator_names(function) <= _TRANSPARENT_DECORATORS:
            return None
        if function.asynchronous is not None:
            return None
        return self.generic_scope(function, [])

    def returns_for_call(self, function: cst.FunctionDef, own: AbstractValue | None,
                          arguments: dict[str, AbstractValue], names: dict[str, AbstractValue]) -> AbstractValue | None:  # fmt: skip
        """What `self.m(...)` returns where the calling method runs with `self` on a known
        device (a method called on a moved model): `m` interpreted for this one call, with
        that `self` and these arguments. With `own` None, a function of the file called
        with these arguments (`rescale(img, ...)`, which returns what it computes from
        `img`). None where that cannot be asked (a call back into a running scope, a
        decorator that may change the result, the time budget spent)."""
        if (
            id(function) in self._running
            or self.out_of_time()
            or self._per_call >= _RERUN_DEPTH
            or self._per_calls > 200
        ):
            return None  # a few calls deep, and a few hundred per file at most
        if not decorator_names(function) <= _TRANSPARENT_DECORATORS or function.asynchronous is not None:
            return None
        # (a `None`, `True` or `False` given or left as the default decides the function's tests)
        passed = {name: value for name, value in arguments.items() if matters(value) or is_constant(value)}
        if own is not None:
            me = self_name(function)  # none for a static or class method
            if me is None:
                return None
            passed[me] = own
            # `self.<attr>`s the calling method knows (a caller's `model.device = device`)
            names = {f"{me}.{attr}": value for attr, value in names.items()}
        self._running.add(id(function))
        self._per_call += 1
        self._per_calls += 1
        try:
            result = ScopeEvaluator(self, function, [], context=CallContext(passed, names)).run()
            if own is None and result.conflicts:
                return None  # it fails inside with these arguments (reported there): its result says nothing
            return result.returns
        finally:
            self._per_call -= 1
            self._running.discard(id(function))

    def rerun_for_call(
        self, record: CallRecord, values: dict[int, AbstractValue], caller: cst.FunctionDef | None
    ) -> CallRerun | None:
        """The called function interpreted once more, with what this one call passes
        (its arguments, and the names its caller left: `_one_call`; `values` are the
        caller's, `caller` None for the module body), beside its interpretation for any
        caller: what differs is what this call causes. Asked once per call; None where
        it cannot be asked (see `returns_for_call`)."""
        key = (id(record.call), id(values))
        held = self._reruns.get(key)
        if held is not None and held[0] is values:
            return held[1]
        function = record.callee
        rerun = None
        if (
            not self.out_of_time()
            and self._per_call == 0
            and self._per_calls <= 200
            and id(function) not in self._running
            and decorator_names(function) <= _TRANSPARENT_DECORATORS
            and function.asynchronous is None
        ):
            generic = self.generic_scope(function, [])
            own_self = self_name(function) if self.class_of.get(id(function)) is not None else None
            seen = self._one_call(function, own_self, self.ctx.bindings_of(function), caller, record)
            context = CallContext(
                {name: value for name, value in seen.params.items() if matters(value)},
                {name: value for name, value in seen.names.items() if matters(value)},
                one_call=True,
            )
            self._running.add(id(function))
            self._per_call += 1
            self._per_calls += 1
            try:
                result = ScopeEvaluator(self, function, [], context=context).run()
            finally:
                self._per_call -= 1
                self._running.discard(id(function))
            rerun = CallRerun(result, generic)
        self._reruns[key] = (values, rerun)
        return rerun

    def call_arguments(
        self, record: CallRecord, values: dict[int, AbstractValue]
    ) -> dict[str, tuple[cst.BaseExpression, AbstractValue]]:
        """The parameters a call fills: name -> (the argument, its value in the caller)."""
        names = self.parameter_names(record.callee, record.bound)
        arguments: dict[str, tuple[cst.BaseExpression, AbstractValue]] = {}
        for index, arg in enumerate(record.call.args):
            if arg.star:
                break
            name = arg.keyword.value if arg.keyword is not None else names[index] if index < len(names) else None
            if name is not None:
                arguments[name] = (arg.value, values.get(id(arg.value), UNKNOWN))
        return arguments

    def passed_conflicts(
        self, record: CallRecord, values: dict[int, AbstractValue], caller: cst.FunctionDef | None
    ) -> list[Conflict]:
        """The CPU tensors this call hands to a function of the file that meet an
        accelerator operand there (`evaluate(val_batch)` feeding a moved model), as
        conflicts of the call: the conflicts of the function's interpretation with this
        call's arguments that its interpretation for any caller does not have. None where
        every call of the file passes such a tensor: the function's own interpretation
        (with its call context) has them, and reports them inside."""
        arguments = self.call_arguments(record, values)
        on_cpu = {
            name: (expr, value)
            for name, (expr, value) in arguments.items()
            if value.tensor_like and value.device.is_cpu and value.zero_dim is not True and value.origin is not None
        }
        if not on_cpu:
            return []
        context = self.context_of(record.callee)
        cls = self.class_of.get(id(record.callee))
        if cls is not None and record.callee.name.value in ENTRY_POINTS and self.is_module_class(cls):
            context = None  # a model's `forward` is interpreted for input from anywhere, not its calls'
        if context is not None and all(
            name in context.params and context.params[name].device.is_cpu for name in on_cpu
        ):
            return []
        rerun = self.rerun_for_call(record, values, caller)
        if rerun is None:
            return []
        plain = {name: value for name, (_, value) in arguments.items()}
        found = []
        for key, conflict in rerun.result.conflicts.items():
            if key in rerun.generic.conflicts or conflict.kind == "index":
                continue
            if type(conflict.other.expr) is cst.Name and conflict.other.expr.value in self.moved_in_functions():
                continue  # a global model another function moves in place (`offload()`) may be anywhere
            for expr, value in on_cpu.values():
                if conflict.cpu.value.origin is value.origin:
                    other = self._as_caller_sees(record, conflict.other, plain)
                    if other.value.device.is_accel:
                        found.append(Conflict(record.call, Operand(expr, value), other, "passed", inner=conflict.node))
                    break
        return found

    def formatted_on_device(self) -> frozenset[str]:
        """Names the file formats with a device (`ds.set_format("torch", device="cuda")`,
        `with_format(..., device=...)`): a loader over one yields batches already there."""
        if self._formatted is None:
            self._formatted = frozenset(
                name
                for node in self.ctx.tree.nodes
                if type(node) is cst.Call
                and type(node.func) is cst.Attribute
                and node.func.attr.value in ("set_format", "with_format")
                and keyword_arg(node, "device") is not None
                and (name := dotted_name(node.func.value)) is not None
            )
        return self._formatted

    def walks_submodules(self) -> bool:
        """Does the file reach submodules other than by attribute (`net.modules()`,
        `net.get_submodule("emb")`, `net._modules[...]`, `net.apply(f)`)? Then any of them
        may have been moved on its own."""
        if self._walks_submodules is None:
            self._walks_submodules = any(
                type(node) is cst.Attribute and node.attr.value in _SUBMODULE_WALKS for node in self.ctx.tree.nodes
            )
        return self._walks_submodules

    def nonlocal_names(self, function: cst.FunctionDef) -> frozenset[str]:
        """The names functions nested in `function` declare `nonlocal` (and so may rebind)."""
        found = self._nonlocals.get(id(function))
        if found is None:
            names = set()
            for node in self.ctx.tree.walk(function.body):
                if type(node) is cst.Nonlocal:
                    names.update(item.name.value for item in node.names)
            found = self._nonlocals[id(function)] = frozenset(names)
        return found

    def settled_before(self, function: cst.FunctionDef, name: str, node: cst.CSTNode) -> bool:
        """Is every binding of `name` in `function` before `node` (a nested `def`), so that
        the nested function, called after it is defined, sees the value it had there?"""
        spans = self._binding_spans.get(id(function))
        if spans is None:
            spans = {}
            for statement in statements(function.body, enter_definitions=False):
                targets = assignment_targets(statement)
                if type(statement) in (cst.FunctionDef, cst.ClassDef):
                    targets = [statement.name]
                span = self.ctx.tree.span(statement)
                for target in targets:
                    for bound in bound_names(target):
                        spans.setdefault(bound, []).append(span)
            self._binding_spans[id(function)] = spans
        at = self.ctx.tree.span(node)
        if at is None:
            return False
        return all(span is not None and span[1] <= at[0] for span in spans.get(name, ()))

    def assigned_names(self, function: cst.FunctionDef) -> frozenset[str]:
        """The names `function`'s body assigns (a parameter only where it is rebound)."""
        found = self._assigned_names.get(id(function))
        if found is None:
            names = {
                name
                for node in statements(function.body, enter_definitions=False)
                for target in assignment_targets(node)
                for name in bound_names(target)
            }
            found = self._assigned_names[id(function)] = frozenset(names)
        return found

    def lazy_global(self, name: str, function: cst.FunctionDef) -> bool:
        """Is `name` a module-level `name = None` that only `function` (declaring it
        `global`) rebinds: a value built on first call and kept (`if model is None:
        model = load()`), so that later calls see what the first one built?"""
        if self._globals_declared is None:
            declared: dict[str, list[cst.FunctionDef]] = {}
            for scope, _ in self.ctx.tree.functions(self.ctx.module):
                if type(scope) is not cst.FunctionDef:
                    continue
                for node in self.ctx.tree.walk(scope.body):
                    if type(node) is cst.Global:
                        for item in node.names:
                            declared.setdefault(item.name.value, []).append(scope)
            self._globals_declared = declared
        if self._globals_declared.get(name) != [function] or name in self.moved_in_functions():
            return False  # (`def place(): model.to(device)` moves it after it is built)
        values = []
        for stmt in self.ctx.module.body:
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Assign and any(dotted_name(t.target) == name for t in small.targets):
                        values.append(small.value)
            elif type(stmt) not in (cst.FunctionDef, cst.ClassDef):
                for node in self.ctx.tree.walk(stmt):
                    if type(node) is cst.Name and node.value == name:
                        return False  # bound, or used, under `if`, `try` or a loop: keep away
        return bool(values) and all(type(v) is cst.Name and v.value == "None" for v in values)

    def moved_in_functions(self) -> frozenset[str]:
        """Module-level names a function of the file moves in place (`def offload():
        model.cpu()`): a call of that function changes where they are."""
        if self._moved_globals is None:
            names = set()
            for function, _ in self.ctx.tree.functions(self.ctx.module):
                if type(function) is not cst.FunctionDef:
                    continue
                local = self.ctx.bindings_of(function)
                for node in self.ctx.tree.walk(function.body):
                    if type(node) is cst.Expr and type(node.value) is cst.Call:
                        func = node.value.func
                        if (
                            type(func) is cst.Attribute
                            and func.attr.value in T.MOVE_METHODS
                            and type(func.value) is cst.Name
                            and func.value.value not in local
                        ):
                            names.add(func.value.value)
            self._moved_globals = frozenset(names)
        return self._moved_globals

    def _as_caller_sees(self, record: CallRecord, operand: Operand, arguments: dict[str, AbstractValue]) -> Operand:
        """An operand of the called function as its caller names it: `self.device` of a
        method called on the caller's own `self` is the caller's `self.device`."""
        device = operand.value.device
        me = self_name(record.callee)
        receiver = record.receiver
        if record.bound and me is not None and device.head == me and type(receiver) is cst.Name:
            symbol = receiver.value + device.symbol[len(me) :]
            return Operand(operand.expr, replace(operand.value, device=accel(symbol)))
        return self.operand_at_call(record.callee, operand, record.bound, arguments)

    def summary_at(self, function: cst.FunctionDef, module_names: State | None) -> ScopeResult | None:
        """`summary_of`, for a call the module body makes (`module_names`: its names at
        that call, which the function's body sees) or any other (None)."""
        if module_names is None or not self._module_running:
            return self.summary_of(function)
        outer, self._module_now = self._module_now, module_names
        try:
            return self.summary_of(function)
        finally:
            self._module_now = outer

    def at_call(self, function: cst.FunctionDef, value: AbstractValue | None, arguments: dict[str, AbstractValue],
                bound: bool) -> AbstractValue:  # fmt: skip
        """A value the body of `function` computed, as seen by a caller: a device named by
        a parameter is the argument's (`x.device` for a tensor argument) or unknown, one
        named by a local is an accelerator without a name."""
        if value is None:
            return UNKNOWN
        if value.elements is not None:
            items = tuple(self.at_call(function, item, arguments, bound) for item in value.elements)
            value = replace(value, elements=items)
        if value.items is not None and value.items is not NO_ITEMS:
            value = replace(value, items=self.at_call(function, value.items, arguments, bound))
        device = value.device
        if device.is_accel and device.symbol:
            head = device.head
            params = self.parameter_names(function, bound)
            if head in params:
                argument = arguments.get(head)
                if argument is None:
                    argument = self._default_argument(function, head)
                if device.symbol == f"{head}.device" and argument is not None and argument.device.known:
                    if argument.device.is_cpu and argument.origin is not None:
                        # built where the CPU tensor handed in is: that tensor is where it comes from
                        return replace(value, device=CPU, origin=argument.origin, source=argument.source,
                                       how=argument.how, maybe_accel=False)  # fmt: skip
                    return replace(value, device=argument.device, maybe_accel=argument.maybe_accel)
                if device.symbol == head and argument is not None and argument.device.is_accel:
                    if argument.kind in (Kind.DEVICE, Kind.OTHER):  # `.to(device)`, the device passed in
                        return replace(value, device=argument.device)
                return replace(value, device=UNKNOWN_DEVICE, origin=None, how="", maybe_accel=False)
            if head in self.ctx.bindings_of(function):
                return replace(value, device=accel(None))
        return value

    def _default_argument(self, function: cst.FunctionDef, name: str) -> AbstractValue | None:
        """The value of parameter `name`'s default, when a call leaves it out."""
        for param in call_parameters(function, False):
            if param.name.value == name and param.default is not None:
                return self.default_of(param)
        return None

    def operand_at_call(self, function: cst.FunctionDef, operand: Operand, bound: bool,
                        arguments: dict[str, AbstractValue] | None = None) -> Operand:  # fmt: skip
        return Operand(operand.expr, self.at_call(function, operand.value, arguments or {}, bound))

    @staticmethod
    def parameter_names(function: cst.FunctionDef, bound: bool) -> list[str]:
        """The parameters a call's arguments fill, in order (without `self` when bound)."""
        return [p.name.value for p in call_parameters(function, bound)]

    def module_scope(self) -> ScopeResult:
        if self._module is None:
            self._module = ScopeResult()  # a re-entrant question sees an empty module
            self._module_running = True
            try:
                self._module = ScopeEvaluator(self, self.ctx.module, []).run()
            finally:
                self._module_running = False
                self._early_scopes.clear()
        return self._module

    def global_value(self, name: str) -> AbstractValue:
        if self._module_running and self._module_now is not None:
            value = self._module_now.env.get(name)  # a call the module body makes now
        else:
            module = self.module_scope()
            value = module.assigned.get(name)
            left = module.exits.get(name)
            # a model built, then moved by the script's last statements (`if __name__ ==
            # "__main__": model.to(device)`), where the module body calls no function of the
            # file: they run after that (a web route, a callback), with the model moved
            if (
                value is not None
                and not value.device.known
                and left is not None
                and left.is_module
                and left.device.is_accel  # (one left on the CPU may be another than the one moved)
                and not module.calls
            ):
                return left
        if value is None:
            return OTHER if name in self.classes or name in self.imports.aliases else UNKNOWN
        if value.is_module and value.maybe_accel:
            # the join of every assignment, not of paths: a model moved in one notebook cell and
            # built again, unmoved, in a later one is not "moved on some paths"
            return replace(value, maybe_accel=False)
        return value

    # -- classes -----------------------------------------------------------------------

    def local_bases(self, node: cst.ClassDef) -> list[cst.ClassDef]:
        bases = []
        for arg in node.bases:
            name = dotted_name(arg.value)
            base = self.classes.get(name) if name else None
            if base is not None and base is not node:
                bases.append(base)
        return bases

    def is_test_case(self, node: cst.ClassDef, _seen: frozenset = frozenset()) -> bool:
        """A `unittest.TestCase` (`absltest.TestCase`, `tf.test.TestCase`...), itself or
        through the file's classes."""
        if any((dotted_name(arg.value) or "").rsplit(".", 1)[-1] == "TestCase" for arg in node.bases):
            return True
        seen = _seen | {id(node)}
        return any(id(b) not in seen and self.is_test_case(b, seen) for b in self.local_bases(node))

    def is_module_class(self, node: cst.ClassDef, *, strict: bool = False, _seen: frozenset = frozenset()) -> bool:
        key = (id(node), strict)
        cached = self._module_classes.get(key)
        if cached is not None:
            return cached
        if id(node) in _seen:
            return False
        answer = False
        for arg in node.bases:
            qualified = self.qualify(arg.value, frozenset())
            if qualified is not None and (
                qualified in T.MODULE_BASES
                or qualified.startswith(("torch.nn.", *T.MODEL_CLASS_PACKAGES))
                or T.is_library_model_class(qualified)
            ):
                answer = True
                break
        if not answer:
            seen = _seen | {id(node)}
            answer = any(self.is_module_class(b, strict=strict, _seen=seen) for b in self.local_bases(node))
        if not answer and not strict and self._unseen_base(node):
            # a base the file does not show may be a module: a `forward` says it is
            answer = any(m.name.value == "forward" for m in self._methods(node))
        self._module_classes[key] = answer
        return answer

    def wrapper_base(self, node: cst.ClassDef, _seen: frozenset = frozenset()) -> str | None:
        """The torch wrapper (`nn.DataParallel`, DDP) the class derives from, itself or
        through the file's classes, or None."""
        for arg in node.bases:
            qualified = self.qualify(arg.value, frozenset())
            if qualified in T.MODULE_WRAPPERS:
                return qualified
        seen = _seen | {id(node)}
        for base in self.local_bases(node):
            if id(base) not in seen:
                found = self.wrapper_base(base, seen)
                if found is not None:
                    return found
        return None

    def _unseen_base(self, node: cst.ClassDef, _seen: frozenset = frozenset()) -> bool:
        """Does the class derive (itself or through the file's classes) from a class the
        file does not define (other than `object`)?"""
        local = self.local_bases(node)
        for arg in node.bases:
            name = dotted_name(arg.value)
            if name == "object":
                continue
            if name is None or not any(b.name.value == name for b in local):
                return True
        seen = _seen | {id(node)}
        return any(self._unseen_base(b, seen) for b in local if id(b) not in seen)

    def registered_names(self, node: cst.ClassDef, _seen: frozenset = frozenset()) -> frozenset[str] | None:
        if id(node) in self._registered:
            return self._registered[id(node)]
        names: set[str] | None = set()
        for child in self.ctx.tree.walk(node):
            if (
                type(child) is cst.Call
                and type(child.func) is cst.Attribute
                and child.func.attr.value in ("register_buffer", "register_parameter", "register_module")
            ):
                args = positional_args(child)
                name = string_value(args[0].value) if args else None
                if name is None:
                    names = None
                    break
                names.add(name)
        if names is not None:
            for base in self.local_bases(node):
                if id(base) in _seen:
                    continue
                inherited = self.registered_names(base, _seen | {id(node)})
                if inherited is None:
                    names = None
                    break
                names |= inherited
        result = frozenset(names) if names is not None else None
        self._registered[id(node)] = result
        return result

    def holds_params(self, node: cst.ClassDef) -> bool:
        """Does constructing this local module class create parameters or buffers?"""
        cached = self._holds_params.get(id(node))
        if cached is not None:
            return cached
        self._holds_params[id(node)] = False  # recursion guard
        answer = any(
            (self.qualify(arg.value, frozenset()) or "").startswith(T.MODEL_CLASS_PACKAGES) for arg in node.bases
        )
        for child in self.ctx.tree.walk(node) if not answer else ():
            if type(child) is cst.Call:
                qualified = self.qualify(child.func, frozenset()) or ""
                if qualified in T.PARAMETER_LAYERS or qualified in T.PARAMETER_CLASSES:
                    answer = True
                elif qualified in T.OPTIONAL_STATE_LAYERS:
                    answer = any(is_true_arg(keyword_arg(child, k)) for k in T.OPTIONAL_STATE_LAYERS[qualified])
                elif qualified.startswith(T.MODEL_FACTORIES) or T.is_pretrained_model(qualified):
                    answer = True
                elif type(child.func) is cst.Attribute and child.func.attr.value in (
                    "register_buffer", "register_parameter",
                ):  # fmt: skip
                    answer = True
                else:
                    name = dotted_name(child.func)
                    local = self.classes.get(name) if name else None
                    answer = local is not None and local is not node and self.holds_params(local)
                    helper = self.functions.get(name) if name is not None and not answer else None
                    if helper is not None:
                        answer = self._builds_parameters(helper)
                if answer:
                    break
        if not answer:
            answer = any(self.holds_params(b) for b in self.local_bases(node))
        self._holds_params[id(node)] = answer
        return answer

    def changed_after_init(self, cls: cst.ClassDef) -> frozenset[str] | None:
        """The attributes a method other than `__init__` assigns or moves in place
        (`self.model = self.model.cpu()`, `self.encoder.to("cpu")`); None when one sets
        attributes by name (`setattr(self, ...)`), so that any may change."""
        if id(cls) in self._changed:
            return self._changed[id(cls)]
        found: set[str] | None = set()
        for method in self._methods(cls):
            params = [*method.params.posonly_params, *method.params.params]
            if method.name.value == "__init__" or not params:
                continue
            me = params[0].name.value
            for node in self.ctx.tree.walk(method.body):
                node_type = type(node)
                if node_type in (cst.AssignTarget, cst.AugAssign, cst.AnnAssign):
                    target = node.target
                    if type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == me:
                        found.add(target.attr.value)
                elif node_type is cst.Call:
                    func = node.func
                    if type(func) is cst.Name and func.value in ("setattr", "getattr", "vars"):
                        found = None
                        break
                    if type(func) is cst.Attribute and func.attr.value in T.MOVE_METHODS:
                        owner = func.value
                        if type(owner) is cst.Attribute and type(owner.value) is cst.Name and owner.value.value == me:
                            found.add(owner.attr.value)
            if found is None:
                break
        answer = frozenset(found) if found is not None else None
        self._changed[id(cls)] = answer
        return answer

    def first_call_value(self, cls: cst.ClassDef, attr: str, method: cst.FunctionDef) -> AbstractValue | None:
        """`self.<attr>` as the first call of `method` reads it before setting it itself:
        what `__init__` left, where no other method of the class sets it (in-place
        arithmetic aside), no code outside does, and the class has no base or subclass
        that could. A recurrent state built on the CPU
        in `__init__` and replaced by each call's GPU output fails on the first call
        (`dist, self.memories = self.net(obs, self.memories)`). Only for plain classes:
        what a module owns moves with it. None where it does not apply."""
        if method.name.value == "__init__" or self.class_of.get(id(method)) is not cls:
            return None
        if not self._stands_alone(cls):
            return None  # a base or a subclass may set it (`reset()`)
        self.summary(cls)
        value = self._init_values.get(id(cls), {}).get(attr)
        if value is None or not value.tensor_like or not value.device.known or value.maybe_accel:
            return None
        if self.is_module_class(cls) or self.set_from_outside(attr):
            return None
        key = (id(cls), attr)
        setters = self._setters.get(key)
        if setters is None:
            setters = self._setters[key] = frozenset(
                id(m) for m in self._methods(cls) if m.name.value != "__init__" and _sets_attribute(m, attr)
            )
        if not setters <= {id(method)}:
            return None
        return replace(value, how=f"{value.how}, left by `__init__` for the first call" if value.how else value.how)

    def names_other_accelerators(self) -> bool:
        """Does the file name an accelerator other than CUDA (`"mps"`, `torch.backends.mps`,
        `torch.accelerator`)? Then a tensor that is not on CUDA (`x.is_cuda` false) may
        still be on one, as on a Mac."""
        if self._other_accelerators is None:
            found = False
            for node in self.ctx.tree.nodes:
                node_type = type(node)
                if node_type is cst.SimpleString:
                    text = string_value(node)
                    found = text is not None and accelerator_type(text) not in (None, "cuda")
                elif node_type is cst.Attribute:
                    qualified = self.ctx.qualify(node) or ""
                    found = qualified.startswith(_OTHER_ACCELERATOR_MODULES)
                if found:
                    break
            self._other_accelerators = found
        return self._other_accelerators

    def literal_flag(self, name: str) -> bool | None:
        """`cuda = True` at module level (`FileContext.literal_flag`)."""
        return self.ctx.literal_flag(name)

    def configuration(self, cls: cst.ClassDef, attr: str) -> bool:
        """Is `self.<attr>` a setting every call sees alike: set only in `__init__`, each
        time from a parameter or a literal (`self.use_memory = use_memory`), no method or
        property of that name, no method called on it (`self.frames.append(x)`), and not
        `training` (which `.train()`/`.eval()` change)?"""
        key = (id(cls), attr)
        if key not in self._settings:
            self._settings[key] = self._is_setting(cls, attr)
        return self._settings[key]

    def _is_setting(self, cls: cst.ClassDef, attr: str) -> bool:
        changed = self.changed_after_init(cls)
        init = self.method(cls, "__init__")
        if changed is None or attr in changed or attr == "training" or init is None:
            return False
        if any(m.name.value == attr for c in [cls, *self.local_bases(cls)] for m in self._methods(c)):
            return False
        values = [value for name, value in _self_assignments(init) if name == attr]
        params = self.parameter_names(init, True)
        if not values or not all(
            (type(v) is cst.Name and (v.value in params or v.value in ("True", "False", "None")))
            or type(v) in (cst.Integer, cst.Float, cst.SimpleString)
            for v in values
        ):
            return False
        return attr not in self._called_attributes(cls) and not self.set_from_outside(attr)

    def _set_on_others(self) -> frozenset[str]:
        """The attributes the file assigns on objects other than `self` (`agent.warm = True`),
        `"*"` with `setattr`."""
        if self._others is None:
            found = set()
            for node in self.ctx.tree.nodes:
                node_type = type(node)
                if node_type is cst.AssignTarget or node_type is cst.AugAssign or node_type is cst.AnnAssign:
                    target = node.target
                    if type(target) is cst.Attribute and not _on_self(target):
                        found.add(target.attr.value)
                elif node_type is cst.Call and type(node.func) is cst.Name and node.func.value == "setattr":
                    found.add("*")
            self._others = frozenset(found)
        return self._others

    def _called_attributes(self, cls: cst.ClassDef) -> frozenset[str]:
        """The `self.<attr>`s a method of the class calls a method of (`self.frames.append`)."""
        found = self._called.get(id(cls))
        if found is None:
            names = set()
            for method in self._methods(cls):
                me = self_name(method)
                for node in self.ctx.tree.walk(method.body):
                    if (
                        type(node) is cst.Call
                        and type(node.func) is cst.Attribute
                        and type(node.func.value) is cst.Attribute
                        and type(node.func.value.value) is cst.Name
                        and node.func.value.value.value == me
                    ):
                        names.add(node.func.value.attr.value)
            found = self._called[id(cls)] = frozenset(names)
        return found

    def configuration_of_part(self, cls: cst.ClassDef, attr: str, inner: str) -> bool:
        """`self.acmodel.use_memory`: `self.<attr>` is a model of the file built in
        `__init__` and kept, and `inner` is a setting of its class."""
        changed = self.changed_after_init(cls)
        init = self.method(cls, "__init__")
        if changed is None or attr in changed or init is None:
            return False
        values = [value for name, value in _self_assignments(init) if name == attr]
        if len(values) != 1 or type(values[0]) is not cst.Call:
            return False
        call = innermost_call(values[0])  # `ACModel(...).to(device)`
        part = self.classes.get(dotted_name(call.func) or "")
        return part is not None and part is not cls and self.configuration(part, inner)

    def kept_by_forward(self, cls: cst.ClassDef, attr: str) -> bool:
        """Does the model's `forward` keep `self.<attr>`, a tensor it computes from its
        input (`self.z = self.encode(x)`), which no other method but `__init__` sets?"""
        forward = self.method(cls, "forward")
        if forward is None or self.class_of.get(id(forward)) is not cls:
            return False
        if any(
            m is not forward and m.name.value != "__init__" and _sets_attribute(m, attr) for m in self._methods(cls)
        ):
            return False
        key = (id(cls), attr)
        if key not in self._kept:
            self._kept[key] = self._kept_from_input(forward, attr)
        return self._kept[key]

    def _kept_from_input(self, forward: cst.FunctionDef, attr: str) -> bool:
        me = self_name(forward)
        result = ScopeEvaluator(self, forward, [], phase1=True).run()
        value = result.exits.get(f"{me}.{attr}", result.assigned.get(f"{me}.{attr}"))
        if value is None or value.is_parameter or value.kind not in (Kind.TENSOR, Kind.UNKNOWN):
            return False
        device = value.device
        return (
            device.is_accel
            and device.symbol == f"{device.head}.device"
            and device.head in self.parameter_names(forward, True)
        )

    def held_module(self, cls: cst.ClassDef, attr: str, scope: cst.CSTNode,
                    known: Callable[[str], AbstractValue]) -> AbstractValue | None:  # fmt: skip
        """`agent.Q` of an instance built in `scope` (`agent = Agent()`), as `__init__`
        left it: a model it built, where the class is a plain one standing alone, no
        other method of it sets or moves the attribute, and no code of the file outside
        `scope` does to an instance. None where that does not hold."""
        if not self._stands_alone(cls) or self.is_module_class(cls):
            return None
        self.summary(cls)
        value = self._init_values.get(id(cls), {}).get(attr)
        if value is None or not value.is_module or not value.holds_params or not value.device.known:
            return None
        init = self.method(cls, "__init__")
        if init is None or not self.chosen_by_module(value.device, init, known):
            return None  # moved where the caller says (`model.to(device)`, `device` a parameter)
        changed = self.changed_after_init(cls)
        if changed is None or attr in changed or "*" in self._attribute_setters():
            return None
        return value if self._attribute_setters().get(attr, frozenset()) <= {id(scope)} else None

    def chosen_by_module(self, device: Device, init: cst.FunctionDef, known: Callable[[str], AbstractValue]) -> bool:
        """Is `device`, as `__init__` names it, one its caller cannot choose: the CPU, a
        literal, or a module-level binding (not `device`, `self.device`, or
        `next(model.parameters()).device`)? `known`: a global's value where the question is asked."""
        if device.is_cpu:
            return True
        symbol = device.symbol or ""
        if symbol[:1] in ("'", '"'):
            return True
        head = device.head
        return bool(head) and head == symbol and head not in self.ctx.bindings_of(init) and known(head).device.known

    def init_value(self, cls: cst.ClassDef, attr: str) -> AbstractValue | None:
        """`self.<attr>` as `__init__` leaves it, whoever builds the object."""
        self.summary(cls)
        return self._init_values.get(id(cls), {}).get(attr)

    def init_attributes(self, cls: cst.ClassDef) -> tuple[str, ...]:
        """The attributes `__init__` leaves set."""
        self.summary(cls)
        return tuple(self._init_values.get(id(cls), {}))

    def _attribute_setters(self) -> dict[str, frozenset[int]]:
        """attr -> the scopes (innermost function, or the module) whose code sets
        `<x>.<attr>` or moves it in place (`agent.Q.to(device)`), `x` not `self`;
        `_HANDED` where any code hands `<x>.<attr>` on as a value, `_HANDED_BY_SELF`
        where a method hands `self.<attr>` on (`return self.Q`); "*" where some code
        reaches attributes by name (`setattr`, `getattr`, `__dict__`)."""
        if self._setters_outside is None:
            self._scan_attribute_uses()
        assert self._setters_outside is not None
        return self._setters_outside

    def _scan_attribute_uses(self) -> None:
        """One pass over the file for `_attribute_setters`."""
        found: dict[str, set[int]] = {}
        tree = self.ctx.tree
        nodes, ends = tree.nodes, tree.ends
        around: list[tuple[int, int]] = [(len(nodes), id(self.ctx.module))]
        for position, node in enumerate(nodes):
            while around[-1][0] <= position:
                around.pop()
            node_type = type(node)
            attribute = None
            if node_type in (cst.AssignTarget, cst.AugAssign, cst.AnnAssign):
                attribute = node.target
            for owner, held in _handed_attributes(node, node_type):
                # `(agent.Q, agent.P)`, `q = agent.Q`, `ModuleList([agent.Q])`, `return self.Q`:
                # held elsewhere too, where it may be moved (`for net in ...: net.to(d)`)
                found.setdefault(held, set()).add(_HANDED_BY_SELF if owner == "self" else _HANDED)
            if node_type is cst.Attribute and node.attr.value == "__dict__":
                found.setdefault("*", set()).add(around[-1][1])
            elif node_type is cst.Call:
                func = node.func
                if type(func) is cst.Name and func.value == "setattr":
                    found.setdefault("*", set()).add(around[-1][1])
                elif type(func) is cst.Attribute and func.attr.value in T.MOVE_METHODS:
                    attribute = func.value
            if type(attribute) is cst.Attribute and not _on_self(attribute):
                found.setdefault(attribute.attr.value, set()).add(around[-1][1])
            if node_type is cst.FunctionDef or node_type is cst.Lambda:
                around.append((ends[position], id(node)))
        self._setters_outside = {attr: frozenset(scopes) for attr, scopes in found.items()}

    def touched_outside(self, attr: str) -> bool:
        """Does code of the file, on an object other than `self`, move `<x>.<attr>` in
        place, set it or hand it on (or reach attributes by name)?"""
        setters = self._attribute_setters()
        return "*" in setters or bool(setters.get(attr, frozenset()) - {_HANDED_BY_SELF})

    def _stands_alone(self, cls: cst.ClassDef) -> bool:
        """A class with no base but `object`, that no class of the file derives from."""
        if any(dotted_name(arg.value) != "object" for arg in cls.bases):
            return False
        return not any(cls in self.local_bases(other) for other in self.classes.values())

    def set_from_outside(self, attr: str) -> bool:
        """Does code of the file set `<x>.<attr>` on an object other than `self`, or set
        attributes by name (`setattr`)?"""
        others = self._set_on_others()
        return attr in others or "*" in others

    def _builds_parameters(self, function: cst.FunctionDef) -> bool:
        """Does a module-level helper return a parameter or a layer with parameters it
        builds (`def sobel_kernel(axis): return nn.Parameter(...)`)? One that only uses
        a layer of its own inside gives its caller nothing to hold."""

        def builds(node: cst.BaseExpression | None) -> bool:
            if type(node) is not cst.Call:
                return False
            qualified = self.qualify(node.func, frozenset()) or ""
            return qualified in T.PARAMETER_LAYERS or qualified in T.PARAMETER_CLASSES

        built: set[str] = set()
        for child in self.ctx.tree.walk(function.body):
            if type(child) is cst.Assign and builds(child.value):
                built.update(t.target.value for t in child.targets if type(t.target) is cst.Name)
            elif type(child) is cst.Return and child.value is not None:
                value = child.value
                if builds(value) or (type(value) is cst.Name and value.value in built):
                    return True
        return False

    def cuda_type_names(self) -> frozenset[str]:
        """Names that may be bound to a legacy CUDA type: imported from `torch.cuda`
        (`from torch.cuda import FloatTensor`, on some branch), or assigned one
        (`Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`)."""
        if self._cuda_types is None:
            found: set[str] = set()
            for node in self.ctx.tree.nodes:
                if (
                    type(node) is cst.ImportFrom
                    and type(node.module) is not None
                    and dotted_name(node.module) == "torch.cuda"
                ):
                    if type(node.names) is not cst.ImportStar:
                        found.update(alias.evaluated_alias or alias.evaluated_name for alias in node.names)
                elif type(node) is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
                    values = [v for v in self.ctx.tree.walk(node.value) if type(v) is cst.Attribute]
                    if any((self.qualify(v, frozenset()) or "") in T.LEGACY_CUDA_TYPES for v in values):
                        found.add(node.targets[0].target.value)
            self._cuda_types = frozenset(found)
        return self._cuda_types

    def may_set_cuda_default(self) -> bool:
        """Does the file set a default tensor type or device other than the CPU's?"""
        if self._cuda_default is None:
            self._cuda_default = self._sets_cuda_default()
        return self._cuda_default

    def _sets_cuda_default(self) -> bool:
        for node in self.ctx.tree.nodes:
            if type(node) is cst.Call and node.args:
                func = node.func
                called = (
                    func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
                )
                if called in ("set_default_tensor_type", "set_default_device"):
                    text = self.ctx.module.code_for_node(node.args[0].value)
                    if "cpu" not in text.lower() and "DoubleTensor" not in text and "torch.FloatTensor" not in text:
                        return True
        return False

    def moves_its_input(self, name: str) -> bool:
        """Does the `forward` of the file's class `name` move or place its input itself
        (`x = x.to(self.fc.weight.device)`, `torch.as_tensor(x, device=self.device)`)?"""
        cls = self.classes.get(name) if name else None
        forward = self.method(cls, "forward") if cls is not None else None
        if forward is None:
            return False
        params = frozenset(p.name.value for p in call_parameters(forward, True))
        return self._moves_a_parameter(cls, forward, params, frozenset())

    def _moves_a_parameter(
        self, cls: cst.ClassDef, method: cst.FunctionDef, params: frozenset[str], seen: frozenset[int]
    ) -> bool:
        """Does `method` move or place one of `params`, its parameters, itself or through a
        method of the class it hands them to (`return self.density(state).sample()`, where
        `density` does `state = state.to(self.device)`)?"""
        if id(method) in seen:
            return False
        me = method.params.params[0].name.value if method.params.params else None
        for child in self.ctx.tree.walk(method.body):
            if type(child) is not cst.Call:
                continue
            func = child.func
            if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == me:
                helper = self.method(cls, func.attr.value)
                handed = _parameters_given(helper, child, params) if helper is not None else frozenset()
                if handed and self._moves_a_parameter(cls, helper, handed, seen | {id(method)}):
                    return True
            if type(func) is cst.Attribute and func.attr.value in T.MOVE_METHODS:
                if dotted_name(func.value) in params:
                    return True  # `x.to(...)`, `tokens.cpu()`
                # `torch.Tensor(x).to(self.device)`, `x.float().cuda()`, `x.float().cpu()` (a CPU
                # copy kept only for a log counts too: what the layers get is not followed)
                placed = func.attr.value != "to" or self._moves_somewhere(child)
                if placed and self._converted_root(func.value) in params:
                    return True
            if keyword_arg(child, "device") is not None and any(dotted_name(a.value) in params for a in child.args):
                return True
        return False

    def moves_itself(self, node: cst.ClassDef) -> bool:
        """Does the class's `__init__` (or a local base's) move the instance to an
        accelerator it names (`if torch.cuda.is_available(): self.cuda()`,
        `self.to("cuda" if ... else "cpu")`)? Then an instance may be there as soon as it
        is built. Not `self.to(device)` of a device it is given or reads off another module."""
        for cls in [*self.local_bases(node), node]:
            init = self.method(cls, "__init__")
            params = init.params.params if init is not None else ()
            if not params:
                continue
            me = params[0].name.value
            for child in self._unconditional_or_available(init):
                if (
                    type(child) is cst.Call
                    and type(child.func) is cst.Attribute
                    and type(child.func.value) is cst.Name
                    and child.func.value.value == me
                    and self.moves_off_cpu(child)
                    and (child.func.attr.value != "to" or _names_an_accelerator(self.ctx.module, child))
                ):
                    return True
        return False

    def _unconditional_or_available(self, function: cst.FunctionDef) -> list[cst.CSTNode]:
        """The nodes of `function`'s body outside any `if`, or inside `if`s that test only
        whether an accelerator is available (not a flag: `if use_cuda: self.cuda()`)."""
        tree = self.ctx.tree
        nodes = tree.walk_scope(function)
        flagged = [
            span
            for span in (
                tree.span(n) for n in nodes if type(n) is cst.If and not _asks_availability(n.test, self.qualify)
            )
            if span is not None
        ]
        found = []
        for node in nodes:
            at = tree.span(node)
            if at is None or not any(start < at[0] < end for start, end in flagged):
                found.append(node)
        return found

    def places_itself(self, node: cst.ClassDef, _seen: frozenset = frozenset()) -> bool:
        """Does the class move itself or its layers, or build them on a chosen device
        (`self.to(device)`, `self.lstm = self.lstm.cuda()`, `nn.Linear(..., device=device)`,
        `**factory_kwargs`)? Then an instance is not known to start on the CPU."""
        if id(node) in _seen:
            return False
        for method in self._methods(node):
            params = method.params.params
            self_name = params[0].name.value if params else None
            for child in self.ctx.tree.walk(method.body):
                if (
                    type(child) is cst.Assign
                    and self.moves_off_cpu(child.value)
                    and self._builds_layer(child.value)
                    and any(
                        type(t.target) is cst.Attribute and dotted_name(t.target.value) == self_name
                        for t in child.targets
                    )
                ):
                    return True  # `self.critic = nn.Sequential(*layers).to(self.device)`: a layer placed
                if type(child) is not cst.Call:
                    continue
                func = child.func
                if type(func) is cst.Attribute and func.attr.value in T.MOVE_METHODS and func.attr.value != "cpu":
                    receiver = func.value
                    if type(receiver) is cst.Attribute:  # `self.lstm = self.lstm.cuda()`: its layers
                        receiver = receiver.value
                    if type(receiver) is cst.Name and receiver.value == self_name:
                        return True
                if (self.qualify(func, frozenset()) or "").startswith("torch.nn.") and any(
                    a.star == "**" or (a.keyword is not None and a.keyword.value == "device") for a in child.args
                ):
                    return True
        return any(self.places_itself(b, _seen | {id(node)}) for b in self.local_bases(node))

    def _converted_root(self, node: cst.BaseExpression) -> str | None:
        """`x` of `x.float()`, `torch.Tensor(x)`, `torch.as_tensor(x).float()`: the name a
        chain of tensor methods and conversions starts from."""
        for _ in range(8):
            if type(node) is cst.Name:
                return node.value
            if type(node) is not cst.Call:
                return None
            qualified = self.qualify(node.func, frozenset())
            if qualified is None and type(node.func) is cst.Attribute:
                node = node.func.value  # `x.float()`, `x.view(-1)`
            elif qualified in _CONVERSIONS and node.args and node.args[0].keyword is None:
                node = node.args[0].value  # `torch.Tensor(x)`
            else:
                return None
        return None

    def _builds_layer(self, move: cst.Call) -> bool:
        """Is `move` a move of a layer built right there (`nn.Sequential(...).to(d)`,
        `Encoder(...).cuda()`)?"""
        func = move.func
        if type(func) is not cst.Attribute or type(func.value) is not cst.Call:
            return False
        built = func.value.func
        if type(built) is cst.Name and built.value in self.classes:
            return True
        qualified = self.qualify(built, frozenset()) or ""
        last = qualified.rsplit(".", 1)[-1]
        return qualified.startswith("torch.nn.") and last[:1].isupper()

    def places_items(self, name: str, _seen: frozenset = frozenset()) -> bool:
        """Does the file's class `name` (a dataset) move tensors or build them on a chosen
        device anywhere in its methods (`torch.tensor(x, device=self.device)`,
        `self.data = data.cuda()`)? Then its items are not known to be on the CPU."""
        node = self.classes.get(name)
        if node is None or id(node) in _seen:
            return False
        for method in self._methods(node):
            for child in self.ctx.tree.walk(method.body):
                if type(child) is not cst.Call:
                    continue
                if self.moves_off_cpu(child):
                    return True
                device = keyword_arg(child, "device")
                if device is not None and string_value(device.value) != "cpu":
                    return True
        return any(self.places_items(b.name.value, _seen | {id(node)}) for b in self.local_bases(node))

    def moves_off_cpu(self, node: cst.BaseExpression) -> bool:
        """Is `node` a move to a device other than the CPU (`x.cuda()`, `x.to(device)`, not
        `x.cpu()` nor `x.to(torch.float32)`)?"""
        if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
            return False
        name = node.func.attr.value
        return name in T.MOVE_METHODS and name != "cpu" and (name != "to" or self._moves_somewhere(node))

    def _moves_somewhere(self, call: cst.Call) -> bool:
        """Is `x.to(...)` a move to a device other than the CPU (not `.to(torch.float32)`)?"""
        target = move_target(call)
        if target is None or string_value(target.value) == "cpu":
            return False
        if (dotted_name(target.value) or "").endswith("dtype"):
            return False  # `x.to(y.dtype)`
        qualified = self.qualify(target.value, frozenset()) or ""
        return not (qualified.startswith("torch.") and qualified[6:7].islower() and qualified != "torch.device")

    def evident_module_attributes(self, node: cst.ClassDef) -> frozenset[str]:
        """The `self.<attr>`s some method of the class (or a local base) uses as only a
        module is used (`self.model.eval()`)."""
        found = self._evident.get(id(node))
        if found is None:
            names: set[str] = set()
            for cls in [*self.local_bases(node), node]:
                for method in self._methods(cls):
                    params = [*method.params.posonly_params, *method.params.params]
                    if params:
                        names |= evident_modules(self.ctx.tree.walk(method.body), params[0].name.value)
            found = self._evident[id(node)] = frozenset(names)
        return found

    def summary(self, node: cst.ClassDef) -> dict[str, AbstractValue]:
        """`self.<attr>` as any method may have left it: the join of all its assignments.

        In an nn.Module, what the module owns (parameters, buffers, submodules) follows
        the module wherever it is moved: its device is unknown. A plain tensor attribute
        stays where it was built.
        """
        cached = self._summaries.get(id(node))
        if cached is not None:
            return cached
        self._summaries[id(node)] = {}
        joined: dict[str, AbstractValue] = {}
        placeholders: dict[str, AbstractValue] = {}
        self._building += 1
        try:
            for cls in [*self.local_bases(node), node]:
                for method in self._methods(cls):
                    if method.name.value.startswith("test") and self.is_test_case(node):
                        continue  # each test runs on what setUp built: it leaves nothing for the others
                    if self.is_relevant(method, building=True):
                        result = ScopeEvaluator(self, method, [], phase1=True).run()
                        # what the method leaves (`self.cpc = CPC(); self.cpc.to(d)` leaves it moved)
                        attrs = {
                            key.split(".", 1)[1]: result.exits.get(key, value) for key, value in result.assigned.items()
                        }
                        if cls is node and method.name.value == "__init__":
                            # for a first call: an attribute set on some paths only exists on those
                            self._init_values[id(node)] = {
                                key.split(".", 1)[1]: (
                                    result.exits[key]
                                    if key in result.exits and result.exits[key].device.known
                                    else value
                                )
                                for key, value in result.assigned.items()
                            }
                    else:
                        # not interpreted: whatever it assigns to `self` is unknown
                        attrs = dict.fromkeys(_self_attributes_assigned(method), UNKNOWN)
                    for attr, value in _placeholders(method).items():
                        attrs.pop(attr, None)
                        placeholders[attr] = value if placeholders.get(attr, NONE) is NONE else UNKNOWN
                    for attr, value in attrs.items():
                        joined[attr] = joined[attr].join(value) if attr in joined else value
        finally:
            self._building -= 1
            if not self._building:
                self._provisional.clear()
        # `self.model = None` until a method builds it, and `self.model = self.model.eval()`,
        # say nothing of where the model is: what the other assignments leave is what is used
        for attr, value in placeholders.items():
            joined.setdefault(attr, value)
        if self.is_module_class(node):
            registered = self.registered_names(node)
            for attr, value in list(joined.items()):
                owned = (
                    registered is None
                    or attr in registered
                    or value.is_parameter
                    or value.kind not in (Kind.TENSOR, Kind.OTHER, Kind.DEVICE)
                )
                if owned:
                    joined[attr] = replace(value, device=UNKNOWN_DEVICE, origin=None, how="")
            for attr in registered or ():
                joined.setdefault(attr, AbstractValue(Kind.TENSOR))
        self._summaries[id(node)] = joined
        return joined


_KEEPS_PLACE = T.MODULE_SELF_METHODS - {"type", "apply"}


def _placeholders(method: cst.FunctionDef) -> dict[str, AbstractValue]:
    """The `self.<attr>`s a method assigns only `None` (a placeholder until another method
    builds it: NONE) or only the object it had, in the same place (`self.model =
    self.model.eval()`: UNKNOWN). Neither says where the attribute's object is."""
    params = [*method.params.posonly_params, *method.params.params]
    if not params:
        return {}
    me = params[0].name.value
    found: dict[str, AbstractValue] = {}
    other: set[str] = set()
    for attr, value in _self_assignments(method):
        if type(value) is cst.Name and value.value == "None":
            found.setdefault(attr, NONE)
        elif _same_object(value, me, attr):
            found[attr] = UNKNOWN
        else:
            other.add(attr)
    return {attr: value for attr, value in found.items() if attr not in other}


def _same_object(value: cst.BaseExpression | None, me: str, attr: str) -> bool:
    """`self.<attr>.eval()`, `self.<attr>.train(False).float()`."""
    while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in _KEEPS_PLACE:
        value = value.func.value
        if type(value) is cst.Attribute and type(value.value) is cst.Name and value.value.value == me:
            return value.attr.value == attr
    return False


def _sets_attribute(method: cst.FunctionDef, attr: str) -> bool:
    """Does the method bind `self.<attr>` (in-place arithmetic, `self.h *= mask`, aside)?"""
    return any(
        name == attr
        for statement in _self_assigning_statements(method)
        if type(statement) is not cst.AugAssign
        for name, _ in _self_targets(method, statement)
    )


# Calls that take a value without keeping it (or keep a copy).
def _on_self(attribute: cst.Attribute) -> bool:
    return type(attribute.value) is cst.Name and attribute.value.value == "self"


_NOT_HOLDING = frozenset({"deepcopy", "copy", "isinstance", "id", "print", "len", "str", "repr", "type", "hasattr"})
_HANDED = -1  # in `_attribute_setters`: `<x>.<attr>` handed on as a value somewhere
_SUBMODULE_WALKS = frozenset(
    {"modules", "children", "named_modules", "named_children", "get_submodule", "_modules", "apply"}
)
_HANDED_BY_SELF = -2  # `self.<attr>` handed on (`return self.Q`)


def _handed_attributes(node: cst.CSTNode, node_type: type) -> list[tuple[str, str]]:
    """The attributes (`<name>.<attr>`, as (name, attr)) `node` hands on as values: items
    of a tuple, list or set literal, arguments of a call, the value of an assignment or
    a return."""
    if node_type in (cst.Tuple, cst.List, cst.Set):
        values = [e.value for e in node.elements]
    elif node_type is cst.Call:
        func = node.func
        name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
        if name in _NOT_HOLDING:
            return []  # `copy.deepcopy(self.actor)`: a copy, or only a look at it
        values = [a.value for a in node.args]
    elif node_type in (cst.Assign, cst.Return, cst.AnnAssign):
        values = [node.value] if node.value is not None else []
    else:
        return []
    return [(v.value.value, v.attr.value) for v in values if type(v) is cst.Attribute and type(v.value) is cst.Name]


_CONVERSIONS = frozenset(
    {"torch.Tensor", "torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.FloatTensor", "torch.LongTensor",
     "numpy.asarray", "numpy.array"}
)  # fmt: skip


def _names_an_accelerator(module: cst.Module, call: cst.Call) -> bool:
    """Does `x.to(...)` name the accelerator itself (`"cuda"`, `torch.device("cuda:0")`, a
    choice on `torch.cuda.is_available()`), not a device it was given (`self.to(device)`,
    `self.to(args.cuda_device)`)?"""
    target = move_target(call)
    if target is None:
        return False
    value = target.value
    if type(value) is cst.Call and dotted_name(value.func) in ("torch.device", "device") and value.args:
        value = value.args[0].value  # `torch.device("cuda" if ... else "cpu")`
    if type(value) is cst.IfExp:
        return "is_available" in module.code_for_node(value.test)
    return (string_value(value) or "").startswith("cuda")


def _asks_availability(test: cst.BaseExpression, qualify) -> bool:
    """Is `test` only `torch.cuda.is_available()` (or `torch.accelerator.is_available()`)?"""
    return type(test) is cst.Call and (qualify(test.func, frozenset()) or "") in (
        "torch.cuda.is_available",
        "torch.accelerator.is_available",
    )
