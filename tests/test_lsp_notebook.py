"""`devlint lsp` with notebook documents (LSP 3.17 notebook sync), driven over stdio as
VS Code drives it: the cells arrive inside `notebookDocument/*` notifications, each with
its own `vscode-notebook-cell:` URI, and findings come back on those URIs."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_lsp import Client, apply_edit, start, whole

CODE, MARKDOWN = 2, 1  # NotebookCellKind

FIRST = "import torch\n"
SECOND = "x = torch.zeros(3).cuda()"  # no final line break, as cells usually end
NOTES = "# Notes\nThis moves `x` with `.cuda()`.\n"


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    return tmp_path


@pytest.fixture
def client(workspace):
    client = start(workspace, ["utf-16"], notebooks=True)
    yield client
    client.close()


class Notebook:
    """An open notebook on the client's side: its URI and its cells' URIs and texts."""

    def __init__(self, client: Client, path: Path, cells: list[tuple[int, str]]) -> None:
        self.client = client
        self.uri = path.as_uri()
        self.version = 0
        self.prefix = f"vscode-notebook-cell:{path.as_posix()}"
        self.cells = [(self._new_uri(), kind, text) for kind, text in cells]
        client.notify("notebookDocument/didOpen", {
            "notebookDocument": {
                "uri": self.uri, "notebookType": "jupyter-notebook", "version": self.version,
                "cells": [{"kind": kind, "document": uri} for uri, kind, _ in self.cells],
            },
            "cellTextDocuments": [_item(uri, kind, text) for uri, kind, text in self.cells],
        })  # fmt: skip

    _count = 0

    def _new_uri(self) -> str:
        Notebook._count += 1
        return f"{self.prefix}#W{Notebook._count}sZmlsZQ%3D%3D"  # VS Code's shape, quoted

    def uri_of(self, number: int) -> str:
        return self.cells[number - 1][0]

    def text_of(self, number: int) -> str:
        return self.cells[number - 1][2]

    def diagnostics(self, number: int, version: int | None = None) -> list[dict]:
        uri = self.uri_of(number)
        wanted = lambda p: p["uri"] == uri and (version is None or p.get("version") == version)  # noqa: E731
        return self.client.notification("textDocument/publishDiagnostics", wanted)["diagnostics"]

    def all_diagnostics(self) -> list[list[dict]]:
        return [self.diagnostics(number) for number in range(1, len(self.cells) + 1)]

    def change(self, cells: dict) -> None:
        self.version += 1
        self.client.notify("notebookDocument/didChange", {
            "notebookDocument": {"uri": self.uri, "version": self.version}, "change": {"cells": cells},
        })  # fmt: skip

    def edit_cell(self, number: int, version: int, changes: list[dict], text: str) -> None:
        """Send `changes` to cell `number` (ranges, as VS Code sends them); `text` is the result."""
        uri, kind, _ = self.cells[number - 1]
        self.cells[number - 1] = (uri, kind, text)
        self.change({"textContent": [{"document": {"uri": uri, "version": version}, "changes": changes}]})

    def insert_cell(self, index: int, kind: int, text: str) -> str:
        uri = self._new_uri()
        self.cells.insert(index, (uri, kind, text))
        self.change({"structure": {
            "array": {"start": index, "deleteCount": 0, "cells": [{"kind": kind, "document": uri}]},
            "didOpen": [_item(uri, kind, text)],
        }})  # fmt: skip
        return uri

    def remove_cell(self, index: int) -> str:
        uri, _, _ = self.cells.pop(index)
        self.change({"structure": {
            "array": {"start": index, "deleteCount": 1}, "didClose": [{"uri": uri}],
        }})  # fmt: skip
        return uri

    def code_actions(self, number: int, where: dict, only: list[str] | None = None) -> list[dict]:
        context: dict = {"diagnostics": []}
        if only is not None:
            context["only"] = only
        return self.client.request("textDocument/codeAction", {
            "textDocument": {"uri": self.uri_of(number)}, "range": where, "context": context,
        })  # fmt: skip

    def apply(self, edit: dict) -> list[str]:
        """The cells' texts with a WorkspaceEdit applied."""
        return [apply_edit(text, edit, uri) if uri in edit["changes"] else text for uri, _, text in self.cells]


def _item(uri: str, kind: int, text: str) -> dict:
    language = "python" if kind == CODE else "markdown"
    return {"uri": uri, "languageId": language, "version": 1, "text": text}


def _ranges(diagnostics: list[dict]) -> list[tuple[str, dict]]:
    return [(d["code"], d["range"]["start"]) for d in diagnostics]


