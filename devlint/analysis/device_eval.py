"""The interpreter behind the device analysis: one scope, abstract values, statement order.

`FileModel` knows the file (its classes, which of them are nn.Modules, what a class's
methods assign to `self`, the module-level names); `ScopeEvaluator` runs one function or
the module body and records the value of every expression it evaluates.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import libcst as cst

from devlint.analysis import device_tables as T
from devlint.analysis.context import FileContext
from devlint.analysis.lattice import (
    CPU,
    OTHER,
    UNKNOWN,
    UNKNOWN_DEVICE,
    AbstractValue,
    Conflict,
    Device,
    Kind,
    Operand,
    Source,
    accel,
    disagree,
    join_devices,
    join_symbolic,
)
from devlint.analysis.guards import accelerator_type
from devlint.analysis.tree import (
    Tree, bound_names, code_of_name, dotted_name, is_expression, statements, string_value,
)  # fmt: skip

_MAX_LOOP_PASSES = 4

_BUILTINS_OTHER = frozenset(
    {
        "len", "int", "float", "bool", "str", "range", "isinstance", "issubclass", "print",
        "list", "tuple", "dict", "set", "sorted", "enumerate", "zip", "hasattr", "repr",
        "format", "type", "id", "hash", "callable", "open", "reversed", "map", "filter",
        "any", "all", "super", "vars", "dir", "divmod", "round", "chr", "ord", "frozenset",
    }
)  # fmt: skip


@dataclass
class ScopeResult:
    """What one scope's interpretation learnt."""

    values: dict[int, AbstractValue] = field(default_factory=dict)
    conflicts: dict[int, Conflict] = field(default_factory=dict)
    snapshots: dict[int, dict[str, AbstractValue]] = field(default_factory=dict)
    assigned: dict[str, AbstractValue] = field(default_factory=dict)  # every value a key took


class State:
    """Abstract values of local names (and `self.<attr>`), plus the default device."""

    __slots__ = ("env", "default")

    def __init__(self, env: dict[str, AbstractValue], default: Device) -> None:
        self.env = env
        self.default = default

    def copy(self) -> State:
        return State(dict(self.env), self.default)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, State) and self.env == other.env and self.default == other.default


_NAMING_SYMBOL = re.compile(r"^(?:[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*|[\"'][\w:]+[\"'])$")


def _is_dotted_or_literal(symbol: str) -> bool:
    """`device`, `x.device`, `"cuda"`: already a name for the device."""
    return _NAMING_SYMBOL.match(symbol) is not None


def _resymbolize(value: AbstractValue, name: str) -> AbstractValue:
    """A device value bound to a name is named by it: `device = torch.device(...)`."""
    if value.kind in (Kind.DEVICE, Kind.OTHER) and value.device.is_accel:
        symbol = value.device.symbol
        if symbol is None or not _is_dotted_or_literal(symbol):
            return replace(value, device=accel(name))
    return value


def _key(expr: cst.BaseExpression) -> str | None:
    """The state key of an assignable expression: `x`, `self.mask`, `args.device`."""
    return dotted_name(expr)


