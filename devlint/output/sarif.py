"""SARIF 2.1.0 output, as GitHub code scanning reads it.

One run; `tool.driver.rules` lists every registered rule with its documentation, and
each result points at its rule by id and index. Paths are relative to the repository
root (`%SRCROOT%`), columns count UTF-16 code units (SARIF's default `columnKind`), and
`partialFingerprints.primaryLocationLineHash` follows the finding when lines above it
move: it hashes the rule code and the line's text without whitespace, plus the
occurrence of that pair in the file.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from devlint import __version__
from devlint.diagnostics import INFORMATION_URI, RULES_URI, Diagnostic, Edit, level
from devlint.positions import split_lines, to_units
from devlint.rules import all_rules
from devlint.source import SourceDecodeError, SourceText

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"


def to_sarif(diagnostics: list[Diagnostic], root: str | None = None) -> dict:
    """A SARIF log of `diagnostics`; paths are made relative to `root` (default: cwd).

    The files are read again for the fingerprints and the UTF-16 columns; a file that
    cannot be read (stdin) keeps code-point columns and gets no fingerprint.
    """
    root = os.path.abspath(root or os.getcwd())
    rules = all_rules()
    rule_index = {rule.code: index for index, rule in enumerate(rules)}
    sources = _Sources(root)
    occurrences: Counter = Counter()
    results = []
    for diagnostic in sorted(diagnostics, key=lambda d: d.sort_key):
        # a notebook finding's lines are its cell's: the file's JSON text says nothing of them
        lines = sources.lines(diagnostic.path) if diagnostic.cell is None else None
        result = {
            "ruleId": diagnostic.code,
            "level": level(diagnostic.code),
            "message": {"text": diagnostic.message},
            "locations": [{"physicalLocation": {
                "artifactLocation": sources.location(diagnostic.path),
                "region": _region(diagnostic.line, diagnostic.col, diagnostic.end_line, diagnostic.end_col, lines),
            }}],
        }  # fmt: skip
        if diagnostic.code in rule_index:
            result["ruleIndex"] = rule_index[diagnostic.code]
        if diagnostic.cell is not None:
            result["properties"] = {"cell": diagnostic.cell}
        if lines is not None:
            result["partialFingerprints"] = {
                "primaryLocationLineHash": _line_hash(diagnostic, lines, occurrences),
            }
        if diagnostic.fix is not None:
            result["fixes"] = [_fix(diagnostic, sources.location(diagnostic.path), lines)]
        results.append(result)
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "devlint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_rule(rule) for rule in rules],
            }},
            "originalUriBaseIds": {SRCROOT: {"uri": Path(root).as_uri().rstrip("/") + "/"}},
            "columnKind": "utf16CodeUnits",
            "results": results,
        }],
    }  # fmt: skip


def _rule(rule) -> dict:
    doc = rule.doc()
    why = rule.section("Why is this bad")
    full = rule.summary() + (f"\n\n{why}" if why else "")
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": full},
        "help": {"text": doc, "markdown": doc},
        "helpUri": RULES_URI,
        "defaultConfiguration": {"level": level(rule.code), "enabled": rule.default},
        "properties": {"tags": ["portability", "pytorch"], "fixable": rule.fixable},
    }


def _region(line: int, col: int, end_line: int, end_col: int, lines: list[str] | None) -> dict:
    if (end_line, end_col) < (line, col):  # a finding without an extent is a point
        end_line, end_col = line, col
    return {
        "startLine": max(line, 1),
        "startColumn": _column(line, col, lines) + 1,
        "endLine": max(end_line, 1),
        "endColumn": _column(end_line, end_col, lines) + 1,
    }


def _column(line: int, col: int, lines: list[str] | None) -> int:
    if lines is None or not 0 < line <= len(lines):
        return col
    return to_units(lines[line - 1], col)


def _line_hash(diagnostic: Diagnostic, lines: list[str], occurrences: Counter) -> str:
    text = lines[diagnostic.line - 1] if 0 < diagnostic.line <= len(lines) else ""
    normalised = "".join(text.split())
    digest = hashlib.sha256(f"{diagnostic.code}\0{normalised}".encode()).hexdigest()[:16]
    occurrences[(diagnostic.path, digest)] += 1
    return f"{digest}:{occurrences[(diagnostic.path, digest)]}"


def _fix(diagnostic: Diagnostic, location: dict, lines: list[str] | None) -> dict:
    safety = "safe" if diagnostic.fix.is_safe else "unsafe (behaviour may change)"
    return {
        "description": {"text": f"{diagnostic.code}: {safety} fix"},
        "artifactChanges": [{
            "artifactLocation": location,
            "replacements": [_replacement(edit, lines) for edit in diagnostic.fix.edits],
        }],
    }  # fmt: skip


def _replacement(edit: Edit, lines: list[str] | None) -> dict:
    return {
        "deletedRegion": _region(edit.start_line, edit.start_col, edit.end_line, edit.end_col, lines),
        "insertedContent": {"text": edit.content},
    }


class _Sources:
    """Each reported file's location and lines, read once."""

    def __init__(self, root: str) -> None:
        self._root = root
        self._lines: dict[str, list[str] | None] = {}

    def location(self, path: str) -> dict:
        absolute = os.path.abspath(path)
        relative = os.path.relpath(absolute, self._root) if path != "-" else path
        if relative == os.pardir or relative.startswith(os.pardir + os.sep):
            return {"uri": Path(absolute).as_uri()}
        return {"uri": quote(Path(relative).as_posix()), "uriBaseId": SRCROOT}

    def lines(self, path: str) -> list[str] | None:
        if path not in self._lines:
            self._lines[path] = self._read(path)
        return self._lines[path]

    @staticmethod
    def _read(path: str) -> list[str] | None:
        try:
            with open(path, "rb") as handle:
                return split_lines(SourceText.from_bytes(handle.read()).text)
        except (OSError, SourceDecodeError):
            return None
