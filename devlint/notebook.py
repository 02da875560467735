"""Jupyter notebooks: the code cells checked as one program, findings placed in their
cells, fixes written back into the notebook's own JSON.

The program. The Python code cells, in notebook order, joined into one text, so that a
device bound in cell 1 serves a fix in cell 5. Between two cells stands a boundary
comment line. IPython syntax is masked out of the parse: each line magic (`%time f()`),
shell line (`!ls`), help line (`obj?`, `?obj`), other escaped line (`/f x`, `,f x`,
`;f x`), automagic (`pip install x` with no `%`) and line-magic assignment
(`files = !ls`, `t = %time f()`) becomes, on the same line and at the same indentation,
`pass` (`files = ...` for an assignment) plus a marker comment. Line counts never
change, so positions map back line for line; the rules fire on neither `pass` nor the
comment, and a fix never edits them. On the way back each marked line gets its original
text, byte for byte.

Cell magics. A cell that starts with `%%bash`, `%%writefile`, `%%html`, `%%python3`, …
is not Python run in the notebook's namespace, so it is left out of the program. The
cell magics whose body is Python run in that namespace (`%%time`, `%%timeit`,
`%%capture`, `%%debug`, `%%prun`, `%%ipytest`) keep their body in the program and only
their first line is masked: their code binds and uses the notebook's names like any
cell. (ruff makes the same split, except that it also keeps `%%python`, `%%python3` and
`%%pypy`, which run in a separate process: a `device` bound in cell 1 does not exist
there, so a fix that used it would break the cell.) Cells whose VS Code `languageId`, or
notebooks whose `language_info.name`, is not Python are skipped.

Positions name the cell as ruff does: `cell N` counts every cell of the notebook
(markdown and raw ones too) from 1, and the line within the cell counts from 1.

Writing back. Only the `source` of cells whose text a fix changed is replaced, by its
span in the original JSON text (see `devlint.notebook_json`); outputs, execution counts,
metadata, key order, indentation, escaping and the file's final newline stay as they
were. Blank lines a fix would leave at the end of a cell (a binding inserted after a
cell's last import) are trimmed to the cell's own ending.
"""

from __future__ import annotations

import bisect
import codecs
import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from devlint.diagnostics import Diagnostic, Edit, Fix
from devlint.notebook_json import (
    JsonShapeError,
    JsonStyle,
    SourceSpan,
    decoded_offset,
    render_source,
    replace_spans,
    source_spans,
    split_source_lines,
)

if TYPE_CHECKING:
    from devlint.config import Config
    from devlint.engine import InternalError

NOTEBOOK_SUFFIX = ".ipynb"

# Cell magics whose body is Python run in the notebook's own namespace.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "debug", "prun", "ipytest"})

# IPython line magics that also run without their `%` (automagic, on by default).
AUTOMAGICS = frozenset(
    """alias alias_magic autoawait autocall automagic bookmark cd colors conda config debug
    dhist dirs doctest_mode edit env gui history killbgscripts load load_ext loadpy logoff
    logon logstart logstate logstop lsmagic macro magic mamba matplotlib micromamba notebook
    page pastebin pdb pdef pdoc pfile pinfo pinfo2 pip popd pprint precision prun psearch
    psource pushd pwd pycat pylab quickref recall rehashx reload_ext rerun reset
    reset_selective run save sc set_env store sx system tb time timeit unalias unload_ext
    who who_ls whos xdel xmode""".split()
)
_ASSIGNMENT_OPERATORS = frozenset(
    {"=", "+=", "-=", "*=", "/=", "//=", "%=", "**=", "&=", "|=", "^=", ">>=", "<<=", "@="}
)

