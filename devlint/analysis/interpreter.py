"""The interpreter behind the device analysis: one scope, abstract values, statement order.

`ScopeEvaluator` runs one function, lambda or the module body and records the value of
every expression it evaluates; statements and expressions are here, the semantics of
calls (torch functions, layers, moves, tensor methods) in `calls.py`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

import libcst as cst

from devlint.analysis import device_tables as T
from devlint.analysis.lattice import (
    CPU,
    DISTRIBUTION,
    HOST_ARRAY,
    ROWS,
    TENSOR_ITEMS,
    EMPTY_LIST,
    NO_ITEMS,
    NONE,
    OTHER,
    TRUE,
    FALSE,
    UNKNOWN,
    UNKNOWN_DEVICE,
    AbstractValue,
    Conflict,
    Device,
    Kind,
    Operand,
    Source,
    accel,
    is_constant,
    branch_witnesses,
    join_items,
    join_symbolic,
)
from devlint.analysis.tree import (
    assignment_targets,
    bound_names,
    decorator_names,
    dotted_name,
    innermost_call,
    is_expression,
    keyword_arg,
    positional_args,
    signed_int_value,
    statements,
    string_value,
)
from devlint.analysis.calls import TorchCalls
from devlint.analysis.contexts import ENTRY_POINTS, CallContext, CallRecord, matters
from devlint.analysis.guards import accelerator_type, cuda_flag_branch

if TYPE_CHECKING:
    from devlint.analysis.model import FileModel

_MAX_LOOP_PASSES = 4
HOLDS_ACCEL = AbstractValue(Kind.OTHER, holds_accel=True)  # a list literal with an accelerator tensor


@dataclass
class ScopeResult:
    """What one scope's interpretation learnt."""

    values: dict[int, AbstractValue] = field(default_factory=dict)
    conflicts: dict[int, Conflict] = field(default_factory=dict)
    snapshots: dict[int, tuple[dict[str, AbstractValue], Mark]] = field(default_factory=dict)  # params, names
    assigned: dict[str, AbstractValue] = field(default_factory=dict)  # every value a key took
    returns: AbstractValue | None = None  # the join of every `return` (None: no return ran)
    yields: AbstractValue | None = None  # the join of every `yield`
    # parameters the scope calls as modules with an accelerator tensor: name -> that tensor
    param_calls: dict[str, Operand] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)  # calls of the file's own functions
    reads: set[str] = field(default_factory=set)  # module-level names and `self.<attr>`s read
    exits: dict[str, AbstractValue] = field(default_factory=dict)  # `self.<attr>`s as the method leaves them
    moved_params: set[str] = field(default_factory=set)  # parameters moved in place (`m.to(device)`)
    # the parameters moved in place on every path, by the last move (None: on some paths only)
    moved_to: dict[str, AbstractValue | None] = field(default_factory=dict)
    interpreted: bool = True  # False: a scope the analysis left alone (every value unknown)


class State:
    """Abstract values of local names (and `self.<attr>`), plus the default device.

    The work per statement must not grow with the number of names in the scope (a
    module can have tens of thousands): `dotted` indexes the keys of attributes
    (`x.mask`), and `log` records every change in order, so that `mark()` remembers the
    names at one point of the program for free and `names_at` rebuilds them only when a
    fix asks. Change `env` through `set` and `discard` only.
    """

    __slots__ = ("env", "default", "dotted", "log", "entries")

    def __init__(self, env: dict[str, AbstractValue], default: Device, dotted: set[str] | None = None) -> None:
        self.env = env
        self.default = default
        self.dotted = {k for k in env if "." in k or "[" in k} if dotted is None else dotted
        self.log: list[tuple[str, AbstractValue | None]] = list(env.items())
        self.entries = any("[" in k for k in self.dotted)  # any dict entry known (`batch["x"]`)

    def copy(self) -> State:
        return State(dict(self.env), self.default, set(self.dotted))

    def set(self, key: str, value: AbstractValue) -> None:
        self.env[key] = value
        self.log.append((key, value))
        if "." in key:
            self.dotted.add(key)
        elif "[" in key:
            self.dotted.add(key)
            self.entries = True

    def discard(self, key: str) -> None:
        self.env.pop(key, None)
        self.log.append((key, None))
        self.dotted.discard(key)

    def forget_attributes(self, name: str) -> None:
        """`x = ...` rebinds `x`: what was known of `x.<attr>` and `x["key"]` no longer holds."""
        prefixes = (name + ".", name + "[")
        for stale in [k for k in self.dotted if k.startswith(prefixes)]:
            self.discard(stale)

    def forget_entries(self, name: str, only: str | None = None) -> None:
        """`name` may have been changed through another path (`batch.update(...)`, handed
        to a call, `batch[k] = ...`): what was known of its entries (or of the entry
        `only`) no longer holds."""
        prefix = name + "["
        if only is not None:
            self.discard(only)
        elif self.entries:
            for stale in [k for k in self.dotted if k[-1] == "]" and k.startswith(prefix)]:
                self.discard(stale)
        held = self.env.get(name)
        if held is not None and held.entries is not None:
            self.set(name, replace(held, entries=None))

    def mark(self) -> Mark:
        return Mark(self.log, len(self.log))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, State) and self.env == other.env and self.default == other.default


@dataclass(frozen=True)
class Mark:
    """The names of one state at one point: the first `length` changes of its log."""

    log: list[tuple[str, AbstractValue | None]]
    length: int

    def names(self) -> dict[str, AbstractValue]:
        env: dict[str, AbstractValue] = {}
        for key, value in self.log[: self.length]:
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def values_of(self, keys: set[str]) -> dict[str, AbstractValue]:
        """The values `keys` had at this point (those bound then), read from the end."""
        found: dict[str, AbstractValue] = {}
        missing = set(keys)
        for index in range(self.length - 1, -1, -1):
            if not missing:
                break
            key, value = self.log[index]
            if key in missing:
                missing.discard(key)
                if value is not None:
                    found[key] = value
        return found


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


def _entry_key(node: cst.Subscript) -> str | None:
    """The state key of a dict entry with a literal key: `batch["x"]` of a local name."""
    if type(node.value) is not cst.Name or len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return None
    key = node.slice[0].slice.value
    if type(key) is not cst.SimpleString:
        return None
    text = string_value(key)
    return f"{node.value.value}[{text!r}]" if text is not None else None


def _key(expr: cst.BaseExpression) -> str | None:
    """The state key of an assignable expression: `x`, `self.mask`, `args.device`."""
    return dotted_name(expr)


def evident_modules(nodes: Iterable[cst.CSTNode], receiver: str | None = None) -> set[str]:
    """Names (or, with `receiver`, the attributes of that name: `self.<attr>`) that a
    method only a module has is called on among `nodes`."""
    found = set()
    for node in nodes:
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in T.MODULE_EVIDENCE:
            owner = node.func.value
            if receiver is None:
                if type(owner) is cst.Name:
                    found.add(owner.value)
            elif type(owner) is cst.Attribute and type(owner.value) is cst.Name and owner.value.value == receiver:
                found.add(owner.attr.value)
    return found


