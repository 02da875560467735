"""The engine: read, parse once, walk once with every selected rule, fix.

It knows no rule by name: rules register themselves in `devlint.rules.REGISTRY`.
"""

from __future__ import annotations

import ast
import gc
import io
import os
import queue
import re
import sys
import threading
import tokenize
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import libcst as cst

from devlint.analysis.context import BOOKKEEPING, SCOPES, FileContext
from devlint.analysis.tree import Tree
from devlint.analysis.model import ANALYSIS_BUDGET
from devlint.fix.binding import BindingService
from devlint.config import Config
from devlint.diagnostics import Diagnostic, Fix, Safety
from devlint.fast_parse import parse_module
from devlint.fix.apply import apply_edits, plan_to_edits, select_compatible
from devlint.rules import all_rules
from devlint.locate import positions_of
from devlint.rules.base import Report, Rule, visitors
from devlint.source import LineIndex
from devlint.suppression import skips_file, without_noqa

_MAX_FIX_ROUNDS = 10
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # libcst's line breaks; not str.splitlines' form feeds


@dataclass(frozen=True)
class InternalError:
    """Something went wrong inside devlint (a rule crashed, a fix broke the file)."""

    path: str
    message: str
    code: str | None = None

    def __str__(self) -> str:
        where = f" in {self.code}" if self.code else ""
        return f"{self.path}: internal error{where}: {self.message}"


@dataclass
class FileResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    errors: list[InternalError] = field(default_factory=list)


@dataclass
class FixResult:
    """`output` is the fixed text; `applied` the findings fixed; `remaining` those left."""

    source: str
    output: str
    applied: list[Diagnostic] = field(default_factory=list)
    remaining: list[Diagnostic] = field(default_factory=list)
    errors: list[InternalError] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.output != self.source


def needs_parse(text: str) -> bool:
    """The prefilter: a file that mentions neither torch nor cuda has nothing to report."""
    return ("torch" in text or "cuda" in text) and not skips_file(text)


def lint_source(
    text: str,
    path: str = "<string>",
    config: Config | None = None,
    *,
    noqa: bool = True,
    python_tree: ast.Module | None = None,
) -> FileResult:
    """The findings of one file. `python_tree`: the running Python's `ast` of `text`, where
    the caller already has it (flake8 parses every file before its plugins run), so that
    it is not parsed twice."""
    config = config or Config()
    if "\0" in text:
        return FileResult(unreadable(path, "could not parse this file: it contains NUL bytes", config))
    if not needs_parse(text):
        return FileResult()
    try:
        with _collector_paused():
            verdict = _PythonVerdict(tree=python_tree) if isinstance(python_tree, ast.Module) else _python_verdict(text)
            if verdict.fatal:
                result = FileResult()
                if config.is_enabled("DEV000", path):
                    result.diagnostics.append(verdict.diagnostic(path))
                return result
            return run_deep(_lint, text, path, config, noqa, verdict)
    except (RecursionError, MemoryError) as err:
        return FileResult(
            errors=[InternalError(path, f"the file is too deeply nested to check ({type(err).__name__})")]
        )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while one file is parsed and checked.

    Python's parser and libcst build an object per node and token, and none of them is
    garbage until the file is done, so each collection pass over the growing tree is
    wasted work (it is worse inside flake8, whose tokens and AST for the same file are
    young objects too).
    The few cycles a file leaves are freed by the next collection after it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _lint(text: str, path: str, config: Config, noqa: bool, verdict: _PythonVerdict) -> FileResult:
    result = FileResult()
    parsed = _libcst_parse(text, verdict)
    if not isinstance(parsed, cst.Module):
        if config.is_enabled("DEV000", path):
            result.diagnostics.append(parsed.diagnostic(path))
        return result
    reports, nodes = _run_rules(parsed, path, config, result.errors)
    if reports:
        result.diagnostics = _to_diagnostics(reports, parsed, text, path, verdict.tree, nodes=nodes)
        if noqa:
            result.diagnostics = without_noqa(result.diagnostics, text)
    return result


# -- parsing: Python's parser first, so that libcst never sees what crashes it -----------

_DEEP_STACK_BYTES = 512 * 1024 * 1024  # reserved address space; only the pages used are memory
_DEEP_RECURSION_LIMIT = 100_000  # about 5 KiB of that stack per level, where ~1 KiB is typical
_MAX_NESTING = 200  # brackets: CPython's own limit (its tokenizer's MAXLEVEL), in every version
_MAX_CONCATENATION = 2000  # libcst gives up past about 3000 implicitly concatenated strings
_T = TypeVar("_T")
_deep = threading.local()


