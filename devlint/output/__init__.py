"""How findings are printed: one registry of formats, which the CLI's choices come from.

Each format writes a sorted list of diagnostics to a text stream. `statistics` is the
count per rule that `--statistics` prints after the findings.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import TextIO

from devlint.diagnostics import Diagnostic, level


def write_text(out: TextIO, diagnostics: list[Diagnostic]) -> None:
    """`path:line:col: CODE [*] message`, one line a finding (`[*]`: a fix is available)."""
    for d in diagnostics:
        marker = " [*]" if d.fix is not None else ""
        out.write(f"{d.location}: {d.code}{marker} {d.message}\n")


def write_json(out: TextIO, diagnostics: list[Diagnostic]) -> None:
    json.dump([d.to_json() for d in diagnostics], out, indent=2)
    out.write("\n")


def write_github(out: TextIO, diagnostics: list[Diagnostic]) -> None:
    """GitHub Actions workflow commands: annotations on the pull request."""
    for d in diagnostics:
        message = f"{d.code} {d.message}".replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        where = f" (cell {d.cell})" if d.cell is not None else ""
        title = _github_property(f"devlint ({d.code}){where}")
        out.write(
            f"::{level(d.code)} title={title},file={_github_property(d.path)},"
            f"line={d.line},col={d.col + 1},endLine={d.end_line},endColumn={d.end_col + 1}::{message}\n"
        )


def write_sarif(out: TextIO, diagnostics: list[Diagnostic]) -> None:
    from devlint.output.sarif import to_sarif

    json.dump(to_sarif(diagnostics), out, indent=2)
    out.write("\n")


def write_statistics(out: TextIO, diagnostics: list[Diagnostic]) -> None:
    """The count of findings per rule, most first (`[*]`: some are fixable)."""
    from devlint.rules import all_rules

    names = {rule.code: rule.name for rule in all_rules()}
    counts = Counter(d.code for d in diagnostics)
    fixable = {d.code for d in diagnostics if d.fix is not None}
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        marker = "[*]" if code in fixable else "   "
        out.write(f"{count:>6}  {code}  {marker} {names.get(code, '')}\n")


def _github_property(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A").replace(":", "%3A").replace(",", "%2C")


Writer = Callable[[TextIO, list[Diagnostic]], None]
FORMATS: dict[str, Writer] = {"text": write_text, "json": write_json, "sarif": write_sarif, "github": write_github}
