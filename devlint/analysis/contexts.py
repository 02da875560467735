"""Call contexts (SPEC §4): a function's body as the file's own calls run it.

A summary says what a call returns wherever it stands. The body itself is interpreted
a second time, for the rules, with what the calls in this file pass: the arguments
(`train(model, loader)` hands in a moved model and a DataLoader), the defaults of
parameters no call fills, and the module-level names and `self.<attr>`s as the caller
left them (`model.to(device)` inside `train()` before it calls `test()`). Where calls
disagree, their values join, so two calls with a CPU and a GPU tensor leave the
parameter unknown. Calls the file cannot see (from other modules, or through a
callback) are not joined in: what is found is true of the calls the file makes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import libcst as cst

from devlint.analysis.lattice import HOST_ARRAY, UNKNOWN, AbstractValue, Kind, accel
from devlint.analysis.tree import call_parameters, decorator_names, dotted_name

if TYPE_CHECKING:
    from devlint.analysis.interpreter import Mark, ScopeResult

_DEVICE_KINDS = frozenset({Kind.TENSOR, Kind.MODULE, Kind.DATALOADER, Kind.BATCH, Kind.DEVICE})


@dataclass(frozen=True)
class CallRecord:
    """A call of a function (or method) of this file, as the interpreter met it."""

    callee: cst.FunctionDef
    call: cst.Call
    mark: Mark  # the caller's names just before the call
    bound: bool  # a method call: `self.m(...)`, `net.m(...)`
    receiver: cst.BaseExpression | None = None
    by_name: bool = False  # resolved by the method's name alone (`model.sample(x)`, `model` handed in)


@dataclass
class CallContext:
    """What the file's calls pass to one function: parameter values, and the names
    (module-level ones, `self.<attr>`s) the callers left other than the module did."""

    params: dict[str, AbstractValue] = field(default_factory=dict)
    names: dict[str, AbstractValue] = field(default_factory=dict)
    one_call: bool = False  # what a single call passes (a rerun), not the join of all


def matters(value: AbstractValue) -> bool:
    """Does `value` say anything the device analysis can use?"""
    if value.kind in _DEVICE_KINDS or value.device.known or value.maybe_accel or value.holds_accel:
        return True
    if value.instance_of:
        return True  # `agent` of the file's `Agent`: its methods run where its models are
    if value == HOST_ARRAY:
        return True  # `names[order]` in the callee: NumPy reads a tensor index with `.numpy()`
    if value.entries is not None and any(matters(item) for _, item in value.entries):
        return True  # `batch` of `{"x": x.to(device)}`, handed to a helper that reads `batch["x"]`
    return value.elements is not None and any(matters(item) for item in value.elements)


def renamed(value: AbstractValue, rename: dict[str, str], hidden: frozenset[str]) -> AbstractValue:
    """`value`, computed by a caller, as the callee sees it: a device named by the
    caller's `device` is the callee's parameter given it (`rename`), one named by a name
    the callee cannot see (`hidden`) an accelerator without a name."""
    if value.elements is not None:
        value = replace(value, elements=tuple(renamed(item, rename, hidden) for item in value.elements))
    if value.entries is not None:
        value = replace(value, entries=tuple((key, renamed(item, rename, hidden)) for key, item in value.entries))
    device = value.device
    if device.is_accel and device.symbol:
        head = device.head
        if head in rename:
            return replace(value, device=accel(rename[head] + device.symbol[len(head) :]))
        if head in hidden:
            return replace(value, device=accel(None))
    return value


class CallContexts:
    """The call-context half of `FileModel`: which calls of the file reach each
    function, and what they pass."""

    def calls_of(self, function: cst.FunctionDef) -> list[tuple[cst.FunctionDef | None, CallRecord]]:
        """(caller, the call) for every call of `function` in the module body (caller
        None), its functions and the methods of its classes (a function nested in another
        calls with what it closes over, which is not followed). The first question
        interprets them all: the walk would, as every scope with a device in it is asked
        about."""
        if self._calls is None:
            self._calls = {}
            self._record_calls(None, self.module_scope())
            for caller in self.callers():
                self._record_calls(caller, self.generic_scope(caller, []))
        return self._calls.get(id(function), [])

    def _record_calls(self, caller: cst.FunctionDef | None, result: ScopeResult) -> None:
        for record in result.calls:
            self._calls.setdefault(id(record.callee), []).append((caller, record))

    def context_of(self, function: cst.FunctionDef) -> CallContext | None:
        """What the calls of the file pass to `function`, or None where they pass
        nothing the analysis can use (or the question is already being answered: a
        recursive call)."""
        key = id(function)
        if key in self._contexts:
            return self._contexts[key]
        if key in self._contexts_running or self._module_running:
            return None
        self._contexts_running.add(key)
        try:
            context = self._join_calls(function)
        finally:
            self._contexts_running.discard(key)
        self._contexts[key] = context
        return context

    def _join_calls(self, function: cst.FunctionDef) -> CallContext | None:
        calls = self.calls_of(function)
        if not calls:
            return None
        cls = self.class_of.get(id(function))
        own_self = self_name(function) if cls is not None else None
        hidden = self.ctx.bindings_of(function)
        joined: CallContext | None = None
        for caller, record in calls:
            seen = self._one_call(function, own_self, hidden, caller, record)
            if joined is None:
                joined = seen
                continue
            joined.params = {name: value.join(seen.params[name]) for name, value in joined.params.items()}
            for name in joined.names.keys() | seen.names.keys():
                fallback = self._name_fallback(cls, own_self, name)
                joined.names[name] = joined.names.get(name, fallback).join(seen.names.get(name, fallback))
        assert joined is not None
        joined.params = {name: value for name, value in joined.params.items() if matters(value)}
        joined.names = {
            name: value
            for name, value in joined.names.items()
            if matters(value) and value != self._name_fallback(cls, own_self, name)
        }
        return joined if joined.params or joined.names else None

    def _one_call(self, function: cst.FunctionDef, own_self: str | None, hidden: frozenset[str],
                  caller: cst.FunctionDef | None, record: CallRecord) -> CallContext:  # fmt: skip
        """What one call passes: its arguments (each parameter no argument fills takes
        its default), and the names its caller rebound before it."""
        result = self.scope(caller, []) if caller is not None else self.module_scope()
        names = self.parameter_names(function, record.bound)
        # `model.generate(tokens)` runs with `self` where `model` is: `self(x)` in its body is
        # a call of the moved model (its entry points keep their own device)
        passes_self = record.bound and own_self is not None and function.name.value not in ENTRY_POINTS
        if record.by_name:
            # the call reaches this method only if the receiver is an instance of its class
            cls = self.class_of.get(id(function))
            seen = result.values.get(id(record.receiver), UNKNOWN) if record.receiver is not None else UNKNOWN
            if cls is None or seen.instance_of != cls.name.value:
                params = {param.name.value: UNKNOWN for param in call_parameters(function, record.bound)}
                if passes_self:
                    params[own_self] = UNKNOWN
                return CallContext(params, {})
        caller_names = self.ctx.bindings_of(caller) if caller is not None else None
        values: dict[str, AbstractValue] = {}
        rename: dict[str, str] = {}
        starred = False
        for index, arg in enumerate(record.call.args):
            if arg.star:
                starred = True
                break
            name = arg.keyword.value if arg.keyword is not None else (names[index] if index < len(names) else None)
            if name is None or name not in names:
                continue
            values[name] = result.values.get(id(arg.value), UNKNOWN)
            if type(arg.value) is cst.Name:
                rename.setdefault(arg.value.value, name)
        receiver = dotted_name(record.receiver) if record.receiver is not None else None
        if receiver is not None and own_self is not None and "." not in receiver:
            rename.setdefault(receiver, own_self)
        if caller_names is None:
            gone = hidden - rename.keys()  # the module's names the callee's own names hide
        else:
            gone = (caller_names | hidden) - rename.keys()
        params: dict[str, AbstractValue] = {}
        for param in call_parameters(function, record.bound):
            name = param.name.value
            if name in values and not starred:
                params[name] = renamed(values[name], rename, gone)
            elif param.default is not None and not starred:
                params[name] = self.default_of(param)
            else:
                params[name] = UNKNOWN
        if passes_self:
            moved = result.values.get(id(record.receiver), UNKNOWN) if record.receiver is not None else UNKNOWN
            params[own_self] = moved if moved.kind is Kind.MODULE and moved.device.known else UNKNOWN
        left = self._names_left(record, caller, caller_names, receiver, own_self, rename, gone)
        return CallContext(params, left)

    def _names_left(self, record: CallRecord, caller: cst.FunctionDef | None, caller_names: frozenset[str] | None,
                    receiver: str | None, own_self: str | None, rename: dict[str, str],
                    gone: frozenset[str]) -> dict[str, AbstractValue]:  # fmt: skip
        """The module-level names, the receiver's attributes (as the callee's
        `self.<attr>`s) and the attributes of the objects handed in (`agent.Q` of
        `train(agent)`), that the callee reads, as the caller left them at the call: bound
        on its path, or passed to the caller by its own callers."""
        wanted: dict[str, str] = {}  # the caller's key -> the callee's
        handed = {param: name for name, param in rename.items()}  # the callee's parameter -> the caller's name
        for key in self.generic_scope(record.callee, []).reads:
            head, dot, attr = key.partition(".")
            if dot:
                if receiver is not None and head == own_self:
                    wanted[f"{receiver}.{attr}"] = key
                elif head in handed and head != own_self:
                    wanted[f"{handed[head]}.{attr}"] = key
            elif (caller_names is None or key not in caller_names) and key not in gone:
                wanted[key] = key
        found = record.mark.values_of(set(wanted))
        if caller is not None and len(found) < len(wanted):
            passed = self.context_of(caller)
            if passed is not None:
                found.update((key, passed.names[key]) for key in wanted.keys() - found.keys() if key in passed.names)
        left: dict[str, AbstractValue] = {}
        for key, value in found.items():
            if matters(value):
                left[wanted[key]] = renamed(value, rename, gone)
        return left

    def _name_fallback(self, cls: cst.ClassDef | None, own_self: str | None, name: str) -> AbstractValue:
        head, dot, attr = name.partition(".")
        if dot:
            return self.summary(cls).get(attr, UNKNOWN) if cls is not None and head == own_self else UNKNOWN
        return self.global_value(name)

    def default_of(self, param: cst.Param) -> AbstractValue:
        """The value of the default of a parameter of a module-level function or of a
        method of a top-level class: the module body evaluates it, with the `def`."""
        assert param.default is not None
        return self.module_scope().values.get(id(param.default), UNKNOWN)


ENTRY_POINTS = frozenset({"forward", "__call__"})


def self_name(function: cst.FunctionDef) -> str | None:
    """A method's `self` (none for a static or class method)."""
    if decorator_names(function) & {"staticmethod", "classmethod"}:
        return None
    params = [*function.params.posonly_params, *function.params.params]
    return params[0].name.value if params else None
