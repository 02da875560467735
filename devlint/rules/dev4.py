"""DEV4: device performance (opt-in: `--extend-select DEV4`)."""

from __future__ import annotations

import libcst as cst

from devlint.analysis import device_tables
from devlint.analysis.devices import DeviceAnalysis
from devlint.analysis.lattice import AbstractValue, Source
from devlint.analysis.tree import Tree, bound_names, dotted_name
from devlint.fix.plan import FixPlan, Replace
from devlint.rules.base import Rule

_LOOPS = (cst.For, cst.While)
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


class SyncInLoop(Rule):
    """
    ## What it does
    Checks for host synchronisations on accelerator tensors inside loop bodies.

    `.item()`, `.cpu()`, `.tolist()`, `.numpy()`, `float(t)`, `int(t)`, `bool(t)`,
    `print(t)` and `if t:` all copy the tensor to the host, which waits for every
    kernel queued before it.

    ## Why is this bad?
    Accelerators run asynchronously: the Python loop queues work and moves on. A sync
    in every iteration stalls the queue each time, so the GPU idles while Python
    catches up. Accumulate on the device (`total += loss.detach()`) and read the value
    once, after the loop or every N steps.

    ## Example
        # setup: device = torch.accelerator.current_accelerator()
        # setup: model = nn.Linear(4, 2).to(device)
        # setup: loader = DataLoader(dataset, batch_size=32)
        # setup: criterion = nn.CrossEntropyLoss()
        running = 0.0
        for x, y in loader:
            loss = criterion(model(x.to(device)), y.to(device))
            running += loss.item()

    ## Use instead
        # setup: device = torch.accelerator.current_accelerator()
        # setup: model = nn.Linear(4, 2).to(device)
        # setup: loader = DataLoader(dataset, batch_size=32)
        running = torch.zeros((), device=device)
        for x, y in loader:
            loss = criterion(model(x.to(device)), y.to(device))
            running += loss.detach()
        print(running.item())

    ## Fix safety
    No fix: where and how often to read the value is the program's choice.
    """

    code = "DEV401"
    name = "sync-in-loop"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        analysis = DeviceAnalysis.of(self.ctx)
        if type(func) is cst.Attribute and func.attr.value in device_tables.SYNC_METHODS and not node.args:
            tensor = func.value
            what = f"`.{func.attr.value}()`"
        elif type(func) is cst.Name and func.value in device_tables.SYNC_BUILTINS and node.args:
            if self.ctx.is_local(func.value) or func.value in self.ctx.imports.aliases:
                return
            tensor = next((a.value for a in node.args if _on_accelerator(analysis.value_of(a.value))), None)
            if tensor is None or (func.value != "print" and len(node.args) != 1):
                return
            what = f"`{func.value}()`"
        else:
            return
        self._check(analysis, node, tensor, what)

    def visit_If(self, node: cst.If) -> None:
        self._check(DeviceAnalysis.of(self.ctx), node.test, node.test, "`if`")

    def _check(self, analysis: DeviceAnalysis, node: cst.CSTNode, tensor: cst.BaseExpression, what: str) -> None:
        value = analysis.value_of(tensor)
        if not _on_accelerator(value) or innermost_loop(self.ctx) is None:
            return
        name = analysis.code(tensor, 40)
        self.report(
            node, f"{what} on `{name}` (on {value.device.in_words()}) waits for the accelerator on every iteration"
        )


class CreateThenMove(Rule):
    """
    ## What it does
    Checks for tensors built on the CPU by a factory and copied to a device at once: `torch.zeros(n).to(device)`.

    ## Why is this bad?
    The tensor is allocated and filled on the CPU, then copied over the bus, then the
    CPU copy is thrown away. `device=` builds it where it is used, with no copy.

    ## Example
        mask = torch.ones(n, n).to(device)

    ## Use instead
        mask = torch.ones(n, n, device=device)

    ## Fix safety
    Safe for deterministic factories (`zeros`, `ones`, `arange`, `tensor`, ...): the
    values are the same. Unsafe for random ones (`rand`, `randn`, `randint`,
    `randperm`): the accelerator's generator draws other numbers than the CPU's.
    """

    code = "DEV402"
    name = "create-then-move"
    fixable = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value != "to":
            return
        factory = func.value
        if type(factory) is not cst.Call or not factory.args or factory.lpar:
            return
        qualified = self.ctx.qualify(factory.func)
        if qualified not in device_tables.DEVICE_FACTORIES:
            return
        if any(a.star or (a.keyword is not None and a.keyword.value in _FACTORY_BLOCKERS) for a in factory.args):
            return
        device = _device_argument(node)
        if device is None:
            return
        analysis = DeviceAnalysis.of(self.ctx)
        built = analysis.value_of(factory)
        moved = analysis.value_of(node)
        if not (built.is_tensor and built.device.is_cpu and moved.origin is node and moved.source is Source.MOVE):
            return
        if moved.device.is_cpu:
            return
        code = self.source_of(device)
        args = list(factory.args)
        comma = args[-1].comma
        if comma is cst.MaybeSentinel.DEFAULT or getattr(comma.whitespace_after, "value", None) == "":
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        keyword = cst.Arg(
            value=device, keyword=cst.Name("device"),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
        )  # fmt: skip
        text = self.source_of(factory.with_changes(args=[*args, keyword]))
        edit = Replace(node, text)
        fix = FixPlan.unsafe(edit) if qualified in device_tables.RANDOM_FACTORIES else FixPlan.safe(edit)
        short = analysis.code(factory.func, 30)
        self.report(node, f"`{short}` builds on the CPU and `.to({code})` copies it: pass `device={code}` instead", fix)


