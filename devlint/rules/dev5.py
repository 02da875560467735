"""DEV5: guarded CUDA-only code, rewritten to `torch.accelerator` (opt-in: `--extend-select DEV5`).

A rewrite takes a whole decision at once: the availability check, the branches and flags
it decides and the placements under them (SPEC §2 DEV5), so the file keeps one device
notion. Each API a fix writes is checked against `torch-version` (analysis.versions).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from devlint.analysis import versions
from devlint.analysis.guards import accelerator_type, named_for_cuda
from devlint.analysis.literals import torch_device_call
from devlint.analysis.tree import dotted_name, int_value, keyword_arg, string_value
from devlint.fix.plan import FixPlan, InsertBeforeEnd, NodeEdit, Replace
from devlint.rules.base import Rule

# a backend's own check -> the torch.accelerator check that replaces it
_CHECKS = {
    "torch.cuda.is_available": "is_available", "torch.backends.mps.is_available": "is_available",
    "torch.mps.is_available": "is_available", "torch.xpu.is_available": "is_available",
    "torch.cuda.device_count": "device_count", "torch.xpu.device_count": "device_count",
    "torch.mps.device_count": "device_count",
}  # fmt: skip
_BACKEND_OF_CHECK = {name: name.split(".")[-2] for name in _CHECKS}

# torch.cuda runtime call -> its device-neutral replacement
_RUNTIME = {
    "set_device": "torch.accelerator.set_device_index",
    "current_device": "torch.accelerator.current_device_index",
    "synchronize": "torch.accelerator.synchronize",
    "current_stream": "torch.accelerator.current_stream",
    "Stream": "torch.Stream",
    "Event": "torch.Event",
    "memory_allocated": "torch.accelerator.memory_allocated",
    "max_memory_allocated": "torch.accelerator.max_memory_allocated",
    "memory_reserved": "torch.accelerator.memory_reserved",
    "reset_peak_memory_stats": "torch.accelerator.reset_peak_memory_stats",
    "empty_cache": "torch.accelerator.empty_cache",
}
# where a CUDA-only thing under a check does not block its rewrite: another DEV5 or DEV1
# fix makes it neutral (the legacy tensor types are DEV104's)
_NEUTRAL_CUDA_PREFIXES = ("torch.cuda.amp.",)
_DEVICE_KWARGS = frozenset({"non_blocking"})


def _accelerator(ctx, member: str) -> str:
    """`torch.accelerator.<member>` with the file's alias for torch."""
    torch = next((a for a in ctx.imports.torch_aliases if not ctx.is_local(a)), "torch")
    return f"{torch}.{member.removeprefix('torch.')}"


def _has(ctx, api: str) -> bool:
    return versions.available(api, ctx.config.torch_version)


def _cuda_named_scope(ctx) -> bool:
    return any(type(n) in (cst.FunctionDef, cst.ClassDef) and named_for_cuda(n.name.value) for n in ctx.ancestors)


# -- backend-selection chains (DEV502), also read by DEV501 ------------------------------


@dataclass(frozen=True)
class Chain:
    """One decision choosing a device per backend, with a CPU fallback."""

    node: cst.CSTNode  # what the fix replaces: an IfExp, `torch.device(IfExp)`, or an `if` statement
    tests: tuple[cst.BaseExpression, ...]
    as_device: bool  # the choice is a torch.device (else a device-type string)
    target: str | None = None  # for an `if` statement: the assigned name


def _device_choice(ctx, node: cst.BaseExpression) -> tuple[str, bool] | None:
    """`"cuda"` / `torch.device("mps")` -> (type, is a torch.device); "cpu" for the CPU;
    None for anything else (an index other than 0 included)."""
    if type(node) is cst.Call:
        described = torch_device_call(ctx, node)
        if described is not None:
            kind, _, index = described
            return (kind, True) if index in (None, 0) else None
        if (
            ctx.qualify(node.func) == "torch.device"
            and len(node.args) == 1
            and string_value(node.args[0].value) == "cpu"
        ):
            return "cpu", True
        return None
    literal = string_value(node)
    if literal is None:
        return None
    if literal == "cpu":
        return "cpu", False
    kind = accelerator_type(literal)
    return (kind, False) if kind is not None and literal in (kind, f"{kind}:0") else None