class ScopeEvaluator(TorchCalls):
    """Runs one scope (function, lambda or module body) over abstract values."""

    def __init__(self, model: FileModel, scope: cst.CSTNode, enclosing: list, *, phase1: bool = False,
                 context: CallContext | None = None) -> None:  # fmt: skip
        self.model = model
        self.scope = scope
        self.phase1 = phase1
        self.context = context  # what the file's calls pass (see `contexts.py`)
        self.result = ScopeResult()
        self.cls: cst.ClassDef | None = None
        self.self_name: str | None = None
        self.is_module_method = False
        self.params: dict[str, AbstractValue] = {}
        self.opaque: set[str] = set()
        self.generated: dict[int, AbstractValue] = {}  # a call of a generator of this file -> what it yields
        self._branches = 0  # how many `if` arms (or conditional expressions) the evaluation is inside
        self._settled_branches = 0  # of those, the `if self.use_memory:` arms every call takes alike
        self.tests: list[cst.BaseExpression] = []  # the tests of the `if` statements around
        # names bound to a wrapped iteration (`pbar = tqdm(enumerate(loader))`), by name
        self.wrapped_iterables: dict[str, cst.Call] = {}
        self._aliased_names: frozenset[str] | None = None  # see `_held_elsewhere`
        self._loop_assigned: dict[int, frozenset[str]] = {}  # see `_varies_per_pass`
        self.summarised: set[int] = set()  # calls of functions of this file with a summary
        self._evident_modules: frozenset[str] | None = None  # see `evidently_module`
        ctx = model.ctx
        if type(scope) in (cst.FunctionDef, cst.Lambda):
            self.locals = ctx.bindings_of(scope)
            self.outer = frozenset().union(*(ctx.bindings_of(f) for f in enclosing))
        else:
            self.locals = frozenset()
            self.outer = frozenset()
        self.shadowed = self.locals | self.outer
        self._loops: list[tuple[list[State], list[State], cst.CSTNode]] = []  # (breaks, continues, the loop)
        self._trying = 0  # `try` statements around the walk
        self.module_sources: dict[str, cst.BaseExpression] = {}  # a module body's names: their last value
        if type(scope) is cst.FunctionDef:
            self._setup_function(scope)

    def evidently_module(self, expr: cst.BaseExpression) -> bool:
        """Is `expr` a name the scope uses as only a module is used (`enc.eval()`,
        `enc.load_state_dict(...)`, `enc.parameters()`)? A model of a class the file
        imports is unknown to the analysis until then; this makes `enc.to(device)` a move
        in place and `enc(x)` a module call (SPEC §4)."""
        if type(expr) is cst.Attribute and self._is_self(expr.value) and self.cls is not None:
            return expr.attr.value in self.model.evident_module_attributes(self.cls)
        if type(expr) is not cst.Name:
            return False
        names = self._evident_modules
        if names is None:
            nodes = self.model.ctx.tree.walk_scope(self.scope)
            names = self._evident_modules = frozenset(evident_modules(nodes) | self._built_and_moved(nodes))
        return expr.value in names

    def _built_and_moved(self, nodes) -> set[str]:
        """Names the scope binds only to an instance of a model class it imports from
        outside torch (`model = GPTModel(cfg)`, a class named as models are) and moves with
        a statement of its own (`model.to(device)`): a model moved in place. A `Trainer`
        or a `Data` moved so is not taken for one."""
        built: dict[str, bool] = {}
        moved: set[str] = set()
        for node in nodes:
            if type(node) is cst.Assign:
                for target in node.targets:
                    if type(target.target) is cst.Name:
                        name = target.target.value
                        built[name] = built.get(name, True) and self._imported_model(node.value)
            elif type(node) is cst.Expr and type(node.value) is cst.Call:
                func = node.value.func
                if type(func) is cst.Attribute and func.attr.value in ("to", "cuda") and type(func.value) is cst.Name:
                    moved.add(func.value.value)
        return {name for name in moved if built.get(name)}

    def _imported_model(self, value: cst.BaseExpression) -> bool:
        if type(value) is not cst.Call or type(value.func) is not cst.Name:
            return False
        name = value.func.value
        if name in self.model.classes or not any(word in name for word in T.MODEL_CLASS_WORDS):
            return False
        qualified = self.model.ctx.imports.qualify(value.func, frozenset()) or ""
        return bool(qualified) and not qualified.startswith(("torch.", "numpy."))

    # -- set-up ------------------------------------------------------------------------

    def _setup_function(self, function: cst.FunctionDef) -> None:
        params = function.params
        ordered = [*params.posonly_params, *params.params]
        self.cls = self.model.class_of.get(id(function))
        decorators = decorator_names(function)
        if self.cls is not None and ordered and "staticmethod" not in decorators:
            self.self_name = ordered[0].name.value
            self.is_module_method = self.model.is_module_class(self.cls)
            kind = Kind.MODULE if self.is_module_method else Kind.OTHER
            if "classmethod" in decorators:
                kind = Kind.OTHER
            self.params[self.self_name] = AbstractValue(kind, holds_params=self.is_module_method)
            ordered = ordered[1:]
        # `thw: tuple[int, int, int]` passed to a submodule is no tensor; a `DataLoader` or
        # an `nn.Module` annotation says what the parameter is
        plain = {p.name.value for p in (*ordered, *params.kwonly_params) if _declared_plain(p)}
        for param in (*ordered, *params.kwonly_params):
            name = param.name.value
            self.params[name] = OTHER if name in plain else self._declared(param)
        ordered = [p for p in ordered if p.name.value not in plain]
        keywords = [p for p in params.kwonly_params if p.name.value not in plain]
        if self.is_module_method:
            for name, node in self._tensor_params(function, ordered + keywords).items():
                self.params[name] = AbstractValue(
                    Kind.TENSOR, accel(f"{name}.device"), None, node, Source.PARAMETER,
                    f"parameter of {function.name.value}",
                )  # fmt: skip
        elif not self.is_module_method:
            # a parameter used as a tensor is one, on a device the function cannot know
            for name in self._used_as_tensors(function, ordered + keywords):
                self.params[name] = AbstractValue(Kind.TENSOR)
        for param in (params.star_arg, params.star_kwarg):
            if type(param) is cst.Param:
                self.params[param.name.value] = OTHER
        if self.context is not None:
            # a module's entry points (`forward`) take input from anywhere; its helpers
            # (`self._gate(x, h)`) take what the module's own calls give them
            # (one call's own tensors, all of them together, are what that call runs with)
            entry = function.name.value in ENTRY_POINTS and self.is_module_method and not self.context.one_call
            for name, passed in self.context.params.items():
                assumed = self.params.get(name)
                if is_constant(passed):
                    self.params[name] = passed  # `to_numpy=True`: decides `if to_numpy:`
                    continue
                if entry and passed.tensor_like:
                    continue  # one call's tensors beside another's assumed devices would disagree
                if assumed is not None and assumed is not OTHER:
                    self.params[name] = _as_passed(assumed, passed, keep_device=entry)

    def _annotated_tensor(self, param: cst.Param) -> bool:
        """`v: Tensor`, `v: torch.Tensor`."""
        return param.annotation is not None and self.qualified(param.annotation.annotation) == "torch.Tensor"

    def _declared(self, param: cst.Param) -> AbstractValue:
        """What a parameter's annotation says it is: a DataLoader, a module, a tensor (on a
        device the function cannot know), or unknown."""
        if param.annotation is None:
            return UNKNOWN
        qualified = self.qualified(param.annotation.annotation)
        if qualified == "torch.Tensor":
            return AbstractValue(Kind.TENSOR)
        if qualified in T.DATALOADERS:
            return AbstractValue(Kind.DATALOADER, CPU, None, param, Source.CONSTRUCTION, "a DataLoader")
        if qualified in T.MODULE_BASES:
            return AbstractValue(Kind.MODULE, holds_params=True)
        return UNKNOWN

    def _used_as_tensors(self, function: cst.FunctionDef, params: list[cst.Param]) -> set[str]:
        """Parameters the body calls a tensor-only method of (`x.size()`, `x.unsqueeze(0)`)
        or reads `x.is_cuda` of."""
        wanted = {p.name.value for p in params}
        found = set()
        for node in self.model.ctx.tree.walk_scope(function.body):
            node_type = type(node)
            if node_type is cst.Call and type(node.func) is cst.Attribute and type(node.func.value) is cst.Name:
                if node.func.value.value in wanted and node.func.attr.value in T.TENSOR_ONLY_METHODS:
                    found.add(node.func.value.value)
            elif node_type is cst.Attribute and type(node.value) is cst.Name:
                if node.value.value in wanted and node.attr.value in T.TENSOR_ONLY_ATTRS:
                    found.add(node.value.value)
        return found

    def _tensor_params(self, function: cst.FunctionDef, params: list[cst.Param]) -> dict[str, cst.Param]:
        """Parameters the body uses as tensors: `.shape`, `.size()`, passed to a submodule."""
        wanted = {p.name.value: p for p in params}
        methods = {m.name.value for c in [self.cls, *self.model.local_bases(self.cls)] for m in self.model._methods(c)}
        # `v: Tensor` says so itself (not in `__init__`, whose arguments are built on the
        # CPU, nor for sequence lengths, which packing wants on the CPU)
        found: dict[str, cst.Param] = {}
        if function.name.value != "__init__":
            found = {name: p for name, p in wanted.items() if self._annotated_tensor(p) and "len" not in name.lower()}
        for node in self.model.ctx.tree.walk_scope(function.body):
            if type(node) is cst.Attribute and type(node.value) is cst.Name:
                name = node.value.value
                if name in wanted and node.attr.value in T.TENSOR_USE_ATTRS:
                    found[name] = wanted[name]
            elif type(node) is cst.Call:
                func = node.func
                submodule = (
                    type(func) is cst.Attribute
                    and type(func.value) is cst.Name
                    and func.value.value == self.self_name
                    and func.attr.value not in methods
                )
                if submodule or (type(func) is cst.Name and func.value == self.self_name):  # `self(x)`
                    for arg in positional_args(node):
                        if type(arg.value) is cst.Name and arg.value.value in wanted:
                            found[arg.value.value] = wanted[arg.value.value]
                elif self._is_tensor_op(func):  # `torch.cat([x, h], 1)`
                    for arg in positional_args(node):
                        items = arg.value.elements if type(arg.value) in (cst.List, cst.Tuple) else [arg]
                        for item in items:
                            if type(item.value) is cst.Name and item.value.value in wanted:
                                found[item.value.value] = wanted[item.value.value]
        return found

    def _is_tensor_op(self, func: cst.BaseExpression) -> bool:
        """A `torch.*` operation that takes tensors (not `torch.device`, not a factory)."""
        qualified = self.qualified(func)
        if qualified is None or not qualified.startswith(T.OP_NAMESPACES) or qualified.startswith(T.NOT_OP_NAMESPACES):
            return False
        last = qualified.rsplit(".", 1)[-1]
        return last[:1].islower() and qualified not in T.NON_TENSOR_FUNCTIONS and qualified not in T.FACTORIES

    # -- running -----------------------------------------------------------------------

    def run(self) -> ScopeResult:
        default = UNKNOWN_DEVICE if self.model.sets_default_device else CPU
        state = State({}, default)
        scope = self.scope
        if type(scope) is cst.Lambda:
            self.eval(scope.body, state)
        elif type(scope) is cst.FunctionDef:
            self._exit(self.block(scope.body, state))
        else:
            end = self.statements(scope.body, state)
            if end is not None:  # the names as the module body leaves them (`FileModel.global_value`)
                self.result.exits = dict(end.env)
        return self.result

    def block(self, body: cst.BaseSuite, state: State | None) -> State | None:
        if state is None:
            return None
        if type(body) is cst.IndentedBlock:
            return self.statements(body.body, state)
        return self.statements([body], state)  # SimpleStatementSuite

    def statements(self, stmts, state: State | None) -> State | None:
        model = self.model
        for stmt in stmts:
            if state is None:
                return None
            model.ticks += 1
            if model.ticks & 255 == 0 and model.out_of_time():
                return None  # the file's budget is spent: what follows stays unknown
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
            value = self.eval(node.value, state)
            call = node.value
            if type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value in T.MOVE_METHODS:
                receiver = call.func.value
                key = dotted_name(receiver)
                if key is not None and self.result.values.get(id(receiver), UNKNOWN).kind is Kind.UNKNOWN:
                    # `model.to(device)` (or `model.table.cpu()`) alone on a line moves a module
                    # in place (on a tensor it does nothing, which is DEV202's): it is not known
                    # to be where it was
                    old = self.result.values.get(id(receiver), UNKNOWN)
                    self.bind(receiver, replace(value, kind=Kind.UNKNOWN), state)
                    self.moved_in_place(receiver, value)
                    self.move_aliases(key, old, replace(value, kind=Kind.UNKNOWN), state)
        elif type(node) is cst.Assign:
            value = self.eval(node.value, state)
            if type(self.scope) is cst.Module and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
                self.module_sources[node.targets[0].target.value] = node.value  # see `host_made`
            if (
                type(node.value) is cst.Name
                and node.value.value not in ("None", "True", "False")
                and value.kind is not Kind.TENSOR
                and value.kind is not Kind.MODULE
            ):
                # `b = batch`: one dict under two names, changed through either (both are
                # left out of entry tracking, see `_held_elsewhere`)
                state.forget_entries(node.value.value)
                if value.entries is not None:
                    value = replace(value, entries=None)
            aliased = any(type(t.target) not in (cst.Tuple, cst.List) for t in node.targets)
            if value.items is not None and type(node.value) is cst.Name and aliased:
                # `store = logits`: one list under two names, filled through either (not
                # `a, b = pair`, which reads its items)
                value = replace(value, items=None)
                self.bind(node.value, value, state)
            for target in node.targets:
                self.bind(target.target, value, state, node.value)
                if type(target.target) is cst.Name:
                    wraps = (
                        type(node.value) is cst.Call
                        and (self.qualified(node.value.func) or dotted_name(node.value.func)) in T.ITERATION_WRAPPERS
                    )
                    if wraps:
                        self.wrapped_iterables[target.target.value] = node.value
                    else:
                        self.wrapped_iterables.pop(target.target.value, None)
            if value.instance_of and type(node.value) is cst.Call and type(node.targets[-1].target) is cst.Name:
                call = innermost_call(node.value)  # `GCN(adj, 4).to(device)`: the construction's arguments
                if dotted_name(call.func) == value.instance_of:
                    self._constructed(node.targets[-1].target.value, call, value, state)
        elif type(node) is cst.AnnAssign:
            if node.value is not None:
                value = self.eval(node.value, state)
                self.bind(node.target, value, state, node.value)
        elif type(node) is cst.AugAssign:
            self.aug_assign(node, state)
        elif type(node) in (cst.Return, cst.Raise):
            for child in (getattr(node, "value", None), getattr(node, "exc", None), getattr(node, "cause", None)):
                if child is not None and is_expression(child):
                    value = self.eval(child, state)
                    if type(node) is cst.Return:
                        self._returned(value)
                elif type(child) is cst.From:
                    self.eval(child.item, state)
            if type(node) is cst.Return:
                if node.value is None:
                    self._returned(OTHER)
                self._exit(state)
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
                state.discard(item.name.value)
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
            if value.holds_accel and not result.tensor_like:
                result = replace(result, holds_accel=True)  # `losses += [loss]`
        self.bind(node.target, result, state)

    # -- compound statements -----------------------------------------------------------

    def stmt_If(self, node: cst.If, state: State) -> State | None:
        self.eval(node.test, state)
        if node.orelse is None and type(self.scope) is cst.Module and _runs_as_script(node.test):
            # `if __name__ == "__main__":` of a script: what follows (and the functions that
            # run after the module body) sees what it did
            return self.block(node.body, state)
        if self._instance_of_base(node.test, state):
            # `if isinstance(data, Dataset):` with `data` an instance of the file's dataset class
            return self.block(node.body, state)
        taken = self._constant_parameter_test(node.test, state)
        if taken is True:
            return self.block(node.body, state)
        if taken is False:  # `if device is not None: x = x.to(device)`, called without `device`
            if node.orelse is None:
                return state
            if type(node.orelse) is cst.If:
                return self.stmt_If(node.orelse, state)
            return self.block(node.orelse.body, state)
        settled = self._settled_test(node.test)
        self._branches += 1
        self._settled_branches += settled
        self.tests.append(node.test)
        try:
            inside = state.copy()
            narrowed, tensor = self._instance_test(node.test)
            if narrowed is not None and tensor:
                # `if isinstance(s, torch.Tensor): s.to(device)`: in that arm `s` is a tensor
                value = self.lookup(narrowed, inside)
                if value.kind is Kind.UNKNOWN:
                    inside.set(narrowed, replace(value, kind=Kind.TENSOR))
                elif value.kind is Kind.OTHER:  # what this file's calls pass is no tensor; another's may be
                    inside.set(narrowed, AbstractValue(Kind.TENSOR))
            elif narrowed is not None and self.lookup(narrowed, inside).kind not in (Kind.OTHER, Kind.DEVICE):
                # `if isinstance(face, (np.ndarray, Image.Image)): np.float32(face)`: not a tensor there
                # (a device string keeps what it names: `if isinstance(device, str):`)
                inside.set(narrowed, OTHER)
            tested = _tensor_device_test(node.test)
            outside = state
            if tested is not None and tested[1] == "cpu":
                # `if not x.is_cpu: x = x.cpu()`: in the arm where the test says so, on the CPU
                outside = state.copy() if node.orelse is not None else state
                self._on_the_cpu(tested[0], inside if tested[2] else outside)
            body = self.block(node.body, inside)
            orelse = outside
            if node.orelse is not None:
                if type(node.orelse) is cst.If:
                    orelse = self.stmt_If(node.orelse, outside.copy())
                else:
                    orelse = self.block(node.orelse.body, outside.copy())
        finally:
            self._branches -= 1
            self._settled_branches -= settled
            self.tests.pop()
        if self.model.ctx.guards.several_devices(node.test):
            # `if torch.cuda.device_count() > 1: net = DataParallel(net); net.to(device)`: a
            # machine with one accelerator takes the other branch
            return self.join_states(orelse, body, single=True)
        either = None if self._varies_per_pass(node.test) else state
        if (
            tested is not None
            and tested[1] == "cuda"
            and self.model.names_other_accelerators()
            and not _on_cuda_only(self.lookup(tested[0], state))
        ):
            # `if x.is_cuda: x = x.cpu()` in a file that also picks MPS: where `x` is not on
            # CUDA it may be on the Mac's accelerator, not only on the CPU
            return self.join_states(body, orelse, either=either)
        side = self._accelerated_branch(node.test)
        if side == "orelse":
            return self.join_states(orelse, body, guarded=True, either=either)
        joined = self.join_states(body, orelse, guarded=side == "body", either=either)
        name = _none_tested(node)
        if name is not None and joined is not None and body is not None and orelse is not None:
            # `if h is None: h = torch.zeros(...)`: where nothing is known of the `h` given
            # (or only what a module assumes of its input), it is what the default path makes
            made = body.env.get(name)
            given = self.lookup(name, orelse)
            if made is not None and made.tensor_like and (given == UNKNOWN or given.source is Source.PARAMETER):
                joined.set(name, made)
            elif (
                made is not None
                and made.is_module
                and given == UNKNOWN
                and name in self.opaque
                and type(self.scope) is cst.FunctionDef
                and self.model.lazy_global(name, self.scope)
            ):
                joined.set(name, made)  # `global model; if model is None: model = Net()`: what the first call built
        return joined

    def _held_elsewhere(self, name: str) -> bool:
        """Is `name` (a dict) also reachable under another name or in a container of this
        scope: `b = batch`, `for d in (train, val):`, `a, b = batch, other`, `[batch]`,
        `b = batch if flag else other`? Then its entries are not followed."""
        if self._aliased_names is None:
            tree = self.model.ctx.tree
            nodes = tree.walk(self.scope)
            targets = set()  # tuples that are assignment or loop targets, not values
            for node in nodes:
                if type(node) is cst.For or type(node) is cst.CompFor:
                    targets.add(id(node.target))
                elif type(node) is cst.AssignTarget:
                    targets.add(id(node.target))
            names = set()
            for node in nodes:
                node_type = type(node)
                if node_type in (cst.Tuple, cst.List, cst.Set) and id(node) not in targets:
                    names.update(e.value.value for e in node.elements if type(e.value) is cst.Name)
                elif node_type is cst.IfExp:
                    names.update(v.value for v in (node.body, node.orelse) if type(v) is cst.Name)
                elif node_type is cst.DictElement and type(node.value) is cst.Name:
                    names.add(node.value.value)
                elif node_type is cst.Assign and type(node.value) is cst.Name:
                    names.add(node.value.value)
                    names.update(t.target.value for t in node.targets if type(t.target) is cst.Name)
            self._aliased_names = frozenset(names)
        return name in self._aliased_names

    def _varies_per_pass(self, test: cst.BaseExpression) -> bool:
        """Can `test` change between passes of the loop around the `if` (it reads a name
        the loop assigns: `if boxes.shape[0] == 0:`)? False outside loops."""
        if not self._loops:
            return False
        assigned: set[str] = set()
        for _, _, loop in self._loops:  # any loop around: the list may outlive the inner one
            names = self._loop_assigned.get(id(loop))
            if names is None:
                found = set(bound_names(loop.target)) if type(loop) is cst.For else set()
                for node in statements(loop.body):
                    for target in assignment_targets(node):
                        found.update(bound_names(target))
                names = self._loop_assigned[id(loop)] = frozenset(found)
            assigned |= names
        nodes = self.model.ctx.tree.walk(test)
        return any(type(n) is cst.Name and n.value in assigned for n in nodes) or any(
            type(n) is cst.Call for n in nodes
        )

    def _on_the_cpu(self, key: str, state: State) -> None:
        """`x` is on the CPU in `state` (an arm of `if x.is_cpu:`)."""
        value = self.lookup(key, state)
        if value.tensor_like and not value.device.is_cpu:
            state.set(key, replace(value, device=CPU, maybe_accel=False, origin=None, how=""))

    def _constant_parameter_test(self, test: cst.BaseExpression, state: State) -> bool | None:
        """Whether `test` holds where it asks of a parameter this call gives (or leaves at
        its default) `None`, `True` or `False` (`device is not None`, `keep`, `not to_numpy`);
        None for any other test."""
        negated = False
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            test, negated = test.expression, True
        asks_none = type(test) is cst.Comparison  # `x is None` rather than `if x:`
        if asks_none:
            compared = _none_comparison(test)
            if compared is None:
                return None
            name, is_not = compared
            negated ^= is_not
        elif type(test) is cst.Name:
            name = test.value
        else:
            return None
        if name not in self.params:
            if name in self.shadowed or asks_none:
                return None
            flag = self.model.literal_flag(name)  # `cuda = True` at the top of a script
            return None if flag is None else flag != negated
        value = self.lookup(name, state)
        if value is NONE:
            holds = asks_none  # `None is None`; `None` is falsy
        elif value is TRUE or value is FALSE:
            holds = not asks_none and value is TRUE
        else:
            return None
        return holds != negated

    def _instance_test(self, test: cst.BaseExpression) -> tuple[str | None, bool]:
        """(the name, True) where `test` is `isinstance(name, torch.Tensor)`, (the name,
        False) where it asks for classes that are never tensors (`np.ndarray`, a PIL image,
        `str`), (None, False) for anything else."""
        if type(test) is not cst.Call or type(test.func) is not cst.Name or test.func.value != "isinstance":
            return None, False
        if test.func.value in self.locals or len(test.args) != 2 or any(a.keyword or a.star for a in test.args):
            return None, False
        subject, kind = test.args[0].value, test.args[1].value
        if type(subject) is not cst.Name:
            return None, False
        if self.qualified(kind) in T.TENSOR_CLASSES:
            return subject.value, True
        kinds = [e.value for e in kind.elements] if type(kind) is cst.Tuple else [kind]
        if kinds and all((self.qualified(k) or dotted_name(k)) in T.NON_TENSOR_CLASSES for k in kinds):
            return subject.value, False
        return None, False

    def _accelerated_branch(self, test: cst.BaseExpression) -> str | None:
        """Which branch of `if test:` runs only where an accelerator is present ("body"
        under `if torch.cuda.is_available():` or a flag assigned from it, "orelse" under
        `if not ...`), or None when the test says nothing of the machine."""
        implied = self.model.implication(test)
        if implied.when_true and not implied.when_false:
            return "body"
        if implied.when_false and not implied.when_true:
            return "orelse"
        return cuda_flag_branch(test, self.model.ctx.moving_flags())

    def _instance_of_base(self, test: cst.BaseExpression, state: State) -> bool:
        """Is `test` `isinstance(x, C)` with `x` surely an instance of the file's class that
        derives from `C` (itself, or through the file's classes)?"""
        if type(test) is not cst.Call or type(test.func) is not cst.Name or test.func.value != "isinstance":
            return False
        if len(test.args) != 2 or "isinstance" in self.shadowed:
            return False
        value = self.result.values.get(id(test.args[0].value), UNKNOWN)
        cls = self.model.classes.get(value.instance_of) if value.instance_of else None
        target = self.qualified(test.args[1].value) or dotted_name(test.args[1].value)
        if cls is None or target is None:
            return False
        todo, seen = [cls], set()
        while todo:
            current = todo.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            if current.name.value == target:
                return True
            for base in current.bases:
                if (self.qualified(base.value) or dotted_name(base.value)) == target:
                    return True
            todo.extend(self.model.local_bases(current))
        return False

    def stmt_For(self, node: cst.For, state: State) -> State | None:
        iterable = self.eval(node.iter, state)
        element = self.element_of(node.iter, iterable, node)

        def bind_target(head: State) -> State:
            self.bind_element(node.target, element, head, node.iter)
            return head

        held, move = self._modules_walked(node, state)
        after = self._loop(node, state, bind_target, node.body, node.orelse)
        if held and move is not None and after is not None:
            # `for m in (self.model, self.head): m.cuda()`: each module moved in place
            moved = self.result.values.get(id(move))
            if moved is not None and moved.device.known:
                for expr, value in held:
                    placed = value.on(moved.device, None, Source.MOVE, moved.how)
                    self.bind(expr, placed, after)
                    self.move_aliases(dotted_name(expr), value, placed, after)
        return after

    def _modules_walked(
        self, node: cst.For, state: State
    ) -> tuple[list[tuple[cst.BaseExpression, AbstractValue]], cst.Call | None]:
        """The modules a loop over a literal tuple or list of names moves, each in place, by a
        statement of its body (`for net in (G, D): net.to(device)`), and that move."""
        if type(node.target) is not cst.Name or type(node.iter) not in (cst.Tuple, cst.List):
            return [], None
        name = node.target.value
        moves = [
            small.value
            for statement in node.body.body
            if type(statement) is cst.SimpleStatementLine
            for small in statement.body
            if type(small) is cst.Expr
            and type(small.value) is cst.Call
            and type(small.value.func) is cst.Attribute
            and small.value.func.attr.value in T.MOVE_METHODS
            and dotted_name(small.value.func.value) == name
        ]
        if len(moves) != 1:
            return [], None
        held = []
        for element in node.iter.elements:
            if type(element) is cst.StarredElement or dotted_name(element.value) is None:
                return [], None
            value = self.lookup(dotted_name(element.value), state)
            if not value.is_module:
                return [], None
            held.append((element.value, value))
        return held, moves[0]

    def stmt_While(self, node: cst.While, state: State) -> State | None:
        def test(head: State) -> State:
            self.eval(node.test, head)
            return head

        return self._loop(node, test(state), test, node.body, node.orelse)

    def _loop(self, node, entry: State, prepare, body, orelse) -> State | None:
        head = entry
        exits: list[State] = []
        for attempt in range(_MAX_LOOP_PASSES + 1):
            self._loops.append(([], [], node))
            end = self.block(body, prepare(head.copy()))
            breaks, continues, _ = self._loops.pop()
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
        self._trying += 1  # what runs here may run only in part, or only after a failure
        try:
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
        finally:
            self._trying -= 1
        after = self.join_all([body, *results])
        if node.finalbody is not None:
            final = self.block(node.finalbody.body, (after or handler_entry).copy())
            return final if after is not None else None
        return after

    stmt_TryStar = stmt_Try

    def stmt_FunctionDef(self, node: cst.FunctionDef, state: State) -> State:
        for decorator in node.decorators:
            self.eval(decorator.decorator, state)
        params = node.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.default is not None:
                self.eval(param.default, state)
        self.bind(node.name, OTHER, state)
        if type(self.scope) is cst.FunctionDef and not self.phase1:
            self._record_closure(node, state)
        return state

    def _record_closure(self, node: cst.FunctionDef, state: State) -> None:
        """What nested function `node` reads of this function's names that are not bound
        again after it (`labels` moved before `def f(x): ... [labels]`): their values here,
        for its own walk. A walk with call contexts is preferred to one without."""
        held = self.model.closures.get(id(node))
        specialized = self.context is not None
        if held is not None and held[0] and not specialized:
            return
        names = {}
        for inner in self.model.ctx.tree.walk(node.body):
            if type(inner) is cst.Name and inner.value in state.env and inner.value not in names:
                value = state.env[inner.value]
                if (value.is_module or value.kind is Kind.UNKNOWN) and not value.device.is_accel:
                    continue  # a model may still be moved in place after the `def` (`G.to(device)`)
                if self.model.settled_before(self.scope, inner.value, node):
                    names[inner.value] = value
        for name in self.model.nonlocal_names(self.scope):
            names.pop(name, None)  # a sibling nested function may rebind it
        self.model.closures[id(node)] = (specialized, names)

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

    def join_states(
        self, a: State | None, b: State | None, *, guarded: bool = False, single: bool = False,
        either: State | None = None,
    ) -> State | None:  # fmt: skip
        """Where two paths meet. With `guarded`, `a` is the path an availability check
        guards and `b` the one without it (see `AbstractValue.join_guarded`); with
        `single`, `a` is the path a machine with one accelerator takes and `b` the one
        only a machine with several does (see `AbstractValue.join_single`). `either`: the
        state before an `if` whose test is the same on every pass of the loop around (or
        that is in no loop): a run takes one arm only, so a list holds what both arms
        append (`if gpu: outs.append(t.to(d)) else: outs.append(t)` never mixes devices)."""
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
            value = left.join_guarded(right) if guarded else left.join_single(right) if single else left.join(right)
            if either is not None and value.items is not None and value.items.mixed is not None:
                before = either.env.get(key)
                kept = branch_witnesses(before.items if before is not None else None, left.items, right.items)
                value = replace(value, items=replace(value.items, mixed=kept))
            env[key] = value
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
        if "[" in key:
            return UNKNOWN  # an entry (`batch["x"]`) set on another path only
        head, _, attr = key.partition(".")
        if key in self.opaque or head in self.opaque:
            return UNKNOWN
        if self.context is not None and key in self.context.names and key not in self.params:
            return self.context.names[key]
        if attr:
            if head == self.self_name and not self.phase1 and self.cls is not None and "." not in attr:
                self.result.reads.add(key)
                value = self.model.summary(self.cls).get(attr, UNKNOWN)
                if type(self.scope) is cst.FunctionDef and self._branches == self._settled_branches:
                    # read before this method sets it, on the path every call takes: on its
                    # first call, what `__init__` left (an arm of an `if` may be for later calls)
                    first = self.model.first_call_value(self.cls, attr, self.scope)
                    if first is not None:
                        return first
                # a plain object's attributes may also be moved or handed on (`agent.Q.to(device)`)
                outside = self.model.set_from_outside if self.is_module_method else self.model.touched_outside
                if value.device.known and outside(attr):
                    # `model.device = device` after construction: not what the class set
                    return replace(value, device=UNKNOWN_DEVICE, origin=None, how="", maybe_accel=False)
                return self._owned_where_self_is(attr, value)
            if head in self.params and head != self.self_name and "." not in attr and not self.phase1:
                self.result.reads.add(key)  # `agent.Q` of a parameter: its callers may say where it is
            return UNKNOWN
        if key in self.params:
            return self.params[key]
        if key in self.outer and key not in self.locals and not attr:
            closure = self.model.closures.get(id(self.scope))
            if closure is not None and key in closure[1]:
                return closure[1][key]  # a name of the function around, settled before the `def`
        if key in self.locals or key in self.outer:
            return UNKNOWN
        if type(self.scope) is cst.Module:
            return UNKNOWN
        self.result.reads.add(key)
        return self.model.global_value(key)

    def handed_attribute(self, key: str, state: State) -> AbstractValue | None:
        """`agent.Q` of a parameter `agent` (not `self`), as the calls of the function
        left it (`context.names`); None where they say nothing."""
        head, _, attr = key.partition(".")
        if head == self.self_name or head not in self.params or head in state.env or "." in attr or self.phase1:
            return None
        found = self.fallback(key)
        return None if found is UNKNOWN else found

    def _owned_where_self_is(self, attr: str, value: AbstractValue) -> AbstractValue:
        """A module's parameters, buffers and submodules are where the module is: known
        in a method the file calls on a moved model (`model.sample(x)`)."""
        own = self.params.get(self.self_name) if self.self_name is not None else None
        if own is None or not own.is_module or value.device.known:
            return value
        if not own.device.known:
            # in `forward(self, x)` the module is where `x` is (SPEC §4), and so are its own
            # parameters and buffers: `self.mu + torch.randn(shape)` fails once it is moved
            inputs = self._input_devices()
            if not inputs or not value.is_tensor:
                return value
            own = replace(own, device=inputs[0], origin=None, source=Source.PARAMETER, how="")
        changed = self.model.changed_after_init(self.cls)
        if changed is None or attr in changed:
            return value  # a method moves it elsewhere (`self.encoder.to("cpu")`) or replaces it
        if value.is_parameter or (value.is_module and value.holds_params):
            owned = True
        else:
            registered = self.model.registered_names(self.cls)
            owned = registered is not None and attr in registered and value.kind is Kind.TENSOR
        return replace(value, device=own.device, origin=own.origin, source=own.source, how=own.how) if owned else value

    def _input_devices(self, state: State | None = None) -> list[Device]:
        """The devices of a module method's tensor parameters (`accel(x.device)`); given
        the names here, of those not rebound elsewhere (`x = x.cpu()` first: not where the
        module is)."""
        if not self.is_module_method:
            return []
        return [
            value.device
            for name, value in self.params.items()
            if value.is_tensor and value.source is Source.PARAMETER and value.device.is_accel
            and (state is None or state.env.get(name, value).device == value.device)
        ]  # fmt: skip

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
            elif value.elements is not None and len(value.elements) == len(elements):
                if not any(type(e) is cst.StarredElement for e in elements):
                    values = list(value.elements)
            for index, element in enumerate(elements):
                if type(element) is cst.StarredElement:
                    self.bind(element.value, OTHER, state)
                    continue
                item = values[index] if values is not None else self.unpacked(value)
                self.bind(element.value, item, state)
            return
        if type(target) is cst.Subscript:
            container = self.eval(target.value, state)
            for element in target.slice:
                self._eval_slice(element, state)
            # (no index check: writing through an index moves it to the tensor's device, as
            # `AdvancedIndex` does for `index_put_`)
            if (container.kind is Kind.BATCH or container.source is Source.LOADER) and dotted_name(target.value):
                # `inputs[k] = inputs[k].to(device)`: the batch's entries are where the code puts them
                self.bind(target.value, UNKNOWN, state)
            elif container.items is not None and type(target.value) is cst.Name:
                # `outputs[0] = out.cpu()`: a list built empty here holds that too
                items = join_items(container.items, value, together=False)
                self.bind(target.value, replace(container, items=items), state)
            entry = _entry_key(target)
            if entry is not None and self._held_elsewhere(target.value.value):
                state.forget_entries(target.value.value)  # held under another name too
            elif entry is not None and value.tensor_like and not value.is_module:
                # `sample["tr_error"] = sample["tr_error"].cuda()`: that entry, read back, is there
                state.set(entry, value)
                self.result.values[id(target)] = value
            elif entry is not None:
                state.forget_entries(target.value.value, only=entry)  # a model, or nothing followed
            elif type(target.value) is cst.Name:
                state.forget_entries(target.value.value)  # `batch[k] = ...`: any entry
            return
        key = _key(target)
        if key is None:
            if type(target) is cst.Attribute:
                self.eval(target.value, state)
            return
        if type(target) is cst.Name:
            value = _resymbolize(value, key)
            state.forget_attributes(key)
            self.wrapped_iterables.pop(key, None)  # (an `Assign` of a wrapper records it again)
        elif value.kind in (Kind.DEVICE, Kind.OTHER):
            value = _resymbolize(value, key)
        state.set(key, value)
        self.result.values[id(target)] = value
        if "." in key and key.split(".", 1)[0] == self.self_name:
            self._assigned(key, value)
        elif type(self.scope) is cst.Module and "." not in key:
            self._assigned(key, value)

    def _constructed(self, name: str, call: cst.Call, value: AbstractValue, state: State) -> None:
        """`runner = Runner(args, model, device)`: the attributes `__init__` sets straight
        from its parameters (`self.model = model`, on every path) are what the call
        passed, as `runner.model`, for the code after it and the methods it calls."""
        cls = self.model.classes.get(value.instance_of)
        init = self.model.method(cls, "__init__") if cls is not None else None
        if init is None or any(arg.star for arg in call.args) or type(init.body) is not cst.IndentedBlock:
            return
        if not self.phase1 and not value.is_module:
            # `agent = Agent()`: the models `__init__` built, where nothing else moves them
            for attr in self.model.init_attributes(cls):
                held = self.model.held_module(cls, attr, self.scope, lambda head: self.lookup(head, state))
                if held is not None:
                    state.set(f"{name}.{attr}", held)
        params = [*init.params.posonly_params, *init.params.params]
        if not params:
            return
        self_name = params[0].name.value
        names = self.model.parameter_names(init, True)
        positional = len(params) - 1  # `__init__(self, *models, device=None)`: no keyword-only by position
        passed: dict[str, AbstractValue] = {}
        arguments: dict[str, cst.BaseExpression] = {}  # the same, as the caller wrote them
        for index, arg in enumerate(call.args):
            if arg.keyword is None and index >= positional:
                continue
            key = arg.keyword.value if arg.keyword is not None else names[index]
            if key in names:
                passed[key] = self.result.values.get(id(arg.value), UNKNOWN)
                arguments[key] = arg.value
        changed = self.model.changed_after_init(cls)
        if changed is None:
            return
        # `self.model.cpu()`, a second assignment, or `model.to(device)` on the parameter
        # itself in `__init__`: not as passed
        attributes: Counter[str] = Counter()  # mentions of `self.<attr>`
        parameters: Counter[str] = Counter()  # mentions of a parameter's name
        for node in self.model.ctx.tree.walk(init.body):
            if type(node) is cst.Attribute:
                if type(node.value) is cst.Name and node.value.value == self_name:
                    attributes[node.attr.value] += 1
                parameters[node.attr.value] -= 1  # the `model` of `self.model` is no mention of `model`
            elif type(node) is cst.Name:
                parameters[node.value] += 1
        for line in init.body.body:
            if type(line) is not cst.SimpleStatementLine:
                continue
            for small in line.body:
                if type(small) is not cst.Assign or len(small.targets) != 1:
                    continue
                source, moved = small.value, False
                if type(source) is cst.Call and type(source.func) is cst.Attribute:
                    # `self.model = model.to(device)`: the model handed in, moved where `__init__` says
                    source, moved = source.func.value, source.func.attr.value in T.MOVE_METHODS
                    if not moved:
                        continue
                if type(source) is not cst.Name:
                    continue
                target = small.targets[0].target
                if type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == self_name:
                    given = passed.get(source.value)
                    once = attributes[target.attr.value] == 1 and parameters[source.value] == 1
                    if given is not None and matters(given) and once and target.attr.value not in changed:
                        if moved:
                            # where `__init__` moves it: only to a device its caller cannot choose
                            # (a module-level binding, a literal), not `device`/`self.device`
                            left = self.model.init_value(cls, target.attr.value)
                            if not given.is_module or left is None or not left.device.is_accel:
                                continue
                            if not self.model.chosen_by_module(
                                left.device, init, lambda head: self.lookup(head, state)
                            ):
                                continue  # (`device`, `self.device`, `next(model.parameters()).device`)
                            given = replace(given, device=left.device, origin=left.origin, source=left.source,
                                            how=left.how, maybe_accel=False)  # fmt: skip
                            argument = arguments.get(source.value)
                            if type(argument) is cst.Name:
                                state.set(argument.value, given)  # `Module.to` moved the caller's model in place
                        state.set(f"{name}.{target.attr.value}", given)

    def move_aliases(self, key: str | None, old: AbstractValue, new: AbstractValue, state: State) -> None:
        """A model moved in place moves wherever else it is held: `runner.model` bound from
        `Runner(model)` before `model.to(device)` is the same object, and so are `unopt` of
        `unopt = model` and `compiled` of `compiled = torch.compile(model)`."""
        if old.origin is None or key is None:
            return
        for alias, held in list(state.env.items()):
            if alias != key and held.origin is old.origin and held.kind is old.kind and held.device == old.device:
                state.set(alias, new)

    def moved_in_place(self, target: cst.BaseExpression, moved: AbstractValue | None = None) -> None:
        """`target` was moved by `Module.to` in place (to where `moved` is): a parameter's
        caller sees it moved, to there when every path through the function moves it."""
        if type(target) is cst.Name and target.value in self.params and target.value != self.self_name:
            self.result.moved_params.add(target.value)
            everywhere = not self._branches and not self._loops and not self._trying and self.result.returns is None
            if everywhere and type(self.scope) is cst.FunctionDef:
                # `net = copy.deepcopy(net)` first: what moves is a copy, not the caller's model
                everywhere = target.value not in self.model.assigned_names(self.scope)
            self.result.moved_to[target.value] = moved if everywhere and moved is not None else None

    def _exit(self, state: State | None) -> None:
        """A path leaves the method: what it leaves in `self.<attr>`s, joined with the
        other paths that set them (what other methods see after a call). Only the class
        summary (phase 1) reads it."""
        if state is None or self.self_name is None or not self.phase1:
            return
        prefix = self.self_name + "."
        exits = self.result.exits
        for key in state.dotted:
            if key.startswith(prefix):
                value = state.env[key]
                old = exits.get(key)
                exits[key] = value if old is None else old.join(value)

    def _returned(self, value: AbstractValue) -> None:
        old = self.result.returns
        self.result.returns = value if old is None else old.join(value)

    def _assigned(self, key: str, value: AbstractValue) -> None:
        old = self.result.assigned.get(key)
        self.result.assigned[key] = value if old is None else old.join(value)

    def forget(self, target: cst.BaseExpression, state: State) -> None:
        if type(target) is cst.Subscript and type(target.value) is cst.Name:
            state.forget_entries(target.value.value)  # `del batch["x"]`
        for name in bound_names(target):
            state.set(name, UNKNOWN)
        key = _key(target)
        if key is not None and "." in key:
            state.set(key, UNKNOWN)

    def unpacked(self, value: AbstractValue) -> AbstractValue:
        """An element of `a, b = value`."""
        if value.kind is Kind.BATCH:
            return AbstractValue(Kind.TENSOR, value.device, False, value.origin, value.source, value.how)
        if value.is_tensor:
            return replace(value, zero_dim=None)
        if (
            value.items is not None
            and value.kind is Kind.OTHER
            and value.items.tensor_like
            and not value.items.is_module
        ):
            return value.items  # `a, b = [t.to(device) for t in pair]`: each item (not a model's layers)
        if value.kind is Kind.UNKNOWN and (value.device.known or value.maybe_accel) and not value.item:
            # `out, aux = model(x)`: a module's outputs live where it ran; what they hold
            # in turn (`k, (t, h, w) = self.pool(k, thw)`: sizes) is not known
            return AbstractValue(Kind.UNKNOWN, value.device, None, value.origin, value.source, value.how,
                                 maybe_accel=value.maybe_accel, item=True)  # fmt: skip
        return UNKNOWN

    def _collates_tensors(self, loader: AbstractValue) -> bool:
        """Is the loader's `collate_fn` a function of the file that returns one tensor?"""
        call = loader.origin
        collate = keyword_arg(call, "collate_fn") if type(call) is cst.Call else None
        if collate is None or type(collate.value) is not cst.Name or collate.value.value in self.shadowed:
            return False
        function = self.model.callee(collate.value.value)
        summary = self.model.summary_of(function) if function is not None else None
        returned = summary.returns if summary is not None else None
        return returned is not None and returned.is_tensor and returned.elements is None

    def element_of(self, expr: cst.BaseExpression, value: AbstractValue, loop: cst.CSTNode) -> AbstractValue:
        """What iterating `expr` yields (tuple shapes are handled by `bind_element`)."""
        if value.kind is Kind.DATALOADER:
            if not value.device.is_cpu:  # its `collate_fn` places the batch
                return AbstractValue(Kind.BATCH, UNKNOWN_DEVICE, False, loop)
            if self._collates_tensors(value):
                return AbstractValue(Kind.TENSOR, CPU, False, loop, Source.LOADER, "a DataLoader batch")
            return AbstractValue(Kind.BATCH, CPU, False, loop, Source.LOADER, "a DataLoader batch")
        if value.is_tensor:
            # a row, or (of a 1-dim tensor: `for p in preds.view(-1)`) a 0-dim tensor
            return replace(value, zero_dim=None, element=True)
        if value.kind is Kind.UNKNOWN and value.device.known:
            return self.unpacked(value)  # the items of a module's output live where it ran
        items = value.items
        if items is not None and items is not NO_ITEMS:
            if items.tensor_like and items.device.is_accel:  # `for out in outputs:` of device tensors
                return replace(items, elements=None)
            if items.kind is Kind.OTHER and items.holds_accel:  # `for pair in hiddens:` of lists of them
                return items
        if id(expr) in self.generated:
            return self.generated[id(expr)]
        if type(expr) is cst.Call:
            name = self.qualified(expr.func) or dotted_name(expr.func)
            args = positional_args(expr)
            if name in T.ITERATION_WRAPPERS and args:
                inner = args[0].value
                return self.element_of(inner, self.result.values.get(id(inner), UNKNOWN), loop)
        if value.kind is Kind.UNKNOWN and not value.device.known and _names_a_loader(expr):
            # `for x, y in train_loader:` with a loader handed in: batches of tensors, on
            # a device the analysis cannot know (a loader may move them itself)
            return AbstractValue(Kind.BATCH, UNKNOWN_DEVICE, False, loop)
        return UNKNOWN

    def bind_element(self, target: cst.BaseExpression, element: AbstractValue, state: State,
                     iterable: cst.BaseExpression, origin: cst.CSTNode | None = None) -> None:  # fmt: skip
        """Bind a loop's target to what `iterable` yields. `origin`: the node the loop's
        batches come from (the `for`'s own iterable)."""
        origin = origin if origin is not None else iterable
        if type(iterable) is cst.Name and iterable.value in self.wrapped_iterables:
            iterable = self.wrapped_iterables[iterable.value]  # `pbar = tqdm(enumerate(loader))`
        if type(iterable) is cst.Call and type(target) in (cst.Tuple, cst.List):
            name = self.qualified(iterable.func) or dotted_name(iterable.func)
            args = positional_args(iterable)
            elements = [e.value for e in target.elements]
            if name in T.ITERATION_WRAPPERS and args and type(args[0].value) is cst.Call:
                # `tqdm(enumerate(loader))`: what the wrapped iterable yields
                self.bind_element(target, element, state, args[0].value, origin)
                return
            if name == "enumerate" and args and len(elements) == 2:
                self.bind(elements[0], OTHER, state)
                inner = args[0].value
                item = self.element_of(inner, self.result.values.get(id(inner), UNKNOWN), origin)
                self.bind_element(elements[1], item, state, inner)
                return
            if name == "zip" and len(args) == len(elements):
                for arg, sub in zip(args, elements):
                    item = self.element_of(arg.value, self.result.values.get(id(arg.value), UNKNOWN), origin)
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
        if node.value in ("True", "False"):
            return OTHER
        if node.value == "None":
            return NONE
        if node.value not in self.shadowed and node.value in self.model.imports.aliases:
            return OTHER
        if node.value in T.BUILTINS_OTHER and node.value not in state.env and node.value not in self.shadowed:
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
        if key is not None and key.count(".") == 1:
            head = key.split(".", 1)[0]
            if head == self.self_name:
                return self.fallback(key)
            found = self.handed_attribute(key, state)
            if found is not None:
                return found
        attr = node.attr.value
        if attr == "device" and receiver.kind is Kind.UNKNOWN:
            owner = _parameters_owner(node.value)
            module = self.result.values.get(id(owner), UNKNOWN) if owner is not None else UNKNOWN
            if module.is_module and module.device.known:
                # `next(self.parameters()).device`: where the module is
                return AbstractValue(Kind.DEVICE, module.device, origin=module.origin, source=module.source,
                                     how=module.how)  # fmt: skip
        if receiver.kind in (Kind.TENSOR, Kind.BATCH):
            if attr == "device":
                device = receiver.device if receiver.device.known else accel(f"{key or 'tensor'}.device")
                return AbstractValue(
                    Kind.DEVICE, device, origin=receiver.origin, source=receiver.source, how=receiver.how
                )
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
        if receiver.transform == DISTRIBUTION:  # `dist.mean`, `dist.probs`: where its parameters are
            return replace(receiver, kind=Kind.TENSOR, transform="") if attr in T.DISTRIBUTION_ATTRS else UNKNOWN
        if receiver.instance_of and receiver.kind is Kind.OTHER and key is not None:
            # `config.device` of a `Config()` of the file, whose methods set it to a device
            cls = self.model.classes.get(receiver.instance_of)
            value = self.model.summary(cls).get(attr) if cls is not None else None
            if value is not None and value.kind is Kind.DEVICE and value.device.known:
                if not self.model.set_from_outside(attr):  # `cfg.device = device` in a helper
                    return replace(value, device=accel(key)) if value.device.is_accel else value
        if receiver.kind is Kind.MODULE and receiver.instance_of and receiver.device.known and key is not None:
            cls = self.model.classes.get(receiver.instance_of)
            if cls is not None and self.model.kept_by_forward(cls, attr):
                # `vae.z` that `forward` keeps from its input: where the model ran, which is where it is
                return AbstractValue(Kind.TENSOR, receiver.device, None, receiver.origin, receiver.source, receiver.how)
        if (
            receiver.kind is Kind.UNKNOWN
            and (receiver.device.known or receiver.maybe_accel)
            and attr in T.TENSOR_VIEW_ATTRS
        ):
            # `outputs.data` of a model's output: only a tensor has it, where the output is
            return replace(receiver, kind=Kind.TENSOR, is_parameter=False, elements=None, item=False)
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
        holds = False
        entries = []
        for element in node.elements:
            if type(element) is cst.DictElement:
                self.eval(element.key, state)
                value = self.eval(element.value, state)
                text = string_value(element.key) if type(element.key) is cst.SimpleString else None
                if text is not None and value.tensor_like and not value.is_module:
                    # `{"x": x.to(device)}`: read back by key (not a model: one moved in place
                    # through `.values()` or `d["G"].to(device)` would leave the entry stale)
                    entries.append((text, value))
            else:
                value = self.eval(element.value, state)
            holds = holds or value.holds_accel or value.may_be_accel_tensor
        found = HOLDS_ACCEL if holds else OTHER
        return replace(found, entries=tuple(entries)) if entries else found

    eval_Set = eval_Dict = _collection

    def eval_List(self, node: cst.List, state: State) -> AbstractValue:
        """A list; one built empty keeps what is appended to it (`torch.cat(outputs)`)."""
        return self._collection(node, state) if node.elements else EMPTY_LIST

    def eval_Tuple(self, node: cst.Tuple, state: State) -> AbstractValue:
        """A tuple keeps its items' values, so that what a function returns or yields as
        `out, (h, c)` unpacks where it is called."""
        value = self._collection(node, state)
        if any(type(e) is cst.StarredElement for e in node.elements):
            return value
        values = self.result.values
        items = tuple([values[id(e.value)] for e in node.elements])
        if all(item is OTHER or item is NONE for item in items):
            return value  # a shape, or a tuple of names: nothing to follow
        return replace(value, elements=items)

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
            item = self.eval(node.value, inner)
        else:
            item = self.eval(node.elt, inner)
        held = HOLDS_ACCEL if item.may_be_accel_tensor or item.holds_accel else OTHER  # `[loss(p, y) for p in preds]`
        if type(node) in (cst.ListComp, cst.GeneratorExp) and item.tensor_like and item.device.known:
            return replace(held, items=replace(item, elements=None))  # `[x.to(device) for x in xs]`: each item
        return held

    eval_ListComp = eval_SetComp = eval_GeneratorExp = eval_DictComp = _comprehension

    def _settled_test(self, test: cst.BaseExpression) -> bool:
        """Does every call of this method take the same arm of `if test:`? So for a test of
        the object's settings (`if self.use_memory:`, `if self.acmodel.use_memory:`, see
        `FileModel.configuration`), combined with `not`, `and`, `or`."""
        if self.cls is None or self.self_name is None:
            return False

        def settled(expr: cst.BaseExpression) -> bool:
            if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Not:
                return settled(expr.expression)
            if type(expr) is cst.BooleanOperation:
                return settled(expr.left) and settled(expr.right)
            if type(expr) is not cst.Attribute:
                return False
            owner = expr.value
            if type(owner) is cst.Name:
                return owner.value == self.self_name and self.model.configuration(self.cls, expr.attr.value)
            return (
                type(owner) is cst.Attribute
                and type(owner.value) is cst.Name
                and owner.value.value == self.self_name
                and self.model.configuration_of_part(self.cls, owner.attr.value, expr.attr.value)
            )

        return settled(test)

    def eval_NamedExpr(self, node: cst.NamedExpr, state: State) -> AbstractValue:
        value = self.eval(node.value, state)
        self.bind(node.target, value, state, node.value)
        return value

    def eval_IfExp(self, node: cst.IfExp, state: State) -> AbstractValue:
        self.eval(node.test, state)
        self._branches += 1
        try:
            body = self.eval(node.body, state)
            orelse = self.eval(node.orelse, state)
        finally:
            self._branches -= 1
        devices = (Kind.DEVICE, Kind.OTHER)
        if body.kind in devices and orelse.kind in devices and body.device.known and orelse.device.known:
            symbol = self.model.ctx.module.code_for_node(node)
            device = join_symbolic(body.device, orelse.device, symbol)
            return AbstractValue(Kind.OTHER if body.kind != orelse.kind else body.kind, device, source=Source.LITERAL)
        side = self._accelerated_branch(node.test)
        if side == "body":
            return body.join_guarded(orelse)
        if side == "orelse":
            return orelse.join_guarded(body)
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

    def eval_Yield(self, node: cst.Yield, state: State) -> AbstractValue:
        value = node.value
        if value is None:
            yielded = OTHER
        elif type(value) is cst.From:
            self.eval(value.item, state)
            yielded = UNKNOWN
        else:
            yielded = self.eval(value, state)
        old = self.result.yields
        self.result.yields = yielded if old is None else old.join(yielded)
        return UNKNOWN  # what `send` gives back

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
        entry = _entry_key(node)
        if entry is not None and entry in state.env:
            return state.env[entry]
        if value.entries is not None and entry is not None and not self._held_elsewhere(node.value.value):
            key = string_value(node.slice[0].slice.value)
            found = next((item for name, item in value.entries if name == key), None)
            if found is not None:
                return found  # `result["gt_positive"]` of `return {"gt_positive": ...}`
        self._check_index(node, value)
        return self.item_of(node, value)

    def _check_index(self, node: cst.Subscript, value: AbstractValue) -> None:
        """Indexing with a CPU index or mask is legal: the result lives with the indexed
        tensor. A CPU tensor read at an accelerator index or mask fails."""
        # (a value of unknown kind moved to the CPU is a tensor where a tensor indexes it: a
        # module or a record is not indexed so)
        moved_off = value.kind is Kind.UNKNOWN and value.source is Source.MOVE
        if (value.is_tensor or moved_off) and value.device.is_cpu:
            for element in node.slice:
                if type(element.slice) is cst.Index:
                    index = self.result.values.get(id(element.slice.value), UNKNOWN)
                    # (an element of a tensor walked by a loop may be a 0-dim index: legal anywhere)
                    if index.tensor_like and index.device.is_accel and index.zero_dim is not True and not index.element:
                        self._conflict(Conflict(node, Operand(node.value, value),
                                                Operand(element.slice.value, index), "index"))  # fmt: skip
                        break

    def item_of(self, node: cst.Subscript, value: AbstractValue) -> AbstractValue:
        """`node`, a subscript of `value`: what indexing that value gives."""
        if value.kind in (Kind.TENSOR, Kind.BATCH):
            zero_dim = False if value.kind is Kind.BATCH or _keeps_a_dimension(node) else None
            # `best[i]` with a number: one dimension less, maybe none left (an `item`)
            reduced = zero_dim is None and self._indexed_by_numbers(node)
            return AbstractValue(Kind.TENSOR, value.device, zero_dim, value.origin, value.source, value.how,
                                 maybe_accel=value.maybe_accel, element=reduced or value.element)  # fmt: skip
        if value.kind is Kind.MODULE:
            return value
        if value == HOST_ARRAY:
            return HOST_ARRAY  # `scores[:, 0]` of a NumPy array
        if value.transform == ROWS and value.elements is not None:  # `x, y = TensorDataset(X, Y)[i]`
            rows = tuple(
                AbstractValue(Kind.TENSOR, t.device, None, t.origin, t.source, t.how, maybe_accel=t.maybe_accel)
                for t in value.elements
            )
            return replace(OTHER, elements=rows)
        if value.transform == TENSOR_ITEMS:  # `image, label = mnist_test[i]`
            tensor = AbstractValue(Kind.TENSOR, CPU, False, node, Source.NUMPY, "an item of the dataset")
            return replace(OTHER, elements=(tensor, UNKNOWN))
        if value.holds_accel and value.kind is Kind.OTHER and value.elements is None:
            if len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:
                key = node.slice[0].slice.value
                if type(key) not in (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString):
                    # an item of a list that got accelerator tensors may be one (`layers[l]`)
                    return replace(value, kind=Kind.UNKNOWN, maybe_accel=True, origin=None, how="")
            return value  # a field of a record, an item of a dict of lists: may hold one
        if value.kind is Kind.UNKNOWN and (value.device.known or value.maybe_accel) and _tensor_indexing(node):
            # `logits[..., :-1, :]`: only a tensor takes several indices, and it stays where it is
            return AbstractValue(Kind.TENSOR, value.device, None, value.origin, value.source, value.how,
                                 maybe_accel=value.maybe_accel)  # fmt: skip
        if value.kind is Kind.UNKNOWN and (value.device.known or value.maybe_accel):
            found = self.unpacked(value)  # `preds[s]` of a module's outputs: where it ran
            if found.device.known and self._indexed_by_numbers(node):
                found = replace(found, element=True)  # `preds[i]` with a number: maybe 0-dim
            return found
        if value.elements is not None and len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:
            position = signed_int_value(node.slice[0].slice.value)
            if position is not None and -len(value.elements) <= position < len(value.elements):
                return value.elements[position]  # `hidden[0]` of `return h, c`
        return UNKNOWN

    def _indexed_by_numbers(self, node: cst.Subscript) -> bool:
        """`x[i]`, `x[i, j]`: every index a plain value, none a slice or a tensor."""
        values = self.result.values
        return all(
            type(e.slice) is cst.Index and not values.get(id(e.slice.value), UNKNOWN).tensor_like for e in node.slice
        )

    def _eval_slice(self, element: cst.SubscriptElement, state: State) -> None:
        inner = element.slice
        if type(inner) is cst.Index:
            self.eval(inner.value, state)
        elif type(inner) is cst.Slice:
            for part in (inner.lower, inner.upper, inner.step):
                if part is not None:
                    self.eval(part, state)

    # -- calls -------------------------------------------------------------------------


