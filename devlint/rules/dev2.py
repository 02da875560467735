"""DEV2: tensors on different devices. Every answer comes from the device analysis."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from devlint.analysis import device_tables
from devlint.analysis.devices import DeviceAnalysis
from devlint.analysis.lattice import HOST_ARRAY, AbstractValue, Conflict, Operand, Source
from devlint.analysis.tree import (
    Tree,
    apart,
    argument_for,
    assignment_targets,
    bound_names,
    dotted_name,
    innermost_call,
    parameter_named,
    walk,
)
from devlint.fix.plan import FixPlan, InsertAfter, InsertBefore, Replace, ReplaceUpTo
from devlint.rules.base import Rule


class MixedDevices(Rule):
    """
    ## What it does
    Checks for operations whose tensor operands are known to live on different
    devices: arithmetic and comparisons, in-place operators, `@`, `torch.cat([a, b])`,
    `torch.where(m, a, b)`, `a.add(b)`, a module on one device called with a tensor on
    another, a `torch.nn` layer given tensors on two devices (`self.lstm(x, (h0, c0))`,
    `loss_fn(input=out, target=y)`), and a CPU tensor indexed by an accelerator index
    or mask.

    A model moved on some paths only (`if args.cuda: model.cuda()`) and called with a
    tensor that no path moves fails on the paths that move the model: that is reported
    too (unless a `DataParallel` wrapper moves the inputs on every such path), without
    a fix, as the tensor must follow the model, not the device binding.

    ## Why is this bad?
    PyTorch refuses to compute across devices (`Expected all tensors to be on the same
    device, but found at least two devices, cuda:0 and cpu!`). Code that builds a
    tensor without `device=` works on the CPU and fails the first time it meets a
    tensor on the accelerator. PyTorch's own exemptions are respected: indexing an
    accelerator tensor with a CPU index or mask is legal, and a 0-dim CPU tensor may be
    an input of an elementwise operation on the accelerator (but not the output of an
    in-place one). `nn.DataParallel`, and `DistributedDataParallel` with `device_ids`,
    move their inputs themselves: a CPU batch given to them is fine.

    ## Example
        class Net(nn.Module):
            def forward(self, x):
                mask = torch.ones(x.size(0), 5)
                return x * mask

    ## Use instead
        class Net(nn.Module):
            def forward(self, x):
                mask = torch.ones(x.size(0), 5, device=x.device)
                return x * mask

    ## Fix safety
    Safe: when the CPU operand is built by a factory in the same function, `device=`
    is added there, naming the device of the other operand (a `device` local or
    parameter, `<other>.device`, or the module-level binding). The tensor is then
    built where it is used; nothing else changes.
    """

    code = "DEV201"
    name = "mixed-devices"
    fixable = True

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self._reported_origins: set[int] = set()

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._check(node)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._check(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        analysis = DeviceAnalysis.of(self.ctx)
        conflict = analysis.conflict_at(node)
        if conflict is None or self._left_to_another_rule(analysis, conflict):
            return
        if any(analysis.conflict_at(side.expr) is not None for side in (conflict.cpu, conflict.other)):
            return  # an operand that already failed (`self.Q(s).gather(1, a)`): reported there
        if self.ctx.runs_without_accelerator():
            return  # the branch for machines without the accelerator the other operand needs
        origin = conflict.cpu.value.origin
        if origin is not None and not analysis.in_current_scope(origin):
            # a CPU tensor another function made (`h = self.init_hidden(x)`): reported
            # where it first meets the accelerator, not at every use after
            if id(origin) in self._reported_origins:
                return
            self._reported_origins.add(id(origin))
        self.report(node, self._message(analysis, conflict), self._fix(analysis, conflict))

    def _left_to_another_rule(self, analysis: DeviceAnalysis, conflict: Conflict) -> bool:
        cpu = conflict.cpu.value
        if cpu.source is Source.LOADER and not _next_batch(cpu.origin):
            return True  # DEV302: the batch of a loop was never moved
        if cpu.is_module and cpu.source is Source.CONSTRUCTION:
            return True  # DEV301: the model was never moved
        if cpu.source is Source.CONSTRUCTION and cpu.origin is not None and cpu.origin is not conflict.node:
            if analysis.models_left_on_cpu().get(id(cpu.origin)):
                return True  # the output of a model DEV301 finds left on the CPU
        origin = cpu.origin
        if origin is not None and not analysis.in_current_scope(origin):
            cls = self.ctx.enclosing_class()
            if cls is not None and analysis.is_module_class(cls) and _inside(self.ctx.tree, origin, cls):
                if (
                    _self_attribute(conflict.cpu.expr) and _made_at_construction(self.ctx.tree, cls, origin)
                ) or _assigned_to_self(self.ctx.tree, cls, origin):
                    return True  # DEV204: a tensor attribute the module does not own
        return False

    def _message(self, analysis: DeviceAnalysis, conflict: Conflict) -> str:
        cpu = _describe(analysis, conflict.cpu)
        other = _describe(analysis, conflict.other)
        where = analysis.code(conflict.node)
        if conflict.kind == "module":
            if conflict.cpu.value.is_module:
                return f"`{analysis.code(conflict.other.expr, 40)}` ({other}) is passed to `{analysis.code(conflict.cpu.expr, 40)}` ({cpu}) in `{where}`"
            return f"`{analysis.code(conflict.cpu.expr, 40)}` ({cpu}) is passed to `{analysis.code(conflict.other.expr, 40)}` ({other}) in `{where}`"
        if conflict.kind == "passed" and type(conflict.node) is cst.Call:
            line = analysis.line_of(conflict.inner) if conflict.inner is not None else 0
            at = f" at line {line}" if line else ""
            return f"`{analysis.code(conflict.cpu.expr, 40)}` ({cpu}) is handed to `{analysis.code(conflict.node.func, 40)}`, where it meets `{analysis.code(conflict.other.expr, 40)}` ({other}){at}"
        if conflict.kind == "index":
            return f"`{analysis.code(conflict.cpu.expr, 40)}` ({cpu}) is indexed by `{analysis.code(conflict.other.expr, 40)}` ({other}) in `{where}`: the index must live with the tensor"
        if conflict.kind == "joined":
            return f"`{where}` joins tensors on different devices: `{analysis.code(conflict.cpu.expr, 40)}` got one ({cpu}) and one ({other})"
        if conflict.kind == "inplace":
            return f"in-place `{where}` writes into `{analysis.code(conflict.cpu.expr, 40)}` ({cpu}) from `{analysis.code(conflict.other.expr, 40)}` ({other})"
        return f"`{analysis.code(conflict.cpu.expr, 40)}` ({cpu}) meets `{analysis.code(conflict.other.expr, 40)}` ({other}) in `{where}`"

    # -- the fix -----------------------------------------------------------------------

    def _fix(self, analysis: DeviceAnalysis, conflict: Conflict) -> FixPlan | None:
        cpu = conflict.cpu.value
        origin = cpu.origin
        if cpu.source is not Source.FACTORY or type(origin) is not cst.Call:
            return None
        if conflict.other.value.maybe_accel:
            return None  # the other side stays on the CPU on some paths: so must this one there
        if not analysis.in_current_scope(origin):
            return None
        qualified = self.ctx.qualify(origin.func)
        if qualified not in device_tables.DEVICE_FACTORIES:
            return None
        if any(a.keyword is not None and a.keyword.value == "device" for a in origin.args):
            return None
        if any(a.star == "**" for a in origin.args):
            return None
        names = analysis.names_at(origin) or {}
        device = self.binding.code_for(conflict.other.value.device, names=names, operand=conflict.other, at=origin)
        if device is None:
            return None
        code, edits = device
        if origin.args:
            last = origin.args[-1]
            return FixPlan.safe(InsertAfter(last, f", device={code}"), *edits)
        return FixPlan.safe(Replace(origin, f"{self.source_of(origin.func)}(device={code})"), *edits)


class DiscardedTo(Rule):
    """
    ## What it does
    Checks for `t.to(...)`, `t.cuda()` and `t.cpu()` used as statements on a tensor.

    ## Why is this bad?
    `Tensor.to` returns a copy and leaves `t` where it was: the statement does nothing.
    Only `Module.to` moves in place, so the habit carries over from models to tensors
    and the tensor silently stays on the CPU. A receiver that is, or may be, a module is
    never reported.

    ## Example
        x = torch.randn(8, 3)
        x.to(device)

    ## Use instead
        x = torch.randn(8, 3)
        x = x.to(device)

    ## Fix safety
    Safe: the statement had no effect; assigning its result does what it was written
    for. Only receivers that are names or attributes get a fix.
    """

    code = "DEV202"
    name = "discarded-to"
    fixable = True

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        wrapped = None
        if (
            type(call) is cst.Call
            and self.ctx.qualify(call.func) == "torch.autograd.Variable"
            and len(call.args) == 1
            and not call.args[0].keyword
            and not call.args[0].star
        ):
            wrapped, call = call, call.args[0].value  # `Variable(y.cuda())` alone on a line
        if type(call) is not cst.Call or type(call.func) is not cst.Attribute:
            return
        method = call.func.attr.value
        if method not in ("to", "cuda", "cpu"):
            return
        receiver = call.func.value
        analysis = DeviceAnalysis.of(self.ctx)
        if not analysis.value_of(receiver).is_tensor or self._shown_by_notebook(node):
            return
        target = dotted_name(receiver)
        fix = FixPlan.safe(InsertBefore(call, f"{target} = ")) if target is not None and wrapped is None else None
        code = analysis.code(call if wrapped is None else wrapped)
        self.report(
            wrapped or call,
            f"`{code}` returns a moved copy that is thrown away; `{analysis.code(receiver, 40)}` stays where it is",
            fix,
        )

    def _shown_by_notebook(self, node: cst.Expr) -> bool:
        """Is `node` the last statement of a notebook cell, whose value Jupyter shows
        (`x.to(device)` to look at the copy), and not silenced by a `;`?"""
        if not self.ctx.path.endswith(".ipynb") or type(node.semicolon) is cst.Semicolon:
            return False
        line = self.ctx.parent(node)
        module = self.ctx.module
        if (
            type(line) is not cst.SimpleStatementLine
            or line.body[-1] is not node
            or self.ctx.parent(line) is not module
        ):
            return False
        following = next((module.body[i + 1] for i, s in enumerate(module.body[:-1]) if s is line), None)
        if following is None:
            return True  # the notebook's last cell
        return any(
            empty.comment is not None and _CELL_BOUNDARY.fullmatch(empty.comment.value)
            for empty in following.leading_lines
        )


_CELL_BOUNDARY = re.compile(r"#__devlint__+cell\d+")  # devlint.notebook's line between two cells


class NumpyOnDevice(Rule):
    """
    ## What it does
    Checks for `.numpy()`, and the conversions NumPy and matplotlib make themselves, of a
    tensor that is, or on some path may be, on an accelerator.

    The implicit conversions are `np.array(t)`, `np.mean([... t ...])`, `plt.plot(t)`, and
    the plotting methods of a matplotlib `Axes` (`ax.imshow(t)`, `axes[0].plot(t)`,
    `axs.flatten()[i].imshow(t)`), and a NumPy array read at a tensor's indices
    (`names[losses.argsort()]`).

    ## Why is this bad?
    NumPy arrays live in host memory: `.numpy()` on a CUDA or MPS tensor raises
    `can't convert cuda:0 device type tensor to numpy`. It works on the CPU, so the bug
    shows only on the machine with the accelerator.

    ## Example
        # setup: device = torch.accelerator.current_accelerator()
        model = nn.Linear(4, 2).to(device)
        y = model(torch.randn(8, 4).to(device))
        y.detach().numpy()

    ## Use instead
        # setup: device = torch.accelerator.current_accelerator()
        model = nn.Linear(4, 2).to(device)
        y = model(torch.randn(8, 4).to(device))
        y.detach().cpu().numpy()

    ## Fix safety
    Safe: `.cpu()` is a no-op for a CPU tensor and the copy NumPy needs otherwise.
    """

    code = "DEV203"
    name = "numpy-on-device"
    fixable = True
    _imports_matplotlib: bool | None = None  # see `_axes_method`

    def report(self, node: cst.CSTNode, message: str, fix: FixPlan | None = None) -> None:
        if not self.ctx.runs_without_accelerator():  # `t.numpy() if not use_cuda else t.cpu().numpy()`
            super().report(node, message, fix)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value != "numpy":
            self._implicit(node)
            return
        if any(a.keyword is not None and a.keyword.value == "force" for a in node.args):
            return
        analysis = DeviceAnalysis.of(self.ctx)
        value = analysis.value_of(func.value)
        if not value.may_be_accel_tensor:
            return
        receiver = analysis.code(func.value, 40)
        where = f"lives on {value.device}" if value.device.is_accel else "may live on an accelerator"
        message = f"`.numpy()` on `{receiver}`, which {where}: NumPy needs it on the CPU"
        self.report(node, message, FixPlan.safe(Replace(func.attr, "cpu().numpy")))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """`names[order]`, a NumPy array read at a tensor's indices: NumPy converts the
        index with `.numpy()` too (not a 0-dim one, which it reads with `__index__`)."""
        analysis = DeviceAnalysis.of(self.ctx)
        if analysis.value_of(node.value) != HOST_ARRAY:
            return
        for element in node.slice:
            if type(element.slice) is not cst.Index:
                continue
            index = analysis.value_of(element.slice.value)
            if index.may_be_accel_tensor and index.zero_dim is not True and not index.element:
                fix = None
                if index.tensor_like and type(element.slice.value) in (cst.Name, cst.Attribute, cst.Call):
                    fix = FixPlan.safe(InsertAfter(element.slice.value, ".cpu()"))
                code = analysis.code(element.slice.value, 40)
                self.report(
                    node,
                    f"NumPy reads `{analysis.code(node.value, 30)}` at `{code}` with `.numpy()`, and it may live "
                    "on an accelerator: move the index to the CPU first",
                    fix,
                )
                return

    def _parameter(self, expr: cst.BaseExpression) -> bool:
        """A parameter of the function around: other callers (other modules too) may hand
        it a NumPy array, which has no `.cpu()`."""
        functions = self.ctx.functions()
        return type(expr) is cst.Name and bool(functions) and parameter_named(functions[0], expr.value) is not None

    def _implicit(self, node: cst.Call) -> None:
        """`np.mean(losses)`, `np.array([loss, acc])`, `plt.plot(t)`: NumPy converts
        its arguments with `.numpy()` too."""
        qualified = self.ctx.qualify(node.func) or ""
        if not qualified.startswith(_CONVERTING) and not self._axes_method(node.func):
            return
        analysis = DeviceAnalysis.of(self.ctx)
        for arg in node.args:
            if arg.star:  # (a keyword argument is converted too: `f1_score(y_true=labels, ...)`)
                continue
            value = analysis.value_of(arg.value)
            if value.may_be_accel_tensor:
                fix = None
                # not where some path may give an array or a picture, which has no `.cpu()`
                if (
                    value.tensor_like
                    and type(arg.value) in (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
                    and not self._parameter(arg.value)
                ):
                    fix = FixPlan.safe(InsertAfter(arg.value, ".cpu()"))
                tensor = analysis.code(arg.value, 40)
                self.report(
                    node,
                    f"`{analysis.code(node.func)}` converts `{tensor}` with `.numpy()`, and it may live on an accelerator: move it to the CPU first",
                    fix,
                )
                return
            if value.holds_accel:
                held = analysis.code(arg.value, 40)
                self.report(
                    node,
                    f"`{analysis.code(node.func)}` converts `{held}`, which holds a tensor that may live on an accelerator: NumPy needs them on the CPU (`.item()` or `.cpu()` each)",
                )
                return

    def _axes_method(self, func: cst.BaseExpression) -> bool:
        """`ax.imshow(t)`, `axes[0, 1].plot(t)`: a plotting method of a matplotlib `Axes`,
        in a file that imports matplotlib, on a name that is one by convention (`ax`, `axs`,
        `axes`, `ax1`, `ax_loss`, `loss_ax`)."""
        if type(func) is not cst.Attribute or func.attr.value not in device_tables.AXES_PLOTTING_METHODS:
            return False
        receiver = func.value
        while type(receiver) is cst.Subscript or (
            type(receiver) is cst.Call
            and type(receiver.func) is cst.Attribute
            and receiver.func.attr.value in ("flatten", "ravel")
        ):  # `axes[0, 1]`, `axs.flatten()[i]`
            receiver = receiver.value if type(receiver) is cst.Subscript else receiver.func.value
        if type(receiver) is not cst.Name or not _AXES_NAME.match(receiver.value):
            return False
        if self._imports_matplotlib is None:
            self._imports_matplotlib = any(q.startswith("matplotlib") for q in self.ctx.imports.aliases.values())
        return self._imports_matplotlib


_CONVERTING = device_tables.CONVERTING_NAMESPACES
_AXES_NAME = re.compile(r"(?:ax|axs|axes|axarr|ax\d+|ax_\w+|\w+_ax|\w+_axes)$")


class UnregisteredModuleTensor(Rule):
    """
    ## What it does
    Checks, in the `__init__` of an `nn.Module` subclass (also through local base
    classes, Lightning, and Hugging Face `PreTrainedModel`s), for `self.name = <tensor>`
    where the tensor is neither an `nn.Parameter` nor registered as a buffer.

    A class that manages the attribute itself elsewhere (a cache rebuilt where the input
    is, a table moved wherever it is read: `self.pe[: x.size(1)].to(x.device)`) is left
    alone; a move or a promotion that only some constructions take (`if
    learn: self.logvar = nn.Parameter(self.logvar)`, `if cfg.gpu: self.mean =
    self.mean.cuda()`), another arm of the same `if`, or an assignment before it, does
    not manage it.

    ## Why is this bad?
    `model.to(device)` moves parameters and buffers only: the plain tensor attribute
    stays on the CPU and the first `forward` on the accelerator fails (or, worse,
    silently copies it every call). It is also missing from `state_dict()`.

    ## Example
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.mask = torch.ones(10)

    ## Use instead
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("mask", torch.ones(10), persistent=False)

    ## Fix safety
    Unsafe: a buffer follows the module through `.half()` and `.double()` as well as
    `.to(device)`, so its dtype may now change with the model's.
    """

    code = "DEV204"
    name = "unregistered-module-tensor"
    fixable = True
    _calls_by_name: dict[str, list[cst.Call]] | None = None  # see `_constructed_with`
    _reached: dict[int, frozenset[str]] | None = None  # see `_runs_at_construction`

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1:
            self._check(node, node.targets[0].target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._check(node, node.target, node.value)

    def _check(self, node: cst.CSTNode, target: cst.BaseExpression, value_node: cst.BaseExpression) -> None:
        if type(target) is not cst.Attribute or type(target.value) is not cst.Name:
            return
        functions = self.ctx.functions()
        if not functions or type(functions[0]) is not cst.FunctionDef:
            return
        method = functions[0]
        analysis = DeviceAnalysis.of(self.ctx)
        cls = analysis.class_of(method)
        if cls is None or not analysis.is_module_class(cls, strict=True):
            return
        params = method.params.params
        if not params or params[0].name.value != target.value.value:
            return
        if method.name.value == "train" and self._cached_by_train(analysis, cls, node, target, value_node):
            return
        if self._reached is None:
            self._reached = {}
        at_construction = _runs_at_construction(self.ctx.tree, method, cls, self._reached)
        if not at_construction and not self._built_once(target):
            return
        value = analysis.value_of(value_node)
        construction = None
        if (
            type(value_node) is cst.Name
            and method.name.value == "__init__"
            and value.source in (Source.PARAMETER, Source.NONE)
            and value_node.value in analysis.model.parameter_names(method, True)
        ):
            # `self.gso = gso`: the tensor every construction in the file hands in
            handed = self._constructed_with(analysis, cls, method, value_node.value)
            if handed is not None:
                value, construction = handed
        if not value.is_tensor or value.is_parameter:
            return
        if value.source not in (Source.FACTORY, Source.NUMPY, Source.MOVE):
            return
        attr = target.attr.value
        if value.zero_dim is True or _learnable(value_node) or _made_learnable(self.ctx, cls, target.value.value, attr):
            return  # a CPU scalar joins accelerator operands; a learnable one wants `nn.Parameter`, not a buffer
        computed = _computed_with(self.ctx, analysis, cls, target.value.value, attr)
        if computed is False or (computed is None and construction is not None):
            return  # read only as data (`.tolist()`, an index, packing's lengths), or never
        if _placed_from_outside(self.ctx, analysis, cls, attr):
            return  # `model.adj = model.adj.to(device)`: placed by the code that moves the model
        if _of_itself(self.ctx, value_node, dotted_name(target)) == "move":
            return  # `self.bank = self.bank.to(device)`: the tensor is reported where it is made
        registered = analysis.registered_names(cls)
        if registered is None or attr in registered:
            return
        others = _other_assignments(self.ctx.tree, cls, target.value.value, attr, node)
        key = f"{target.value.value}.{attr}"
        if [other for other in others if not _left_plain_on_some_path(self.ctx, method, node, other, key, others)]:
            return  # managed by the class itself (a cache rebuilt or moved elsewhere)
        if _moved_where_used(self.ctx, analysis, cls, attr):
            return  # `self.pe[:n].to(x.device)`: the class places it on each use
        self_name = target.value.value
        where = f"on {value.device}" if value.device.known else "where it was built"
        if not at_construction:
            # a buffer cannot be registered over the plain attribute `__init__` set to None
            message = (
                f"`{self_name}.{attr}` is a cache the module builds when it is missing, not when the module "
                f"moves: `.to(device)` leaves it {where}; register it as a buffer in `__init__`, "
                "or rebuild it when the device changes"
            )
            self.report(node, message)
            return
        # (`register_buffer` refuses a name already set as a plain attribute: `self.m = m` first)
        set_before = any(
            _before(self.ctx.tree, value, node) and not _exclusive(self.ctx.tree, method, value, node)
            for stmt, value in others
            if stmt is method
        )
        if construction is not None:
            code = analysis.code(construction, 40)
            where += f" (handed in by `{code}`, line {analysis.line_of(construction)})"
        message = (
            f"`{self_name}.{attr}` is a tensor the module does not own: `.to(device)` leaves it "
            f"{where}; register it as a buffer"
            + (" (in place of the plain attribute set before)" if set_before else "")
        )
        fix = None
        if not _class_level(cls, attr) and type(node) is cst.Assign and not value_node.lpar and not set_before:
            # `self.name = ` becomes `self.register_buffer("name", `: the value keeps its own text
            opening = f'{self_name}.register_buffer("{attr}", '
            fix = FixPlan.unsafe(ReplaceUpTo(node, value_node, opening), InsertAfter(value_node, ", persistent=False)"))
        self.report(node, message, fix)

    def _cached_by_train(
        self,
        analysis: DeviceAnalysis,
        cls: cst.ClassDef,
        node: cst.CSTNode,
        target: cst.Attribute,
        value_node: cst.BaseExpression,
    ) -> bool:
        """`def train(self, mode=True): ... self.ab = self.attention_biases[:, self.idxs]`:
        a cache `.eval()` builds from the module's parameters (TinyViT, LeViT). Built on
        the CPU when `.eval()` comes before `.to(device)`, it stays there. Reported here;
        True when it was."""
        me = target.value.value
        reads_parameters = any(
            type(n) is cst.Attribute and type(n.value) is cst.Name and n.value.value == me
            for n in self.ctx.tree.walk(value_node)
        )
        if not reads_parameters or type(value_node) not in (cst.Subscript, cst.Call, cst.BinaryOperation):
            return False
        registered = analysis.registered_names(cls)
        if registered is None or target.attr.value in registered:
            return False
        message = (
            f"`{me}.{target.attr.value}` is a cache `train(False)` (`.eval()`) builds from the parameters: "
            "after `.eval()` the model's `.to(device)` leaves it where it was built; "
            "build it in `forward` where the parameters are, or rebuild it when the device changes"
        )
        self.report(node, message)
        return True

    def _constructed_with(
        self, analysis: DeviceAnalysis, cls: cst.ClassDef, init: cst.FunctionDef, name: str, depth: int = 0
    ) -> tuple[AbstractValue, cst.Call] | None:
        """The CPU tensor each construction of `cls` in the file passes for `__init__`'s
        parameter `name`, when every one passes a tensor it built (`STGCN(n, gso=adj)`,
        also through the `__init__` of a module that hands its own parameter on:
        `GraphConv(c, c, gso)`), with the first construction that builds it; None otherwise."""
        names = analysis.model.parameter_names(init, True)
        if self._calls_by_name is None:  # the calls of each name in the file, found once
            self._calls_by_name = {}
            for node in self.ctx.tree.nodes:
                if type(node) is cst.Call and type(node.func) is cst.Name:
                    self._calls_by_name.setdefault(node.func.value, []).append(node)
        calls = self._calls_by_name.get(cls.name.value, ())
        found = None
        for call in calls:
            if any(arg.star for arg in call.args):
                return None
            arg = argument_for(call, name, names.index(name) if name in names else None)
            if arg is None:
                return None  # the default
            arg_call = call
            scope, around = self._scope_around(call)
            value = analysis.scope(scope, around).values.get(id(arg.value))
            if value is None:
                return None
            if value.source in (Source.PARAMETER, Source.NONE) and type(arg.value) is cst.Name and depth < 3:
                owner = analysis.class_of(scope) if type(scope) is cst.FunctionDef else None
                if owner is None or scope.name.value != "__init__" or not analysis.is_module_class(owner, strict=True):
                    return None
                handed = self._constructed_with(analysis, owner, scope, arg.value.value, depth + 1)
                if handed is None:
                    return None
                value, call = handed
            if not value.is_tensor or value.is_parameter or value.source not in (Source.FACTORY, Source.NUMPY):
                return None
            if not value.device.is_cpu:
                return None  # built where the model will be: one device, one place
            if call is arg_call and not _moved_later(self.ctx, analysis, call, scope):
                return None  # a model built to try it on the CPU (`__main__`'s shape check)
            found = found or (value, call)
        return found

    def _scope_around(self, node: cst.CSTNode) -> tuple[cst.CSTNode, tuple]:
        """The innermost function around `node` (the module where none is), and the
        functions around that one."""
        span = self.ctx.tree.span(node)
        best = (self.ctx.module, ())
        for function, around in self.ctx.tree.functions(self.ctx.module):
            inner = self.ctx.tree.span(function)
            if span is not None and inner is not None and inner[0] < span[0] < inner[1]:
                best = (function, around)  # (in source order: a nested one comes later)
        return best

    def _built_once(self, target: cst.Attribute) -> bool:
        """`if self.grid is None: self.grid = ...`: a cache built the first time the
        module runs, and never again, so it stays where that was (no `.device` test)."""
        key = dotted_name(target)
        ancestors = self.ctx.ancestors
        for index in range(len(ancestors) - 1, 0, -1):
            node = ancestors[index]
            if type(node) is cst.FunctionDef:
                return False
            if type(node) is cst.If and ancestors[index + 1] is node.body and _is_none_test(node.test, key):
                return not any(
                    type(n) is cst.Attribute and n.attr.value == "device" for n in self.ctx.tree.walk(node.test)
                )
        return False


# -- helpers ---------------------------------------------------------------------------


def _describe(analysis: DeviceAnalysis, operand: Operand) -> str:
    value = operand.value
    if value.maybe_accel and value.device.is_accel:
        return "on an accelerator where the code moves it"
    text = str(value.device)
    if value.origin is not None and value.how and value.source is not Source.PARAMETER:
        text += f", line {analysis.line_of(value.origin)}: {value.how}"
    return text


def _next_batch(origin: cst.CSTNode | None) -> bool:
    """`next(iter(loader))`: a batch taken outside any loop, which DEV302 does not see."""
    return type(origin) is cst.Call and type(origin.func) is cst.Name and origin.func.value == "next"


def _self_attribute(expr: cst.BaseExpression) -> bool:
    """`self.mask` (or `self.mask[...]`, `self.weight.data`): an attribute read off a name."""
    while type(expr) is cst.Subscript or (type(expr) is cst.Attribute and expr.attr.value == "data"):
        expr = expr.value
    return type(expr) is cst.Attribute and type(expr.value) is cst.Name


def _construction_methods(tree: Tree, cls: cst.ClassDef) -> Iterator[cst.FunctionDef]:
    """`__init__` and the methods it calls on `self`: where DEV204 looks."""
    reached = _reached_at_construction(tree, cls)
    for method in cls.body.body if type(cls.body) is cst.IndentedBlock else ():
        if type(method) is cst.FunctionDef and method.name.value in reached:
            yield method


def _made_at_construction(tree: Tree, cls: cst.ClassDef, origin: cst.CSTNode) -> bool:
    """Was `origin` made at construction? Not by a helper `forward` calls
    (`self.hidden = self.init_hidden()`)."""
    return any(_inside(tree, origin, method) for method in _construction_methods(tree, cls))


def _assigned_to_self(tree: Tree, cls: cst.ClassDef, value: cst.CSTNode) -> bool:
    """Is `value` what construction assigns to a `self.<attr>` (`torch.exp(self.logvar[t])`
    reads a tensor made so)?"""
    for method in _construction_methods(tree, cls):
        for node in tree.walk(method.body):
            if type(node) is cst.Assign and node.value is value:
                return any(type(t.target) is cst.Attribute and type(t.target.value) is cst.Name for t in node.targets)
    return False


def _inside(tree: Tree, node: cst.CSTNode, container: cst.CSTNode) -> bool:
    return any(n is node for n in tree.walk(container))


def _runs_at_construction(
    tree: Tree, method: cst.FunctionDef, cls: cst.ClassDef, cache: dict[int, frozenset[str]] | None = None
) -> bool:
    """`__init__`, or a method that `__init__` calls as `self.<name>(...)`, itself or
    through the methods it calls (`self._create_parameters_and_layers()`). `cache`: a
    rule's own, for the file it checks."""
    if method.name.value == "__init__":
        return True
    reached = cache.get(id(cls)) if cache is not None else None
    if reached is None:
        reached = _reached_at_construction(tree, cls)
        if cache is not None:
            cache[id(cls)] = reached
    return method.name.value in reached