def _guards_own_backend(ctx, test: cst.BaseExpression, kind: str) -> bool:
    return kind in ctx.guards.when_true(test)


def _guards_other_backend(ctx, test: cst.BaseExpression, kind: str) -> bool:
    """`"mps" if torch.cuda.is_available() else ...` chooses no device by its own check:
    no selection chain. A test that says nothing about the machine is a user flag."""
    implied = ctx.guards.when_true(test)
    return bool(implied) and kind not in implied


def ifexp_chain(ctx, node: cst.BaseExpression) -> Chain | None:
    """`"cuda" if C1 else "mps" if C2 else "cpu"` (also inside `torch.device(...)`, also of
    torch.device values), each test guarding its own backend."""
    outer = node
    if type(node) is cst.Call and ctx.qualify(node.func) == "torch.device" and len(node.args) == 1:
        node = node.args[0].value
        wrapped = True
    else:
        wrapped = False
    if type(node) is not cst.IfExp:
        return None
    tests: list[cst.BaseExpression] = []
    as_device = wrapped
    while type(node) is cst.IfExp:
        choice = _device_choice(ctx, node.body)
        if choice is None or choice[0] == "cpu" or _guards_other_backend(ctx, node.test, choice[0]):
            return None
        tests.append(node.test)
        as_device = as_device or choice[1]
        node = node.orelse
    fallback = _device_choice(ctx, node)
    if fallback is None or fallback[0] != "cpu":
        return None
    return Chain(outer, tuple(tests), as_device)


def statement_chain(ctx, node: cst.If) -> Chain | None:
    """`if C1: device = torch.device("cuda") elif C2: device = "mps" else: device = "cpu"`."""
    tests: list[cst.BaseExpression] = []
    target = None
    as_device = False
    branch: cst.If | cst.Else | None = node
    while branch is not None:
        assigned = _single_assignment(branch.body)
        if assigned is None:
            return None
        name, value = assigned
        if target is not None and name != target:
            return None
        target = name
        choice = _device_choice(ctx, value)
        if choice is None:
            return None
        as_device = as_device or choice[1]
        if type(branch) is cst.Else:
            if choice[0] != "cpu":
                return None
            return Chain(node, tuple(tests), as_device, target) if tests else None
        if choice[0] == "cpu" or _guards_other_backend(ctx, branch.test, choice[0]):
            return None
        tests.append(branch.test)
        branch = branch.orelse
    return None


def _single_assignment(body: cst.BaseSuite) -> tuple[str, cst.BaseExpression] | None:
    statements = body.body if type(body) is cst.IndentedBlock else ()
    if len(statements) != 1 or type(statements[0]) is not cst.SimpleStatementLine:
        return None
    line = statements[0]
    if len(line.body) != 1 or type(line.body[0]) is not cst.Assign or len(line.body[0].targets) != 1:
        return None
    name = dotted_name(line.body[0].targets[0].target)
    return (name, line.body[0].value) if name is not None else None


def _chain_around(ctx) -> Chain | None:
    """The selection chain whose test holds the current node, if any."""
    for child, parent in zip(reversed(ctx.ancestors[1:]), reversed(ctx.ancestors[:-1])):
        if type(parent) in (cst.IfExp, cst.If) and child is parent.test:
            top = parent
            index = ctx.ancestors.index(parent)
            for above in reversed(ctx.ancestors[:index]):
                if type(above) is cst.IfExp and top is above.orelse or type(above) is cst.If and top is above.orelse:
                    top = above
                elif type(above) is cst.Call and ctx.qualify(above.func) == "torch.device":
                    top = above
                    break
                elif type(above) is not cst.Arg:
                    break
            if type(top) is cst.If:
                return statement_chain(ctx, top)
            return ifexp_chain(ctx, top)
    return None


