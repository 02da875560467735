"""The device binding's cases (SPEC §3), fixtures/binding/, checked as the rule fixtures are."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_fixtures import test_findings_match_markers as check_markers
from test_fixtures import test_fixes_match_expected_output as check_fixes

BINDING = Path(__file__).resolve().parent.parent / "fixtures" / "binding"
CASES = sorted(p for p in BINDING.glob("*.py") if not p.name.endswith(".fixed.py"))


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_binding_findings(path: Path) -> None:
    check_markers(path)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_binding_fixes(path: Path) -> None:
    check_fixes(path)
