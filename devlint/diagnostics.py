"""The values every rule produces and every surface prints: diagnostics and their fixes."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


INFORMATION_URI = "https://github.com/devlint/devlint"
RULES_URI = f"{INFORMATION_URI}/blob/main/README.md#rules"  # every rule's documentation

_ERROR_CODES = frozenset({"DEV000"})  # the file could not be checked at all


def level(code: str) -> str:
    """How severe a finding of `code` is: "error" where the file could not be checked."""
    return "error" if code in _ERROR_CODES else "warning"


class Safety(str, enum.Enum):
    """Whether a fix keeps the program's behaviour on the machine it was written for."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the text between two positions (1-based lines, 0-based columns) by `content`.

    An insertion has `start == end`.
    """

    start_line: int
    start_col: int
    end_line: int
    end_col: int
    content: str
    cell: int | None = field(compare=False, default=None)  # in a notebook: the cell the edit is in

    def to_json(self) -> dict:
        found = {
            "content": self.content,
            "location": {"row": self.start_line, "column": self.start_col + 1},
            "end_location": {"row": self.end_line, "column": self.end_col + 1},
        }
        if self.cell is not None:
            found["cell"] = self.cell
        return found


@dataclass(frozen=True)
class Fix:
    safety: Safety
    edits: tuple[Edit, ...]

    @property
    def is_safe(self) -> bool:
        return self.safety is Safety.SAFE

    def to_json(self) -> dict:
        return {"safety": self.safety.value, "edits": [e.to_json() for e in self.edits]}


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One finding. Lines are 1-based; columns are 0-based (flake8's convention)."""

    path: str
    line: int
    col: int
    code: str
    message: str = field(compare=False)
    end_line: int = field(compare=False, default=0)
    end_col: int = field(compare=False, default=0)
    fix: Fix | None = field(compare=False, default=None)
    # in a notebook: the cell (numbered as ruff does, from 1 over all cells); lines and
    # columns are then the cell's own
    cell: int | None = field(compare=False, default=None)

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.col, self.code)

    @property
    def location(self) -> str:
        """`path:line:col`, or `nb.ipynb:cell 3:2:5` in a notebook (1-based column)."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.col + 1}"

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "col": self.col + 1,
            "end_line": self.end_line,
            "end_col": self.end_col + 1,
            "fix": self.fix.to_json() if self.fix else None,
            **({"cell": self.cell} if self.cell is not None else {}),
        }
