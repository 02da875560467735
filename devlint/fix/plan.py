"""The fix vocabulary: edits in terms of nodes, which the engine turns into text edits."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from devlint.diagnostics import Safety


@dataclass(frozen=True)
class Replace:
    """Replace the code of `node` (its parentheses excluded) by `text`."""

    node: cst.CSTNode
    text: str


@dataclass(frozen=True)
class InsertBefore:
    """Insert `text` right before `node`'s first character."""

    node: cst.CSTNode
    text: str


@dataclass(frozen=True)
class InsertAfter:
    """Insert `text` right after `node`'s last character."""

    node: cst.CSTNode
    text: str


@dataclass(frozen=True)
class ReplaceUpTo:
    """Replace the code from `node`'s first character up to `end`'s first character by
    `text`: tokens that are no node of their own (`self.w = ` before a value) change while
    `end` keeps its text."""

    node: cst.CSTNode
    end: cst.CSTNode
    text: str


@dataclass(frozen=True)
class ReplaceSpan:
    """Replace the code from `first`'s first character to `last`'s last character (two
    nodes of one sequence, such as a call's arguments) by `text`."""

    first: cst.CSTNode
    last: cst.CSTNode
    text: str


@dataclass(frozen=True)
class InsertBeforeEnd:
    """Insert `text` before the last character of `node` (a call's closing parenthesis)."""

    node: cst.CSTNode
    text: str


@dataclass(frozen=True)
class DeleteLines:
    """Delete the whole lines of statement `node` (alone on its lines)."""

    node: cst.CSTNode


@dataclass(frozen=True)
class InsertLines:
    """Insert whole lines (`text` ends with a newline) after statement `after`,
    or at the top of the file when `after` is None."""

    after: cst.CSTNode | None
    text: str


NodeEdit = (
    Replace | ReplaceUpTo | ReplaceSpan | InsertBefore | InsertAfter | InsertBeforeEnd | InsertLines | DeleteLines
)


@dataclass(frozen=True)
class FixPlan:
    """A fix in terms of nodes; the engine turns it into text edits once positions exist."""

    edits: tuple[NodeEdit, ...]
    safety: Safety = Safety.SAFE

    @classmethod
    def safe(cls, *edits: NodeEdit) -> FixPlan:
        return cls(tuple(edits), Safety.SAFE)

    @classmethod
    def unsafe(cls, *edits: NodeEdit) -> FixPlan:
        return cls(tuple(edits), Safety.UNSAFE)
