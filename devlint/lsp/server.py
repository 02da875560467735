"""The language server: the engine's findings and fixes, in an editor.

- diagnostics when a document is opened, changed or saved (cleared when it is closed),
  with the `[tool.devlint]` settings of the nearest pyproject.toml above the file;
- code actions: a quick fix per fixable finding (the finding's own edits), "Add
  `# noqa: CODE`" per finding, and "Fix all safe fixes" as `source.fixAll.devlint`
  (the engine's `fix_source`, as one edit of the whole document);
- hover: the rule's documentation over a finding;
- Jupyter notebooks (LSP 3.17 notebook sync): the code cells of an open notebook are
  checked as one program (`devlint.notebook.Program`: a device bound in cell 1 serves a
  fix in cell 5, IPython magics and `%%bash` cells are kept out of the parse); findings
  are published on each cell's own URI, and a fix whose edits reach other cells (the
  binding it inserts in cell 1) is one edit of those cells' documents. A cell a client
  sends as a lone text document (no notebook sync) is checked on its own.

The client sends the whole text of a document on each change (full sync): the engine
needs all of it anyway, and the text stays exactly what the client has. Cell changes
inside notebook notifications may be ranges (VS Code sends them so), and are applied
to the server's own copy of each cell.
"""

from __future__ import annotations

import io
import os
import tokenize
from dataclasses import dataclass

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from devlint import __version__
from devlint.config import Config, ConfigError, ConfigResolver
from devlint.diagnostics import RULES_URI, Diagnostic, Edit, level
from devlint.engine import FileResult, InternalError, fix_source, lint_source
from devlint.notebook import NOTEBOOK_SUFFIX, Program, ProgramMismatch, keep_cell_ending, cell_kind
from devlint.positions import Document
from devlint.rules import all_rules
from devlint.suppression import NOQA

FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.devlint"
_SOURCE = "devlint"
_SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning}
_CELL_SCHEME = "vscode-notebook-cell"
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(
            notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")]
        )
    ],
    save=True,
)


@dataclass
class _Cells:
    """The cells of a notebook as they were linted together."""

    program: Program
    documents: dict[int, tuple[str, Document]]  # cell number (ruff's, from 1) -> its URI and text
    diagnostics: list[Diagnostic]  # every cell's, with their `cell` and their edits' `cell` set


@dataclass
class _Linted:
    """What the client was last told about a document, to answer its follow-up requests."""

    document: Document
    path: str
    config: Config
    diagnostics: list[Diagnostic]
    cells: _Cells | None = None  # for a notebook cell: the notebook it was linted in


@dataclass
class _Notebook:
    """An open notebook as the client has it: its cells in order, and each cell's text."""

    cells: list[types.NotebookCell]
    texts: dict[str, TextDocument]


class DevlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "devlint", __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Full, notebook_document_sync=NOTEBOOK_SYNC,
        )  # fmt: skip
        self.linted: dict[str, _Linted] = {}
        self.notebooks: dict[str, _Notebook] = {}
        self._rules = {rule.code: rule for rule in all_rules()}
        self._config_problem: str | None = None
        self.shut_down = False  # `shutdown` came before `exit`: the exit status is 0, else 1

    # -- linting -----------------------------------------------------------------------

    def lint(self, uri: str) -> None:
        text_document = self.workspace.get_text_document(uri)
        path = self._path_of(uri)
        if uri.startswith(f"{_CELL_SCHEME}:"):  # a notebook cell sent on its own: a one-cell notebook
            self._lint_cells(path, [(1, uri, text_document, True)])
            return
        document = Document(text_document.source, self._encoding())
        config = self._config_for(path)
        diagnostics: list[Diagnostic] = []
        # a notebook's JSON opened as text is never checked as Python (its cells are, by notebook sync)
        if config is not None and not config.is_excluded(path) and not path.endswith(NOTEBOOK_SUFFIX):
            diagnostics = self._lint_text(document.text, path, config)
        self._publish(uri, text_document.version, _Linted(document, path, config or Config(), diagnostics))

    def lint_notebook(self, notebook_uri: str) -> None:
        notebook = self.notebooks[notebook_uri]
        cells = [
            (number, cell.document, notebook.texts[cell.document], cell.kind == types.NotebookCellKind.Code)
            for number, cell in enumerate(notebook.cells, 1)
            if cell.document in notebook.texts
        ]
        self._lint_cells(self._path_of(notebook_uri), cells)

    def _lint_cells(self, path: str, cells: list[tuple[int, str, TextDocument, bool]]) -> None:
        """Lint the code cells `(number, uri, text, is code)` as one program; publish each
        cell's findings on its URI."""
        encoding = self._encoding()
        documents = {number: (uri, Document(text.source, encoding)) for number, uri, text, _ in cells}
        program = Program.build([
            (number - 1, text.source)
            for number, _, text, code in cells
            if code and text.language_id in (None, "python") and cell_kind(text.source) == "python"
        ])  # fmt: skip
        config = self._config_for(path)
        placed: list[Diagnostic] = []
        if config is not None and not config.is_excluded(path):
            placed = [program.to_notebook(d).flat() for d in self._lint_text(program.text, path, config)]
        notebook = _Cells(program, documents, placed)
        for number, uri, text, _ in cells:
            found = [d for d in placed if d.cell == number]
            self._publish(uri, text.version, _Linted(documents[number][1], path, config or Config(), found, notebook))

    def _lint_text(self, text: str, path: str, config: Config) -> list[Diagnostic]:
        try:
            result = lint_source(text, path, config)
        except Exception as err:  # one document's crash must not take the others' diagnostics
            result = FileResult(errors=[InternalError(path, f"{type(err).__name__}: {err}")])
        for error in result.errors:
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Error, message=str(error)))
        return result.diagnostics

    def _publish(self, uri: str, version: int | None, linted: _Linted) -> None:
        self.linted[uri] = linted
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri,
                version=version,
                diagnostics=[self.to_lsp(d, linted.document) for d in linted.diagnostics],
            )  # fmt: skip
        )

    def forget(self, uri: str) -> None:
        self.linted.pop(uri, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    # -- notebooks ---------------------------------------------------------------------

    def open_notebook(self, params: types.DidOpenNotebookDocumentParams) -> None:
        notebook = params.notebook_document
        texts = {item.uri: self._cell_text(item) for item in params.cell_text_documents}
        self.notebooks[notebook.uri] = _Notebook(list(notebook.cells), texts)
        self.lint_notebook(notebook.uri)

    def change_notebook(self, params: types.DidChangeNotebookDocumentParams) -> None:
        notebook = self.notebooks.get(params.notebook_document.uri)
        changes = params.change.cells
        if notebook is None or changes is None:
            return
        if changes.structure is not None:
            array = changes.structure.array
            notebook.cells[array.start : array.start + array.delete_count] = array.cells or []
            for item in changes.structure.did_open or []:
                notebook.texts[item.uri] = self._cell_text(item)
            for gone in changes.structure.did_close or []:
                notebook.texts.pop(gone.uri, None)
                self.forget(gone.uri)
        replaced = {cell.document: cell for cell in changes.data or []}
        notebook.cells = [replaced.get(cell.document, cell) for cell in notebook.cells]
        for content in changes.text_content or []:
            text = notebook.texts.get(content.document.uri)
            if text is None:
                continue
            for change in content.changes:
                text.apply_change(change)
            text.version = content.document.version
        self.lint_notebook(params.notebook_document.uri)

    def close_notebook(self, params: types.DidCloseNotebookDocumentParams) -> None:
        notebook = self.notebooks.pop(params.notebook_document.uri, None)
        for uri in [*(notebook.texts if notebook else ()), *(item.uri for item in params.cell_text_documents)]:
            if uri in self.linted:
                self.forget(uri)

    def _cell_text(self, item: types.TextDocumentItem) -> TextDocument:
        """The server's own copy of a cell, which takes changes as ranges or as whole texts."""
        return TextDocument(
            item.uri, item.text, item.version, item.language_id,
            sync_kind=types.TextDocumentSyncKind.Incremental, position_codec=self.workspace.position_codec,
        )  # fmt: skip

    def _encoding(self) -> str:
        return str(getattr(self.workspace.position_encoding, "value", self.workspace.position_encoding or "utf-16"))

    def _path_of(self, uri: str) -> str:
        scheme, _, rest = uri.partition(":")
        if scheme == _CELL_SCHEME and rest.startswith("/"):  # vscode-notebook-cell:/dir/nb.ipynb#W0sZ…
            uri = "file:" + rest.partition("#")[0]
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path:
            return path
        root = self.workspace.root_path or os.getcwd()
        return os.path.join(root, os.path.basename(uri.split(":", 1)[-1]) or "untitled.py")

    def _config_for(self, path: str) -> Config | None:
        """The settings for `path`, or None (and a message, once) if they are broken."""
        try:
            config = ConfigResolver().for_path(path)  # afresh: pyproject.toml may have changed
        except ConfigError as err:
            problem = f"devlint: {err}"
            if problem != self._config_problem:
                self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=problem))
            self._config_problem = problem
            return None
        self._config_problem = None
        return config

    def to_lsp(self, diagnostic: Diagnostic, document: Document) -> types.Diagnostic:
        rule = self._rules.get(diagnostic.code)
        return types.Diagnostic(
            range=_range_of(document, diagnostic),
            message=diagnostic.message,
            severity=_SEVERITY[level(diagnostic.code)],
            code=diagnostic.code,
            code_description=types.CodeDescription(href=RULES_URI),
            source=_SOURCE,
            data={"name": rule.name} if rule else None,
        )

    # -- code actions ------------------------------------------------------------------

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        linted = self.linted.get(params.text_document.uri)
        if linted is None:
            return []
        uri = params.text_document.uri
        wanted = params.context.only
        actions: list[types.CodeAction] = []
        if _allowed(types.CodeActionKind.QuickFix, wanted):
            for diagnostic in linted.diagnostics:
                where = _range_of(linted.document, diagnostic)
                if not _overlaps(where, params.range):
                    continue
                lsp_diagnostic = self.to_lsp(diagnostic, linted.document)
                if diagnostic.fix is not None:
                    actions.append(self._quick_fix(uri, linted, diagnostic, lsp_diagnostic))
                noqa = _noqa_edit(linted.document, diagnostic)
                if noqa is not None:
                    actions.append(
                        types.CodeAction(
                            title=f"Add `# noqa: {diagnostic.code}`",
                            kind=types.CodeActionKind.QuickFix,
                            diagnostics=[lsp_diagnostic],
                            edit=_workspace_edit([(uri, linted.document, noqa)]),
                        )
                    )
        if _allowed(FIX_ALL, wanted):
            fix_all = self._fix_all(uri, linted)
            if fix_all is not None:
                actions.append(fix_all)
        return actions

    def _quick_fix(self, uri: str, linted: _Linted, diagnostic: Diagnostic, lsp_diagnostic) -> types.CodeAction:
        rule = self._rules.get(diagnostic.code)
        name = f" ({rule.name})" if rule else ""
        unsafe = "" if diagnostic.fix.is_safe else " — unsafe: behaviour may change"
        return types.CodeAction(
            title=f"Fix {diagnostic.code}{name}{unsafe}",
            kind=types.CodeActionKind.QuickFix,
            diagnostics=[lsp_diagnostic],
            is_preferred=diagnostic.fix.is_safe,
            edit=_workspace_edit(_placed_edits(uri, linted, diagnostic)),
        )

    def _fix_all(self, uri: str, linted: _Linted) -> types.CodeAction | None:
        if linted.cells is not None:
            return self._fix_all_cells(linted.path, linted.config, linted.cells)
        if not any(d.fix is not None and d.fix.is_safe for d in linted.diagnostics):
            return None
        result = fix_source(linted.document.text, linted.path, linted.config)
        if not result.changed:
            return None
        return _fix_all_action(len(result.applied), {uri: _replace_all(linted.document, result.output)})

    def _fix_all_cells(self, path: str, config: Config, cells: _Cells) -> types.CodeAction | None:
        """Fix all of a notebook: each cell the fixes change is replaced as a whole."""
        if not any(d.fix is not None and d.fix.is_safe for d in cells.diagnostics):
            return None
        result = fix_source(cells.program.text, path, config)
        if not result.changed:
            return None
        try:
            _, sources = cells.program.refit(result.output)
        except ProgramMismatch:
            return None
        changes = {}
        for index, source in sources.items():
            uri, document = cells.documents[index + 1]
            fixed = keep_cell_ending(document.text, source)
            if fixed != document.text:
                changes[uri] = _replace_all(document, fixed)
        return _fix_all_action(len(result.applied), changes) if changes else None

    # -- hover -------------------------------------------------------------------------

    def hover(self, params: types.HoverParams) -> types.Hover | None:
        linted = self.linted.get(params.text_document.uri)
        if linted is None:
            return None
        here = types.Range(params.position, params.position)
        parts, ranges = [], []
        for diagnostic in linted.diagnostics:
            where = _range_of(linted.document, diagnostic)
            rule = self._rules.get(diagnostic.code)
            if rule is None or not _overlaps(where, here):
                continue
            parts.append(f"**{rule.code}** `{rule.name}`: {diagnostic.message}\n\n{rule.doc()}")
            ranges.append(where)
        if not parts:
            return None
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)),
            range=ranges[0] if len(ranges) == 1 else None,
        )


