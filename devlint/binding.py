"""The device binding (SPEC §3): the one expression every fix uses to name "the device".

In order of preference: a parameter or local of the enclosing functions named like the
binding (`device` unless configured), then the module-level binding, which is created
after the last top-level import when absent (with `import torch` when the file has no
name for torch). An existing module-level `device = ...` is reused; if the name holds
something that is not a device, a free name is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from devlint.analysis.tree import string_value, walk_scope
from devlint.rules.base import InsertLines, NodeEdit

if TYPE_CHECKING:
    from devlint.analysis.context import FileContext


@dataclass(frozen=True)
class DeviceExpr:
    """Code naming the device, plus the edits (prelude lines) it depends on."""

    code: str
    edits: tuple[NodeEdit, ...] = ()

    @property
    def type_code(self) -> str:
        return f"{self.code}.type"


class BindingService:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.name = ctx.config.device_name
        self._module_name: str | None = None
        self._module_state: str | None = None  # "exists" | "create" | None (not computed)
        self._anchor: cst.CSTNode | None = None
        self._anchor_index = -1

    # -- torch -----------------------------------------------------------------------

    def torch(self) -> tuple[str, tuple[NodeEdit, ...]]:
        """A name for the torch package, and the prelude that creates it if missing."""
        aliases = [a for a in self.ctx.imports.torch_aliases if not self.ctx.is_local(a)]
        if aliases:
            return aliases[0], ()
        anchor = self._prelude_anchor()
        newline = self._newline()
        return "torch", (InsertLines(anchor, f"import torch{newline}"),)

    def portable_expression(self) -> tuple[str, tuple[NodeEdit, ...]]:
        """`torch.accelerator.current_accelerator() if ... else torch.device("cpu")`."""
        torch, edits = self.torch()
        config = self.ctx.config
        if config.device_style == "cuda" or config.torch_version < (2, 6):
            code = f'{torch}.device("cuda" if {torch}.cuda.is_available() else "cpu")'
        else:
            code = (
                f"{torch}.accelerator.current_accelerator() "
                f'if {torch}.accelerator.is_available() else {torch}.device("cpu")'
            )
        return code, edits

    # -- the device ------------------------------------------------------------------

    def device(self) -> DeviceExpr | None:
        """The device expression at the current node, or None when none can be used safely."""
        ctx = self.ctx
        for function in ctx.functions():
            if self.name in ctx.bindings_of(function):
                if self._is_parameter(function) or ctx.assigned_before(function, self.name):
                    return DeviceExpr(self.name)
                # assigned later in this function: the module-level name would be unbound
                return None
        return self._module_binding()

    def _is_parameter(self, function: cst.FunctionDef | cst.Lambda) -> bool:
        params = function.params
        every = (*params.posonly_params, *params.params, *params.kwonly_params)
        return any(p.name.value == self.name for p in every)

    def _module_binding(self) -> DeviceExpr | None:
        if self._module_state is None:
            self._module_name, self._module_state = self._find_module_binding()
        assert self._module_name is not None
        if self._module_state == "exists":
            if not self.ctx.functions() and not self._defined_before_current(self._module_name):
                return None  # module-level code running before the binding exists
            return DeviceExpr(self._module_name)
        if any(self._module_name in self.ctx.bindings_of(f) for f in self.ctx.functions()):
            return None
        torch, torch_edits = self.torch()
        portable, _ = self.portable_expression()
        newline = self._newline()
        anchor = self._prelude_anchor()
        if anchor is None and not self.ctx.module.body:
            return None
        prelude = "".join(e.text for e in torch_edits if isinstance(e, InsertLines))
        text = f"{prelude}{newline}{self._module_name} = {portable}{newline}"
        return DeviceExpr(self._module_name, (InsertLines(anchor, text),))

    def _find_module_binding(self) -> tuple[str, str]:
        """(name, "exists" | "create"): reuse a module-level device, or pick a free name."""
        taken = self._module_names()
        candidates = [self.name, f"{self.name}_", *(f"{self.name}_{i}" for i in range(2, 100))]
        for candidate in candidates:
            kind = taken.get(candidate)
            if kind == "device":
                return candidate, "exists"
            if kind is None and candidate not in self.ctx.imports.aliases:
                return candidate, "create"
        raise RuntimeError("no free name for the device binding")

    def _defined_before_current(self, name: str) -> bool:
        top = self.ctx.top_level_statement()
        for stmt in self.ctx.module.body:
            if stmt is top:
                return False
            for node in walk_scope(stmt):
                if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
                    if node.target.value == name:
                        return True
        return False

    def _module_names(self) -> dict[str, str]:
        """Module-level names and whether each may hold a device ("device") or not ("other")."""
        names: dict[str, str] = {}
        for node in walk_scope(self.ctx.module):
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                names[node.name.value] = "other"
            elif isinstance(node, cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        kind = "device" if _may_be_device(node.value) else "other"
                        names.setdefault(target.target.value, kind)
                        if kind == "other":
                            names[target.target.value] = "other"
            elif isinstance(node, cst.AnnAssign) and isinstance(node.target, cst.Name):
                kind = "device" if node.value is not None and _may_be_device(node.value) else "other"
                names[node.target.value] = kind
            elif isinstance(node, (cst.For, cst.AugAssign)) and isinstance(node.target, cst.Name):
                names[node.target.value] = "other"
        return names

    # -- where module-level lines go -------------------------------------------------

    def _prelude_anchor(self) -> cst.CSTNode | None:
        """The last top-level import before the statement being fixed (None: file top)."""
        top = self.ctx.top_level_statement()
        body = self.ctx.module.body
        limit = len(body)
        for index, stmt in enumerate(body):
            if stmt is top:
                limit = index
                break
        anchor = None
        for stmt in body[:limit]:
            if _is_import_statement(stmt) or _is_docstring(stmt, body):
                anchor = stmt
        return anchor

    def _newline(self) -> str:
        return self.ctx.module.default_newline


def _may_be_device(value: cst.BaseExpression) -> bool:
    """Could this module-level value be a device? Literals of other kinds cannot."""
    if isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        literal = string_value(value)
        return literal is not None and literal.split(":")[0] in {"cpu", "cuda", "mps", "xpu", "npu", "hpu", "meta"}
    if isinstance(value, (cst.Integer, cst.Float, cst.List, cst.Dict, cst.Set, cst.Tuple, cst.Lambda)):
        return False
    if isinstance(value, cst.Name) and value.value in {"None", "True", "False"}:
        return False
    return True


def _is_import_statement(stmt: cst.CSTNode) -> bool:
    if isinstance(stmt, cst.SimpleStatementLine):
        return all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)
    if isinstance(stmt, (cst.Try, cst.If)):
        # `try: import x / except ImportError:` and version-guarded imports
        first = stmt.body.body
        return bool(first) and all(_is_import_statement(s) for s in first)
    return False


def _is_docstring(stmt: cst.CSTNode, body: tuple) -> bool:
    return (
        stmt is body[0]
        and isinstance(stmt, cst.SimpleStatementLine)
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )

