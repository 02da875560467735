"""The device analysis on its own: the lattice, and inference on small functions."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from devlint.analysis.context import FileContext
from devlint.analysis.devices import DeviceAnalysis
from devlint.analysis.lattice import (
    CPU,
    UNKNOWN,
    UNKNOWN_DEVICE,
    AbstractValue,
    Kind,
    Source,
    NO_ITEMS,
    accel,
    disagree,
    join_devices,
    join_items,
    join_symbolic,
)
from devlint.analysis.tree import walk
from devlint.config import Config

# -- the lattice -----------------------------------------------------------------------


def test_devices_join() -> None:
    assert join_devices(CPU, CPU) == CPU
    assert join_devices(accel("d"), accel("d")) == accel("d")
    assert join_devices(accel("a"), accel("b")) == accel(None)
    assert join_devices(CPU, accel("d")) == UNKNOWN_DEVICE
    assert join_devices(UNKNOWN_DEVICE, CPU) == UNKNOWN_DEVICE


def test_device_values_join_symbolically() -> None:
    # `"cuda" if ok else "cpu"` is the binding: a symbolic accelerator
    assert join_symbolic(accel('"cuda"'), CPU, "device") == accel("device")
    assert join_symbolic(UNKNOWN_DEVICE, CPU, "device") == UNKNOWN_DEVICE


def test_disagreement_is_cpu_against_accelerator() -> None:
    assert disagree(CPU, accel("d"))
    assert not disagree(accel("a"), accel("b"))
    assert not disagree(CPU, UNKNOWN_DEVICE)


def test_values_join() -> None:
    a = AbstractValue(Kind.TENSOR, CPU, False)
    b = AbstractValue(Kind.TENSOR, CPU, True)
    assert a.join(b) == AbstractValue(Kind.TENSOR, CPU, None)
    assert a.join(AbstractValue(Kind.MODULE, CPU)).kind is Kind.UNKNOWN
    assert a.join(AbstractValue(Kind.TENSOR, accel("d"), False)).device == UNKNOWN_DEVICE


# -- inference ---------------------------------------------------------------------------


class Probe:
    """Parses `source` and answers "what is `expr` in function `name`" by code text."""

    def __init__(self, source: str) -> None:
        self.module = cst.parse_module(textwrap.dedent(source))
        self.analysis = DeviceAnalysis.of(FileContext(self.module, "probe.py", Config()))

    def scope(self, name: str | None):
        if name is None:
            return self.analysis.scope(self.module), self.module
        for node in walk(self.module):
            if isinstance(node, cst.FunctionDef) and node.name.value == name:
                return self.analysis.scope(node), node
        raise KeyError(name)

    def value(self, function: str | None, code: str, occurrence: int = -1) -> AbstractValue:
        result, scope = self.scope(function)
        found = [
            result.values[id(n)]
            for n in walk(scope)
            if isinstance(n, cst.BaseExpression) and id(n) in result.values and self.module.code_for_node(n) == code
        ]
        if not found:
            return UNKNOWN
        return found[occurrence]

    def conflicts(self, function: str | None) -> list[str]:
        result, _ = self.scope(function)
        return sorted(self.module.code_for_node(c.node) for c in result.conflicts.values())


HEADER = """
import torch
from torch import nn
from torch.utils.data import DataLoader
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
"""


def probe(body: str) -> Probe:
    return Probe(HEADER + textwrap.dedent(body))


def test_factories_are_cpu_without_device() -> None:
    p = probe("""
        def f():
            a = torch.ones(3)
            b = torch.zeros(2, 3, device=device)
            c = torch.tensor(3.0)
            d = torch.randn(())
            e = torch.zeros(3, **kw)
            return a, b, c, d, e
    """)
    a = p.value("f", "a")
    assert (a.kind, a.device, a.zero_dim, a.source) == (Kind.TENSOR, CPU, False, Source.FACTORY)
    assert p.value("f", "b").device == accel("device")
    assert p.value("f", "c").zero_dim is True
    assert p.value("f", "d").zero_dim is True
    assert p.value("f", "e").device == UNKNOWN_DEVICE


def test_moves_and_non_moves() -> None:
    p = probe("""
        def f(other):
            x = torch.ones(3).to(device)
            h = x.to(torch.float16)
            m = x.to(memory_format=torch.channels_last)
            c = x.cpu()
            g = torch.ones(3).cuda()
            o = torch.ones(3).to(x)
            return x, h, m, c, g, o
    """)
    assert p.value("f", "x").device == accel("device")
    assert p.value("f", "h").device == accel("device")
    assert p.value("f", "m").device == accel("device")
    assert p.value("f", "c").device == CPU
    assert p.value("f", "g").device == accel('"cuda"')
    assert p.value("f", "o").device == accel("device")


def test_operations_live_with_known_operands() -> None:
    p = probe("""
        def f(w):
            x = torch.ones(3).to(device)
            y = x * w
            s = x.sum()
            t = torch.cat([x, x])
            return y, s, t
    """)
    assert p.value("f", "y").device == accel("device")
    s = p.value("f", "s")
    assert s.device == accel("device") and s.zero_dim is True
    assert p.value("f", "t").device == accel("device")


def test_items_of_a_list_built_empty_join_what_was_appended() -> None:
    on_device = AbstractValue(Kind.TENSOR, accel("device"), False)
    assert join_items(NO_ITEMS, on_device) == on_device == join_items(on_device, NO_ITEMS)
    assert join_items(on_device, AbstractValue(Kind.TENSOR, CPU, False)).device == UNKNOWN_DEVICE
    assert join_items(None, on_device) is None
    p = probe("""
        def f(batches):
            outputs, hosts = [], []
            for x in batches:
                outputs.append(torch.ones(3).to(device))
                hosts.append(torch.ones(3))
            filled = []
            filled.extend(batches)
            return torch.cat(outputs), torch.cat(hosts), torch.stack(filled)
    """)
    assert p.value("f", "torch.cat(outputs)").device == accel("device")
    assert p.value("f", "torch.cat(hosts)").device == CPU
    assert p.value("f", "torch.stack(filled)").device == UNKNOWN_DEVICE


def test_branches_join_and_guards_are_not_devices() -> None:
    p = probe("""
        def f(flag):
            if flag:
                y = torch.ones(3)
            else:
                y = torch.ones(3, device=device)
            return y
    """)
    assert p.value("f", "y", -1).device == UNKNOWN_DEVICE


def test_loops_reach_a_fixed_point_and_keep_first_pass_conflicts() -> None:
    p = probe("""
        def f(n):
            x = torch.ones(3).to(device)
            h = torch.zeros(3)
            for _ in range(n):
                h = h * x
            return h
    """)
    assert p.conflicts("f") == ["h * x"]
    assert p.value("f", "h", -1).device == UNKNOWN_DEVICE


def test_early_return_leaves_only_the_other_path() -> None:
    p = probe("""
        def f(flag):
            y = torch.ones(3)
            if flag:
                y = torch.ones(3, device=device)
                return y
            return y
    """)
    assert p.value("f", "y", -1).device == CPU


def test_module_method_parameters_used_as_tensors() -> None:
    p = probe("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)
                self.mask = torch.ones(3)

            def forward(self, x, flag=None):
                out = self.fc(x)
                return out * self.mask, flag
    """)
    x = p.value("forward", "x")
    assert (x.kind, x.device, x.source) == (Kind.TENSOR, accel("x.device"), Source.PARAMETER)
    assert p.value("forward", "flag") == UNKNOWN
    assert p.value("forward", "out").device == accel("x.device")
    # a submodule follows the module; a plain tensor attribute stays on the CPU
    assert p.value("forward", "self.fc").kind is Kind.MODULE
    assert p.value("forward", "self.fc").device == UNKNOWN_DEVICE
    assert p.value("forward", "self.mask").device == CPU
    assert p.conflicts("forward") == ["out * self.mask"]