_TARGET = r"[A-Za-z_][\w.]*(?:\[[^\]=\r\n]*\])?(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*"
_MAGIC_ASSIGNMENT = re.compile(rf"(?P<indent>[ \t]*)(?P<target>{_TARGET})[ \t]*=[ \t]*[!%]")
_HELP = re.compile(r"[ \t]*(?:\?\??.*|%{0,2}[A-Za-z_*][\w*]*(?:\.[A-Za-z_*][\w*]*)*\?\??[ \t]*)")
# A quick look for anything that may be IPython syntax; most cells have none.
_CANDIDATE = re.compile(
    r"^[ \t]*[%!?/,;]|\?[ \t]*\r?$"
    rf"|^[ \t]*{_TARGET}[ \t]*=[ \t]*[!%]"
    rf"|^[ \t]*(?:{'|'.join(sorted(AUTOMAGICS))})(?:[ \t]|\r?$)",
    re.MULTILINE,
)
_TOKEN = re.compile(r"#|'''|\"\"\"|'|\"|[(\[{]|[)\]}]")
_STRING_END = {
    "'": re.compile(r"(?:[^'\\]|\\.)*'"),
    '"': re.compile(r'(?:[^"\\]|\\.)*"'),
    "'''": re.compile(r"(?:[^\\]|\\.)*?'''", re.DOTALL),
    '"""': re.compile(r'(?:[^\\]|\\.)*?"""', re.DOTALL),
}
_BREAK = re.compile(r"\r\n|\r|\n")
_CELL_MAGIC = re.compile(r"(?:[ \t]*(?:\r\n|\r|\n))*%%([^\s]*)")  # after blank lines, as IPython allows
_LINE_REFERENCE = re.compile(r"\bline (\d+)\b")
_TRAILING_BREAKS = re.compile(r"(?:\r\n|\r|\n)*\Z")
_FINAL_BREAK = re.compile(r"(?:\r\n|\r|\n)\Z")


class NotebookError(ValueError):
    """The file is not a notebook devlint can read; `line`/`col` place it in the file."""

    def __init__(self, message: str, line: int = 1, col: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.col = col


class ProgramMismatch(ValueError):
    """A fixed program whose cell boundaries or masked lines did not survive the fix."""


@dataclass(frozen=True)
class Cell:
    """One cell: `index` counts from 0 over all cells; `number` is ruff's `cell N`."""

    index: int
    kind: str
    source: str
    source_is_list: bool
    python: bool  # part of the program

    @property
    def number(self) -> int:
        return self.index + 1


@dataclass(frozen=True)
class CellPosition:
    """A place in a notebook: `cell` as ruff numbers it, `line` from 1, `col` from 0."""

    cell: int
    line: int
    col: int


# ---------------------------------------------------------------------------- masking


class _LineScanner:
    """Follows brackets, strings and backslash continuations from line to line, to tell
    which lines start a logical line (only those can hold IPython syntax)."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None
        self.continued = False

    @property
    def at_statement_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def advance(self, body: str) -> None:
        position = 0
        if self.quote is not None:
            position = self._close_string(body, 0)
            if position is None:
                return
        self.continued = False
        while True:
            match = _TOKEN.search(body, position)
            if match is None:
                break
            token = match.group()
            if token == "#":
                return  # a backslash in a comment continues nothing
            if token in "([{":
                self.depth += 1
            elif token in ")]}":
                self.depth = max(self.depth - 1, 0)
            else:
                self.quote = token
                position = self._close_string(body, match.end())
                if position is None:
                    return
                continue
            position = match.end()
        self.continued = body.endswith("\\")

    def _close_string(self, body: str, start: int) -> int | None:
        quote = self.quote
        assert quote is not None
        match = _STRING_END[quote].match(body, start)
        if match is not None:
            self.quote = None
            return match.end()
        if len(quote) == 1:
            backslashes = len(body) - len(body.rstrip("\\"))
            if backslashes % 2 == 0:
                self.quote = None  # unterminated: the parser reports it
            else:
                self.continued = True
        return None


def _magic_kind(body: str) -> tuple[str, str] | None:
    """("pass", indent) or ("assign", "indent target") when the line is IPython syntax."""
    stripped = body.lstrip(" \t")
    if not stripped:
        return None
    indent = body[: len(body) - len(stripped)]
    if stripped[0] in "%!?/,;":
        return "pass", indent
    assignment = _MAGIC_ASSIGNMENT.match(body)
    if assignment is not None:
        return "assign", assignment.group("indent") + assignment.group("target")
    if stripped.rstrip().endswith("?") and _HELP.fullmatch(body):
        return "pass", indent
    words = stripped.split()
    if words[0] in AUTOMAGICS and (len(words) == 1 or words[1] not in _ASSIGNMENT_OPERATORS):
        try:
            compile(stripped, "<cell>", "exec")
        except SyntaxError:
            return "pass", indent
    return None


def _masked_lines(source: str) -> list[tuple[str, str, tuple[str, str] | None]] | None:
    """Each line of a cell as (body, line break, mask or None); None when no line of the
    cell can be IPython syntax (most cells)."""
    if not _CANDIDATE.search(source) and "\r" not in source.replace("\r\n", ""):
        return None
    lines = []
    for line in split_source_lines(source):
        body = line.rstrip("\r\n")
        lines.append((body, line[len(body) :], None))
    scanner = _LineScanner()
    continued_magic: tuple[str, str] | None = None  # a magic line that ends in a backslash
    for number, (body, newline, _) in enumerate(lines):
        if continued_magic is not None:
            mask: tuple[str, str] | None = ("pass", _indent_of(continued_magic))
        elif scanner.at_statement_start:
            mask = _magic_kind(body)
        else:
            mask = None
        if mask is None:
            scanner.advance(body)
            continued_magic = None
            continue
        lines[number] = (body, newline, mask)
        continued_magic = mask if body.endswith("\\") else None
    return lines


def _indent_of(mask: tuple[str, str]) -> str:
    text = mask[1]
    return text[: len(text) - len(text.lstrip(" \t"))]


def _mask_text(mask: tuple[str, str], placeholder: str) -> str:
    kind, head = mask
    return f"{head} = {placeholder}" if kind == "assign" else f"{head}pass"


def cell_kind(source: str) -> str:
    """ "python", or "magic" for a cell magic whose body is not notebook Python."""
    match = _CELL_MAGIC.match(source)
    if match is None:
        return "python"
    return "python" if match.group(1) in PYTHON_CELL_MAGICS else "magic"


# ---------------------------------------------------------------------------- program


@dataclass(frozen=True)
class ProgramCell:
    """Where one code cell lies in the program."""

    index: int
    source: str
    start_line: int
    line_count: int  # lines it occupies, a synthetic final line break included
    synthetic_newline: bool
    last_line_length: int
    masks: tuple[tuple[int, str, str], ...]  # (number, masked text, original text)


class Program:
    """The notebook's Python code cells as one text, and the way back to the cells."""

    def __init__(self, text: str, cells: tuple[ProgramCell, ...], salt: str, newline: str) -> None:
        self.text = text
        self.cells = cells
        self._salt = salt
        self._newline = newline
        self._starts = [cell.start_line for cell in cells]
        self._mask_line = re.compile(rf"(?P<text>.*)  #{re.escape(salt)}m(?P<number>\d+)")

    @classmethod
    def build(cls, sources: Sequence[tuple[int, str]]) -> Program:
        """The program of the code cells `(index in the notebook, source)`, in order."""
        salt = "__devlint__"
        while any(salt in source for _, source in sources):
            salt += "_"
        newline = next((m.group() for _, s in sources if (m := _BREAK.search(s))), "\n")
        parts: list[str] = []
        cells = []
        line = 1
        mask_number = 0
        for position, (index, source) in enumerate(sources):
            if position:
                parts.append(f"#{salt}cell{position}{newline}")
                line += 1
            masks = []
            text = source
            lines = _masked_lines(source)
            if lines is not None:
                pieces = []
                for body, line_break, mask in lines:
                    if mask is not None:
                        masked = f"{_mask_text(mask, '...')}  #{salt}m{mask_number}"
                        masks.append((mask_number, masked, body))
                        mask_number += 1
                        body = masked
                    pieces.append(body + line_break)
                text = "".join(pieces)
            synthetic = bool(text) and not text.endswith(("\n", "\r"))
            last_length = len(text) - max(text.rfind("\n"), text.rfind("\r")) - 1 if synthetic else 0
            if synthetic:
                text += newline
            count = len(_BREAK.findall(text))
            cells.append(ProgramCell(index, source, line, count, synthetic, last_length, tuple(masks)))
            parts.append(text)
            line += count
        return cls("".join(parts), tuple(cells), salt, newline)

    def position(self, line: int, col: int) -> CellPosition:
        """Where the program's `line` (1-based) and `col` (0-based) lie in the notebook.

        The boundary line after a cell is that cell's end: text inserted there belongs to
        the cell before it.
        """
        if not self.cells:
            return CellPosition(1, line, col)
        cell = self.cells[max(bisect.bisect_right(self._starts, line) - 1, 0)]
        in_cell = max(line - cell.start_line + 1, 1)
        if in_cell > cell.line_count:
            return self._end_of(cell)
        return CellPosition(cell.index + 1, in_cell, col)

    def _end_of(self, cell: ProgramCell) -> CellPosition:
        if cell.synthetic_newline:
            return CellPosition(cell.index + 1, cell.line_count, cell.last_line_length)
        return CellPosition(cell.index + 1, cell.line_count + 1, 0)

    def _is_end(self, line: int) -> ProgramCell | None:
        """The cell whose end (its boundary line, or past the program) `line` is."""
        if not self.cells:
            return None
        cell = self.cells[max(bisect.bisect_right(self._starts, line) - 1, 0)]
        return cell if line - cell.start_line + 1 > cell.line_count else None

    def to_notebook(self, diagnostic: Diagnostic) -> NotebookDiagnostic:
        """`diagnostic`, placed at the program's positions, placed in its cell."""
        start = self.position(diagnostic.line, diagnostic.col)
        end = self.position(diagnostic.end_line or diagnostic.line, diagnostic.end_col)
        fix = None
        edit_cells: tuple[int, ...] = ()
        if diagnostic.fix is not None:
            placed_edits = [self._cell_edit(e) for e in diagnostic.fix.edits]
            fix = Fix(diagnostic.fix.safety, tuple(edit for _, edit in placed_edits))
            edit_cells = tuple(cell for cell, _ in placed_edits)
        end_line = end.line if end.cell == start.cell else start.line
        end_col = end.col if end.cell == start.cell else start.col
        message = self._in_cell_terms(diagnostic.message, start.cell)
        placed = Diagnostic(diagnostic.path, start.line, start.col, diagnostic.code, message, end_line, end_col, fix)
        return NotebookDiagnostic(start.cell, placed, edit_cells)

    def _in_cell_terms(self, message: str, cell: int) -> str:
        """Messages name other lines of the program ("… line 12: torch.ones …"); say
        which cell and which line of it."""

        def replace(match: re.Match) -> str:
            where = self.position(int(match.group(1)), 0)
            return f"line {where.line}" if where.cell == cell else f"cell {where.cell}, line {where.line}"

        return _LINE_REFERENCE.sub(replace, message) if "line " in message else message

    def _cell_edit(self, edit: Edit) -> tuple[int, Edit]:
        start = self.position(edit.start_line, edit.start_col)
        end = self.position(edit.end_line, edit.end_col)
        content = edit.content
        ending = self._is_end(edit.start_line)
        if ending is not None and ending.synthetic_newline:
            # the cell has no final line break of its own: the text goes after its last line
            content = self._newline + content.removesuffix(self._newline)
        if end.cell != start.cell:  # an edit across a boundary; fixes make none
            end = self._end_of(self._cell_numbered(start.cell))
        return start.cell, Edit(start.line, start.col, end.line, end.col, content)

    def _cell_numbered(self, number: int) -> ProgramCell:
        return next(cell for cell in self.cells if cell.index + 1 == number)

    def refit(self, fixed: str) -> tuple[Program, dict[int, str]]:
        """The program `fixed` (this one, fixed) with its cells' new places, and each
        cell's new source (by notebook index) with its IPython lines restored.

        Raises ProgramMismatch if the fix lost a cell boundary or touched a masked line.
        """
        groups: list[list[str]] = [[]]
        expected_boundary = 1
        for line in split_source_lines(fixed):
            if line.rstrip("\r\n") == f"#{self._salt}cell{expected_boundary}":
                groups.append([])
                expected_boundary += 1
            else:
                groups[-1].append(line)
        if len(groups) != len(self.cells):
            raise ProgramMismatch("a fix removed the boundary between two cells")
        cells = []
        sources = {}
        line_number = 1
        for cell, lines in zip(self.cells, groups):
            text = self._restore(cell, lines)
            if self._salt in text:
                raise ProgramMismatch(f"a fix moved devlint's markers in cell {cell.index + 1}")
            last_length = len(lines[-1].rstrip("\r\n")) if lines else 0
            if cell.synthetic_newline:
                text = _FINAL_BREAK.sub("", text, count=1)
            sources[cell.index] = text
            cells.append(
                ProgramCell(cell.index, text, line_number, len(lines), cell.synthetic_newline, last_length, cell.masks)
            )
            line_number += len(lines) + 1
        return Program(fixed, tuple(cells), self._salt, self._newline), sources

    def _restore(self, cell: ProgramCell, lines: list[str]) -> str:
        masks = {number: (masked, original) for number, masked, original in cell.masks}
        seen = []
        out = []
        for line in lines:
            body = line.rstrip("\r\n")
            match = self._mask_line.fullmatch(body) if self._salt in body else None
            if match is not None:
                number = int(match.group("number"))
                if number not in masks or masks[number][0] != body:
                    raise ProgramMismatch(f"a fix edited an IPython line in cell {cell.index + 1}")
                seen.append(number)
                line = masks[number][1] + line[len(body) :]
            out.append(line)
        if seen != [number for number, _, _ in cell.masks]:
            raise ProgramMismatch(f"a fix removed an IPython line in cell {cell.index + 1}")
        return "".join(out)


# ---------------------------------------------------------------------------- notebook


class Notebook:
    """An nbformat 4 notebook read from its bytes, and written back span by span."""

    def __init__(self, text: str, content: dict, cells: tuple[Cell, ...], bom: bool, path: str) -> None:
        self.text = text
        self.content = content
        self.cells = cells
        self.bom = bom
        self.path = path
        self._program: Program | None = None
        self._spans: list[SourceSpan | None] | None = None

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "<notebook>") -> Notebook:
        bom = data.startswith(codecs.BOM_UTF8)
        try:
            text = data[len(codecs.BOM_UTF8) if bom else 0 :].decode("utf-8")
        except UnicodeDecodeError as err:
            raise NotebookError(
                f"not a Jupyter notebook: the file is not UTF-8 text ({err.reason} at byte {err.start})"
            ) from None
        try:
            content = json.loads(text)
        except json.JSONDecodeError as err:
            raise NotebookError(
                f"not a Jupyter notebook: the file is not valid JSON ({err.msg})", err.lineno, err.colno - 1
            ) from None
        except RecursionError:
            raise NotebookError("not a Jupyter notebook: the JSON is nested too deeply") from None
        return cls(text, content, _cells_of(content), bom, path)

    @property
    def program(self) -> Program:
        if self._program is None:
            self._program = Program.build([(c.index, c.source) for c in self.cells if c.python])
        return self._program

    def _source_spans(self) -> list[SourceSpan | None]:
        if self._spans is None:
            try:
                spans = source_spans(self.text)
            except JsonShapeError as err:
                raise NotebookError(f"cannot locate the cells in the notebook's JSON: {err}") from None
            if len(spans) != len(self.cells) or any(span is None for span in spans):
                raise NotebookError("cannot locate every cell's source in the notebook's JSON")
            self._spans = spans
        return self._spans

    def with_sources(self, sources: Mapping[int, str]) -> bytes:
        """The notebook's bytes with the `source` of the cells in `sources` (by index)
        replaced, every other byte as it was."""
        changed = {i: s for i, s in sources.items() if s != self.cells[i].source}
        if not changed:
            return self.to_bytes(self.text)
        spans = self._source_spans()
        style = JsonStyle.of(self.text)
        replacements = {}
        for index, value in changed.items():
            span = spans[index]
            assert span is not None
            replacements[(span.start, span.end)] = render_source(self.text, span, value, style)
        text = replace_spans(self.text, replacements)
        self._check_written(text, changed)
        return self.to_bytes(text)

    def to_bytes(self, text: str) -> bytes:
        body = text.encode("utf-8")
        return codecs.BOM_UTF8 + body if self.bom else body

    def _check_written(self, text: str, changed: Mapping[int, str]) -> None:
        """The written JSON must read back as the old notebook with the new sources."""
        expected = dict(self.content)
        cells = list(expected["cells"])
        for index, value in changed.items():
            shaped = split_source_lines(value) if self.cells[index].source_is_list else value
            cells[index] = {**cells[index], "source": shaped}
        expected["cells"] = cells
        try:
            written = json.loads(text)
        except json.JSONDecodeError as err:
            raise NotebookError(f"writing the fixes would produce invalid JSON ({err.msg})") from None
        if written != expected:
            raise NotebookError("writing the fixes would change more than the fixed cells")

    def text_position(self, cell: int, line: int, col: int) -> tuple[int, int]:
        """(line from 1, col from 0) in the notebook's JSON text of the character at
        `line`/`col` of cell number `cell`: where a SARIF region should point."""
        span = self._source_spans()[cell - 1]
        assert span is not None
        source = self.cells[cell - 1].source
        lines = split_source_lines(source)
        offset = sum(len(text) for text in lines[: line - 1]) + col
        items = span.items if span.items is not None else ((span.start, span.end),)
        position = items[0][0] if items else span.start
        for start, end in items:
            raw = self.text[start:end]
            length = len(json.loads(raw))
            if offset <= length or (start, end) == items[-1]:
                position = start + decoded_offset(raw, offset)
                break
            offset -= length
        line_start = max(self.text.rfind("\n", 0, position), self.text.rfind("\r", 0, position)) + 1
        return len(_BREAK.findall(self.text, 0, line_start)) + 1, position - line_start


