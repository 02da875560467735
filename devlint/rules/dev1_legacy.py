"""DEV1, the legacy APIs: typed tensor constructors and types (DEV104) and the deprecated
`torch.cuda.amp` (DEV105)."""

from __future__ import annotations

import libcst as cst

from devlint.analysis.guards import in_compat_fallback
from devlint.analysis.tree import dotted_name, string_value
from devlint.fix.plan import DeleteLines, FixPlan, Replace
from devlint.rules.base import Rule


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
    CPU type becomes `set_default_dtype`, unless a CUDA default may be set before it (the
    CPU type then also sets the device back); with a CUDA type, which also sets the
    default device, it is reported without a fix.
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
        self._accelerator_defaults: list[tuple[int, bool]] | None = None  # see `_accelerator_default_before`
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
        if type(test) is cst.Name and self.ctx.config.is_enabled("DEV501") and self.ctx.guards.flag(test.value):
            return None  # DEV501 modernises the flag in the same run: the binding is right
        follows = self.binding.placement_flag()
        if type(test) is cst.Name and follows is not None and f" if {test.value} else " in follows[0]:
            return None
        if (
            on_cuda[0]
            and type(test) is cst.Call
            and self.binding.has_module_binding()
            and "cuda" in self.ctx.guards.when_true(test)
        ):
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
            # a CPU type also sets the default device back to the CPU, which matters (and
            # `set_default_dtype` would drop) where the file sets a CUDA default elsewhere
            if target is not None and not target[1] and not self._accelerator_default_before(node):
                torch, edits = self.binding.torch()
                fix = FixPlan.safe(Replace(node, f"{torch}.set_default_dtype({torch}.{target[0]})"), *edits)
            self.report(
                node, "`set_default_tensor_type` is deprecated: use set_default_dtype / set_default_device", fix
            )

    def _accelerator_default_before(self, call: cst.Call) -> bool:
        """Is a CUDA tensor type, or a default device other than the CPU, set before `call`
        in the file, or in a function (which may run any time)?"""
        if self._accelerator_defaults is None:
            found: list[tuple[int, bool]] = []  # (position, inside a function)
            inside_until = -1
            nodes, ends = self.ctx.tree.nodes, self.ctx.tree.ends
            for index, node in enumerate(nodes):
                if type(node) in (cst.FunctionDef, cst.Lambda):
                    inside_until = max(inside_until, ends[index])
                if type(node) is not cst.Call or not node.args:
                    continue
                qualified = self.ctx.qualify(node.func)
                setting = False
                if qualified == "torch.set_default_tensor_type":
                    target = self._type_argument(node.args[0].value)
                    setting = target is None or bool(target[1])
                elif qualified == "torch.set_default_device":
                    value = node.args[0].value
                    setting = not (type(value) is cst.SimpleString and value.value[1:-1].split(":")[0] == "cpu")
                if setting:
                    found.append((index, index < inside_until))
            self._accelerator_defaults = found
        span = self.ctx.tree.span(call)
        at = span[0] if span is not None else len(self.ctx.tree.nodes)
        return any(position < at or in_function for position, in_function in self._accelerator_defaults)

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
        args = ", ".join(
            self.source_of(a.value) if not a.star else f"{a.star}{self.source_of(a.value)}" for a in node.args
        )
        if shape == "data":
            code = f"{torch}.tensor({args}, {extra})"
        else:
            code = f"{torch}.empty({args or '0'}, {extra})"
        return FixPlan.safe(Replace(node, code), *edits)


def _argument_shape(args) -> str | None:
    """ "data", "sizes", or None when one bare name leaves it ambiguous."""
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
        "GradScaler",
        None,
        ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"),
        (2, 3),
    ),  # fmt: skip
    "torch.cuda.amp.grad_scaler.GradScaler": (
        "GradScaler",
        None,
        ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"),
        (2, 3),
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
            message = f'`torch.cpu.amp.{attribute}` is deprecated: use `torch.amp.{attribute}("cpu")`'
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