def _reached_at_construction(tree: Tree, cls: cst.ClassDef) -> frozenset[str]:
    """The names of the methods construction runs: `__init__` and what it calls on `self`,
    through the file's base classes too (a base's `__init__` that calls
    `self.populate_modules()`, which the class overrides; `super().__init__()`)."""
    mro = _local_mro(tree, cls)

    def resolve(name: str, start: int = 0) -> tuple[int, cst.FunctionDef] | None:
        for index in range(start, len(mro)):
            for method in mro[index].body.body if type(mro[index].body) is cst.IndentedBlock else ():
                if type(method) is cst.FunctionDef and method.name.value == name:
                    return index, method
        return None

    reached: set[str] = {"__init__"}
    first = resolve("__init__")
    todo = [first] if first is not None else []
    walked: set[int] = set()
    while todo:
        index, method = todo.pop()
        if id(method) in walked:
            continue
        walked.add(id(method))
        params = method.params.params
        me = params[0].name.value if params else None
        for node in tree.walk(method.body):
            if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
                continue
            receiver, name = node.func.value, node.func.attr.value
            if type(receiver) is cst.Name and receiver.value == me:
                found = resolve(name)  # the class's own override, where it has one
                if found is not None:
                    reached.add(name)
                    todo.append(found)
            elif name == "__init__" and type(receiver) is cst.Call and dotted_name(receiver.func) == "super":
                found = resolve("__init__", index + 1)
                if found is not None:
                    todo.append(found)
    return frozenset(reached)


