"""The README's rule table, generated from the rule docstrings.

python -m devlint.docs README.md    # rewrite the table between the markers
"""

from __future__ import annotations

import re
import sys

from devlint.rules import all_rules

START = "<!-- rules:start -->"
END = "<!-- rules:end -->"


def rule_table() -> str:
    rows = ["| code | name | what it finds | fix | default |", "| --- | --- | --- | --- | --- |"]
    for rule in all_rules():
        summary = rule.summary().replace("|", "\\|")
        fix = (
            "safe"
            if rule.fixable and "Unsafe" not in rule.section("Fix safety")[:20]
            else ("unsafe" if rule.fixable else "—")
        )
        default = "yes" if rule.default else "opt-in"
        rows.append(f"| {rule.code} | {rule.name} | {summary} | {fix} | {default} |")
    return "\n".join(rows)


def replace_table(text: str) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"no {START} ... {END} markers")
    return pattern.sub(lambda _: f"{START}\n{rule_table()}\n{END}", text)


def main(argv: list[str]) -> int:
    for path in argv or ["README.md"]:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(replace_table(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
