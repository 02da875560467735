"""A content-hash cache of check results, findings included (ruff keeps only clean files).

The key is the file's bytes, devlint's version and the effective configuration, so an
edit, an upgrade or a config change each miss. Entries are small JSON files under
`.devlint_cache/` (with a `.gitignore` and a `CACHEDIR.TAG`, so neither git nor backup
tools pick it up).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile

from devlint import __version__
from devlint.config import Config
from devlint.diagnostics import Diagnostic, Edit, Fix, Safety

_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by devlint.\n"


def default_cache_dir(root: str) -> str:
    return os.environ.get("DEVLINT_CACHE_DIR") or os.path.join(root, ".devlint_cache")


class Cache:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._ready = False

    def key(self, data: bytes, path: str, config: Config) -> str:
        digest = hashlib.blake2b(digest_size=20)
        digest.update(__version__.encode())
        digest.update(b"\0" + config.cache_key(path).encode() + b"\0")
        digest.update(data)
        return digest.hexdigest()

    def _entry(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], key)

    def get(self, key: str, path: str) -> list[Diagnostic] | None:
        try:
            with open(self._entry(key), encoding="utf-8") as handle:
                rows = json.load(handle)
            return [_load(row, path) for row in rows]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, diagnostics: list[Diagnostic]) -> None:
        try:
            self._prepare()
            entry = self._entry(key)
            os.makedirs(os.path.dirname(entry), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(entry), suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump([_dump(d) for d in diagnostics], handle)
            os.replace(tmp, entry)
        except OSError:
            pass  # a cache that cannot be written is only slower

    def _prepare(self) -> None:
        if self._ready:
            return
        os.makedirs(self.directory, exist_ok=True)
        for name, text in ((".gitignore", "*\n"), ("CACHEDIR.TAG", _TAG)):
            target = os.path.join(self.directory, name)
            if not os.path.exists(target):
                with open(target, "w", encoding="utf-8") as handle:
                    handle.write(text)
        self._ready = True


def _dump(d: Diagnostic) -> list:
    fix = None
    if d.fix is not None:
        fix = [d.fix.safety.value, [[e.start_line, e.start_col, e.end_line, e.end_col, e.content] for e in d.fix.edits]]
    return [d.line, d.col, d.code, d.message, d.end_line, d.end_col, fix]


def _load(row: list, path: str) -> Diagnostic:
    line, col, code, message, end_line, end_col, fix = row
    loaded = None
    if fix is not None:
        loaded = Fix(Safety(fix[0]), tuple(Edit(*edit) for edit in fix[1]))
    return Diagnostic(path, line, col, code, message, end_line, end_col, loaded)
