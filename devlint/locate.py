"""Where the nodes findings name are in the file, without libcst's whole-module pass.

libcst computes positions by generating the code of the whole module, which costs twice
the parse. A finding needs the positions of a few nodes only, so each is placed by
generating the smallest statement that holds it, alone:

- the innermost simple statement (a line such as `x = y.cuda()`), or
- the header of a compound statement (`def f(device="cuda"):`, `if x.is_cuda:`), with
  its body reduced to `pass`,

inside the headers of the statements around it (each of their blocks reduced to the one
statement on the way), so that libcst indents every line as in the file, and shifting
its lines to where Python's own (C) parser says the statement starts. A node none of
that places (a node in a one-line suite, a way through `try`), or a file whose two
trees disagree, takes the old way: the whole top-level statement, then the module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from devlint.analysis.tree import Tree
from devlint.fix.plan import InsertLines, ReplaceSpan, ReplaceUpTo
from devlint.rules.base import Report

# compound statements whose header can be generated with the body reduced to `pass`,
# and the ast nodes Python makes of them
_HEADERS: dict[type, tuple[type, ...]] = {
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,),
    cst.If: (ast.If,),
    cst.For: (ast.For, ast.AsyncFor),
    cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith),
}
_COMPOUND = (*_HEADERS, cst.Try, cst.TryStar, cst.Match)
_BLOCKS = (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Module)
_PASS = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Pass()])])


def positions_of(
    module: cst.Module, text: str, reports: list[Report], tree: ast.Module | None, nodes: Tree | None = None
) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of the nodes the reports name (and their fixes need). `nodes`: the
    module's node table, where the caller has it."""
    wanted = needed_nodes(reports, module)
    positions: dict[cst.CSTNode, CodeRange] = {}
    if tree is not None and "\r" not in text.replace("\r\n", ""):
        starts = _statement_starts(module, tree)
        _place_by_statement(module, nodes or Tree(module), wanted, starts, positions)
        left = {id(node) for node in wanted if node not in positions}
        if left:
            _place_by_top_statement(module, reports, left, starts, positions)
        if all(node in positions for node in wanted):
            return positions
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def needed_nodes(reports: list[Report], module: cst.Module) -> list[cst.CSTNode]:
    nodes = []
    for report in reports:
        nodes.append(report.node)
        if report.fix is not None:
            for step in report.fix.edits:
                if isinstance(step, InsertLines):
                    # lines go after a statement, or before the first one
                    node = step.after if step.after is not None else (module.body[0] if module.body else None)
                elif isinstance(step, ReplaceSpan):
                    node = None
                else:
                    node = step.node
                if node is not None:
                    nodes.append(node)
                if isinstance(step, ReplaceUpTo):
                    nodes.append(step.end)
                elif isinstance(step, ReplaceSpan):
                    nodes.extend((step.first, step.last))
    return nodes


# -- by statement ---------------------------------------------------------------------


def _place_by_statement(
    module: cst.Module,
    tree: Tree,
    wanted: list[cst.CSTNode],
    starts: dict[int, tuple[int, int]],
    positions: dict[cst.CSTNode, CodeRange],
) -> None:
    by_statement: dict[int, tuple[list[cst.CSTNode], list[cst.CSTNode]]] = {}
    for node in wanted:
        path = _path_to(tree, node)
        statement = _innermost_statement(path)
        if statement is not None and id(path[statement]) in starts:
            by_statement.setdefault(id(path[statement]), (path[: statement + 1], []))[1].append(node)
    for path, nodes in by_statement.values():
        statement = path[-1]
        alone = _reduced(statement) if type(statement) in _HEADERS else statement
        snippet = _nest(module, path, alone)
        if snippet is None:
            continue
        local = MetadataWrapper(snippet, unsafe_skip_copy=True).resolve(PositionProvider)
        shift = starts[id(statement)][0] - local[alone].start.line
        for node in nodes:
            where = local.get(node)
            if where is None:  # in the body left out
                continue
            positions[node] = CodeRange(
                CodePosition(where.start.line + shift, where.start.column),
                CodePosition(where.end.line + shift, where.end.column),
            )


