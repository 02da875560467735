"""DEV1: non-portable device selection."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from devlint.analysis import device_tables, versions
from devlint.analysis.guards import AVAILABILITY_CALLS, accelerator_type, named_for_cuda
from devlint.analysis.literals import (
    DEVICE_KEYWORDS,
    VARIABLE,
    DeviceLiteral,
    device_literal,
    is_device_attribute,
    torch_device_call,
)
from devlint.analysis.tree import dotted_name, int_value, keyword_arg, string_value
from devlint.fix.plan import FixPlan, InsertAfter, InsertBeforeEnd, NodeEdit, Replace, ReplaceSpan
from devlint.rules.base import Rule

_PARALLEL = frozenset(
    {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
     "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.data_parallel.DataParallel",
     "torch.nn.parallel.distributed.DistributedDataParallel"}
)  # fmt: skip


def _chosen_by_chain(ctx) -> bool:
    from devlint.rules.dev5 import in_selection_chain  # the opt-in family, loaded only when selected

    return in_selection_chain(ctx)


def _version_text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


class HardcodedDevice(Rule):
    """
    ## What it does
    Checks for hardcoded accelerator devices such as `"cuda"` or `torch.device("mps")`.

    The literal is reported where a device is chosen: `device=`, `map_location=` and
    `device_type=` arguments, `.to(...)`, `torch.device(...)`, `torch.Generator(...)`,
    device types in their positional places (`torch.autocast("cuda")`,
    `torch.amp.GradScaler("cuda")`, `init_device_mesh("cuda", ...)`), and assignments
    to `device` or `*_device` (in any case: `DEVICE`, `EVAL_DEVICE`). In a run-time
    choice (`"cuda" if C else "cpu"`) the literal is portable only when `C` checks its
    backend's availability (or is a flag assigned from such a check): a user's flag
    such as `args.cuda` from argparse is not one, and neither is the check named
    without its call (`"cuda" if torch.cuda.is_available else "cpu"`: a function is
    always true).

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
    the code may compare it with `"cuda"`; a string with an index (`"cuda:0"`) loses the
    index, which code may parse, so that fix is unsafe. A choice by a check named without its call
    gets the call. Any other literal inside a run-time choice, or with a variable index,
    is reported without a fix.
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
        if type(node) is cst.Call and discarded_context(self.ctx, node):
            return  # `torch.device("cuda")` alone on a line chooses nothing: DEV109
        if self.ctx.guards_backend(found.kind, node):
            return  # `"cuda" if torch.cuda.is_available() else "cpu"`: only used where it exists
        if self.ctx.config.is_enabled("DEV502") and _chosen_by_chain(self.ctx):
            return  # DEV502's: the whole choice becomes torch.accelerator
        uncalled = self._uncalled_check(node) if found.cpu_alternative else None
        if uncalled is not None:
            check = self.ctx.module.code_for_node(uncalled)
            message = (
                f"hardcoded device {found.text} chosen by `{check}` without a call: a function is always true, "
                f"so {found.text} is chosen everywhere; call it: `{check}()`"
            )
            self.report(node, message, FixPlan.safe(InsertAfter(uncalled, "()")))
            return
        if found.cpu_alternative:
            message = (
                f"hardcoded device {found.text} chosen by a test that is no {found.kind} availability check: "
                f"it fails where {found.kind} is missing; test its availability or choose with torch.accelerator"
            )
        else:
            message = f"hardcoded device {found.text}: use a device chosen at run time"
        self.report(node, message, self._fix(found))

    def _uncalled_check(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """`"cuda" if torch.cuda.is_available else "cpu"`: the availability check the
        choice around `node` names without calling it (the function object is truthy)."""
        ancestors = self.ctx.ancestors
        for index in range(len(ancestors) - 1, -1, -1):
            ancestor = ancestors[index]
            if type(ancestor) is cst.IfExp:
                # the literal chosen when the test holds (under a `not`, or in the `else`
                # arm, it is never chosen: the call would choose it where cuda is missing)
                inside = ancestors[index + 1] if index + 1 < len(ancestors) else node
                test = ancestor.test
                chosen = inside is ancestor.body
                return test if chosen and self.ctx.qualify(test) in AVAILABILITY_CALLS else None
            if isinstance(ancestor, cst.BaseStatement):
                return None
        return None

    def _fix(self, found: DeviceLiteral) -> FixPlan | None:
        if found.nested or found.index == VARIABLE:
            return None
        is_string = type(found.unit) is cst.SimpleString
        device = self.binding.device()
        if found.position == "assign":
            # A string stays a string, since code may compare it to "cuda".
            binding_name = type(found.target) is cst.Name and found.target.value in (self.binding.name, "device")
            # a string with its index (`"cuda:0"`) may be parsed (`int(args.device[5])`):
            # the device-type string that replaces it has none, so the fix is unsafe
            plan = FixPlan.unsafe if is_string and found.index is not None else FixPlan.safe
            if is_string and not binding_name and device is not None and device.kind == "device":
                return plan(Replace(found.unit, device.type_code), *device.edits)
            if binding_name or is_string:
                code, edits = self.binding.portable_expression(string=is_string)
                return plan(Replace(found.unit, code), *edits)
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


_UNGUARDED = {
    # torch.cuda function: its torch.accelerator replacement, or None
    "synchronize": "synchronize",
    "current_device": "current_device_index",
    "set_device": "set_device_index",
    "memory_allocated": "memory_allocated",
    "max_memory_allocated": "max_memory_allocated",
    "memory_reserved": "memory_reserved",
    "reset_peak_memory_stats": "reset_peak_memory_stats",
    "empty_cache": "empty_cache",
    "get_device_name": None,
    "get_device_properties": None,
    "get_device_capability": None,
    "Stream": None,
    "Event": None,
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
        replacement = _UNGUARDED[function]
        minimum = versions.first_release(f"torch.accelerator.{replacement}") if replacement else None
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

    Also an argparse option whose default is an accelerator
    (`parser.add_argument("--device", default="cuda")`, any option name, also in an
    argument group) when the parsed value (`args.device`, however the namespace is
    named, `dest=` honoured) reaches a device position: `.to(args.device)`,
    `device=args.device`, `torch.device(args.device)`, `device = args.device`. The
    finding is at the default. A default chosen by its backend's availability check
    (`"cuda" if torch.cuda.is_available() else "cpu"`) is not reported.

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

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self._options: dict[int, tuple[cst.BaseExpression, str, str]] | None = None

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._check(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)
        if type(node.func) is cst.Attribute and node.func.attr.value == "add_argument":
            if self._options is None:
                self._options = _argparse_device_defaults(self.ctx)
            found = self._options.get(id(node))
            if found is not None:
                literal, option, use = found
                self.report(
                    literal,
                    f"option `{option}` defaults to {self.source_of(literal)}, which reaches `{use}`: "
                    "the script only runs with that accelerator unless the user passes another; "
                    "default to a device chosen at run time",
                )

    def _check(self, node: cst.BaseExpression) -> None:
        found = device_literal(self.ctx, node)
        if found is not None and found.position == "default" and not found.nested and not found.has_other_index:
            self.report(
                node, f"parameter default {found.text} makes callers CUDA-only: default to None and pick at run time"
            )


# A device context manager, with the call that does at once what its `with` block does.
_DEVICE_CONTEXTS = {
    "torch.accelerator.device_index": "index",
    "torch.cuda.device": "index",
    "torch.xpu.device": "index",
    "torch.cuda.device_of": None,
    "torch.device": None,
}


def discarded_context(ctx, node: cst.Call) -> str | None:
    """The qualified name of `node` when it is a device context manager standing alone
    as a statement (which enters nothing); None otherwise."""
    name = ctx.qualify(node.func)
    if name not in _DEVICE_CONTEXTS or node.lpar:
        return None
    expr = ctx.parent(node)
    return name if type(expr) is cst.Expr else None


class DiscardedDeviceContext(Rule):
    """
    ## What it does
    Checks for a device context manager called as a statement of its own, as in `torch.cuda.device(rank)`.

    The context managers are `torch.accelerator.device_index(i)`, `torch.cuda.device(i)`,
    `torch.xpu.device(i)`, `torch.cuda.device_of(t)` and `torch.device(...)`. As a `with`
    item, an assigned value or an argument they are not reported.

    ## Why is this bad?
    These calls only build a context manager; nothing happens until a `with` statement
    enters it. Alone on a line the call does nothing, and every tensor that was meant
    for GPU `i` lands on the current device (GPU 0 in every process of a distributed job).

    ## Example
        torch.accelerator.device_index(local_rank)

    ## Use instead
        torch.accelerator.set_device_index(local_rank)

    ## Fix safety
    Unsafe: the fixed line really selects the device, which changes where the following
    code runs (that is the point). `torch.accelerator.device_index(i)`,
    `torch.cuda.device(i)` and `torch.xpu.device(i)` become
    `torch.accelerator.set_device_index(i)`, or `torch.cuda.set_device(i)` when
    `torch-version` is below 2.6 (only for `torch.cuda`). `torch.device(...)` and
    `torch.cuda.device_of(t)` get no fix: the intent may have been a `with` block.
    """

    code = "DEV109"
    name = "discarded-device-context"
    fixable = True

    def visit_Call(self, node: cst.Call) -> None:
        name = discarded_context(self.ctx, node)
        if name is None:
            return
        shown = self.source_of(node.func)
        fix = self._fix(node, name)
        remedy = f"use `{fix[1]}(...)`" if fix is not None else "enter it with `with`, or drop the line"
        self.report(
            node,
            f"`{shown}(...)` alone does nothing: it is a context manager that only acts in a `with` block; {remedy}",
            fix[0] if fix is not None else None,
        )

    def _fix(self, node: cst.Call, name: str) -> tuple[FixPlan, str] | None:
        if _DEVICE_CONTEXTS[name] != "index" or len(node.args) != 1:
            return None
        arg = node.args[0]
        if arg.star or (arg.keyword is not None and arg.keyword.value != "device"):
            return None
        torch, edits = self.binding.torch()
        if self.ctx.config.torch_version >= (2, 6):
            function = f"{torch}.accelerator.set_device_index"
        elif name == "torch.cuda.device":
            function = f"{torch}.cuda.set_device"
        else:
            return None
        text = f"{function}({self.source_of(arg.value)})"
        return FixPlan.unsafe(Replace(node, text), *edits), function


_PARSER_FACTORIES = frozenset({"argparse.ArgumentParser"})
_PARSER_METHODS = frozenset({"add_argument_group", "add_mutually_exclusive_group", "add_subparsers", "add_parser"})
_PARSE_METHODS = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args"})


def _argparse_device_defaults(ctx) -> dict[int, tuple[cst.BaseExpression, str, str]]:
    """`{id(add_argument call): (default literal, option, use)}` for each argparse option
    whose default is an unguarded accelerator literal and whose value (`args.<dest>`)
    reaches a device position."""
    parsers: set[str] = set()
    for node in ctx.tree.nodes:
        if type(node) is cst.Assign and type(node.value) is cst.Call:
            func = node.value.func
            if ctx.imports.qualify(func) in _PARSER_FACTORIES or (
                type(func) is cst.Attribute
                and func.attr.value in _PARSER_METHODS
                and dotted_name(func.value) in parsers
            ):
                parsers.update(n for t in node.targets if (n := dotted_name(t.target)) is not None)
    if not parsers:
        return {}

    def parses(value: cst.BaseExpression | None, helpers: set[str]) -> bool:
        if type(value) is not cst.Call:
            return False
        func = value.func
        if type(func) is cst.Attribute and func.attr.value in _PARSE_METHODS:
            return dotted_name(func.value) in parsers
        return type(func) is cst.Name and func.value in helpers

    helpers = {
        node.name.value
        for node in ctx.tree.nodes
        if type(node) is cst.FunctionDef
        and any(type(r) is cst.Return and parses(r.value, set()) for r in ctx.tree.walk_scope(node))
    }
    namespaces: set[str] = set()
    for node in ctx.tree.nodes:
        if type(node) is cst.Assign and parses(node.value, helpers):
            for target in node.targets:
                bound = target.target
                if type(bound) in (cst.Tuple, cst.List) and bound.elements:
                    bound = bound.elements[0].value  # `args, unknown = parser.parse_known_args()`
                name = dotted_name(bound)
                if name is not None:
                    namespaces.add(name)
    uses = _namespace_device_uses(ctx, namespaces)
    found: dict[int, tuple[cst.BaseExpression, str, str]] = {}
    for node in ctx.tree.nodes:
        if type(node) is not cst.Call or type(node.func) is not cst.Attribute or node.func.attr.value != "add_argument":
            continue
        if dotted_name(node.func.value) not in parsers:
            continue
        option, dest = _option_dest(node)
        default = keyword_arg(node, "default")
        if dest is None or dest not in uses or default is None:
            continue
        literal = _unguarded_accelerator(ctx, default.value)
        if literal is not None:
            found[id(node)] = (literal, option, uses[dest])
    return found


def _option_dest(call: cst.Call) -> tuple[str, str | None]:
    """(`--device-id`, `device_id`): the option as written and its `dest`."""
    names = [string_value(a.value) for a in call.args if a.keyword is None and not a.star]
    names = [n for n in names if n]
    long = next((n for n in names if n.startswith("--")), None)
    chosen = long or (names[0] if names else None)
    if chosen is None:
        return "?", None
    explicit = keyword_arg(call, "dest")
    if explicit is not None:
        return chosen, string_value(explicit.value)
    return chosen, chosen.lstrip("-").replace("-", "_")


def _namespace_device_uses(ctx, namespaces: set[str]) -> dict[str, str]:
    """`{dest: code of its use}` for each `<namespace>.<dest>` in a device position:
    `.to(args.device)`, `device=args.device`, `torch.device(args.device)`, or an
    assignment to a device name (`device = args.device`); also through a name the
    value was given first (`dev = args.device` and later `.to(dev)`)."""
    uses: dict[str, str] = {}
    if not namespaces:
        return uses
    # `dev = args.device`: the name carries the option to where it is used
    renamed: dict[str, cst.Attribute] = {}
    for node in ctx.tree.nodes:
        if type(node) is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
            value = node.value
            if type(value) is cst.Attribute and dotted_name(value.value) in namespaces:
                renamed.setdefault(node.targets[0].target.value, value)

    def note(expr: cst.BaseExpression, where: cst.CSTNode) -> None:
        if type(expr) is cst.Name:
            expr = renamed.get(expr.value, expr)
        if type(expr) is cst.Attribute and dotted_name(expr.value) in namespaces:
            uses.setdefault(expr.attr.value, " ".join(ctx.module.code_for_node(where).split())[:60])

    for node in ctx.tree.nodes:
        if type(node) is cst.Call:
            first = node.args[0] if node.args and node.args[0].keyword is None and not node.args[0].star else None
            method = node.func.attr.value if type(node.func) is cst.Attribute else None
            if first is not None and (method == "to" or ctx.imports.qualify(node.func) == "torch.device"):
                note(first.value, node)
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value in DEVICE_KEYWORDS:
                    note(arg.value, node)
        elif type(node) is cst.Assign:
            for target in node.targets:
                name = target.target.attr.value if type(target.target) is cst.Attribute else dotted_name(target.target)
                if name in ("device", ctx.config.device_name) or (name or "").endswith("_device"):
                    note(node.value, node)
    return uses


def _unguarded_accelerator(ctx, value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The accelerator literal a default names, unless a test of its backend chooses it
    (`"cuda" if torch.cuda.is_available() else "cpu"`)."""
    if type(value) is cst.IfExp:
        body = _unguarded_accelerator(ctx, value.body)
        if body is not None and accelerator_type(string_value(body) or "") not in ctx.guards.when_true(value.test):
            return body
        orelse = _unguarded_accelerator(ctx, value.orelse)
        if orelse is not None and accelerator_type(string_value(orelse) or "") not in ctx.guards.when_false(value.test):
            return orelse
        return None
    literal = string_value(value)
    return value if literal is not None and accelerator_type(literal) is not None else None
