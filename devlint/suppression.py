"""Suppression: `# noqa` on a reported line, and `# devlint: skip-file` in a file.

The CLI, the flake8 plugin and the language server honour the same spellings: `# noqa`,
`#noqa`, `# noqa: DEV101,DEV2`, lower-case codes too.
"""

from __future__ import annotations

import io
import re
import tokenize

from devlint.diagnostics import Diagnostic

_SKIP_FILE = re.compile(r"#\s*devlint:\s*skip-file(?![\w-])")
_SKIP_FILE_COMMENT = re.compile(r"#\s*devlint:\s*skip-file\s*(?:#.*)?")
NOQA = re.compile(r"#\s*noqa(?::\s?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # libcst's line breaks; not str.splitlines' form feeds


def skips_file(text: str) -> bool:
    """Is there a `# devlint: skip-file` comment, a real one (not text in a string)?"""
    if not _SKIP_FILE.search(text):
        return False
    try:
        return any(
            token.type == tokenize.COMMENT and _SKIP_FILE_COMMENT.fullmatch(token.string)
            for token in tokenize.generate_tokens(io.StringIO(text).readline)
        )
    except (tokenize.TokenError, SyntaxError):  # a broken file: trust a line that is only the comment
        return any(_SKIP_FILE_COMMENT.fullmatch(line.strip()) for line in _LINE_BREAK.split(text))


def without_noqa(diagnostics: list[Diagnostic], text: str) -> list[Diagnostic]:
    lines = _LINE_BREAK.split(text)
    kept = []
    for diagnostic in diagnostics:
        line = lines[diagnostic.line - 1] if 0 < diagnostic.line <= len(lines) else ""
        match = NOQA.search(line) if "noqa" in line.lower() else None
        if match is None:
            kept.append(diagnostic)
            continue
        codes = match.group("codes")
        if codes and not any(diagnostic.code.startswith(c.upper()) for c in re.split(r"[,\s]+", codes) if c):
            kept.append(diagnostic)
    return kept