def _path_to(tree: Tree, node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes from the module down to `node` (itself included)."""
    index = tree._position(node)
    if index is None:
        return []
    nodes, ends = tree.nodes, tree.ends
    path = [node]
    for position in range(index - 1, -1, -1):
        if ends[position] > index:
            path.append(nodes[position])
    path.reverse()
    return path


def _innermost_statement(path: list[cst.CSTNode]) -> int | None:
    """Where on `path` the simple statement line holding its node is, or the compound
    statement whose header holds it; None for a block or a one-line suite."""
    for position in range(len(path) - 1, -1, -1):
        candidate = path[position]
        if type(candidate) is cst.SimpleStatementLine or type(candidate) in _HEADERS:
            return position
        if type(candidate) in _BLOCKS or isinstance(candidate, _COMPOUND):
            return None
    return None


def _reduced(statement: cst.CSTNode) -> cst.CSTNode:
    """A compound statement with only its header: the body `pass`, no `else`."""
    changes: dict = {"body": _PASS}
    if getattr(statement, "orelse", None) is not None:
        changes["orelse"] = None
    return statement.with_changes(**changes)


def _nest(module: cst.Module, path: list[cst.CSTNode], statement: cst.CSTNode) -> cst.Module | None:
    """The module holding `statement` inside the headers around it on `path` (each
    block reduced to the one statement on the way), so that libcst indents it as in the
    file; None where the way passes through a statement this does not rebuild."""
    current = statement
    for position in range(len(path) - 2, 0, -1):
        outer, child = path[position], path[position + 1]
        outer_type = type(outer)
        if outer_type is cst.IndentedBlock:
            current = outer.with_changes(body=(current,))
        elif outer_type in (cst.FunctionDef, cst.ClassDef, cst.For, cst.While, cst.With) and child is outer.body:
            current = outer.with_changes(body=current, **({"orelse": None} if hasattr(outer, "orelse") else {}))
        elif outer_type is cst.If and child is outer.body:
            current = outer.with_changes(body=current, orelse=None)
        elif outer_type is cst.If and child is outer.orelse:  # an `elif` or the `else` block
            current = outer.with_changes(body=_PASS, orelse=current)
        elif outer_type is cst.Else:
            current = outer.with_changes(body=current)
        else:
            return None
    return module.with_changes(body=(current,), header=(), footer=())


def _statement_starts(module: cst.Module, tree: ast.Module) -> dict[int, tuple[int, int]]:
    """`id(statement) -> (line, indentation)` for libcst's statements, from Python's
    tree: walked side by side, block by block; a block where the two disagree on the
    number of statements is left out (its statements are placed the old way)."""
    starts: dict[int, tuple[int, int]] = {}
    _block(module.body, tree.body, starts)
    return starts


def _block(statements: Iterable[cst.CSTNode], nodes: list[ast.stmt], starts: dict) -> None:
    statements = list(statements)
    if sum(len(s.body) if type(s) is cst.SimpleStatementLine else 1 for s in statements) != len(nodes):
        return
    position = 0
    for statement in statements:
        node = nodes[position]
        starts[id(statement)] = (node.lineno, node.col_offset)
        if type(statement) is cst.SimpleStatementLine:
            position += len(statement.body)
        else:
            position += 1
            _compound(statement, node, starts)


def _compound(statement: cst.CSTNode, node: ast.stmt, starts: dict) -> None:
    """Map the blocks of one compound statement whose header can be placed (`_HEADERS`),
    where the two trees agree on what statement it is."""
    kinds = _HEADERS.get(type(statement))
    if kinds is None or not isinstance(node, kinds):
        return
    if type(statement) in (cst.FunctionDef, cst.ClassDef) and len(statement.decorators) != len(node.decorator_list):
        return
    _body(statement.body, node.body, starts)
    orelse = getattr(statement, "orelse", None)
    if type(orelse) is cst.Else:
        _body(orelse.body, node.orelse, starts)
    elif type(orelse) is cst.If and len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        # `elif`: an If alone in Python's `orelse`
        starts[id(orelse)] = (node.orelse[0].lineno, node.orelse[0].col_offset)
        _compound(orelse, node.orelse[0], starts)


def _body(body: cst.BaseSuite, nodes: list[ast.stmt], starts: dict) -> None:
    if type(body) is cst.IndentedBlock:
        _block(body.body, nodes, starts)


# -- by top-level statement (the old way) ----------------------------------------------


def _place_by_top_statement(
    module: cst.Module,
    reports: list[Report],
    left: set[int],
    starts: dict[int, tuple[int, int]],
    positions: dict[cst.CSTNode, CodeRange],
) -> None:
    """Generate alone each top-level statement that a report with a node not placed yet
    stands in, or that is such a node itself."""
    tops = [r.top for r in reports if r.top is not None and any(id(n) in left for n in needed_nodes([r], module))]
    tops += [stmt for stmt in module.body if id(stmt) in left]
    for top in dict.fromkeys(tops):
        if id(top) not in starts:
            continue  # the two trees disagree on the top-level statements
        alone = module.with_changes(body=(top,), header=(), footer=())
        local = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
        shift = starts[id(top)][0] - local[top].start.line
        for node, where in local.items():
            if node not in positions:
                positions[node] = CodeRange(
                    CodePosition(where.start.line + shift, where.start.column),
                    CodePosition(where.end.line + shift, where.end.column),
                )