def in_selection_chain(ctx) -> bool:
    """Is the current node a device that a selection chain (DEV502) chooses?"""
    ancestors = ctx.ancestors
    for index in range(len(ancestors) - 1, 0, -1):
        node = ancestors[index - 1]
        if type(node) is cst.If:
            top = index - 1
            while top > 0 and type(ancestors[top - 1]) is cst.If and ancestors[top - 1].orelse is ancestors[top]:
                top -= 1
            return statement_chain(ctx, ancestors[top]) is not None
        if type(node) is cst.IfExp:
            top = index - 1
            while top > 0 and type(ancestors[top - 1]) is cst.IfExp and ancestors[top - 1].orelse is ancestors[top]:
                top -= 1
            if top > 1 and type(ancestors[top - 1]) is cst.Arg and type(ancestors[top - 2]) is cst.Call:
                wrapped = ifexp_chain(ctx, ancestors[top - 2])
                if wrapped is not None:
                    return True
            return ifexp_chain(ctx, ancestors[top]) is not None
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Module)):
            return False
    return False


class _ChecksToAccelerator(cst.CSTTransformer):
    def __init__(self, ctx) -> None:
        self.ctx = ctx

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        member = _CHECKS.get(self.ctx.qualify(original.func) or "")
        if member is None:
            return updated
        return updated.with_changes(func=cst.parse_expression(_accelerator(self.ctx, f"accelerator.{member}")))


def _is_pure_check(ctx, test: cst.BaseExpression) -> bool:
    """Is `test` only an availability check (or a flag assigned from nothing else)?"""
    if type(test) is cst.Call:
        return (ctx.qualify(test.func) or "") in _CHECKS
    if type(test) is cst.Comparison and type(test.left) is cst.Call:
        return (ctx.qualify(test.left.func) or "") in _CHECKS
    return False


def chain_fix(ctx, chain: Chain) -> tuple[str, bool]:
    """The replacement text of `chain` and whether it is safe (every test a pure check)."""
    pure = all(_is_pure_check(ctx, t) for t in chain.tests)
    available = f"{_accelerator(ctx, 'accelerator.is_available')}()"
    if pure:
        test = available
    else:
        rendered: list[str] = []
        for t in chain.tests:
            text = ctx.module.code_for_node(t.visit(_ChecksToAccelerator(ctx)).with_changes(lpar=(), rpar=()))
            user_flag = not ctx.guards.when_true(t)
            grouped = type(t) is cst.IfExp or (
                type(t) is cst.BooleanOperation and (len(chain.tests) > 1 or type(t.operator) is cst.Or)
            )
            if "\n" in text or (
                grouped and (len(chain.tests) > 1 or user_flag)
            ):  # a test over lines keeps its parentheses
                text = f"({text})"
            if user_flag:  # the user's flag stays, and the accelerator must exist
                text = f"{text} and {available}"
                if len(chain.tests) > 1:
                    text = f"({text})"
            if text not in rendered:
                rendered.append(text)
        test = " or ".join(rendered)
    current = f"{_accelerator(ctx, 'accelerator.current_accelerator')}()"
    cpu = f'{_accelerator(ctx, "device")}("cpu")' if chain.as_device else '"cpu"'
    value = f"{current} if {test} else {cpu}" if chain.as_device else f"{current}.type if {test} else {cpu}"
    if chain.target is not None:
        value = f"{chain.target} = {value}"
    return value, pure