def _as_passed(assumed: AbstractValue, passed: AbstractValue, *, keep_device: bool) -> AbstractValue:
    """A parameter as the file's calls pass it. What the body itself shows stays: with
    `keep_device`, a module's input is a tensor on its own device (`x.device`), wherever
    it is called from; an unknown device becomes what the calls pass."""
    if assumed.device.known and (keep_device or not passed.device.known):
        return assumed
    if assumed.is_tensor and passed.tensor_like and passed.device.known:
        return replace(passed, kind=Kind.TENSOR, zero_dim=passed.zero_dim)
    if assumed.is_tensor and passed.kind is Kind.UNKNOWN:
        return replace(passed, kind=Kind.TENSOR)
    if assumed.kind is not Kind.UNKNOWN and passed.kind is not assumed.kind and not passed.tensor_like:
        return assumed
    return passed


_PLAIN_TYPES = frozenset({"int", "float", "str", "bool", "bytes", "complex", "None", "typing", "Literal"})
# plain only with plain items: a bare `Tuple` or `list` may hold tensors
_PLAIN_CONTAINERS = frozenset(
    {"tuple", "Tuple", "list", "List", "dict", "Dict", "Optional", "Union", "Sequence", "typing"}
)


def _declared_plain(param: cst.Param) -> bool:
    """Is the parameter annotated with plain Python types only (`thw: tuple[int, int]`,
    `k: Optional[int]`), so that it holds no tensor whatever the body does with it?"""
    return param.annotation is not None and _plain_type(param.annotation.annotation)