def test_notebook_sync_is_advertised(client):
    sync = client.capabilities["notebookDocumentSync"]
    assert sync["notebookSelector"] == [{"notebook": "jupyter-notebook", "cells": [{"language": "python"}]}]
    assert sync["save"] is True


def test_a_finding_is_published_on_its_cell(client, workspace):
    notebook = Notebook(client, workspace / "nb.ipynb", [(CODE, FIRST), (CODE, SECOND), (MARKDOWN, NOTES)])
    first, second, notes = notebook.all_diagnostics()
    assert first == [] and notes == []
    (finding,) = second
    assert finding["code"] == "DEV102" and finding["source"] == "devlint"
    assert finding["range"] == {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 25}}


def test_magics_and_shell_cells_are_kept_out_of_the_parse(client, workspace):
    cells = [
        (CODE, "%matplotlib inline\nimport torch\n!pip install -q torchvision\nfiles = !ls\n"),
        (CODE, "%%bash\necho cuda\nnvidia-smi --query-gpu=name x.cuda()\n"),
        (CODE, "%time y = 1\ny = torch.ones(2).cuda()\n"),
    ]
    notebook = Notebook(client, workspace / "magic.ipynb", cells)
    first, shell, third = notebook.all_diagnostics()
    assert first == [] and shell == []
    assert _ranges(third) == [("DEV102", {"line": 1, "character": 4})]


def test_a_cell_edit_updates_its_diagnostics(client, workspace):
    notebook = Notebook(client, workspace / "nb.ipynb", [(CODE, FIRST), (CODE, SECOND), (MARKDOWN, NOTES)])
    assert len(notebook.all_diagnostics()[1]) == 1
    # VS Code sends a cell's change as a range: `.cuda()` -> `.cpu()`
    cuda = {"start": {"line": 0, "character": 19}, "end": {"line": 0, "character": 25}}
    notebook.edit_cell(2, 2, [{"range": cuda, "rangeLength": 6, "text": "cpu()"}], "x = torch.zeros(3).cpu()")
    assert notebook.diagnostics(2, version=2) == []
    # a whole-text change, and a finding on the second line of the cell
    text = "x = torch.zeros(3)\nz = x.to('cuda')\n"
    notebook.edit_cell(2, 3, [{"text": text}], text)
    assert _ranges(notebook.diagnostics(2, version=3)) == [("DEV101", {"line": 1, "character": 9})]


def test_cells_added_and_removed(client, workspace):
    notebook = Notebook(client, workspace / "nb.ipynb", [(CODE, FIRST), (MARKDOWN, NOTES)])
    notebook.all_diagnostics()
    added = notebook.insert_cell(1, CODE, SECOND)
    assert _ranges(notebook.diagnostics(2)) == [("DEV102", {"line": 0, "character": 4})]
    assert notebook.uri_of(2) == added
    # removing the cell clears its diagnostics; a finding in a cell after it is still placed right
    removed = notebook.remove_cell(1)
    cleared = client.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == removed)
    assert cleared["diagnostics"] == []
    assert notebook.diagnostics(1) == [] and notebook.diagnostics(2) == []
    notebook.insert_cell(2, CODE, "w = torch.ones(1)\nw = w.cuda()\n")
    assert _ranges(notebook.diagnostics(3)) == [("DEV102", {"line": 1, "character": 4})]


def test_a_quick_fix_edits_the_cells_it_needs(client, workspace):
    notebook = Notebook(client, workspace / "nb.ipynb", [(CODE, FIRST), (CODE, SECOND), (MARKDOWN, NOTES)])
    (finding,) = notebook.all_diagnostics()[1]
    actions = notebook.code_actions(2, finding["range"])
    fix = next(a for a in actions if a["title"].startswith("Fix DEV102"))
    assert fix["kind"] == "quickfix" and fix["diagnostics"][0]["code"] == "DEV102"
    # the device binding goes in cell 1 after the import, `.to(device)` in cell 2
    assert set(fix["edit"]["changes"]) == {notebook.uri_of(1), notebook.uri_of(2)}
    first, second, notes = notebook.apply(fix["edit"])
    assert first.startswith("import torch\n") and "device = torch.accelerator.current_accelerator()" in first
    assert second == "x = torch.zeros(3).to(device)" and notes == NOTES

    # the fixed cells, sent back, have no finding left
    notebook.edit_cell(1, 2, [{"text": first}], first)
    notebook.edit_cell(2, 2, [{"text": second}], second)
    assert notebook.diagnostics(1, version=2) == [] and notebook.diagnostics(2, version=2) == []