def _kwarg(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def _positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


class FileModel:
    """File-wide facts the scopes share, computed once."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.imports = ctx.imports
        self.classes: dict[str, cst.ClassDef] = {}
        self.class_of: dict[int, cst.ClassDef] = {}
        self.sets_default_device = False
        self._scopes: dict[int, ScopeResult] = {}
        self._module: ScopeResult | None = None
        self._module_classes: dict[tuple[int, bool], bool] = {}
        self._summaries: dict[int, dict[str, AbstractValue]] = {}
        self._registered: dict[int, frozenset[str] | None] = {}
        self._holds_params: dict[int, bool] = {}
        self._relevant: dict[int, bool] = {}
        self._relevant_globals: frozenset[str] | None = None
        self._index()

    def _index(self) -> None:
        """Classes, methods, and whether the default device is ever changed: statements
        only, not expressions, since that is where they stand."""
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
            for suite in _suites(stmt):
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

    def scope(self, function: cst.FunctionDef | cst.Lambda, enclosing: list) -> ScopeResult:
        result = self._scopes.get(id(function))
        if result is None:
            if self.is_relevant(function):
                result = ScopeEvaluator(self, function, enclosing).run()
            else:
                result = ScopeResult()  # every value unknown: nothing to report
            self._scopes[id(function)] = result
        return result

    # -- the gate: most functions cannot mix devices ----------------------------------

    def is_relevant(self, function: cst.FunctionDef | cst.Lambda, *, building: bool = False) -> bool:
        """Could interpreting `function` find anything? Only if it builds tensors or
        modules, moves or syncs them, loads data, or reads a module-level name bound to
        such a thing. Anything else (most `forward`s: layers applied to their input)
        leaves every value unknown, so it is not interpreted at all: interpreting every
        function would cost as much as parsing the file. With `building`, what a method
        builds (its layers too) matters: the class summary needs it."""
        key = id(function) * 2 + building
        known = self._relevant.get(key)
        if known is None:
            attributes: frozenset[str] = frozenset()
            names = _RELEVANT_NAMES
            cls = self.class_of.get(id(function))
            if cls is not None and type(function) is cst.FunctionDef and function.params.params:
                attributes = self._tensor_attributes(cls)
                if not building and self.is_module_class(cls):
                    # a module's own layers follow it wherever it is moved: building them
                    # in `__init__` is nothing to check
                    names = _RELEVANT_IN_MODULES
            known = _mentions_sources(self.ctx.tree, function, self._globals_with_sources(), attributes, names,
                                      self._called_names(names))  # fmt: skip
            self._relevant[key] = known
        return known

    def _called_names(self, names: frozenset[str]) -> frozenset[str]:
        """`names` as called bare: `type(x)` and `range(n)` are the builtins, unless the
        file imports them from torch."""
        shadowing = _BUILTIN_NAMESAKES & self.imports.aliases.keys()
        return names - (_BUILTIN_NAMESAKES - shadowing)

    def _tensor_attributes(self, cls: cst.ClassDef) -> frozenset[str]:
        """`self.<attr>`s some method of `cls` (or a local base) builds as a tensor and
        that stay where they were built: in an nn.Module, what the module owns follows it
        (see `summary`), so reading it cannot meet a tensor on another device."""
        key = -id(cls)  # class keys are negative; function keys are 2 * id (+ 1)
        cached = self._relevant.get(key)
        if cached is None:
            names: set[str] = set()
            called = self._called_names(_TENSOR_SOURCE_NAMES)
            for owner in [*self.local_bases(cls), cls]:
                for method in self._methods(owner):
                    for node in _self_assigning_statements(method):
                        value = node.value
                        if value is not None and _mentions_sources(
                            self.ctx.tree, value, names=_TENSOR_SOURCE_NAMES, called=called
                        ):
                            names.update(attr for attr, _ in _self_targets(method, node))
            if names and self.is_module_class(cls):
                names = self._unowned(cls, names)
            self._relevant[key] = cached = frozenset(names)  # type: ignore[assignment]
        return cached  # type: ignore[return-value]

    def _unowned(self, cls: cst.ClassDef, names: set[str]) -> set[str]:
        """The attributes among `names` that `summary` may not treat as owned by module
        `cls`. Owned for sure: registered ones, and those whose assignments join to an
        nn.Parameter (every one is `nn.Parameter(...)`) or to a value of unknown kind
        (`nn.Parameter(...)` in one place, `None` in another, or `... if c else None`)."""
        registered = self.registered_names(cls)
        if registered is None:
            return set()  # a registration the analysis cannot read: everything is owned
        shapes: dict[str, set[str]] = {}
        for owner in [*self.local_bases(cls), cls]:
            for method in self._methods(owner):
                if "staticmethod" in _decorator_names(method):
                    continue
                shadowed = self.ctx.bindings_of(method)
                for attr, value in _self_assignments(method):
                    shapes.setdefault(attr, set()).add(self._assigned_shape(value, shadowed))
        owned = set(registered)
        for attr, found in shapes.items():
            if found == {"parameter"} or "unknown" in found or {"parameter", "none"} <= found:
                owned.add(attr)
        return names - owned

    def _assigned_shape(self, value: cst.BaseExpression | None, shadowed: frozenset[str]) -> str:
        """"parameter" (`nn.Parameter(...)`), "none" (`None`), "unknown" (one of each
        under `if ... else`: the kinds disagree), or "any"."""
        if type(value) is cst.Call:
            qualified = self.qualify(value.func, shadowed)
            return "parameter" if qualified in _PARAMETER_CLASSES else "any"
        if type(value) is cst.Name:
            return "none" if value.value == "None" else "any"
        if type(value) is cst.IfExp:
            branches = {self._assigned_shape(value.body, shadowed), self._assigned_shape(value.orelse, shadowed)}
            return "unknown" if branches == {"parameter", "none"} else "any"
        return "any"

    def _globals_with_sources(self) -> frozenset[str]:
        if self._relevant_globals is None:
            names: set[str] = set()
            for stmt in self.ctx.module.body:
                if type(stmt) in (cst.FunctionDef, cst.ClassDef):
                    continue
                if _mentions_sources(self.ctx.tree, stmt, frozenset()):
                    names.update(_module_names_bound(stmt))
            self._relevant_globals = frozenset(names)
        return self._relevant_globals

    def module_scope(self) -> ScopeResult:
        if self._module is None:
            self._module = ScopeResult()  # a re-entrant question sees an empty module
            self._module = ScopeEvaluator(self, self.ctx.module, []).run()
        return self._module

    def global_value(self, name: str) -> AbstractValue:
        value = self.module_scope().assigned.get(name)
        if value is None:
            return OTHER if name in self.classes or name in self.imports.aliases else UNKNOWN
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
                qualified in T.MODULE_BASES or qualified.startswith(("torch.nn.", *T.MODEL_CLASS_PACKAGES))
            ):
                answer = True
                break
        if not answer:
            seen = _seen | {id(node)}
            answer = any(self.is_module_class(b, strict=strict, _seen=seen) for b in self.local_bases(node))
        if not answer and not strict and node.bases:
            answer = any(m.name.value == "forward" for m in self._methods(node))
        self._module_classes[key] = answer
        return answer

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
                args = _positional(child)
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
                if qualified in T.PARAMETER_LAYERS or qualified == "torch.nn.Parameter":
                    answer = True
                elif qualified in T.OPTIONAL_STATE_LAYERS:
                    answer = any(_is_true(_kwarg(child, k)) for k in T.OPTIONAL_STATE_LAYERS[qualified])
                elif qualified.startswith(T.MODEL_FACTORIES):
                    answer = True
                elif type(child.func) is cst.Attribute and child.func.attr.value in (
                    "register_buffer", "register_parameter",
                ):  # fmt: skip
                    answer = True
                else:
                    name = dotted_name(child.func)
                    local = self.classes.get(name) if name else None
                    answer = local is not None and local is not node and self.holds_params(local)
                if answer:
                    break
        if not answer:
            answer = any(self.holds_params(b) for b in self.local_bases(node))
        self._holds_params[id(node)] = answer
        return answer

    def places_itself(self, node: cst.ClassDef, _seen: frozenset = frozenset()) -> bool:
        """Does the class move itself or build its layers on a chosen device
        (`self.to(device)`, `nn.Linear(..., device=device)`, `**factory_kwargs`)? Then an
        instance is not known to start on the CPU."""
        if id(node) in _seen:
            return False
        for method in self._methods(node):
            params = method.params.params
            self_name = params[0].name.value if params else None
            for child in self.ctx.tree.walk(method.body):
                if type(child) is not cst.Call:
                    continue
                func = child.func
                if (
                    type(func) is cst.Attribute
                    and func.attr.value in T.MOVE_METHODS
                    and type(func.value) is cst.Name
                    and func.value.value == self_name
                ):
                    return True
                if (self.qualify(func, frozenset()) or "").startswith("torch.nn.") and any(
                    a.star == "**" or (a.keyword is not None and a.keyword.value == "device") for a in child.args
                ):
                    return True
        return any(self.places_itself(b, _seen | {id(node)}) for b in self.local_bases(node))

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
        for cls in [*self.local_bases(node), node]:
            for method in self._methods(cls):
                if self.is_relevant(method, building=True):
                    assigned = ScopeEvaluator(self, method, [], phase1=True).run().assigned
                    attrs = {key.split(".", 1)[1]: value for key, value in assigned.items()}
                else:
                    # not interpreted: whatever it assigns to `self` is unknown
                    attrs = dict.fromkeys(_self_attributes_assigned(method), UNKNOWN)
                for attr, value in attrs.items():
                    joined[attr] = joined[attr].join(value) if attr in joined else value
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


class ScopeEvaluator:
    """Runs one scope (function, lambda or module body) over abstract values."""

    def __init__(self, model: FileModel, scope: cst.CSTNode, enclosing: list, *, phase1: bool = False) -> None:
        self.model = model
        self.scope = scope
        self.phase1 = phase1
        self.result = ScopeResult()
        self.cls: cst.ClassDef | None = None
        self.self_name: str | None = None
        self.is_module_method = False
        self.params: dict[str, AbstractValue] = {}
        self.opaque: set[str] = set()
        ctx = model.ctx
        if type(scope) in (cst.FunctionDef, cst.Lambda):
            self.locals = ctx.bindings_of(scope)
            self.outer = frozenset().union(*(ctx.bindings_of(f) for f in enclosing))
        else:
            self.locals = frozenset()
            self.outer = frozenset()
        self.shadowed = self.locals | self.outer
        self._loops: list[tuple[list[State], list[State]]] = []
        if type(scope) is cst.FunctionDef:
            self._setup_function(scope)

    # -- set-up ------------------------------------------------------------------------

    def _setup_function(self, function: cst.FunctionDef) -> None:
        params = function.params
        ordered = [*params.posonly_params, *params.params]
        self.cls = self.model.class_of.get(id(function))
        decorators = _decorator_names(function)
        if self.cls is not None and ordered and "staticmethod" not in decorators:
            self.self_name = ordered[0].name.value
            self.is_module_method = self.model.is_module_class(self.cls)
            kind = Kind.MODULE if self.is_module_method else Kind.OTHER
            if "classmethod" in decorators:
                kind = Kind.OTHER
            self.params[self.self_name] = AbstractValue(kind, holds_params=self.is_module_method)
            ordered = ordered[1:]
        for param in (*ordered, *params.kwonly_params):
            self.params[param.name.value] = UNKNOWN
        if self.is_module_method:
            for name, node in self._tensor_params(function, ordered + list(params.kwonly_params)).items():
                self.params[name] = AbstractValue(
                    Kind.TENSOR, accel(f"{name}.device"), None, node, Source.PARAMETER,
                    f"parameter of {function.name.value}",
                )  # fmt: skip
        for param in (params.star_arg, params.star_kwarg):
            if type(param) is cst.Param:
                self.params[param.name.value] = OTHER

    def _tensor_params(self, function: cst.FunctionDef, params: list[cst.Param]) -> dict[str, cst.Param]:
        """Parameters the body uses as tensors: `.shape`, `.size()`, passed to a submodule."""
        wanted = {p.name.value: p for p in params}
        methods = {m.name.value for c in [self.cls, *self.model.local_bases(self.cls)] for m in self.model._methods(c)}
        found: dict[str, cst.Param] = {}
        for node in self.model.ctx.tree.walk_scope(function.body):
            if type(node) is cst.Attribute and type(node.value) is cst.Name:
                name = node.value.value
                if name in wanted and node.attr.value in T.TENSOR_USE_ATTRS:
                    found[name] = wanted[name]
            elif type(node) is cst.Call and type(node.func) is cst.Attribute:
                func = node.func
                if (
                    type(func.value) is cst.Name
                    and func.value.value == self.self_name
                    and func.attr.value not in methods
                ):
                    for arg in _positional(node):
                        if type(arg.value) is cst.Name and arg.value.value in wanted:
                            found[arg.value.value] = wanted[arg.value.value]
        return found

    # -- running -----------------------------------------------------------------------

    def run(self) -> ScopeResult:
        default = UNKNOWN_DEVICE if self.model.sets_default_device else CPU
        state = State({}, default)
        scope = self.scope
        if type(scope) is cst.Lambda:
            self.eval(scope.body, state)
        elif type(scope) is cst.FunctionDef:
            self.block(scope.body, state)
        else:
            self.statements(scope.body, state)
        return self.result

    def block(self, body: cst.BaseSuite, state: State | None) -> State | None:
        if state is None:
            return None
        if type(body) is cst.IndentedBlock:
            return self.statements(body.body, state)
        return self.statements([body], state)  # SimpleStatementSuite

    def statements(self, stmts, state: State | None) -> State | None:
        for stmt in stmts:
            if state is None:
                return None
            state = self.statement(stmt, state)
        return state

    def statement(self, stmt: cst.CSTNode, state: State) -> State | None:
        if type(stmt) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            for small in stmt.body:
                state = self.small(small, state)
                if state is None:
                    return None
            return state
        method = getattr(self, "stmt_" + type(stmt).__name__, None)
        if method is not None:
            return method(stmt, state)
        return self._opaque_statement(stmt, state)

    def _opaque_statement(self, stmt: cst.CSTNode, state: State) -> State:
        """A statement the analysis does not model: whatever it binds becomes unknown."""
        for node in self.model.ctx.tree.walk(stmt):
            target = None
            if type(node) in (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor):
                target = node.target
            elif type(node) in (cst.AsName, cst.NamedExpr):
                target = node.name if type(node) is cst.AsName else node.target
            elif type(node) is cst.MatchAs and node.name is not None:
                target = node.name
            if target is not None:
                self.forget(target, state)
        return state

    # -- simple statements -------------------------------------------------------------

    def small(self, node: cst.BaseSmallStatement, state: State) -> State | None:
        if type(node) is cst.Expr:
            self.eval(node.value, state)
        elif type(node) is cst.Assign:
            value = self.eval(node.value, state)
            for target in node.targets:
                self.bind(target.target, value, state, node.value)
        elif type(node) is cst.AnnAssign:
            if node.value is not None:
                value = self.eval(node.value, state)
                self.bind(node.target, value, state, node.value)
        elif type(node) is cst.AugAssign:
            self.aug_assign(node, state)
        elif type(node) in (cst.Return, cst.Raise):
            for child in (getattr(node, "value", None), getattr(node, "exc", None), getattr(node, "cause", None)):
                if child is not None and is_expression(child):
                    self.eval(child, state)
                elif type(child) is cst.From:
                    self.eval(child.item, state)
            return None
        elif type(node) is cst.Break:
            if self._loops:
                self._loops[-1][0].append(state)
            return None
        elif type(node) is cst.Continue:
            if self._loops:
                self._loops[-1][1].append(state)
            return None
        elif type(node) in (cst.Global, cst.Nonlocal):
            for item in node.names:
                self.opaque.add(item.name.value)
                state.env.pop(item.name.value, None)
        elif type(node) in (cst.Import, cst.ImportFrom):
            if type(node.names) is not cst.ImportStar:
                for alias in node.names:
                    target = alias.asname.name if alias.asname else alias.name
                    if type(target) is cst.Name:
                        self.bind(target, OTHER, state)
        elif type(node) is cst.Assert:
            self.eval(node.test, state)
        elif type(node) is cst.Del:
            self.forget(node.target, state)
        return state

    def aug_assign(self, node: cst.AugAssign, state: State) -> None:
        target = self.eval(node.target, state)
        value = self.eval(node.value, state)
        if target.is_tensor:
            # `a += b` on a tensor is in place: `a` is the output
            self._check_inplace(node, Operand(node.target, target), [Operand(node.value, value)])
            result = target
        else:
            result = self._binary_result(node, Operand(node.target, target), Operand(node.value, value))
        self.bind(node.target, result, state)

    # -- compound statements -----------------------------------------------------------

    def stmt_If(self, node: cst.If, state: State) -> State | None:
        self.eval(node.test, state)
        body = self.block(node.body, state.copy())
        orelse = state
        if node.orelse is not None:
            if type(node.orelse) is cst.If:
                orelse = self.stmt_If(node.orelse, state.copy())
            else:
                orelse = self.block(node.orelse.body, state.copy())
        return self.join_states(body, orelse)

    def stmt_For(self, node: cst.For, state: State) -> State | None:
        iterable = self.eval(node.iter, state)
        element = self.element_of(node.iter, iterable, node)

        def bind_target(head: State) -> State:
            self.bind_element(node.target, element, head, node.iter)
            return head

        return self._loop(node, state, bind_target, node.body, node.orelse)

    def stmt_While(self, node: cst.While, state: State) -> State | None:
        def test(head: State) -> State:
            self.eval(node.test, head)
            return head

        return self._loop(node, test(state), test, node.body, node.orelse)

    def _loop(self, node, entry: State, prepare, body, orelse) -> State | None:
        head = entry
        exits: list[State] = []
        for attempt in range(_MAX_LOOP_PASSES + 1):
            self._loops.append(([], []))
            end = self.block(body, prepare(head.copy()))
            breaks, continues = self._loops.pop()
            back = self.join_all([end, *continues])
            new_head = self.join_states(entry, back) or entry
            exits = breaks
            if new_head == head:
                break
            head = new_head if attempt < _MAX_LOOP_PASSES - 1 else self._widen(entry, new_head)
        after = head
        if orelse is not None:
            after = self.block(orelse.body, head.copy())
        return self.join_all([after, *exits])

    def _widen(self, entry: State, state: State) -> State:
        env = {k: (v if entry.env.get(k) == v else UNKNOWN) for k, v in state.env.items()}
        return State(env, state.default if state.default == entry.default else UNKNOWN_DEVICE)

    def stmt_With(self, node: cst.With, state: State) -> State | None:
        previous = state.default
        for item in node.items:
            value = self.eval(item.item, state)
            if type(item.item) is cst.Call and self.qualified(item.item.func) == "torch.device":
                state.default = value.device
            if item.asname is not None:
                self.bind(item.asname.name, value if value.kind is Kind.DEVICE else UNKNOWN, state)
        after = self.block(node.body, state)
        if after is not None:
            after.default = previous
        return after

    def stmt_Try(self, node: cst.Try, state: State) -> State | None:
        entry = state.copy()
        body = self.block(node.body, state)
        handler_entry = self.join_states(entry, body) or entry
        results = []
        for handler in node.handlers:
            if handler.type is not None:
                self.eval(handler.type, handler_entry)
            start = handler_entry.copy()
            if handler.name is not None:
                self.bind(handler.name.name, OTHER, start)
            results.append(self.block(handler.body, start))
        if node.orelse is not None:
            body = self.block(node.orelse.body, body)
        after = self.join_all([body, *results])
        if node.finalbody is not None:
            final = self.block(node.finalbody.body, (after or handler_entry).copy())
            return final if after is not None else None
        return after

    stmt_TryStar = stmt_Try

    def stmt_FunctionDef(self, node: cst.FunctionDef, state: State) -> State:
        for decorator in node.decorators:
            self.eval(decorator.decorator, state)
        self.bind(node.name, OTHER, state)
        return state

    def stmt_ClassDef(self, node: cst.ClassDef, state: State) -> State:
        for arg in node.bases:
            self.eval(arg.value, state)
        self.block(node.body, state.copy())  # the class namespace is its own
        self.bind(node.name, OTHER, state)
        return state

    def stmt_Match(self, node: cst.Match, state: State) -> State | None:
        self.eval(node.subject, state)
        branches = []
        for case in node.cases:
            start = self._opaque_statement(case.pattern, state.copy())
            branches.append(self.block(case.body, start))
        return self.join_all([state, *branches])

    # -- joins -------------------------------------------------------------------------

    def join_states(self, a: State | None, b: State | None) -> State | None:
        if a is None:
            return b
        if b is None:
            return a
        env = {}
        for key in a.env.keys() | b.env.keys():
            left = a.env.get(key)
            right = b.env.get(key)
            if left is None:
                left = self.fallback(key)
            if right is None:
                right = self.fallback(key)
            env[key] = left.join(right)
        default = a.default if a.default == b.default else UNKNOWN_DEVICE
        return State(env, default)

    def join_all(self, states: list[State | None]) -> State | None:
        joined = None
        for state in states:
            joined = self.join_states(joined, state) if joined is not None else state
        return joined

    # -- names -------------------------------------------------------------------------

    def qualified(self, node: cst.BaseExpression) -> str | None:
        return self.model.qualify(node, self.shadowed)

    def fallback(self, key: str) -> AbstractValue:
        """The value of a name no assignment on this path has bound."""
        head, _, attr = key.partition(".")
        if key in self.opaque or head in self.opaque:
            return UNKNOWN
        if attr:
            if head == self.self_name and not self.phase1 and self.cls is not None and "." not in attr:
                return self.model.summary(self.cls).get(attr, UNKNOWN)
            return UNKNOWN
        if key in self.params:
            return self.params[key]
        if key in self.locals or key in self.outer:
            return UNKNOWN
        if type(self.scope) is cst.Module:
            return UNKNOWN
        return self.model.global_value(key)

    def lookup(self, key: str, state: State) -> AbstractValue:
        value = state.env.get(key)
        return value if value is not None else self.fallback(key)

    def bind(self, target: cst.BaseExpression, value: AbstractValue, state: State,
             value_node: cst.BaseExpression | None = None) -> None:  # fmt: skip
        if type(target) in (cst.Tuple, cst.List):
            elements = target.elements
            values = None
            if type(value_node) in (cst.Tuple, cst.List) and len(value_node.elements) == len(elements):
                if not any(type(e) is cst.StarredElement for e in value_node.elements):
                    values = [self.result.values.get(id(e.value), UNKNOWN) for e in value_node.elements]
            for index, element in enumerate(elements):
                if type(element) is cst.StarredElement:
                    self.bind(element.value, OTHER, state)
                    continue
                item = values[index] if values is not None else self.unpacked(value)
                self.bind(element.value, item, state)
            return
        if type(target) is cst.Subscript:
            self.eval(target.value, state)
            for element in target.slice:
                self._eval_slice(element, state)
            return
        key = _key(target)
        if key is None:
            if type(target) is cst.Attribute:
                self.eval(target.value, state)
            return
        if type(target) is cst.Name:
            value = _resymbolize(value, key)
            prefix = key + "."
            for stale in [k for k in state.env if k.startswith(prefix)]:
                del state.env[stale]
        elif value.kind in (Kind.DEVICE, Kind.OTHER):
            value = _resymbolize(value, key)
        state.env[key] = value
        self.result.values[id(target)] = value
        if "." in key and key.split(".", 1)[0] == self.self_name:
            self._assigned(key, value)
        elif type(self.scope) is cst.Module and "." not in key:
            self._assigned(key, value)

    def _assigned(self, key: str, value: AbstractValue) -> None:
        old = self.result.assigned.get(key)
        self.result.assigned[key] = value if old is None else old.join(value)

    def forget(self, target: cst.BaseExpression, state: State) -> None:
        for name in bound_names(target):
            state.env[name] = UNKNOWN
        key = _key(target)
        if key is not None and "." in key:
            state.env[key] = UNKNOWN

    def unpacked(self, value: AbstractValue) -> AbstractValue:
        """An element of `a, b = value`."""
        if value.kind is Kind.BATCH:
            return AbstractValue(Kind.TENSOR, value.device, False, value.origin, value.source, value.how)
        if value.is_tensor:
            return replace(value, zero_dim=None)
        return UNKNOWN

    def element_of(self, expr: cst.BaseExpression, value: AbstractValue, loop: cst.CSTNode) -> AbstractValue:
        """What iterating `expr` yields (tuple shapes are handled by `bind_element`)."""
        if value.kind is Kind.DATALOADER:
            return AbstractValue(Kind.BATCH, CPU, False, loop, Source.LOADER, "a DataLoader batch")
        if value.is_tensor:
            return replace(value, zero_dim=None)
        if type(expr) is cst.Call:
            name = self.qualified(expr.func) or dotted_name(expr.func)
            args = _positional(expr)
            if name in T.ITERATION_WRAPPERS and args:
                inner = args[0].value
                return self.element_of(inner, self.result.values.get(id(inner), UNKNOWN), loop)
        return UNKNOWN

    def bind_element(self, target: cst.BaseExpression, element: AbstractValue, state: State,
                     iterable: cst.BaseExpression) -> None:  # fmt: skip
        if type(iterable) is cst.Call and type(target) in (cst.Tuple, cst.List):
            name = dotted_name(iterable.func)
            args = _positional(iterable)
            elements = [e.value for e in target.elements]
            if name == "enumerate" and args and len(elements) == 2:
                self.bind(elements[0], OTHER, state)
                inner = args[0].value
                item = self.element_of(inner, self.result.values.get(id(inner), UNKNOWN), iterable)
                self.bind_element(elements[1], item, state, inner)
                return
            if name == "zip" and len(args) == len(elements):
                for arg, sub in zip(args, elements):
                    item = self.element_of(arg.value, self.result.values.get(id(arg.value), UNKNOWN), iterable)
                    self.bind_element(sub, item, state, arg.value)
                return
        self.bind(target, element, state)

    # -- expressions -------------------------------------------------------------------

    def eval(self, node: cst.BaseExpression, state: State) -> AbstractValue:
        method = _DISPATCH.get(type(node), _MISSING)
        if method is _MISSING:
            method = _DISPATCH[type(node)] = getattr(ScopeEvaluator, "eval_" + type(node).__name__, None)
        if method is None:
            for child in _expression_children(node):
                self.eval(child, state)
            value = UNKNOWN
        else:
            value = method(self, node, state)
        self.result.values[id(node)] = value
        return value

    def eval_Name(self, node: cst.Name, state: State) -> AbstractValue:
        if node.value in ("None", "True", "False"):
            return OTHER
        if node.value not in self.shadowed and node.value in self.model.imports.aliases:
            return OTHER
        if node.value in _BUILTINS_OTHER and node.value not in state.env and node.value not in self.shadowed:
            return OTHER
        return self.lookup(node.value, state)

    def eval_Attribute(self, node: cst.Attribute, state: State) -> AbstractValue:
        key = _key(node)
        if key is not None and key in state.env:
            self.eval(node.value, state)
            return state.env[key]
        qualified = self.qualified(node)
        if qualified is not None:
            return OTHER
        receiver = self.eval(node.value, state)
        if key is not None and key.split(".", 1)[0] == self.self_name and key.count(".") == 1:
            return self.fallback(key)
        attr = node.attr.value
        if receiver.kind in (Kind.TENSOR, Kind.BATCH):
            if attr == "device":
                device = receiver.device if receiver.device.known else accel(f"{key or 'tensor'}.device")
                return AbstractValue(Kind.DEVICE, device, origin=receiver.origin, source=receiver.source, how=receiver.how)
            if attr in T.TENSOR_ATTRS:
                return replace(receiver, kind=Kind.TENSOR, is_parameter=False)
            if attr in T.NON_TENSOR_ATTRS:
                return OTHER
            return UNKNOWN
        if receiver.kind is Kind.MODULE and attr in ("weight", "bias"):
            return AbstractValue(Kind.TENSOR, receiver.device, None, receiver.origin, receiver.source,
                                 receiver.how, is_parameter=True)  # fmt: skip
        if receiver.kind is Kind.DEVICE and attr in ("type", "index"):
            return OTHER
        if attr == "device" and receiver.kind is Kind.UNKNOWN:
            if receiver.device.known:
                return AbstractValue(Kind.DEVICE, receiver.device, origin=receiver.origin)
            if key is not None:
                return AbstractValue(Kind.DEVICE, accel(key))
        if attr in ("shape", "dtype", "ndim", "is_cuda"):
            return OTHER
        return UNKNOWN

    def eval_SimpleString(self, node: cst.SimpleString, state: State) -> AbstractValue:
        literal = string_value(node)
        if literal is not None:
            kind = literal.split(":", 1)[0].strip()
            if kind == "cpu":
                return AbstractValue(Kind.OTHER, CPU, source=Source.LITERAL)
            if accelerator_type(literal):
                return AbstractValue(Kind.OTHER, accel(node.value), source=Source.LITERAL)
        return OTHER

    def eval_Integer(self, node, state):
        return OTHER

    eval_Float = eval_Imaginary = eval_Integer

    def eval_ConcatenatedString(self, node, state):
        return OTHER

    def eval_FormattedString(self, node, state):
        for child in _expression_children(node):
            self.eval(child, state)
        return OTHER

    def eval_Ellipsis(self, node, state):
        return OTHER

    def eval_Lambda(self, node, state):
        return OTHER

    def _collection(self, node, state) -> AbstractValue:
        for element in node.elements:
            if type(element) is cst.DictElement:
                self.eval(element.key, state)
                self.eval(element.value, state)
            else:
                self.eval(element.value, state)
        return OTHER

    eval_Tuple = eval_List = eval_Set = eval_Dict = _collection

    def _comprehension(self, node, state) -> AbstractValue:
        inner = state.copy()
        comp = node.for_in
        first = True
        while comp is not None:
            iterable = self.eval(comp.iter, state if first else inner)
            first = False
            self.bind_element(comp.target, self.element_of(comp.iter, iterable, comp), inner, comp.iter)
            for condition in comp.ifs:
                self.eval(condition.test, inner)
            comp = comp.inner_for_in
        if type(node) is cst.DictComp:
            self.eval(node.key, inner)
            self.eval(node.value, inner)
        else:
            self.eval(node.elt, inner)
        return OTHER

    eval_ListComp = eval_SetComp = eval_GeneratorExp = eval_DictComp = _comprehension

    def eval_NamedExpr(self, node: cst.NamedExpr, state: State) -> AbstractValue:
        value = self.eval(node.value, state)
        self.bind(node.target, value, state, node.value)
        return value

    def eval_IfExp(self, node: cst.IfExp, state: State) -> AbstractValue:
        self.eval(node.test, state)
        body = self.eval(node.body, state)
        orelse = self.eval(node.orelse, state)
        devices = (Kind.DEVICE, Kind.OTHER)
        if body.kind in devices and orelse.kind in devices and body.device.known and orelse.device.known:
            symbol = self.model.ctx.module.code_for_node(node)
            device = join_symbolic(body.device, orelse.device, symbol)
            return AbstractValue(Kind.OTHER if body.kind != orelse.kind else body.kind, device, source=Source.LITERAL)
        return body.join(orelse)

    def eval_BooleanOperation(self, node: cst.BooleanOperation, state: State) -> AbstractValue:
        left = self.eval(node.left, state)
        right = self.eval(node.right, state)
        if left.kind is Kind.OTHER and not left.device.known:
            return right if type(node.operator) is cst.And else left.join(right)
        return left.join(right)

    def eval_UnaryOperation(self, node: cst.UnaryOperation, state: State) -> AbstractValue:
        value = self.eval(node.expression, state)
        if type(node.operator) is cst.Not:
            return OTHER
        return value if value.tensor_like else (OTHER if value.kind is Kind.OTHER else UNKNOWN)

    def eval_Await(self, node, state):
        self.eval(node.expression, state)
        return UNKNOWN

    def eval_Starred(self, node, state):
        self.eval(node.value, state)
        return UNKNOWN

    def eval_BinaryOperation(self, node: cst.BinaryOperation, state: State) -> AbstractValue:
        left = self.eval(node.left, state)
        right = self.eval(node.right, state)
        if type(node.operator) is cst.Modulo and left.kind is Kind.OTHER:
            return OTHER  # string formatting
        return self._binary_result(node, Operand(node.left, left), Operand(node.right, right))

    def eval_Comparison(self, node: cst.Comparison, state: State) -> AbstractValue:
        operands = [Operand(node.left, self.eval(node.left, state))]
        for target in node.comparisons:
            operands.append(Operand(target.comparator, self.eval(target.comparator, state)))
        if any(type(t.operator) in (cst.Is, cst.IsNot, cst.In, cst.NotIn) for t in node.comparisons):
            return OTHER
        if len(operands) == 2:
            return self._binary_result(node, operands[0], operands[1], comparison=True)
        return UNKNOWN

    def eval_Subscript(self, node: cst.Subscript, state: State) -> AbstractValue:
        value = self.eval(node.value, state)
        for element in node.slice:
            self._eval_slice(element, state)
        # indexing with a CPU index or mask is legal: the result lives with the indexed tensor
        if value.kind in (Kind.TENSOR, Kind.BATCH):
            zero_dim = False if value.kind is Kind.BATCH else None
            return AbstractValue(Kind.TENSOR, value.device, zero_dim, value.origin, value.source, value.how)
        if value.kind is Kind.MODULE:
            return value
        return UNKNOWN

    def _eval_slice(self, element: cst.SubscriptElement, state: State) -> None:
        inner = element.slice
        if type(inner) is cst.Index:
            self.eval(inner.value, state)
        elif type(inner) is cst.Slice:
            for part in (inner.lower, inner.upper, inner.step):
                if part is not None:
                    self.eval(part, state)

    # -- calls -------------------------------------------------------------------------

    def eval_Call(self, node: cst.Call, state: State) -> AbstractValue:
        func = node.func
        qualified = self.qualified(func)
        receiver = None
        if qualified is not None:
            self.result.values[id(func)] = OTHER
        elif type(func) is cst.Attribute:
            receiver = self.eval(func.value, state)
        else:
            callee = self.eval(func, state)
        args = [self.eval(arg.value, state) for arg in node.args]
        if qualified is not None:
            return self._torch_call(qualified, node, args, state)
        if receiver is not None:
            key = _key(func)
            if key is not None and key in state.env:
                callee = state.env[key]
            elif self._is_self(func.value):
                callee = self.fallback(f"{self.self_name}.{func.attr.value}")
            else:
                callee = None
            if callee is not None and callee.is_module:
                self.result.values[id(func)] = callee
                return self._module_call(node, callee, args)
            result = self._method_call(node, func.attr.value, receiver, func.value, args, state)
        else:
            result = self._plain_call(node, func, callee, args, state)
        if result == UNKNOWN:
            self._escape(node, args, state)
        return result

    def _escape(self, node: cst.Call, args: list[AbstractValue], state: State) -> None:
        """A module handed to code the analysis cannot see (`accelerator.prepare(model)`,
        `fabric.setup(model)`, a helper) may come back moved: its device is unknown."""
        for arg, value in zip(node.args, args):
            if value.is_module and value.device.known and _key(arg.value) is not None:
                self.bind(arg.value, replace(value, device=UNKNOWN_DEVICE, origin=None, how=""), state)

    def _is_self(self, expr: cst.BaseExpression) -> bool:
        return type(expr) is cst.Name and expr.value == self.self_name

    def _plain_call(self, node: cst.Call, func, callee: AbstractValue, args, state: State) -> AbstractValue:
        if callee.is_module:
            return self._module_call(node, callee, args)
        name = func.value if type(func) is cst.Name else None
        if name is not None and name not in self.shadowed:
            local_class = self.model.classes.get(name)
            if local_class is not None:
                if self.model.is_module_class(local_class):
                    device = UNKNOWN_DEVICE if self.model.places_itself(local_class) else state.default
                    if any(a.keyword is not None and "device" in a.keyword.value for a in node.args):
                        device = UNKNOWN_DEVICE  # Net(device=d) may build its layers there
                    return AbstractValue(Kind.MODULE, device, None, node, Source.CONSTRUCTION, f"{name}()",
                                         holds_params=self.model.holds_params(local_class))  # fmt: skip
                return OTHER
            if name == "next" and args and args[0].kind is Kind.DATALOADER:
                return AbstractValue(Kind.BATCH, CPU, False, node, Source.LOADER, "a DataLoader batch")
            if name == "iter" and args and args[0].kind is Kind.DATALOADER:
                return args[0]
            if name in _BUILTINS_OTHER and callee.kind is Kind.OTHER:
                return OTHER
        return UNKNOWN

    def _module_call(self, node: cst.Call, module: AbstractValue, args: list[AbstractValue]) -> AbstractValue:
        tensors = [Operand(a.value, v) for a, v in zip(node.args, args) if v.tensor_like and a.keyword is None]
        if module.holds_params and module.device.known:
            for operand in tensors:
                if operand.value.zero_dim is not True and disagree(module.device, operand.value.device):
                    module_side = Operand(node.func, module)
                    cpu, other = (module_side, operand) if module.device.is_cpu else (operand, module_side)
                    self._conflict(Conflict(node, cpu, other, "module"))
                    break
            return AbstractValue(Kind.UNKNOWN, module.device, None, module.origin, module.source, module.how)
        if module.stateless:
            self._check_operands(node, tensors)  # a loss is an operation on its inputs
        known = [o.value for o in tensors if o.value.device.known]
        if known:
            first = known[0]
            device = first.device
            for value in known[1:]:
                device = join_devices(device, value.device)
            origin = first.origin if device == first.device else None
            return AbstractValue(Kind.UNKNOWN, device, None, origin, first.source, first.how if origin else "")
        return UNKNOWN

    # -- torch.* -----------------------------------------------------------------------

    def _torch_call(self, qualified: str, node: cst.Call, args: list[AbstractValue], state: State) -> AbstractValue:
        short = code_of_name(node.func, self.model.ctx.module)
        if qualified in T.FACTORIES:
            return self._factory(qualified, short, node, args, state)
        if qualified in T.LIKE_FACTORIES:
            positional = [v for a, v in zip(node.args, args) if a.keyword is None]
            base = positional[0] if positional else UNKNOWN
            device_arg = _kwarg(node, "device")
            if device_arg is not None:
                self._snapshot(node, state)
                device = self.device_at(device_arg.value, state)
                return AbstractValue(Kind.TENSOR, device, base.zero_dim, node, Source.FACTORY, f"{short}(device=...)")
            return AbstractValue(Kind.TENSOR, base.device, base.zero_dim, base.origin, base.source, base.how)
        if qualified in T.LEGACY_CPU_TYPES:
            return AbstractValue(Kind.TENSOR, state.default, None, node, Source.FACTORY, f"{short}(...)")
        if qualified in T.LEGACY_CUDA_TYPES:
            return AbstractValue(Kind.TENSOR, accel('"cuda"'), None, node, Source.FACTORY, f"{short}(...)")
        if qualified in T.CPU_SOURCES:
            return AbstractValue(Kind.TENSOR, CPU, None, node, Source.NUMPY, f"{short}(...)")
        if qualified == "torch.accelerator.current_accelerator":
            return AbstractValue(Kind.DEVICE, accel(short + "()"), source=Source.LITERAL)
        if qualified == "torch.device":
            return AbstractValue(Kind.DEVICE, self._device_call(node, state), source=Source.LITERAL)
        if qualified in _PARAMETER_CLASSES:
            data = args[0] if args else UNKNOWN
            return AbstractValue(Kind.TENSOR, data.device, data.zero_dim, data.origin, data.source, data.how,
                                 is_parameter=True)  # fmt: skip
        if qualified == "torch.set_default_device":
            state.default = self.device_at(node.args[0].value, state) if node.args else UNKNOWN_DEVICE
            return OTHER
        if qualified in T.DATALOADERS:
            return AbstractValue(Kind.DATALOADER, CPU, None, node, Source.CONSTRUCTION, "DataLoader(...)")
        last = qualified.rsplit(".", 1)[-1]
        if qualified in T.MODULE_WRAPPERS:
            # DataParallel(model) holds `model`, wherever that is
            wrapped = args[0] if args and node.args[0].keyword is None else UNKNOWN
            return wrapped if wrapped.is_module else UNKNOWN
        if last[:1].isupper() and (qualified.count(".") == 2 or qualified.startswith("torch.nn.modules.")) \
                and qualified.startswith("torch.nn."):
            return self._layer(qualified, short, node, args, state)
        if any(qualified.startswith(p) for p in T.MODEL_FACTORIES):
            device = UNKNOWN_DEVICE if _kwarg(node, "device_map") or _kwarg(node, "device") else state.default
            return AbstractValue(Kind.MODULE, device, None, node, Source.CONSTRUCTION, f"{short}(...)", holds_params=True)
        if qualified in T.NON_TENSOR_FUNCTIONS or qualified.startswith(T.NOT_OP_NAMESPACES):
            return OTHER if qualified in T.NON_TENSOR_FUNCTIONS else UNKNOWN
        if qualified.startswith(T.OP_NAMESPACES) and last[:1].islower():
            return self._torch_op(qualified, node, args)
        return UNKNOWN

    def _layer(self, qualified: str, short: str, node: cst.Call, args, state: State) -> AbstractValue:
        """A torch.nn module built here: on the default device unless told otherwise, and
        whether it holds parameters or buffers."""
        holds = qualified in T.PARAMETER_LAYERS
        stateless = qualified in T.PARAMETERLESS_LAYERS
        if qualified in T.WEIGHTED_LOSSES:
            holds = _kwarg(node, "weight") is not None or _kwarg(node, "pos_weight") is not None
            stateless = not holds and not any(a.star for a in node.args)
        elif qualified in T.OPTIONAL_STATE_LAYERS:
            holds = any(_is_true(_kwarg(node, k)) for k in T.OPTIONAL_STATE_LAYERS[qualified])
        elif qualified in T.MODULE_CONTAINERS:
            holds = any(v.holds_params for v in args)
        device_arg = _kwarg(node, "device")
        if device_arg is not None:
            device = self.device_at(device_arg.value, state)
        elif any(a.star == "**" for a in node.args):
            device = UNKNOWN_DEVICE  # `**factory_kwargs` may carry device=
        else:
            device = state.default
        return AbstractValue(Kind.MODULE, device, None, node, Source.CONSTRUCTION, f"{short}(...)",
                             holds_params=holds, stateless=stateless)  # fmt: skip

    def _factory(self, qualified: str, short: str, node: cst.Call, args, state: State) -> AbstractValue:
        self._snapshot(node, state)
        positional = [a for a in node.args if a.keyword is None]
        device_arg = _kwarg(node, "device")
        if device_arg is not None:
            device = self.device_at(device_arg.value, state)
            how = f"{short}(device={self.model.ctx.module.code_for_node(device_arg.value)})"
        elif any(a.star == "**" for a in node.args):
            device, how = UNKNOWN_DEVICE, ""  # `**factory_kwargs` may carry device=
        elif qualified in T.DATA_FACTORIES and positional:
            data = self.result.values.get(id(positional[0].value), UNKNOWN)
            if data.kind is Kind.TENSOR:
                device = data.device
            elif data.kind is Kind.OTHER:
                device = state.default
            else:
                device = UNKNOWN_DEVICE
            how = f"{short} without device="
        elif qualified in ("torch.vander", "torch.fill") and positional:
            device = self.result.values.get(id(positional[0].value), UNKNOWN).device
            how = f"{short}(...)"
        else:
            device = state.default
            how = f"{short} without device="
        return AbstractValue(Kind.TENSOR, device, self._factory_zero_dim(qualified, node), node, Source.FACTORY, how)

    def _factory_zero_dim(self, qualified: str, node: cst.Call) -> bool | None:
        """True for `torch.tensor(3.0)` and `torch.zeros(())`, False when the sizes show
        at least one dimension, None when the arguments do not say."""
        positional = [a for a in node.args if a.keyword is None]
        if qualified == "torch.scalar_tensor":
            return True
        if qualified in T.NONZERO_DIM_FACTORIES:
            return False
        if any(a.star for a in positional):
            return None
        if qualified in T.DATA_FACTORIES:
            if not positional:
                return None
            first = positional[0].value
            if type(first) is cst.UnaryOperation:
                first = first.expression
            if type(first) in (cst.Integer, cst.Float) or (
                type(first) is cst.Name and first.value in ("True", "False")
            ):
                return True
            if type(first) in (cst.List, cst.Tuple) and first.elements:
                return False
            return None
        size_arg = _kwarg(node, "size")
        if size_arg is not None:
            sizes = [size_arg.value]
        elif qualified == "torch.randint":
            sizes = [a.value for a in positional if type(a.value) in (cst.Tuple, cst.List)][:1]
        elif qualified == "torch.full":
            sizes = [positional[0].value] if positional else []
        else:
            sizes = [a.value for a in positional]
        if not sizes:
            return None
        if len(sizes) > 1:
            return False
        size = sizes[0]
        if type(size) in (cst.Tuple, cst.List):
            return not size.elements
        return False if _is_int_expr(size) else None

    def _torch_op(self, qualified: str, node: cst.Call, args: list[AbstractValue]) -> AbstractValue:
        operands: list[Operand] = []
        for arg, value in zip(node.args, args):
            if arg.keyword is not None and arg.keyword.value == "out":
                continue
            inner = arg.value
            if type(inner) in (cst.List, cst.Tuple):
                for element in inner.elements:
                    operands.append(Operand(element.value, self.result.values.get(id(element.value), UNKNOWN)))
            elif type(inner) in (cst.ListComp, cst.GeneratorExp):
                operands.append(Operand(inner.elt, self.result.values.get(id(inner.elt), UNKNOWN)))
            else:
                operands.append(Operand(inner, value))
        tensors = [o for o in operands if o.value.tensor_like]
        if qualified in T.SAME_DEVICE_FUNCTIONS:
            base = qualified.rsplit(".", 1)[-1]
            self._check_operands(node, tensors, elementwise=base in T.ELEMENTWISE_METHODS or base == "where")
        if not tensors:
            return UNKNOWN
        last = qualified.rsplit(".", 1)[-1]
        positional = _positional(node)
        zero_dim = None
        if last in T.REDUCTIONS and len(positional) == 1 and _kwarg(node, "dim") is None:
            zero_dim = True
        elif last in ("cat", "concat", "concatenate", "stack") or last in T.ELEMENTWISE_METHODS:
            zero_dim = False if any(o.value.zero_dim is False for o in tensors) else None
        return self._result_on(tensors, zero_dim)

    def _result_on(self, tensors: list[Operand], zero_dim: bool | None) -> AbstractValue:
        """Where the result of an operation on `tensors` lives: with its known operands.
        When they disagree the operation fails; after the fix it runs on the accelerator,
        so that is where the result is taken to live."""
        known = [o.value for o in tensors if o.value.device.known]
        deciding = [v for v in known if v.device.is_accel] or known
        if not deciding:
            return AbstractValue(Kind.TENSOR, zero_dim=zero_dim)
        first = deciding[0]
        device = first.device
        for value in deciding[1:]:
            device = join_devices(device, value.device)
        same = all(v.origin is first.origin for v in deciding)
        origin = first.origin if same else None
        return AbstractValue(Kind.TENSOR, device, zero_dim, origin, first.source if same else Source.NONE,
                             first.how if same else "")  # fmt: skip

    # -- methods -----------------------------------------------------------------------

    def _method_call(self, node: cst.Call, name: str, receiver: AbstractValue, receiver_expr,
                     args: list[AbstractValue], state: State) -> AbstractValue:  # fmt: skip
        if name in T.MOVE_METHODS:
            return self._move(node, name, receiver, receiver_expr, state)
        kind = receiver.kind
        if kind is Kind.TENSOR or (kind is Kind.UNKNOWN and receiver.device.known and name in T.TENSOR_METHODS):
            # a moved value, or a module's output, that is used like a tensor is one
            return self._tensor_method(node, name, replace(receiver, kind=Kind.TENSOR), receiver_expr, args)
        if kind is Kind.MODULE:
            if name in T.MODULE_SELF_METHODS:
                return receiver
            if name == "forward":
                return self._module_call(node, receiver, args)
            return UNKNOWN
        if kind is Kind.BATCH and name in ("float", "long", "half", "double", "int", "bool"):
            return replace(receiver, kind=Kind.TENSOR)
        if kind is Kind.DATALOADER and name == "__iter__":
            return receiver
        if name in ("numpy", "item", "tolist"):
            return OTHER
        return UNKNOWN

    def _move(self, node: cst.Call, name: str, receiver: AbstractValue, receiver_expr, state: State) -> AbstractValue:
        code = self.model.ctx.module.code_for_node
        if name == "cpu":
            target: Device | None = CPU
        elif name == "to":
            target = self._to_target(node, receiver, state)
        elif name == "to_empty":
            device_arg = _kwarg(node, "device") or next(iter(_positional(node)), None)
            target = self.device_at(device_arg.value, state) if device_arg is not None else UNKNOWN_DEVICE
        else:
            positional = _positional(node)
            index = code(positional[0].value) if positional else None
            device_arg = _kwarg(node, "device")
            if device_arg is not None:
                target = self.device_at(device_arg.value, state)
            else:
                target = accel(f'"{name}:{index}"' if index is not None else f'"{name}"')
        how = f".{name}({', '.join(code(a) for a in node.args)})".replace("\n", " ")
        if receiver.kind is Kind.OTHER or receiver.kind is Kind.DEVICE:
            return UNKNOWN
        if target is None:  # a dtype or memory-format conversion: stays where it is
            return receiver
        moved = receiver.on(target, node, Source.MOVE, how)
        if receiver.kind is Kind.MODULE:
            key = _key(receiver_expr)
            if key is not None:  # Module.to / .cuda / .cpu move in place
                self.bind(receiver_expr, moved, state)
        if not target.known:
            moved = replace(moved, origin=None, source=Source.NONE, how="")
        return moved

    def _to_target(self, node: cst.Call, receiver: AbstractValue, state: State) -> Device | None:
        """The device `.to(...)` moves to; None when it is no device move at all."""
        device_arg = _kwarg(node, "device")
        if device_arg is not None:
            return self.device_at(device_arg.value, state)
        positional = _positional(node)
        if not positional:
            if any(a.keyword is not None and a.keyword.value == "other" for a in node.args):
                return UNKNOWN_DEVICE
            return None
        first = positional[0].value
        value = self.result.values.get(id(first), UNKNOWN)
        if value.tensor_like:
            return value.device  # `.to(other)`: other's device (and dtype)
        if value.kind is Kind.DEVICE or (value.kind is Kind.OTHER and value.device.known):
            return value.device
        qualified = self.qualified(first)
        dotted = dotted_name(first) or ""
        if qualified in T.DTYPES or dotted.endswith("dtype") or qualified == "torch.channels_last":
            return None
        if type(first) is cst.Integer:
            return accel(first.value)
        last = dotted.rsplit(".", 1)[-1]
        if dotted and ("device" in last or last in T.DEVICE_LIKE_NAMES):
            return accel(dotted)
        return UNKNOWN_DEVICE

    def _tensor_method(self, node: cst.Call, name: str, receiver: AbstractValue, receiver_expr,
                       args: list[AbstractValue]) -> AbstractValue:  # fmt: skip
        if name in T.NON_TENSOR_METHODS:
            if name == "type" and node.args:
                return AbstractValue(Kind.TENSOR)
            return OTHER
        if name == "type_as":
            other = args[0] if args else UNKNOWN
            return replace(receiver, device=other.device, origin=other.origin, source=other.source, how=other.how)
        if name.startswith("new_"):
            device_arg = _kwarg(node, "device")
            if device_arg is not None:
                return AbstractValue(Kind.TENSOR, self.result.values.get(id(device_arg.value), UNKNOWN).device)
            return replace(receiver, zero_dim=None, is_parameter=False)
        if name not in T.TENSOR_METHODS:
            return UNKNOWN
        tensors = [
            Operand(a.value, v) for a, v in zip(node.args, args)
            if v.tensor_like and not (a.keyword is not None and a.keyword.value == "out")
        ]  # fmt: skip
        me = Operand(receiver_expr, receiver)
        if name in T.ELEMENTWISE_METHODS or name in T.SAME_DEVICE_METHODS:
            if name.endswith("_"):
                self._check_inplace(node, me, tensors)
                return replace(receiver, is_parameter=False)
            self._check_operands(node, [me, *tensors], elementwise=name in T.ELEMENTWISE_METHODS)
            zero_dim = receiver.zero_dim if receiver.zero_dim is False else None
            return self._result_on([me, *tensors], zero_dim)
        positional = _positional(node)
        if name in T.REDUCTIONS and not positional and _kwarg(node, "dim") is None:
            return replace(receiver, zero_dim=True, is_parameter=False)
        if name in _SHAPE_KEEPING:
            return replace(receiver, is_parameter=False)
        return replace(receiver, zero_dim=None, is_parameter=False)

    # -- device expressions ------------------------------------------------------------

    def device_at(self, expr: cst.BaseExpression, state: State) -> Device:
        """The device a `device=` argument names (already evaluated): a symbolic
        accelerator unless it is known to be the CPU."""
        if type(expr) is cst.Name and expr.value == "None":
            return state.default
        value = self.result.values.get(id(expr))
        if value is None:
            value = self.eval(expr, state)
        if value.kind in (Kind.DEVICE, Kind.OTHER) and value.device.known:
            return value.device
        if type(expr) in (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString):
            return UNKNOWN_DEVICE  # "meta" and friends
        if value.kind in (Kind.TENSOR, Kind.MODULE):
            return UNKNOWN_DEVICE
        return accel(self.model.ctx.module.code_for_node(expr))

    def _device_call(self, node: cst.Call, state: State) -> Device:
        positional = _positional(node)
        if not positional:
            type_arg = _kwarg(node, "type")
            return self.device_at(type_arg.value, state) if type_arg is not None else UNKNOWN_DEVICE
        device = self.device_at(positional[0].value, state)
        if device.is_accel and len(positional) > 1:
            return accel(self.model.ctx.module.code_for_node(node))
        return device

    # -- conflicts ---------------------------------------------------------------------

    def _binary_result(self, node, left: Operand, right: Operand, *, comparison: bool = False) -> AbstractValue:
        tensors = [o for o in (left, right) if o.value.tensor_like]
        if not tensors:
            if left.value.kind is Kind.OTHER and right.value.kind is Kind.OTHER:
                return OTHER
            return UNKNOWN
        matmul = type(getattr(node, "operator", None)) is cst.MatrixMultiply
        self._check_operands(node, tensors, elementwise=not matmul)
        zero_dim = None
        if all(o.value.zero_dim is True for o in tensors):
            zero_dim = True
        elif any(o.value.zero_dim is False for o in tensors):
            zero_dim = False
        if type(getattr(node, "operator", None)) is cst.MatrixMultiply:
            zero_dim = None
        return self._result_on(tensors, zero_dim)

    def _check_operands(self, node: cst.CSTNode, operands: list[Operand], *, elementwise: bool = True) -> None:
        """Inputs of one operation: CPU against an accelerator fails, unless the CPU one
        is a 0-dim tensor of an elementwise operation (PyTorch lets CPU scalars into
        accelerator kernels). A CPU operand of unknown rank is left alone there."""
        accelerated = [o for o in operands if o.value.device.is_accel]
        if not accelerated:
            return
        named = [o for o in accelerated if dotted_name(o.expr) is not None] or accelerated
        for operand in operands:
            value = operand.value
            rank_matters = value.zero_dim is not False if elementwise else value.zero_dim is True
            if value.device.is_cpu and not rank_matters:
                self._conflict(Conflict(node, operand, named[0]))
                return

    def _check_inplace(self, node: cst.CSTNode, output: Operand, inputs: list[Operand]) -> None:
        """`out op= x`: the output's device decides; a CPU output takes no accelerator
        input, even a 0-dim one."""
        if output.value.device.is_cpu:
            for operand in inputs:
                if operand.value.device.is_accel and operand.value.tensor_like:
                    self._conflict(Conflict(node, output, operand, "inplace"))
                    return
        elif output.value.device.is_accel:
            for operand in inputs:
                if operand.value.device.is_cpu and operand.value.zero_dim is False:
                    self._conflict(Conflict(node, operand, output))
                    return

    def _conflict(self, conflict: Conflict) -> None:
        if not self.phase1:
            self.result.conflicts.setdefault(id(conflict.node), conflict)

    def _snapshot(self, node: cst.CSTNode, state: State) -> None:
        if not self.phase1 and id(node) not in self.result.snapshots:
            self.result.snapshots[id(node)] = {**self.params, **state.env}


_DISPATCH: dict[type, object] = {}
_PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


def _decorator_names(function: cst.FunctionDef) -> set[str | None]:
    """The decorators as dotted names (None for a call such as `@torch.no_grad()`)."""
    return {dotted_name(d.decorator) for d in function.decorators}
_MISSING = object()


def _suites(stmt: cst.CSTNode) -> list[cst.BaseSuite]:
    """The blocks of a compound statement (bodies, else, handlers, finally, cases)."""
    suites = []
    for name in ("body", "orelse", "finalbody"):
        part = getattr(stmt, name, None)
        if type(part) is cst.IndentedBlock or type(part) is cst.SimpleStatementSuite:
            suites.append(part)
        elif type(part) in (cst.Else, cst.Finally):
            suites.append(part.body)
        elif type(part) is cst.If:
            suites.extend(_suites(part))
    for handler in getattr(stmt, "handlers", ()):
        suites.append(handler.body)
    for case in getattr(stmt, "cases", ()):
        suites.append(case.body)
    return suites


def _is_true(arg: cst.Arg | None) -> bool:
    return arg is not None and not (type(arg.value) is cst.Name and arg.value.value in ("False", "None"))


def _is_int_expr(expr: cst.BaseExpression) -> bool:
    """`3`, `x.size(0)`, `x.shape[1]`, `len(xs)`, `int(n)` and arithmetic on them."""
    if type(expr) is cst.Integer:
        return True
    if type(expr) is cst.BinaryOperation:
        return _is_int_expr(expr.left) and _is_int_expr(expr.right)
    if type(expr) is cst.Subscript and type(expr.value) is cst.Attribute:
        return expr.value.attr.value == "shape" and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index
    if type(expr) is cst.Call:
        if type(expr.func) is cst.Name:
            return expr.func.value in ("len", "int")
        if type(expr.func) is cst.Attribute:
            return expr.func.attr.value in ("size", "numel", "dim") and bool(expr.args)
    return False


_SHAPE_KEEPING = frozenset(
    {
        "float", "half", "double", "bfloat16", "long", "int", "short", "bool", "byte", "char",
        "clone", "detach", "detach_", "contiguous", "abs", "neg", "exp", "log", "sqrt", "rsqrt",
        "sigmoid", "tanh", "relu", "floor", "ceil", "round", "trunc", "sign", "reciprocal",
        "square", "erf", "requires_grad_", "pin_memory", "fill_", "zero_", "normal_",
        "uniform_", "copy_", "softmax", "log_softmax", "cumsum", "nan_to_num", "logical_not",
        "isnan", "isinf", "isfinite", "clamp_min", "clamp_max", "exp_", "log_", "abs_",
    }
)  # fmt: skip


def _expression_children(node: cst.CSTNode):
    from devlint.analysis.tree import children

    for child in children(node):
        if is_expression(child):
            yield child
        else:
            yield from _expression_children(child)


# Calls whose presence makes a scope worth interpreting: factories, layers and models,
# data loading, moves, syncs and conversions (by their last name, so aliases match).
_RELEVANT_NAMES = frozenset(
    {name.rsplit(".", 1)[-1] for name in (*T.FACTORIES, *T.DATA_FACTORIES, *T.LIKE_FACTORIES, *T.CPU_SOURCES,
                                          *T.PARAMETER_LAYERS, *T.PARAMETERLESS_LAYERS, *T.OPTIONAL_STATE_LAYERS,
                                          *T.MODULE_WRAPPERS, *T.WEIGHTED_LOSSES, *T.MODULE_CONTAINERS,
                                          *T.DATALOADERS, *T.RANDOM_FACTORIES, *T.LEGACY_CPU_TYPES,
                                          *T.LEGACY_CUDA_TYPES)} - {"range"}  # `torch.range`, not `range`
    | T.MOVE_METHODS | T.SYNC_METHODS
    | {"load", "Parameter", "register_buffer", "register_parameter", "set_default_device", "device",
       "create_model", "from_pretrained", "type", "new_zeros", "new_ones", "new_empty", "new_full",
       "new_tensor", "prepare", "setup", "numpy", "Tensor"}
)  # fmt: skip


_LAYER_NAMES = frozenset(
    name.rsplit(".", 1)[-1]
    for name in (*T.PARAMETER_LAYERS, *T.PARAMETERLESS_LAYERS, *T.OPTIONAL_STATE_LAYERS, *T.MODULE_WRAPPERS,
                 *T.WEIGHTED_LOSSES, *T.MODULE_CONTAINERS)
)  # fmt: skip
_RELEVANT_IN_MODULES = _RELEVANT_NAMES - _LAYER_NAMES - {"Parameter", "register_parameter", "create_model",
                                                          "from_pretrained"}

_TENSOR_SOURCE_NAMES = frozenset(
    {name.rsplit(".", 1)[-1] for name in (*T.FACTORIES, *T.DATA_FACTORIES, *T.LIKE_FACTORIES, *T.CPU_SOURCES,
                                          *T.RANDOM_FACTORIES, *T.LEGACY_CPU_TYPES, *T.LEGACY_CUDA_TYPES)}
    | {"cpu", "load", "Tensor"}
)  # fmt: skip


# Bare calls of these are the builtins, not `torch.range` or `Tensor.type`.
_BUILTIN_NAMESAKES = frozenset({"type", "range"})


def _mentions_sources(
    tree: Tree,
    node: cst.CSTNode,
    global_names: frozenset[str] = frozenset(),
    attributes: frozenset[str] = frozenset(),
    names: frozenset[str] = _RELEVANT_NAMES,
    called: frozenset[str] | None = None,
) -> bool:
    """Does `node` call anything in `names` (`called`, when given, for bare-name calls),
    read one of `global_names`, or read `<x>.<attr>` for one of `attributes`?"""
    if called is None:
        called = names
    for child in tree.walk(node):
        child_type = type(child)
        if child_type is cst.Call:
            func = child.func
            func_type = type(func)
            if func_type is cst.Attribute:
                if func.attr.value in names:
                    return True
            elif func_type is cst.Name and func.value in called:
                return True
        elif child_type is cst.Name:
            if global_names and child.value in global_names:
                return True
        elif child_type is cst.Attribute and attributes and child.attr.value in attributes:
            return True
    return False


def _module_names_bound(stmt: cst.CSTNode) -> set[str]:
    names: set[str] = set()
    for node in [stmt, *statements(stmt, enter_definitions=False)]:
        if type(node) is cst.Assign:
            for target in node.targets:
                names.update(bound_names(target.target))
        elif type(node) in (cst.AnnAssign, cst.AugAssign, cst.For):
            names.update(bound_names(node.target))
    return names


def _self_attributes_assigned(method: cst.FunctionDef) -> set[str]:
    """`self.<attr>`s the method assigns."""
    return {attr for attr, _ in _self_assignments(method)}


def _self_assignments(method: cst.FunctionDef) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    """(attr, value) for each `self.<attr> = value` of the method; value is None where the
    attribute does not get the value as it is (unpacking, `+=`, an annotation alone)."""
    for node in _self_assigning_statements(method):
        yield from _self_targets(method, node)


def _self_assigning_statements(method: cst.FunctionDef) -> Iterator[cst.Assign | cst.AnnAssign | cst.AugAssign]:
    if not method.params.params:
        return
    for node in statements(method.body, enter_definitions=False):
        if type(node) in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            yield node


def _self_targets(
    method: cst.FunctionDef, node: cst.Assign | cst.AnnAssign | cst.AugAssign
) -> Iterator[tuple[str, cst.BaseExpression | None]]:
    receiver = method.params.params[0].name.value
    targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
    for target in targets:
        parts = _flatten(target)
        direct = len(parts) == 1 and parts[0] is target and type(node) is not cst.AugAssign
        for element in parts:
            if (type(element) is cst.Attribute and type(element.value) is cst.Name
                    and element.value.value == receiver):  # fmt: skip
                yield element.attr.value, node.value if direct else None


def _flatten(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if type(target) in (cst.Tuple, cst.List):
        return [part for element in target.elements for part in _flatten(element.value)]
    if type(target) is cst.StarredElement:
        return _flatten(target.value)
    return [target]