def _plain_type(node: cst.BaseExpression) -> bool:
    """`int`, `tuple[int, int]`, `tuple[int, ...]`, `typing.Optional[int]`, `int | None`."""
    node_type = type(node)
    if node_type is cst.Ellipsis:
        return True
    if node_type is cst.Name or node_type is cst.Attribute:
        dotted = dotted_name(node)
        return dotted is not None and all(part in _PLAIN_TYPES for part in dotted.split("."))
    if node_type is cst.Subscript:
        container = dotted_name(node.value)
        return (
            container is not None
            and all(part in _PLAIN_CONTAINERS for part in container.split("."))
            and all(type(e.slice) is cst.Index and _plain_type(e.slice.value) for e in node.slice)
        )
    if node_type is cst.BinaryOperation and type(node.operator) is cst.BitOr:
        return _plain_type(node.left) and _plain_type(node.right)
    return False


def _on_cuda_only(value: AbstractValue) -> bool:
    """Was `value` put on CUDA by name (`.cuda()`, `"cuda"`), not on a device that may be
    another accelerator?"""
    symbol = value.device.symbol or ""
    return value.device.is_accel and (value.how.startswith(".cuda(") or symbol.strip("\"'").startswith("cuda"))


def _tensor_device_test(test: cst.BaseExpression) -> tuple[str, str, bool] | None:
    """(`x`, "cuda", True) for `x.is_cuda` or `x.device.type == "cuda"`; "cpu" for
    `x.is_cpu`; False where the test is negated (`not x.is_cpu`, `!=`)."""
    positive = True
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test, positive = test.expression, not positive
    backend = None
    if type(test) is cst.Attribute and test.attr.value in ("is_cuda", "is_cpu"):
        subject, backend = test.value, test.attr.value[3:]
    elif type(test) is cst.Comparison and len(test.comparisons) == 1:
        target = test.comparisons[0]
        operator = type(target.operator)
        named = string_value(target.comparator)
        left = test.left
        if operator in (cst.Equal, cst.NotEqual) and named in ("cuda", "cpu") and type(left) is cst.Attribute:
            if left.attr.value == "type" and type(left.value) is cst.Attribute and left.value.attr.value == "device":
                subject, backend = left.value.value, named
                positive ^= operator is cst.NotEqual
    if backend is None:
        return None
    key = _key(subject)
    return (key, backend, positive) if key is not None else None


