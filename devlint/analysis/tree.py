"""Fast traversal of libcst trees.

libcst's own visitor dispatches through `visit_*`/`leave_*` lookups on every node,
whitespace included, and costs about as much as parsing. devlint walks only the fields
that can hold code, which is an order of magnitude cheaper, and only once per file:
`Tree` lists the nodes in source order, and every later walk is a slice of that list.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence

import libcst as cst

_TRIVIA_FIELDS = frozenset(
    {
        "asynchronous", "colon", "comma", "comment", "conversion", "default_indent",
        "default_newline", "dot", "empty_lines", "encoding", "equal", "first_colon",
        "footer", "has_trailing_newline", "header", "indent", "lbrace", "lbracket",
        "leading_lines", "lines_after_decorators", "lpar", "newline", "operator",
        "posonly_ind", "rbrace", "rbracket", "relative", "rpar", "second_colon",
        "semicolon", "star", "trailing_comma", "trailing_whitespace",
    }
)  # fmt: skip

_FIELDS: dict[type, tuple[str, ...]] = {}


def _code_fields(node_type: type) -> tuple[str, ...]:
    names = _FIELDS.get(node_type)
    if names is None:
        names = tuple(
            f.name
            for f in dataclasses.fields(node_type)
            if f.name not in _TRIVIA_FIELDS and not f.name.startswith("whitespace")
        )
        _FIELDS[node_type] = names
    return names


_NODE, _SEQUENCE, _OTHER = 1, 2, 0
_KINDS: dict[type, int] = {}


def _kind(value: object) -> int:
    # isinstance against CSTNode (an ABC) is slow; a type's answer never changes
    value_type = type(value)
    kind = _KINDS.get(value_type)
    if kind is None:
        if isinstance(value, cst.CSTNode):
            kind = _NODE
        elif isinstance(value, (tuple, list)):
            kind = _SEQUENCE
        else:
            kind = _OTHER
        _KINDS[value_type] = kind
    return kind


def child_list(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's direct children that can hold code, in source order (the hot path of
    every walk, hence a list and not a generator)."""
    node_type = type(node)
    extract = _EXTRACTORS.get(node_type) or _extractor(node_type)
    return extract(node)


def _generic_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    kinds = _KINDS
    for name in _FIELDS.get(type(node)) or _code_fields(type(node)):
        value = getattr(node, name)
        kind = kinds.get(type(value)) or _kind(value)
        if kind == _NODE:
            found.append(value)
        elif kind == _SEQUENCE:
            for item in value:
                if (kinds.get(type(item)) or _kind(item)) == _NODE:
                    found.append(item)
    return found


_EXTRACTORS: dict[type, Callable[[cst.CSTNode], list[cst.CSTNode]]] = {}
LEAVES: set[type] = set()  # node types that never have children (filled as extractors are made)


def _extractor(node_type: type) -> Callable[[cst.CSTNode], list[cst.CSTNode]]:
    """A function that lists `node_type`'s children, written for that type.

    Looping over field names costs more than the children themselves on the commonest
    nodes (`Name`, `Attribute`, `Call`, `Arg`). Fields typed as a node or a sequence of
    nodes go straight into one list display (`[node.func, *node.args]`); optional and
    union fields are checked at run time, as `_generic_children` does.
    """
    try:
        hints = typing.get_type_hints(node_type)
    except Exception:  # an annotation that does not resolve: take the generic route
        _EXTRACTORS[node_type] = _generic_children
        return _generic_children
    lines = ["def extract(node):", "    found = []"]
    direct: list[str] = []

    def flush() -> None:
        if direct:
            lines.append(f"    found += [{', '.join(direct)}]")
            direct.clear()

    for name in _code_fields(node_type):
        hint = hints.get(name)
        if typing.get_origin(hint) is collections.abc.Sequence:
            direct.append(f"*node.{name}")
        elif isinstance(hint, type) and issubclass(hint, cst.CSTNode):
            direct.append(f"node.{name}")
        elif hint is str:
            continue
        else:
            flush()
            lines += [
                f"    value = node.{name}",
                "    kind = kinds.get(type(value)) or kind_of(value)",
                "    if kind == 1:",
                "        found.append(value)",
                "    elif kind == 2:",
                "        found += [item for item in value if (kinds.get(type(item)) or kind_of(item)) == 1]",
            ]
    flush()
    if len(lines) == 2:  # no field can hold code (`Name`, `Integer`, `SimpleString`)
        LEAVES.add(node_type)
    lines.append("    return found")
    namespace: dict = {"kinds": _KINDS, "kind_of": _kind}
    exec("\n".join(lines), namespace)  # noqa: S102 - code built from the dataclass fields above
    _EXTRACTORS[node_type] = namespace["extract"]
    return namespace["extract"]


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The node's direct children that can hold code, in source order."""
    return iter(child_list(node))


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every code-bearing node under `node` (itself included), in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        found = child_list(current)
        found.reverse()
        stack.extend(found)