def _range_of(document: Document, diagnostic: Diagnostic) -> types.Range:
    return _range(document, diagnostic.line, diagnostic.col, diagnostic.end_line, diagnostic.end_col)


def _range(document: Document, line: int, col: int, end_line: int, end_col: int) -> types.Range:
    if (end_line, end_col) < (line, col):
        end_line, end_col = line, col
    return types.Range(
        types.Position(*document.lsp_position(line, col)), types.Position(*document.lsp_position(end_line, end_col))
    )


def _overlaps(a: types.Range, b: types.Range) -> bool:
    """Do two ranges share a position? Their ends count: a cursor right after a finding is on it."""
    return _start(a) <= _end(b) and _start(b) <= _end(a)


def _start(where: types.Range) -> tuple[int, int]:
    return where.start.line, where.start.character


def _end(where: types.Range) -> tuple[int, int]:
    return where.end.line, where.end.character


def _allowed(kind: str, only: list[str] | None) -> bool:
    """Is `kind` among the kinds the client asked for (`source` covers `source.fixAll.devlint`)?"""
    return not only or any(kind == wanted or kind.startswith(f"{wanted}.") for wanted in only)


def _placed_edits(uri: str, linted: _Linted, diagnostic: Diagnostic) -> list[tuple[str, Document, Edit]]:
    """The fix's edits with the document each is in: a notebook cell's fix may edit other
    cells (the device binding it inserts in cell 1)."""
    edits = diagnostic.fix.edits
    if linted.cells is None:
        return [(uri, linted.document, edit) for edit in edits]
    return [(*linted.cells.documents[edit.cell], edit) for edit in edits]


