"""A content-hash cache of check results, findings included (ruff keeps only clean files).

The key is the file's bytes, devlint's version, a hash of devlint's own source files (an
editable install changes without a new version), the Python that runs it (its parser
decides DEV000) and the effective configuration, so an edit, an upgrade or a config change
each miss. Entries are small JSON files under `.devlint_cache/` (with a `.gitignore` and a
`CACHEDIR.TAG`, so neither git nor backup tools pick it up); an entry that is not exactly
what `put` writes, for the key it is stored under, is a miss.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import tempfile

from devlint import __version__
from devlint.config import Config
from devlint.diagnostics import Diagnostic, Edit, Fix, Safety

_FORMAT = 1
_CODE = re.compile(r"^DEV\d{3}$")
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by devlint.\n"


def default_cache_dir(root: str) -> str:
    return os.environ.get("DEVLINT_CACHE_DIR") or os.path.join(root, ".devlint_cache")


class Cache:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._ready = False

    def key(self, data: bytes, path: str, config: Config) -> str:
        digest = hashlib.blake2b(digest_size=20)
        digest.update(__version__.encode() + b"\0" + source_hash().encode() + b"\0" + sys.version.encode())
        digest.update(b"\0" + config.cache_key(path).encode() + b"\0")
        digest.update(data)
        return digest.hexdigest()

    def _entry(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], key)

    def get(self, key: str, path: str) -> list[Diagnostic] | None:
        try:
            with open(self._entry(key), encoding="utf-8") as handle:
                entry = json.load(handle)
            if not isinstance(entry, dict) or entry.get("format") != _FORMAT or entry.get("key") != key:
                return None
            rows = entry["diagnostics"]
            if not isinstance(rows, list):
                return None
            return [_load(row, path) for row in rows]
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None

    def put(self, key: str, diagnostics: list[Diagnostic]) -> None:
        tmp = None
        try:
            self._prepare()
            entry = self._entry(key)
            os.makedirs(os.path.dirname(entry), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(entry), prefix=".devlint-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"format": _FORMAT, "key": key, "diagnostics": [_dump(d) for d in diagnostics]}, handle)
            os.replace(tmp, entry)
            tmp = None
        except OSError:
            pass  # a cache that cannot be written is only slower
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

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
    """One finding from its row; anything of another shape raises ValueError or TypeError."""
    line, col, code, message, end_line, end_col, fix = row
    if not (_ints(line, col, end_line, end_col) and isinstance(message, str) and isinstance(code, str)):
        raise TypeError("not a cached finding")
    if not _CODE.match(code):
        raise ValueError(f"not a rule code: {code!r}")
    loaded = None
    if fix is not None:
        safety, edits = fix
        parsed = []
        for start_line, start_col, stop_line, stop_col, content in edits:
            if not (_ints(start_line, start_col, stop_line, stop_col) and isinstance(content, str)):
                raise TypeError("not a cached edit")
            parsed.append(Edit(start_line, start_col, stop_line, stop_col, content))
        loaded = Fix(Safety(safety), tuple(parsed))
    return Diagnostic(path, line, col, code, message, end_line, end_col, loaded)


def _ints(*values: object) -> bool:
    return all(type(value) is int for value in values)


@functools.cache
def source_hash(package: str = os.path.dirname(os.path.abspath(__file__))) -> str:
    """A hash of devlint's own source files: with an editable install, code changes
    without a new version number, and old results must not be served for it."""
    digest = hashlib.blake2b(digest_size=16)
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                full = os.path.join(folder, name)
                digest.update(os.path.relpath(full, package).encode() + b"\0")
                try:
                    with open(full, "rb") as handle:
                        digest.update(handle.read())
                except OSError:
                    digest.update(b"<unreadable>")
    return digest.hexdigest()