_SCOPE_NODES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_SCOPE_TYPES = frozenset(_SCOPE_NODES)


class Tree:
    """Every code-bearing node of one module in source order, from a single traversal.

    The subtree of `nodes[i]` is `nodes[i:ends[i]]`, so walking any part of the file
    again (the engine's dispatch, the analysis' scans) is a slice, not a traversal. A
    node built after parsing (not in the module) is walked the ordinary way.
    """

    __slots__ = ("nodes", "ends", "_positions")

    def __init__(self, root: cst.CSTNode) -> None:
        nodes: list[cst.CSTNode] = []
        ends: list[int] = []
        stack: list = [root]
        leaves = LEAVES
        while stack:
            item = stack.pop()
            item_type = item.__class__
            if item_type is int:  # the subtree opened at `item` is complete
                ends[item] = len(nodes)
                continue
            index = len(nodes)
            nodes.append(item)
            ends.append(index + 1)
            if item_type in leaves:
                continue
            found = child_list(item)
            if found:
                stack.append(index)
                found.reverse()
                stack.extend(found)
        self.nodes = nodes
        self.ends = ends
        self._positions: dict[int, int] | None = None

    def _position(self, node: cst.CSTNode) -> int | None:
        positions = self._positions
        if positions is None:
            # the tree holds every node it lists, so their ids stay unique
            positions = self._positions = dict(zip(map(id, self.nodes), range(len(self.nodes))))
        return positions.get(id(node))

    def span(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """`(start, end)`: the subtree of `node` is `nodes[start:end]`; None for a node
        not in the tree."""
        index = self._position(node)
        return None if index is None else (index, self.ends[index])

    def walk(self, node: cst.CSTNode) -> Sequence[cst.CSTNode]:
        """Every code-bearing node under `node` (itself included), in source order."""
        index = self._position(node)
        if index is None:
            return list(walk(node))
        return self.nodes[index : self.ends[index]]

    def functions(self, root: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, tuple[cst.CSTNode, ...]]]:
        """Every function and lambda under `root`, with the functions around it (innermost
        first)."""
        index = self._position(root)
        tree = self if index is not None else Tree(root)
        nodes, ends = tree.nodes, tree.ends
        index = index if index is not None else 0
        around: list[tuple[int, cst.CSTNode]] = []  # (end, function) on the current path
        for position in range(index + 1, ends[index]):
            while around and around[-1][0] <= position:
                around.pop()
            node = nodes[position]
            if node.__class__ is cst.FunctionDef or node.__class__ is cst.Lambda:
                yield node, tuple(function for _, function in reversed(around))
                around.append((ends[position], node))

    def walk_scope(self, node: cst.CSTNode) -> Sequence[cst.CSTNode]:
        """Like `walk`, without `node` itself and without entering nested functions,
        classes and lambdas."""
        index = self._position(node)
        if index is None:
            return list(walk_scope(node))
        nodes, ends, scopes = self.nodes, self.ends, _SCOPE_TYPES
        found = []
        position, stop = index + 1, ends[index]
        while position < stop:
            current = nodes[position]
            found.append(current)
            position = ends[position] if current.__class__ in scopes else position + 1
        return found


