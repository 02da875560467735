"""The relevance gate: most functions cannot mix devices, so only those that build,
move, load or sync tensors (or read module-level names bound to such things) are
interpreted. The others leave every value unknown, at no cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import libcst as cst

from devlint.analysis import device_tables as T
from devlint.analysis.tree import Tree, bound_names, decorator_names, statements


class RelevanceGate:
    """The gate half of `FileModel` (which provides the class facts it reads)."""

    def is_relevant(self, function: cst.FunctionDef | cst.Lambda, *, building: bool = False,
                    _base: bool = False) -> bool:  # fmt: skip
        """Could interpreting `function` find anything? Only if it builds tensors or
        modules, moves or syncs them, loads data, or reads a module-level name bound to
        such a thing. Anything else (most `forward`s: layers applied to their input)
        leaves every value unknown, so it is not interpreted at all: interpreting every
        function would cost as much as parsing the file. With `building`, what a method
        builds (its layers too) matters: the class summary needs it. Calling a function
        or method of the file that is itself relevant makes a function relevant too: what
        the call returns comes from that function's summary."""
        key = id(function) * 4 + building + 2 * _base
        known = self._relevant.get(key)
        if known is None:
            attributes: frozenset[str] = frozenset()
            names = _RELEVANT_NAMES
            cls = self.class_of.get(id(function))
            if cls is not None and type(function) is cst.FunctionDef and function.params.params:
                attributes = self._tensor_attributes(cls)
                name = function.name.value
                if not building and self.is_module_class(cls) and not name.startswith(("forward", "__call__")):
                    # a module's own layers follow it wherever it is moved: building them
                    # in `__init__` is nothing to check (built in `forward`, they stay
                    # on the CPU)
                    names = _RELEVANT_IN_MODULES
            called = self._called_names(names)
            if not _base:
                functions, models, methods = self._callables()
                if names is not _RELEVANT_IN_MODULES:
                    functions = functions | models  # a module's own submodules follow it
                names, called = names | methods, called | functions
            known = _mentions_sources(self.ctx.tree, function, self._globals_with_sources(), attributes, names,
                                      called)  # fmt: skip
            if not known and type(function) is cst.FunctionDef:
                known = self._converts_a_parameter(function)
            if not known and cls is None and not _base and type(function) is cst.FunctionDef:
                known = self.passed_on(function) is not None
            self._relevant[key] = known
        return known

    def _converts_a_parameter(self, function: cst.FunctionDef) -> bool:
        """Does the function hand one of its parameters to NumPy, scikit-learn metrics
        or matplotlib (`roc_curve(labels, scores)`)? Its callers may pass accelerator
        tensors (DEV203)."""
        params = {p.name.value for p in (*function.params.posonly_params, *function.params.params)}
        if not params:
            return False
        for node in self.ctx.tree.walk(function.body):
            if type(node) is cst.Call and any(type(a.value) is cst.Name and a.value.value in params for a in node.args):
                qualified = self.imports.qualify(node.func, frozenset()) or ""
                if qualified.startswith(T.CONVERTING_NAMESPACES):
                    return True
        return False

    def passed_on(self, function: cst.FunctionDef) -> tuple | None:
        """`passed_on(function)` for a module-level function (None for a method)."""
        key = id(function)
        if key not in self._passed_on:
            self._passed_on[key] = passed_on(function) if self.class_of.get(key) is None else None
        return self._passed_on[key]

    def _callables(self) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        """The module-level functions, the module classes, and the methods of top-level
        classes, that are relevant by themselves: calling one makes the caller relevant."""
        if self._source_callables is None:
            functions = frozenset(
                name for name, f in self.functions.items() if f is not None and self.is_relevant(f, _base=True)
            )
            methods = frozenset(
                m.name.value
                for c in self.ctx.module.body
                if type(c) is cst.ClassDef
                for m in self._methods(c)
                if m.params.params and self.is_relevant(m, _base=True)
            )
            models = frozenset(name for name, c in self.classes.items() if self.is_module_class(c))
            self._source_callables = (functions, models, methods)
        return self._source_callables

    def _called_names(self, names: frozenset[str]) -> frozenset[str]:
        """`names` as called bare: `type(x)` and `range(n)` are the builtins, unless the
        file imports them from torch."""
        shadowing = _BUILTIN_NAMESAKES & self.imports.aliases.keys()
        return names - (_BUILTIN_NAMESAKES - shadowing)

    def _tensor_attributes(self, cls: cst.ClassDef) -> frozenset[str]:
        """`self.<attr>`s some method of `cls` (or a local base) builds as a tensor and
        that stay where they were built: in an nn.Module, what the module owns follows it
        (see `summary`), so reading it cannot meet a tensor on another device."""
        key = -id(cls)  # class keys are negative; function keys are 4 * id (+ 0..3)
        cached = self._relevant.get(key)
        if cached is None:
            names: set[str] = set()
            sources = _TENSOR_SOURCE_NAMES
            if not self.is_module_class(cls):
                # a plain class's models (`self.Q = QNet(...)`) stay where its code puts them
                models = {n for n, c in self.classes.items() if self.is_module_class(c)}
                sources = sources | _LAYER_NAMES | models | T.MOVE_METHODS | {"from_pretrained", "create_model"}
            called = self._called_names(sources)
            for owner in [*self.local_bases(cls), cls]:
                for method in self._methods(owner):
                    for node in _self_assigning_statements(method):
                        value = node.value
                        if value is not None and _mentions_sources(self.ctx.tree, value, names=sources, called=called):
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
                if "staticmethod" in decorator_names(method):
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
        """ "parameter" (`nn.Parameter(...)`), "none" (`None`), "unknown" (one of each
        under `if ... else`: the kinds disagree), or "any"."""
        if type(value) is cst.Call:
            qualified = self.qualify(value.func, shadowed)
            return "parameter" if qualified in T.PARAMETER_CLASSES else "any"
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
       "new_tensor", "prepare", "setup", "numpy", "Tensor", "ToTensorV2"}
)  # fmt: skip


