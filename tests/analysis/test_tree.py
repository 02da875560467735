"""The per-type child extractors and the file's node table agree with the generic walk."""

from __future__ import annotations

import libcst as cst

from devlint.analysis import tree

EXOTIC = """
from __future__ import annotations
import os.path as p, sys
from . import (a as b, c)
from x import *

@decorate(1)
class K[T: int, *Ts, **P](Base, metaclass=M):
    x: int = 3
    async def f[U](self, /, a, *args, b=1, **kw) -> list[U]:
        global g
        async with a as (b, c), d:
            async for i in aiter():
                yield i
        return [j async for j in k if j if not j] or {k: v for k, v in d.items()}

def g(*, key=lambda q, *r, **s: q):
    nonlocal_ = (yield from h())
    del a[1:2, ::3], b.c
    assert x, "msg"
    raise E from e
    if (n := 10) > 5: pass
    elif n: ...
    else: pass
    try:
        pass
    except* (A, B) as e:
        pass
    else:
        pass
    finally:
        pass
    while x: break
    for a, *b in c: continue
    match command.split():
        case [action, *rest] if action:
            pass
        case {"k": v, **kw}:
            pass
        case Point(x=0, y=0) | Point(1, 2) as pt:
            pass
        case str() | None | 1j | -1 | "a" "b":
            pass
    x = f"{a!r:>{width}} {b=}" + rb"raw" + ~a ** -b @ c // d
    x += 1; y: list[int]
    return await z if a else b, (yield), not a, a is not b, a not in b, a[...]
type Alias[T] = list[T]
"""


def test_child_list_matches_the_generic_walk_on_every_syntax():
    module = cst.parse_module(EXOTIC)
    seen = 0
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        fast, generic = tree.child_list(node), tree._generic_children(node)
        assert len(fast) == len(generic) and all(a is b for a, b in zip(fast, generic)), type(node).__name__
        stack.extend(fast)
        seen += 1
    assert seen > 300


def test_tree_slices_are_walks():
    module = cst.parse_module(EXOTIC)
    table = tree.Tree(module)
    assert table.nodes == list(tree.walk(module))
    for node in table.nodes:
        assert list(table.walk(node)) == list(tree.walk(node))
        assert list(table.walk_scope(node)) == list(tree.walk_scope(node))
    built = cst.parse_expression("a + b")  # not in the module: walked the ordinary way
    assert list(table.walk(built)) == list(tree.walk(built))


def test_functions_come_with_their_enclosing_functions():
    module = cst.parse_module("def f():\n    def g():\n        h = lambda: 1\n    k = lambda: 2\n")
    found = [(node.__class__.__name__, len(around)) for node, around in tree.Tree(module).functions(module)]
    assert found == [("FunctionDef", 0), ("FunctionDef", 1), ("Lambda", 2), ("Lambda", 1)]
