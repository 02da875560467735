"""Which local names are torch: an import-alias table, not libcst's scope metadata.

`import torch as th`, `from torch import nn`, `import torch.nn as nn`,
`from torch.cuda.amp import autocast` all land here, wherever in the file they stand
(imports inside `try:` or functions included). A function that binds one of these names
itself (a parameter, an assignment) shadows it inside that function.
"""

from __future__ import annotations

import libcst as cst

from devlint.analysis.tree import assignment_targets, bound_names, dotted_name, statements


class ImportTable:
    """Maps local names to the qualified names they were imported as."""

    def __init__(self, module: cst.Module) -> None:
        self.aliases: dict[str, str] = {}
        self.torch_aliases: list[str] = []  # names bound to the `torch` package itself
        for node in statements(module):
            if type(node) is cst.Import:
                self._add_import(node)
            elif type(node) is cst.ImportFrom:
                self._add_import_from(node)

    def _add_import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                self._bind(alias.asname.name.value, full)
            else:
                head = full.split(".", 1)[0]
                self._bind(head, head)

    def _add_import_from(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or type(node.names) is cst.ImportStar:
            return
        base = dotted_name(node.module)
        if base is None:
            return
        for alias in node.names:
            if type(alias.name) is not cst.Name:
                continue
            local = alias.name.value
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                local = alias.asname.name.value
            self._bind(local, f"{base}.{alias.name.value}")

    def _bind(self, local: str, qualified: str) -> None:
        # The first import of a name wins: `try: import torch` / `except: torch = None`
        # keeps torch as torch.
        self.aliases.setdefault(local, qualified)
        if qualified == "torch" and local not in self.torch_aliases:
            self.torch_aliases.append(local)

    def qualify(self, node: cst.BaseExpression, shadowed: frozenset[str] = frozenset()) -> str | None:
        """`th.cuda.amp.autocast` -> `torch.cuda.amp.autocast`; None if not imported."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in shadowed:
            return None
        qualified = self.aliases.get(head)
        if qualified is None:
            return None
        return f"{qualified}.{rest}" if rest else qualified


def local_bindings(function: cst.FunctionDef | cst.Lambda) -> frozenset[str]:
    """Names a function binds itself (parameters and assignments), not counting imports."""
    names: set[str] = set()
    params = function.params
    for param in (
        *params.posonly_params, *params.params, *params.kwonly_params,
        *(p for p in (params.star_arg, params.star_kwarg) if type(p) is cst.Param),
    ):  # fmt: skip
        names.add(param.name.value)
    if type(function) is cst.Lambda:
        return frozenset(names)
    imported: set[str] = set()
    for node in statements(function.body, enter_definitions=False):
        node_type = type(node)
        for target in assignment_targets(node):
            names.update(bound_names(target))
        if node_type in (cst.Import, cst.ImportFrom):
            imported.update(_import_names(node))
        elif node_type in (cst.FunctionDef, cst.ClassDef):
            names.add(node.name.value)
        elif node_type is cst.ExceptHandler and node.name is not None:
            names.update(bound_names(node.name.name))
    # (an assignment expression `(torch := ...)` inside an expression is not seen: rare)
    return frozenset(names - imported)


def _import_names(node: cst.Import | cst.ImportFrom) -> set[str]:
    if type(node.names) is cst.ImportStar:
        return set()
    names = set()
    for alias in node.names:
        if alias.asname is not None and type(alias.asname.name) is cst.Name:
            names.add(alias.asname.name.value)
        else:
            dotted = dotted_name(alias.name)
            if dotted:
                names.add(dotted.split(".", 1)[0])
    return names
