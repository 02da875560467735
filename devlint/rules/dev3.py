"""DEV3: models, batches and checkpoints left behind on the CPU.

Every device answer comes from the device analysis; these rules decide where the
finding goes and what the fix rebinds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import libcst as cst

from devlint.analysis import device_tables
from devlint.analysis.checkpoints import STATE, CheckpointUses
from devlint.analysis.devices import DeviceAnalysis
from devlint.analysis.lattice import Conflict, Operand, Source
from devlint.analysis.tree import (
    Tree,
    argument_for,
    call_parameters,
    children,
    dotted_name,
    in_other_arms,
    parameter_named,
)
from devlint.fix.plan import FixPlan, InsertAfter, InsertBefore, Replace
from devlint.rules.base import Rule

_MOVES = frozenset(device_tables.MOVE_METHODS - {"cpu"})


class ModelLeftOnCpu(Rule):
    """
    ## What it does
    Checks for models that are built on the CPU, never moved, and called with tensors on an accelerator.

    A model is a module that holds parameters or buffers: a `torch.nn` layer such as
    `nn.Linear` or `nn.Conv2d`, a local `nn.Module` subclass that builds one, a
    `torchvision.models` constructor. Parameterless modules (`nn.ReLU()`,
    `nn.MSELoss()`) are not models. `.to`, `.cuda`, `.to_empty`, and handing the model
    to other code (`accelerator.prepare(model)`, `fabric.setup(model)`, a helper)
    count as moves.

    ## Why is this bad?
    A new module lives on the CPU. Moving the inputs is not enough: the first call
    fails with `Expected all tensors to be on the same device` (or `Input type
    (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same`).
    The finding is reported where the model is built, since that is where it must move.

    ## Example
        # setup: device = torch.accelerator.current_accelerator()
        network = nn.Linear(4, 2)
        pred = network(sample.to(device))

    ## Use instead
        # setup: device = torch.accelerator.current_accelerator()
        network = nn.Linear(4, 2).to(device)
        pred = network(sample.to(device))

    ## Fix safety
    Safe: `.to(device)` is appended at the construction, naming the device the input
    was moved to (the device binding for a literal such as `"cuda"`). `Module.to`
    returns the module itself, so the name still holds the same model; on the machine
    the code was written for, the call that failed now runs there.
    """

    code = "DEV301"
    name = "model-left-on-cpu"
    fixable = True

    def visit_Call(self, node: cst.Call) -> None:
        analysis = DeviceAnalysis.of(self.ctx)
        value = analysis.value_of(node)
        if not (value.is_module and value.origin is node and value.source is Source.CONSTRUCTION):
            return
        if not (value.device.is_cpu and value.holds_params):
            return
        here = self._scope()
        key = _assigned_key(self.ctx, node)
        for conflict, scope in analysis.models_left_on_cpu().get(id(node), ()):
            if conflict.other.value.source is Source.PARAMETER and scope is not here:
                continue  # another method's own `x.device`: no sign that a caller passes an accelerator
            if (
                scope is not here
                and not self._local_of(conflict, scope)
                and (key is None or _touched_elsewhere(self.ctx, self._neighbourhood(key), key, here))
            ):
                continue  # another function may have moved it first
            if scope is here and key is not None and _moved_after(self.ctx.tree, here, key, conflict.node):
                continue  # moved, later: an order to fix (a notebook's cells run out of order), not "never"
            self._report(analysis, node, conflict, same_scope=scope is here)
            return

    def _report(self, analysis: DeviceAnalysis, node: cst.Call, conflict: Conflict, *, same_scope: bool) -> None:
        built = analysis.code(node, 40)
        called = analysis.code(conflict.node, 60)
        tensor = analysis.code(conflict.other.expr, 40)
        key = _assigned_key(self.ctx, node)
        several = _moved_only_on_several(self.ctx, key) if key is not None else None
        moved = (
            f"moved only where there are several accelerators (line {analysis.line_of(several)})"
            if several is not None
            else "never moved"
        )
        message = (
            f"`{built}` is built on the CPU and {moved}, but line {analysis.line_of(conflict.node)} "
            f"calls it with `{tensor}` on {conflict.other.value.device.in_words()} (`{called}`)"
        )
        device = self.binding.code_for(conflict.other.value.device, same_scope=same_scope)
        fix = None
        if device is not None:
            code, edits = device
            fix = FixPlan.safe(InsertAfter(node, f".to({code})"), *edits)
        self.report(node, message, fix)

    def _local_of(self, conflict: Conflict, scope: cst.CSTNode) -> bool:
        """Is the model a local name of the function that calls it (`net = load_model()`)?
        Then the analysis followed it there, through the calls that could move it."""
        expr = conflict.cpu.expr
        return type(scope) is cst.FunctionDef and type(expr) is cst.Name and expr.value in self.ctx.bindings_of(scope)

    def _neighbourhood(self, key: str) -> cst.CSTNode:
        """Where other code may touch `key`: the class for `self.<attr>`, else the file."""
        cls = self.ctx.enclosing_class()
        functions = self.ctx.functions()
        if cls is not None and functions and "." in key:
            params = functions[-1].params.params
            if params and key.split(".", 1)[0] == params[0].name.value:
                return cls
        return self.ctx.module

    def _scope(self) -> cst.CSTNode:
        functions = self.ctx.functions()
        return functions[0] if functions else self.ctx.module


class BatchLeftOnCpu(Rule):
    """
    ## What it does
    Checks for `for` loops over a `DataLoader` whose batches reach a moved model or an accelerator tensor without being moved.

    The loop shapes of real training code are understood: `for x, y in loader`,
    `enumerate(loader)`, `tqdm(loader)`, `for batch in loader: x, y = batch`, dict
    batches (`batch["input_ids"]`), nested epoch and batch loops, and evaluation loops
    under `with torch.no_grad():`. The finding is reported at the `for` line.

    ## Why is this bad?
    A `DataLoader` yields CPU tensors. Once the model is on the accelerator, every batch
    must follow it, or the first forward pass fails with `Expected all tensors to be on
    the same device`.

    ## Example
        # setup: device = torch.accelerator.current_accelerator()
        model = nn.Linear(4, 2).to(device)
        loader = DataLoader(dataset, batch_size=32)
        for x, y in loader:
            loss = criterion(model(x), y)

    ## Use instead
        # setup: device = torch.accelerator.current_accelerator()
        model = nn.Linear(4, 2).to(device)
        loader = DataLoader(dataset, batch_size=32)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = criterion(model(x), y)

    ## Fix safety
    Safe: one statement is added as the first line of the loop body, at its
    indentation, rebinding the batch on the model's device: `x, y = x.to(device),
    y.to(device)` for unpacked batches, `batch = [t.to(device) for t in batch]` for a
    batch unpacked later, `batch = {k: v.to(device) for k, v in batch.items()}` for a
    dict batch. A batch used in several ways, or a one-line loop, gets no fix; nor
    does a batch that meets a model moved on some paths only (`if opt.num_gpus > 0:
    model = model.cuda()`), which must follow the model rather than the device binding.
    """

    code = "DEV302"
    name = "batch-left-on-cpu"
    fixable = True

    def visit_For(self, node: cst.For) -> None:
        analysis = DeviceAnalysis.of(self.ctx)
        functions = self.ctx.functions()
        result = analysis.scope(functions[0] if functions else self.ctx.module, tuple(functions[1:]))
        inside = {id(n) for n in self.ctx.tree.walk(node.body)}
        # the loop's own operations, then calls that hand a batch to a function of the file
        passed = (
            analysis.conflict_at(record.call)
            for record in result.calls
            if id(record.call) in inside and id(record.call) not in result.conflicts
        )
        for conflict in itertools.chain(
            result.conflicts.values(), passed, self._inside_callees(analysis, result, inside)
        ):
            if conflict is None:
                continue
            cpu = conflict.cpu.value
            if cpu.source is not Source.LOADER or id(conflict.node) not in inside:
                continue
            if cpu.origin is not node and cpu.origin is not node.iter:
                continue
            if _root_name(conflict.cpu.expr) in _discarded_moves(node):
                return  # `X.to(device)` thrown away in the loop: DEV202's, where the fix goes
            self._report(analysis, node, conflict)
            return

    def _inside_callees(self, analysis: DeviceAnalysis, result, inside: set[int]) -> Iterator[Conflict]:
        """`for batch in loader: train_step(batch)`, the only call of `train_step`: the
        batch meets the model in the helper's own interpretation (its call context), as
        a conflict of the call."""
        for record in result.calls:
            if id(record.call) not in inside or type(record.callee) is not cst.FunctionDef:
                continue
            callee = analysis.scope(record.callee)
            for conflict in callee.conflicts.values():
                if conflict.cpu.value.source is Source.LOADER and conflict.kind != "index":
                    batch = conflict.cpu
                    arguments = analysis.model.call_arguments(record, result.values)
                    if type(batch.expr) is cst.Name and batch.expr.value in arguments:  # as the caller passes it
                        batch = Operand(arguments[batch.expr.value][0], batch.value)
                    yield Conflict(record.call, batch, conflict.other, "passed", inner=conflict.node)

    def _report(self, analysis: DeviceAnalysis, node: cst.For, conflict: Conflict) -> None:
        batch = analysis.code(conflict.cpu.expr, 40)
        other = analysis.code(conflict.other.expr, 40)
        where = f"at line {analysis.line_of(conflict.node)}"
        if conflict.kind == "passed" and type(conflict.node) is cst.Call and conflict.inner is not None:
            # handed to a helper of the file: where the helper meets it
            helper = analysis.code(conflict.node.func, 40)
            where = f"in `{helper}` (line {analysis.line_of(conflict.inner)}, called at line {analysis.line_of(conflict.node)})"
        if conflict.other.value.maybe_accel:
            message = (
                f"batch `{batch}` from `{analysis.code(node.iter, 40)}` stays on the CPU but meets `{other}` {where}, "
                "which is on an accelerator where the code moves it: move the batch where the model is"
            )
        else:
            message = (
                f"batch `{batch}` from `{analysis.code(node.iter, 40)}` stays on the CPU but meets `{other}` "
                f"on {conflict.other.value.device.in_words()} {where}; move it in the loop"
            )
        self.report(node, message, self._fix(node, conflict))

    def _fix(self, node: cst.For, conflict: Conflict) -> FixPlan | None:
        body = node.body
        if type(body) is not cst.IndentedBlock or not body.body or conflict.other.value.maybe_accel:
            return None  # a model moved on some paths only: the batch must follow it, not the binding
        device = self.binding.code_for(conflict.other.value.device)
        if device is None:
            return None
        code, edits = device
        statement = _rebinding(_batch_target(self.ctx, node), body, code)
        if statement is None:
            return None
        indent = self.ctx.indentation() + (body.indent if body.indent is not None else self.ctx.module.default_indent)
        newline = self.ctx.module.default_newline
        return FixPlan.safe(InsertBefore(body.body[0], f"{statement}{newline}{indent}"), *edits)


def _discarded_moves(loop: cst.For) -> set[str]:
    """The names the loop's body moves with the result thrown away (`X.to(device)` as a
    statement): a batch not forgotten but whose move is discarded, one problem that
    DEV202 reports."""
    found = set()
    body = loop.body.body if type(loop.body) is cst.IndentedBlock else ()
    for line in body:
        if type(line) is not cst.SimpleStatementLine:
            continue
        for small in line.body:
            value = small.value if type(small) is cst.Expr else None
            if (
                type(value) is cst.Call
                and type(value.func) is cst.Attribute
                and value.func.attr.value in ("to", "cuda")
                and type(value.func.value) is cst.Name
            ):
                found.add(value.func.value.value)
    return found


def _root_name(expr: cst.BaseExpression) -> str | None:
    """`y` of `y.squeeze(1)[0]`."""
    while type(expr) in (cst.Attribute, cst.Subscript, cst.Call):
        expr = expr.func if type(expr) is cst.Call else expr.value
    return expr.value if type(expr) is cst.Name else None


class LoadWithoutMapLocation(Rule):
    """
    ## What it does
    Checks for `torch.load` (and `torch.jit.load`, and `torch.hub.load_state_dict_from_url`,
    which loads a download with `torch.load`) of a checkpoint without `map_location=`, or
    with one that is always `None`: the literal, or a parameter defaulting to `None` that
    every call of the file leaves so (`XMem(config, path)` handing its `map_location=None`
    on to the method that loads; not where the file makes no call, as other modules may pass
    one).

    A checkpoint is what the loaded object is used as: a state dict given to
    `load_state_dict` (directly, through a name, one of its entries, also bound to
    another name, returned from a helper or passed to one, filtered by a comprehension
    into a dict that is `.update()`d, or copied entry by entry into
    `model.state_dict()[k]`), a model (called, `.eval()`, `.parameters()`,
    `.state_dict()`, `.flatten_parameters()`, or handed on with a model as in
    `transfer(model, torch.load(path))`; helpers and methods of the class on `self` are
    followed), or a training checkpoint whose entries
    (`ckpt["optimizer"]`, `ckpt["model"]`) are handed on. `.to()`, `.cuda()` and `.half()` are what a
    tensor does too: the result is followed instead, so `torch.load(p).to(device)` is a
    model only if it is then used as one. Data files loaded with `torch.load` (tensors
    indexed, iterated or moved) are not reported, nor is a load that runs only where
    CUDA is available (`if torch.cuda.is_available(): ckpt = torch.load(p)`).

    ## Why is this bad?
    `torch.load` puts every tensor back on the device it was saved from. A checkpoint
    written on a GPU machine then fails to load on one without CUDA (`Attempting to
    deserialize object on a CUDA device but torch.cuda.is_available() is False`), and
    loads onto GPU 0 of every process in a multi-GPU job.

    ## Example
        model.load_state_dict(torch.load("model.pt"))

    ## Use instead
        model.load_state_dict(torch.load("model.pt", map_location="cpu"))

    ## Fix safety
    Safe. A value that only feeds `load_state_dict` is loaded with
    `map_location="cpu"`: `load_state_dict` copies it into the model wherever that is,
    so the result is the same on every machine. Anything else (a whole model) is loaded
    with `map_location=` the device binding, the device the code runs on; where CUDA is
    present that is the device a GPU checkpoint was saved from.
    """

    code = "DEV303"
    name = "load-without-map-location"
    fixable = True

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self._uses: CheckpointUses | None = None

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.qualify(node.func)
        if qualified in _URL_LOADERS:
            # `load_state_dict_from_url(url, model_dir, map_location, ...)`: `torch.load` of a download
            positional = [a for a in node.args if a.keyword is None and not a.star]
            if not positional and not any(a.keyword is not None and a.keyword.value == "url" for a in node.args):
                return
            if len(positional) >= 3 or any(a.star for a in node.args):
                return
        elif qualified in ("torch.load", "torch.jit.load"):
            positional = [a for a in node.args if a.keyword is None and not a.star]
            if len(positional) != 1 or any(a.star for a in node.args):
                return  # a second positional argument is the map_location
        else:
            return
        given = next((a for a in node.args if a.keyword is not None and a.keyword.value == "map_location"), None)
        if given is not None and not self._always_none(given.value):
            return
        if self.ctx.guards_backend("cuda"):
            return  # `if torch.cuda.is_available(): torch.load(p)`: where it runs, CUDA is there
        analysis = DeviceAnalysis.of(self.ctx)
        if self._uses is None:
            self._uses = CheckpointUses(analysis)
        use = self._uses.of(node)
        if use is None:
            return
        message = (
            f"`{analysis.code(node, 50)}` restores tensors to the device they were saved from; pass `map_location=`"
        )
        if given is not None:
            # `map_location=None`, or a parameter every call of the file leaves at `None`
            message = f"`{analysis.code(node, 50)}` restores tensors to the device they were saved from: its `map_location` is always `None`"
            literal = type(given.value) is cst.Name and given.value.value == "None"
            fix = FixPlan.safe(Replace(given.value, '"cpu"')) if use == STATE and literal else None
        elif use == STATE:  # only copied into a model: the CPU is exact everywhere
            fix = FixPlan.safe(InsertAfter(node.args[-1], ', map_location="cpu"'))
        else:
            fix = None
            device = self.binding.device()
            if device is not None:
                fix = FixPlan.safe(InsertAfter(node.args[-1], f", map_location={device.code}"), *device.edits)
        self.report(node, message, fix)

    def _always_none(self, value: cst.BaseExpression) -> bool:
        """Is `value` `None`, or a parameter of the function around that defaults to
        `None` and that every call of the file leaves so (`XMem(config, path)` with
        `map_location=None` handed on to the helper that loads)? Not where the file
        has no call: other modules may pass one."""
        if type(value) is not cst.Name:
            return False
        if value.value == "None":
            return True
        functions = self.ctx.functions()
        return (
            bool(functions)
            and type(functions[-1]) is cst.FunctionDef
            and _left_none(DeviceAnalysis.of(self.ctx).model, functions[-1], value.value, frozenset())
        )


def _left_none(model, function: cst.FunctionDef, name: str, seen: frozenset[int]) -> bool:
    """Does every call of `function` in the file leave its parameter `name` at a `None`
    default (passing nothing, `None`, or a parameter of its own left so)?"""
    param = parameter_named(function, name)
    if param is None or id(function) in seen or not (type(param.default) is cst.Name and param.default.value == "None"):
        return False
    if name in model.assigned_names(function):
        return False  # `if map_location is None: map_location = "cpu"`
    calls = [(caller, record.call, record.bound) for caller, record in model.calls_of(function)]
    cls = model.class_of.get(id(function))
    if _called_unseen(model, function, cls):
        return False  # handed on as a value, or a base class whose subclasses call it
    if function.name.value == "__init__" and cls is not None:
        # `XMem(config, path)`: the constructions of the class (passing a parameter of
        # their own on is not followed)
        calls = [
            (None, node, True)
            for node in model.ctx.tree.nodes
            if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == cls.name.value
        ]
    if not calls:
        return False
    keyword_only = param in function.params.kwonly_params
    for caller, call, bound in calls:
        if any(a.star for a in call.args):
            return False
        position = None if keyword_only else call_parameters(function, bound).index(param)
        given = argument_for(call, name, position)
        passed = given.value if given is not None else None
        if passed is None or (type(passed) is cst.Name and passed.value == "None"):
            continue
        if type(passed) is not cst.Name or caller is None:
            return False
        if not _left_none(model, caller, passed.value, seen | {id(function)}):
            return False
    return True


def _called_unseen(model, function: cst.FunctionDef, cls: cst.ClassDef | None) -> bool:
    """May `function` be called by code the file's call sites do not show: named other
    than as the callee of a call (`loader=load_weights`), or a method of a class another
    class of the file derives from (`super().__init__(cfg, path, map_location)`)?"""
    name = function.name.value
    called = {id(node.func) for node in model.ctx.tree.nodes if type(node) is cst.Call}
    for node in model.ctx.tree.nodes:
        if type(node) is cst.ClassDef and cls is not None and node is not cls:
            if any(dotted_name(base.value) == cls.name.value for base in node.bases):
                return True
        elif type(node) is cst.Call:
            continue
        elif type(node) is cst.Attribute and cls is not None and node.attr.value == name and id(node) not in called:
            return True  # `loader = model.restore`: a method handed on
        elif type(node) is cst.Arg and type(node.value) is cst.Name and node.value.value == name and cls is None:
            return True  # `run(load_weights)`
        elif type(node) in (cst.Assign, cst.DictElement, cst.Element) and type(node.value) is cst.Name:
            if node.value.value == name and cls is None:
                return True  # `loader = load_weights`, `{"load": load_weights}`
    return False


# `torch.load` of a downloaded file (their third positional parameter is `map_location`)
_URL_LOADERS = frozenset(
    {
        "torch.hub.load_state_dict_from_url",
        "torch.utils.model_zoo.load_url",
        "torchvision.models.utils.load_state_dict_from_url",
    }
)


class OptimizerBeforeMove(Rule):
    """
    ## What it does
    Checks for optimizers built from `model.parameters()` before `model` is moved in the same scope.

    An optimizer is a `torch.optim` class, or a local subclass of `torch.optim.Optimizer`
    (directly or through local bases), or a function of the file that returns one built
    from its parameter's parameters (`create_optimizer(cfg, model)`). Its parameters may
    come through a helper given the model's parts (`params_of(net.backbone, nn.Conv2d)`),
    a method named for them (`model.get_basenet_params()`) or a list of parameter groups
    bound to a name, and the move may be of a wrapper (`net = DataParallel(net).cuda()`).
    A move in the other arm of an `if`, after an arm that returned, or after the model
    was already moved once on the path, is not the first move.

    ## Why is this bad?
    PyTorch's documentation asks for the move first: the optimizer keeps references to
    the parameters it was given, and its state (momentum buffers, Adam's moments, and
    anything restored with `optimizer.load_state_dict`) is created on, or cast to, the
    parameters' device at that moment. Moves that replace the parameters (`to_empty`,
    wrappers, `torch.__future__.set_overwrite_module_params_on_conversion`) leave the
    optimizer updating tensors the model no longer uses; restored state stays on the
    CPU and the first `step()` fails on the accelerator.

    ## Example
        model = Net()
        optimizer = torch.optim.Adam(model.parameters())
        model.to(device)

    ## Use instead
        model = Net().to(device)
        optimizer = torch.optim.Adam(model.parameters())

    ## Fix safety
    No fix: moving statements changes the program's order; the finding is reported at
    the optimizer's construction.
    """

    code = "DEV304"
    name = "optimizer-before-move"
    _factories: dict[int, str | None] | None = None  # see `_optimizer_factory`

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_optimizer_class(self.ctx, node.func):
            self._built_by_helper(node)
            return
        params = next((a for a in node.args if a.keyword is None or a.keyword.value == "params"), None)
        if params is None:
            return
        functions = self.ctx.functions()
        scope = functions[0].body if functions else self.ctx.module
        given = params.value
        if type(given) is cst.Name:  # `train_params = [{"params": model.get_basenet_params()}, ...]`
            given = self._bound_before(scope, given.value, node) or given
        models = {
            key
            for call in self.ctx.tree.walk(given)
            if type(call) is cst.Call and _gives_parameters(call)
            for key in [dotted_name(call.func.value)]
            if key is not None
        }
        # `params_of(net.model, nn.Conv2d)`: a helper collecting parameters of `net`'s parts
        models |= {
            key.split(".", 1)[0]
            for call in self.ctx.tree.walk(given)
            if type(call) is cst.Call and type(call.func) is cst.Name
            for arg in call.args
            if arg.keyword is None and type(arg.value) is cst.Attribute
            for key in [dotted_name(arg.value)]
            if key is not None
        }
        analysis = DeviceAnalysis.of(self.ctx)
        line = analysis.line_of(node)
        for model in sorted(models):
            move = _later_move(analysis, scope, model, line, node)
            if move is not None:
                message = (
                    f"optimizer `{analysis.code(node, 50)}` is built from `{model}`'s parameters before "
                    f"line {analysis.line_of(move)} moves `{model}` (`{analysis.code(move, 40)}`): move the model first"
                )
                self.report(node, message)
                return

    def _built_by_helper(self, node: cst.Call) -> None:
        """`optimizer = create_optimizer(cfg, model)`: a function of the file that returns
        an optimizer built from its parameter's parameters, called before the move."""
        if type(node.func) is not cst.Name:
            return
        analysis = DeviceAnalysis.of(self.ctx)
        function = analysis.model.callee(node.func.value)
        if function is None or self.ctx.is_local(node.func.value):
            return
        param = self._optimizer_factory(function)
        if param is None:
            return
        if any(arg.star for arg in node.args):
            return
        names = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
        argument = argument_for(node, param, names.index(param))
        model = dotted_name(argument.value) if argument is not None else None
        if model is None:
            return
        functions = self.ctx.functions()
        scope = functions[0].body if functions else self.ctx.module
        move = _later_move(analysis, scope, model, analysis.line_of(node), node)
        if move is not None:
            message = (
                f"`{analysis.code(node, 50)}` builds an optimizer from `{model}`'s parameters before "
                f"line {analysis.line_of(move)} moves `{model}` (`{analysis.code(move, 40)}`): move the model first"
            )
            self.report(node, message)

    def _optimizer_factory(self, function: cst.FunctionDef) -> str | None:
        """The parameter of `function` whose parameters the optimizer it returns is built
        from (`return torch.optim.SGD(model.parameters(), ...)`), if it is one."""
        if self._factories is None:
            self._factories = {}
        key = id(function)
        if key not in self._factories:
            params = {p.name.value for p in (*function.params.posonly_params, *function.params.params)}
            built: dict[str, str] = {}  # optimizer locals -> the parameter they came from
            found = None
            moved = set()  # parameters the helper moves itself (`model.to(device)` first)
            for node in self.ctx.tree.walk_scope(function):
                if type(node) is cst.Call and _method_name(node) in _MOVES and type(node.func.value) is cst.Name:
                    moved.add(node.func.value.value)
                if type(node) is cst.Assign and type(node.value) is cst.Call:
                    owner = self._optimizer_over(node.value, params)
                    if owner is not None:
                        for target in node.targets:
                            if type(target.target) is cst.Name:
                                built[target.target.value] = owner
                elif type(node) is cst.Return and node.value is not None:
                    value = node.value
                    owner = built.get(value.value) if type(value) is cst.Name else None
                    if owner is None and type(value) is cst.Call:
                        owner = self._optimizer_over(value, params)
                    found = owner if found in (None, owner) else ""
            self._factories[key] = None if not found or found in moved else found
        return self._factories[key]

    def _optimizer_over(self, call: cst.Call, params: set[str]) -> str | None:
        """The parameter `p` when `call` is an optimizer class built from `p.parameters()`."""
        if not _is_optimizer_class(self.ctx, call.func) or not call.args:
            return None
        first = call.args[0]
        if first.keyword is not None and first.keyword.value != "params":
            return None
        for inner in self.ctx.tree.walk(first.value):
            if type(inner) is cst.Call and _gives_parameters(inner):
                owner = dotted_name(inner.func.value)
                if owner in params:
                    return owner
        return None

    def _bound_before(self, scope: cst.CSTNode, name: str, node: cst.CSTNode) -> cst.BaseExpression | None:
        """The value of the one assignment of `name` in `scope`, when it comes before `node`."""
        found = []
        for statement in self.ctx.tree.walk_scope(scope):
            if type(statement) is cst.Assign and any(dotted_name(t.target) == name for t in statement.targets):
                found.append(statement)
        if len(found) != 1:
            return None
        span, here = self.ctx.tree.span(found[0]), self.ctx.tree.span(node)
        return found[0].value if span is not None and here is not None and span[1] <= here[0] else None


# -- helpers ---------------------------------------------------------------------------


def _wraps_itself(analysis: DeviceAnalysis, assignment: cst.CSTNode, model: str) -> bool:
    """`model = DataParallel(model)` (or a move, `model = model.cuda()`): the same
    parameters under the name, wrapped or moved."""
    if type(assignment) is not cst.Assign or type(assignment.value) is not cst.Call:
        return False
    call = assignment.value
    if _method_name(call) in _MOVES and dotted_name(call.func.value) == model:
        return True
    qualified = analysis.ctx.qualify(call.func) or ""
    first = call.args[0].value if call.args and call.args[0].keyword is None else None
    return qualified in device_tables.MODULE_WRAPPERS and first is not None and dotted_name(first) == model


def _gives_parameters(call: cst.Call) -> bool:
    """`model.parameters()`, `model.named_parameters()`, or a method of the model named
    for its parameters (`model.get_basenet_params()`, `net.get_1x_lr_params()`)."""
    name = _method_name(call)
    if name in ("parameters", "named_parameters"):
        return True
    return name is not None and type(call.func) is cst.Attribute and name.endswith(("_params", "_parameters"))


def _is_optimizer_class(ctx, func: cst.BaseExpression, seen: frozenset[str] = frozenset()) -> bool:
    """A `torch.optim` optimizer class (`torch.optim.Adam`, not a scheduler nor the
    `Optimizer` base), or a local class built on one or on `Optimizer`."""
    qualified = ctx.qualify(func) or ""
    if qualified.startswith(device_tables.OPTIMIZER_NAMESPACE) and "lr_scheduler" not in qualified:
        last = qualified.rsplit(".", 1)[-1]
        return last[:1].isupper() and last != "Optimizer"
    if type(func) is not cst.Name or func.value in seen or ctx.is_local(func.value):
        return False
    cls = ctx.top_classes.get(func.value)
    if cls is None:
        return False
    for base in cls.bases:
        name = ctx.imports.qualify(base.value) or ""
        if name in ("torch.optim.Optimizer", "torch.optim.optimizer.Optimizer"):
            return True
        if _is_optimizer_class(ctx, base.value, seen | {func.value}):
            return True
    return False


def _scopes(tree: Tree, module: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, tuple]]:
    """The module (or a class) and every function in it, each with its enclosing
    functions (innermost first)."""
    yield module, ()
    yield from tree.functions(module)


def _assigned_key(ctx, node: cst.Call) -> str | None:
    """`model` (or `self.model`) when the construction is assigned straight to it."""
    parent = ctx.parent(node)
    if type(parent) is cst.Assign and len(parent.targets) == 1:
        return dotted_name(parent.targets[0].target)
    return None


def _touched_elsewhere(ctx, within: cst.CSTNode, key: str, here: cst.CSTNode) -> bool:
    """Does a function in `within`, other than `here`, move `key`, pass it on (but to a
    class of the file that only keeps and calls it), or rebind it globally?"""
    tree = ctx.tree
    for scope, _ in _scopes(tree, within):
        if scope is here or scope is within:
            continue
        for node in tree.walk(scope):
            if type(node) is cst.Global and any(n.name.value == key for n in node.names):
                return True
            if type(node) is cst.Call:
                if _method_name(node) in _MOVES and dotted_name(node.func.value) == key:
                    return True
                for index, arg in enumerate(node.args):
                    if dotted_name(arg.value) == key and not _kept_as_is(ctx, node, index):
                        return True
    return False


# methods of a model that leave it where it is (not `apply`, `modules`, `children`, through
# which code may move it; `parameters()` mostly feeds an optimizer)
_KEEPING = frozenset(
    {"eval", "train", "zero_grad", "state_dict", "load_state_dict", "forward", "requires_grad_", "parameters",
     "named_parameters"}
)  # fmt: skip


def _moved_only_on_several(ctx, key: str) -> cst.Call | None:
    """The first move of `key` when every move of it in the file is in the arm of an
    `if torch.cuda.device_count() > 1:`."""
    tree = ctx.tree
    moves = [
        node
        for node in tree.walk(ctx.module)
        if type(node) is cst.Call and _method_name(node) in _MOVES and _moved_name(node.func.value) == key
    ]
    inside = {
        id(node)
        for test in tree.walk(ctx.module)
        if type(test) is cst.If and ctx.guards.several_devices(test.test)
        for node in tree.walk(test.body)
    }
    if not moves or any(id(move) not in inside for move in moves):
        return None
    return moves[0]


def _moved_name(receiver: cst.BaseExpression) -> str | None:
    """`model` of `model.cuda()`, and of `nn.DataParallel(model).cuda()` (a wrapper moves
    the module it holds)."""
    if type(receiver) is cst.Call and receiver.args and receiver.args[0].keyword is None:
        return dotted_name(receiver.args[0].value)
    return dotted_name(receiver)


def _kept_as_is(ctx, call: cst.Call, index: int) -> bool:
    """Is argument `index` of `call` handed to a plain class of the file (not a module)
    that stores it as `self.<attr>` in `__init__` and only ever calls it, or calls methods
    that leave it where it is (`self.model(x)`, `self.model.eval()`): an attack, an
    evaluator, a Grad-CAM that runs the model where it is?"""
    if type(call.func) is not cst.Name or ctx.is_local(call.func.value) or any(a.star for a in call.args):
        return False
    cls = ctx.top_classes.get(call.func.value)
    if cls is None or DeviceAnalysis.of(ctx).is_module_class(cls):
        return False
    init = next((s for s in cls.body.body if type(s) is cst.FunctionDef and s.name.value == "__init__"), None)
    if init is None or init.params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or init.params.star_kwarg:
        return False
    params = [p.name.value for p in (*init.params.posonly_params, *init.params.params)]
    arg = call.args[index]
    if arg.keyword is not None:
        name = arg.keyword.value
    elif index + 1 < len(params):
        name = params[index + 1]
    else:
        return False
    if len(params) < 1 or name not in params[1:]:
        return False
    me = params[0]
    tree = ctx.tree
    attrs = {id(n.attr) for n in tree.walk(init.body) if type(n) is cst.Attribute}  # `self.model`: not the name
    uses = [n for n in tree.walk(init.body) if type(n) is cst.Name and n.value == name and id(n) not in attrs]
    stored = [
        node
        for node in tree.walk(init.body)
        if type(node) is cst.Assign
        and type(node.value) is cst.Name
        and node.value.value == name
        and len(node.targets) == 1
        and type(node.targets[0].target) is cst.Attribute
        and dotted_name(node.targets[0].target.value) == me
    ]
    if len(stored) != 1 or len(uses) != 1:
        return False  # also used another way in `__init__`
    key = f"{me}.{stored[0].targets[0].target.attr.value}"
    every, plain = set(), {id(stored[0].targets[0].target)}
    for node in tree.walk(cls):
        if type(node) is cst.Attribute and dotted_name(node) == key:
            every.add(id(node))
        elif type(node) is cst.Call:
            func = node.func
            if dotted_name(func) == key:
                plain.add(id(func))  # `self.model(adv)`
            elif type(func) is cst.Attribute and dotted_name(func.value) == key and func.attr.value in _KEEPING:
                plain.add(id(func.value))  # `self.model.eval()`
    return every <= plain


def _moved_after(tree: Tree, scope: cst.CSTNode, key: str, node: cst.CSTNode) -> bool:
    """Does code of `scope` after `node` move `key` (`model.to(device)`, `model.cuda()`)?"""
    span = tree.span(node)
    if span is None:
        return False
    for child in tree.walk_scope(scope):
        if type(child) is cst.Call and _method_name(child) in _MOVES and dotted_name(child.func.value) == key:
            where = tree.span(child)
            if where is not None and where[0] >= span[1]:
                return True
    return False


def _method_name(call: cst.Call) -> str | None:
    return call.func.attr.value if type(call.func) is cst.Attribute else None


def _batch_target(ctx, node: cst.For) -> cst.BaseExpression | None:
    """The part of the loop target that holds the batch (`i, batch` of `enumerate`);
    None where that is not known (a progress bar bound to a name: `for i, b in pbar`)."""
    target = node.target
    iterable = node.iter
    while type(iterable) is cst.Call and (ctx.qualify(iterable.func) or dotted_name(iterable.func) or "") in _WRAPPERS:
        if not iterable.args or iterable.args[0].keyword is not None:
            break
        iterable = iterable.args[0].value  # `tqdm(enumerate(loader), total=n)`
    if type(iterable) is cst.Name and _names_a_wrapper(ctx, iterable.value):
        return None
    if type(iterable) is cst.Call and dotted_name(iterable.func) == "enumerate":
        if type(target) in (cst.Tuple, cst.List) and len(target.elements) == 2:
            return target.elements[1].value
        return None
    if type(iterable) is cst.Call and dotted_name(iterable.func) == "zip":
        return None
    return target


_WRAPPERS = device_tables.ITERATION_WRAPPERS


def _names_a_wrapper(ctx, name: str) -> bool:
    """Is `name` assigned a progress bar or iterator (`pbar = tqdm(enumerate(loader))`) in
    the function around?"""
    functions = ctx.functions()
    scope = functions[0] if functions else ctx.module
    for node in ctx.tree.walk_scope(scope):
        if type(node) is cst.Assign and any(dotted_name(t.target) == name for t in node.targets):
            value = node.value
            if type(value) is cst.Call and (ctx.qualify(value.func) or dotted_name(value.func) or "") in _WRAPPERS:
                return True
    return False


def _rebinding(target: cst.BaseExpression | None, body: cst.IndentedBlock, device: str) -> str | None:
    """The statement that moves the batch: by the target's shape and the batch's uses."""
    if type(target) in (cst.Tuple, cst.List):
        names = [e.value for e in target.elements]
        if not names or not all(type(n) is cst.Name for n in names):
            return None
        used = [n.value for n in names if any(_uses(body, n.value))]
        if not used:
            return None
        return f"{', '.join(used)} = {', '.join(f'{n}.to({device})' for n in used)}"
    if type(target) is not cst.Name:
        return None
    name = target.value
    shapes = {_shape_of_use(use, parent) for use, parent in _uses(body, name)}
    if shapes == {"dict"}:
        return f"{name} = {{k: v.to({device}) for k, v in {name}.items()}}"
    if shapes == {"sequence"}:
        return f"{name} = [t.to({device}) for t in {name}]"
    if shapes == {"tensor"}:
        return f"{name} = {name}.to({device})"
    return None


def _uses(body: cst.CSTNode, name: str) -> Iterator[tuple[cst.Name, cst.CSTNode]]:
    """Each load of `name` under `body`, with its parent node."""
    stack = [body]
    while stack:
        node = stack.pop()
        for child in children(node):
            if type(child) is cst.Name and child.value == name:
                if not (type(node) is cst.Attribute and node.attr is child):
                    yield child, node
            stack.append(child)


def _shape_of_use(use: cst.Name, parent: cst.CSTNode) -> str:
    if type(parent) is cst.Subscript and parent.value is use and len(parent.slice) == 1:
        index = parent.slice[0].slice
        if type(index) is cst.Index:
            if type(index.value) in (cst.SimpleString, cst.ConcatenatedString):
                return "dict"
            if type(index.value) is cst.Integer:
                return "sequence"
        return "other"
    if type(parent) is cst.Assign and parent.value is use:
        targets = [t.target for t in parent.targets]
        if all(type(t) in (cst.Tuple, cst.List) for t in targets):
            return "sequence"
        return "other"
    if type(parent) is cst.Arg:
        return "dict" if parent.star == "**" else "other" if parent.star else "tensor"  # `model(**batch)`
    if type(parent) is cst.Attribute and parent.value is use:
        return "other"
    if type(parent) in (cst.BinaryOperation, cst.Comparison, cst.ComparisonTarget):
        return "tensor"
    return "other"


def _moves_model(analysis: DeviceAnalysis, receiver: cst.BaseExpression, model: str) -> bool:
    """Is `receiver` of a move `model`, or a wrapper of it (`DataParallel(net).cuda()`)?"""
    if dotted_name(receiver) == model:
        return True
    if type(receiver) is cst.Call and receiver.args and receiver.args[0].keyword is None:
        wrapper = analysis.ctx.qualify(receiver.func) or ""
        return wrapper in device_tables.MODULE_WRAPPERS and dotted_name(receiver.args[0].value) == model
    return False


def _off_path(tree: Tree, scope: cst.CSTNode, first: cst.CSTNode, later: cst.CSTNode) -> bool:
    """Is `later` never run after `first`: in the other arm of an `if` of `scope`, or after
    an `if` whose arm holding `first` ends in `return` or `raise`?"""
    a, b = tree.span(first), tree.span(later)
    if a is None or b is None:
        return False
    for statement in tree.walk_scope(scope):
        if type(statement) is not cst.If:
            continue
        body = tree.span(statement.body)
        orelse = tree.span(statement.orelse) if statement.orelse is not None else None
        if body is None:
            continue
        if orelse is not None and in_other_arms(body, orelse, a, b):
            return True
        if body[0] <= a[0] < body[1] and not body[0] <= b[0] < body[1]:
            last = statement.body.body[-1] if statement.body.body else None
            if type(last) is cst.SimpleStatementLine and type(last.body[-1]) in (cst.Return, cst.Raise):
                return True
    return False


def _later_move(analysis: DeviceAnalysis, scope: cst.CSTNode, model: str, line: int,
                origin: cst.CSTNode | None = None) -> cst.Call | None:  # fmt: skip
    """The first move of `model` after `line` in this scope, unless it is rebound first
    (or, given the optimizer's `origin`, one that never runs after it)."""
    moves = []
    rebinds = []
    wrapped: set[int] = set()  # the targets of `model = DataParallel(model)`: the same parameters
    for node in analysis.ctx.tree.walk_scope(scope):
        if type(node) is cst.Call and _method_name(node) in _MOVES and _moves_model(analysis, node.func.value, model):
            value = analysis.value_of(node)
            if value.origin is node and value.source is Source.MOVE and not value.device.is_cpu:
                moves.append(node)
        elif type(node) is cst.AssignTarget and dotted_name(node.target) == model:
            rebinds.append(node)
        elif type(node) is cst.Assign and _wraps_itself(analysis, node, model):
            wrapped.update(id(t) for t in node.targets)
    after = [m for m in moves if analysis.line_of(m) > line]
    if origin is not None:
        tree = analysis.ctx.tree
        after = [m for m in after if not _off_path(tree, scope, origin, m)]
        if any(analysis.line_of(m) < line and not _off_path(tree, scope, m, origin) for m in moves):
            return None  # moved first on this path: a later move is not the first
    if not after:
        return None
    first = min(after, key=analysis.line_of)
    if origin is not None:  # a rebinding in the other arm of an `if` does not run on this path
        rebinds = [r for r in rebinds if not _off_path(analysis.ctx.tree, scope, origin, r)]
    if any(line < analysis.line_of(r) < analysis.line_of(first) for r in rebinds if id(r) not in wrapped):
        return None
    return first
