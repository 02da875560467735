"""The device binding (SPEC §3): the one expression every fix uses to name "the device".

In order of preference: a parameter or local of the enclosing functions named like the
binding (`device` unless configured), then the module-level binding, which is created
after the last top-level import when absent (with `import torch` when the file has no
name for torch). An existing module-level `device = ...` is reused; if the name holds
something that is not a device, a free name is chosen.

One device per file (SPEC §3): where the file places values under a flag of its own, the
binding follows the flag (`placement_flag`); where no module-level binding can follow it,
a fix that newly places a tensor outside the flag's arm gets no device (`code_for`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from devlint.analysis import device_tables
from devlint.analysis.guards import EVERYTHING, conjuncts, cuda_flag_branch
from devlint.analysis.lattice import AbstractValue, Device, Kind, Operand
from devlint.analysis.literals import is_device_attribute
from devlint.analysis.tree import bound_names, dotted_name, parameter_named, statements, string_value
from devlint.fix.plan import InsertLines, NodeEdit

if TYPE_CHECKING:
    from devlint.analysis.context import FileContext

Code = tuple[str, tuple[NodeEdit, ...]]  # device code, and the edits (prelude lines) it needs
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class DeviceExpr:
    """Code naming the device, plus the edits (prelude lines) it depends on.

    `kind` says what the name holds: "device" (a torch.device), "type" (a device-type
    string such as `"cuda"`), or "any" (either, or a string with an index). `type_code`
    is the device type in each case: `device.type`, `device`, `torch.device(device).type`.
    """

    code: str
    edits: tuple[NodeEdit, ...] = ()
    kind: str = "device"
    torch: str = "torch"

    @property
    def type_code(self) -> str:
        if self.kind == "type":
            return self.code
        if self.kind == "any":
            return f"{self.torch}.device({self.code}).type"
        return f"{self.code}.type"


class BindingService:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.name = ctx.config.device_name
        self._module_name: str | None = None
        self._module_state: str | None = None  # "exists" | "create" | None (not computed)
        self._module_kind = "device"
        self._layout: tuple[dict[int, int], list[int]] | None = None
        self._first_definition: dict[str, int] = {}
        self._placement: tuple[tuple[str, cst.CSTNode] | None] | None = None
        self._at: cst.CSTNode | None = None  # where the code will stand, when not where the walk is
        self._cuda_selection: bool | None = None
        self._torch_block: tuple[tuple[str, int] | None] | None = None
        self._placing = False  # `code_for` asks: the fix places a value that stayed where it was
        self._unfollowed: bool | None = None

    # -- torch -----------------------------------------------------------------------

    def torch(self) -> tuple[str, tuple[NodeEdit, ...]]:
        """A name for the torch package where the code will stand, and the prelude that
        creates it if missing: a module-level import, or one in an enclosing function
        (`def main(): import torch`)."""
        module_torch = self._module_torch()
        if module_torch is not None and (self.ctx.functions() or module_torch[1] < self._current_index()):
            return module_torch[0], ()
        local = self._local_torch()
        if local is not None:
            return local, ()
        return "torch", (self._import_torch(),)

    def _module_torch(self) -> tuple[str, int] | None:
        """The name the first top-level import of torch binds, and the position of the
        last import of the block it stands in (`import torch`, `import torch.nn as nn`,
        `from model import Net`): the one place the module-level binding goes, whichever
        fix creates it."""
        if self._torch_block is None:
            found: tuple[str, int] | None = None
            body = self.ctx.module.body
            _, anchors = self._statement_index()
            for position in anchors:
                name = _torch_imported_by(body[position])
                if name is not None:
                    end = position
                    while end + 1 < len(body) and _is_import_statement(body[end + 1]):
                        end += 1
                    found = (name, end)
                    break
            self._torch_block = (found,)
        return self._torch_block[0]

    def _local_torch(self) -> str | None:
        """A name for torch that an enclosing function imports itself, or None."""
        aliases = self.ctx.imports.torch_aliases
        for function in self.ctx.functions():
            for node in statements(function, enter_definitions=False):
                if type(node) is cst.Import:
                    name = next((n for n in map(_torch_name, node.names) if n in aliases), None)
                    if name is not None and not self.ctx.is_local(name):
                        return name
        return None

    def _import_torch(self) -> InsertLines:
        """`import torch` after the file's first block of imports (after its docstring,
        or at its top, when it has none), where that comes before the code being fixed;
        else after the last import before that code."""
        _, anchors = self._statement_index()
        body = self.ctx.module.body
        end = None
        if anchors:
            end = anchors[0]
            while end + 1 < len(body) and _is_import_statement(body[end + 1]):
                end += 1
        anchor = body[end] if end is not None and end < self._current_index() else self._prelude_anchor()
        newline = self._newline()
        after_docstring = anchor is not None and not _is_import_statement(anchor)
        return InsertLines(anchor, f"{newline if after_docstring else ''}import torch{newline}")

    def portable_expression(
        self, *, string: bool = False, torch: str | None = None
    ) -> tuple[str, tuple[NodeEdit, ...]]:
        """`torch.accelerator.current_accelerator() if ... else torch.device("cpu")`; with
        `string=True` the same choice as a device-type string, for code that holds strings.
        `torch`: the name of torch to write (default: the one where the code will stand)."""
        torch, edits = (torch, ()) if torch is not None else self.torch()
        config = self.ctx.config
        cuda_style = config.device_style == "cuda" or config.torch_version < (2, 6) or self._selects_cuda()
        if cuda_style and string:
            code = f'"cuda" if {torch}.cuda.is_available() else "cpu"'
        elif cuda_style:
            code = f'{torch}.device("cuda" if {torch}.cuda.is_available() else "cpu")'
        elif string:
            code = f'{torch}.accelerator.current_accelerator().type if {torch}.accelerator.is_available() else "cpu"'
        else:
            code = (
                f"{torch}.accelerator.current_accelerator() "
                f'if {torch}.accelerator.is_available() else {torch}.device("cpu")'
            )
        return code, edits

    # -- code naming a device ------------------------------------------------------------

    def code_for(
        self,
        device: Device,
        *,
        names: Mapping[str, AbstractValue] | None = None,
        operand: Operand | None = None,
        same_scope: bool = True,
        at: cst.CSTNode | None = None,
    ) -> Code | None:
        """The code that names `device` (an analysis device) and the edits it needs, in
        SPEC §3's order; None when no name is sure to mean that device there. Every fix
        that writes a device asks here.

        By default the code stands where the walk is. With `names` (the names bound where
        a factory stands, from the analysis) and `operand` (the tensor already on
        `device`), it stands at that factory and may be `<operand>.device`. `same_scope`:
        the code stands in the scope where `device` got its name. `at`: the node the code
        will stand in (the factory), where that is an earlier statement than the walk's.
        """
        self._placing = True  # a new placement: see `_unfollowed_flags`
        try:
            if names is not None and operand is not None:
                self._at = at
                try:
                    found = self._code_among(names, device, operand)
                finally:
                    self._at = None
            else:
                found = self._code_here(device, same_scope)
        finally:
            self._placing = False
        if found is not None and not found[1] and self._unfollowed_flags():
            self.has_module_binding()  # (names the module-level binding)
            if found[0] == self._module_name and self._beside_a_flag():
                return None  # the binding an earlier fix added beside the flag (see `_module_binding`)
        return found

    def _beside_a_flag(self) -> bool:
        """Is the module-level binding the portable one a fix adds, in a file that places
        values under a flag of its own that it cannot follow, outside that flag's arm?"""
        return self._portable_binding() and self._unfollowed_flags() and not self.ctx.under_cuda_flag()

    def _code_among(self, names: Mapping[str, AbstractValue], target: Device, other: Operand) -> Code | None:
        """Code naming `target`, the device of `other`, where `names` are bound."""
        binding = self.name

        def same_device(name: str) -> bool:
            value = names.get(name)
            return value is not None and value.device == target

        symbol = target.symbol or ""
        if binding in names:
            value = names[binding]
            if value.kind in (Kind.DEVICE, Kind.OTHER) and value.device == target:
                return binding, ()
            if symbol == binding and not value.device.known:
                return binding, ()  # the very name the other operand was moved with
        candidates = []
        if symbol.endswith(".device"):
            candidates.append(symbol[: -len(".device")])
        operand = dotted_name(other.expr)
        if operand is not None and other.value.kind is not Kind.MODULE:
            candidates.append(operand)
        for candidate in candidates:
            head = candidate.split(".", 1)[0]
            if same_device(candidate) and (head == candidate or head in names or head == "self"):
                value = names[candidate]
                if value.kind in (Kind.TENSOR, Kind.UNKNOWN, Kind.BATCH):
                    return f"{candidate}.device", ()
        if same_device(symbol) and names[symbol].kind in (Kind.DEVICE, Kind.OTHER):
            return symbol, ()
        if symbol == binding or (symbol.strip("\"'") in ("cuda", "cuda:0") and symbol[:1] in "\"'"):
            if any(binding in self.ctx.bindings_of(f) for f in self.ctx.functions()):
                return None  # a local `device` the factory cannot see yet
            device = self.device()
            if device is not None:
                return device.code, device.edits
        return None

    def _code_here(self, device: Device, same_scope: bool) -> Code | None:
        """Code naming `device` where the walk stands."""
        symbol = device.symbol
        binding = self.name
        if symbol is None or symbol == binding:
            functions = self.ctx.functions()
            local = bool(functions) and symbol in self.ctx.bindings_of(functions[0])
            if (symbol is not None and not same_scope and not local and not self.has_module_binding()
                    and not self._selects_cuda()):  # fmt: skip
                # `device` named in another function (a parameter there): what its callers pass
                # is not known to be the binding this fix would create, unless the file chooses
                # its devices the one way the new binding will (`"cuda" if ... else "cpu"`)
                return None
            found = self.device()
            return (found.code, found.edits) if found is not None else None
        if symbol[:1] in "\"'":
            if symbol.strip("\"'") not in device_tables.PORTABLE_LITERALS:
                return None  # an index other than 0 is DEV103's
            found = self.device()
            return (found.code, found.edits) if found is not None else None
        if same_scope and _DOTTED.match(symbol) and self._visible(symbol.split(".", 1)[0]):
            return symbol, ()
        return None

    def _visible(self, name: str) -> bool:
        """Is `name` bound where the walk stands?"""
        ctx = self.ctx
        functions = ctx.functions()
        if functions:
            function = functions[0]
            if name not in ctx.bindings_of(function):
                return True  # a global or an enclosing function's name
            return parameter_named(function, name) is not None or ctx.assigned_before(function, name)
        top = ctx.top_level_statement()
        for stmt in ctx.module.body:
            if stmt is top:
                return False
            for node in ctx.tree.walk_scope(stmt):
                target = None
                if type(node) is cst.AssignTarget:
                    target = node.target
                elif type(node) in (cst.FunctionDef, cst.ClassDef):
                    target = node.name
                elif type(node) is cst.ImportAlias:
                    target = node.asname.name if node.asname is not None else node.name
                if target is not None and name in set(bound_names(target)) | {dotted_name(target)}:
                    return True
        return False

    # -- the device ------------------------------------------------------------------

    def device(self) -> DeviceExpr | None:
        """The device expression at the current node, or None when none can be used safely."""
        ctx = self.ctx
        for function in ctx.functions():
            if self.name in ctx.bindings_of(function):
                parameter = self._parameter(function)
                if parameter is None and not ctx.assigned_before(function, self.name):
                    # assigned later in this function: the module-level name would be unbound
                    return None
                if parameter is not None and _is_none(parameter.default):
                    if not ctx.assigned_before(function, self.name):
                        # `device=None` means "the default device" here: `.to(None)` would not move
                        return None
                return self._named(self.name, self._local_kind(function, parameter))
        return self._module_binding()

    def _named(self, name: str, kind: str) -> DeviceExpr:
        if kind == "any":
            torch, edits = self.torch()
            return DeviceExpr(name, edits, kind, torch)
        return DeviceExpr(name, kind=kind)

    def _parameter(self, function: cst.FunctionDef | cst.Lambda) -> cst.Param | None:
        return parameter_named(function, self.name)

    def _local_kind(self, function: cst.FunctionDef | cst.Lambda, parameter: cst.Param | None) -> str:
        if parameter is not None:
            annotation = parameter.annotation
            known = annotation is not None and self.ctx.qualify(annotation.annotation) == "torch.device"
            return "device" if known else "any"
        if type(function) is cst.Lambda:
            return "any"
        values = [
            node.value
            for node in self.ctx.tree.walk_scope(function.body)
            if type(node) is cst.Assign
            and any(type(t.target) is cst.Name and t.target.value == self.name for t in node.targets)
        ]
        kind = _joined_kind(self.value_kind(v) for v in values)
        return kind if kind in ("device", "type") else "any"

    def holds_device(self, name: str) -> bool:
        """Is `name`, where the walk stands, surely a torch.device? True when every
        assignment in its scope (the innermost function binding it, else the module) is
        `torch.device(...)`, `x.device` or the like, and it is not a parameter."""
        scope: cst.CSTNode = self.ctx.module
        for function in self.ctx.functions():
            if name in self.ctx.bindings_of(function):
                if type(function) is cst.Lambda:
                    return False
                scope = function.body
                if parameter_named(function, name) is not None:
                    return False
                break
        kinds = [
            self.value_kind(node.value)
            for node in self.ctx.tree.walk_scope(scope)
            if type(node) is cst.Assign
            and any(type(t.target) is cst.Name and t.target.value == name for t in node.targets)
        ]
        return _joined_kind(kinds) == "device"

    def value_kind(self, value: cst.BaseExpression) -> str:
        """What an assigned value holds: "device", "type" (a device-type string), "string"
        (a device string with an index), "other" (surely not a device), or "unknown"."""
        if type(value) is cst.IfExp:
            return _joined_kind((self.value_kind(value.body), self.value_kind(value.orelse)))
        if type(value) is cst.SimpleString:
            literal = string_value(value)
            if literal is None or literal.split(":", 1)[0] not in device_tables.DEVICE_TYPES:
                return "other"
            return "string" if ":" in literal else "type"
        if type(value) in (cst.ConcatenatedString, cst.FormattedString):
            return "string"
        if type(value) is cst.Attribute and value.attr.value == "type":
            return "type" if self.value_kind(value.value) == "device" else "unknown"
        if is_device_attribute(value):
            return "device"
        if type(value) is cst.Call and self.ctx.qualify(value.func) in _DEVICE_CALLS:
            return "device"
        if type(value) in (cst.Integer, cst.Float, cst.List, cst.Dict, cst.Set, cst.Tuple, cst.Lambda):
            return "other"
        if type(value) is cst.Name and value.value in {"None", "True", "False"}:
            return "other"
        return "unknown"

    def _module_binding(self) -> DeviceExpr | None:
        if self._module_state is None:
            self._module_name, self._module_state = self._find_module_binding()
        assert self._module_name is not None
        if self._module_state == "exists":
            if not self.ctx.functions() and not self._defined_before_current(self._module_name):
                return None  # module-level code running before the binding exists
            if self.ctx.functions() and self._last_module_binding(self._module_name) is None:
                # bound only inside a block (`if __name__ == "__main__":`): a function may
                # run where it never is (a DataLoader worker imports the module anew)
                return None
            if self._placing and self._beside_a_flag():
                return None  # the binding an earlier fix added beside the flag: see below
            return self._named(self._module_name, self._module_kind)
        if any(self._module_name in self.ctx.bindings_of(f) for f in self.ctx.functions()):
            return None
        module_torch = self._module_torch()
        if module_torch is not None:
            # the module's own name for torch, and the binding after the imports that
            # bring it: one place for every fix of the file
            torch, torch_edits = module_torch[0], ()
            anchor = self.ctx.module.body[module_torch[1]]
            if not self.ctx.functions() and self._current_index() <= module_torch[1]:
                return None  # module-level code that runs before torch is imported
        else:
            insertion = self._import_torch()
            torch, torch_edits, anchor = "torch", (insertion,), insertion.after
        newline = self._newline()
        follows = self.placement_flag()
        if follows is not None:
            # the file keeps its own CUDA flag: the binding follows it, so that models and
            # tensors agree on every machine (on a Mac the flag is False: both stay on the CPU)
            code, after = follows
            if not self.ctx.functions() and self._current_index() <= self._statement_index()[0][id(after)]:
                return None  # module-level code that runs before the flag exists
            text = f"{self._module_name} = {code.replace('torch.', torch + '.', 1)}{newline}"
            return DeviceExpr(self._module_name, (*torch_edits, InsertLines(after, text)))
        if self._placing and self._unfollowed_flags() and not self.ctx.under_cuda_flag():
            # the file places its models under a flag of its own that no module-level device
            # can follow (`args` parsed in `main()`): a tensor newly put on `torch.accelerator`
            # would meet a model the flag left on the CPU (on a CUDA machine run without
            # the flag, on a Mac). Under the flag's own arm both go the same way; and a
            # `.cuda()` rewritten to `.to(device)` was on the accelerator already.
            return None
        portable, _ = self.portable_expression(torch=torch)
        if anchor is None and not self.ctx.module.body:
            return None
        prelude = "".join(e.text for e in torch_edits if isinstance(e, InsertLines))
        text = f"{self._module_name} = {portable}{newline}"
        if anchor is not None or prelude:
            text = newline + text  # a blank line between the imports and the binding
        if self._next_is_close(anchor):
            text += newline  # and one between the binding and the code after it
        text = prelude + text
        return DeviceExpr(self._module_name, (InsertLines(anchor, text),))

    def has_module_binding(self) -> bool:
        """Does the file already bind a device at module level (the binding's name, or
        another name that surely holds one)?"""
        if self._module_state is None:
            self._module_name, self._module_state = self._find_module_binding()
        return self._module_state == "exists"

    def placement_flag(self) -> tuple[str, cst.CSTNode] | None:
        """Where the file places models and tensors with a CUDA flag of its own that the
        fixes keep (`if cuda: model.cuda()`, `Tensor = torch.cuda.FloatTensor if cuda else
        torch.FloatTensor`, with `cuda` a module-level flag assigned from a check): the
        device that follows it (`torch.device("cuda" if cuda else "cpu")`), and the last
        top-level statement assigning the flag, after which that device exists."""
        if self._placement is None:
            self._placement = (self._find_placement_flag(),)
        return self._placement[0]

    def _find_placement_flag(self) -> tuple[str, cst.CSTNode] | None:
        ctx = self.ctx
        if ctx.config.is_enabled("DEV501"):
            return None  # DEV501 modernises the flag in the same run: the accelerator binding is right
        for node in ctx.tree.nodes:
            kind = type(node)
            if kind is not cst.If and kind is not cst.IfExp:
                continue
            test, negated = node.test, False
            if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
                test, negated = test.expression, True
            implied = ctx.guards.flag(test.value) if type(test) is cst.Name else None
            if implied is None:
                found = self._user_flag(node)
                if found is not None:
                    return found
                continue
            if not self._places_on_cuda(node):
                continue
            when_cuda = implied.when_false if negated else implied.when_true
            when_not = implied.when_true if negated else implied.when_false
            # (`cuda = True` says nothing when false, which it never is: EVERYTHING, vacuously)
            if "cuda" in when_cuda and when_cuda != EVERYTHING:
                choice = f'"cuda" if {test.value} else "cpu"'
            elif "cuda" in when_not and when_not != EVERYTHING:
                choice = f'"cpu" if {test.value} else "cuda"'
            else:
                continue
            after = self._last_module_binding(test.value)
            if after is not None:
                return f"torch.device({choice})", after
        return None

    def _portable_binding(self) -> bool:
        """Is the module-level binding the portable expression a fix writes (not a device
        the user chose, which may follow the flag)?"""
        statement = self._last_module_binding(self._module_name or "")
        if statement is None:
            return False
        value = statement.body[0].value if type(statement.body[0]) is cst.Assign else None
        code = self.ctx.module.code_for_node(value) if value is not None else ""
        return "accelerator.current_accelerator()" in code and "accelerator.is_available()" in code

    def _unfollowed_flags(self) -> bool:
        """Does the file place values under a CUDA flag of its own (`if args.cuda:
        model.cuda()`) that `placement_flag` cannot follow? Not where DEV501 modernises
        the flags in the same run."""
        if self._unfollowed is None:
            self._unfollowed = self._find_unfollowed_flags()
        return self._unfollowed

    def _find_unfollowed_flags(self) -> bool:
        ctx = self.ctx
        if ctx.config.is_enabled("DEV501") or self.placement_flag() is not None or not ctx.moving_flags():
            return False
        for node in ctx.tree.nodes:
            if type(node) is not cst.If and type(node) is not cst.IfExp:
                continue
            for conjunct in conjuncts(node.test):
                branch = cuda_flag_branch(conjunct, ctx.moving_flags())
                if branch is None:
                    continue
                name = conjunct
                while type(name) is cst.UnaryOperation:
                    name = name.expression
                if type(name) is cst.Name and ctx.literal_flag(name.value) is not None:
                    continue  # `cuda = True`: every arm it decides runs
                arm = node.body if branch == "body" else node.orelse
                if arm is not None and _moves(ctx.tree.walk(arm)):
                    return True  # (`.cuda()`, or the `.to(device)` an earlier fix made of it)
        return False

    def _user_flag(self, decision: cst.If | cst.IfExp) -> tuple[str, cst.CSTNode] | None:
        """A user's CUDA flag that places values (`if opt.cuda: model.cuda()`, `if
        opt.device == 0:`), read from names the module body binds: the device that follows
        it (`torch.device("cuda" if opt.cuda else "cpu")`), after the last top-level
        statement binding what the test reads."""
        test = decision.test
        parts = conjuncts(test)
        flagged = [cuda_flag_branch(c, self.ctx.moving_flags()) for c in parts]
        branch = flagged[0] if len(parts) == 1 else "body" if "body" in flagged else None
        if branch is None or not self._places_on_cuda(decision if branch == "body" else None):
            return None
        nodes = self.ctx.tree.walk(decision.test)
        attrs = {id(n.attr) for n in nodes if type(n) is cst.Attribute}  # the `cuda` of `opt.cuda`
        read = [dotted_name(n) for n in nodes if type(n) in (cst.Name, cst.Attribute) and id(n) not in attrs]
        imported = self.ctx.imports.aliases
        read = [name for name in read if name is not None and name.split(".", 1)[0] not in imported]
        if not read:
            return None
        positions, _ = self._statement_index()
        after = None
        for name in read:
            statement = self._last_module_binding(name)
            if statement is None and "." not in name:
                return None  # a local flag (`args` parsed in `main()`): no module-level device follows it
            if statement is not None and (after is None or positions[id(statement)] > positions[id(after)]):
                after = statement
        if after is None:
            return None
        module_torch = self._module_torch()
        torch = module_torch[0] if module_torch is not None else "torch"
        code = self.ctx.module.code_for_node(test)
        if branch == "orelse":
            code = f"not {code}" if dotted_name(test) is not None else f"not ({code})"
        if not any("cuda" in self.ctx.guards.implication(c).when_true for c in parts):
            # the flag alone says nothing of the machine: CUDA where it is set and present
            code = f"{code} and {torch}.cuda.is_available()"
        return f'{torch}.device("cuda" if {code} else "cpu")', after

    def _last_module_binding(self, name: str) -> cst.CSTNode | None:
        """The last top-level statement that assigns `name` (`opt`, or `opt.device`)."""
        found = None
        for stmt in self.ctx.module.body:
            if type(stmt) is not cst.SimpleStatementLine:
                continue
            for small in stmt.body:
                targets = [t.target for t in small.targets] if type(small) is cst.Assign else []
                if any(dotted_name(target) == name for target in targets):
                    found = stmt
        return found

    def _selects_cuda(self) -> bool:
        """Does the file choose its device with a CUDA check the fixes keep
        (`torch.device("cuda" if torch.cuda.is_available() else "cpu")`, in a function
        too)? Then a device the fixes add is chosen the same way: with one beside it from
        `torch.accelerator`, a Mac would put the model on MPS and the batches on the CPU.
        With DEV502 selected, those choices become the accelerator's in the same run."""
        if self._cuda_selection is None:
            self._cuda_selection = not self.ctx.config.is_enabled("DEV502") and any(
                type(node) is cst.IfExp and self._cuda_or_cpu(node) for node in self.ctx.tree.nodes
            )
        return self._cuda_selection

    def _cuda_or_cpu(self, choice: cst.IfExp) -> bool:
        """`"cuda" if <a CUDA check> else "cpu"`."""
        literals = (string_value(choice.body), string_value(choice.orelse))
        if literals not in (("cuda", "cpu"), ("cuda:0", "cpu")):
            return False
        if self.ctx.qualify(choice.test) == "torch.cuda.is_available":
            return True  # named without its call: DEV101's fix adds the call, and it is one
        implied = self.ctx.guards.implication(choice.test)
        return "cuda" in implied.when_true and not implied.when_false

    def _places_on_cuda(self, decision: cst.If | cst.IfExp | None) -> bool:
        """Does this branch keep a `.cuda()` call or a `torch.cuda.*Tensor` type?"""
        if decision is None:
            return False
        for node in self.ctx.tree.walk(decision.body):
            if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "cuda":
                return True
            if (
                type(node) is cst.Attribute
                and (self.ctx.qualify(node) or "").startswith("torch.cuda.")
                and (self.ctx.qualify(node) or "").endswith("Tensor")
            ):
                return True
        return False

    def _find_module_binding(self) -> tuple[str, str]:
        """(name, "exists" | "create"): reuse a module-level device (the binding's name, or
        any other name that surely holds an accelerator device, such as `DEVICE`), or pick
        a free name."""
        taken = self._module_names()
        candidates = [self.name, f"{self.name}_", *(f"{self.name}_{i}" for i in range(2, 100))]
        for candidate in candidates:
            kind = taken.get(candidate)
            if kind is not None and kind != "other":
                self._module_kind = kind
                return candidate, "exists"
            if kind is None and candidate not in self.ctx.imports.aliases:
                other = self._accelerator_binding(taken)
                if other is not None:
                    return other, "exists"
                return candidate, "create"
        raise RuntimeError("no free name for the device binding")

    def _accelerator_binding(self, taken: dict[str, str]) -> str | None:
        """A module-level name other than the binding's own whose every assignment is a
        torch.device chosen for the accelerator at run time (`DEVICE = torch.device("cuda"
        if ... else "cpu")`): a second notion of the device must not be added beside it."""
        values: dict[str, list[cst.BaseExpression]] = {}
        for node in self.ctx.tree.walk_scope(self.ctx.module):
            if type(node) is cst.Assign:
                for target in node.targets:
                    if type(target.target) is cst.Name:
                        values.setdefault(target.target.value, []).append(node.value)
        for name, assigned in values.items():
            if taken.get(name) == "device" and all(self._names_accelerator(v) for v in assigned):
                self._module_kind = "device"
                return name
        return None

    def _names_accelerator(self, value: cst.BaseExpression) -> bool:
        """`torch.device("cuda" if torch.cuda.is_available() else "cpu")` or the portable
        expression: a device chosen at run time, the accelerator where there is one. A
        hardcoded `torch.device("cuda")` is no binding to reuse: DEV101 rewrites it."""
        if type(value) is cst.IfExp:
            return self._names_accelerator(value.body) or self._names_accelerator(value.orelse)
        if type(value) is not cst.Call:
            return False
        qualified = self.ctx.qualify(value.func)
        if qualified == "torch.accelerator.current_accelerator":
            return True
        if qualified != "torch.device" or not value.args or type(value.args[0].value) is not cst.IfExp:
            return False
        choice = value.args[0].value
        literals = [string_value(choice.body), string_value(choice.orelse)]
        return any(v is not None and v in device_tables.PORTABLE_LITERALS for v in literals) and "cpu" in literals

    def _defined_before_current(self, name: str) -> bool:
        first = self._first_definition.get(name)
        if first is None:
            first = len(self.ctx.module.body)
            for index, stmt in enumerate(self.ctx.module.body):
                if any(
                    type(node) is cst.AssignTarget and type(node.target) is cst.Name and node.target.value == name
                    for node in self.ctx.tree.walk_scope(stmt)
                ):
                    first = index
                    break
            self._first_definition[name] = first
        return first < self._current_index()

    def _module_names(self) -> dict[str, str]:
        """Module-level names and what each holds: "device", "type", "any" or "other"."""
        values: dict[str, list[str]] = {}
        for node in self.ctx.tree.walk_scope(self.ctx.module):
            if type(node) in (cst.FunctionDef, cst.ClassDef):
                values.setdefault(node.name.value, []).append("other")
            elif type(node) is cst.Assign:
                for target in node.targets:
                    if type(target.target) is cst.Name:
                        values.setdefault(target.target.value, []).append(self.value_kind(node.value))
            elif type(node) is cst.AnnAssign and type(node.target) is cst.Name:
                kind = self.value_kind(node.value) if node.value is not None else "other"
                values.setdefault(node.target.value, []).append(kind)
            elif type(node) in (cst.For, cst.AugAssign) and type(node.target) is cst.Name:
                values.setdefault(node.target.value, []).append("other")
        return {name: _joined_kind(kinds) for name, kinds in values.items()}

    # -- where module-level lines go -------------------------------------------------

    def _statement_index(self) -> tuple[dict[int, int], list[int]]:
        """(position of each top-level statement, positions of imports and the docstring),
        computed once: a file can have tens of thousands of top-level statements."""
        if self._layout is None:
            body = self.ctx.module.body
            positions = {id(stmt): i for i, stmt in enumerate(body)}
            anchors = [i for i, stmt in enumerate(body) if _is_import_statement(stmt) or _is_docstring(stmt, body)]
            self._layout = (positions, anchors)
        return self._layout

    def _current_index(self) -> int:
        """The position of the top-level statement the code will stand in."""
        positions, _ = self._statement_index()
        top = self.ctx.top_level_statement() if self._at is None else self._top_of(self._at)
        return positions.get(id(top), len(self.ctx.module.body)) if top is not None else len(self.ctx.module.body)

    def _top_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The top-level statement holding `node`."""
        tree = self.ctx.tree
        position = tree._position(node)
        if position is None:
            return self.ctx.top_level_statement()
        for stmt in self.ctx.module.body:
            start = tree._position(stmt)
            if start is not None and start <= position < tree.ends[start]:
                return stmt
        return None

    def _prelude_anchor(self) -> cst.CSTNode | None:
        """The last top-level import before the statement being fixed (None: file top)."""
        _, anchors = self._statement_index()
        before = bisect.bisect_left(anchors, self._current_index())
        return self.ctx.module.body[anchors[before - 1]] if before else None

    def _next_is_close(self, anchor: cst.CSTNode | None) -> bool:
        """Does code follow `anchor` (None: the file's top) without a blank line between?"""
        body = self.ctx.module.body
        positions, _ = self._statement_index()
        index = positions[id(anchor)] + 1 if anchor is not None else 0
        if index >= len(body):
            return False
        following = body[index]
        return anchor is None or not any(line.comment is None for line in following.leading_lines)

    def _newline(self) -> str:
        return self.ctx.module.default_newline


_DEVICE_CALLS = frozenset({"torch.device", "torch.accelerator.current_accelerator"})


def _is_none(node: cst.BaseExpression | None) -> bool:
    return type(node) is cst.Name and node.value == "None"


def _joined_kind(kinds) -> str:
    """One kind for a name assigned several values: "device" and "type" when all agree,
    "other" when any value is surely no device, else "any"."""
    kinds = set(kinds)
    if not kinds or "other" in kinds:
        return "other"
    if len(kinds) == 1 and kinds <= {"device", "type"}:
        return kinds.pop()
    return "any"


def _moves(nodes) -> bool:
    """Is any of `nodes` a `.cuda()` or `.to(...)` call?"""
    return any(
        type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value in ("cuda", "to") for n in nodes
    )


def _torch_name(alias: cst.ImportAlias) -> str | None:
    """The name `import torch`, `import torch as th` or `import torch.nn` binds to torch."""
    full = dotted_name(alias.name)
    if full is None:
        return None
    if alias.asname is not None:
        return alias.asname.name.value if full == "torch" and type(alias.asname.name) is cst.Name else None
    return "torch" if full.split(".", 1)[0] == "torch" else None


def _torch_imported_by(stmt: cst.CSTNode) -> str | None:
    """The name a top-level import statement binds to torch, if any."""
    if not _is_import_statement(stmt):
        return None
    for node in statements(stmt):
        if type(node) is cst.Import:
            name = next((n for n in map(_torch_name, node.names) if n is not None), None)
            if name is not None:
                return name
    return None


def _is_import_statement(stmt: cst.CSTNode) -> bool:
    if type(stmt) is cst.SimpleStatementLine:
        return all(type(s) in (cst.Import, cst.ImportFrom) for s in stmt.body)
    if type(stmt) in (cst.Try, cst.If):
        # `try: import x / except ImportError:` and version-guarded imports
        first = stmt.body.body
        return bool(first) and all(_is_import_statement(s) for s in first)
    return False


def _is_docstring(stmt: cst.CSTNode, body: tuple) -> bool:
    return (
        stmt is body[0]
        and type(stmt) is cst.SimpleStatementLine
        and type(stmt.body[0]) is cst.Expr
        and type(stmt.body[0].value) in (cst.SimpleString, cst.ConcatenatedString)
    )
