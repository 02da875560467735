"""The fixtures are the tests (STYLE.md): one folder per rule under fixtures/.

In each `<case>.py`, a trailing `# expect: DEV101` (or `# expect: DEV101, DEV102`) marks
the line of every finding; a file without markers must stay silent. Beside an input that
safe fixes change lies `<case>.fixed.py`, the exact expected output; `<case>.unsafe.fixed.py`
is the expected output with `--unsafe-fixes`. Fixed output must re-fix to itself and
leave no finding a safe fix could remove. A fixture may start with `# config: key = value`
lines (TOML, as in `[tool.devlint]`).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from devlint.config import parse_config
from devlint.engine import fix_source, lint_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>DEV\d{3}(?:\s*,\s*DEV\d{3})*)")
_CONFIG = re.compile(r"^#\s*config:\s*(?P<line>.+)$")


def _inputs() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("DEV*/*.py") if not p.name.endswith(".fixed.py"))


def _config_for(path: Path, text: str):
    lines = []
    for line in text.splitlines():
        match = _CONFIG.match(line)
        if not match:
            break
        lines.append(match.group("line"))
    table = tomllib.loads("\n".join(lines)) if lines else {}
    for family in ("DEV4", "DEV5"):
        if path.parent.name.startswith(family):
            table.setdefault("extend-select", [family])
    return parse_config(table, root=str(path.parent))


def expected_findings(text: str) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            found.extend((number, code.strip()) for code in match.group("codes").split(","))
    return sorted(found)


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_findings_match_markers(path: Path) -> None:
    text = _read(path)
    result = lint_source(text, str(path), _config_for(path, text))
    assert not result.errors, result.errors
    actual = sorted((d.line, d.code) for d in result.diagnostics)
    assert actual == expected_findings(text), "\n".join(
        f"{d.line}:{d.col + 1} {d.code} {d.message}" for d in result.diagnostics
    )


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixes_match_expected_output(path: Path) -> None:
    text = _read(path)
    config = _config_for(path, text)
    for unsafe, suffix in ((False, ".fixed.py"), (True, ".unsafe.fixed.py")):
        expected_path = path.with_name(path.stem + suffix)
        if unsafe and not expected_path.exists():
            continue
        result = fix_source(text, str(path), config, unsafe=unsafe)
        assert not result.errors, result.errors
        if not expected_path.exists():
            assert result.output == text, f"fixes changed {path.name} but there is no {expected_path.name}"
            continue
        expected = _read(expected_path)
        assert result.output == expected
        again = fix_source(expected, str(expected_path), config, unsafe=unsafe)
        assert again.output == expected, "fixing the fixed file changed it again"
        leftovers = [d for d in again.remaining if d.fix is not None and (unsafe or d.fix.is_safe)]
        assert not leftovers, leftovers
