"""The parser's nodes skip validation; every other node is validated as libcst does."""

import dataclasses

import libcst as cst
import pytest

from devlint import fast_parse

SOURCE = """\
import torch as t  # a comment
from a import (b as c, d)

@decorator(1, *args, key=value, **kw)
async def f(x: int, /, y=2, *rest, z: "str" = {}, **options) -> None:
    global g
    lst = [i for i in range(3) if i] + list({k: v for k, v in d.items()})
    s = {1, 2} | {x async for x in y}
    await g(lambda q, *, r=1: q[1:2, ::3] @ r)
    with open(p) as fh, ctx() as (a, b):
        try:
            del lst[0]
        except* ValueError as err:
            raise RuntimeError("x") from err
        finally:
            pass
    match x:
        case [1, *others] | {"k": 2, **more} | Point(x=0) if x > 0:
            yield from others
        case _:
            return f"{x!r:>{width}} {y=}"

class K(Base, metaclass=Meta):
    a: int = 1
    while not a: a -= 1
    else: a <<= 2
"""


def test_the_tree_is_libcsts_tree() -> None:
    fast = fast_parse.parse_module(SOURCE)
    assert fast.deep_equals(cst.parse_module(SOURCE))
    assert fast.code == SOURCE


def test_nodes_built_outside_a_parse_are_validated() -> None:
    fast_parse.parse_module("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")
    with pytest.raises(cst.CSTValidationError):
        cst.Call(func=cst.Name("f"), args=[cst.Arg(cst.Name("a"), star="*", keyword=cst.Name("k"))])


def test_a_failed_parse_leaves_validation_on() -> None:
    with pytest.raises(cst.ParserSyntaxError):
        fast_parse.parse_module("def (:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")


def test_every_node_keeps_its_dataclass_parameters_and_defaults() -> None:
    fast_parse.parse_module("x = 1\n")
    for node_type in fast_parse._node_types(cst.CSTNode):
        if "__init__" not in node_type.__dict__ or not dataclasses.is_dataclass(node_type):
            continue
        required = {f.name: f for f in dataclasses.fields(node_type)}
        try:
            node = node_type(**{
                name: cst.Name("x") for name, f in required.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            })  # fmt: skip
        except (cst.CSTValidationError, TypeError, AttributeError, ValueError):
            continue  # a node whose required fields are not names: its defaults are checked below anyway
        for name, f in required.items():
            if f.default is not dataclasses.MISSING:
                assert getattr(node, name) == f.default, (node_type, name)
            elif f.default_factory is not dataclasses.MISSING:
                made, expected = getattr(node, name), f.default_factory()
                assert repr(made) == repr(expected), (node_type, name)  # a node's repr is its whole tree
                assert made is not expected or not isinstance(made, cst.CSTNode), (node_type, name)


def test_default_factories_give_each_node_its_own_value() -> None:
    fast_parse.parse_module("x = 1\n")
    first, second = cst.Dict([]), cst.Dict([])
    assert first.lbrace.deep_equals(second.lbrace) and first.lbrace is not second.lbrace