def _cells_of(content: object) -> tuple[Cell, ...]:
    """nbformat 4's structure, as far as devlint relies on it."""
    if not isinstance(content, dict):
        raise NotebookError("not a Jupyter notebook: the JSON is not an object")
    version = content.get("nbformat")
    if version != 4 or isinstance(version, bool):
        if "nbformat" not in content:
            raise NotebookError("not a Jupyter notebook: it has no `nbformat` version")
        if isinstance(version, int) and not isinstance(version, bool) and version < 4:
            raise NotebookError(
                f"this is an nbformat {version} notebook; devlint reads nbformat 4 "
                "(convert it with `jupyter nbconvert --to notebook --nbformat 4`)"
            )
        raise NotebookError(f"unsupported notebook format {version!r}; devlint reads nbformat 4")
    raw_cells = content.get("cells")
    if not isinstance(raw_cells, list):
        raise NotebookError("not a Jupyter notebook: `cells` is missing or not a list")
    metadata = content.get("metadata")
    language = metadata.get("language_info", {}) if isinstance(metadata, dict) else {}
    language_name = language.get("name", "python") if isinstance(language, dict) else "python"
    python_notebook = not isinstance(language_name, str) or language_name.lower().startswith("python")
    cells = []
    for index, raw in enumerate(raw_cells):
        where = f"cell {index + 1}"
        if not isinstance(raw, dict):
            raise NotebookError(f"not a valid notebook: {where} is not a JSON object")
        kind = raw.get("cell_type")
        if not isinstance(kind, str):
            raise NotebookError(f"not a valid notebook: {where} has no `cell_type`")
        source = raw.get("source")
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            text, is_list = "".join(source), True
        elif isinstance(source, str):
            text, is_list = source, False
        else:
            raise NotebookError(
                f"not a valid notebook: the `source` of {where} is neither a string nor a list of strings"
            )
        python = kind == "code" and python_notebook and _cell_language_is_python(raw) and cell_kind(text) == "python"
        cells.append(Cell(index, kind, text, is_list, python))
    return tuple(cells)


