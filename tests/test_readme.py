"""The README tells the truth: its rule table is the one the rule docstrings generate."""

from __future__ import annotations

from devlint.docs import replace_table
from tests.conftest import ROOT


def test_rule_table_is_current():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert replace_table(text) == text, "README's rule table is stale: run `python -m devlint.docs README.md`"


def test_every_rule_documents_itself():
    from devlint.rules import all_rules

    for rule in all_rules():
        for heading in ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety"):
            assert rule.section(heading), f"{rule.code}: no '## {heading}' section"