class BackendSelectionChain(Rule):
    """
    ## What it does
    Checks for a device chosen per backend (`"cuda"`, `"mps"`, `"xpu"`) with a CPU fallback.

    The `if/elif/else` chains that assign one device per backend, and the conditional
    expressions such as `torch.device("cuda" if torch.cuda.is_available() else "cpu")`.

    ## Why is this bad?
    Each backend needs its own branch, and every backend left out (Intel, Ascend, or
    Apple in a CUDA-only selector) trains on the CPU. `torch.accelerator` names
    whichever accelerator the machine has.

    ## Example
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    ## Use instead
        device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")

    ## Fix safety
    Safe when every test is its own backend's availability check: a build of torch has
    one accelerator type, so the choice is the same on every machine where the old code
    found one. Unsafe when a test holds a user flag (`args.cuda`, `use_cuda`): the flags
    stay in the test (`... if use_cuda or use_mps else ...`), which changes what they
    mean on another accelerator. Needs torch 2.6 (`torch-version`).
    """

    code = "DEV502"
    name = "backend-selection-chain"
    fixable = True

    def visit_IfExp(self, node: cst.IfExp) -> None:
        parent = self.ctx.parent(node)
        if type(parent) is cst.IfExp and node is parent.orelse:
            return  # the outer expression is the chain
        if type(parent) is cst.Arg:
            call = self.ctx.parent(parent)
            if type(call) is cst.Call and self.ctx.qualify(call.func) == "torch.device":
                self._check(ifexp_chain(self.ctx, call))
                return
        self._check(ifexp_chain(self.ctx, node))

    def visit_If(self, node: cst.If) -> None:
        parent = self.ctx.parent(node)
        if type(parent) is cst.If and node is parent.orelse:
            return
        self._check(statement_chain(self.ctx, node))

    def _check(self, chain: Chain | None) -> None:
        if chain is None or _cuda_named_scope(self.ctx):
            return
        fix = None
        if _has(self.ctx, "torch.accelerator.current_accelerator"):
            text, pure = chain_fix(self.ctx, chain)
            edit = Replace(chain.node, text)
            fix = FixPlan.safe(edit) if pure else FixPlan.unsafe(edit)
        backends = len(chain.tests)
        what = "one backend" if backends == 1 else f"{backends} backends"
        self.report(
            chain.node,
            f"device chosen among {what} and the CPU: `torch.accelerator.current_accelerator()` names any accelerator",
            fix,
        )


# -- availability checks (DEV501) ----------------------------------------------------------


def _decision_of(ctx) -> tuple[str, cst.CSTNode] | None:
    """Where the current check stands: ("condition", the If/IfExp/While) or ("flag", the
    assignment); None for any other use (an argument, a print)."""
    ancestors = ctx.ancestors
    for index in range(len(ancestors) - 1, 0, -1):
        child, parent = ancestors[index], ancestors[index - 1]
        kind = type(parent)
        if kind in (cst.If, cst.IfExp, cst.While) and child is parent.test:
            return "condition", parent
        if kind is cst.Assign and child is parent.value:
            return "flag", parent
        if kind is cst.AnnAssign and child is parent.value:
            return "flag", parent
        if kind in (cst.UnaryOperation, cst.BooleanOperation, cst.Comparison, cst.ComparisonTarget):
            continue
        if kind is cst.Call and dotted_name(parent.func) == "bool":
            continue
        if (
            kind is cst.Arg
            and type(ancestors[index - 2]) is cst.Call
            and dotted_name(ancestors[index - 2].func) == "bool"
        ):
            continue
        if kind is cst.IfExp and child is not parent.test:  # `True if C else False`
            continue
        return None
    return None