def _cell_language_is_python(raw: dict) -> bool:
    metadata = raw.get("metadata")
    vscode = metadata.get("vscode") if isinstance(metadata, dict) else None
    language = vscode.get("languageId", "python") if isinstance(vscode, dict) else "python"
    return language == "python"


# ---------------------------------------------------------------------------- results


@dataclass(frozen=True)
class NotebookDiagnostic:
    """A finding in a notebook: `cell` as ruff numbers it (None when the finding is about
    the file itself, e.g. invalid JSON); the diagnostic's lines and columns, and its fix's
    edits, are relative to that cell (to the file's text when `cell` is None)."""

    cell: int | None
    diagnostic: Diagnostic
    edit_cells: tuple[int, ...] = ()  # the cell of each of the fix's edits

    @property
    def sort_key(self) -> tuple:
        d = self.diagnostic
        return (d.path, self.cell or 0, d.line, d.col, d.code)

    def location(self) -> str:
        """`nb.ipynb:cell 3:2:5` (1-based column, as the CLI prints it)."""
        d = self.diagnostic
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{d.path}:{cell}{d.line}:{d.col + 1}"

    def flat(self) -> Diagnostic:
        """The finding as a Diagnostic that carries its cell (and each edit's), for the
        surfaces that print diagnostics."""
        d = self.diagnostic
        fix = d.fix
        if fix is not None:
            edits = tuple(replace(e, cell=c) for e, c in zip(fix.edits, self.edit_cells))
            fix = replace(fix, edits=edits)
        return replace(d, cell=self.cell, fix=fix)

    def to_json(self) -> dict:
        """The CLI's JSON object for a finding, with ruff's `cell` key (on each edit too:
        a fix in cell 5 may insert the device binding in cell 1)."""
        found = {**self.diagnostic.to_json(), "cell": self.cell}
        if found["fix"] is not None:
            for edit, cell in zip(found["fix"]["edits"], self.edit_cells):
                edit["cell"] = cell
        return found


