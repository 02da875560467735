"""The engine: read, parse once, walk once with every selected rule, fix.

It knows no rule by name: rules register themselves in `devlint.rules.REGISTRY`.
"""

from __future__ import annotations

import ast
import gc
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from devlint.analysis.context import FileContext
from devlint.fix.binding import BindingService
from devlint.config import Config
from devlint.diagnostics import Diagnostic, Fix, Safety
from devlint.fix.apply import apply_edits, plan_to_edits, select_compatible
from devlint.rules import all_rules
from devlint.fix.plan import InsertLines, ReplaceSpan, ReplaceUpTo
from devlint.rules.base import Report, Rule, visitors
from devlint.source import LineIndex

_SKIP_FILE = re.compile(r"#\s*devlint:\s*skip-file\b")
NOQA = re.compile(r"#\s*noqa(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
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
    return ("torch" in text or "cuda" in text) and not _SKIP_FILE.search(text)


def lint_source(
    text: str, path: str = "<string>", config: Config | None = None, *, noqa: bool = True
) -> FileResult:
    config = config or Config()
    if not needs_parse(text):
        return FileResult()
    with _collector_paused():
        return _lint(text, path, config, noqa)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while one file is parsed and checked.

    libcst builds an object per node and token, and none of them is garbage until the
    file is done, so each collection pass over the growing tree is wasted work (it is
    worse inside flake8, whose tokens and AST for the same file are young objects too).
    The few cycles a file leaves are freed by the next collection after it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _lint(text: str, path: str, config: Config, noqa: bool) -> FileResult:
    result = FileResult()
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as err:
        if config.is_enabled("DEV000", path):
            result.diagnostics.append(_parse_error(text, path, err))
        return result
    except RecursionError:
        result.errors.append(InternalError(path, "the file is nested too deeply to parse"))
        return result
    reports = _run_rules(module, path, config, result.errors)
    if reports:
        result.diagnostics = _to_diagnostics(reports, module, text, path)
        if noqa:
            result.diagnostics = _without_noqa(result.diagnostics, text)
    return result


def _parse_error(text: str, path: str, err: cst.ParserSyntaxError) -> Diagnostic:
    """DEV000 where Python itself places the error (libcst's position is often a line off)."""
    try:
        ast.parse(text)
    except SyntaxError as syntax:
        line = syntax.lineno or 1
        col = max((syntax.offset or 1) - 1, 0)
        return Diagnostic(path, line, col, "DEV000", f"could not parse this file: {syntax.msg}", line, col)
    except (ValueError, RecursionError, MemoryError):
        pass
    line, col = err.raw_line, max(err.raw_column, 0)
    detail = err.message.split(": ", 2)[-1]
    return Diagnostic(path, line, col, "DEV000", f"libcst cannot parse this file: {detail}", line, col)


def _run_rules(module: cst.Module, path: str, config: Config, errors: list[InternalError]) -> list[Report]:
    ctx = FileContext(module, path, config)
    try:
        return _walk(ctx, path, config, errors)
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
    for index, node in enumerate(nodes):
        while open_ends and open_ends[-1] <= index:
            open_ends.pop()
            ctx.leave()
        handlers = handlers_of(type(node))
        end = ends[index]
        if handlers is None and end == index + 1:
            continue  # a leaf no rule visits (most are names): the path does not change
        ctx.enter(node)
        open_ends.append(end)
        for rule, method in handlers or ():
            if rule in broken:
                continue
            try:
                method(node)
            except Exception as err:  # one rule's crash must not stop the others
                broken.add(rule)
                errors.append(InternalError(path, f"{type(err).__name__}: {err}", rule.code))
    broken_codes = {rule.code for rule in broken}  # a crashed rule's findings are incomplete
    return [r for r in reports if r.code not in broken_codes]


def _to_diagnostics(reports: list[Report], module: cst.Module, text: str, path: str) -> list[Diagnostic]:
    positions = _positions(module, text, reports)
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
                path, where.start.line, where.start.column, report.code, report.message,
                where.end.line, where.end.column, fix,
            )  # fmt: skip
        )
    diagnostics.sort()
    return diagnostics


