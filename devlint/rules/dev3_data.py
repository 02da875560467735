"""DEV3, the data pipeline: loaders and datasets that meet the accelerator too early.

These rules read the tree and the import table: which calls set the default device,
which classes are datasets, and which expressions name an accelerator.
"""

from __future__ import annotations

import libcst as cst

from devlint.analysis import device_tables
from devlint.analysis.devices import DeviceAnalysis
from devlint.analysis.guards import accelerator_type
from devlint.analysis.literals import torch_device_call
from devlint.analysis.tree import apart, argument_for, dotted_name, in_other_arms, keyword_arg, string_value
from devlint.fix.plan import FixPlan, InsertAfter
from devlint.rules.base import Rule

_RANDOM_SAMPLERS = frozenset({"torch.utils.data.RandomSampler", "torch.utils.data.sampler.RandomSampler"})
_DEFAULT_DEVICE = "torch.set_default_device"
_DEFAULT_TENSOR_TYPE = "torch.set_default_tensor_type"
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, ...): positions of
# the arguments that decide whether it builds a RandomSampler of its own.
_LOADER_POSITIONS = {"shuffle": 2, "sampler": 3, "batch_sampler": 4}
_LOADER_GENERATOR_POSITION = 12
_SAMPLER_GENERATOR_POSITION = 3  # RandomSampler(data_source, replacement, num_samples, generator)


def _class_body(cls: cst.ClassDef) -> list[cst.CSTNode]:
    return list(cls.body.body) if type(cls.body) is cst.IndentedBlock else []


def _assignments(nodes) -> dict[str, list[cst.BaseExpression]]:
    """Every value assigned to each plain name among `nodes`."""
    bound: dict[str, list[cst.BaseExpression]] = {}
    for node in nodes:
        if type(node) is cst.Assign:
            for target in node.targets:
                if type(target.target) is cst.Name:
                    bound.setdefault(target.target.value, []).append(node.value)
    return bound


def _may_be_no_workers(value: cst.BaseExpression, bound: dict[str, list[cst.BaseExpression]]) -> bool:
    """Is `num_workers=value` 0 on some branch: a literal 0, a name only ever assigned 0,
    or a conditional with such a branch? Anything else may well start workers."""
    if type(value) is cst.Integer:
        return value.evaluated_value == 0
    if type(value) is cst.IfExp:
        return _may_be_no_workers(value.body, bound) or _may_be_no_workers(value.orelse, bound)
    if type(value) is cst.Name:
        assigned = bound.get(value.value, [])
        return bool(assigned) and any(_may_be_no_workers(v, {}) for v in assigned)
    return False


def _calls_of(value: cst.BaseExpression | None, bound: dict[str, list[cst.BaseExpression]]) -> list[cst.Call]:
    """The calls `value` is, directly or through the names it was assigned from."""
    if type(value) is cst.Call:
        return [value]
    if type(value) is cst.Name:
        return [v for v in bound.get(value.value, []) if type(v) is cst.Call]
    return []


def _instantiated(value: cst.BaseExpression, bound: dict[str, list[cst.BaseExpression]], classes: set[str],
                  depth: int = 0) -> set[str]:  # fmt: skip
    """The file's classes among `classes` that `value` instantiates: `C()`, or an element
    of the list or tuple a call such as `Compose([...])` is given, through names too."""
    if depth > 4:
        return set()
    if type(value) is cst.Name:
        found: set[str] = set()
        for assigned in bound.get(value.value, []):
            found |= _instantiated(assigned, bound, classes, depth + 1)
        return found
    if type(value) in (cst.List, cst.Tuple):
        found = set()
        for element in value.elements:
            found |= _instantiated(element.value, bound, classes, depth + 1)
        return found
    if type(value) is cst.Call:
        if type(value.func) is cst.Name and value.func.value in classes:
            return {value.func.value}
        found = set()
        for arg in value.args:
            if type(arg.value) in (cst.List, cst.Tuple):
                found |= _instantiated(arg.value, bound, classes, depth + 1)
        return found
    return set()


_SAMPLING_OPTIONS = frozenset({"generator", "sampler", "batch_sampler", "shuffle"})


def _options_without_sampling(value: cst.BaseExpression) -> bool:
    """A dict literal (or a choice of two) whose keys are strings, none of them about
    sampling."""
    if type(value) is cst.IfExp:
        return _options_without_sampling(value.body) and _options_without_sampling(value.orelse)
    if type(value) is not cst.Dict:
        return False
    for element in value.elements:
        key = string_value(element.key) if type(element) is cst.DictElement else None
        if key is None or key in _SAMPLING_OPTIONS:
            return False
    return True


def _has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def _names_accelerator_literal(ctx, node: cst.BaseExpression) -> bool:
    """`"cuda"`, `"mps:0"`, `torch.device("cuda")`."""
    literal = string_value(node)
    if literal is not None:
        return accelerator_type(literal) is not None
    return torch_device_call(ctx, node) is not None


