"""`libcst.parse_module` without the per-node work the parser's nodes do not need.

Every libcst node is a frozen dataclass: its generated `__init__` sets each field and
then calls `__post_init__`, which validates the node (`_validate`). That catches
hand-built nodes with bad whitespace; the parser's nodes are valid by construction, and
for them the validation and the call that leads to it are about a sixth of a parse
(libcst's own note in `CSTNode.__post_init__` says as much).

So each node class gets, once, an `__init__` equal to its dataclass one (same
parameters, defaults and factories, generated from `dataclasses.fields`) whose
validation can be switched off for the length of a parse. Nodes built at any other
time, by a fix or by anyone else in the process, are validated as always. A class
whose `__init__` is not the one `dataclasses` generated keeps its own.
"""

from __future__ import annotations

import dataclasses
import inspect

import libcst as cst

# one namespace for every generated `__init__`: switching validation is one store
_SHARED: dict[str, object] = {"_set": object.__setattr__, "_MISSING": dataclasses.MISSING, "_checking": True}
_installed = False


def parse_module(text: str) -> cst.Module:
    """`libcst.parse_module(text)`, skipping the validation of the nodes it builds.

    Parsing runs on the one deep thread (`engine.run_deep`), so no other devlint code
    builds nodes while validation is off."""
    if not _installed:
        _install()
    _SHARED["_checking"] = False
    try:
        return cst.parse_module(text)
    finally:
        _SHARED["_checking"] = True


def _install() -> None:
    global _installed
    for node_type in _node_types(cst.CSTNode):
        init = _fast_init(node_type)
        if init is not None:
            node_type.__init__ = init  # type: ignore[misc]
    _installed = True


def _shape(function) -> list[tuple[str, object, str]]:
    """Each parameter's name, kind and default (a factory's placeholder, whatever its
    object, as "factory")."""
    shape = []
    for p in inspect.signature(function).parameters.values():
        if p.default is inspect.Parameter.empty:
            default = ""
        elif p.default is dataclasses.MISSING or repr(p.default) == "<factory>":
            default = "factory"
        else:
            default = repr(p.default)
        shape.append((p.name, p.kind, default))
    return shape


def _node_types(base: type) -> list[type]:
    found: list[type] = []
    stack = [base]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                stack.append(sub)
    return found


def _fast_init(node_type: type):
    """The dataclass `__init__` of `node_type`, validating only while `_checking`; None
    where the class's `__init__` is not dataclasses' own, or not one this can repeat."""
    own = node_type.__dict__.get("__init__")
    params = getattr(node_type, "__dataclass_params__", None)
    if own is None or params is None or not params.init or own.__code__.co_filename != "<string>":
        return None
    fields = dataclasses.fields(node_type)
    if any(not f.init or f.kw_only for f in fields):
        return None
    name = f"_init_{node_type.__module__}_{node_type.__qualname__}".replace(".", "_")
    arguments, body = [], []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            _SHARED[f"{name}_{f.name}"] = f.default
            arguments.append(f"{f.name}={name}_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            _SHARED[f"{name}_{f.name}"] = f.default_factory
            arguments.append(f"{f.name}=_MISSING")
            body.append(f"    if {f.name} is _MISSING: {f.name} = {name}_{f.name}()")
        else:
            arguments.append(f.name)
        body.append(f"    _set(self, {f.name!r}, {f.name})")
    body.append("    if _checking: self.__post_init__()")
    # generated code, as `dataclasses` itself makes `__init__`: names and defaults come from the fields
    exec(f"def {name}(self, {', '.join(arguments)}):\n" + "\n".join(body), _SHARED)  # noqa: S102
    init = _SHARED.pop(name)
    if _shape(init) != _shape(own):
        return None  # a dataclass feature this does not repeat: keep the original
    init.__qualname__ = f"{node_type.__qualname__}.__init__"
    return init
