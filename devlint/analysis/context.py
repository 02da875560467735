"""Where a node stands: the state a rule may ask about while the engine walks a file.

The engine walks the tree once, in source order, and keeps here the ancestors of the
current node, the enclosing functions and classes, and what guards them. Rules ask; they
never walk the tree themselves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import libcst as cst

from devlint.analysis.guards import (
    NONE,
    Backends,
    GuardOracle,
    cuda_flag_branch,
    exits_block,
    flag_assignments,
    moving_flags,
    named_for_cuda,
    present,
)
from devlint.analysis.names import ImportTable, local_bindings
from devlint.analysis.tree import Tree, assignment_targets, bound_names, dotted_name

if TYPE_CHECKING:
    from devlint.config import Config

_SKIP_DECORATORS = {"skipIf": False, "skipif": False, "skipUnless": True}
# the node types `enter` keeps books on (any other node it only puts on the path), and
# those `leave` does (any other it only takes off)
BOOKKEEPING = frozenset(
    {cst.Module, cst.IndentedBlock, cst.FunctionDef, cst.ClassDef, cst.Lambda,
     cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.For}
)  # fmt: skip
SCOPES = frozenset({cst.FunctionDef, cst.Lambda})


@dataclass
class FileContext:
    module: cst.Module
    path: str
    config: Config
    tree: Tree = field(init=False)
    imports: ImportTable = field(init=False)
    guards: GuardOracle = field(init=False)
    ancestors: list[cst.CSTNode] = field(default_factory=list, init=False)
    # the device analysis (devlint.analysis.devices), created by the first rule that asks
    device_analysis: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.tree = Tree(self.module)
        self.imports = ImportTable(self.module)
        self.guards = GuardOracle(self.qualify, lambda: flag_assignments(self.tree.nodes))
        self._guarded: dict[int, Backends] = {}  # statements and definitions a guard holds
        self._bindings: dict[int, frozenset[str]] = {}
        self._assigned: set[tuple[int, str]] = set()
        self._torch_names = frozenset(self.imports.aliases)
        self._functions: list[cst.FunctionDef | cst.Lambda] = []
        self._qualified: dict[int, tuple[cst.CSTNode, str | None]] = {}
        self._answers_for: cst.CSTNode | None = None
        self._answers: dict[str, Any] = {}
        self._top_classes: dict[str, cst.ClassDef] | None = None
        self._moving_flags: frozenset[str] | None = None
        self._literal_flags: dict[str, bool] | None = None  # see `literal_flag`

    # -- names -----------------------------------------------------------------------

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The qualified name of `node` (`torch.cuda.amp.autocast`), honouring shadowing."""
        node_type = type(node)
        if node_type is not cst.Name and node_type is not cst.Attribute:
            return None
        entry = self._qualified.get(id(node))
        if entry is not None and entry[0] is node:
            return entry[1]
        result = self._qualify(node)
        self._qualified[id(node)] = (node, result)  # holding the node keeps its id unique
        return result

    def _qualify(self, node: cst.BaseExpression) -> str | None:
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head = dotted.split(".", 1)[0]
        if head not in self._torch_names:
            return None
        shadowed = frozenset({head}) if self.is_local(head) else frozenset()
        return self.imports.qualify(node, shadowed)

    def answer(self, node: cst.CSTNode, question: str, compute: Callable[[], Any]) -> Any:
        """`compute()`, asked once per node: several rules ask the same question of the
        node the walk stands on."""
        if self._answers_for is not node:
            self._answers_for = node
            self._answers = {}
        answers = self._answers
        if question not in answers:
            answers[question] = compute()
        return answers[question]

    @property
    def top_classes(self) -> dict[str, cst.ClassDef]:
        """The classes defined at module level, by name (the first of a name)."""
        classes = self._top_classes
        if classes is None:
            classes = self._top_classes = {}
            for stmt in self.module.body:
                if type(stmt) is cst.ClassDef:
                    classes.setdefault(stmt.name.value, stmt)
        return classes

    def literal_flag(self, name: str) -> bool | None:
        """`cuda = True` at module level, the file's one binding of `name`: what every `if
        cuda:` of the file sees. None for any other name."""
        if self._literal_flags is None:
            bindings: Counter[str] = Counter()
            for node in self.tree.nodes:
                for target in assignment_targets(node):
                    bindings.update(bound_names(target))
                if type(node) in (cst.Import, cst.ImportFrom, cst.Global) and type(node.names) is not cst.ImportStar:
                    bindings.update(
                        dotted_name(alias.asname.name if getattr(alias, "asname", None) else alias.name) or ""
                        for alias in node.names
                    )
            flags: dict[str, bool] = {}
            for line in self.module.body:
                if type(line) is not cst.SimpleStatementLine:
                    continue
                for small in line.body:
                    if (
                        type(small) is cst.Assign
                        and len(small.targets) == 1
                        and type(small.targets[0].target) is cst.Name
                    ):
                        bound, value = small.targets[0].target.value, small.value
                        # (`use_cuda = False`: the arm a user gets by flipping it is still read)
                        if bindings[bound] == 1 and type(value) is cst.Name and value.value == "True":
                            flags[bound] = True
            self._literal_flags = flags
        return self._literal_flags.get(name)

    def is_local(self, name: str) -> bool:
        """Is `name` bound (by other than an import) in one of the enclosing functions?"""
        return any(name in self.bindings_of(f) for f in self.functions())

    def bindings_of(self, function: cst.FunctionDef | cst.Lambda) -> frozenset[str]:
        key = id(function)
        names = self._bindings.get(key)
        if names is None:
            names = self._bindings[key] = local_bindings(function)
        return names

    def assigned_before(self, function: cst.CSTNode, name: str) -> bool:
        """Has the walk already passed an assignment of `name` inside `function`?"""
        return (id(function), name) in self._assigned

    # -- where we are ----------------------------------------------------------------

    @property
    def node(self) -> cst.CSTNode:
        return self.ancestors[-1]

    def parent(self, node: cst.CSTNode | None = None) -> cst.CSTNode | None:
        index = self._index(node)
        return self.ancestors[index - 1] if index > 0 else None

    def _index(self, node: cst.CSTNode | None) -> int:
        if node is None:
            return len(self.ancestors) - 1
        for index in range(len(self.ancestors) - 1, -1, -1):
            if self.ancestors[index] is node:
                return index
        raise ValueError("node is not on the current path")

    def indentation(self) -> str:
        """The indentation of the statement where the walk stands: every enclosing block's."""
        default = self.module.default_indent
        return "".join(
            (n.indent if n.indent is not None else default) for n in self.ancestors if type(n) is cst.IndentedBlock
        )

    def functions(self) -> list[cst.FunctionDef | cst.Lambda]:
        """Enclosing functions, innermost first."""
        return self._functions[::-1]

    def innermost_function(self) -> cst.FunctionDef | cst.Lambda | None:
        return self._functions[-1] if self._functions else None

    def enclosing_class(self) -> cst.ClassDef | None:
        """The innermost class around the current node."""
        for node in reversed(self.ancestors):
            if type(node) is cst.ClassDef:
                return node
        return None

    def top_level_statement(self) -> cst.CSTNode | None:
        return self.ancestors[1] if len(self.ancestors) > 1 else None

    def guarded_backends(self, node: cst.CSTNode | None = None) -> Backends:
        """The backends surely present wherever `node` (default: the current node) runs:
        what the branches, early exits and decorators around it imply."""
        end = self._index(node)
        oracle = self.guards
        found: Backends = NONE
        for index in range(end, 0, -1):
            child, parent = self.ancestors[index], self.ancestors[index - 1]
            held = self._guarded.get(id(child))
            if held:
                found |= held
            parent_type = type(parent)
            if parent_type is cst.If or parent_type is cst.IfExp:
                if child is parent.body:
                    found |= oracle.when_true(parent.test)
                elif child is parent.orelse:
                    found |= oracle.when_false(parent.test)
            elif parent_type is cst.BooleanOperation and child is parent.right:
                if type(parent.operator) is cst.And:
                    found |= oracle.when_true(parent.left)
                else:
                    found |= oracle.when_false(parent.left)
            elif parent_type is cst.While and child is parent.body:
                found |= oracle.when_true(parent.test)
        return found

    def moving_flags(self) -> frozenset[str]:
        """The user's CUDA flags the file moves values under (`guards.moving_flags`)."""
        if self._moving_flags is None:
            self._moving_flags = moving_flags(self.tree.nodes)
        return self._moving_flags

    def runs_without_accelerator(self, node: cst.CSTNode | None = None) -> bool:
        """Is `node` (default: the current node) in the branch an availability check
        leaves for machines without the accelerator: the body of `if not use_cuda:`, the
        `else` of `if torch.cuda.is_available():`? Tensors the code places under the same
        check are on the CPU there."""
        oracle = self.guards
        for index in range(self._index(node), 0, -1):
            child, parent = self.ancestors[index], self.ancestors[index - 1]
            if type(parent) is cst.If or type(parent) is cst.IfExp:
                implied = oracle.implication(parent.test)
                if child is parent.body and implied.when_false and not implied.when_true:
                    return True
                if child is parent.orelse and implied.when_true and not implied.when_false:
                    return True
                # the side a user's CUDA flag leaves (`if not use_gpu: return x.numpy()`)
                flagged = None if implied.says_anything else cuda_flag_branch(parent.test, self.moving_flags())
                if (child is parent.body and flagged == "orelse") or (child is parent.orelse and flagged == "body"):
                    return True
        return False

    def under_cuda_flag(self) -> bool:
        """Is the current node in the arm a CUDA flag or check puts on the accelerator (the
        body of `if args.cuda:`, of `if torch.cuda.is_available():`, the `else` of `if
        args.no_cuda:`)?"""
        oracle = self.guards
        for index in range(len(self.ancestors) - 1, 0, -1):
            child, parent = self.ancestors[index], self.ancestors[index - 1]
            if type(parent) is cst.If or type(parent) is cst.IfExp:
                implied = oracle.implication(parent.test)
                flagged = cuda_flag_branch(parent.test, self.moving_flags())
                if child is parent.body and ("cuda" in implied.when_true or flagged == "body"):
                    return True
                if child is parent.orelse and ("cuda" in implied.when_false or flagged == "orelse"):
                    return True
        return False

    def guards_backend(self, backend: str, node: cst.CSTNode | None = None) -> bool:
        """Does `node` only run where `backend` (`"cuda"`, `"mps"`, ...) is present?"""
        return backend in self.guarded_backends(node)

    # -- bookkeeping, called by the engine's walk ------------------------------------

    def close(self) -> None:
        """The walk is over: drop the references back to this context (the device
        analysis and the guard oracle hold it), so that the file's tree is freed as soon
        as it is no longer used, not by a pass of the cycle collector over all of it."""
        self.device_analysis = None
        self.guards = GuardOracle(_no_names)
        self._answers_for = None
        self._answers = {}

    def enter(self, node: cst.CSTNode) -> None:
        self.ancestors.append(node)
        node_type = type(node)
        if node_type not in BOOKKEEPING:
            return
        if node_type is cst.Module or node_type is cst.IndentedBlock:
            self._scan_block(node.body)
        elif node_type is cst.FunctionDef or node_type is cst.ClassDef:
            if node_type is cst.FunctionDef:
                self._functions.append(node)
            held = NONE
            for decorator in node.decorators:
                held |= self._decorator_guards(decorator.decorator)
            if held:
                self._guarded[id(node)] = held
        elif node_type is cst.Lambda:
            self._functions.append(node)
        elif self._functions:  # an assignment target
            for name in bound_names(node.target):
                self._assigned.add((id(self._functions[-1]), name))

    def leave(self) -> None:
        node = self.ancestors.pop()
        if self._functions and node is self._functions[-1]:
            self._functions.pop()

    def _scan_block(self, body: tuple[cst.BaseStatement, ...]) -> None:
        """`assert C` and `if not C: return` guard the rest of the block with C."""
        oracle = self.guards
        held: Backends = NONE
        for stmt in body:
            if held:
                self._guarded[id(stmt)] = held | self._guarded.get(id(stmt), NONE)
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Assert:
                        held |= oracle.when_true(small.test)
            elif type(stmt) is cst.If and stmt.orelse is None:
                if stmt.body.body and exits_block(stmt.body.body[-1]):
                    held |= oracle.when_false(stmt.test)

    def _decorator_guards(self, decorator: cst.BaseExpression) -> Backends:
        func = decorator.func if type(decorator) is cst.Call else decorator
        name = dotted_name(func) or ""
        last = name.rsplit(".", 1)[-1]
        if type(decorator) is cst.Call and last in _SKIP_DECORATORS and decorator.args:
            test = decorator.args[0].value
            return self.guards.when_true(test) if _SKIP_DECORATORS[last] else self.guards.when_false(test)
        return present("cuda") if named_for_cuda(name) else NONE


def _no_names(node: cst.BaseExpression) -> str | None:
    """The guard oracle's name resolution once the walk is over."""
    return None