@dataclass
class NotebookResult:
    diagnostics: list[NotebookDiagnostic] = field(default_factory=list)
    errors: list[InternalError] = field(default_factory=list)


@dataclass(frozen=True)
class CellChange:
    cell: int  # ruff's number
    before: str
    after: str


@dataclass
class NotebookFixResult:
    """`output` is the fixed notebook's bytes (the input's when nothing changed)."""

    source: bytes
    output: bytes
    applied: list[NotebookDiagnostic] = field(default_factory=list)
    remaining: list[NotebookDiagnostic] = field(default_factory=list)
    errors: list[InternalError] = field(default_factory=list)
    changes: list[CellChange] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.output != self.source

    def diff(self, path: str) -> str:
        """A unified diff per changed cell, headed `path:cell N` as ruff's `--diff` is."""
        out = []
        for change in self.changes:
            name = f"{path}:cell {change.cell}"
            before = _diff_lines(change.before)
            after = _diff_lines(change.after)
            out.extend(difflib.unified_diff(before, after, fromfile=name, tofile=name))
        return "".join(out)


def _diff_lines(text: str) -> list[str]:
    lines = split_source_lines(text)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"  # a cell's last line has no break of its own; the diff needs one
    return lines


def _unreadable(path: str, err: NotebookError, config: Config) -> list[NotebookDiagnostic]:
    if not config.is_enabled("DEV000", path):
        return []
    return [NotebookDiagnostic(None, Diagnostic(path, err.line, err.col, "DEV000", str(err), err.line, err.col))]