def run_deep(function: Callable[..., _T], *args: object) -> _T:
    """Call `function` on a thread with a large stack and a high recursion limit.

    libcst, the analysis and the rules recurse once per level of nesting: valid code such
    as a 500-term sum or a 1000-long call chain exceeds Python's default limit of 1000
    frames, and libcst's native parser overflows the C stack of a normal thread. The
    thread is kept for the next file (starting one per file would cost more than a small
    file's check).
    """
    if getattr(_deep, "active", False):
        return function(*args)
    with _deep_lock:
        jobs = _deep_jobs()
        if jobs is None:  # a platform without large thread stacks: Python's own limits hold
            return function(*args)
        outcome: list = []
        done = threading.Event()
        with _raised_recursion_limit():
            jobs.put((function, args, outcome, done))
            done.wait()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


_deep_lock = threading.Lock()  # one file at a time on the deep thread
_deep_thread: tuple[int, threading.Thread, queue.SimpleQueue] | None = None  # (pid, thread, its jobs)


def _deep_jobs() -> queue.SimpleQueue | None:
    """The job queue of this process's deep thread, started on first use (and again in a
    forked child, which has no threads but the one that forked)."""
    global _deep_thread
    if _deep_thread is not None and _deep_thread[0] == os.getpid() and _deep_thread[1].is_alive():
        return _deep_thread[2]
    jobs: queue.SimpleQueue = queue.SimpleQueue()
    for size in (_DEEP_STACK_BYTES, _DEEP_STACK_BYTES // 8):
        try:
            previous = threading.stack_size(size)
        except (ValueError, RuntimeError):
            continue
        try:
            thread = threading.Thread(target=_serve_deep_jobs, args=(jobs,), name="devlint-deep", daemon=True)
            thread.start()
        except RuntimeError:  # the address space for the stack was refused
            continue
        finally:
            threading.stack_size(previous)
        _deep_thread = (os.getpid(), thread, jobs)
        return jobs
    return None


def _serve_deep_jobs(jobs: queue.SimpleQueue) -> None:
    _deep.active = True
    while True:
        function, args, outcome, done = jobs.get()
        try:
            outcome.append((True, function(*args)))
        except BaseException as err:  # handed to the caller's thread
            outcome.append((False, err))
        finally:
            del function, args
            done.set()


_limit_lock = threading.Lock()
_limit_users = 0
_limit_before = 0


@contextmanager
def _raised_recursion_limit() -> Iterator[None]:
    """The recursion limit is the interpreter's: raise it while any deep run is going on."""
    global _limit_users, _limit_before
    with _limit_lock:
        if _limit_users == 0:
            _limit_before = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_limit_before, _DEEP_RECURSION_LIMIT))
        _limit_users += 1
    try:
        yield
    finally:
        with _limit_lock:
            _limit_users -= 1
            if _limit_users == 0:
                sys.setrecursionlimit(_limit_before)


@dataclass(frozen=True)
class _SyntaxProblem:
    """Why a file is DEV000, where."""

    line: int
    col: int
    message: str

    def diagnostic(self, path: str) -> Diagnostic:
        return Diagnostic(path, self.line, self.col, "DEV000", self.message, self.line, self.col)

    @classmethod
    def from_syntax_error(cls, error: SyntaxError) -> _SyntaxProblem:
        line = error.lineno or 1
        return cls(line, max((error.offset or 1) - 1, 0), f"could not parse this file: {error.msg}")


@dataclass(frozen=True)
class _PythonVerdict:
    """What the running Python's own parser says of a file: its tree, or its error.

    `fatal` is an error no Python version accepts (nesting beyond CPython's limits): such
    a file never reaches libcst, whose parser can crash the process on it.
    """

    tree: ast.Module | None = None
    error: SyntaxError | None = None
    fatal: _SyntaxProblem | None = None

    def diagnostic(self, path: str) -> Diagnostic:
        assert self.fatal is not None
        return self.fatal.diagnostic(path)


def _python_verdict(text: str) -> _PythonVerdict:
    """Parse with CPython, in the caller's thread and under its recursion limit: the limits
    a script run by this Python meets."""
    try:
        return _PythonVerdict(tree=ast.parse(text))
    except SyntaxError as err:
        if "too many nested" in err.msg or _nesting_depth(text) > _MAX_NESTING:
            return _PythonVerdict(error=err, fatal=_SyntaxProblem.from_syntax_error(err))
        return _PythonVerdict(error=err)  # perhaps syntax newer than this Python: libcst decides
    except (RecursionError, MemoryError):
        return _PythonVerdict(
            fatal=_SyntaxProblem(1, 0, "could not parse this file: it is nested too deeply for Python to compile")
        )
    except ValueError as err:  # NUL bytes
        return _PythonVerdict(fatal=_SyntaxProblem(1, 0, f"could not parse this file: {err}"))


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting, counted on Python's tokens (strings and comments aside)."""
    depth = deepest = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP:
                if token.string in "([{":
                    depth += 1
                    deepest = max(deepest, depth)
                elif token.string in ")]}":
                    depth -= 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return deepest


