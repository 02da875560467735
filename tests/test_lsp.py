"""`devlint lsp`, driven as an editor drives it: a real server process, JSON-RPC on stdio."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

TIMEOUT = 30  # seconds for any one answer; a hung server fails the test, never hangs the suite

SAMPLE = """import torch

x = torch.zeros(3).cuda()
print(torch.cuda.get_device_name(0))
"""


class Client:
    """A minimal LSP client: Content-Length framing, requests matched to responses by id."""

    def __init__(self, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "devlint", "lsp"], cwd=cwd,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.messages: queue.Queue = queue.Queue()
        self.notifications: list[dict] = []
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            headers = {}
            while True:
                line = stream.readline()
                if not line:
                    self.messages.put(None)
                    return
                line = line.decode("ascii").strip()
                if not line:
                    break
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            body = stream.read(int(headers["content-length"]))
            self.messages.put(json.loads(body))

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def notify(self, method: str, params: dict | None = None) -> None:
        self.send({"method": method, "params": params or {}})

    def request(self, method: str, params: dict | None = None):
        self._next_id += 1
        self.send({"id": self._next_id, "method": method, "params": params or {}})
        message = self._until(lambda m: m.get("id") == self._next_id and "method" not in m)
        assert "error" not in message, message["error"]
        return message["result"]

    def notification(self, method: str, predicate=lambda params: True) -> dict:
        """The next notification `method` whose params satisfy `predicate`."""
        for seen in self.notifications:
            if seen["method"] == method and predicate(seen["params"]):
                self.notifications.remove(seen)
                return seen["params"]
        return self._until(lambda m: m.get("method") == method and predicate(m["params"]), keep=False)["params"]

    def _until(self, wanted, keep: bool = True) -> dict:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                message = self.messages.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                pytest.fail(f"no answer from the server in {TIMEOUT}s; stderr: {self._stderr()}")
            if message is None:
                pytest.fail(f"the server exited ({self.process.poll()}); stderr: {self._stderr()}")
            if wanted(message):
                return message
            if "method" in message and "id" in message:  # a request from the server: accept it
                self.send({"id": message["id"], "result": None})
            elif "method" in message:
                self.notifications.append(message)

    def _stderr(self) -> str:
        if self.process.poll() is None:
            self.process.kill()
        return self.process.stderr.read().decode("utf-8", "replace")[-2000:]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=TIMEOUT)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            stream.close()


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    return tmp_path


def start(workspace: Path, encodings: list[str], notebooks: bool = False) -> Client:
    pytest.importorskip("pygls", reason="the language server needs pygls (pip install 'devlint[lsp]')")
    client = Client(workspace)
    capabilities: dict = {"general": {"positionEncodings": encodings}}
    if notebooks:  # as VS Code offers notebook sync
        capabilities["notebookDocument"] = {"synchronization": {"dynamicRegistration": True}}
    result = client.request("initialize", {
        "processId": None, "rootUri": workspace.as_uri(),
        "capabilities": capabilities,
        "workspaceFolders": [{"uri": workspace.as_uri(), "name": "demo"}],
    })  # fmt: skip
    client.capabilities = result["capabilities"]
    client.notify("initialized")
    return client


@pytest.fixture
def client(workspace):
    client = start(workspace, ["utf-16"])
    yield client
    client.close()


def open_document(client: Client, path: Path, text: str) -> list[dict]:
    path.write_text(text)
    client.notify("textDocument/didOpen", {
        "textDocument": {"uri": path.as_uri(), "languageId": "python", "version": 1, "text": text},
    })  # fmt: skip
    return diagnostics_for(client, path)


def diagnostics_for(client: Client, path: Path, version: int | None = None) -> list[dict]:
    wanted = lambda p: p["uri"] == path.as_uri() and (version is None or p.get("version") == version)  # noqa: E731
    return client.notification("textDocument/publishDiagnostics", wanted)["diagnostics"]


def change_document(client: Client, path: Path, text: str, version: int) -> list[dict]:
    client.notify("textDocument/didChange", {
        "textDocument": {"uri": path.as_uri(), "version": version},
        "contentChanges": [{"text": text}],
    })  # fmt: skip
    return diagnostics_for(client, path, version)


def code_actions(client: Client, path: Path, where: dict, only: list[str] | None = None) -> list[dict]:
    context: dict = {"diagnostics": []}
    if only is not None:
        context["only"] = only
    return client.request("textDocument/codeAction", {
        "textDocument": {"uri": path.as_uri()}, "range": where, "context": context,
    })  # fmt: skip


def apply_edit(text: str, edit: dict, uri: str) -> str:
    """Apply a WorkspaceEdit's TextEdits for `uri` to `text`, counting UTF-16 units as LSP does."""
    lines = text.splitlines(keepends=True) or [""]
    if text.endswith("\n"):
        lines.append("")

    def offset(position: dict) -> int:
        line = lines[position["line"]] if position["line"] < len(lines) else ""
        encoded = line.encode("utf-16-le")[: 2 * position["character"]]
        return sum(len(x) for x in lines[: position["line"]]) + len(encoded.decode("utf-16-le"))

    edits = edit["changes"][uri]
    for text_edit in sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]))[::-1]:
        start, end = offset(text_edit["range"]["start"]), offset(text_edit["range"]["end"])
        text = text[:start] + text_edit["newText"] + text[end:]
    return text