def _placed(program: Program, diagnostics: Sequence[Diagnostic]) -> list[NotebookDiagnostic]:
    return sorted((program.to_notebook(d) for d in diagnostics), key=lambda d: d.sort_key)


def lint_notebook(data: bytes, path: str = "<notebook>", config: Config | None = None) -> NotebookResult:
    """Check a notebook's code cells as one program; findings are placed in their cells.
    A file that is not an nbformat 4 notebook is one DEV000 finding."""
    from devlint.config import Config
    from devlint.engine import lint_source

    config = config or Config()
    try:
        notebook = Notebook.from_bytes(data, path)
    except NotebookError as err:
        return NotebookResult(_unreadable(path, err, config))
    program = notebook.program
    linted = lint_source(program.text, path, config)
    return NotebookResult(_placed(program, linted.diagnostics), list(linted.errors))


def fix_notebook(
    data: bytes, path: str = "<notebook>", config: Config | None = None, *, unsafe: bool = False
) -> NotebookFixResult:
    """Apply the fixes to a notebook; only the fixed cells' `source` changes in the JSON.

    `remaining` is placed in the fixed notebook's cells; `applied` in the original's
    (a fix applied in a later round is placed where its line was in the original).
    A notebook devlint cannot read or write back is left as it was.
    """
    from devlint.config import Config
    from devlint.engine import InternalError, fix_source

    config = config or Config()
    result = NotebookFixResult(data, data)
    try:
        notebook = Notebook.from_bytes(data, path)
    except NotebookError as err:
        result.remaining = _unreadable(path, err, config)
        return result
    program = notebook.program
    fixed = fix_source(program.text, path, config, unsafe=unsafe)
    result.errors = list(fixed.errors)
    if not fixed.changed:
        result.remaining = _placed(program, fixed.remaining)
        return result
    try:
        fixed_program, fixed_sources = program.refit(fixed.output)
        sources = {index: keep_cell_ending(notebook.cells[index].source, text) for index, text in fixed_sources.items()}
        result.output = notebook.with_sources(sources)
    except (ProgramMismatch, NotebookError) as err:
        result.errors.append(
            InternalError(path, f"cannot write the fixes back into the notebook: {err}; file left unchanged")
        )
        result.remaining = _placed(program, fixed.remaining)
        return result
    result.applied = _placed(program, fixed.applied)
    result.remaining = _placed(fixed_program, fixed.remaining)
    result.changes = [
        CellChange(index + 1, notebook.cells[index].source, text)
        for index, text in sources.items()
        if text != notebook.cells[index].source
    ]
    return result