def test_plain_function_parameters_are_unknown() -> None:
    p = probe("""
        def f(x):
            return x * torch.ones(3)
    """)
    assert p.value("f", "x") == UNKNOWN
    assert p.conflicts("f") == []


def test_self_attributes_across_methods_of_a_plain_class() -> None:
    p = probe("""
        class Trainer:
            def __init__(self):
                self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
                self.model = nn.Linear(3, 3).to(self.device)

            def step(self):
                return self.model(torch.randn(2, 3))
    """)
    assert p.value("step", "self.model").device == accel("self.device")
    assert p.conflicts("step") == ["self.model(torch.randn(2, 3))"]


def test_default_device_context() -> None:
    p = probe("""
        def f():
            with torch.device(device):
                a = torch.ones(3)
            b = torch.ones(3)
            return a, b
    """)
    assert p.value("f", "a").device == accel("device")
    assert p.value("f", "b").device == CPU


def test_set_default_device_anywhere_makes_factories_unknown() -> None:
    p = Probe("""
        import torch
        torch.set_default_device("cuda")
        def f():
            return torch.ones(3)
    """)
    assert p.value("f", "torch.ones(3)").device == UNKNOWN_DEVICE


def test_dataloader_batches_are_cpu_tensors() -> None:
    p = probe("""
        def f(data):
            loader = DataLoader(data, batch_size=4)
            for i, (x, y) in enumerate(loader):
                pass
            batch = next(iter(loader))
            return x, batch
    """)
    assert p.value("f", "loader").kind is Kind.DATALOADER
    x = p.value("f", "x", 0)
    assert (x.kind, x.device, x.source) == (Kind.TENSOR, CPU, Source.LOADER)
    assert p.value("f", "batch", -1).kind is Kind.BATCH


def test_modules_move_in_place() -> None:
    p = probe("""
        def f():
            model = nn.Linear(3, 3)
            model.to(device)
            return model
    """)
    model = p.value("f", "model", -1)
    assert model.kind is Kind.MODULE and model.device == accel("device") and model.holds_params


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("x = torch.ones(3).to(device)\n    return x + torch.tensor(1.0)", []),  # 0-dim CPU input
        ("x = torch.ones(3).to(device)\n    return x[torch.arange(3)]", []),  # CPU index
        ("x = torch.ones(3).to(device)\n    s = torch.tensor(0.0)\n    s += x.sum()", ["s += x.sum()"]),
        ("x = torch.ones(3).to(device)\n    x += torch.tensor(1.0)", []),
        ("x = torch.ones(3).to(device)\n    x.add_(torch.ones(3))", ["x.add_(torch.ones(3))"]),
        (
            "x = torch.ones(3).to(device)\n    return torch.where(x > 0, x, torch.zeros(3))",
            ["torch.where(x > 0, x, torch.zeros(3))"],
        ),
        ("x = torch.ones(3).to(device)\n    return x @ torch.from_numpy(a)", ["x @ torch.from_numpy(a)"]),
        ("x = torch.ones(3).to(device)\n    return x * torch.from_numpy(a)", []),  # rank unknown
        ("x = torch.ones(3).to(device)\n    b = torch.empty(3)\n    b.copy_(x)", []),
    ],
)
def test_pytorch_device_rules(body: str, expected: list[str]) -> None:
    p = probe(f"def f(a):\n    {body}\n")
    assert p.conflicts("f") == expected
