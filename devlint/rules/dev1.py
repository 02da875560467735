"""DEV1: non-portable device selection."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from devlint.analysis import device_tables
from devlint.analysis.guards import in_compat_fallback, named_for_cuda
from devlint.analysis.literals import VARIABLE, DeviceLiteral, device_literal, is_device_attribute, torch_device_call
from devlint.analysis.tree import dotted_name, int_value, string_value
from devlint.fix.plan import DeleteLines, FixPlan, InsertBeforeEnd, NodeEdit, Replace, ReplaceSpan
from devlint.rules.base import Rule

_PARALLEL = frozenset(
    {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
     "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.data_parallel.DataParallel",
     "torch.nn.parallel.distributed.DistributedDataParallel"}
)  # fmt: skip


def _version_text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


class HardcodedDevice(Rule):
    """
    ## What it does
    Checks for hardcoded accelerator devices such as `"cuda"` or `torch.device("mps")`.

    The literal is reported where a device is chosen: `device=`, `map_location=` and
    `device_type=` arguments, `.to(...)`, `torch.device(...)`, `torch.Generator(...)`,
    and assignments to `device` or `*_device`. In a run-time choice
    (`"cuda" if C else "cpu"`) the literal is portable only when `C` checks its
    backend's availability (or is a flag assigned from such a check): a user's flag
    such as `args.cuda` from argparse is not one.

    ## Why is this bad?
    The program then runs only where that accelerator exists: not on a laptop, not in
    CPU-only CI, not on Apple, Intel or Ascend hardware. A literal inside a branch
    guarded by its own backend's availability check (`torch.cuda.is_available()`,
    `x.is_cuda`, `device.type == "cuda"`) is portable and is not reported;
    `torch.accelerator.is_available()` guards no `"cuda"`, since it is True on a Mac.

    ## Example
        device = torch.device("cuda:0")
        x = torch.zeros(3, device="cuda")

    ## Use instead
        device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")
        x = torch.zeros(3, device=device)

    ## Fix safety
    Safe: where the accelerator exists, the binding names the same device. The literal
    is replaced by the device binding (a `device` parameter or local, else a
    module-level binding created after the imports; a `device=None` parameter is not
    used, since `.to(None)` moves nothing); `device_type="cuda"` becomes `device.type`;
    an assignment to `device` itself becomes the portable expression. A string stays a
    string (`device = "cuda"` becomes a device-type string chosen at run time), since
    the code may compare it with `"cuda"`. A literal inside a run-time choice or with a
    variable index is reported without a fix.
    """

    code = "DEV101"
    name = "hardcoded-device"
    fixable = True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._check(node)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self._check(node)  # `f"cuda:{rank}"`

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)

    def _check(self, node: cst.BaseExpression) -> None:
        found = device_literal(self.ctx, node)
        if found is None or found.position == "default" or found.has_other_index:
            return
        if self.ctx.guards_backend(found.kind, node):
            return  # `"cuda" if torch.cuda.is_available() else "cpu"`: only used where it exists
        if found.cpu_alternative:
            message = (
                f"hardcoded device {found.text} chosen by a test that is no {found.kind} availability check: "
                f"it fails where {found.kind} is missing; test its availability or choose with torch.accelerator"
            )
        else:
            message = f"hardcoded device {found.text}: use a device chosen at run time"
        self.report(node, message, self._fix(found))

    def _fix(self, found: DeviceLiteral) -> FixPlan | None:
        if found.nested or found.index == VARIABLE:
            return None
        is_string = type(found.unit) is cst.SimpleString
        device = self.binding.device()
        if found.position == "assign":
            # A string stays a string, since code may compare it to "cuda".
            binding_name = type(found.target) is cst.Name and found.target.value in (self.binding.name, "device")
            if is_string and not binding_name and device is not None and device.kind == "device":
                return FixPlan.safe(Replace(found.unit, device.type_code), *device.edits)
            if binding_name or is_string:
                code, edits = self.binding.portable_expression(string=is_string)
                return FixPlan.safe(Replace(found.unit, code), *edits)
        if device is None:
            return None
        code = device.type_code if found.position == "device_type" else device.code
        if not is_string and device.kind != "device" and found.position != "device_type":
            # the code used a torch.device (`.type`, `==`): keep one when the name may be a string
            torch, edits = self.binding.torch()
            return FixPlan.safe(Replace(found.unit, f"{torch}.device({device.code})"), *edits, *device.edits)
        return FixPlan.safe(Replace(found.unit, code), *device.edits)


class CudaMethod(Rule):
    """
    ## What it does
    Checks for `.cuda()` calls on tensors and modules.

    ## Why is this bad?
    `.cuda()` fails on machines without CUDA and ignores Apple, Intel and Ascend
    devices. `.to(device)` with a device chosen at run time works everywhere. Like a
    `"cuda"` literal, a `.cuda()` under an availability guard is portable and is not
    reported.

    Any `.cuda()` method is reported, since devlint cannot tell a tensor from another
    object; a class that defines its own `cuda` method is almost always a wrapper that
    forwards to `Module.cuda`, so its callers have the same problem.

    ## Example
        model.cuda()
        x = x.cuda(non_blocking=True)

    ## Use instead
        model.to(device)
        x = x.to(device, non_blocking=True)

    ## Fix safety
    Safe: with CUDA present, `.to(device)` moves to the same device. `non_blocking`
    and `memory_format` are kept. No fix for `.cuda(i)` with a variable index, nor in
    a file that defines a `cuda` method of its own (that class may have no `.to`); a
    literal index other than 0 is DEV103's.
    """

    code = "DEV102"
    name = "cuda-method"
    fixable = True

    _POSITIONAL = ("device", "non_blocking")

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self._own_cuda_method: bool | None = None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value != "cuda":
            return
        if self.ctx.qualify(func) is not None:
            return  # `torch.cuda(...)` is not a method call on a tensor
        arguments = self._arguments(node)
        if arguments is None:
            return
        index, kept = arguments
        value = int_value(index) if index is not None else None
        if value not in (None, 0):
            return  # DEV103
        if self.ctx.guards_backend("cuda"):
            return  # as portable as a guarded `.to("cuda")`
        if self._defines_cuda_method():
            self.report(self._where(node), "`.cuda()` only runs with CUDA: use `.to(device)`")
            return
        if index is not None and value is None and not (type(index) is cst.Name and index.value == "None"):
            # `.cuda(rank)`: the same device, named by the code's own variable
            code, edits = self.source_of(index), ()
        else:
            device = self.binding.device()
            if device is None:
                self.report(self._where(node), "`.cuda()` only runs with CUDA: use `.to(device)`")
                return
            code, edits = device.code, device.edits
        fix = FixPlan.safe(Replace(func.attr, "to"), self._arguments_edit(node, code, kept), *edits)
        self.report(self._where(node), f"`.cuda()` only runs with CUDA: use `.to({code})`", fix)

    def _where(self, node: cst.Call) -> cst.CSTNode:
        """Where the finding is reported: the call, or the `.cuda` attribute when the
        receiver spans lines (the fix and `# noqa` belong on the `.cuda` line)."""
        receiver = node.func.value  # type: ignore[attr-defined]
        return node.func.attr if "\n" in self.ctx.module.code_for_node(receiver) else node  # type: ignore[attr-defined]

    def _arguments_edit(self, node: cst.Call, device: str, kept: list[cst.Arg]) -> NodeEdit:
        """The arguments of `.to(...)`: the device, then what `.cuda(...)` kept. Only the
        arguments change; the receiver and the parentheses keep their text."""
        if not node.args:
            return InsertBeforeEnd(node, device)
        rendered = [self.ctx.module.code_for_node(a.with_changes(comma=cst.MaybeSentinel.DEFAULT)) for a in kept]
        return ReplaceSpan(node.args[0], node.args[-1], ", ".join([device, *rendered]))

    def _arguments(self, node: cst.Call) -> tuple[cst.BaseExpression | None, list[cst.Arg]] | None:
        """(the device index argument, the arguments `.to` keeps); None for a shape we do
        not know (`*args`, unknown keywords)."""
        index = None
        kept: list[cst.Arg] = []
        for position, arg in enumerate(node.args):
            if arg.star:
                return None
            if arg.keyword is not None:
                keyword = arg.keyword.value
            elif position < len(self._POSITIONAL):
                keyword = self._POSITIONAL[position]
            else:
                return None
            if keyword == "device":
                index = arg.value
            elif keyword in ("non_blocking", "memory_format"):
                kept.append(arg.with_changes(keyword=cst.Name(keyword), equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
                    if arg.keyword is None else arg)  # fmt: skip
            else:
                return None
        return index, kept

    def _defines_cuda_method(self) -> bool:
        if self._own_cuda_method is None:
            self._own_cuda_method = any(
                type(node) is cst.ClassDef
                and any(type(s) is cst.FunctionDef and s.name.value == "cuda" for s in node.body.body)
                for node in self.ctx.tree.nodes
            )
        return self._own_cuda_method


class HardcodedDeviceIndex(Rule):
    """
    ## What it does
    Checks for hardcoded GPU indices such as `"cuda:4"` or `.cuda(1)`.

    Also `torch.device("cuda", 2)`, `torch.cuda.set_device(<int>)`, and literal
    `device_ids=` / `output_device=` in `DataParallel` / `DistributedDataParallel`.

    ## Why is this bad?
    A fixed index runs only on machines with at least that many GPUs, and every process
    of a distributed job would pick the same GPU. Availability guards do not help.

    ## Example
        device = torch.device("cuda:4" if torch.cuda.is_available() else "cpu")
        model = nn.DataParallel(model, device_ids=[0, 1])

    ## Use instead
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        torch.accelerator.set_device_index(local_rank)  # or launch with torchrun and use DDP

    ## Fix safety
    No fix: the right index depends on how the program is launched (`LOCAL_RANK`).
    """

    code = "DEV103"
    name = "hardcoded-device-index"

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._check_literal(node)

    def visit_Call(self, node: cst.Call) -> None:
        if torch_device_call(self.ctx, node) is not None:
            self._check_literal(node)
            return
        func = node.func
        name = self.ctx.qualify(func)
        if type(func) is cst.Attribute and func.attr.value == "cuda" and name is None:
            index = next((int_value(a.value) for a in node.args if _is_device_index(a, node.args)), None)
            if index not in (None, 0):
                self.report(node, f"`.cuda({index})` hardcodes GPU {index}: use LOCAL_RANK or DDP to pick the GPU")
            return
        if name == "torch.cuda.set_device" and node.args and int_value(node.args[0].value) is not None:
            index = int_value(node.args[0].value)
            self.report(node, f"`set_device({index})` hardcodes GPU {index}: derive it from LOCAL_RANK")
            return
        if name in _PARALLEL:
            for arg in node.args:
                if arg.keyword is None:
                    continue
                if arg.keyword.value == "device_ids" and _int_list(arg.value):
                    self.report(arg, "literal `device_ids` hardcode which GPUs are used: derive them from LOCAL_RANK")
                elif arg.keyword.value == "output_device" and int_value(arg.value) is not None:
                    self.report(arg, "literal `output_device` hardcodes a GPU: derive it from LOCAL_RANK")

    def _check_literal(self, node: cst.BaseExpression) -> None:
        found = device_literal(self.ctx, node)
        if found is not None and found.has_other_index:
            self.report(
                node, f"hardcoded device index {found.text}: fails where fewer GPUs exist; use LOCAL_RANK or DDP"
            )


def _is_device_index(arg: cst.Arg, args: Sequence[cst.Arg]) -> bool:
    """Is `arg` the device of `.cuda(device, non_blocking)`?"""
    if arg.keyword is not None:
        return arg.keyword.value == "device"
    return not arg.star and arg is args[0]


def _int_list(node: cst.BaseExpression) -> bool:
    return type(node) in (cst.List, cst.Tuple) and all(int_value(e.value) is not None for e in node.elements)


_LEGACY_DTYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16", "ByteTensor": "uint8", "CharTensor": "int8",
    "ShortTensor": "int16", "IntTensor": "int32", "LongTensor": "int64", "BoolTensor": "bool",
}  # fmt: skip


def legacy_type(qualified: str | None) -> tuple[str, bool] | None:
    """`torch.cuda.FloatTensor` -> ("float32", True); `torch.LongTensor` -> ("int64", False)."""
    if qualified is None:
        return None
    if qualified == "torch.Tensor":
        return "float32", False  # the generic constructor builds the default float type
    for prefix, on_cuda in (("torch.cuda.", True), ("torch.", False)):
        if qualified.startswith(prefix):
            dtype = _LEGACY_DTYPES.get(qualified[len(prefix) :])
            if dtype is not None:
                return dtype, on_cuda
    return None


_SIZE_CALLS = frozenset({"size", "len", "int", "numel", "Size"})


class LegacyTensorType(Rule):
    """
    ## What it does
    Checks for legacy typed tensors such as `torch.FloatTensor(...)`.

    Also `torch.cuda.LongTensor(...)` and the other typed constructors,
    `.type(torch.cuda.FloatTensor)` (also the string form),
    `torch.set_default_tensor_type`, and calls through an alias such as
    `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`.

    ## Why is this bad?
    The CUDA types exist only with CUDA; the CPU types silently pin data to the CPU and
    mix dtype with device. They are deprecated in favour of factories with `dtype=` and
    `device=`.

    ## Example
        w = torch.cuda.FloatTensor(3, 4)
        y = torch.FloatTensor([4.0, 5.0, 6.0])
        x = x.type(torch.cuda.FloatTensor)

    ## Use instead
        w = torch.empty(3, 4, dtype=torch.float32, device=device)
        y = torch.tensor([4.0, 5.0, 6.0], dtype=torch.float32)
        x = x.to(device, torch.float32)

    ## Fix safety
    Safe. Data (a list, tuple, comprehension or call) becomes `torch.tensor(data,
    dtype=...)`; sizes (two or more arguments, an int, `x.size()`, `x.shape`) become
    `torch.empty(sizes, dtype=...)`; CUDA types add `device=device`. A single bare name
    could be either, so it is reported without a fix. `.type(T)` becomes
    `.to(device, dtype)` (`"cpu"` for the CPU types). `set_default_tensor_type` with a
    CPU type becomes `set_default_dtype`; with a CUDA type, which also sets the default
    device, it is reported without a fix.
    """

    code = "DEV104"
    name = "legacy-tensor-type"
    fixable = True

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        # (scope, name) -> (dtype, cuda), or None when the branches disagree on the dtype
        self._aliases: dict[tuple[int, str], tuple[str, bool] | None] = {}
        # (scope, name) -> the code naming the device a conditional alias chooses (None:
        # the device binding)
        self._alias_devices: dict[tuple[int, str], str | None] = {}
        self._module_aliases()

    def _module_aliases(self) -> None:
        """Module-level aliases assigned once are known before the walk reaches them: a
        function defined above `Tensor = torch.cuda.FloatTensor` runs after it."""
        assigned: dict[str, list[cst.Assign]] = {}
        for stmt in self.ctx.module.body:
            if type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Assign:
                        for target in small.targets:
                            if type(target.target) is cst.Name:
                                assigned.setdefault(target.target.value, []).append(small)
        for name, assignments in assigned.items():
            if len(assignments) != 1:
                continue
            value = assignments[0].value
            found = self._alias_value(value)
            if found is not False:
                key = (id(self.ctx.module), name)
                self._aliases[key] = found
                self._alias_devices[key] = self._alias_device(value) if type(value) is cst.IfExp else None

    def visit_Assign(self, node: cst.Assign) -> None:
        found = self._alias_value(node.value)
        if found is False:
            return
        device = self._alias_device(node.value) if type(node.value) is cst.IfExp else None
        for target in node.targets:
            if type(target.target) is cst.Name:
                key = self._alias_key(target.target.value)
                self._aliases[key] = found
                self._alias_devices[key] = device
        if found is not None and found[1] and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
            self._check_unused_alias(node, node.targets[0].target.value)

    def _alias_device(self, value: cst.IfExp) -> str | None:
        """The device `torch.cuda.FloatTensor if C else torch.FloatTensor` chooses, as code
        that makes the same choice where the alias is used: `t.device` for `t.is_cuda`,
        the binding when it follows the file's own flag `C`, else
        `torch.device("cuda" if C else "cpu")`."""
        on_cuda = [bool((legacy_type(self.ctx.qualify(b)) or ("", False))[1]) for b in (value.body, value.orelse)]
        if on_cuda[0] == on_cuda[1]:
            return None
        test = value.test
        if on_cuda[0] and type(test) is cst.Attribute and test.attr.value == "is_cuda":
            return f"{self.source_of(test.value)}.device"
        follows = self.binding.placement_flag()
        if type(test) is cst.Name and follows is not None and f" if {test.value} else " in follows[0]:
            return None
        if on_cuda[0] and type(test) is cst.Call and self.binding.has_module_binding() \
                and "cuda" in self.ctx.guards.when_true(test):
            return None  # `... if torch.cuda.is_available() else ...`: the file's own device says the same
        torch, _ = self.binding.torch()
        choice = ('"cuda" if {} else "cpu"' if on_cuda[0] else '"cpu" if {} else "cuda"').format(self.source_of(test))
        return f"{torch}.device({choice})"

    def _check_unused_alias(self, node: cst.Assign, name: str) -> None:
        """An alias no code uses any more (its last use was rewritten) goes, with its line."""
        names = attributes = 0
        for n in self.ctx.tree.nodes:
            if type(n) is cst.Name and n.value == name:
                names += 1
            elif (type(n) is cst.Attribute and n.attr.value == name) or (
                type(n) is cst.Arg and n.keyword is not None and n.keyword.value == name
            ):
                attributes += 1  # `torch.Tensor`'s `Tensor`, `dtype=`'s `dtype`: no use of the alias
        if names - attributes > 1:  # the target itself is one
            return
        line = self.ctx.parent(node)
        block = self.ctx.parent(line)
        fix = None
        if type(line) is cst.SimpleStatementLine and len(line.body) == 1 and len(getattr(block, "body", ())) > 1:
            fix = FixPlan.safe(DeleteLines(line))
        self.report(node, f"`{name}` is a legacy tensor type alias that nothing uses: remove it", fix)

    def _alias_key(self, name: str) -> tuple[int, str]:
        """The scope `name` belongs to where the walk stands: the innermost function
        that binds it, else the module."""
        scope = next((f for f in self.ctx.functions() if name in self.ctx.bindings_of(f)), self.ctx.module)
        return id(scope), name

    def _alias_value(self, value: cst.BaseExpression):
        """(dtype, cuda) for `torch.cuda.FloatTensor if c else torch.FloatTensor`; None if
        the branches disagree on dtype; False if not an alias."""
        if type(value) is cst.IfExp:
            branches = [legacy_type(self.ctx.qualify(b)) for b in (value.body, value.orelse)]
            if not all(branches):
                return False
            dtypes = {b[0] for b in branches}
            return (dtypes.pop(), any(b[1] for b in branches)) if len(dtypes) == 1 else None
        found = legacy_type(self.ctx.qualify(value)) if type(value) in (cst.Attribute, cst.Name) else None
        return found if found is not None else False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qualified = self.ctx.qualify(func)
        found = legacy_type(qualified)
        if found is None and type(func) is cst.Name and self._alias_key(func.value) in self._aliases:
            key = self._alias_key(func.value)
            alias = self._aliases[key]
            self.report(node, f"`{func.value}` is a legacy tensor type: use a factory with dtype= and device=",
                        self._constructor_fix(node, alias, self._alias_devices.get(key)) if alias else None)  # fmt: skip
            return
        if found is not None:
            self.report(node, f"legacy constructor `{dotted_name(func)}`: use a factory with dtype= and device=",
                        self._constructor_fix(node, found))  # fmt: skip
            return
        if type(func) is cst.Attribute and func.attr.value == "type" and qualified is None:
            self._check_type_method(node)
        elif qualified == "torch.set_default_tensor_type" and len(node.args) == 1:
            target = self._type_argument(node.args[0].value)
            fix = None
            if target is not None and not target[1]:
                torch, edits = self.binding.torch()
                fix = FixPlan.safe(Replace(node, f"{torch}.set_default_dtype({torch}.{target[0]})"), *edits)
            self.report(node, "`set_default_tensor_type` is deprecated: use set_default_dtype / set_default_device", fix)

    def _alias_device_of(self, arg: cst.BaseExpression) -> str | None:
        if type(arg) is cst.Name:
            return self._alias_devices.get(self._alias_key(arg.value))
        return None

    def _type_argument(self, arg: cst.BaseExpression) -> tuple[str, bool] | None:
        literal = string_value(arg)
        if literal is not None:
            return legacy_type(literal)
        if type(arg) is cst.Name and self._alias_key(arg.value) in self._aliases:
            return self._aliases[self._alias_key(arg.value)]
        return legacy_type(self.ctx.qualify(arg))

    def _check_type_method(self, node: cst.Call) -> None:
        if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
            return
        target = self._type_argument(node.args[0].value)
        if target is None:
            return
        dtype, on_cuda = target
        torch, edits = self.binding.torch()
        fix = None
        chosen = self._alias_device_of(node.args[0].value)
        if chosen is not None:
            fix = self._to_fix(node, f"{chosen}, {torch}.{dtype}", edits)
        elif on_cuda:
            device = self.binding.device()
            if device is not None:
                fix = self._to_fix(node, f"{device.code}, {torch}.{dtype}", (*edits, *device.edits))
        else:
            fix = self._to_fix(node, f'"cpu", {torch}.{dtype}', edits)
        self.report(node, "`.type()` with a legacy tensor type: use `.to(device, dtype)`", fix)

    def _to_fix(self, node: cst.Call, args: str, edits) -> FixPlan:
        assert type(node.func) is cst.Attribute
        receiver = node.func.with_changes(attr=cst.Name("to"))
        new = node.with_changes(func=receiver, args=cst.parse_expression(f"f({args})").args, lpar=(), rpar=())
        return FixPlan.safe(Replace(node, self.ctx.module.code_for_node(new)), *edits)

    def _constructor_fix(self, node: cst.Call, found: tuple[str, bool], chosen: str | None = None) -> FixPlan | None:
        """The factory call; `chosen`: the device a conditional alias chooses (None: the
        binding, for CUDA types)."""
        dtype, on_cuda = found
        if any(arg.keyword is not None for arg in node.args):
            return None
        shape = _argument_shape(node.args)
        if shape is None:
            return None
        torch, edits = self.binding.torch()
        extra = f"dtype={torch}.{dtype}"
        if chosen is not None:
            extra += f", device={chosen}"
        elif on_cuda:
            device = self.binding.device()
            if device is None:
                return None
            extra += f", device={device.code}"
            edits = (*edits, *device.edits)
        args = ", ".join(self.source_of(a.value) if not a.star else f"{a.star}{self.source_of(a.value)}" for a in node.args)
        if shape == "data":
            code = f"{torch}.tensor({args}, {extra})"
        else:
            code = f"{torch}.empty({args or '0'}, {extra})"
        return FixPlan.safe(Replace(node, code), *edits)


def _argument_shape(args) -> str | None:
    """"data", "sizes", or None when one bare name leaves it ambiguous."""
    if len(args) != 1:
        return "sizes"
    arg = args[0]
    if arg.star:
        return "sizes"
    value = arg.value
    if type(value) is cst.Integer:
        return "sizes"
    if type(value) is cst.Attribute and value.attr.value == "shape":
        return "sizes"
    if type(value) is cst.Subscript and type(value.value) is cst.Attribute and value.value.attr.value == "shape":
        return "sizes"
    if type(value) is cst.Call:
        name = dotted_name(value.func) or ""
        return "sizes" if name.rsplit(".", 1)[-1] in _SIZE_CALLS else "data"
    if type(value) in (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp):
        return "data"
    return None


_AMP = {
    # qualified name: (replacement attribute, device type, positional names, minimum torch)
    "torch.cuda.amp.autocast": ("autocast", None, ("enabled", "dtype", "cache_enabled"), (1, 10)),
    "torch.cuda.amp.autocast_mode.autocast": ("autocast", None, ("enabled", "dtype", "cache_enabled"), (1, 10)),
    "torch.cpu.amp.autocast": ("autocast", '"cpu"', ("enabled", "dtype", "cache_enabled"), (1, 10)),
    "torch.cuda.amp.GradScaler": (
        "GradScaler", None,
        ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"), (2, 3),
    ),  # fmt: skip
    "torch.cuda.amp.grad_scaler.GradScaler": (
        "GradScaler", None,
        ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"), (2, 3),
    ),  # fmt: skip
    "torch.cuda.amp.custom_fwd": ("custom_fwd", None, (), (2, 4)),
    "torch.cuda.amp.custom_bwd": ("custom_bwd", None, (), (2, 4)),
}


_AMP_ATTRIBUTES = frozenset(name.rsplit(".", 1)[-1] for name in _AMP)


class DeprecatedCudaAmp(Rule):
    """
    ## What it does
    Checks for the deprecated `torch.cuda.amp` and `torch.cpu.amp` APIs.

    That is `torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler`,
    `torch.cuda.amp.custom_fwd` / `custom_bwd` and `torch.cpu.amp.autocast`, also when
    imported with `from ... import`.

    ## Why is this bad?
    They are deprecated, and the CUDA ones tie mixed precision to CUDA. `torch.amp`
    takes the device type as an argument.

    ## Example
        scaler = torch.cuda.amp.GradScaler()
        with torch.cuda.amp.autocast():
            loss = model(x)

    ## Use instead
        scaler = torch.amp.GradScaler(device.type)
        with torch.amp.autocast(device.type):
            loss = model(x)

    A use in a compatibility fallback (an `except (ImportError, AttributeError)` handler,
    the `else` of `if hasattr(torch.amp, ...)`) is what old torch versions need and is not
    reported.

    ## Fix safety
    Safe: on CUDA `device.type` is `"cuda"`. Positional arguments become keywords, since
    `torch.amp` takes the device type first. Applied only when the `torch-version`
    setting has the replacement (GradScaler 2.3, custom_fwd/custom_bwd 2.4).
    """

    code = "DEV105"
    name = "deprecated-cuda-amp"
    fixable = True

    def visit_Decorator(self, node: cst.Decorator) -> None:
        target = node.decorator
        if type(target) in (cst.Name, cst.Attribute):
            entry = _AMP.get(self.ctx.qualify(target) or "")
            if entry is not None:
                self._report(target, entry, [], call=None)

    def visit_Call(self, node: cst.Call) -> None:
        entry = _AMP.get(self.ctx.qualify(node.func) or "")
        if entry is not None:
            self._report(node, entry, list(node.args), call=node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # a bare reference (`ctx = torch.cuda.amp.autocast`): reported without a fix
        if node.attr.value not in _AMP_ATTRIBUTES:
            return  # most attributes: decided without resolving the name
        qualified = self.ctx.qualify(node)
        if qualified not in _AMP:
            return
        parent = self.ctx.parent(node)
        if type(parent) in (cst.Call, cst.Decorator, cst.Attribute) or in_compat_fallback(self.ctx.ancestors):
            return
        self.report(node, f"`{dotted_name(node)}` is deprecated: use `torch.amp.{_AMP[qualified][0]}`")

    def _report(self, node: cst.CSTNode, entry, args: list[cst.Arg], call: cst.Call | None) -> None:
        if in_compat_fallback(self.ctx.ancestors):
            return
        attribute, device_type, positional, minimum = entry
        message = f"`torch.cuda.amp.{attribute}` is deprecated: use `torch.amp.{attribute}` with the device type"
        if device_type == '"cpu"':
            message = f"`torch.cpu.amp.{attribute}` is deprecated: use `torch.amp.{attribute}(\"cpu\")`"
        self.report(node, message, self._fix(node, entry, args, call))

    def _fix(self, node, entry, args: list[cst.Arg], call: cst.Call | None) -> FixPlan | None:
        attribute, device_type, positional, minimum = entry
        if self.ctx.config.torch_version < minimum:
            return None
        edits: tuple = ()
        if device_type is None:
            device = self.binding.device()
            if device is None:
                return None
            device_type, edits = device.type_code, device.edits
        torch, torch_edits = self.binding.torch()
        parts = []
        for i, arg in enumerate(args):
            if arg.star:
                return None
            if arg.keyword is None:
                if i >= len(positional):
                    return None
                parts.append(f"{positional[i]}={self.source_of(arg.value)}")
            else:
                parts.append(self.source_of(arg).rstrip().rstrip(","))
        if attribute in ("custom_fwd", "custom_bwd"):
            parts.insert(0, f"device_type={device_type}")
        else:
            parts.insert(0, device_type)
        return FixPlan.safe(Replace(node, f"{torch}.amp.{attribute}({', '.join(parts)})"), *torch_edits, *edits)


_UNGUARDED = {
    # torch.cuda function: (torch.accelerator replacement or None, minimum torch)
    "synchronize": ("synchronize", (2, 6)),
    "current_device": ("current_device_index", (2, 6)),
    "set_device": ("set_device_index", (2, 6)),
    "memory_allocated": ("memory_allocated", (2, 8)),
    "max_memory_allocated": ("max_memory_allocated", (2, 8)),
    "memory_reserved": ("memory_reserved", (2, 8)),
    "reset_peak_memory_stats": ("reset_peak_memory_stats", (2, 8)),
    "empty_cache": ("empty_cache", (2, 8)),
    "get_device_name": (None, None),
    "get_device_properties": (None, None),
    "get_device_capability": (None, None),
    "Stream": (None, None),
    "Event": (None, None),
}
# Without CUDA these do not raise: the statistics report 0 and `empty_cache` does nothing.
# Their `torch.accelerator` versions raise without an accelerator, so they are only
# ever replaced under a guard.
_QUIET_WITHOUT_CUDA = frozenset({"memory_allocated", "max_memory_allocated", "memory_reserved", "empty_cache"})


class UnguardedCudaApi(Rule):
    """
    ## What it does
    Checks for `torch.cuda` calls that fail or mislead without CUDA, outside a guard.

    The calls are `synchronize`, `current_device`, `get_device_name`,
    `get_device_properties`, `get_device_capability`, `set_device`, `memory_allocated`,
    `max_memory_allocated`, `memory_reserved`, `reset_peak_memory_stats`, `Stream` and
    `Event`, and `empty_cache` when `torch-version` has `torch.accelerator.empty_cache`
    (2.8). `is_available`, `device_count` and `manual_seed*` are harmless without CUDA
    and are not reported; neither is code in a function or class named for CUDA or GPUs
    (`benchmark_cuda`, `CUDAPrefetcher`), which is CUDA-only by intent.

    ## Why is this bad?
    Without CUDA most of these raise; the memory statistics report 0 and `empty_cache`
    does nothing, also on Apple, Intel and Ascend accelerators.

    ## Example
        torch.cuda.synchronize()
        print(torch.cuda.get_device_name(0))

    ## Use instead
        if torch.accelerator.is_available():
            torch.accelerator.synchronize()
        if torch.cuda.is_available():
            print(torch.cuda.get_device_name(0))

    ## Fix safety
    Safe. A call that is a statement of its own is put under a guard, as
    `torch.accelerator` where it has the same function for the configured
    `torch-version` (synchronize, current_device_index and set_device_index from 2.6;
    the memory functions from 2.8), else as `torch.cuda` under
    `torch.cuda.is_available()`. A call inside an expression becomes its
    `torch.accelerator` equivalent, except the memory statistics (which would then raise
    where they now report 0); otherwise it is reported without a fix.
    """

    code = "DEV106"
    name = "unguarded-cuda-api"
    fixable = True

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.qualify(node.func) or ""
        if not qualified.startswith("torch.cuda."):
            return
        function = qualified[len("torch.cuda.") :]
        if function not in _UNGUARDED or self._guarded():
            return
        if function == "set_device" and node.args and int_value(node.args[0].value) is not None:
            return  # DEV103
        replacement, minimum = _UNGUARDED[function]
        available = replacement is not None and self.ctx.config.torch_version >= minimum
        if function == "empty_cache" and not available:
            return  # harmless without CUDA, and nothing better to offer
        torch, edits = self.binding.torch()
        call = self.source_of(node)
        if available:
            call = self.ctx.module.code_for_node(
                node.with_changes(func=cst.parse_expression(f"{torch}.accelerator.{replacement}"), lpar=(), rpar=())
            )
        fix = None
        indent = self._statement_indent(node)
        if indent is not None:
            guard = f"{torch}.accelerator.is_available()" if available else f"{torch}.cuda.is_available()"
            newline = self.ctx.module.default_newline
            text = f"if {guard}:{newline}{indent}{self.ctx.module.default_indent}{call}"
            fix = FixPlan.safe(Replace(node, text), *edits)
        elif available and function not in _QUIET_WITHOUT_CUDA:
            fix = FixPlan.safe(Replace(node, call), *edits)
        self.report(node, self._message(function, replacement, minimum, fix is not None), fix)

    @staticmethod
    def _message(function: str, replacement: str | None, minimum, fixable: bool) -> str:
        if function == "empty_cache":
            problem = "does nothing on other accelerators"
        elif function in _QUIET_WITHOUT_CUDA:
            problem = "reports 0 without CUDA"
        else:
            problem = "fails without CUDA"
        message = f"`torch.cuda.{function}()` {problem}: "
        if replacement is None:
            return message + "guard it with `torch.cuda.is_available()`"
        message += f"use `torch.accelerator.{replacement}()`"
        if function in _QUIET_WITHOUT_CUDA or not fixable:
            message += " under `torch.accelerator.is_available()`"
        if not fixable:
            message += f" (torch >= {_version_text(minimum)})"
        return message

    def _statement_indent(self, node: cst.Call) -> str | None:
        """The indentation of the statement that is `node` alone, or None when `node` is
        part of a larger statement (then no guard can be put around it)."""
        if node.lpar:
            return None
        expr = self.ctx.parent(node)
        line = self.ctx.parent(expr) if type(expr) is cst.Expr else None
        if type(line) is not cst.SimpleStatementLine or len(line.body) != 1:
            return None
        return self.ctx.indentation()

    def _guarded(self) -> bool:
        if self.ctx.guards_backend("cuda"):
            return True
        return any(
            type(n) in (cst.FunctionDef, cst.ClassDef) and named_for_cuda(n.name.value) for n in self.ctx.ancestors
        )


class DeviceStringComparison(Rule):
    """
    ## What it does
    Checks for a `torch.device` compared with a string, as in `t.device == "cuda"`.

    Also `!=` and `in`. The left side is a `.device` attribute of a tensor, or a name
    assigned only from `torch.device(...)` or `.device`.

    ## Why is this bad?
    A `torch.device` never equals a string in current PyTorch, so the test is always
    False (or always True for `!=`), whatever the device.

    ## Example
        if x.device == "cuda":
            torch.cuda.synchronize()

    ## Use instead
        if x.device.type == "cuda":
            torch.cuda.synchronize()

    ## Fix safety
    Unsafe: the fixed test can now be True, which changes what the program does
    (that is the point).
    """

    code = "DEV107"
    name = "device-string-comparison"
    fixable = True

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1:
            return
        target = node.comparisons[0]
        if type(target.operator) not in (cst.Equal, cst.NotEqual, cst.In, cst.NotIn):
            return
        literals = _device_strings(target.comparator, allow_many=type(target.operator) in (cst.In, cst.NotIn))
        if not literals or not self._is_torch_device(node.left):
            return
        left = self.source_of(node.left)
        fix_code = f"str({left})" if any(":" in v for v in literals) else f"{left}.type"
        fix = FixPlan.unsafe(Replace(node.left, fix_code))
        shown = self.source_of(target.comparator)
        self.report(node, f"a torch.device never equals a string ({shown}): compare `{fix_code}`", fix)

    def _is_torch_device(self, node: cst.BaseExpression) -> bool:
        if type(node) is cst.Name:
            return self.binding.holds_device(node.value)
        return is_device_attribute(node)


def _device_strings(node: cst.BaseExpression, *, allow_many: bool) -> list[str]:
    """`"cuda"` -> ["cuda"]; with `allow_many`, `("cuda", "mps")` -> ["cuda", "mps"]. Empty
    unless every element is a device string."""
    if allow_many and type(node) in (cst.Tuple, cst.List, cst.Set):
        values = [string_value(e.value) if type(e) is not cst.StarredElement else None for e in node.elements]
    else:
        values = [string_value(node)]
    if not values or any(v is None or v.split(":", 1)[0] not in device_tables.DEVICE_TYPES for v in values):
        return []
    return values  # type: ignore[return-value]




class DeviceDefaultArgument(Rule):
    """
    ## What it does
    Checks for device parameters that default to an accelerator, as in `device="cuda"`.

    A device parameter is one named `device`, `map_location`, `*_device` or
    `device_*`. A default with an index other than 0 is DEV103's.

    ## Why is this bad?
    Every caller that relies on the default gets code that only runs with CUDA, and
    the default is hidden from the call site.

    ## Example
        def train(model, device="cuda"):
            ...

    ## Use instead
        def train(model, device=None):
            device = device or torch.accelerator.current_accelerator() or torch.device("cpu")
            ...

    ## Fix safety
    No fix: changing a signature's default changes every caller.
    """

    code = "DEV108"
    name = "device-default-argument"

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._check(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)

    def _check(self, node: cst.BaseExpression) -> None:
        found = device_literal(self.ctx, node)
        if found is not None and found.position == "default" and not found.nested and not found.has_other_index:
            self.report(node, f"parameter default {found.text} makes callers CUDA-only: default to None and pick at run time")