def keep_cell_ending(original: str, fixed: str) -> str:
    """The fixed text, ending as the original cell ended (line breaks a fix left at the
    end of a cell separate nothing in a notebook)."""
    if fixed == original:
        return fixed
    ending = _TRAILING_BREAKS.search(original).group()
    body = fixed[: _TRAILING_BREAKS.search(fixed).start()]
    return body + ending if body else fixed


def notebook_to_script(data: bytes, path: str = "<notebook>") -> str:
    """The notebook's Python code cells as one runnable script, for `devlint verify`:
    IPython lines become `pass` (`name = None` for `name = !cmd`), at their indentation;
    cell magics that are not Python (`%%bash`) are dropped. Raises NotebookError."""
    notebook = Notebook.from_bytes(data, path)
    parts = []
    for cell in notebook.cells:
        if not cell.python:
            continue
        pieces = [f"# %% cell {cell.number}\n"]
        lines = _masked_lines(cell.source)
        if lines is None:
            pieces.append(cell.source)
        for body, line_break, mask in lines or ():
            pieces.append((_mask_text(mask, "None") if mask is not None else body) + line_break)
        text = "".join(pieces)
        parts.append(text if text.endswith(("\n", "\r")) else text + "\n")
    return "".join(parts)


__all__ = [
    "NOTEBOOK_SUFFIX",
    "Cell",
    "CellChange",
    "CellPosition",
    "Notebook",
    "NotebookDiagnostic",
    "NotebookError",
    "NotebookFixResult",
    "NotebookResult",
    "Program",
    "fix_notebook",
    "lint_notebook",
    "notebook_to_script",
]