def _local_mro(tree: Tree, cls: cst.ClassDef) -> list[cst.ClassDef]:
    """`cls`, then the module-level classes of the file it derives from, depth first."""
    module = tree.nodes[0] if tree.nodes else None
    classes = {}
    if type(module) is cst.Module:
        for stmt in module.body:
            if type(stmt) is cst.ClassDef:
                classes.setdefault(stmt.name.value, stmt)
    order: list[cst.ClassDef] = []
    todo = [cls]
    while todo:
        current = todo.pop(0)
        if any(c is current for c in order):
            continue
        order.append(current)
        todo.extend(classes[name] for base in current.bases if (name := dotted_name(base.value)) in classes)
    return order


def _other_assignments(tree: Tree, cls: cst.ClassDef, self_name: str, attr: str, node: cst.CSTNode) -> list:
    """(method, value) of every other `self.<attr> = value` in the class's methods, but
    those of a method that uses the tensor before it assigns it (a recurrent state:
    `h_prev = self.h` ... `self.h = h.detach()`), where it is on the CPU the first time."""
    found = []
    for stmt in cls.body.body if type(cls.body) is cst.IndentedBlock else ():
        if type(stmt) is not cst.FunctionDef or _reads_first(tree, stmt, f"{self_name}.{attr}"):
            continue
        for child in tree.walk(stmt.body):
            if child is node:
                continue
            targets: list = []
            if type(child) is cst.Assign:
                targets = [t.target for t in child.targets]
            elif type(child) in (cst.AnnAssign, cst.AugAssign) and getattr(child, "value", None) is not None:
                targets = [child.target]
            if targets and type(child.value) is cst.Name and child.value.value == "None":
                continue  # `self.weight = None` before it is made: nothing manages it
            for target in targets:
                if dotted_name(target) == f"{self_name}.{attr}":
                    found.append((stmt, child.value))
    return found


