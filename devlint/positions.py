"""Positions as editors count them.

devlint reports 1-based lines and 0-based columns in code points. An LSP client counts
0-based lines and columns in the code units of the encoding agreed at `initialize`:
UTF-16 unless both sides say otherwise, where a character outside the Basic Multilingual
Plane (most emoji) is two units. SARIF counts UTF-16 units too. The conversion needs the
text of the line, so it is done per line, with lines split where libcst splits them.
"""

from __future__ import annotations

import bisect
import re

_NEWLINE = re.compile(r"\r\n|\r|\n")
UTF16 = "utf-16"


def split_lines(text: str) -> list[str]:
    """The lines of `text` without their endings, split at `\\n`, `\\r\\n` and `\\r` only
    (not at the form feeds and other separators `str.splitlines` also knows)."""
    return _NEWLINE.split(text)


def units_of(text: str, encoding: str = UTF16) -> int:
    """How many code units `text` is in `encoding` ("utf-8", "utf-16" or "utf-32")."""
    if encoding == "utf-32":
        return len(text)
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def to_units(line: str, col: int, encoding: str = UTF16) -> int:
    """The column in code units of code-point column `col` in `line`."""
    return units_of(line[:col], encoding) + max(col - len(line), 0)


class Document:
    """One text and its lines, converting between devlint and LSP positions.

    devlint positions are (1-based line, code-point column); LSP positions are (0-based
    line, code units). Both may point at the end of the text; a column past the end of
    its line (into the line break, as an edit may) is resolved through the text offset.
    """

    def __init__(self, text: str, encoding: str = UTF16) -> None:
        self.text = text
        self.encoding = encoding
        self.lines = split_lines(text)
        self._starts = [0] + [match.end() for match in _NEWLINE.finditer(text)]

    def offset(self, line: int, col: int) -> int:
        """The string offset of devlint position (line, col), clamped to the text."""
        if line < 1:
            return 0
        if line > len(self._starts):
            return len(self.text)
        return min(self._starts[line - 1] + col, len(self.text))

    def lsp_position(self, line: int, col: int) -> tuple[int, int]:
        """The LSP (line, character) of devlint position (line, col)."""
        return self._lsp_at(self.offset(line, col))

    def _lsp_at(self, offset: int) -> tuple[int, int]:
        index = bisect.bisect_right(self._starts, offset) - 1
        text = self.lines[index]
        col = min(offset - self._starts[index], len(text))
        return index, to_units(text, col, self.encoding)

    @property
    def end(self) -> tuple[int, int]:
        """The LSP position of the end of the text."""
        return len(self.lines) - 1, units_of(self.lines[-1], self.encoding)