def _workspace_edit(edits: list[tuple[str, Document, Edit]]) -> types.WorkspaceEdit:
    changes: dict[str, list[types.TextEdit]] = {}
    for uri, document, e in edits:
        where = _range(document, e.start_line, e.start_col, e.end_line, e.end_col)
        changes.setdefault(uri, []).append(types.TextEdit(range=where, new_text=e.content))
    return types.WorkspaceEdit(changes=changes)


def _replace_all(document: Document, text: str) -> list[types.TextEdit]:
    end_line, end_character = document.end
    whole = types.Range(types.Position(0, 0), types.Position(end_line, end_character))
    return [types.TextEdit(range=whole, new_text=text)]


def _fix_all_action(applied: int, changes: dict[str, list[types.TextEdit]]) -> types.CodeAction:
    return types.CodeAction(
        title=f"devlint: fix all safe fixes ({applied})",
        kind=FIX_ALL,
        edit=types.WorkspaceEdit(changes=changes),
    )


def _noqa_edit(document: Document, diagnostic: Diagnostic) -> Edit | None:
    """The edit that suppresses `diagnostic` on its line, or None where a comment cannot go
    (the line ends inside a string, or continues with a backslash)."""
    if not 0 < diagnostic.line <= len(document.lines):
        return None
    text = document.lines[diagnostic.line - 1]
    match = NOQA.search(text)
    if match is not None and match.group("codes"):
        edit = Edit(diagnostic.line, match.end(), diagnostic.line, match.end(), f", {diagnostic.code}")
    elif match is not None:
        return None  # a bare `# noqa` already suppresses everything
    else:
        end = len(text.rstrip())
        edit = Edit(diagnostic.line, end, diagnostic.line, len(text), f"  # noqa: {diagnostic.code}")
    lines = list(document.lines)
    lines[diagnostic.line - 1] = text[: edit.start_col] + edit.content + text[edit.end_col :]
    return edit if _is_comment_on(lines, diagnostic.line) else None


def _is_comment_on(lines: list[str], line: int) -> bool:
    """Does `line` of `lines` end with a `# noqa` comment, as Python's tokenizer reads it?"""
    source = "\n".join(lines)
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT and token.start[0] == line and "noqa" in token.string:
                return True
            if token.start[0] > line:
                return False
    except (tokenize.TokenError, SyntaxError):
        return False
    return False


def build_server() -> DevlintServer:
    server = DevlintServer()

    def relint(ls: DevlintServer, params) -> None:
        ls.lint(params.text_document.uri)

    for event in (types.TEXT_DOCUMENT_DID_OPEN, types.TEXT_DOCUMENT_DID_CHANGE, types.TEXT_DOCUMENT_DID_SAVE):
        server.feature(event)(relint)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def did_open_notebook(ls: DevlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.open_notebook(params)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def did_change_notebook(ls: DevlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        ls.change_notebook(params)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def did_save_notebook(ls: DevlintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        if params.notebook_document.uri in ls.notebooks:
            ls.lint_notebook(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def did_close_notebook(ls: DevlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.close_notebook(params)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: DevlintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.forget(params.text_document.uri)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=False),
    )
    def code_action(ls: DevlintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return ls.code_actions(params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: DevlintServer, params: types.HoverParams) -> types.Hover | None:
        return ls.hover(params)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: DevlintServer, params: None) -> None:
        ls.shut_down = True

    return server


def serve() -> int:
    """Serve on stdio until `exit`; the exit status is 1 unless `shutdown` came first (the
    LSP specification), and 1 too when the client went away without either."""
    server = build_server()
    server.start_io()
    return 0 if server.shut_down else 1