def _moved_where_used(ctx, analysis: DeviceAnalysis, cls: cst.ClassDef, attr: str) -> bool:
    """Does every method that does not run at construction read `self.<attr>` only to
    move it (`self.pe[: x.size(1)].to(x.device)`, `torch.LongTensor(self.adj[ids.cpu()]).cuda()`)?
    Then the class places the tensor itself wherever it is used, and leaving it on the CPU
    is its choice. A read that meets anything else first, or a table indexed by what may be
    on the accelerator, is no such use."""
    tree = ctx.tree
    inside = tree.span(cls)
    metadata: set[int] = set()  # `m.pe.shape`: where it lives does not matter
    for node in tree.nodes:
        if type(node) is cst.Attribute and node.attr.value in _METADATA and type(node.value) is cst.Attribute:
            metadata.add(id(node.value))
        elif (
            type(node) is cst.Attribute
            and node.attr.value == attr
            and id(node) not in metadata
            and dotted_name(node.value) not in _NOT_INSTANCES
        ):
            at = tree.span(node)
            if inside is None or at is None or not inside[0] <= at[0] < inside[1]:
                return False  # `m.pe[:n]` read outside the class (not another class's own `self.pe`)
    reads: list[cst.Attribute] = []
    moved: set[int] = set()
    for method in cls.body.body if type(cls.body) is cst.IndentedBlock else ():
        if type(method) is not cst.FunctionDef or _runs_at_construction(tree, method, cls):
            continue
        params = method.params.params
        if not params:
            continue
        key = f"{params[0].name.value}.{attr}"
        for node in tree.walk(method.body):
            if type(node) is cst.Attribute and node.attr.value == attr and dotted_name(node) == key:
                reads.append(node)
            elif (
                type(node) is cst.Call
                and type(node.func) is cst.Attribute
                and (node.func.attr.value == "type_as" or analysis.model.moves_off_cpu(node))
            ):
                read = _moved_read(ctx, node.func.value)
                if read is not None:
                    moved.add(id(read))
    return bool(reads) and all(id(read) in moved for read in reads)