def _none_tested(node: cst.If) -> str | None:
    """`h` of `if h is None:` without an `else`."""
    compared = _none_comparison(node.test) if node.orelse is None else None
    return compared[0] if compared is not None and not compared[1] else None


def _none_comparison(test: cst.BaseExpression) -> tuple[str, bool] | None:
    """(`h`, False) for `h is None`, (`h`, True) for `h is not None`; None for any other test."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 or type(test.left) is not cst.Name:
        return None
    target = test.comparisons[0]
    if type(target.comparator) is not cst.Name or target.comparator.value != "None":
        return None
    if type(target.operator) not in (cst.Is, cst.IsNot):
        return None
    return test.left.value, type(target.operator) is cst.IsNot


def _tensor_indexing(node: cst.Subscript) -> bool:
    """`x[..., 0]`, `x[:, 1:]`, `x[None]`: indexing only a tensor (or an array) takes."""
    if len(node.slice) > 1:
        return True
    inner = node.slice[0].slice
    return type(inner) is cst.Index and (
        type(inner.value) is cst.Ellipsis or (type(inner.value) is cst.Name and inner.value.value == "None")
    )


def _keeps_a_dimension(node: cst.Subscript) -> bool:
    """`t[:, None]`, `t[..., 0]`, `t[1:]`: a slice, a new axis or an ellipsis leaves at
    least one dimension."""
    for element in node.slice:
        inner = element.slice
        if type(inner) is cst.Slice:
            return True
        if type(inner) is cst.Index and (
            type(inner.value) is cst.Ellipsis or (type(inner.value) is cst.Name and inner.value.value == "None")
        ):
            return True
    return False


def _names_a_loader(expr: cst.BaseExpression) -> bool:
    """`loader`, `train_loader`, `self.dataloader`, `loaders[phase]`."""
    if type(expr) is cst.Subscript:
        name = dotted_name(expr.value)
        return name is not None and name.rsplit(".", 1)[-1].lower().endswith("loaders")
    name = dotted_name(expr)
    return name is not None and name.rsplit(".", 1)[-1].lower().endswith("loader")


_DISPATCH: dict[type, object] = {}
_MISSING = object()


def _expression_children(node: cst.CSTNode):
    from devlint.analysis.tree import children

    for child in children(node):
        if is_expression(child):
            yield child
        else:
            yield from _expression_children(child)


def _parameters_owner(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`model` of `next(model.parameters())` (or `iter(...)`, `.buffers()`), else None."""
    if type(node) is not cst.Call or type(node.func) is not cst.Name or node.func.value != "next" or not node.args:
        return None
    inner = node.args[0].value
    if type(inner) is cst.Call and type(inner.func) is cst.Name and inner.func.value == "iter" and inner.args:
        inner = inner.args[0].value
    if (
        type(inner) is cst.Call
        and type(inner.func) is cst.Attribute
        and inner.func.attr.value in ("parameters", "buffers")
    ):
        return inner.func.value
    return None


def _runs_as_script(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if type(target.operator) is not cst.Equal:
        return False
    sides = (test.left, target.comparator)
    names = [s for s in sides if type(s) is cst.Name and s.value == "__name__"]
    strings = [s for s in sides if type(s) is cst.SimpleString and s.value[1:-1] == "__main__"]
    return len(names) == 1 and len(strings) == 1