def _libcst_parse(text: str, verdict: _PythonVerdict) -> cst.Module | _SyntaxProblem:
    """libcst's tree of a file, or why the file is DEV000. Call it through `run_deep`."""
    try:
        module = parse_module(text)
    except cst.ParserSyntaxError as err:
        if verdict.error is not None:
            return _SyntaxProblem.from_syntax_error(verdict.error)  # Python places it better
        module = _parse_shortened(text)
        if module is None:
            detail = err.message.split(": ", 2)[-1]
            return _SyntaxProblem(err.raw_line, max(err.raw_column, 0), f"libcst cannot parse this file: {detail}")
    if verdict.error is not None and not _newer_syntax(module, verdict.error):
        return _SyntaxProblem.from_syntax_error(verdict.error)  # e.g. Python 2's `except X, e:`
    return module


def _parse_shortened(text: str) -> cst.Module | None:
    """libcst's tree of a file Python accepts but libcst does not, because of an implicit
    concatenation of more strings than libcst handles (a long literal table): the strings
    past the limit are blanked, keeping every position, so the rest of the file is checked."""
    lines = io.StringIO(text).readlines()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    runs: list[list[tokenize.TokenInfo]] = [[]]
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING:
                runs[-1].append(token)
            elif token.type not in (tokenize.NL, tokenize.COMMENT) and runs[-1]:
                runs.append([])
    except (tokenize.TokenError, SyntaxError):
        return None
    if all(len(run) <= _MAX_CONCATENATION for run in runs):
        return None
    blanked = list(text)
    for run in runs:
        for token in run[_MAX_CONCATENATION:]:
            start = starts[token.start[0] - 1] + token.start[1]
            end = starts[token.end[0] - 1] + token.end[1]
            blanked[start:end] = [c if c in "\r\n" else " " for c in text[start:end]]
    try:
        return parse_module("".join(blanked))
    except cst.ParserSyntaxError:
        return None


def _newer_syntax(module: cst.Module, error: SyntaxError) -> bool:
    """Does libcst's tree show syntax newer than the running Python, explaining its error?"""
    newer: list[type[cst.CSTNode]] = []
    if sys.version_info < (3, 12):
        if error.msg.startswith("f-string"):
            return True  # PEP 701 f-strings (quotes and backslashes inside)
        newer += [cst.TypeAlias, cst.TypeParameters]
    if sys.version_info < (3, 14) and hasattr(cst, "TemplatedString"):
        newer.append(cst.TemplatedString)
    if not newer:
        return False
    finder = _NodeFinder(tuple(newer))
    module.visit(finder)
    return finder.found


class _NodeFinder(cst.CSTVisitor):
    def __init__(self, types: tuple[type[cst.CSTNode], ...]) -> None:
        super().__init__()
        self.types = types
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.types):
            self.found = True
        return not self.found


def _run_rules(module: cst.Module, path: str, config: Config, errors: list[InternalError]) -> tuple[list[Report], Tree]:
    """The rules' reports, and the file's node table (which placing them uses again)."""
    ctx = FileContext(module, path, config)
    try:
        return _walk(ctx, path, config, errors), ctx.tree
    finally:
        ctx.close()


