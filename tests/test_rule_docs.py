"""The rule docs are tests: each rule's `## Example` fires it, its `## Use instead` is silent.

A snippet is the indented block under its heading, run after a preamble of the usual
imports. Lines written `# setup: CODE` are part of the program (context a reader does
not need, such as a binding the snippet uses) and read as comments in the docs.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from devlint.config import Config
from devlint.engine import check_source
from devlint.rules import all_rules

PREAMBLE = (
    "import os\n\nimport numpy as np\nimport torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader\n\n"
)
_SETUP = re.compile(r"^(\s*)# setup: ?(.*)$", re.MULTILINE)


def snippet(rule: type, heading: str) -> str:
    """The code under `## heading` (its indented lines; prose lines are not code)."""
    parts = re.split(r"^## (.+)$", rule.doc(), flags=re.MULTILINE)
    section = next(
        (body for title, body in zip(parts[1::2], parts[2::2]) if title.strip().rstrip("?").lower() == heading.lower()),
        "",
    )
    code = textwrap.dedent(
        "\n".join(line for line in section.splitlines() if line.startswith("    ") or not line.strip())
    )
    return PREAMBLE + _SETUP.sub(r"\1\2", code.strip("\n")) + "\n"


def config_for(rule: type) -> Config:
    """The default selection, plus the rule's whole family when it is opt-in."""
    return Config().with_overrides(extend_select=[rule.code[:4]]) if not rule.default else Config()


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_example_fires_the_rule(rule: type) -> None:
    if rule.code == "DEV000":
        pytest.skip("DEV000's example is a file that does not parse")
    code = snippet(rule, "Example")
    assert code.strip() != PREAMBLE.strip(), f"{rule.code} has no Example"
    found = {d.code for d in check_source(code, "example.py", config_for(rule))}
    assert rule.code in found, f"{rule.code}'s Example does not fire it:\n{code}"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda rule: rule.code)
def test_use_instead_is_silent(rule: type) -> None:
    code = snippet(rule, "Use instead")
    assert code.strip() != PREAMBLE.strip(), f"{rule.code} has no Use instead"
    found = [
        f"{d.line - PREAMBLE.count(chr(10))}: {d.code} {d.message}"
        for d in check_source(code, "use_instead.py", config_for(rule))
    ]
    assert not found, f"{rule.code}'s Use instead is reported:\n{code}\n" + "\n".join(found)


def test_default_selection_is_the_rules_own() -> None:
    """The families that run by default are the ones whose rules say `default`; one
    source (devlint.codes) decides both, and the configuration's default selection."""
    from devlint.codes import DEFAULT_SELECT, FAMILIES, OPT_IN

    rules = all_rules()
    assert {rule.code[:4] for rule in rules} <= set(FAMILIES)
    assert {rule.code[:4] for rule in rules if rule.default} == set(DEFAULT_SELECT)
    assert {rule.code[:4] for rule in rules if not rule.default} == set(OPT_IN)
    assert Config().select == DEFAULT_SELECT