def _positions(module: cst.Module, text: str, reports: list[Report]) -> Mapping[cst.CSTNode, CodeRange]:
    """Positions of the nodes the reports name.

    libcst computes positions by generating the code of the whole module, which costs
    twice the parse. Instead, generate only the top-level statements that hold findings,
    each alone, and shift their lines to where Python's own (C) parser says the statement
    starts. Anything unusual falls back to libcst's full computation.
    """
    wanted = _needed_nodes(reports, module)
    tops = list(dict.fromkeys(r.top for r in reports if r.top is not None))
    starts = _statement_lines(module, text) if tops and "\r" not in text.replace("\r\n", "") else None
    if starts is not None:
        offsets = {id(stmt): i for i, stmt in enumerate(module.body)}
        chosen = {id(top) for top in tops}
        for node in wanted:
            if id(node) in offsets and id(node) not in chosen:
                chosen.add(id(node))
                tops.append(node)
        positions: dict[cst.CSTNode, CodeRange] = {}
        for top in tops:
            alone = module.with_changes(body=(top,), header=(), footer=())
            local = MetadataWrapper(alone, unsafe_skip_copy=True).resolve(PositionProvider)
            shift = starts[offsets[id(top)]] - local[top].start.line
            for node, where in local.items():
                positions[node] = CodeRange(
                    CodePosition(where.start.line + shift, where.start.column),
                    CodePosition(where.end.line + shift, where.end.column),
                )
        if all(node in positions for node in wanted):
            return positions
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def _needed_nodes(reports: list[Report], module: cst.Module) -> list[cst.CSTNode]:
    nodes = []
    for report in reports:
        nodes.append(report.node)
        if report.fix is not None:
            for step in report.fix.edits:
                if isinstance(step, InsertLines):
                    # lines go after a statement, or before the first one
                    node = step.after if step.after is not None else (module.body[0] if module.body else None)
                elif isinstance(step, ReplaceSpan):
                    node = None
                else:
                    node = step.node
                if node is not None:
                    nodes.append(node)
                if isinstance(step, ReplaceUpTo):
                    nodes.append(step.end)
                elif isinstance(step, ReplaceSpan):
                    nodes.extend((step.first, step.last))
    return nodes


def _statement_lines(module: cst.Module, text: str) -> list[int] | None:
    """The line where each top-level statement's code starts, from `ast`; None if the two
    parsers disagree about the statements."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    statements = tree.body
    lines = []
    position = 0
    for stmt in module.body:
        count = len(stmt.body) if type(stmt) is cst.SimpleStatementLine else 1
        if position + count > len(statements):
            return None
        lines.append(statements[position].lineno)
        position += count
    return lines if position == len(statements) else None


def _without_noqa(diagnostics: list[Diagnostic], text: str) -> list[Diagnostic]:
    lines = _LINE_BREAK.split(text)
    kept = []
    for diagnostic in diagnostics:
        line = lines[diagnostic.line - 1] if 0 < diagnostic.line <= len(lines) else ""
        match = NOQA.search(line) if "noqa" in line.lower() else None
        if match is None:
            kept.append(diagnostic)
            continue
        codes = match.group("codes")
        if codes and not any(diagnostic.code.startswith(c.upper()) for c in re.split(r"[,\s]+", codes) if c):
            kept.append(diagnostic)
    return kept


def check_source(text: str, path: str = "<string>", config: Config | None = None) -> list[Diagnostic]:
    """Lint `text` and return its findings, sorted, `# noqa` honoured."""
    return lint_source(text, path, config).diagnostics


def fix_source(
    text: str, path: str = "<string>", config: Config | None = None, *, unsafe: bool = False
) -> FixResult:
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
    try:
        cst.parse_module(text)
        ast.parse(text)
    except cst.ParserSyntaxError as err:
        return err.message
    except SyntaxError as err:
        return err.msg
    except RecursionError:
        return "too deeply nested"
    return None