def _walk(ctx: FileContext, path: str, config: Config, errors: list[InternalError]) -> list[Report]:
    binding = BindingService(ctx)
    reports: list[Report] = []
    dispatch: dict[type, list] = {}
    for rule_type in all_rules():
        if config.is_enabled(rule_type.code, path):
            rule = rule_type(ctx, binding, reports)
            for node_type, method in visitors(rule).items():
                dispatch.setdefault(node_type, []).append((rule, method))
    if not dispatch:
        return reports
    broken: set[Rule] = set()
    nodes, ends = ctx.tree.nodes, ctx.tree.ends
    open_ends: list[int] = []  # where each node on the current path ends
    handlers_of = dispatch.get
    # the route from the module down is ctx.ancestors; only the node types the context keeps books on go
    # through ctx.enter and ctx.leave (the hot loop of every file)
    route, bookkeeping, scopes = ctx.ancestors, BOOKKEEPING, SCOPES
    for index, node in enumerate(nodes):
        while open_ends and open_ends[-1] <= index:
            open_ends.pop()
            if type(route[-1]) in scopes:
                ctx.leave()
            else:
                route.pop()
        node_type = type(node)
        handlers = handlers_of(node_type)
        end = ends[index]
        if handlers is None:
            if end == index + 1:
                continue  # a leaf no rule visits (most are names): the path does not change
            handlers = ()
        if node_type in bookkeeping:
            ctx.enter(node)
        else:
            route.append(node)
        open_ends.append(end)
        for rule, method in handlers:
            if broken and rule in broken:
                continue
            try:
                method(node)
            except Exception as err:  # one rule's crash must not stop the others
                broken.add(rule)
                errors.append(InternalError(path, f"{type(err).__name__}: {err}", rule.code))
    analysis = ctx.device_analysis
    if analysis is not None and analysis.model.exhausted:
        errors.append(
            InternalError(
                path,
                f"the device analysis stopped after {ANALYSIS_BUDGET:.0f} CPU seconds; "
                "DEV2 and DEV3 findings in this file may be missing",
            )
        )
    broken_codes = {rule.code for rule in broken}  # a crashed rule's findings are incomplete
    return [r for r in reports if r.code not in broken_codes]


def _to_diagnostics(
    reports: list[Report],
    module: cst.Module,
    text: str,
    path: str,
    tree: ast.Module | None,
    *,
    nodes: Tree | None = None,
) -> list[Diagnostic]:
    positions = positions_of(module, text, reports, tree, nodes)
    index = LineIndex(text)
    seen: set[tuple] = set()
    diagnostics = []
    for report in reports:
        where = positions[report.node]
        fix = None
        if report.fix is not None:
            fix = Fix(report.fix.safety, plan_to_edits(report.fix, positions, module, index))
        key = (where.start.line, where.start.column, report.code)
        if key in seen:
            continue
        seen.add(key)
        diagnostics.append(
            Diagnostic(
                path,
                where.start.line,
                where.start.column,
                report.code,
                report.message,
                where.end.line,
                where.end.column,
                fix,
            )  # fmt: skip
        )
    diagnostics.sort()
    return diagnostics


def unreadable(path: str, message: str, config: Config) -> list[Diagnostic]:
    """The DEV000 finding of a file devlint could not read or parse at all (bytes that
    are not text in the file's encoding, NUL bytes), unless DEV000 is not selected."""
    return [Diagnostic(path, 1, 0, "DEV000", message, 1, 0)] if config.is_enabled("DEV000", path) else []


def check_source(text: str, path: str = "<string>", config: Config | None = None) -> list[Diagnostic]:
    """Lint `text` and return its findings, sorted, `# noqa` honoured."""
    return lint_source(text, path, config).diagnostics


def fix_source(text: str, path: str = "<string>", config: Config | None = None, *, unsafe: bool = False) -> FixResult:
    """Apply every safe fix (and unsafe ones with `unsafe=True`) until nothing changes."""
    result = FixResult(text, text)
    current = text
    for _ in range(_MAX_FIX_ROUNDS):
        linted = lint_source(current, path, config)
        result.errors.extend(linted.errors)
        fixable = [d for d in linted.diagnostics if d.fix and (unsafe or d.fix.safety is Safety.SAFE)]
        if not fixable:
            result.remaining = linted.diagnostics
            break
        index = LineIndex(current)
        chosen = select_compatible(fixable, index)
        candidate = apply_edits(current, [e for d in chosen for e in d.fix.edits], index)
        problem = _parse_problem(candidate)
        if problem is not None:
            codes = ", ".join(sorted({d.code for d in chosen}))
            result.errors.append(
                InternalError(path, f"the fixes ({codes}) would produce invalid code ({problem}); file left unchanged")
            )
            result.output = text
            result.applied = []
            result.remaining = lint_source(text, path, config).diagnostics
            return result
        result.applied.extend(chosen)
        current = candidate
    else:
        result.remaining = lint_source(current, path, config).diagnostics
    result.output = current
    return result


def _parse_problem(text: str) -> str | None:
    """Why fixed text would not parse, judged as an input file is: a fix may keep syntax
    newer than the running Python, which libcst parses."""
    verdict = _python_verdict(text)
    if verdict.fatal is not None:
        return verdict.fatal.message
    try:
        parsed = run_deep(_libcst_parse, text, verdict)
    except (RecursionError, MemoryError):
        return "too deeply nested"
    return None if isinstance(parsed, cst.Module) else parsed.message
