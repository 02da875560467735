"""Availability guards (SPEC §2 Guards): which accelerators are surely present where
this code runs?

`if torch.cuda.is_available():`, `"cuda" if use_cuda else "cpu"`, `if x.is_cuda:`,
`if device.type == "cuda":`, `if not torch.cuda.is_available(): return` before it, a
`skipif(not torch.cuda.is_available())` decorator, and flags assigned from any of these
(`use_cuda = not args.no_cuda and torch.cuda.is_available()`), each with its polarity.
A guard protects its own backend only: `torch.backends.mps.is_available()` guards no
`.cuda()`, and `torch.accelerator.is_available()` (True on a Mac) guards no `"cuda"`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import libcst as cst

from devlint.analysis import device_tables as T
from devlint.analysis.tree import argument_for, dotted_name, int_value, signed_int_value, string_value, walk


# What a check of availability says when it is true: its backend is present. The
# generic `torch.accelerator` checks say only that *some* accelerator is (SOME).
SOME = "accelerator"
_CHECK_BACKENDS = {
    "torch.cuda.is_available": "cuda", "torch.cuda.device_count": "cuda",
    "torch.cuda.is_initialized": "cuda", "torch.backends.cudnn.is_available": "cuda",
    "torch.backends.mps.is_available": "mps", "torch.mps.is_available": "mps",
    "torch.mps.device_count": "mps",
    "torch.xpu.is_available": "xpu", "torch.xpu.device_count": "xpu",
    "torch.npu.is_available": "npu", "torch.npu.device_count": "npu",
    "torch.hpu.is_available": "hpu", "torch.hpu.device_count": "hpu",
    "torch.accelerator.is_available": SOME, "torch.accelerator.device_count": SOME,
}  # fmt: skip
AVAILABILITY_CALLS = frozenset(_CHECK_BACKENDS)
_COUNTS = frozenset(name for name in _CHECK_BACKENDS if name.endswith("device_count"))
_BACKEND_ATTRS = {"is_cuda": "cuda", "is_mps": "mps", "is_xpu": "xpu", "is_npu": "npu", "is_hpu": "hpu"}

Backends = frozenset  # of backend names (and SOME): what a condition implies is present
NONE: Backends = frozenset()
# A condition that cannot hold (`False` when true) implies anything.
EVERYTHING: Backends = frozenset({SOME, *T.ACCELERATOR_TYPES})


def present(backend: str) -> Backends:
    """What the presence of `backend` implies: it, and that some accelerator is there."""
    return frozenset({backend, SOME})


def named_for_cuda(name: str) -> bool:
    """`benchmark_cuda`, `CUDAPrefetcher`, `requires_gpu`: code named for CUDA is CUDA-only
    by intent."""
    lowered = name.lower()
    return "cuda" in lowered or "gpu" in lowered


def accelerator_type(literal: str) -> str | None:
    """`"cuda:1"` -> `"cuda"`; None for `"cpu"`, `"meta"` and anything not a device."""
    kind = literal.split(":", 1)[0].strip()
    return kind if kind in T.ACCELERATOR_TYPES else None


@dataclass(frozen=True)
class Implication:
    """What a condition implies about the machine: `when_true` holds wherever it is truthy,
    `when_false` wherever it is falsy. Each is a set of backends known present."""

    when_true: Backends = NONE
    when_false: Backends = NONE

    @property
    def negated(self) -> Implication:
        return Implication(self.when_false, self.when_true)

    @property
    def says_anything(self) -> bool:
        return bool(self.when_true or self.when_false)


NOTHING_KNOWN = Implication()


class GuardOracle:
    """Decides what a test expression implies about the accelerators present, per backend
    and with its polarity: `if not no_cuda:` after `no_cuda = not torch.cuda.is_available()`
    is the CUDA branch, `if no_cuda:` the branch that runs without CUDA.

    `qualify` resolves import aliases; `flags` maps a name (or an attribute's name) to
    what its value implies, for names assigned only from checks (see `flags_of`).
    """

    def __init__(
        self,
        qualify: Callable[[cst.BaseExpression], str | None],
        assignments: Callable[[], list[tuple[str, cst.BaseExpression | None]]] | None = None,
    ) -> None:
        self._qualify = qualify
        self._assignments = assignments  # read on the first question (see `learn_flags`)
        self.flags: dict[str, Implication] = {}

    def when_true(self, expr: cst.BaseExpression) -> Backends:
        """The backends present wherever `expr` is truthy."""
        return self.implication(expr).when_true

    def when_false(self, expr: cst.BaseExpression) -> Backends:
        """The backends present wherever `expr` is falsy."""
        return self.implication(expr).when_false

    def flag(self, name: str) -> Implication | None:
        """What flag `name` (`use_cuda`, `args.cuda`) implies; None if it is no flag."""
        self._learn()
        return self.flags.get(name)

    def _learn(self) -> None:
        if self._assignments is not None:
            assignments, self._assignments = self._assignments, None
            self.learn_flags(assignments())

    def implication(self, expr: cst.BaseExpression) -> Implication:
        self._learn()
        kind = type(expr)
        if kind is cst.UnaryOperation and type(expr.operator) is cst.Not:
            return self.implication(expr.expression).negated
        if kind is cst.BooleanOperation:
            left, right = self.implication(expr.left), self.implication(expr.right)
            if type(expr.operator) is cst.And:
                return Implication(left.when_true | right.when_true, left.when_false & right.when_false)
            return Implication(left.when_true & right.when_true, left.when_false | right.when_false)
        if kind is cst.IfExp:  # `True if C else False`, `A if C else B`
            test, body, orelse = self.implication(expr.test), self.implication(expr.body), self.implication(expr.orelse)
            return Implication(
                (test.when_true | body.when_true) & (test.when_false | orelse.when_true),
                (test.when_true | body.when_false) & (test.when_false | orelse.when_false),
            )
        if kind is cst.NamedExpr:
            return self.implication(expr.value)
        if kind is cst.Comparison:
            return self._comparison(expr)
        if kind is cst.Name:
            if expr.value == "True":
                return Implication(NONE, EVERYTHING)
            if expr.value == "False":
                return Implication(EVERYTHING, NONE)
            return self.flags.get(expr.value, NOTHING_KNOWN)
        if kind is cst.Attribute:
            backend = _BACKEND_ATTRS.get(expr.attr.value)
            if backend is not None:
                return Implication(present(backend))
            key = dotted_name(expr)
            if key is not None and key not in self.flags and key.startswith("self.") and key.count(".") >= 2:
                key = key[5:]  # `self.args.cuda` of the `args` whose `args.cuda` is a flag
            return self.flags.get(key, NOTHING_KNOWN) if key is not None else NOTHING_KNOWN
        if kind is cst.Call:
            return self._call(expr)
        return NOTHING_KNOWN

    def _call(self, call: cst.Call) -> Implication:
        qualified = self._qualify(call.func)
        backend = _CHECK_BACKENDS.get(qualified or "")
        if backend is not None:
            return Implication(present(backend) if backend != SOME else frozenset({SOME}))
        if dotted_name(call.func) == "bool" and len(call.args) == 1 and not call.args[0].keyword:
            return self.implication(call.args[0].value)
        prefixes = _accelerator_prefixes(call)
        if prefixes:
            return Implication(_common(prefixes))
        return NOTHING_KNOWN

    def _comparison(self, expr: cst.Comparison) -> Implication:
        if len(expr.comparisons) != 1:
            return NOTHING_KNOWN
        target = expr.comparisons[0]
        op = type(target.operator)
        equal = op in (cst.Equal, cst.Is, cst.In)
        unequal = op in (cst.NotEqual, cst.IsNot, cst.NotIn)
        for side in (expr.left, target.comparator):
            literal = _device_string(self._qualify, side)
            if literal is None:
                continue
            backend = accelerator_type(literal)
            if backend is not None:  # `d.type == "cuda"`, `"cuda" in str(d)`, `d == torch.device("cuda")`
                implied = Implication(present(backend))
            elif literal.split(":", 1)[0] == "cpu":  # `d.type != "cpu"`: some accelerator
                implied = Implication(NONE, frozenset({SOME}))
            else:
                return NOTHING_KNOWN
            if equal:
                return implied
            return implied.negated if unequal else NOTHING_KNOWN
        # `torch.cuda.device_count() > 0` (or `>= 1`, `> 1`, `!= 0`; `== 0`, `< 1` negated)
        left = expr.left
        if type(left) is cst.Call and self._qualify(left.func) in _COUNTS:
            count = self._call(left)
            bound = int_value(target.comparator)
            if bound is None:
                return NOTHING_KNOWN
            if (
                (op is cst.GreaterThan and bound >= 0)
                or (op in (cst.GreaterThanEqual, cst.NotEqual) and bound >= 1)
                or (op is cst.NotEqual and bound == 0)
            ):
                return count
            if (
                (op is cst.Equal and bound == 0)
                or (op is cst.LessThan and bound == 1)
                or (op is cst.LessThanEqual and bound == 0)
            ):
                return count.negated
        return NOTHING_KNOWN

    def several_devices(self, expr: cst.BaseExpression) -> bool:
        """Is `expr` a test for more than one accelerator (`torch.cuda.device_count() > 1`,
        `>= 2`, `n_gpu > 1`, `len(args.gpu_ids) > 1`)? Its other branch runs on a machine
        with one as well as on one without."""
        if type(expr) is cst.BooleanOperation and type(expr.operator) is cst.And:
            # `(device.type == "cuda") and (ngpu > 1)`
            return self.several_devices(expr.left) or self.several_devices(expr.right)
        if type(expr) is not cst.Comparison or len(expr.comparisons) != 1:
            return False
        left, target = expr.left, expr.comparisons[0]
        if type(left) is cst.Call and type(left.func) is cst.Name and left.func.value == "len" and len(left.args) == 1:
            counted = dotted_name(left.args[0].value) or ""  # `len(args.gpu_ids) > 1`
            if not _GPU_LIST.fullmatch(counted.rsplit(".", 1)[-1].lower()):
                return False
        elif type(left) in (cst.Name, cst.Attribute):
            counted = dotted_name(left) or ""  # `n_gpu > 1`, `args.ngpu > 1`
            if not _GPU_COUNT.fullmatch(counted.rsplit(".", 1)[-1].lower()):
                return False
        elif type(left) is not cst.Call or self._qualify(left.func) not in _COUNTS:
            return False
        bound = int_value(target.comparator)
        op = type(target.operator)
        return bound is not None and (
            (op is cst.GreaterThan and bound >= 1) or (op is cst.GreaterThanEqual and bound >= 2)
        )

    # -- flags -------------------------------------------------------------------------

    def learn_flags(self, assignments: list[tuple[str, cst.BaseExpression | None]]) -> None:
        """`assignments`: every (name, value) the file assigns, in source order (None for a
        value that is not an expression the oracle can read: a parameter, a loop target,
        an unpacking). A name is a flag when every value it is assigned says something
        about the machine; what it implies is what all of them imply."""
        spoiled: set[str] = set()
        passed: dict[str, list[cst.BaseExpression | None]] = {}
        for name, value, *by_call in assignments:
            if by_call:
                passed.setdefault(name, []).append(value)
                continue
            if name in spoiled:
                continue
            implied = self.implication(value) if value is not None else NOTHING_KNOWN
            if not implied.says_anything:
                spoiled.add(name)
                self.flags.pop(name, None)
                continue
            known = self.flags.get(name)
            if known is not None:
                implied = Implication(known.when_true & implied.when_true, known.when_false & implied.when_false)
            self.flags[name] = implied
        # a parameter every call fills with a check or a flag is one too; a call passing
        # anything else says nothing of it (the same name elsewhere keeps what it was)
        for name, values in passed.items():
            if name in spoiled or name in self.flags:
                continue
            # a call passing `False` never takes the arm; one passing `True` takes it unchecked
            values = [v for v in values if not (type(v) is cst.Name and v.value == "False")]
            if not values or any(type(v) is cst.Name and v.value == "True" for v in values):
                continue
            implied = [self.implication(v) if v is not None else NOTHING_KNOWN for v in values]
            if all(i.says_anything and i.when_true != EVERYTHING for i in implied):
                self.flags[name] = Implication(
                    frozenset.intersection(*(i.when_true for i in implied)),
                    frozenset.intersection(*(i.when_false for i in implied)),
                )


def _common(sets: list[Backends]) -> Backends:
    common = sets[0]
    for other in sets[1:]:
        common &= other
    return common


def _device_string(qualify: Callable[[cst.BaseExpression], str | None], node: cst.BaseExpression) -> str | None:
    """`"cuda"`, or `torch.device("cuda")`: the device string a comparison names."""
    if type(node) is cst.Call and qualify(node.func) == "torch.device" and node.args:
        node = node.args[0].value
    return string_value(node)


def _accelerator_prefixes(call: cst.Call) -> list[Backends]:
    """`device.startswith("cuda")`, `str(device).startswith(("cuda", "xpu"))`: the
    backends each prefix implies; empty when the call is no such test."""
    func = call.func
    if type(func) is not cst.Attribute or func.attr.value != "startswith" or len(call.args) != 1:
        return []
    prefix = call.args[0].value
    options = [e.value for e in prefix.elements] if type(prefix) is cst.Tuple else [prefix]
    kinds = [accelerator_type(v) if v is not None else None for v in (string_value(o) for o in options)]
    if not kinds or any(k is None for k in kinds):
        return []
    return [present(k) for k in kinds]  # type: ignore[arg-type]


_FALLBACK_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError", "TypeError"})


def in_compat_fallback(ancestors: list[cst.CSTNode]) -> bool:
    """Is the innermost node of `ancestors` in code that runs only where a newer API is
    missing? `except (ImportError, AttributeError):` handlers, and the branch of
    `if hasattr(torch.amp, ...)` where the attribute is absent."""
    for child, parent in zip(ancestors[1:], ancestors):
        if type(parent) is cst.ExceptHandler and child is parent.body:
            caught = parent.type
            names = [e.value for e in caught.elements] if type(caught) is cst.Tuple else [caught]
            if caught is None or any((dotted_name(n) or "").rsplit(".", 1)[-1] in _FALLBACK_ERRORS for n in names):
                return True
        elif type(parent) is cst.If:
            test, negated = parent.test, False
            if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
                test, negated = test.expression, True
            is_hasattr = type(test) is cst.Call and dotted_name(test.func) == "hasattr"
            if is_hasattr and child is (parent.body if negated else parent.orelse):
                return True
    return False


_ASSIGNING = frozenset({cst.Assign, cst.AnnAssign, cst.NamedExpr, cst.AugAssign, cst.For})


def flag_assignments(nodes: list[cst.CSTNode]) -> list[tuple[str, cst.BaseExpression | None]]:
    """Every (name, value) that `nodes` (a file's nodes in source order) assign, for
    `GuardOracle.learn_flags`: `use_cuda = ...` gives "use_cuda", `args.cuda = ...` gives
    "args.cuda" and `self.cuda = ...` gives "self.cuda". A value
    the oracle cannot read (unpacking, `+=`, a loop target) is None. Names are the file's,
    not a scope's: a flag and a parameter of the same name are one name."""
    found: list[tuple[str, cst.BaseExpression | None]] = []
    kinds = _ASSIGNING
    functions: list[cst.FunctionDef] = []
    calls: list[cst.Call] = []
    tested: set[str] = set()  # the names an `if` or a conditional expression tests
    for node in nodes:
        kind = type(node)
        if kind not in kinds:
            if kind is cst.Call:
                calls.append(node)
            elif kind is cst.FunctionDef:
                functions.append(node)
            elif kind is cst.If or kind is cst.IfExp:
                _tested_names(node.test, tested)
            continue
        if kind is cst.Assign:
            for target in node.targets:
                _flag_targets(target.target, node.value, found)
        elif kind is cst.AnnAssign and node.value is not None:
            _flag_targets(node.target, node.value, found)
        elif kind is cst.NamedExpr:
            _flag_targets(node.target, node.value, found)
        elif kind is cst.AugAssign or kind is cst.For:
            _flag_targets(node.target, None, found)
    found.extend(_parameter_bindings(functions, calls, tested))
    return found


def _tested_names(test: cst.BaseExpression, found: set[str]) -> None:
    """The names a test is made of: `if cuda:`, `if not no_cuda and ok:`."""
    if type(test) is cst.Name:
        found.add(test.value)
    elif type(test) is cst.UnaryOperation:
        _tested_names(test.expression, found)
    elif type(test) is cst.BooleanOperation:
        _tested_names(test.left, found)
        _tested_names(test.right, found)


def _parameter_bindings(
    functions: list[cst.FunctionDef], calls: list[cst.Call], tested: set[str]
) -> list[tuple[str, cst.BaseExpression | None, bool]]:
    """What the file's calls pass to the parameters of its functions that its tests read,
    as assignments (marked True): `load_model(model, is_cuda=args.cuda)` binds `is_cuda`
    to `args.cuda`, and a call that leaves it out binds its default (None where there is
    none). Only for a function defined once under its name and called by that name
    (`f(...)`, `self.f(...)`)."""
    by_name: dict[str, list[cst.FunctionDef]] = {}
    for function in functions:
        by_name.setdefault(function.name.value, []).append(function)
    by_name = {
        name: defined
        for name, defined in by_name.items()
        if any(p.name.value in tested for d in defined for p in (*d.params.params, *d.params.kwonly_params))
    }
    if not by_name:
        return []
    sites: dict[str, list[cst.Call]] = {}
    for node in calls:
        func = node.func
        name = func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else None
        if name in by_name:
            sites.setdefault(name, []).append(node)
    found: list[tuple[str, cst.BaseExpression | None, bool]] = []
    for name, defined in by_name.items():
        if len(defined) != 1 or name not in sites:
            continue
        params = [*defined[0].params.posonly_params, *defined[0].params.params]
        bound = bool(params) and params[0].name.value in ("self", "cls")
        params = params[1:] if bound else params
        keyword_only = list(defined[0].params.kwonly_params)
        for call in sites[name]:
            if type(call.func) is cst.Attribute and not bound:
                continue  # `obj.f(...)` of another object's `f`
            starred = any(arg.star for arg in call.args)
            for index, param in enumerate([*params, *keyword_only]):
                arg = None if starred else argument_for(call, param.name.value, index if index < len(params) else None)
                value = arg.value if arg is not None else param.default
                found.append((param.name.value, None if starred else value, True))
    return found


def _flag_targets(target: cst.BaseExpression, value: cst.BaseExpression | None, found: list) -> None:
    if type(target) is cst.Name:
        found.append((target.value, value))
    elif type(target) is cst.Attribute:
        key = dotted_name(target)
        if key is not None:
            found.append((key, value))
    elif type(target) in (cst.Tuple, cst.List):
        for element in target.elements:
            _flag_targets(element.value, None, found)
    elif type(target) is cst.StarredElement:
        _flag_targets(target.value, None, found)


def exits_block(stmt: cst.BaseStatement) -> bool:
    """Does this block body end by leaving (`return`, `raise`, `continue`, a skip call)?"""
    if type(stmt) is cst.SimpleStatementLine:
        small = stmt.body[-1]
        if type(small) in (cst.Return, cst.Raise, cst.Continue, cst.Break):
            return True
        if type(small) is cst.Expr and type(small.value) is cst.Call:
            name = dotted_name(small.value.func) or ""
            return name.split(".")[-1] in {"skip", "skipTest", "exit", "_exit"}
    return False


def cuda_flag_branch(test: cst.BaseExpression, moving: frozenset[str]) -> str | None:
    """The branch of `if test:` a user's CUDA flag puts on the accelerator: "body" for
    `cuda`, `use_cuda`, `args.use_gpu`, "orelse" for `no_cuda`, `not args.cuda`, where the
    flag is one of `moving` (see `moving_flags`). Not a guard (SPEC §2: it may be set where
    there is no GPU), but the code it decides places values together: `img = t.cpu() if
    cuda else t` is on the CPU either way when `t` was moved under the same flag."""
    name, negated = _flag_name(test)
    if name is None or _flag_root(name) not in moving:
        return None
    if _NEGATIVE_CUDA_FLAG.fullmatch(name):
        negated = not negated
    elif not _CUDA_FLAG.fullmatch(name):
        return None
    return "orelse" if negated else "body"


def moving_flags(nodes: Iterable[cst.CSTNode]) -> frozenset[str]:
    """The CUDA flags (by their root: `cuda` for `args.cuda`, `use_cuda`, `no_cuda`) that
    some `if` or conditional expression of the file moves values under (`if args.cuda:
    model.cuda()`, `x.cuda() if use_cuda else x`)."""
    found = set()
    for node in nodes:
        if type(node) not in (cst.If, cst.IfExp):
            continue
        roots = set()
        for test in conjuncts(node.test):  # `args.cuda and torch.cuda.is_available()`: each part
            name, _ = _flag_name(test)
            if name is not None and (_CUDA_FLAG.fullmatch(name) or _NEGATIVE_CUDA_FLAG.fullmatch(name)):
                roots.add(_flag_root(name))
        if roots - found:
            arms = [node.body, node.orelse] if node.orelse is not None else [node.body]
            if any(_moves(arm) for arm in arms):
                found |= roots
    return frozenset(found)


def conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`a`, `b` of `a and b`."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return [*conjuncts(test.left), *conjuncts(test.right)]
    return [test]


def _moves(node: cst.CSTNode) -> bool:
    """Does `node` move values (`.cuda()`, `.to(...)`) or name the device they go to
    (`"cuda" if args.cuda else "cpu"`)?"""
    for n in walk(node):
        if type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value in ("cuda", "to"):
            return True
        if type(n) is cst.SimpleString and accelerator_type(string_value(n) or "") is not None:
            return True
    return False


def _flag_name(test: cst.BaseExpression) -> tuple[str | None, bool]:
    """The lowered name `test` reads (`cuda` of `not args.cuda`), and whether it is negated."""
    negated = False
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test, negated = test.expression, not negated
    if type(test) is cst.Attribute:
        return test.attr.value.lower(), negated
    if type(test) is cst.Name:
        return test.value.lower(), negated
    if type(test) is cst.Comparison:
        chosen = _gpu_chosen(test)  # `opt.device == 0`, `args.gpu >= 0`, `args.device != "cpu"`
        if chosen is not None:
            return "use_cuda", negated != (not chosen)
    return None, negated


def _gpu_chosen(test: cst.Comparison) -> bool | None:
    """Does the comparison of a user's device setting with a literal say a GPU was chosen
    (True: `opt.device == 0`, `args.gpu >= 0`, `args.gpu != -1`, `args.device != "cpu"`,
    `args.device == "cuda"`) or the CPU (False: `args.gpu < 0`, `args.device == "cpu"`)?
    None for anything else."""
    if len(test.comparisons) != 1 or type(test.left) not in (cst.Name, cst.Attribute):
        return None
    setting = (test.left.attr.value if type(test.left) is cst.Attribute else test.left.value).lower()
    target = test.comparisons[0]
    operator = type(target.operator)
    if _GPU_COUNT.fullmatch(setting) and setting != "world_size":
        # `opt.num_gpus > 0`, `n_gpu >= 1`: some GPU; `n_gpu == 0`: none
        number = signed_int_value(target.comparator)
        if number is None:
            return None
        if (operator is cst.GreaterThan and number == 0) or (operator is cst.GreaterThanEqual and number == 1):
            return True
        if operator is cst.NotEqual and number == 0:
            return True
        if (operator is cst.Equal and number == 0) or (operator is cst.LessThan and number == 1):
            return False
        return None
    if not _DEVICE_SETTING.fullmatch(setting):
        return None
    text = string_value(target.comparator)
    if text is not None:
        kind = text.split(":", 1)[0]
        if operator not in (cst.Equal, cst.NotEqual) or kind not in ("cpu", "cuda"):
            return None
        return (kind == "cuda") == (operator is cst.Equal)
    number = signed_int_value(target.comparator)
    if number is None:
        return None
    if operator is cst.Equal:
        return number >= 0
    if operator is cst.NotEqual:
        return True if number == -1 else None
    if operator is cst.GreaterThanEqual:
        return True if number == 0 else None
    if operator is cst.GreaterThan:
        return True if number == -1 else None
    if operator is cst.LessThan:
        return False if number == 0 else None
    return None


# a user's setting naming the device or GPU to run on (`opt.device`, `args.gpu`, `gpu_id`)
_DEVICE_SETTING = re.compile(r"device|gpu|gpu_?id|device_?id|cuda_?device|gpu_?index")


def _flag_root(name: str) -> str:
    """`cuda` of `use_cuda`, `no_cuda`, `cuda`; `gpu` of `use_gpu`."""
    return "gpu" if name.endswith("gpu") else "cuda"


# names of a number of GPUs (`n_gpu`, `args.ngpu`, `num_gpus`) and of a list of them (`gpu_ids`)
_GPU_COUNT = re.compile(r"n_?gpus?|num_?gpus?|gpu_?count|n_?devices|num_?devices|device_count|world_size")
_GPU_LIST = re.compile(r"gpus|gpu_?ids|device_?ids|devices")

# a bare `gpu` is often a device index (`if args.gpu: model.cuda(args.gpu)`): not a flag
_CUDA_FLAG = re.compile(
    r"(?:use_?|with_?|on_?|enable_?|is_)?cuda(?:_?mode)?|(?:use_?|with_?|on_?|enable_?|is_)gpu|gpu_?mode"
)
_NEGATIVE_CUDA_FLAG = re.compile(r"(?:no_?|not_?|disable_?|without_?)(?:cuda|gpu)")