class CudaAvailabilityCheck(Rule):
    """
    ## What it does
    Checks for `torch.cuda.is_available()` (and the MPS/XPU checks, `torch.cuda.device_count()`) used as a condition or flag.

    ## Why is this bad?
    Code under a CUDA check runs everywhere, but on an Apple, Intel or Ascend machine
    the check is False and the program silently trains on the CPU.

    ## Example
        use_cuda = torch.cuda.is_available()
        if use_cuda:
            model.cuda()

    ## Use instead
        use_cuda = torch.accelerator.is_available()
        if use_cuda:
            model.to(device)

    ## Fix safety
    Unsafe: on a non-CUDA accelerator the program now uses it. The fix rewrites the
    check and, in the same edit, everything it decides: `.cuda()` under it becomes
    `.to(device)`; device choices are DEV502's, `torch.cuda` runtime calls DEV503's and
    CUDA tensor types DEV104's. When something the check decides stays CUDA-only (a
    `"cuda"` string, `torch.cuda.get_device_name`, `.is_cuda`), the finding quotes that
    code and has no fix. Needs torch 2.6 (`torch-version`).
    """

    code = "DEV501"
    name = "cuda-availability-check"
    fixable = True

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        qualified = ctx.qualify(node.func) or ""
        member = _CHECKS.get(qualified)
        if member is None or _cuda_named_scope(ctx):
            return
        decision = _decision_of(ctx)
        if decision is None or _chain_around(ctx) is not None:
            return
        kind, where = decision
        if self._dispatches_on_device_type(where):
            return
        regions = self._decided(kind, where)
        if regions is None:
            return
        replacement = f"{_accelerator(ctx, 'accelerator.' + member)}"
        check = f"`{qualified}()`"
        if not _has(ctx, f"torch.accelerator.{member}"):
            self.report(node, f"{check} finds only one backend (torch.accelerator needs torch 2.6)")
            return
        edits: list[NodeEdit] = [Replace(node.func, replacement)]
        for region, present in regions:
            blocker = self._rewrite_region(region, present, edits)
            if blocker is not None:
                stays = " ".join(self.source_of(blocker).split())
                self.report(
                    node,
                    f"{check} decides `{stays[:60]}`, which stays {_BACKEND_OF_CHECK[qualified].upper()}-only: "
                    "make it device-neutral, then use `torch.accelerator`",
                )
                return
        self.report(node, f"{check} finds only one backend: use `{replacement}()`", FixPlan.unsafe(*edits))

    def _dispatches_on_device_type(self, where: cst.CSTNode) -> bool:
        """`device.type == "cuda" and torch.cuda.is_available()`: a branch per device type
        (timm's loaders, beside an `npu` one), which already follows the device it is given."""
        decision = where.test if type(where) in (cst.If, cst.IfExp, cst.While) else where.value
        guards = self.ctx.guards
        return any(
            (type(n) is cst.Comparison and type(n.left) is not cst.Call and guards.implication(n).says_anything)
            or (type(n) is cst.Attribute and n.attr.value in ("is_cuda", "is_mps", "is_xpu"))
            for n in self.ctx.tree.walk(decision)
        )

    def _decided(self, kind: str, where: cst.CSTNode) -> list[tuple[cst.CSTNode, frozenset]] | None:
        """The code the check decides, each part with the backends present where it runs:
        the branches of its condition, or of every condition that tests its flag."""
        guards = self.ctx.guards
        if kind == "condition":
            return [
                (branch, present)
                for branch, present in (
                    (where.body, guards.when_true(where.test)),
                    (getattr(where, "orelse", None), guards.when_false(where.test)),
                )
                if branch is not None
            ]
        targets = where.targets if type(where) is cst.Assign else [where]
        names = {dotted_name(t.target) for t in targets} - {None}
        if not names:
            return None
        regions: list[tuple[cst.CSTNode, frozenset]] = []
        for node in self.ctx.tree.nodes:
            if type(node) in (cst.If, cst.IfExp, cst.While) and any(
                dotted_name(n) in names for n in self.ctx.tree.walk(node.test) if type(n) in (cst.Name, cst.Attribute)
            ):
                if _chain_or_none(self.ctx, node) is not None:
                    continue  # DEV502's
                regions.append((node.body, guards.when_true(node.test)))
                if getattr(node, "orelse", None) is not None:
                    regions.append((node.orelse, guards.when_false(node.test)))
        return regions

    def _rewrite_region(self, region: cst.CSTNode, present: frozenset, edits: list[NodeEdit]) -> cst.CSTNode | None:
        """Add the edits that make `region` neutral; the first node that cannot be made so.
        Where the check's backend is `present`, a device it names is the current accelerator."""
        ctx = self.ctx
        current = f"{_accelerator(ctx, 'accelerator.current_accelerator')}()"
        handled: set[int] = set()
        for node in ctx.tree.walk(region):
            kind = type(node)
            if id(node) in handled:
                continue
            if kind is cst.Call:
                func = node.func
                qualified = ctx.qualify(func) or ""
                named = self._named_device(node, present)
                if named is not None:
                    edits.append(Replace(named, current))
                    handled.update(id(n) for n in ctx.tree.walk(named))
                    continue
                if qualified.startswith("torch.cuda."):
                    function = qualified[len("torch.cuda.") :]
                    if function in _RUNTIME and _has(ctx, _RUNTIME[function]):
                        continue  # DEV503
                    if qualified.endswith("Tensor") or qualified in _CHECKS:
                        continue  # DEV104 / another check
                    if qualified.startswith(_NEUTRAL_CUDA_PREFIXES):
                        continue  # DEV105
                    return node
                if type(func) is cst.Attribute and func.attr.value == "cuda" and not qualified:
                    if any(
                        a.star or (a.keyword is not None and a.keyword.value not in _DEVICE_KWARGS) for a in node.args
                    ) or any(a.keyword is None for a in node.args):
                        return node
                    device = self._device_at(node)
                    if device is None:
                        return node
                    code, device_edits = device
                    edits.append(Replace(func.attr, "to"))
                    if node.args:
                        edits.append(Replace(node.args[0], f"{code}, {self.source_of(node.args[0])}"))
                    else:
                        edits.append(InsertBeforeEnd(node, code))
                    edits.extend(device_edits)
            elif kind is cst.Attribute and node.attr.value in ("is_cuda", "is_mps", "is_xpu"):
                return node
            elif kind in (cst.SimpleString, cst.FormattedString):
                literal = string_value(node)
                if literal is not None and accelerator_type(literal) is not None and not self._in_chain(node, region):
                    return node
        return None

    def _named_device(self, call: cst.Call, present: frozenset) -> cst.BaseExpression | None:
        """In `torch.device("mps")`, `x.to("cuda")` or `f(..., device="cuda")` where that
        backend is present: the expression naming it (the call, or the string)."""
        ctx = self.ctx
        described = torch_device_call(ctx, call)
        if described is not None:
            kind, _, index = described
            return call if kind in present and index in (None, 0) else None
        candidates = [a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"]
        if (
            type(call.func) is cst.Attribute
            and call.func.attr.value == "to"
            and call.args
            and call.args[0].keyword is None
        ):
            candidates.append(call.args[0].value)
        for value in candidates:
            literal = string_value(value)
            kind = accelerator_type(literal) if literal is not None else None
            if kind is not None and kind in present and literal in (kind, f"{kind}:0"):
                return value
        return None

    def _device_at(self, call: cst.Call) -> tuple[str, tuple[NodeEdit, ...]] | None:
        """The device binding where `call` stands (the walk is at the check, which may come
        before a module-level `device = ...` that `call` follows)."""
        device = self.binding.device()
        if device is not None:
            return device.code, device.edits
        name = self.ctx.config.device_name
        if self.ctx.functions() or not self.binding.has_module_binding():
            return None
        body = self.ctx.module.body
        index_of = {id(n): i for i, stmt in enumerate(body) for n in self.ctx.tree.walk(stmt)}
        first = next(
            (
                i
                for i, stmt in enumerate(body)
                for n in self.ctx.tree.walk_scope(stmt)
                if type(n) is cst.AssignTarget and dotted_name(n.target) == name
            ),
            None,
        )
        return (name, ()) if first is not None and first < index_of.get(id(call), -1) else None

    def _in_chain(self, literal: cst.CSTNode, region: cst.CSTNode) -> bool:
        for node in self.ctx.tree.walk(region):
            if type(node) in (cst.IfExp, cst.If, cst.Call):
                chain = _chain_or_none(self.ctx, node)
                if chain is not None and any(n is literal for n in self.ctx.tree.walk(chain.node)):
                    return True
        return False


def _chain_or_none(ctx, node: cst.CSTNode) -> Chain | None:
    if type(node) is cst.If:
        return statement_chain(ctx, node)
    if type(node) in (cst.IfExp, cst.Call):
        return ifexp_chain(ctx, node)
    return None


# -- runtime calls, process groups, device tests (DEV503-DEV505) -----------------------------


class CudaRuntimeCall(Rule):
    """
    ## What it does
    Checks for `torch.cuda` runtime calls that have a `torch.accelerator` equivalent.

    `set_device`, `current_device`, `synchronize`, `current_stream`, `Stream`, `Event`,
    `memory_allocated`, `max_memory_allocated`, `memory_reserved`,
    `reset_peak_memory_stats` and `empty_cache`, guarded or not.

    ## Why is this bad?
    They address CUDA only: on another accelerator they raise or report nothing.
    `torch.accelerator` (and `torch.Stream` / `torch.Event`) address whichever
    accelerator the machine has.

    ## Example
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    ## Use instead
        if torch.accelerator.is_available():
            torch.accelerator.synchronize()

    ## Fix safety
    Unsafe: on a non-CUDA accelerator the call now acts on it. Each replacement is
    offered only where `torch-version` has it (`torch.accelerator` 2.6, its memory
    functions 2.8). A call outside a guard is DEV106's when DEV106 is selected.
    """

    code = "DEV503"
    name = "cuda-runtime-call"
    fixable = True

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        qualified = ctx.qualify(node.func) or ""
        if not qualified.startswith("torch.cuda."):
            return
        function = qualified[len("torch.cuda.") :]
        target = _RUNTIME.get(function)
        if target is None or _cuda_named_scope(ctx):
            return
        if function == "set_device" and node.args and int_value(node.args[0].value) is not None:
            return  # DEV103
        if not ctx.guards_backend("cuda") and ctx.config.is_enabled("DEV106"):
            return  # DEV106's: outside a guard the accelerator version may raise where this one does not
        fix = None
        if _has(ctx, target):
            fix = FixPlan.unsafe(Replace(node.func, _accelerator(ctx, target)))
            message = f"`{qualified}` addresses CUDA only: use `{target}`"
        else:
            message = f"`{qualified}` addresses CUDA only: `{target}` (torch >= {versions.release_text(target)})"
        self.report(node, message, fix)


_PROCESS_GROUP = frozenset({"torch.distributed.init_process_group", "torch.distributed.new_group"})


class HardcodedProcessGroupBackend(Rule):
    """
    ## What it does
    Checks for `init_process_group("nccl")` and `backend="nccl"` in a file that places tensors on an accelerator.

    ## Why is this bad?
    NCCL exists only for NVIDIA GPUs: the same script on Intel (`xccl`), Ascend (`hccl`)
    or the CPU (`gloo`) fails at start-up.

    ## Example
        torch.distributed.init_process_group("nccl", rank=rank, world_size=world_size)
        model.to(device)

    ## Use instead
        backend = torch.distributed.get_default_backend_for_device(device)
        torch.distributed.init_process_group(backend, rank=rank, world_size=world_size)
        model.to(device)

    ## Fix safety
    Unsafe: on another machine another backend runs. Needs torch 2.6
    (`get_default_backend_for_device`).
    """

    code = "DEV504"
    name = "hardcoded-process-group-backend"
    fixable = True

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if ctx.qualify(node.func) not in _PROCESS_GROUP:
            return
        arg = keyword_arg(node, "backend")
        if arg is None and node.args and node.args[0].keyword is None and not node.args[0].star:
            arg = node.args[0]
        if arg is None or string_value(arg.value) != "nccl" or not self._places_on_accelerator():
            return
        fix = None
        api = "torch.distributed.get_default_backend_for_device"
        if _has(ctx, api):
            device = self.binding.device()
            if device is not None:
                fix = FixPlan.unsafe(Replace(arg.value, f"{_accelerator(ctx, api)}({device.code})"), *device.edits)
        self.report(arg.value, '`"nccl"` runs only on NVIDIA GPUs: use `get_default_backend_for_device(device)`', fix)

    def _places_on_accelerator(self) -> bool:
        code = self.ctx.module.code
        return any(marker in code for marker in (".cuda(", ".to(", "device=", "set_device"))


class CudaOnlyDeviceTest(Rule):
    """
    ## What it does
    Checks for `x.is_cuda` and `d.type == "cuda"` used as a test.

    ## Why is this bad?
    Such a test usually means "is this on an accelerator?", and is False on Apple,
    Intel and Ascend devices, where the branch for the CPU then runs.

    ## Example
        if x.is_cuda:
            torch.accelerator.synchronize()

    ## Use instead
        if x.device.type != "cpu":
            torch.accelerator.synchronize()

    ## Fix safety
    No fix: whether the test means CUDA or any accelerator depends on the branch.
    """

    code = "DEV505"
    name = "cuda-only-device-test"

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "is_cuda" or self.ctx.qualify(node) is not None or not self._is_test():
            return
        if type(node.value) is cst.Name and node.value.value == "self":
            return  # a flag of the object's own (timm's loaders)
        receiver = self.source_of(node.value)
        self.report(
            node, f'`{receiver}.is_cuda` is False on other accelerators: `{receiver}.device.type != "cpu"` means any'
        )

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1 or type(node.comparisons[0].operator) not in (cst.Equal, cst.NotEqual):
            return
        left, right = node.left, node.comparisons[0].comparator
        if type(left) is not cst.Attribute or left.attr.value != "type" or string_value(right) != "cuda":
            return
        if not self._is_test():
            return
        receiver = self.source_of(left.value)
        self.report(
            node,
            f'`{" ".join(self.source_of(node).split())}` tells CUDA from all else: `{receiver}.type != "cpu"` means any accelerator',
        )

    def _is_test(self) -> bool:
        """Is the current node (part of) a branch's test that means "on an accelerator"?
        Not when the test also names another backend (`x.is_cuda or x.is_xpu`: it
        already knows them apart), nor when the branch calls code named for CUDA
        (`decode_jpegs_cuda`): then it means CUDA."""
        ctx = self.ctx
        if _cuda_named_scope(ctx):
            return False
        ancestors = ctx.ancestors
        for index in range(len(ancestors) - 1, 0, -1):
            child, parent = ancestors[index], ancestors[index - 1]
            kind = type(parent)
            if kind in (cst.If, cst.IfExp, cst.While) and child is parent.test:
                return not self._names_other_backend(parent.test) and not self._calls_cuda_code(parent.body)
            if kind not in (cst.UnaryOperation, cst.BooleanOperation, cst.Comparison, cst.ComparisonTarget):
                return False
        return False

    def _names_other_backend(self, test: cst.BaseExpression) -> bool:
        for node in self.ctx.tree.walk(test):
            if type(node) is cst.Attribute and node.attr.value in ("is_xpu", "is_mps", "is_npu", "is_hpu"):
                return True
            literal = string_value(node) if type(node) is cst.SimpleString else None
            if literal is not None and literal != "cuda" and accelerator_type(literal) is not None:
                return True
        return False

    def _calls_cuda_code(self, body: cst.CSTNode) -> bool:
        for node in self.ctx.tree.walk(body):
            if type(node) is cst.Call:
                name = dotted_name(node.func) or ""
                last = name.rsplit(".", 1)[-1]
                if last != "cuda" and ("cuda" in last.lower() or name.startswith("torch.cuda.")):
                    return True
        return False
