"""Turning fix plans into text edits, and applying edits: the one place fixes happen."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import libcst as cst
from libcst.metadata import CodeRange

from devlint.diagnostics import Diagnostic, Edit
from devlint.fix.plan import (
    DeleteLines,
    FixPlan,
    InsertAfter,
    InsertBefore,
    InsertBeforeEnd,
    InsertLines,
    Replace,
    ReplaceSpan,
    ReplaceUpTo,
)
from devlint.source import LineIndex


def plan_to_edits(
    plan: FixPlan, positions: Mapping[cst.CSTNode, CodeRange], module: cst.Module, index: LineIndex
) -> tuple[Edit, ...]:
    edits = []
    for step in plan.edits:
        if isinstance(step, Replace):
            where = positions[step.node]
            edits.append(_edit(where.start, where.end, step.text))
        elif isinstance(step, ReplaceUpTo):
            edits.append(_edit(positions[step.node].start, positions[step.end].start, step.text))
        elif isinstance(step, ReplaceSpan):
            edits.append(_edit(positions[step.first].start, positions[step.last].end, step.text))
        elif isinstance(step, InsertBeforeEnd):
            end = positions[step.node].end
            edits.append(Edit(end.line, end.column - 1, end.line, end.column - 1, step.text))
        elif isinstance(step, InsertBefore):
            where = positions[step.node]
            edits.append(_edit(where.start, where.start, step.text))
        elif isinstance(step, InsertAfter):
            where = positions[step.node]
            edits.append(_edit(where.end, where.end, step.text))
        elif isinstance(step, InsertLines):
            edits.append(_line_insertion(step, positions, module, index))
        elif isinstance(step, DeleteLines):
            where = positions[step.node]
            following = where.end.line + 1
            if index.has_line_start(following):
                edits.append(Edit(where.start.line, 0, following, 0, ""))
            else:  # the file's last line, with no line break after it
                edits.append(Edit(where.start.line, 0, where.end.line, index.line_length(where.end.line), ""))
    return tuple(edits)


def _edit(start, end, text: str) -> Edit:
    return Edit(start.line, start.column, end.line, end.column, text)


def _line_insertion(step: InsertLines, positions, module: cst.Module, index: LineIndex) -> Edit:
    if step.after is None:
        line = positions[module.body[0]].start.line if module.body else 1
        return Edit(line, 0, line, 0, step.text)
    line = positions[step.after].end.line + 1
    if not index.has_line_start(line):
        # the statement is the file's last line and has no newline after it
        last = index.last_line
        col = index.line_length(last)
        return Edit(last, col, last, col, module.default_newline + step.text)
    return Edit(line, 0, line, 0, step.text)


def select_compatible(diagnostics: Iterable[Diagnostic], index: LineIndex) -> list[Diagnostic]:
    """Diagnostics whose fixes can be applied together; the others wait for the next round."""
    accepted: list[Diagnostic] = []
    taken: list[tuple[int, int, str]] = []
    for diagnostic in diagnostics:
        assert diagnostic.fix is not None
        spans = [(index.offset(e.start_line, e.start_col), index.offset(e.end_line, e.end_col), e.content)
                 for e in diagnostic.fix.edits]  # fmt: skip
        if any(_conflict(span, other) for span in spans for other in taken):
            continue
        accepted.append(diagnostic)
        taken.extend(s for s in spans if s not in taken)
    return accepted


def _conflict(a: tuple[int, int, str], b: tuple[int, int, str]) -> bool:
    if a == b:
        return False  # the same edit twice (e.g. one binding for many fixes) is applied once
    (s1, e1, _), (s2, e2, _) = a, b
    if s1 == e1 and s2 == e2:
        return s1 == s2  # two different insertions at one point: order would be a guess
    if s1 == e1:
        return s2 < s1 < e2
    if s2 == e2:
        return s1 < s2 < e1
    return s1 < e2 and s2 < e1


def apply_edits(text: str, edits: Iterable[Edit], index: LineIndex) -> str:
    spans = sorted(
        {(index.offset(e.start_line, e.start_col), index.offset(e.end_line, e.end_col), e.content) for e in edits},
        key=lambda span: (span[0], span[1]),
    )
    out, position = [], 0
    for start, end, content in spans:
        out.append(text[position:start])
        out.append(content)
        position = end
    out.append(text[position:])
    return "".join(out)