def _moved_read(ctx, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """What a move's receiver reads, through what keeps it apart from other tensors (views,
    casts, `.data`, a legacy or `torch.tensor` copy, an index on the CPU): `self.pe` of
    `self.pe[:, :n].float()`, None where the receiver combines it with anything."""
    while True:
        expr_type = type(expr)
        if expr_type is cst.Subscript:
            if not all(_cpu_index(element.slice) for element in expr.slice):
                return None
            expr = expr.value
        elif expr_type is cst.Attribute and expr.attr.value in ("data", "T"):
            expr = expr.value
        elif (
            expr_type is cst.Call
            and type(expr.func) is cst.Attribute
            and (
                expr.func.attr.value in _VIEWS
                or (expr.func.attr.value in device_tables.SHAPE_KEEPING and all(_literal(a.value) for a in expr.args))
            )
        ):
            # (sizes never meet the table; `.masked_fill(mask, 0)`, `.clamp(min=x.min())` may)
            expr = expr.func.value
        elif (
            expr_type is cst.Call
            and len(expr.args) == 1
            and expr.args[0].keyword is None
            and (ctx.qualify(expr.func) or "") in _COPIES
        ):
            expr = expr.args[0].value
        else:
            return expr if expr_type is cst.Attribute else None


_METADATA = frozenset({"shape", "dtype", "ndim", "size", "dim", "numel", "device", "is_cuda"})
# receivers of attributes outside a class that are no instance of it: `self` (another
# class's own), parsed arguments and configurations (`args.mask`)
_NOT_INSTANCES = frozenset(
    {"self", "args", "opt", "opts", "cfg", "config", "conf", "hparams", "hp", "params", "flags", "FLAGS", "options"}
)
_VIEWS = frozenset({"view", "reshape", "unsqueeze", "squeeze", "flatten", "expand", "permute", "transpose", "t"})
_COPIES = device_tables.LEGACY_CPU_TYPES | {"torch.tensor", "torch.as_tensor"}


def _literal(expr: cst.BaseExpression) -> bool:
    """A number, `True`/`False`/`None`, a string, or a dotted name such as `torch.float16`."""
    if type(expr) is cst.UnaryOperation:
        expr = expr.expression
    if type(expr) in (cst.Integer, cst.Float, cst.SimpleString):
        return True
    if type(expr) is cst.Name:
        return expr.value in ("True", "False", "None")
    return type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "torch"


def _cpu_index(index: cst.BaseSlice) -> bool:
    """An index that is never on the accelerator: a slice, a number, `...`, `None`, or
    what `.cpu()` returns."""
    if type(index) is cst.Slice:
        return True
    value = index.value
    if type(value) is cst.UnaryOperation:
        value = value.expression
    if type(value) in (cst.Integer, cst.Ellipsis) or (type(value) is cst.Name and value.value == "None"):
        return True
    return type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "cpu"


def _is_none_test(test: cst.BaseExpression, key: str) -> bool:
    """Does `test` only ask whether attributes are None, `key` among them (`self.grid is
    None or self.lim is None`)? A cache rebuilt on other conditions too (a new shape) is
    the class's business."""
    asked = []
    pending = [test]
    while pending:
        part = pending.pop()
        if type(part) is cst.BooleanOperation and type(part.operator) is cst.Or:
            pending += [part.left, part.right]
            continue
        if type(part) is not cst.Comparison or len(part.comparisons) != 1:
            return False
        target = part.comparisons[0]
        if type(target.operator) is not cst.Is or not (
            type(target.comparator) is cst.Name and target.comparator.value == "None"
        ):
            return False
        asked.append(dotted_name(part.left))
    return key in asked and None not in asked


def _left_plain_on_some_path(ctx, method: cst.FunctionDef, node: cst.CSTNode, other: tuple, key: str,
                             others: list) -> bool:  # fmt: skip
    """Another assignment of the attribute in the same method that some constructions
    skip, leaving the plain tensor of `node`: a move or a promotion of the tensor itself
    under an `if` (`if config.is_gpu: self.mean = self.mean.cuda()`, `if learn:
    self.logvar = nn.Parameter(self.logvar)`), or anything in another arm of the `if` that
    makes the plain one (`if trainable: self.beta = Parameter(...) else: self.beta =
    torch.zeros(1)`, a filter bank built one way or another), or an assignment before it
    (`self.m = m` then `if self.m is None: self.m = torch.eye(n)`). A move is not
    ownership either way."""
    stmt, value = other
    if stmt is not method:
        return False
    tree = ctx.tree
    how = _of_itself(ctx, value, key)
    if how == "move" and _enclosed(tree, method, value, (cst.If,)):
        return True
    if how == "promotion" and _enclosed(tree, method, value, (cst.If,)):
        # not where every arm promotes it (`if learn: ... = nn.Parameter(t) else: ... =
        # nn.Parameter(t, requires_grad=False)`)
        return not any(
            s is method
            and v is not value
            and _of_itself(ctx, v, key) == "promotion"
            and _exclusive(tree, method, v, value)
            for s, v in others
        )
    if _exclusive(tree, method, node, value):
        return True
    return _before(tree, value, node) and not _enclosed(
        tree, method, node, (cst.For, cst.While)
    )  # `self.m = m`, then `if ...: self.m = ...`


def _of_itself(ctx, value: cst.BaseExpression, key: str) -> str | None:
    """ "move" for `self.t.cuda()`, "promotion" for `nn.Parameter(self.t)` (`key` naming
    `self.t`), None for anything else."""
    if type(value) is not cst.Call:
        return None
    if type(value.func) is cst.Attribute and value.func.attr.value in device_tables.MOVE_METHODS:
        return "move" if dotted_name(value.func.value) == key else None
    if (ctx.qualify(value.func) or "") in device_tables.PARAMETER_CLASSES and value.args:
        return "promotion" if dotted_name(value.args[0].value) == key else None
    return None


def _exclusive(tree: Tree, method: cst.FunctionDef, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """Are `a` and `b` in different arms of one `if` of `method`?"""
    return apart(tree, a, b, tree.walk_scope(method))


def _before(tree: Tree, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    spans = tree.span(a), tree.span(b)
    return spans[0] is not None and spans[1] is not None and spans[0][0] < spans[1][0]


def _enclosed(tree: Tree, method: cst.FunctionDef, node: cst.CSTNode, kinds: tuple[type, ...]) -> bool:
    """Is `node` inside a statement of one of `kinds` of `method` (not of a nested
    function): an `if` arm, or a loop, where what comes before may also come after?"""
    spot = tree.span(node)
    if spot is None:
        return False
    for candidate in tree.walk_scope(method):
        if type(candidate) in kinds:
            span = tree.span(candidate)
            if span is not None and span[0] < spot[0] < span[1]:
                return True
    return False


def _reads_first(tree: Tree, method: cst.FunctionDef, key: str) -> bool:
    """Is the first statement of `method`'s body that mentions `key` a plain line that
    only reads it (not a test, such as a cache's `if self.mask is None:`, nor an
    assignment, such as `self.mask = self.mask.to(x.device)`)?"""
    for stmt in method.body.body if type(method.body) is cst.IndentedBlock else ():
        if not any(type(n) is cst.Attribute and dotted_name(n) == key for n in tree.walk(stmt)):
            continue
        if type(stmt) is not cst.SimpleStatementLine:
            return False
        return not any(
            type(small) is cst.Assign and any(dotted_name(t.target) == key for t in small.targets)
            for small in stmt.body
        )
    return False


def _class_level(cls: cst.ClassDef, attr: str) -> bool:
    for stmt in cls.body.body if type(cls.body) is cst.IndentedBlock else ():
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if type(small) is cst.Assign and any(dotted_name(t.target) == attr for t in small.targets):
                    return True
                if type(small) is cst.AnnAssign and small.value is not None and dotted_name(small.target) == attr:
                    return True
    return False


class UnregisteredSubmodules(Rule):
    """
    ## What it does
    Checks for modules (or parameters) that an `nn.Module`'s `__init__` keeps in a plain
    `list`, `tuple` or `dict` attribute: `self.heads = [nn.Linear(h, 1) for _ in range(n)]`,
    or `self.layers = []` then `self.layers.append(nn.Conv2d(...))`. Items may go through
    a weight initialiser that returns what it is given (`init_(nn.Linear(h, 1))`), and a
    list may come in as a parameter that every construction in the file fills with one
    (`Ensemble([NetA(), NetB()])`, stored as `self.members = members`).

    ## Why is this bad?
    PyTorch registers a submodule only when it is assigned to the module directly or held
    in a container module. Modules in a plain list are invisible to `.to(device)`,
    `.cuda()`, `.parameters()` and `state_dict()`: the model moves to the GPU while its
    heads stay on the CPU, and the first batch fails inside them (`Expected all tensors
    to be on the same device`); the optimizer never sees their weights either. A list
    that is also handed to `nn.Sequential(*layers)` or `nn.ModuleList(layers)`, or whose
    items are registered with `add_module`, is fine and is not reported.

    ## Example
        class Heads(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.heads = [nn.Linear(8, 1) for _ in range(n)]

    ## Use instead
        class Heads(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.heads = nn.ModuleList([nn.Linear(8, 1) for _ in range(n)])

    ## Fix safety
    Unsafe: the submodules' parameters join `parameters()` and `state_dict()`, so an
    optimizer now trains them (that is the point) and checkpoints gain their keys. A
    list becomes `nn.ModuleList(...)`, a dict `nn.ModuleDict(...)`, a list of
    `nn.Parameter`s `nn.ParameterList(...)`.
    """

    code = "DEV205"
    name = "unregistered-submodules"
    fixable = True
    _calls_by_name: dict[str, list[cst.Call]] | None = None  # see `_constructions`

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        functions = self.ctx.functions()
        if type(target) is not cst.Attribute or type(target.value) is not cst.Name or not functions:
            return
        method = functions[0]
        if type(method) is not cst.FunctionDef:
            return
        params = method.params.params
        if not params or params[0].name.value != target.value.value:
            return
        analysis = DeviceAnalysis.of(self.ctx)
        cls = analysis.class_of(method)
        if cls is None or not analysis.is_module_class(cls, strict=True):
            return
        self_name, attr = target.value.value, target.attr.value
        value = node.value
        held = self._held(value)
        if held is None and _is_empty_container(value):
            held = self._appended(method, self_name, attr)
        if held is None and type(value) is cst.Name and method.name.value == "__init__":
            held = self._given(cls, method, value.value)
        if held is None or not _runs_at_construction(self.ctx.tree, method, cls):
            return  # (`self.w_i = {...}` in a helper `__init__` calls is built there all the same)
        if not _plain_uses_only(self.ctx.tree, cls, self_name, attr, node):
            return
        container = {"module": "ModuleList", "parameter": "ParameterList"}[held]
        keys_named = True
        if _container_word(value) == "dict":
            container = "ModuleDict" if held == "module" else "ParameterDict"
            # a ModuleDict takes string keys only: `self.heads[i] = ...` would fail in it
            keys_named = self._string_keys(method, self_name, attr, value)
        nn = self._nn()
        kind = "parameters" if held == "parameter" else "modules"
        message = (
            f"`{self_name}.{attr}` keeps {kind} in a plain {_container_word(value)}: `.to(device)`, "
            f"`.parameters()` and `state_dict()` never see them; use `{nn}.{container}`"
        )
        fix = None
        if not value.lpar and keys_named:
            fix = FixPlan.unsafe(InsertBefore(value, f"{nn}.{container}("), InsertAfter(value, ")"))
        self.report(node, message, fix)

    def _item_assignments(self, method: cst.FunctionDef, key: str) -> list[tuple[cst.Subscript, cst.BaseExpression]]:
        """(target, value) of every `self.<attr>[k] = value` in `method`, `key` naming the attribute."""
        found = []
        for node in self.ctx.tree.walk(method.body):
            if type(node) is cst.Assign:
                for target in node.targets:
                    if type(target.target) is cst.Subscript and dotted_name(target.target.value) == key:
                        found.append((target.target, node.value))
        return found

    def _string_keys(self, method: cst.FunctionDef, self_name: str, attr: str, value: cst.BaseExpression) -> bool:
        """Are the dict's keys strings, in the literal and in `self.<attr>[key] = ...`?"""
        keys = []
        if type(value) is cst.Dict:
            keys = [e.key for e in value.elements if type(e) is cst.DictElement]
        elif type(value) is cst.DictComp:
            keys = [value.key]
        for target, _ in self._item_assignments(method, f"{self_name}.{attr}"):
            keys.extend(e.slice.value for e in target.slice if type(e.slice) is cst.Index)
        strings = (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)
        return all(type(key) in strings for key in keys)

    def _held(self, value: cst.BaseExpression) -> str | None:
        """ "module" or "parameter" when every item `value` holds is one; None otherwise."""
        if type(value) in (cst.List, cst.Tuple):
            items = [e.value for e in value.elements if type(e) is not cst.StarredElement]
            if not items or len(items) != len(value.elements):
                return None
        elif type(value) in (cst.ListComp, cst.GeneratorExp):
            items = [value.elt]
        elif type(value) is cst.Dict:
            items = [e.value for e in value.elements if type(e) is cst.DictElement]
            if not items or len(items) != len(value.elements):
                return None
        elif type(value) is cst.DictComp:
            items = [value.value]
        else:
            return None
        kinds = {self._item_kind(item) for item in items}
        return kinds.pop() if len(kinds) == 1 and None not in kinds else None

    def _item_kind(self, item: cst.BaseExpression, depth: int = 0) -> str | None:
        if type(item) is not cst.Call:
            return None
        passed = self._passed_through(item) if depth < 3 else None
        if passed is not None:  # `init_(nn.Linear(h, 1))`, a helper that returns what it is given
            return self._item_kind(passed, depth + 1)
        qualified = self.ctx.qualify(item.func) or ""
        if qualified in device_tables.PARAMETER_CLASSES:
            return "parameter"
        last = qualified.rsplit(".", 1)[-1]
        if (
            qualified.startswith("torch.nn.")
            and last[:1].isupper()
            and not qualified.startswith("torch.nn.functional.")
        ):
            return "module"
        name = dotted_name(item.func)
        analysis = DeviceAnalysis.of(self.ctx)
        local = analysis.local_class(name) if name else None
        if local is not None and analysis.is_module_class(local, strict=True):
            return "module"
        value = analysis.value_of(item)  # `make_block(...)`, a helper that returns one
        if value.is_module and (value.holds_params or value.layer):
            return "module"
        return None

    def _given(self, cls: cst.ClassDef, method: cst.FunctionDef, name: str) -> str | None:
        """What parameter `name` of `__init__` holds when every construction of the class in
        the file passes a list or tuple of one kind there: `Ensemble([NetA(), NetB()])`."""
        params = [p.name.value for p in (*method.params.posonly_params, *method.params.params)][1:]
        keyword_only = [p.name.value for p in method.params.kwonly_params]
        if name not in params and name not in keyword_only:
            return None
        nodes = self.ctx.tree.walk(method.body)
        attrs = {id(n.attr) for n in nodes if type(n) is cst.Attribute}  # `self.members`: not the name
        uses = [n for n in nodes if type(n) is cst.Name and n.value == name and id(n) not in attrs]
        if len(uses) != 1:
            return None  # also registered another way (`nn.Sequential(*blocks)`, `add_module` in a loop)
        kinds = set()
        for call in self._constructions().get(cls.name.value, ()):
            if any(arg.star for arg in call.args):
                return None
            found = argument_for(call, name, params.index(name) if name in params else None)
            passed = found.value if found is not None else None
            if type(passed) not in (cst.List, cst.Tuple, cst.ListComp):
                return None  # a dict would need a `ModuleDict`; a name, who knows
            kinds.add(self._held(passed))
        return kinds.pop() if len(kinds) == 1 and None not in kinds else None

    def _constructions(self) -> dict[str, list[cst.Call]]:
        """The calls of each name in the file (by the called name), found once per file."""
        if self._calls_by_name is None:
            self._calls_by_name = {}
            for node in self.ctx.tree.walk(self.ctx.module):
                if type(node) is cst.Call and type(node.func) is cst.Name:
                    self._calls_by_name.setdefault(node.func.value, []).append(node)
        return self._calls_by_name

    def _passed_through(self, call: cst.Call, depth: int = 0) -> cst.BaseExpression | None:
        """The argument of `call` that the called function returns as it is: weight
        initialisers such as `def init(module, ...): ...; return module`, or a lambda of
        the method around the call, `init_ = lambda m: init(m, ...)`."""
        if type(call.func) is not cst.Name or depth > 3:
            return None  # (lambdas that call each other end here)
        name = call.func.value
        analysis = DeviceAnalysis.of(self.ctx)
        function = analysis.model.callee(name) or self._local_function(name)
        lam = None if function is not None else self._local_lambda(name)
        if function is not None:
            returned = _returned_parameter(self.ctx.tree, function)
            params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
            body = function.body.body if type(function.body) is cst.IndentedBlock else ()
            if returned is None and len(body) == 1 and type(body[0]) is cst.SimpleStatementLine:
                # `def init_(m): return init(m, nn.init.orthogonal_, ...)`: passed on to one that returns it
                statement = body[0].body[0]
                if type(statement) is cst.Return and type(statement.value) is cst.Call:
                    inner = self._passed_through(statement.value, depth + 1)
                    returned = inner.value if type(inner) is cst.Name and inner.value in params else None
        elif lam is not None:
            params = [p.name.value for p in lam.params.params]
            returned = _returned_name(lam.body, params) if type(lam.body) is cst.Name else None
            if returned is None and type(lam.body) is cst.Call:
                inner = self._passed_through(lam.body, depth + 1)
                returned = inner.value if type(inner) is cst.Name and inner.value in params else None
        else:
            return None
        if returned is None or returned not in params:
            return None
        if any(arg.star for arg in call.args):
            return None
        found = argument_for(call, returned, params.index(returned))
        return found.value if found is not None else None

    def _local_function(self, name: str) -> cst.FunctionDef | None:
        """The function `def name(...)` defined once in the function being walked."""
        functions = self.ctx.functions()
        if not functions:
            return None
        found = [
            n for n in self.ctx.tree.walk(functions[0].body) if type(n) is cst.FunctionDef and n.name.value == name
        ]
        return found[0] if len(found) == 1 else None

    def _local_lambda(self, name: str) -> cst.Lambda | None:
        """The lambda bound to `name` once in the function being walked."""
        functions = self.ctx.functions()
        if not functions:
            return None
        found = []
        for node in self.ctx.tree.walk(functions[0].body):
            if type(node) is cst.Assign and any(list(bound_names(t.target)) == [name] for t in node.targets):
                found.append(node.value)
        return found[0] if len(found) == 1 and type(found[0]) is cst.Lambda else None

    def _appended(self, method: cst.FunctionDef, self_name: str, attr: str) -> str | None:
        """What `self.<attr>.append(...)` calls (or `self.<attr>[key] = ...` assignments)
        in `__init__` add, when all add one kind."""
        added = [value for _, value in self._item_assignments(method, f"{self_name}.{attr}")]
        for node in self.ctx.tree.walk(method.body):
            if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
                continue
            receiver = node.func.value
            if dotted_name(receiver) != f"{self_name}.{attr}" or node.func.attr.value not in ("append", "insert"):
                continue
            if not node.args:
                return None
            added.append(node.args[-1].value)
        kinds = {self._item_kind(self._bound_in(method, value)) for value in added}
        return kinds.pop() if len(kinds) == 1 and None not in kinds else None

    def _bound_in(self, method: cst.FunctionDef, value: cst.BaseExpression) -> cst.BaseExpression:
        """What a name added to the list was bound to, when `method` binds it once, by a plain
        assignment: `stage = Stage(...)` then `self.stages.append(stage)`; else `value` itself."""
        if type(value) is not cst.Name:
            return value
        bound = []
        for node in self.ctx.tree.walk(method):
            if _registers(node, value.value):
                return value  # also `setattr(self, f"fc{i}", fc)`: registered that way
            if type(node) is cst.Param and node.name.value == value.value:
                return value
            targets = [node.target] if type(node) is cst.NamedExpr else assignment_targets(node)
            if any(value.value in bound_names(target) for target in targets):
                bound.append(node)
        if len(bound) == 1 and type(bound[0]) is cst.Assign and len(bound[0].targets) == 1:
            return bound[0].value
        return value

    def _nn(self) -> str:
        """The file's name for `torch.nn`."""
        for local, qualified in self.ctx.imports.aliases.items():
            if qualified == "torch.nn" and not self.ctx.is_local(local):
                return local
        torch, _ = self.binding.torch()
        return f"{torch}.nn"


def _registers(node: cst.CSTNode, name: str) -> bool:
    """Does `node` register the module bound to `name` on the module: `setattr(self, key,
    name)`, `self.add_module(key, name)`, `self.<attr> = name`?"""
    if type(node) is cst.Call:
        func = node.func
        registering = (type(func) is cst.Name and func.value == "setattr") or (
            type(func) is cst.Attribute and func.attr.value in ("add_module", "register_module")
        )
        return registering and any(type(a.value) is cst.Name and a.value.value == name for a in node.args)
    if type(node) is cst.Assign and type(node.value) is cst.Name and node.value.value == name:
        return any(type(t.target) is cst.Attribute for t in node.targets)
    return False


def _returned_name(value: cst.BaseExpression | None, params: list[str]) -> str | None:
    return value.value if type(value) is cst.Name and value.value in params else None


def _moved_later(ctx, analysis: DeviceAnalysis, call: cst.Call, scope: cst.CSTNode) -> bool:
    """Is the model `call` builds moved in `scope`: `Net(adj).to(device)`, or `model =
    Net(adj)` and then `model.cuda()` / `model = model.to(device)`?"""
    names: set[str] = set()
    nodes = ctx.tree.walk(scope)
    moves = analysis.model.moves_off_cpu
    for node in nodes:
        if type(node) is cst.Return and node.value is call:
            return True  # `def build(): return GCN(adj)`: its callers place it
        if type(node) is cst.Call and moves(node):
            if node.func.value is call:
                return True
        elif type(node) is cst.Assign and node.value is call:
            names.update(t.target.value for t in node.targets if type(t.target) is cst.Name)
    return any(
        type(node) is cst.Call and moves(node) and type(node.func.value) is cst.Name and node.func.value.value in names
        for node in nodes
    )


_DATA_READS = frozenset({"tolist", "item", "cpu", "numpy", "shape", "size", "dim", "ndim", "numel", "dtype", "device"})
_DATA_FUNCTIONS = frozenset({"len", "int", "float", "list", "tuple", "range", "enumerate", "zip", "sorted", "set"})


def _learnable(value: cst.BaseExpression) -> bool:
    """`torch.zeros(1, requires_grad=True)`, `torch.tensor(x).requires_grad_()`: a tensor an
    optimizer trains (`self.log_alpha`), which a buffer would detach from it."""
    for node in walk(value):
        if type(node) is cst.Arg and node.keyword is not None and node.keyword.value == "requires_grad":
            return type(node.value) is cst.Name and node.value.value == "True"
        if type(node) is cst.Attribute and node.attr.value == "requires_grad_":
            return True
    return False


def _made_learnable(ctx, cls: cst.ClassDef, me: str, attr: str) -> bool:
    """`self.log_alpha.requires_grad = True` somewhere in the class."""
    for node in ctx.tree.walk(cls):
        if type(node) is cst.Assign:
            for target in node.targets:
                t = target.target
                if (
                    type(t) is cst.Attribute
                    and t.attr.value == "requires_grad"
                    and type(t.value) is cst.Attribute
                    and t.value.attr.value == attr
                    and type(t.value.value) is cst.Name
                    and t.value.value.value == me
                ):
                    return True
    return False


_SAMPLERS = frozenset({"torch.multinomial", "torch.bernoulli", "torch.poisson"})


def _placed_from_outside(ctx, analysis: DeviceAnalysis, cls: cst.ClassDef, attr: str) -> bool:
    """Does code outside the class move the attribute of an instance of it itself
    (`model = Net(adj)` ... `model.adj = model.adj.to(device)`)?"""
    instances = set()
    for node in ctx.tree.nodes:
        if type(node) is cst.Assign and type(node.value) is cst.Call:
            call = innermost_call(node.value)  # `Net(adj).to(device)`
            if type(call.func) is cst.Name and call.func.value == cls.name.value:
                instances.update(t.target.value for t in node.targets if type(t.target) is cst.Name)
    for node in ctx.tree.nodes:
        if type(node) is not cst.Assign or not analysis.model.moves_off_cpu(node.value):
            continue
        for target in node.targets:
            placed = target.target
            if (
                type(placed) is cst.Attribute
                and placed.attr.value == attr
                and type(placed.value) is cst.Name
                and placed.value.value in instances
            ):
                return True
    return False


def _moves_its_argument(ctx, analysis: DeviceAnalysis, function: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> bool:
    """Does `function` move the parameter `arg` fills (`adj = adj.to(x.device)`)?"""
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    bound = type(call.func) is cst.Attribute and params[:1] in (["self"], ["cls"])
    params = params[1:] if bound else params
    if arg.keyword is not None:
        name = arg.keyword.value
    else:
        index = [a for a in call.args if a.keyword is None].index(arg)
        name = params[index] if index < len(params) else None
    return name is not None and any(
        analysis.model.moves_off_cpu(n) and type(n.func.value) is cst.Name and n.func.value.value == name
        for n in ctx.tree.walk(function.body)
    )


def _computed_with(ctx, analysis: DeviceAnalysis, cls: cst.ClassDef, me: str, attr: str) -> bool | None:
    """Does the class compute with `self.<attr>` where its device matters (an operator,
    a `torch.*` function, a tensor's method, a submodule, a local name used so)? False
    where every read is as data: `.tolist()`, `.item()`, `.shape`, an index into
    something else, `len(...)`, the lengths `pack_padded_sequence` wants on the CPU,
    indices sampled from it, or handed to a function or method of the file that moves
    it. None where the class never reads it."""
    nodes = ctx.tree.walk(cls)
    parents: dict[int, cst.CSTNode] = {}
    for node in nodes:
        for child in node.children:
            parents[id(child)] = node
    targets = {id(t) for node in nodes if type(node) in (cst.Assign, cst.AnnAssign) for t in assignment_targets(node)}
    methods = {m.name.value: m for m in analysis.model._methods(cls)}
    read = False
    for node in nodes:
        if (
            type(node) is not cst.Attribute
            or node.attr.value != attr
            or type(node.value) is not cst.Name
            or node.value.value != me
            or id(node) in targets
        ):
            continue
        read = True
        parent = parents.get(id(node))
        if type(parent) is cst.Assign and len(parent.targets) == 1 and type(parent.targets[0].target) is cst.Name:
            # `noise_dist = self.noise_dist`: what the method does with the local
            alias, function = parent.targets[0].target.value, parent
            while function is not None and type(function) is not cst.FunctionDef:
                function = parents.get(id(function))
            uses = [
                n
                for n in (ctx.tree.walk(function.body) if function is not None else ())
                if type(n) is cst.Name
                and n.value == alias
                and id(n) not in targets
                and not (type(parents.get(id(n))) is cst.Attribute and parents[id(n)].attr is n)
            ]
            if function is not None and all(_read_as_data(ctx, analysis, n, parents, methods, me) for n in uses):
                continue
            return True
        if not _read_as_data(ctx, analysis, node, parents, methods, me):
            return True
    return False if read else None


def _read_as_data(ctx, analysis: DeviceAnalysis, node: cst.CSTNode, parents: dict, methods: dict, me: str) -> bool:
    """Is this read of a tensor (`self.ids`, or a local holding it) a use as data: see
    `_computed_with`?"""
    current, parent = node, parents.get(id(node))
    while type(parent) in (cst.Subscript, cst.Attribute) and parent.value is current:
        if type(parent) is cst.Attribute and parent.attr.value in _DATA_READS:
            break
        if type(parent) is cst.Attribute and parent.attr.value not in ("T", "mT", "data"):
            break
        current, parent = parent, parents.get(id(parent))
    if type(parent) is cst.Attribute and parent.attr.value in _DATA_READS:
        return True  # `self.ids.tolist()`, `self.adj.shape`
    if type(parent) is cst.Index or type(parent) is cst.SubscriptElement:
        return True  # `emb[self.ids]`: an index, legal from the CPU
    if type(parent) is cst.Arg:
        call = parents.get(id(parent))
        if type(call) is cst.Call:
            qualified = ctx.qualify(call.func) or ""
            func = call.func
            if (
                qualified.startswith("torch.nn.utils.rnn.")
                or qualified in _SAMPLERS
                or (type(func) is cst.Name and func.value in _DATA_FUNCTIONS)
            ):
                return True  # packing's lengths, indices sampled from it, `len(...)`
            callee = None
            if type(func) is cst.Name:
                callee = analysis.model.callee(func.value)  # a helper of the file
            elif type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == me:
                callee = methods.get(func.attr.value)  # a method of the class
            if callee is not None and _moves_its_argument(ctx, analysis, callee, call, parent):
                return True  # `propagate(self.adj, x)` that does `adj.to(x.device)`
    return False


def _returned_parameter(tree: Tree, function: cst.FunctionDef) -> str | None:
    """The parameter every `return` of `function` gives back unchanged, if one does."""
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    returned = set()
    for node in tree.walk(function.body):
        if type(node) in (cst.FunctionDef, cst.ClassDef) and node is not function:
            return None  # the walk would mix a nested definition's returns in
        if type(node) is cst.Return:
            returned.add(_returned_name(node.value, params))
        elif type(node) in (cst.Assign, cst.AugAssign, cst.AnnAssign):
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
            if any(type(t) is cst.Name and t.value in params for t in targets):
                return None  # the parameter is rebound
    if len(returned) != 1 or None in returned:
        return None
    return returned.pop()


def _is_empty_container(value: cst.BaseExpression) -> bool:
    if type(value) in (cst.List, cst.Dict) and not value.elements:
        return True
    return type(value) is cst.Call and dotted_name(value.func) in ("list", "dict") and not value.args


def _container_word(value: cst.BaseExpression) -> str:
    if type(value) in (cst.Dict, cst.DictComp) or (type(value) is cst.Call and dotted_name(value.func) == "dict"):
        return "dict"
    return "tuple" if type(value) is cst.Tuple else "list"


# Uses of a container that leave what it holds unregistered.
_PLAIN_METHODS = frozenset({"append", "insert", "extend", "items", "values", "keys", "__getitem__", "index"})
_PLAIN_CALLS = frozenset({"len", "enumerate", "zip", "reversed", "range", "iter", "next", "list", "sorted"})


def _names_for_items(tree: Tree, cls: cst.ClassDef, key: str) -> set[str]:
    """`key` itself, and the loop variables that walk it (`for i, head in
    enumerate(self.heads)`): what names the container's items in the class."""
    names = {key}
    for node in tree.walk(cls):
        if type(node) is cst.For and any(dotted_name(n) == key for n in tree.walk(node.iter)):
            names.update(bound_names(node.target))
    return names


def _handed_to_plain_method(tree: Tree, cls: cst.ClassDef, self_name: str, call: cst.Call, index: int) -> bool:
    """`self._gate(x, self.W_i)`: a method of the class that only indexes, iterates or
    measures the parameter the container fills (`W[t]`)."""
    func = call.func
    if type(func) is not cst.Attribute or type(func.value) is not cst.Name or func.value.value != self_name:
        return False
    methods = [m for m in (cls.body.body if type(cls.body) is cst.IndentedBlock else ())
               if type(m) is cst.FunctionDef and m.name.value == func.attr.value]  # fmt: skip
    if len(methods) != 1 or call.args[index].keyword is not None:
        return False
    params = [p.name.value for p in (*methods[0].params.posonly_params, *methods[0].params.params)][1:]
    if index >= len(params):
        return False
    name = params[index]
    nodes = tree.walk(methods[0].body)
    inside: set[int] = set()  # the uses that are plain: `W[t]`, `for t in W`, `len(W)`
    for node in nodes:
        if type(node) is cst.Subscript and type(node.value) is cst.Name:
            inside.add(id(node.value))
        elif type(node) in (cst.For, cst.CompFor) and type(node.iter) is cst.Name:
            inside.add(id(node.iter))
        elif type(node) is cst.Call and dotted_name(node.func) in _PLAIN_CALLS:
            inside.update(id(a.value) for a in node.args if type(a.value) is cst.Name)
        elif type(node) is cst.Attribute and type(node.value) is cst.Name and node.attr.value in _PLAIN_METHODS:
            inside.add(id(node.value))
    return all(id(n) in inside for n in nodes if type(n) is cst.Name and n.value == name)


def _plain_uses_only(tree: Tree, cls: cst.ClassDef, self_name: str, attr: str, assignment: cst.CSTNode) -> bool:
    """Is `self.<attr>` only iterated, indexed, measured or appended to in the class? A
    container handed anywhere else (`nn.Sequential(*self.layers)`, `nn.ModuleList(...)`,
    a helper), registered item by item (`add_module`, `setattr`), or assigned elsewhere
    is left alone."""
    key = f"{self_name}.{attr}"
    for node in tree.walk(cls):
        if node is assignment:
            continue
        if type(node) is cst.Call:
            name = dotted_name(node.func) or ""
            last = name.rsplit(".", 1)[-1]
            if last in ("add_module", "register_module", "setattr", "register_parameter"):
                items = _names_for_items(tree, cls, key)
                if any(dotted_name(n) in items for arg in node.args for n in tree.walk(arg.value)):
                    return False  # registered item by item
            for index, arg in enumerate(node.args):
                if dotted_name(arg.value) == key and (arg.star or last not in _PLAIN_CALLS):
                    if not _handed_to_plain_method(tree, cls, self_name, node, index):
                        return False
        elif type(node) in (cst.Assign, cst.AugAssign, cst.AnnAssign):
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
            if any(dotted_name(t) == key for t in targets):
                return False
            if dotted_name(getattr(node, "value", None) or cst.Name("_")) == key:
                return False  # aliased: `layers = self.layers`
        elif type(node) is cst.Attribute and dotted_name(node.value) == key and node.attr.value not in _PLAIN_METHODS:
            return False
        elif type(node) is cst.Return and node.value is not None and dotted_name(node.value) == key:
            return False
    return True