def test_noqa_and_fix_all_in_a_notebook(client, workspace):
    cells = [(CODE, FIRST), (CODE, SECOND), (CODE, "%pip install x\ny = torch.ones(2, device='cuda')\n")]
    notebook = Notebook(client, workspace / "nb.ipynb", cells)
    _, second, third = notebook.all_diagnostics()
    noqa = next(a for a in notebook.code_actions(2, second[0]["range"]) if "noqa" in a["title"])
    assert notebook.apply(noqa["edit"])[1] == "x = torch.zeros(3).cuda()  # noqa: DEV102"

    (fix_all,) = notebook.code_actions(3, whole(notebook.text_of(3)), only=["source.fixAll"])
    assert fix_all["kind"] == "source.fixAll.devlint"
    first, second, third = notebook.apply(fix_all["edit"])
    assert first.startswith("import torch\n") and "device = " in first and first.endswith("\n")
    assert second == "x = torch.zeros(3).to(device)"
    assert third == "%pip install x\ny = torch.ones(2, device=device)\n"  # the magic kept byte for byte


def test_hover_on_a_cell(client, workspace):
    notebook = Notebook(client, workspace / "nb.ipynb", [(CODE, FIRST), (CODE, SECOND)])
    (finding,) = notebook.all_diagnostics()[1]
    hover = client.request("textDocument/hover", {
        "textDocument": {"uri": notebook.uri_of(2)}, "position": {"line": 0, "character": 20},
    })  # fmt: skip
    assert "DEV102" in hover["contents"]["value"] and hover["range"] == finding["range"]


def test_save_and_close_a_notebook(client, workspace):
    notebook = Notebook(client, workspace / "nb.ipynb", [(CODE, FIRST), (CODE, SECOND)])
    notebook.all_diagnostics()
    client.notify("notebookDocument/didSave", {"notebookDocument": {"uri": notebook.uri}})
    assert len(notebook.diagnostics(2)) == 1
    client.notify("notebookDocument/didClose", {
        "notebookDocument": {"uri": notebook.uri},
        "cellTextDocuments": [{"uri": uri} for uri, _, _ in notebook.cells],
    })  # fmt: skip
    assert notebook.diagnostics(1) == [] and notebook.diagnostics(2) == []


def test_settings_of_the_notebooks_directory_apply(client, workspace):
    (workspace / "pyproject.toml").write_text('[tool.devlint]\nignore = ["DEV102"]\n')
    notebook = Notebook(client, workspace / "nb.ipynb", [(CODE, FIRST), (CODE, SECOND)])
    assert notebook.all_diagnostics() == [[], []]


def test_a_cell_sent_as_a_plain_text_document(workspace):
    """Without notebook sync a client may send each cell as its own text document: it is
    checked on its own, magics masked, and nothing crashes."""
    client = start(workspace, ["utf-16"])  # no notebookDocument capability
    try:
        assert "notebookDocumentSync" not in client.capabilities
        uri = f"vscode-notebook-cell:{(workspace / 'nb.ipynb').as_posix()}#W2sZmlsZQ%3D%3D"
        text = "!pip install torch\nimport torch\nx = torch.zeros(3).cuda()"
        client.notify("textDocument/didOpen", {
            "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text},
        })  # fmt: skip
        published = client.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)
        assert _ranges(published["diagnostics"]) == [("DEV102", {"line": 2, "character": 4})]
        actions = client.request("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": published["diagnostics"][0]["range"],
            "context": {"diagnostics": []},
        })  # fmt: skip
        fix = next(a for a in actions if a["title"].startswith("Fix DEV102"))
        fixed = apply_edit(text, fix["edit"], uri)
        assert fixed.startswith("!pip install torch\nimport torch\n") and "torch.zeros(3).to(device)" in fixed

        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": "%%bash\necho x.cuda()\n"}],
        })  # fmt: skip
        changed = client.notification("textDocument/publishDiagnostics", lambda p: p.get("version") == 2)
        assert changed["diagnostics"] == []
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        assert client.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)["diagnostics"] == []
    finally:
        client.close()


def test_a_notebooks_json_opened_as_text_is_not_checked_as_python(workspace):
    client = start(workspace, ["utf-16"])
    try:
        path = workspace / "nb.ipynb"
        text = '{"cells": [{"cell_type": "code", "source": "x = torch.zeros(3).cuda()"}], "nbformat": 4}\n'
        client.notify("textDocument/didOpen", {
            "textDocument": {"uri": path.as_uri(), "languageId": "json", "version": 1, "text": text},
        })  # fmt: skip
        published = client.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == path.as_uri())
        assert published["diagnostics"] == []
    finally:
        client.close()
