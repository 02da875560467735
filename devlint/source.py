"""Reading and writing source files without losing a byte: encoding, BOM, line endings."""

from __future__ import annotations

import codecs
import errno
import io
import os
import re
import stat
import tempfile
import time
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


TEMPORARY_PREFIX = ".devlint-"
TEMPORARY_SUFFIX = ".tmp"
_TEMPORARY = re.compile(r"^\.devlint-(?:(?P<pid>\d+)-)?.*\.tmp$")
_STALE_SECONDS = 24 * 3600  # a temporary file without a live owner's pid, left by an older devlint


class ReadOnlyFile(PermissionError):
    """The file may not be rewritten: its mode has no write bit, or this user cannot write it."""


def write_atomic(path: str, data: bytes) -> None:
    """Replace the contents of `path` by `data`, as an editor would: through a symlink to
    its target, keeping its mode and owner, and atomically (a temporary file in the same
    folder, then a rename) unless that would split hard links or lose the owner, where the
    file is rewritten in place. A file its user cannot write is refused (`ReadOnlyFile`)."""
    target = os.path.realpath(path)
    info = os.stat(target)
    if not os.access(target, os.W_OK) or not info.st_mode & 0o222:
        # the mode bits too: root may write anything, but a read-only file says "do not"
        raise ReadOnlyFile(errno.EACCES, "the file is read-only", path)
    if info.st_nlink > 1 or not _can_give_back(info):
        _write_in_place(target, data)
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{TEMPORARY_PREFIX}{os.getpid()}-", suffix=TEMPORARY_SUFFIX,
                                   dir=os.path.dirname(target))  # fmt: skip
    except PermissionError:  # a folder we may not add to, holding a file we may write
        _write_in_place(target, data)
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, stat.S_IMODE(info.st_mode))
        if (info.st_uid, info.st_gid) != _owner_of(tmp):
            os.chown(tmp, info.st_uid, info.st_gid)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _owner_of(path: str) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_uid, info.st_gid


def _can_give_back(info: os.stat_result) -> bool:
    """Can a new file we create be given `info`'s owner and group?"""
    if not hasattr(os, "geteuid") or os.geteuid() == 0:
        return True
    return info.st_uid == os.geteuid() and (info.st_gid == os.getegid() or info.st_gid in os.getgroups())


def _write_in_place(target: str, data: bytes) -> None:
    with open(target, "r+b") as handle:
        handle.write(data)
        handle.truncate()


def remove_stale_temporaries(directory: str) -> None:
    """Remove the temporary files a killed devlint left in `directory`: those of a process
    that no longer runs (another devlint fixing files there now keeps its own)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        match = _TEMPORARY.match(name)
        if match is None:
            continue
        full = os.path.join(directory, name)
        try:
            pid = match.group("pid")
            if pid is not None and int(pid) != os.getpid() and not process_alive(int(pid)):
                os.unlink(full)
            elif pid is None and time.time() - os.stat(full).st_mtime > _STALE_SECONDS:
                os.unlink(full)
        except OSError:
            continue


def process_alive(pid: int) -> bool:
    """Is `pid` running (a zombie, killed and not yet reaped, is not)?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        pass
    return True