def whole(text: str) -> dict:
    lines = text.split("\n")
    return {"start": {"line": 0, "character": 0}, "end": {"line": len(lines) - 1, "character": len(lines[-1])}}


def test_initialize_advertises_the_features(client):
    capabilities = client.capabilities
    assert capabilities["textDocumentSync"]["change"] == 1  # full text on each change
    assert capabilities["hoverProvider"]
    assert set(capabilities["codeActionProvider"]["codeActionKinds"]) == {"quickfix", "source.fixAll.devlint"}
    assert capabilities["positionEncoding"] == "utf-16"


def test_diagnostics_quick_fix_and_updates(client, workspace):
    path = workspace / "train.py"
    diagnostics = open_document(client, path, SAMPLE)
    assert [(d["code"], d["range"]["start"]) for d in diagnostics] == [
        ("DEV102", {"line": 2, "character": 4}),
        ("DEV106", {"line": 3, "character": 6}),
    ]
    assert all(d["source"] == "devlint" and d["severity"] == 2 for d in diagnostics)

    actions = code_actions(client, path, diagnostics[0]["range"])
    fix = next(a for a in actions if a["title"].startswith("Fix DEV102"))
    assert fix["kind"] == "quickfix" and fix["isPreferred"]
    assert fix["diagnostics"][0]["code"] == "DEV102"
    fixed = apply_edit(SAMPLE, fix["edit"], path.as_uri())
    assert "x = torch.zeros(3).to(device)\n" in fixed
    assert "device = torch.accelerator.current_accelerator()" in fixed

    diagnostics = change_document(client, path, fixed, version=2)
    assert [d["code"] for d in diagnostics] == ["DEV106"]

    diagnostics = change_document(client, path, "import torch\n", version=3)
    assert diagnostics == []


def test_quick_fix_columns_count_utf16_units(client, workspace):
    path = workspace / "emoji.py"
    text = 'import torch\ns = "😀😀"; x = torch.zeros(3).cuda()\n'
    (diagnostic,) = open_document(client, path, text)
    # `torch` starts at code point 14, UTF-16 unit 16: each emoji is two units
    assert diagnostic["range"]["start"] == {"line": 1, "character": 16}
    (fix,) = [a for a in code_actions(client, path, diagnostic["range"]) if a["title"].startswith("Fix")]
    fixed = apply_edit(text, fix["edit"], path.as_uri())
    assert 's = "😀😀"; x = torch.zeros(3).to(device)\n' in fixed


def test_columns_follow_the_negotiated_encoding(workspace):
    client = start(workspace, ["utf-8", "utf-16"])  # as Neovim offers them
    try:
        assert client.capabilities["positionEncoding"] == "utf-8"
        path = workspace / "emoji.py"
        (diagnostic,) = open_document(client, path, 'import torch\ns = "é😀"; x = torch.zeros(3).cuda()\n')
        assert diagnostic["range"]["start"] == {"line": 1, "character": 18}  # code point 14; é is 2 bytes, 😀 4
    finally:
        client.close()


def test_noqa_action_suppresses_the_finding(client, workspace):
    path = workspace / "train.py"
    diagnostics = open_document(client, path, SAMPLE)
    dev106 = next(d for d in diagnostics if d["code"] == "DEV106")
    actions = code_actions(client, path, dev106["range"])
    noqa = next(a for a in actions if a["title"] == "Add `# noqa: DEV106`")
    suppressed = apply_edit(SAMPLE, noqa["edit"], path.as_uri())
    assert "print(torch.cuda.get_device_name(0))  # noqa: DEV106\n" in suppressed
    assert [d["code"] for d in change_document(client, path, suppressed, version=2)] == ["DEV102"]