def walk_scope(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Like `walk`, but does not enter nested functions, classes and lambdas."""
    stack = child_list(node)
    stack.reverse()
    while stack:
        current = stack.pop()
        yield current
        if type(current) not in _SCOPE_TYPES:
            found = child_list(current)
            found.reverse()
            stack.extend(found)


_BLOCK_FIELDS = ("body", "orelse", "handlers", "finalbody", "cases")
_DEFINITIONS = frozenset({cst.FunctionDef, cst.ClassDef})
_BLOCKS: dict[type, tuple[str, ...]] = {}


def _block_fields(node_type: type) -> tuple[str, ...]:
    """The fields of a node type that hold statements (not a lambda's expression body)."""
    names = _BLOCKS.get(node_type)
    if names is None:
        fields = {f.name: f.type for f in dataclasses.fields(node_type)} if dataclasses.is_dataclass(node_type) else {}
        names = _BLOCKS[node_type] = tuple(
            name for name in _BLOCK_FIELDS if name in fields and not issubclass(node_type, cst.BaseExpression)
        )
    return names


def statements(node: cst.CSTNode, *, enter_definitions: bool = True) -> Iterator[cst.CSTNode]:
    """Statements (compound, and the small ones of each line) under `node`, in source
    order, without visiting a single expression: far cheaper than `walk` when only
    statements matter (imports, assignments)."""
    stack = [node]
    kinds = _KINDS
    while stack:
        current = stack.pop()
        current_type = type(current)
        if current is not node:
            yield current
            if not enter_definitions and current_type in _DEFINITIONS:
                continue
        found: list = []
        for name in _BLOCKS.get(current_type) or _block_fields(current_type):
            value = getattr(current, name)
            kind = kinds.get(type(value)) or _kind(value)
            if kind == _SEQUENCE:
                found.extend(value)
            elif kind == _NODE:
                found.append(value)
        if found:
            found.reverse()
            stack.extend(found)


_EXPRESSIONS: dict[type, bool] = {}


def is_expression(node: cst.CSTNode) -> bool:
    """`isinstance(node, cst.BaseExpression)`, without an ABC check on every call."""
    node_type = type(node)
    answer = _EXPRESSIONS.get(node_type)
    if answer is None:
        answer = _EXPRESSIONS[node_type] = isinstance(node, cst.BaseExpression)
    return answer


def code_of_name(node: cst.BaseExpression, module: cst.Module) -> str:
    """The code of `node`, as `module.code_for_node` writes it; a plain `a.b.c` (no
    parentheses, no spaces) is spelled without generating code."""
    current = node
    while type(current) is cst.Attribute:
        dot = current.dot
        if current.lpar or not (_is_empty(dot.whitespace_before) and _is_empty(dot.whitespace_after)):
            return module.code_for_node(node)
        current = current.value
    if type(current) is not cst.Name or current.lpar:
        return module.code_for_node(node)
    return dotted_name(node)  # type: ignore[return-value]


def _is_empty(whitespace: object) -> bool:
    return type(whitespace) is cst.SimpleWhitespace and whitespace.value == ""


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a chain of names and attributes, else None."""
    parts = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


_STRING_VALUES: dict[str, str | None] = {}


def string_value(node: cst.CSTNode) -> str | None:
    """The value of a plain string literal (no f-strings, no implicit concatenation)."""
    if type(node) is not cst.SimpleString:
        return None
    raw = node.value
    if len(raw) > 64:  # docstrings and messages: not device names, and not worth caching
        return _evaluate(node)
    if raw not in _STRING_VALUES:
        if len(_STRING_VALUES) > 100_000:
            _STRING_VALUES.clear()
        _STRING_VALUES[raw] = _evaluate(node)
    return _STRING_VALUES[raw]


def _evaluate(node: cst.SimpleString) -> str | None:
    raw = node.value
    if raw[0] in "'\"" and "\\" not in raw and "\r" not in raw:
        # no prefix, no escape, no line break to normalise: the text between the quotes
        quotes = 3 if len(raw) >= 6 and raw[:3] == raw[0] * 3 else 1
        return raw[quotes:-quotes]
    try:
        value = node.evaluated_value  # ast.literal_eval: slow, hence the cache above
    except Exception:  # a malformed escape: treat as not a literal
        return None
    return value if isinstance(value, str) else None


def int_value(node: cst.CSTNode) -> int | None:
    if type(node) is cst.Integer:
        try:
            return int(node.value.replace("_", ""), 0)
        except ValueError:
            return None
    return None


def signed_int_value(node: cst.CSTNode) -> int | None:
    """The value of `3` or `-1`, else None."""
    negative = type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus
    value = int_value(node.expression if negative else node)
    return -value if negative and value is not None else value


def parameter_named(function: cst.FunctionDef | cst.Lambda, name: str) -> cst.Param | None:
    """The parameter `name` of `function` (positional or keyword; not `*args`), or None."""
    params = function.params
    every = (*params.posonly_params, *params.params, *params.kwonly_params)
    return next((p for p in every if p.name.value == name), None)


def in_other_arms(body: tuple[int, int], orelse: tuple[int, int], a: tuple[int, int], b: tuple[int, int]) -> bool:
    """One of the spans `a`, `b` in the spans of an `if`'s body, the other in its `else`."""

    def inside(arm: tuple[int, int], span: tuple[int, int]) -> bool:
        return arm[0] <= span[0] < arm[1]

    return (inside(body, a) and inside(orelse, b)) or (inside(orelse, a) and inside(body, b))


def apart(tree: Tree, first: cst.CSTNode, second: cst.CSTNode | None, ifs: Iterable[cst.CSTNode]) -> bool:
    """Are `first` and `second` in different arms of one of the `if` statements `ifs`
    (so never both on one path)?"""
    a, b = tree.span(first), tree.span(second) if second is not None else None
    if a is None or b is None:
        return False
    for statement in ifs:
        if type(statement) is not cst.If or statement.orelse is None:
            continue
        body, orelse = tree.span(statement.body), tree.span(statement.orelse)
        if body is not None and orelse is not None and in_other_arms(body, orelse, a, b):
            return True
    return False


def assignment_targets(statement: cst.CSTNode) -> list[cst.BaseExpression]:
    """What a statement assigns to: the targets of `=`, `: T =`, `+=`, a `for` and the
    `as` of a `with` (names, tuples, attributes or subscripts)."""
    statement_type = type(statement)
    if statement_type is cst.Assign:
        return [t.target for t in statement.targets]
    if statement_type in (cst.AnnAssign, cst.AugAssign, cst.For):
        return [statement.target]
    if statement_type is cst.With:
        return [item.asname.name for item in statement.items if item.asname is not None]
    return []


def bound_names(target: cst.BaseExpression) -> Iterator[str]:
    """Names bound by an assignment target (`a`, `a, (b, *c)`), not attributes."""
    if type(target) is cst.Name:
        yield target.value
    elif type(target) in (cst.Tuple, cst.List):
        for element in target.elements:
            yield from bound_names(element.value)
    elif type(target) is cst.StarredElement:
        yield from bound_names(target.value)


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def argument_for(call: cst.Call, keyword: str, position: int | None) -> cst.Arg | None:
    """The argument that fills a parameter: by its name, else (given its position among
    the positional ones) by position."""
    found = keyword_arg(call, keyword)
    if found is not None or position is None:
        return found
    positional = [a for a in call.args if a.keyword is None]
    return positional[position] if position < len(positional) else None


def positional_args(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def innermost_call(call: cst.Call) -> cst.Call:
    """`Net(adj)` of `Net(adj).to(device).eval()`: the call a chain of method calls starts from."""
    while type(call.func) is cst.Attribute and type(call.func.value) is cst.Call:
        call = call.func.value
    return call


def move_target(call: cst.Call) -> cst.Arg | None:
    """What `x.to(...)` (or `to_empty`) is given as the device: its `device=`, else its
    first positional argument (which may also be a dtype or a tensor)."""
    return keyword_arg(call, "device") or next(iter(positional_args(call)), None)


def decorator_names(function: cst.FunctionDef) -> set[str | None]:
    """The decorators as dotted names, a call by its callee (`@torch.no_grad()` is
    `torch.no_grad`); None for one that is no dotted name."""
    return {
        dotted_name(d.decorator.func if type(d.decorator) is cst.Call else d.decorator) for d in function.decorators
    }


def statement_suites(stmt: cst.CSTNode) -> list[cst.BaseSuite]:
    """The blocks of a compound statement (bodies, else, handlers, finally, cases)."""
    found = []
    for name in ("body", "orelse", "finalbody"):
        part = getattr(stmt, name, None)
        if type(part) is cst.IndentedBlock or type(part) is cst.SimpleStatementSuite:
            found.append(part)
        elif type(part) in (cst.Else, cst.Finally):
            found.append(part.body)
        elif type(part) is cst.If:
            found.extend(statement_suites(part))
    for handler in getattr(stmt, "handlers", ()):
        found.append(handler.body)
    for case in getattr(stmt, "cases", ()):
        found.append(case.body)
    return found


def call_parameters(function: cst.FunctionDef, bound: bool) -> list[cst.Param]:
    """The parameters a call's arguments fill, in order (without `self` when bound)."""
    params = function.params
    ordered = [*params.posonly_params, *params.params]
    if bound and ordered and "staticmethod" not in decorator_names(function):
        ordered = ordered[1:]
    return ordered + list(params.kwonly_params)