class LoaderUnderAcceleratorDefault(Rule):
    """
    ## What it does
    Checks for a shuffling `DataLoader` or a `RandomSampler` without `generator=` after the default device was set to an accelerator.

    The default device is set by `torch.set_default_device(<accelerator>)` or
    `torch.set_default_tensor_type(torch.cuda.FloatTensor)` (also the string form),
    earlier in the same function or at module level, guarded or not, or inside a
    module-level helper called earlier (`setup()`). A name passed to
    `set_default_device` counts as an accelerator, since the code sets it to run there.

    ## Why is this bad?
    The sampler draws its permutation with `torch.randperm`, which now runs on the
    accelerator, with a CPU generator: the first epoch fails with `Expected a 'cuda'
    device type for generator but found 'cpu'`.

    ## Example
        torch.set_default_device("cuda")
        loader = DataLoader(dataset, batch_size=32, shuffle=True)

    ## Use instead
        torch.set_default_device("cuda")
        generator = torch.Generator(device=torch.get_default_device())
        loader = DataLoader(dataset, batch_size=32, shuffle=True, generator=generator)

    ## Fix safety
    Unsafe: the permutation is drawn by another generator, so the batches come in
    another order. The generator is built on the device given to `set_default_device`
    when that is a name, on `torch.get_default_device()` when a helper set it, on
    `torch.empty(0).device` (where new tensors go) after `set_default_tensor_type`, which
    may have run only under a flag, else on the device binding.
    """

    code = "DEV305"
    name = "loader-under-accelerator-default"
    fixable = True

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.qualify(node.func)
        if qualified in device_tables.DATALOADERS:
            if not self._shuffles(node):
                return
            made = "`DataLoader(..., shuffle=True)`"
        elif qualified in _RANDOM_SAMPLERS:
            if _has_star(node) or argument_for(node, "generator", _SAMPLER_GENERATOR_POSITION) is not None:
                return
            made = "`RandomSampler(...)`"
        else:
            return
        found = self._default_device_setting(node)
        caller = None
        if found is None:
            by_caller = self._caller_setting()
            if by_caller is None:
                return
            setting, caller, caller_function = by_caller
            found = setting, None
        setting, helper = found
        shown = " ".join(self.ctx.module.code_for_node(setting).split())
        if caller is not None:
            called, line = self.ctx.top_level_statement().name.value, DeviceAnalysis.of(self.ctx).line_of(caller)
            shown = f"{shown}` in `{caller_function.name.value}()`, which calls `{called}()` at line {line},"
        elif helper is not None:
            shown = f"{self.ctx.module.code_for_node(helper.func)}()` (which calls `{shown}`)"
        else:
            shown = f"{shown}`"
        message = (
            f"{made} after `{shown} draws its permutation on the accelerator with a CPU generator and fails "
            "(`Expected a 'cuda' device type for generator`): pass `generator=torch.Generator(device=...)`"
        )
        self.report(node, message, self._fix(node, setting, helper or caller))

    def _shuffles(self, node: cst.Call) -> bool:
        if self._may_pass_a_generator(node) or argument_for(node, "generator", _LOADER_GENERATOR_POSITION) is not None:
            return False
        if argument_for(node, "sampler", 3) is not None or argument_for(node, "batch_sampler", 4) is not None:
            return False  # a sampler of its own: reported at the RandomSampler, if it is one
        shuffle = argument_for(node, "shuffle", _LOADER_POSITIONS["shuffle"])
        return shuffle is not None and type(shuffle.value) is cst.Name and shuffle.value.value == "True"

    def _may_pass_a_generator(self, node: cst.Call) -> bool:
        """Could `*args`/`**kwargs` carry a generator or sampler? Not `**kwargs` bound in
        the same scope only to dict literals without one (`{"num_workers": 1} if use_cuda
        else {}`)."""
        for arg in node.args:
            if arg.star == "*" or (arg.star == "**" and not self._plain_options(arg.value)):
                return True
        return False

    def _plain_options(self, value: cst.BaseExpression) -> bool:
        if type(value) is not cst.Name:
            return False
        functions = self.ctx.functions()
        scope = functions[0] if functions else self.ctx.module
        assigned = [
            node.value
            for node in self.ctx.tree.walk_scope(scope)
            if type(node) is cst.Assign and any(dotted_name(t.target) == value.value for t in node.targets)
        ]
        if self._filled_in(scope, value.value):
            return False  # `kwargs.setdefault("generator", ...)`, `kwargs["generator"] = ...`
        if type(scope) is cst.FunctionDef and scope.params.star_kwarg is not None:
            if scope.params.star_kwarg.name.value == value.value:
                # `**kwargs` of the function: what its callers pass may hold a generator
                if self._extra_keywords_passed(scope, value.value):
                    return False
                return all(_options_without_sampling(v) for v in assigned)
        return bool(assigned) and all(_options_without_sampling(v) for v in assigned)

    def _filled_in(self, scope: cst.CSTNode, name: str) -> bool:
        """Does `scope` add entries to the dict `name` (`update`, `setdefault`, an item
        assignment, `|=`)?"""
        for node in self.ctx.tree.walk_scope(scope):
            if type(node) is cst.Call and type(node.func) is cst.Attribute and dotted_name(node.func.value) == name:
                if node.func.attr.value in ("update", "setdefault", "__setitem__"):
                    return True
            elif type(node) is cst.AssignTarget and type(node.target) is cst.Subscript:
                if dotted_name(node.target.value) == name:
                    return True
            elif type(node) is cst.AugAssign and dotted_name(node.target) == name:
                return True
        return False

    def _extra_keywords_passed(self, function: cst.FunctionDef, name: str) -> bool:
        """Is `name` the `**` parameter of `function`, and may a call fill it: a call from
        outside the file (a function not called here, a method), or one in the file that
        passes a keyword the other parameters do not take, or `**options`?"""
        star = function.params.star_kwarg
        if star is None or star.name.value != name:
            return False
        model = DeviceAnalysis.of(self.ctx).model
        if model.callee(function.name.value) is not function:
            return True
        params = function.params
        named = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
        calls = [
            n
            for n in self.ctx.tree.nodes
            if type(n) is cst.Call and type(n.func) is cst.Name and n.func.value == function.name.value
        ]
        return not calls or any(
            a.star == "**" or (a.keyword is not None and a.keyword.value not in named) for c in calls for a in c.args
        )

    def _default_device_setting(self, node: cst.Call) -> tuple[cst.Call, cst.Call | None] | None:
        """The last call before `node` (in its function, else at module level) that sets
        an accelerator as the default device, with the call of the module-level helper
        that makes it (`setup()`, whose body calls `torch.set_default_device("cuda")`)
        when it is made there."""
        functions = self.ctx.functions()
        scopes = [functions[0]] if functions else []
        scopes.append(self.ctx.module)
        # code at module level runs up to the loader itself (`if __name__ == "__main__":`
        # sets the default, then builds it); a function's loader, after the statements
        # before the function
        top = self.ctx.top_level_statement() if functions else node
        entry = None
        if type(top) is cst.FunctionDef:
            # `main()` called by the module after `options.initialize()` set the default
            entry = self._module_call_of(top)
            top = entry or top
        elif type(top) is cst.ClassDef and functions and self.ctx.parent(self.ctx.parent(functions[-1])) is top:
            # `appr.train(...)` of an instance of the file's class, called by the module
            # after it set the default
            entry = self._module_method_call_of(top, functions[-1])
            top = entry or top
        around = [s for s in reversed(self.ctx.ancestors) if type(s) is cst.If]  # the loader's `if`s
        around_entry = self._ifs_around(entry) if entry is not None else []
        for scope in scopes:
            found = None
            for candidate in self.ctx.tree.walk_scope(scope):
                if candidate is node or candidate is top:
                    break
                if type(candidate) is not cst.Call or self._apart(candidate, node, around):
                    continue
                if scope is self.ctx.module and self._apart(candidate, entry, around_entry):
                    continue  # in the other arm of the `if` that calls `main()`
                if self._sets_cpu_default(candidate):
                    if found is not None and self._always_after(found[1] or found[0], candidate, scope):
                        found = None  # `set_default_tensor_type(torch.FloatTensor)` after it: back on the CPU
                elif self._sets_accelerator_default(candidate):
                    found = (candidate, None)
                elif type(candidate.func) is cst.Name:
                    inner = self._helper_setting(candidate.func.value, frozenset())
                    if inner is not None:
                        found = (inner, candidate)
                elif type(candidate.func) is cst.Attribute:
                    # `option.initialize()`: a method of the file's class, on an instance of it
                    method = self._own_method(candidate.func)
                    inner = self._body_setting(method, frozenset()) if method is not None else None
                    if inner is not None:
                        found = (inner, candidate)
            if found is not None:
                return found
        return None

    def _caller_setting(self) -> tuple[cst.Call, cst.Call, cst.FunctionDef] | None:
        """For a loader built in a module-level function (`setup_data_loaders()`): an
        accelerator default that a module-level function calling it sets before the call
        (`main()` sets `torch.set_default_tensor_type(...)`, then calls the helper), with
        that call."""
        function = self.ctx.top_level_statement()
        if (
            type(function) is not cst.FunctionDef
            or not self.ctx.functions()
            or self.ctx.functions()[-1] is not function
        ):
            return None
        name = function.name.value
        model = DeviceAnalysis.of(self.ctx).model
        for caller in model.functions.values():
            if caller is None or caller is function:
                continue
            found = None
            for candidate in self.ctx.tree.walk_scope(caller):
                if type(candidate) is not cst.Call:
                    continue
                if type(candidate.func) is cst.Name and candidate.func.value == name:
                    if found is not None and not self._apart(found, candidate, self._ifs_of(caller)):
                        return found, candidate, caller
                    continue
                if self._sets_cpu_default(candidate):
                    if found is not None and self._always_after(found, candidate, caller):
                        found = None
                elif self._sets_accelerator_default(candidate):
                    found = candidate
        return None

    def _ifs_of(self, function: cst.FunctionDef) -> list[cst.If]:
        return [s for s in self.ctx.tree.walk_scope(function) if type(s) is cst.If]

    def _own_method(self, func: cst.Attribute) -> cst.FunctionDef | None:
        """The method of a class of the file that `receiver.name(...)` calls, where the
        receiver is an instance of that class (`BaseOptions().parse()`, `opt.parse()`)."""
        analysis = DeviceAnalysis.of(self.ctx)
        method = analysis.model.only_method_named(func.attr.value)
        cls = analysis.class_of(method) if method is not None else None
        return method if cls is not None and self._instance_of(func.value, cls) else None

    def _instance_of(self, receiver: cst.BaseExpression, cls: cst.ClassDef) -> bool:
        """Is `receiver` an instance of the file's class `cls` (`Options()`, `opt`)?"""
        if type(receiver) is cst.Call and dotted_name(receiver.func) == cls.name.value:
            return True
        return DeviceAnalysis.of(self.ctx).value_of(receiver).instance_of == cls.name.value

    def _ifs_around(self, node: cst.CSTNode) -> list[cst.If]:
        """The module-level `if` statements that hold `node` (`main()` under `__main__`)."""
        tree = self.ctx.tree
        at = tree.span(node)
        return [
            s
            for s in tree.walk_scope(self.ctx.module)
            if type(s) is cst.If
            and at is not None
            and (span := tree.span(s)) is not None
            and span[0] <= at[0] < span[1]
        ]

    def _apart(self, first: cst.CSTNode, second: cst.CSTNode | None, ifs: list[cst.If]) -> bool:
        """Are the two in different arms of one of `ifs` (so never both on one path)?"""
        return apart(self.ctx.tree, first, second, ifs)

    def _module_call_of(self, function: cst.FunctionDef) -> cst.Call | None:
        """The first call of a top-level function by the module body (`main()`)."""
        for candidate in self.ctx.tree.walk_scope(self.ctx.module):
            if (
                type(candidate) is cst.Call
                and type(candidate.func) is cst.Name
                and candidate.func.value == function.name.value
            ):
                return candidate
        return None

    def _module_method_call_of(self, cls: cst.ClassDef, method: cst.FunctionDef) -> cst.Call | None:
        """The first call the module body makes of `method` on an instance of `cls`
        (`trainer = Trainer(...)`, then `trainer.train(...)`)."""
        for candidate in self.ctx.tree.walk_scope(self.ctx.module):
            if (
                type(candidate) is cst.Call
                and type(candidate.func) is cst.Attribute
                and candidate.func.attr.value == method.name.value
                and self._instance_of(candidate.func.value, cls)
            ):
                return candidate
        return None

    def _helper_setting(self, name: str, seen: frozenset[str]) -> cst.Call | None:
        """The accelerator default that calling module-level function `name` sets, on
        any path through its body (or through a helper it calls in turn)."""
        if name in seen or self.ctx.is_local(name):
            return None
        helper = DeviceAnalysis.of(self.ctx).model.callee(name)
        if helper is None:
            return None
        return self._body_setting(helper, seen | {name})

    def _body_setting(self, helper: cst.FunctionDef, seen: frozenset[str]) -> cst.Call | None:
        """The accelerator default a function's body sets on any path (or a helper it calls)."""
        found = None
        for candidate in self.ctx.tree.walk_scope(helper):
            if type(candidate) is not cst.Call:
                continue
            if self._sets_cpu_default(candidate):
                if found is not None and self._always_after(found, candidate, helper):
                    found = None  # a warm-up that sets the default back
            elif self._sets_accelerator_default(candidate):
                found = candidate
            elif type(candidate.func) is cst.Name:
                found = self._helper_setting(candidate.func.value, seen) or found
        return found

    def _always_after(self, setting: cst.CSTNode, reset: cst.CSTNode, scope: cst.CSTNode) -> bool:
        """Does `reset` run wherever `setting` did: no `if` of `scope` holds `reset`
        without holding `setting` too (`if not args.cuda: ...` after `if args.cuda: ...`
        is another path)?"""
        tree = self.ctx.tree
        a, b = tree.span(setting), tree.span(reset)
        if a is None or b is None:
            return False
        for statement in tree.walk_scope(scope):
            if type(statement) is not cst.If:
                continue
            span = tree.span(statement)
            if span is None or not span[0] <= b[0] < span[1]:
                continue
            if not span[0] <= a[0] < span[1]:
                return False  # only under a condition of its own
            body, orelse = tree.span(statement.body), tree.span(statement.orelse) if statement.orelse else None
            if body is not None and orelse is not None and in_other_arms(body, orelse, a, b):
                return False  # the other arm of the same `if`
        return True

    def _sets_cpu_default(self, call: cst.Call) -> bool:
        qualified = self.ctx.qualify(call.func)
        if qualified not in (_DEFAULT_DEVICE, _DEFAULT_TENSOR_TYPE) or not call.args or call.args[0].keyword:
            return False
        value = call.args[0].value
        named = string_value(value) or self.ctx.qualify(value) or ""
        if qualified == _DEFAULT_DEVICE:
            return named.split(":", 1)[0] == "cpu"
        return named.startswith("torch.") and not named.startswith("torch.cuda.")

    def _sets_accelerator_default(self, call: cst.Call) -> bool:
        qualified = self.ctx.qualify(call.func)
        if qualified not in (_DEFAULT_DEVICE, _DEFAULT_TENSOR_TYPE) or not call.args or call.args[0].keyword:
            return False
        value = call.args[0].value
        if qualified == _DEFAULT_DEVICE:
            if type(value) in (cst.Name, cst.Attribute):
                return not (type(value) is cst.Name and value.value == "None")
            return _names_accelerator_literal(self.ctx, value)
        named = string_value(value) or self.ctx.qualify(value) or ""
        return named.startswith("torch.cuda.")

    def _fix(self, node: cst.Call, setting: cst.Call, helper: cst.Call | None) -> FixPlan | None:
        torch, edits = self.binding.torch()
        argument = setting.args[0].value
        if self.ctx.qualify(setting.func) == _DEFAULT_TENSOR_TYPE:
            # where new tensors go: on CUDA only where the setting ran (`if args.cuda:`), and
            # `get_default_device()` does not see tensor types
            code = f"{torch}.empty(0).device"
        elif helper is not None:  # the helper's names are not the caller's
            code = self._default_device_code(torch)
        elif self.ctx.qualify(setting.func) == _DEFAULT_DEVICE and type(argument) is cst.Name:
            code = argument.value
        elif self._only_sometimes(setting, node):
            # `if torch.cuda.is_available(): torch.set_default_device("cuda")` leaves the
            # CPU default where the check fails (a Mac), where the binding names the MPS
            code = self._default_device_code(torch)
        else:
            device = self.binding.device()
            if device is None:
                return None
            code, edits = device.code, (*edits, *device.edits)
        last = node.args[-1].value
        return FixPlan.unsafe(InsertAfter(last, f", generator={torch}.Generator(device={code})"), *edits)

    def _default_device_code(self, torch: str) -> str:
        """Where new tensors go: `get_default_device()` from torch 2.3 on."""
        return (
            f"{torch}.get_default_device()" if self.ctx.config.torch_version >= (2, 3) else f"{torch}.empty(0).device"
        )

    def _only_sometimes(self, setting: cst.CSTNode, loader: cst.CSTNode) -> bool:
        """Is `setting` under an `if` (or loop) that does not hold `loader` too?"""
        tree = self.ctx.tree
        at, to = tree.span(setting), tree.span(loader)
        if at is None or to is None:
            return True
        for statement in tree.nodes:
            if type(statement) not in (cst.If, cst.While, cst.For, cst.Try):
                continue
            span = tree.span(statement)
            if span is not None and span[0] <= at[0] < span[1] and not span[0] <= to[0] < span[1]:
                return True
        return False


