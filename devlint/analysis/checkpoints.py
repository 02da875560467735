"""What a `torch.load` result is used as, followed through names, entries, helpers and
returns (SPEC §2, DEV303): a state dict that only feeds `load_state_dict`, a model, or
nothing the device matters to (a data file).

    uses = CheckpointUses(DeviceAnalysis.of(ctx))
    uses.of(call)   # "state", "model" or None
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from devlint.analysis.tree import child_list, dotted_name, string_value

if TYPE_CHECKING:
    from devlint.analysis.devices import DeviceAnalysis

STATE = "state"  # reaches `load_state_dict` only: exact on the CPU
MODEL = "model"  # used as a model (called, `.eval()`, moved), or handed on with one

# Methods that show a loaded object is a model.
_MODEL_METHODS = frozenset(
    {"eval", "train", "parameters", "named_parameters", "state_dict", "modules", "children", "forward",
     "named_modules", "named_children", "load_state_dict", "flatten_parameters", "requires_grad_", "zero_grad"}
)  # fmt: skip
# Entries only a training checkpoint has: `ckpt["optimizer"]` handed anywhere is one.
_CHECKPOINT_KEYS = frozenset({"state_dict", "model_state_dict", "optimizer", "optimizer_state_dict", "optim"})
# Entries of a training checkpoint (Lightning's among them): one edited in place is one.
_TRAINING_KEYS = _CHECKPOINT_KEYS | {"hyper_parameters", "optimizer_states"}
# Calls that only look at a value (or write it out): an entry handed to one is no model.
_LOOKING = frozenset({"print", "str", "repr", "format", "len", "isinstance", "type", "info", "debug", "warning",
                      "log", "plot", "append", "write", "dumps", "dump"})  # fmt: skip
# Methods a tensor and a model share, whose result is used as the object was: the use of
# `torch.load(p).to(device)` is the use of that result (a tensor moved is a data file).
_SAME_KIND = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16"})
_MAX_DEPTH = 4  # helpers followed through at most this many calls or returns


class CheckpointUses:
    """The uses of loaded objects in one file; the parent table is built on first use."""

    def __init__(self, analysis: DeviceAnalysis) -> None:
        self.analysis = analysis
        self.ctx = analysis.ctx
        self._parents: dict[int, cst.CSTNode] | None = None
        self._calls: dict[str, list[cst.Call]] | None = None
        self._seen: set[tuple[int, str]] = set()

    def of(self, load: cst.Call) -> str | None:
        """What the value of `load` (a `torch.load(...)` call) is used as."""
        self._seen = set()
        return self._use_of(load, 0)

    # -- one expression --------------------------------------------------------------

    def _use_of(self, node: cst.CSTNode, depth: int) -> str | None:
        parents = self._parent_table()
        child, parent = node, parents.get(id(node))
        entries: set[str] = set()  # the keys read on the way
        while True:  # an entry of it is it: `ckpt["model"]`, `ckpt.get("model")`
            if type(parent) is cst.Subscript and parent.value is child:
                if len(parent.slice) == 1 and type(parent.slice[0].slice) is cst.Index:
                    key = string_value(parent.slice[0].slice.value)
                    if key is not None:
                        entries.add(key)
                child, parent = parent, parents.get(id(parent))
            elif type(parent) is cst.Attribute and parent.value is child and parent.attr.value == "get":
                call = parents.get(id(parent))
                if type(call) is not cst.Call:
                    return None
                child, parent = call, parents.get(id(call))
            else:
                break
        if type(parent) is cst.AssignTarget and entries & _TRAINING_KEYS:
            return MODEL  # `ckpt["hyper_parameters"]["config"] = ...`: a training checkpoint edited
        if type(parent) is cst.Attribute and parent.value is child:
            call = parents.get(id(parent))
            if type(call) is not cst.Call or call.func is not parent:
                return None
            if parent.attr.value in _MODEL_METHODS:
                return MODEL
            if parent.attr.value in ("items", "values") and type(parents.get(id(call))) is cst.CompFor:
                # `{k: v for k, v in ckpt.items() if k in own}`: what the comprehension is used as
                comprehension = parents.get(id(parents.get(id(call))))
                if type(comprehension) in (cst.DictComp, cst.ListComp, cst.GeneratorExp):
                    return self._use_of(comprehension, depth)
                return None
            loop = parents.get(id(call))
            if parent.attr.value in ("items", "values") and type(loop) is cst.For and loop.iter is call:
                # `for k, v in ckpt.items(): renamed[k[7:]] = v`: what the copy is used as
                copy = _copied_into(loop, parent.attr.value)
                return self._name_use(self._scope_of(loop), copy, depth) if copy else None
            return self._use_of(call, depth) if parent.attr.value in _SAME_KIND else None
        if type(parent) is cst.Call and parent.func is child:
            return MODEL  # called: a whole model
        if type(parent) is cst.Arg:
            call = parents.get(id(parent))
            use = self._argument_use(call, parent, depth) if type(call) is cst.Call else None
            if use is None and entries & _CHECKPOINT_KEYS and _callee_name(call) not in _LOOKING:
                return MODEL  # `Checkpoint(optimizer=ckpt["optimizer"])`: a training checkpoint's entry
            return use
        if type(parent) is cst.DictElement and parent.value is child:
            literal = parents.get(id(parent))  # `{path: ckpt}` handed on: what the dict is used as
            return self._use_of(literal, depth) if type(literal) is cst.Dict else None
        if type(parent) in (cst.Assign, cst.AnnAssign) and parent.value is child:
            targets = [t.target for t in parent.targets] if type(parent) is cst.Assign else [parent.target]
            names = [dotted_name(t) for t in targets]
            for target in targets:  # `model, *_ = load_ensemble(...)`: each name bound
                if type(target) in (cst.Tuple, cst.List):
                    names += [dotted_name(e.value) for e in target.elements]
            found = [self._name_use(self._scope_of(parent), name, depth) for name in names if name]
            return _strongest(found)
        if type(parent) is cst.Return and depth < _MAX_DEPTH:
            function = self._scope_of(parent)
            if type(function) is cst.FunctionDef:
                return _strongest([self._use_of(call, depth + 1) for call in self._callers(function)])
        return None

    def _argument_use(self, call: cst.Call, arg: cst.Arg, depth: int) -> str | None:
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "load_state_dict":
            return STATE
        name = _callee_name(call)
        if name == "load_state_dict" or (name.startswith(("load_", "set_")) and name.endswith("model_state_dict")):
            return STATE  # `set_peft_model_state_dict(model, weights)`, timm's `load_state_dict(model, sd)`
        if type(func) is cst.Attribute and func.attr.value == "copy_" and _reads_state_dict(func.value):
            return STATE  # `model.state_dict()[k].copy_(ckpt[k])`: copied into the model wherever it is
        if type(func) is cst.Attribute and func.attr.value == "update" and depth < _MAX_DEPTH:
            receiver = dotted_name(func.value)  # `own.update(ckpt)`: `own` is used as the checkpoint
            return self._name_use(self._scope_of(call), receiver, depth + 1) if receiver else None
        model = self.analysis.model
        function, bound = (model.callee(func.value) if type(func) is cst.Name else None), False
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            # `self.load_weights(weights)`: a method of the class around
            cls = model.class_of.get(id(self._scope_of(call)))
            function, bound = (model.method(cls, func.attr.value) if cls is not None else None), True
        elif type(func) is cst.Attribute:
            # `self.net.load_weights(weights)`: a method of the file's class the receiver is
            cls = model.classes.get(self.analysis.value_of(func.value).instance_of or "")
            function, bound = (model.method(cls, func.attr.value) if cls is not None else None), True
        if function is not None and depth < _MAX_DEPTH:
            param = _parameter_for(model.parameter_names(function, bound=bound), call, arg)
            return self._name_use(function.body, param, depth + 1) if param else None
        if depth == 0:
            # `transfer(model, torch.load(path))`: handed on with a model, by code not seen
            if any(a is not arg and self.analysis.value_of(a.value).is_module for a in call.args):
                return MODEL
        name = _callee_name(call).lower()
        loader = ("load" in name and "model" in name) or "checkpoint" in name
        if function is None and depth < _MAX_DEPTH and arg.keyword is None and loader:
            # `load_model_ensemble({path: ckpt})`: a library loader that makes a model of it
            # (not `Net(config)`, `load_vocab(...)` nor `from_pretrained(dir, args=args)`)
            return MODEL if self._use_of(call, depth + 1) == MODEL else None
        return None

    # -- a name ----------------------------------------------------------------------

    def _name_use(self, scope: cst.CSTNode, name: str, depth: int) -> str | None:
        key = (id(scope), name)
        if key in self._seen:
            return None
        self._seen.add(key)
        parents = self._parent_table()
        scopes = [scope]
        if scope is self.ctx.module and "." not in name:
            # a checkpoint loaded at import, read by the functions that do not bind the name
            scopes += [
                function
                for function, _ in self.ctx.tree.functions(scope)
                if type(function) is cst.FunctionDef and name not in self.ctx.bindings_of(function)
            ]
        found = []
        for where in scopes:
            for node in self.ctx.tree.walk_scope(where):
                if type(node) not in (cst.Name, cst.Attribute) or dotted_name(node) != name:
                    continue
                parent = parents.get(id(node))
                if type(parent) is cst.AssignTarget or (type(parent) is cst.Attribute and parent.value is not node):
                    continue  # a (re)binding, or the `x` of `y.x`
                found.append(self._use_of(node, depth))
        return _strongest(found)

    # -- the file --------------------------------------------------------------------

    def _scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        parents = self._parent_table()
        current = parents.get(id(node))
        while current is not None and type(current) not in (cst.FunctionDef, cst.Lambda):
            current = parents.get(id(current))
        return current if current is not None else self.ctx.module

    def _callers(self, function: cst.FunctionDef) -> list[cst.Call]:
        if self._calls is None:
            calls: dict[str, list[cst.Call]] = {}
            for node in self.ctx.tree.walk(self.ctx.module):
                if type(node) is cst.Call:
                    func = node.func
                    if type(func) is cst.Name:
                        calls.setdefault(func.value, []).append(node)
                    elif type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
                        calls.setdefault(func.attr.value, []).append(node)
            self._calls = calls
        return self._calls.get(function.name.value, [])

    def _parent_table(self) -> dict[int, cst.CSTNode]:
        if self._parents is None:
            parents: dict[int, cst.CSTNode] = {}
            for node in self.ctx.tree.walk(self.ctx.module):
                for child in child_list(node):
                    parents[id(child)] = node
            self._parents = parents
        return self._parents


def _copied_into(loop: cst.For, method: str) -> str | None:
    """The dict a loop over `.items()` (or `.values()`) copies every value into under a
    key of its own (`new[k[7:]] = v`), the only thing its body does with the value."""
    target = loop.target
    if method == "items":
        if type(target) is not cst.Tuple or len(target.elements) != 2:
            return None
        target = target.elements[1].value
    if type(target) is not cst.Name:
        return None
    copies = []
    for stmt in loop.body.body if type(loop.body) is cst.IndentedBlock else ():
        if type(stmt) is not cst.SimpleStatementLine:
            return None
        for small in stmt.body:
            if type(small) is cst.Assign and len(small.targets) == 1 and type(small.value) is cst.Name:
                copied = small.targets[0].target
                if small.value.value == target.value and type(copied) is cst.Subscript:
                    copies.append(dotted_name(copied.value))
    return copies[0] if len(copies) == 1 else None


def _callee_name(call: cst.CSTNode) -> str:
    if type(call) is not cst.Call:
        return ""
    func = call.func
    return func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""


def _reads_state_dict(expr: cst.BaseExpression) -> bool:
    """`model.state_dict()[k]`: an entry of a state dict."""
    while type(expr) is cst.Subscript:
        expr = expr.value
    return type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "state_dict"


def _strongest(uses: list[str | None]) -> str | None:
    """A model anywhere decides; else a state dict; else nothing."""
    if MODEL in uses:
        return MODEL
    return STATE if STATE in uses else None


def _parameter_for(params: list[str], call: cst.Call, arg: cst.Arg) -> str | None:
    """The parameter (of `params`, in order) that `arg` of `call` fills."""
    if arg.keyword is not None:
        return arg.keyword.value
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional):
        return None
    index = next(i for i, a in enumerate(positional) if a is arg)
    return params[index] if index < len(params) else None
