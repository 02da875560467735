"""Reading and writing source files without losing a byte: encoding, BOM, line endings."""

from __future__ import annotations

import codecs
import io
import os
import re
import tempfile
import tokenize
from dataclasses import dataclass

_NEWLINE = re.compile(r"\r\n|\r|\n")


class SourceDecodeError(ValueError):
    """The bytes are not text in the encoding the file declares."""


@dataclass(frozen=True)
class SourceText:
    """A file's text plus what is needed to write it back exactly as it was encoded."""

    text: str
    encoding: str = "utf-8"
    bom: bool = False

    @classmethod
    def from_bytes(cls, data: bytes) -> SourceText:
        bom = data.startswith(codecs.BOM_UTF8)
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as err:
            raise SourceDecodeError(str(err)) from None
        if encoding == "utf-8-sig":
            encoding = "utf-8"
        body = data[len(codecs.BOM_UTF8) :] if bom else data
        try:
            text = body.decode(encoding)
        except (UnicodeDecodeError, LookupError) as err:
            raise SourceDecodeError(f"cannot decode as {encoding}: {err}") from None
        return cls(text, encoding, bom)

    def to_bytes(self, text: str | None = None) -> bytes:
        body = (self.text if text is None else text).encode(self.encoding)
        return codecs.BOM_UTF8 + body if self.bom else body

    @property
    def newline(self) -> str:
        match = _NEWLINE.search(self.text)
        return match.group() if match else "\n"


class LineIndex:
    """Converts (line, column) positions, as libcst reports them, to string offsets."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
        self._length = len(text)

    def has_line_start(self, line: int) -> bool:
        """Does line `line` begin somewhere in the text (possibly at its very end)?"""
        return line <= len(self._starts)

    @property
    def last_line(self) -> int:
        return len(self._starts)

    def line_length(self, line: int) -> int:
        start = self._starts[line - 1]
        end = self._starts[line] if line < len(self._starts) else self._length
        return end - start

    def offset(self, line: int, col: int) -> int:
        if line > len(self._starts):
            return self._length
        return min(self._starts[line - 1] + col, self._length)


def write_atomic(path: str, data: bytes) -> None:
    """Replace `path` by `data` through a temporary file in the same folder, keeping its mode."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=".devlint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