_DATASET_BASES = frozenset(
    {"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset", "torch.utils.data.IterableDataset",
     "torch.utils.data.dataset.IterableDataset"}
)  # fmt: skip
_ITEM_METHODS = frozenset({"__init__", "__getitem__", "__getitems__", "__iter__"})
_WORKER_METHODS = ("__getitem__", "__getitems__", "__iter__")  # what the workers call
_ACCELERATOR_CALLS = frozenset({"torch.accelerator.current_accelerator"})


class AcceleratorTensorInDataset(Rule):
    """
    ## What it does
    Checks for a `Dataset` that creates tensors on an accelerator or moves them there in `__init__`, `__getitem__` or `__iter__` (or a method they call on `self`).

    A dataset is a subclass of `torch.utils.data.Dataset` or `IterableDataset`, also
    through local base classes. Reported: `.cuda()`, `.to(d)` and `device=d` in a
    `torch` call, where `d` is an accelerator literal, a module-level device binding
    that names the accelerator, or a `self.<attr>` the class assigned from one. A
    device the dataset was handed (a parameter) may be the CPU and is not reported.
    The same holds of a module-level function passed as `collate_fn=` to a
    `DataLoader` whose `num_workers` is given and 0 on no branch, and of the `__call__` of
    a module-level class whose instance transforms the items of a dataset such a loader
    reads (`transform=ToCuda()`, alone or in a `Compose` list): they run in the workers
    too, unless the workers are spawned (`multiprocessing_context=`, or
    `set_start_method("spawn")` in the file). SPEC names only the dataset's methods.
    A dataset class that no other class of the file derives from, whose every instance
    the file builds is read by DataLoaders without worker processes (`num_workers` not
    given, or 0) or with spawned ones (`multiprocessing_context=` other than `"fork"`), is
    not reported: its items are made where the accelerator works (preprocessing on the
    GPU on purpose).

    ## Why is this bad?
    With `num_workers > 0` the `DataLoader` workers are forked processes, which cannot
    use CUDA: the first batch fails with `Cannot re-initialize CUDA in forked
    subprocess`. With no workers, each item is its own small host-to-device copy, and
    `pin_memory=True` can no longer help.

    ## Example
        class Pairs(torch.utils.data.Dataset):
            def __getitem__(self, i):
                return self.x[i].cuda(), self.y[i].cuda()

    ## Use instead
        class Pairs(torch.utils.data.Dataset):
            def __getitem__(self, i):
                return self.x[i], self.y[i]

        loader = DataLoader(Pairs(), batch_size=64, pin_memory=True)
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    ## Fix safety
    No fix: the move belongs in the training loop, which devlint cannot find from the dataset.
    """

    code = "DEV306"
    name = "accelerator-tensor-in-dataset"

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self._datasets: dict[int, bool] = {}
        self._helpers: dict[int, frozenset[str]] = {}  # see `_item_helpers`
        self._classes: dict[str, cst.ClassDef] | None = None  # the file's classes by name
        self._accelerator_names: frozenset[str] | None = None
        self._collators: frozenset[str] | None = None  # functions collating for loaders with workers
        self._transforms: frozenset[str] | None = None  # classes transforming items in workers
        self._loaders: list | None = None  # DataLoaders with forked workers, and their scopes' names
        self._in_process: frozenset[str] | None = None  # dataset classes read by no worker process
        self._module_values: dict[str, list[cst.BaseExpression]] | None = None  # module-level assignments

    def visit_Call(self, node: cst.Call) -> None:
        method = self._dataset_method() or self._transform_method()
        if method is None:
            collate = self._collate_function()
            if collate is None:
                return
            method = None, collate
        cls, function = method
        func = node.func
        if type(func) is cst.Attribute and self.ctx.qualify(func) is None:
            if func.attr.value == "cuda":
                self._report(node, function, "`.cuda()`")
                return
            if func.attr.value == "to":
                target = argument_for(node, "device", 0)
                if target is not None and self._is_accelerator(target.value, cls, function):
                    self._report(node, function, f"`.to({self.source_of(target.value)})`")
                return
        qualified = self.ctx.qualify(func) or ""
        if qualified.startswith("torch."):
            target = keyword_arg(node, "device")
            if target is not None and self._is_accelerator(target.value, cls, function):
                self._report(node, function, f"`device={self.source_of(target.value)}`")

    def _report(self, node: cst.Call, function: cst.FunctionDef, what: str) -> None:
        if function.name.value == "__call__":
            cls = self.ctx.parent(self.ctx.parent(function))
            self.report(
                node,
                f"{what} in `{cls.name.value}.__call__`, a transform of a dataset that DataLoader worker processes "
                "read, puts items on the accelerator: the workers cannot use CUDA (`Cannot re-initialize CUDA in "
                "forked subprocess`); transform CPU tensors and move each batch in the training loop "
                "(`pin_memory=True`, `.to(device, non_blocking=True)`)",
            )
            return
        if function.name.value in self._collate_functions():
            self.report(
                node,
                f"{what} in `{function.name.value}`, which collates batches in DataLoader worker processes, puts "
                "them on the accelerator: the workers cannot use CUDA (`Cannot re-initialize CUDA in forked "
                "subprocess`); collate CPU tensors and move each batch in the training loop (`pin_memory=True`, "
                "`.to(device, non_blocking=True)`)",
            )
            return
        self.report(
            node,
            f"{what} in `{function.name.value}` puts dataset tensors on the accelerator: DataLoader workers cannot "
            "use CUDA (`Cannot re-initialize CUDA in forked subprocess`); return CPU tensors and move each batch "
            "in the training loop (`pin_memory=True`, `.to(device, non_blocking=True)`)",
        )

    def _dataset_method(self) -> tuple[cst.ClassDef, cst.FunctionDef] | None:
        """The dataset class and its item method around the current node, if any."""
        ancestors = self.ctx.ancestors
        for index in range(len(ancestors) - 1, 0, -1):
            if type(ancestors[index]) is not cst.ClassDef:
                continue
            cls = ancestors[index]
            function = next((n for n in ancestors[index + 1 :] if type(n) is cst.FunctionDef), None)
            if function is None:
                return None
            if self.ctx.parent(self.ctx.parent(function)) is not cls or not self._is_dataset(cls):
                return None  # a method of the class itself, not of a class or function inside it
            if function.name.value not in _ITEM_METHODS and function.name.value not in self._item_helpers(cls):
                return None
            if cls.name.value in self._served_in_process():
                return None
            return cls, function
        return None

    def _served_in_process(self) -> frozenset[str]:
        """The file's dataset classes that only DataLoaders without forked worker processes
        read: every instance the file builds is the dataset of a DataLoader of the file
        whose `num_workers` is not given, or 0, or whose `multiprocessing_context` is not
        "fork". Their items are made where the accelerator is usable. A class the file builds nowhere, or hands to
        anything else, may be read by workers elsewhere."""
        if self._in_process is None:
            names: set[str] = set()
            classes = self._file_classes()
            built: dict[str, list[cst.Call]] = {}
            for node in self.ctx.tree.nodes:
                if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value in classes:
                    built.setdefault(node.func.value, []).append(node)
            if built:
                module = self._module_assignments()
                in_process: set[int] = set()
                elsewhere: set[int] = set()
                scopes = [self.ctx.module, *(n for n in self.ctx.tree.nodes if type(n) is cst.FunctionDef)]
                for scope in scopes:
                    nodes = self.ctx.tree.walk_scope(scope)
                    bound = module if scope is self.ctx.module else {**module, **_assignments(nodes)}
                    for loader in (n for n in nodes if type(n) is cst.Call and self._names_loader(n.func)):
                        dataset = argument_for(loader, "dataset", 0)
                        workers = keyword_arg(loader, "num_workers")
                        if workers is None and any(a.star == "**" for a in loader.args):
                            workers = loader.args[-1]  # `**kwargs` may hold `num_workers`
                        alone = workers is None or (
                            type(workers.value) is cst.Integer and workers.value.evaluated_value == 0
                        )
                        context = keyword_arg(loader, "multiprocessing_context")
                        if context is not None and string_value(context.value) != "fork":
                            alone = True  # spawned (or forkserver) workers start CUDA afresh: they may use it
                        for call in _calls_of(dataset.value if dataset else None, bound):
                            (in_process if alone else elsewhere).add(id(call))
                derived = {dotted_name(base.value) for c in classes.values() for base in c.bases}
                for name, calls in built.items():
                    ids = {id(call) for call in calls}
                    if ids <= in_process and not ids & elsewhere and name not in derived:
                        names.add(name)  # (a base's methods also run for its subclasses' items)
            self._in_process = frozenset(names)
        return self._in_process

    def _transform_method(self) -> tuple[cst.ClassDef, cst.FunctionDef] | None:
        """The class and its `__call__` around the current node, where the class is a
        transform of a dataset that a DataLoader with worker processes reads."""
        ancestors = self.ctx.ancestors
        if len(ancestors) < 3 or type(ancestors[1]) is not cst.ClassDef:
            return None
        cls = ancestors[1]
        function = next((n for n in ancestors[2:] if type(n) is cst.FunctionDef), None)
        if (
            function is None
            or function.name.value != "__call__"
            or self.ctx.parent(self.ctx.parent(function)) is not cls
        ):
            return None
        return (cls, function) if cls.name.value in self._transform_classes() else None

    def _transform_classes(self) -> frozenset[str]:
        """Module-level classes with `__call__` whose instances transform the items of a
        dataset (`transform=`, `target_transform=`, `transforms=`, alone or in the list of a
        `Compose`) that a DataLoader with worker processes reads."""
        if self._transforms is None:
            classes = {
                n.name.value
                for n in self.ctx.module.body
                if type(n) is cst.ClassDef
                and any(type(f) is cst.FunctionDef and f.name.value == "__call__" for f in _class_body(n))
            }
            names: set[str] = set()
            if classes:
                for loader, bound in self._worker_loaders():
                    dataset = argument_for(loader, "dataset", 0)
                    for call in _calls_of(dataset.value if dataset else None, bound):
                        for keyword in ("transform", "target_transform", "transforms"):
                            given = keyword_arg(call, keyword)
                            if given is not None:
                                names |= _instantiated(given.value, bound, classes)
            self._transforms = frozenset(names)
        return self._transforms

    def _worker_loaders(self) -> list[tuple[cst.Call, dict[str, list[cst.BaseExpression]]]]:
        """DataLoader calls that surely start forked worker processes, each with the values
        its scope (else the module) assigns to each name: `num_workers` given, and not 0
        on any branch (`NUM_WORKERS = 0`, `0 if cuda else 4`), no `multiprocessing_context`,
        and no other start method set for the program (`mp.set_start_method("spawn")`)."""
        if self._loaders is None:
            self._loaders = []
            if not self._sets_start_method():
                module = self._module_assignments()
                scopes = [self.ctx.module, *(n for n in self.ctx.tree.nodes if type(n) is cst.FunctionDef)]
                for scope in scopes:
                    nodes = self.ctx.tree.walk_scope(scope)
                    loaders = [n for n in nodes if type(n) is cst.Call and self._names_loader(n.func)]
                    if not loaders:
                        continue
                    bound = module if scope is self.ctx.module else {**module, **_assignments(nodes)}
                    for loader in loaders:
                        workers = keyword_arg(loader, "num_workers")
                        if workers is None or keyword_arg(loader, "multiprocessing_context") is not None:
                            continue
                        if _may_be_no_workers(workers.value, bound):
                            continue
                        self._loaders.append((loader, bound))
        return self._loaders

    def _module_assignments(self) -> dict[str, list[cst.BaseExpression]]:
        if self._module_values is None:
            self._module_values = _assignments(self.ctx.tree.walk_scope(self.ctx.module))
        return self._module_values

    def _sets_start_method(self) -> bool:
        for node in self.ctx.tree.nodes:
            if type(node) is cst.Call and node.args and string_value(node.args[0].value) in ("spawn", "forkserver"):
                qualified = self.ctx.imports.qualify(node.func, frozenset()) or ""
                if qualified.endswith("multiprocessing.set_start_method"):
                    return True
        return False

    def _collate_function(self) -> cst.FunctionDef | None:
        """The module-level function around the current node, where a DataLoader with
        worker processes collates with it."""
        names = self._collate_functions()
        if not names:
            return None
        ancestors = self.ctx.ancestors
        if len(ancestors) < 2 or type(ancestors[1]) is not cst.FunctionDef:
            return None
        function = ancestors[1]
        return function if function.name.value in names else None

    def _collate_functions(self) -> frozenset[str]:
        """Module-level functions passed as `collate_fn=` to a DataLoader whose
        `num_workers` is given and is not 0."""
        if self._collators is None:
            names = set()
            functions = {n.name.value for n in self.ctx.module.body if type(n) is cst.FunctionDef}
            if functions:
                for loader, _ in self._worker_loaders():
                    collate = keyword_arg(loader, "collate_fn")
                    if collate is not None and type(collate.value) is cst.Name and collate.value.value in functions:
                        names.add(collate.value.value)
            self._collators = frozenset(names)
        return self._collators

    def _names_loader(self, func: cst.BaseExpression) -> bool:
        """Is `func` the DataLoader? Asked away from where the walk stands, so through the
        import table, not `ctx.qualify`, whose answers depend on the current scope."""
        if type(func) is not cst.Name and type(func) is not cst.Attribute:
            return False
        return self.ctx.imports.qualify(func, frozenset()) in device_tables.DATALOADERS

    def _item_helpers(self, cls: cst.ClassDef) -> frozenset[str]:
        """The methods defined in `cls` that `__getitem__` (or `__iter__`) reaches through
        calls on `self` (`self.pull_item(i)`, and what that calls), for `cls` or a dataset
        class of the file deriving from it, each call resolved in that class's own order
        of bases: they run in the workers. `__init__`'s helpers run in the main process."""
        cached = self._helpers.get(id(cls))
        if cached is not None:
            return cached
        classes = self._file_classes()
        reached: set[str] = set()
        for concrete in classes.values():
            order = self._bases_in_order(concrete, classes)
            if cls not in order or not self._is_dataset(concrete):
                continue
            seen: set[str] = set()
            todo = [found for name in _WORKER_METHODS if (found := _resolve(order, name)) is not None]
            while todo:
                _, method = todo.pop()
                params = method.params.params
                me = params[0].name.value if params else None
                for node in self.ctx.tree.walk(method.body):
                    if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
                        continue
                    receiver, name = node.func.value, node.func.attr.value
                    if type(receiver) is cst.Name and receiver.value == me and name not in seen:
                        target = _resolve(order, name)
                        if target is not None and name not in _ITEM_METHODS:
                            seen.add(name)
                            todo.append(target)
                            if target[0] is cls:
                                reached.add(name)
        answer = self._helpers[id(cls)] = frozenset(reached)
        return answer

    def _file_classes(self) -> dict[str, cst.ClassDef]:
        """The file's classes by name (the last of a name)."""
        if self._classes is None:
            self._classes = {n.name.value: n for n in self.ctx.tree.nodes if type(n) is cst.ClassDef}
        return self._classes

    def _bases_in_order(self, cls: cst.ClassDef, classes: dict[str, cst.ClassDef]) -> list[cst.ClassDef]:
        """`cls` and the file's classes it derives from, nearest first (depth first, as
        single inheritance resolves)."""
        order: list[cst.ClassDef] = []
        todo = [cls]
        while todo:
            current = todo.pop(0)
            if current in order:
                continue
            order.append(current)
            todo[:0] = [
                b
                for b in (classes.get(dotted_name(arg.value) or "") for arg in current.bases)
                if b is not None and b is not current
            ]
        return order

    def _is_dataset(self, cls: cst.ClassDef, seen: frozenset[int] = frozenset()) -> bool:
        known = self._datasets.get(id(cls))
        if known is not None:
            return known
        answer = False
        classes = self._file_classes()
        for base in cls.bases:
            if self.ctx.imports.qualify(base.value) in _DATASET_BASES:
                answer = True
                break
            local = classes.get(dotted_name(base.value) or "")
            if (
                local is not None
                and local is not cls
                and id(local) not in seen
                and self._is_dataset(local, seen | {id(cls)})
            ):
                answer = True
                break
        self._datasets[id(cls)] = answer
        return answer

    def _is_accelerator(self, node: cst.BaseExpression, cls: cst.ClassDef | None, function: cst.FunctionDef) -> bool:
        """Does `node` surely name an accelerator (where there is one)? Parameters and
        unknown attributes may be the CPU."""
        if _names_accelerator_literal(self.ctx, node):
            return True
        if type(node) is cst.Name:
            if node.value in self.ctx.bindings_of(function):
                return False
            return node.value in self._module_accelerator_names()
        if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self":
            return cls is not None and self._attribute_names_accelerator(cls, node.attr.value)
        return False

    def _attribute_names_accelerator(self, cls: cst.ClassDef, attribute: str) -> bool:
        """Is every `self.<attribute> = ...` of the class an accelerator? A module-level
        binding counts, unless a parameter or local of the method shadows it
        (`self.device = device` in `__init__(self, device="cpu")`)."""
        module_names = self._module_accelerator_names()
        values = []
        for function, _ in self.ctx.tree.functions(cls):
            if type(function) is not cst.FunctionDef:
                continue
            visible = module_names - self.ctx.bindings_of(function)
            for node in self.ctx.tree.walk_scope(function):
                if type(node) is not cst.Assign:
                    continue
                for target in node.targets:
                    if dotted_name(target.target) == f"self.{attribute}":
                        values.append((node.value, visible, function))
                    elif type(target.target) is cst.Tuple and any(
                        dotted_name(e.value) == f"self.{attribute}" for e in target.target.elements
                    ):
                        # `self.dtype, self.device = dtype, device`: the matching item, or unknown
                        items = node.value.elements if type(node.value) is cst.Tuple else ()
                        if len(items) != len(target.target.elements):
                            return False
                        for element, item in zip(target.target.elements, items):
                            if dotted_name(element.value) == f"self.{attribute}":
                                values.append((item.value, visible, function))
        return bool(values) and all(
            self._names_accelerator_value(v, names) or self._constructed_with_accelerator(cls, function, v)
            for v, names, function in values
        )

    def _constructed_with_accelerator(self, cls: cst.ClassDef, function: cst.FunctionDef,
                                      value: cst.BaseExpression) -> bool:  # fmt: skip
        """`self.device = torch.device(device)` (or `= device`) in `__init__`, where every
        `Dataset(...)` the file builds passes an accelerator for `device`."""
        if type(value) is cst.Call and self.ctx.qualify(value.func) == "torch.device" and len(value.args) == 1:
            value = value.args[0].value
        if function.name.value != "__init__" or type(value) is not cst.Name:
            return False
        params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)][1:]
        if value.value not in params and value.value not in {p.name.value for p in function.params.kwonly_params}:
            return False
        module_names = self._module_accelerator_names()
        signature = (*function.params.posonly_params, *function.params.params, *function.params.kwonly_params)
        defaults = {p.name.value: p.default for p in signature if p.default is not None}
        found = False
        scopes = [self.ctx.module, *(n for n in self.ctx.tree.nodes if type(n) is cst.FunctionDef)]
        for scope in scopes:  # the constructions, in the module body and in functions (`main()`)
            visible = module_names if scope is self.ctx.module else module_names - self.ctx.bindings_of(scope)
            for node in self.ctx.tree.walk_scope(scope):
                if type(node) is not cst.Call or type(node.func) is not cst.Name or node.func.value != cls.name.value:
                    continue
                passed = argument_for(node, value.value, params.index(value.value) if value.value in params else None)
                if passed is None and _has_star(node):
                    return False
                given = passed.value if passed is not None else defaults.get(value.value)
                names = visible if passed is not None else module_names  # a default is read in the module
                if given is None or not self._names_accelerator_value(given, names):
                    return False  # (`device=DEFAULT_DEVICE` in the signature counts where it is left out)
                found = True
        return found

    def _module_accelerator_names(self) -> frozenset[str]:
        """Module-level names every assignment of which names the accelerator."""
        if self._accelerator_names is None:
            names: frozenset[str] = frozenset()
            for (
                name,
                assigned,
            ) in self._module_assignments().items():  # in source order: `DEVICE = device` after `device = ...`
                if all(self._names_accelerator_value(v, names) for v in assigned):
                    names |= {name}
            self._accelerator_names = names
        return self._accelerator_names

    def _names_accelerator_value(self, value: cst.BaseExpression, names: frozenset[str]) -> bool:
        """`"cuda"`, `torch.device("cuda")`, `torch.device("cuda" if C else "cpu")`, the
        portable expression, or one of `names`."""
        if type(value) is cst.IfExp:
            return self._names_accelerator_value(value.body, names) or self._names_accelerator_value(
                value.orelse, names
            )
        if _names_accelerator_literal(self.ctx, value):
            return True
        if type(value) is cst.Call:
            qualified = self.ctx.qualify(value.func)
            if qualified in _ACCELERATOR_CALLS:
                return True
            if qualified == "torch.device" and value.args and type(value.args[0].value) is cst.IfExp:
                return self._names_accelerator_value(value.args[0].value, names)
        return type(value) is cst.Name and value.value in names


def _resolve(order: list[cst.ClassDef], name: str) -> tuple[cst.ClassDef, cst.FunctionDef] | None:
    """The class in `order` that defines method `name` first, and the method."""
    for member in order:
        for statement in _class_body(member):
            if type(statement) is cst.FunctionDef and statement.name.value == name:
                return member, statement
    return None
