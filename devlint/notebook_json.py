"""A notebook's JSON text: where each cell's `source` lies, and how to write a new one.

`json` reads notebooks well but cannot write one back without re-serialising the whole
file (and so changing its indentation, escaping and key order wherever they differ from
Python's defaults). This module finds the exact character span of every cell's `source`
value in the original text, so that a fix replaces those spans and nothing else, and
renders a new value in the style of the list (or string) it replaces.

The text is assumed to be valid JSON (`json.loads` has read it first); anything else
raises `JsonShapeError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: fast on long outputs
_STRUCTURE = re.compile(r'["\[\]{}]')
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"[^,\]}\s]+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# a \u escape of a character outside ASCII: the writer used ensure_ascii
_ESCAPED_NON_ASCII = re.compile(r"\\u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


class JsonShapeError(ValueError):
    """The text is not the JSON object a notebook is."""


@dataclass(frozen=True)
class SourceSpan:
    """Where one cell's `source` value lies: `start:end` in the text, and for a list, the
    span of each of its string elements."""

    start: int
    end: int
    items: tuple[tuple[int, int], ...] | None  # None: the value is a string


@dataclass(frozen=True)
class JsonStyle:
    """How the file was written, as far as a new `source` value needs to know."""

    ensure_ascii: bool
    newline: str
    inline_separator: str  # between the elements of a list written on one line

    @classmethod
    def of(cls, text: str) -> JsonStyle:
        if _NON_ASCII.search(text):
            ensure_ascii = False
        else:  # pure ASCII: escaped non-ASCII text means ensure_ascii; no evidence, Jupyter's default
            ensure_ascii = _ESCAPED_NON_ASCII.search(text) is not None
        # json.dumps writes ", " and ": " unless told otherwise; compact writers use "," and ":"
        inline_separator = ", " if '": ' in text else ","
        return cls(ensure_ascii, "\r\n" if "\r\n" in text else "\n", inline_separator)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_whitespace(self) -> None:
        self.pos = _WHITESPACE.match(self.text, self.pos).end()

    def peek(self) -> str:
        self.skip_whitespace()
        if self.pos >= len(self.text):
            raise JsonShapeError("unexpected end of the JSON text")
        return self.text[self.pos]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise JsonShapeError(f"expected {char!r} at offset {self.pos}")
        self.pos += 1

    def string(self) -> tuple[int, int]:
        self.skip_whitespace()
        match = _STRING.match(self.text, self.pos)
        if match is None:
            raise JsonShapeError(f"expected a string at offset {self.pos}")
        self.pos = match.end()
        return match.span()

    def skip_value(self) -> None:
        char = self.peek()
        if char == '"':
            self.string()
        elif char in "[{":
            depth = 0
            while True:
                match = _STRUCTURE.search(self.text, self.pos)
                if match is None:
                    raise JsonShapeError("unbalanced brackets")
                found = match.group()
                if found == '"':
                    self.pos = match.start()
                    self.string()
                    continue
                depth += 1 if found in "[{" else -1
                self.pos = match.end()
                if depth == 0:
                    return
        else:
            match = _SCALAR.match(self.text, self.pos)
            if match is None:
                raise JsonShapeError(f"expected a value at offset {self.pos}")
            self.pos = match.end()

    def members(self) -> Iterator[str]:
        """The keys of the object at the cursor; the caller reads or skips each value."""
        self.expect("{")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            start, end = self.string()
            raw = self.text[start:end]
            key = json.loads(raw) if "\\" in raw else raw[1:-1]
            self.expect(":")
            self.skip_whitespace()
            before = self.pos
            yield key
            if self.pos == before:
                self.skip_value()
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("}")
            return

    def elements(self) -> Iterator[None]:
        """Step through the array at the cursor; the caller reads or skips each element."""
        self.expect("[")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            self.skip_whitespace()
            before = self.pos
            yield None
            if self.pos == before:
                self.skip_value()
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("]")
            return


def source_spans(text: str) -> list[SourceSpan | None]:
    """One entry per cell of the notebook in `text` (None for a cell without `source`).

    Duplicate keys resolve as `json.loads` resolves them: the last one wins.
    """
    scanner = _Scanner(text)
    cells: list[SourceSpan | None] = []
    for key in scanner.members():
        if key != "cells" or scanner.peek() != "[":
            continue
        cells = []
        for _ in scanner.elements():
            cells.append(_cell_source(scanner) if scanner.peek() == "{" else None)
    return cells


def _cell_source(scanner: _Scanner) -> SourceSpan | None:
    found = None
    for key in scanner.members():
        if key != "source":
            continue
        char = scanner.peek()
        start = scanner.pos
        if char == '"':
            scanner.string()
            found = SourceSpan(start, scanner.pos, None)
        elif char == "[":
            items = []
            for _ in scanner.elements():
                if scanner.peek() != '"':
                    raise JsonShapeError("a source list holds something other than strings")
                items.append(scanner.string())
            found = SourceSpan(start, scanner.pos, tuple(items))
    return found


def split_source_lines(value: str) -> list[str]:
    """`value` as nbformat stores a list source: each line keeps its line break."""
    lines, position = [], 0
    for match in _LINE_BREAK.finditer(value):
        lines.append(value[position : match.end()])
        position = match.end()
    if position < len(value):
        lines.append(value[position:])
    return lines


def render_source(text: str, span: SourceSpan, value: str, style: JsonStyle) -> str:
    """The JSON text of a new `source` value, shaped like the one at `span` in `text`.

    Lines that were already in the old value keep their exact old JSON text (escapes and
    all); new ones are written with the file's `ensure_ascii` choice.
    """
    old_tokens = {}
    for start, end in span.items if span.items is not None else ((span.start, span.end),):
        raw = text[start:end]
        old_tokens.setdefault(json.loads(raw), raw)

    def token(line: str) -> str:
        return old_tokens.get(line) or json.dumps(line, ensure_ascii=style.ensure_ascii)

    if span.items is None:
        return token(value)
    lines = split_source_lines(value)
    if not lines:
        return "[]"
    item_indent, close_indent, separator = _list_layout(text, span, style)
    if item_indent is None:  # the list was written on one line
        return "[" + separator.join(token(line) for line in lines) + "]"
    opening = "[" + style.newline + item_indent
    closing = style.newline + close_indent + "]"
    return opening + separator.join(token(line) for line in lines) + closing


def _list_layout(text: str, span: SourceSpan, style: JsonStyle) -> tuple[str | None, str, str]:
    """(indent of an element or None for a one-line list, indent of `]`, separator)."""
    items = span.items or ()
    inside = text[span.start : span.end]
    if items:
        first_start = items[0][0]
        gap = text[span.start + 1 : first_start]
        if "\n" not in gap and "\r" not in gap:
            separator = text[items[0][1] : items[1][0]] if len(items) > 1 else style.inline_separator
            return None, "", separator
        item_indent = _indent_after_break(gap)
        close_indent = _indent_after_break(text[items[-1][1] : span.end - 1])
        return item_indent, close_indent, "," + style.newline + item_indent
    # an empty list: indent as the document does, one level deeper than the key's line
    if inside.strip() != "[]" or not _is_indented(text):
        return None, "", style.inline_separator
    line_start = max(text.rfind("\n", 0, span.start), text.rfind("\r", 0, span.start)) + 1
    key_indent = _WHITESPACE.match(text, line_start).group()
    unit = _indent_unit(text)
    item_indent = key_indent + unit
    return item_indent, key_indent, "," + style.newline + item_indent


def _indent_after_break(gap: str) -> str:
    return re.split(r"\r\n|\r|\n", gap)[-1]


def _is_indented(text: str) -> bool:
    brace = text.find("{")
    return brace >= 0 and text[brace + 1 : brace + 2] in ("\n", "\r")


def _indent_unit(text: str) -> str:
    """The indentation of the document's first key: one level of its indentation."""
    brace = text.find("{")
    match = re.compile(r"(?:\r\n|\r|\n)([ \t]*)").match(text, brace + 1)
    return match.group(1) if match and match.group(1) else " "


def replace_spans(text: str, replacements: Mapping[tuple[int, int], str]) -> str:
    """`text` with each non-overlapping `(start, end)` span replaced."""
    out, position = [], 0
    for (start, end), new in sorted(replacements.items()):
        out.append(text[position:start])
        out.append(new)
        position = end
    out.append(text[position:])
    return "".join(out)


def decoded_offset(raw: str, count: int) -> int:
    """The offset in the JSON string token `raw` (quotes included) where its decoded
    value's first `count` characters end."""
    position, decoded = 1, 0
    while decoded < count and position < len(raw) - 1:
        if raw[position] == "\\":
            if raw[position + 1] == "u":
                code = int(raw[position + 2 : position + 6], 16)
                position += 6
                # a surrogate pair is one character of the value (two JSON escapes)
                if 0xD800 <= code < 0xDC00 and raw.startswith("\\u", position):
                    position += 6
            else:
                position += 2
        else:
            position += 1
        decoded += 1
    return position