def test_noqa_action_extends_an_existing_noqa(client, workspace):
    path = workspace / "train.py"
    text = "import torch\nx = torch.zeros(3).cuda()  # noqa: E501\n"
    (diagnostic,) = open_document(client, path, text)
    noqa = next(a for a in code_actions(client, path, diagnostic["range"]) if "noqa" in a["title"])
    assert apply_edit(text, noqa["edit"], path.as_uri()).endswith("# noqa: E501, DEV102\n")


def test_fix_all_is_a_source_action_with_one_edit(client, workspace):
    path = workspace / "train.py"
    text = SAMPLE + "y = torch.ones(2, device='cuda')\n"
    open_document(client, path, text)
    actions = code_actions(client, path, whole(text), only=["source.fixAll"])
    (fix_all,) = actions
    assert fix_all["kind"] == "source.fixAll.devlint"
    (edit,) = fix_all["edit"]["changes"][path.as_uri()]
    fixed = apply_edit(text, fix_all["edit"], path.as_uri())
    assert ".cuda()" not in fixed and "'cuda'" not in fixed
    import devlint

    assert fixed == devlint.fix_source(text, str(path)).output
    assert [d["code"] for d in change_document(client, path, fixed, version=2)] == ["DEV106"]
    assert code_actions(client, path, whole(fixed), only=["source.fixAll.devlint"]) == []


def test_only_quickfix_leaves_out_source_actions(client, workspace):
    path = workspace / "train.py"
    diagnostics = open_document(client, path, SAMPLE)
    actions = code_actions(client, path, diagnostics[0]["range"], only=["quickfix"])
    assert actions and all(a["kind"] == "quickfix" for a in actions)


def test_hover_shows_the_rule_documentation(client, workspace):
    path = workspace / "train.py"
    diagnostics = open_document(client, path, SAMPLE)
    start = diagnostics[0]["range"]["start"]
    inside = {"line": start["line"], "character": start["character"] + 3}
    hover = client.request("textDocument/hover", {"textDocument": {"uri": path.as_uri()}, "position": inside})
    assert hover["contents"]["kind"] == "markdown"
    assert "DEV102" in hover["contents"]["value"] and "## Why is this bad?" in hover["contents"]["value"]
    assert hover["range"] == diagnostics[0]["range"]
    nothing = client.request("textDocument/hover", {
        "textDocument": {"uri": path.as_uri()}, "position": {"line": 0, "character": 0},
    })  # fmt: skip
    assert nothing is None


def test_settings_come_from_the_workspace_pyproject(client, workspace):
    (workspace / "pyproject.toml").write_text('[tool.devlint]\nignore = ["DEV106"]\n')
    path = workspace / "train.py"
    assert [d["code"] for d in open_document(client, path, SAMPLE)] == ["DEV102"]


def test_a_broken_configuration_is_shown_not_crashed_on(client, workspace):
    (workspace / "pyproject.toml").write_text('[tool.devlint]\nselct = ["DEV1"]\n')
    path = workspace / "train.py"
    assert open_document(client, path, SAMPLE) == []
    message = client.notification("window/showMessage")
    assert message["type"] == 1 and "selct" in message["message"]


def test_save_and_close(client, workspace):
    path = workspace / "train.py"
    open_document(client, path, SAMPLE)
    client.notify("textDocument/didSave", {"textDocument": {"uri": path.as_uri()}})
    assert len(diagnostics_for(client, path)) == 2
    client.notify("textDocument/didClose", {"textDocument": {"uri": path.as_uri()}})
    assert diagnostics_for(client, path) == []


def test_shutdown_and_exit(client):
    assert client.request("shutdown") is None
    client.notify("exit")
    assert client.process.wait(timeout=TIMEOUT) == 0


def test_exit_without_shutdown_is_status_1(client):
    """The LSP specification: exit code 1 when `exit` comes without a `shutdown` first."""
    client.notify("exit")
    assert client.process.wait(timeout=TIMEOUT) == 1


def test_the_cli_does_not_import_pygls():
    code = (
        "import sys, devlint.cli, devlint.output.sarif; sys.exit('pygls' in sys.modules or 'lsprotocol' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=TIMEOUT).returncode == 0


def test_without_pygls_the_server_says_what_to_install():
    code = (
        "import sys; sys.modules['pygls'] = sys.modules['lsprotocol'] = None\n"
        "from devlint.cli import main; sys.exit(main(['lsp']))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 2 and result.stdout == ""
    assert "pip install 'devlint[lsp]'" in result.stderr