class TransferInLoop(Rule):
    """
    ## What it does
    Checks for `.to(device)` of a tensor that does not change inside the loop that moves it.

    ## Why is this bad?
    The same host-to-device copy is made on every iteration. Moving the tensor once,
    before the loop, gives the same values without the repeated transfers (and the
    syncs they may cause with pageable memory).

    ## Example
        class_weights = torch.tensor([1.0, 2.0])
        for x, y in loader:
            loss = F.cross_entropy(model(x), y, weight=class_weights.to(device))

    ## Use instead
        class_weights = torch.tensor([1.0, 2.0], device=device)
        for x, y in loader:
            loss = F.cross_entropy(model(x), y, weight=class_weights)

    ## Fix safety
    No fix: hoisting the move changes which name holds which copy.
    """

    code = "DEV403"
    name = "transfer-in-loop"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value != "to":
            return
        name = dotted_name(func.value)
        if name is None:
            return
        loop = innermost_loop(self.ctx)
        if loop is None:
            return
        analysis = DeviceAnalysis.of(self.ctx)
        tensor = analysis.value_of(func.value)
        moved = analysis.value_of(node)
        if not (tensor.is_tensor and tensor.device.is_cpu and moved.origin is node and moved.source is Source.MOVE):
            return
        if moved.device.is_cpu or _changes_in(self.ctx.tree, loop, name):
            return
        message = f"`{analysis.code(node, 50)}` copies the same tensor to {moved.device.in_words()} on every iteration: move it once, before the loop"
        self.report(node, message)


# -- helpers ---------------------------------------------------------------------------

_FACTORY_BLOCKERS = frozenset({"device", "out", "requires_grad", "pin_memory", "generator"})


def innermost_loop(ctx) -> cst.For | cst.While | None:
    """The loop whose body holds the current node, within the current function."""
    ancestors = ctx.ancestors
    for index in range(len(ancestors) - 1, 0, -1):
        child, parent = ancestors[index], ancestors[index - 1]
        if isinstance(child, _SCOPES):
            return None
        if isinstance(parent, _LOOPS) and child is parent.body:
            return parent
    return None


def _on_accelerator(value: AbstractValue) -> bool:
    return value.tensor_like and value.device.is_accel


def _device_argument(call: cst.Call) -> cst.BaseExpression | None:
    """The device of `.to(device)` or `.to(device=device)`, when that is all it is given."""
    if len(call.args) != 1 or call.args[0].star:
        return None
    arg = call.args[0]
    if arg.keyword is not None and arg.keyword.value != "device":
        return None
    return arg.value


def _changes_in(tree: Tree, loop: cst.For | cst.While, name: str) -> bool:
    """Is `name` rebound, or written in place, anywhere in the loop?"""
    head = name.split(".", 1)[0]
    if type(loop) is cst.For and (head in set(bound_names(loop.target)) or dotted_name(loop.target) == name):
        return True
    for node in tree.walk_scope(loop):
        target = None
        if type(node) in (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor):
            target = node.target
        elif type(node) is cst.NamedExpr:
            target = node.target
        elif type(node) is cst.WithItem and node.asname is not None:
            target = node.asname.name
        elif type(node) is cst.Call and type(node.func) is cst.Attribute:
            method = node.func.attr.value
            if method.endswith("_") and not method.endswith("__") and dotted_name(node.func.value) == name:
                return True
            if any(
                a.keyword is not None and a.keyword.value == "out" and dotted_name(a.value) == name for a in node.args
            ):
                return True
        if target is None:
            continue
        while type(target) is cst.Subscript:
            target = target.value
        if dotted_name(target) in (name, head) or head in set(bound_names(target)):
            return True
    return False