_LAYER_NAMES = frozenset(
    name.rsplit(".", 1)[-1]
    for name in (*T.PARAMETER_LAYERS, *T.PARAMETERLESS_LAYERS, *T.OPTIONAL_STATE_LAYERS, *T.MODULE_WRAPPERS,
                 *T.WEIGHTED_LOSSES, *T.MODULE_CONTAINERS)
)  # fmt: skip
_RELEVANT_IN_MODULES = (
    _RELEVANT_NAMES - _LAYER_NAMES - {"Parameter", "register_parameter", "create_model", "from_pretrained"}
)

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


def _passes_a_parameter_on(function: cst.FunctionDef) -> bool:
    """Does a module-level function return an item of a parameter (`out["logits"]`,
    `batch[0]`), alone or in a tuple? What it returns is then what its callers hand it (a
    model's outputs), which only its summary can tell them."""
    return passed_on(function) is not None


def passed_on(function: cst.FunctionDef) -> tuple | None:
    """The items of its parameters that a function returns from its one `return`:
    ("single", (param, subscript)) for `return out["logits"]`, ("tuple", entries) for
    `return loss, out["logits"]` (an entry None where the element is not one), or None."""
    params = {p.name.value for p in (*function.params.posonly_params, *function.params.params)}
    body = list(statements(function.body, enter_definitions=False))
    params -= _names_bound(body, with_targets=True)  # `image = image.cpu().numpy(); return image[0]`
    if not params:
        return None
    returns = [n for n in body if type(n) is cst.Return]
    if len(returns) != 1 or returns[0].value is None:
        return None

    def entry(value: cst.BaseExpression) -> tuple[str, cst.Subscript] | None:
        if type(value) is cst.Subscript and type(value.value) is cst.Name and value.value.value in params:
            return value.value.value, value
        return None

    value = returns[0].value
    if type(value) is cst.Tuple:
        entries = tuple(entry(e.value) if type(e) is cst.Element else None for e in value.elements)
        return ("tuple", entries) if any(entries) else None
    found = entry(value)
    return ("single", found) if found is not None else None


def _names_bound(nodes: Iterable[cst.CSTNode], *, with_targets: bool = False) -> set[str]:
    """Names the statements among `nodes` assign (by assignment or a loop, and with
    `with_targets` by a `with ... as`)."""
    names: set[str] = set()
    for node in nodes:
        if type(node) is cst.Assign:
            for target in node.targets:
                names.update(bound_names(target.target))
        elif type(node) in (cst.AnnAssign, cst.AugAssign, cst.For):
            names.update(bound_names(node.target))
        elif with_targets and type(node) is cst.With:
            for item in node.items:
                if item.asname is not None:
                    names.update(bound_names(item.asname.name))
    return names


def _module_names_bound(stmt: cst.CSTNode) -> set[str]:
    return _names_bound([stmt, *statements(stmt, enter_definitions=False)])


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
