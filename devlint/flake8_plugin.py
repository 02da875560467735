"""The flake8 plugin: the same engine, reported the way flake8 expects.

flake8 wants 1-based lines and 0-based columns (which is what the engine produces).
`# noqa` is applied by the engine, as in the CLI (flake8's own reading misses `#noqa` and
lower-case codes), unless `--disable-noqa`. Opt-in rules (DEV4) run only when selected by
their own group or code: `--select DEV4`, `--extend-select DEV401` or `[tool.devlint]`,
never by `--select DEV`; DEV4 is also in flake8's default ignore. Rules whose codes
flake8 would throw away (`--select`, `--ignore`, the default ignore) are not run at all.
A broken `[tool.devlint]` stops the run with its message, as the CLI does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, ClassVar

from devlint import __version__
from devlint.codes import OPT_IN
from devlint.config import Config, ConfigResolver
from devlint.engine import lint_source
from devlint.rules import all_rules

_STDIN_NAMES = frozenset({"-", "stdin", "<stdin>"})
_GROUP = len("DEV4")  # a selection at least this specific opts in to an opt-in rule


class Plugin:
    name = "devlint"
    version = __version__

    _resolver: ClassVar[ConfigResolver | None] = None
    _discarded: ClassVar[tuple[str, ...]] = ()  # codes flake8 would not report
    _opted_in: ClassVar[tuple[str, ...]] = ()  # opt-in codes flake8's options select by name
    _noqa: ClassVar[bool] = True

    def __init__(self, tree: Any, filename: str, lines: list[str]) -> None:
        # flake8 hands over the file after its own parse (`ast`, by the running Python),
        # which the engine takes as its verdict instead of parsing the file again
        self.tree = tree
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, option_manager: Any) -> None:
        option_manager.extend_default_ignore(sorted(OPT_IN))

    @classmethod
    def parse_options(cls, options: Any) -> None:
        codes = [rule.code for rule in all_rules()]
        try:
            from flake8.style_guide import Decision, DecisionEngine

            engine = DecisionEngine(options)
            discarded = tuple(code for code in codes if engine.decision_for(code) is not Decision.Selected)
        except (ImportError, AttributeError, TypeError):  # another flake8: compute everything
            discarded = ()
        chosen = [
            c.upper()
            for c in [*(getattr(options, "select", None) or ()), *(getattr(options, "extend_select", None) or ())]
        ]
        opt_in = [rule.code for rule in all_rules() if not rule.default]
        opted_in = tuple(code for code in opt_in if any(len(c) >= _GROUP and code.startswith(c) for c in chosen))
        cls._noqa = not getattr(options, "disable_noqa", False)
        if (discarded, opted_in) != (cls._discarded, cls._opted_in) or cls._resolver is None:
            cls._discarded, cls._opted_in = discarded, opted_in
            cls._resolver = ConfigResolver(extend_select=list(opted_in) or None, ignore=list(discarded) or None)

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        text = "".join(self.lines)
        if text.startswith("\ufeff"):
            text = text[1:]
        result = lint_source(text, self.filename, self._config(), noqa=self._noqa, python_tree=self.tree)
        for diagnostic in result.diagnostics:
            yield diagnostic.line, diagnostic.col, f"{diagnostic.code} {diagnostic.message}", type(self)
        for error in result.errors:
            yield 1, 0, f"DEV999 devlint internal error: {error}", type(self)

    def _config(self) -> Config:
        """[tool.devlint] selects as in the CLI; a broken one raises ConfigError, which
        flake8 reports as this plugin's failure (exit 1) instead of checking with defaults."""
        cls = type(self)
        if cls._resolver is None:  # flake8 always calls parse_options first; a direct caller may not
            cls._resolver = ConfigResolver()
        path = self.filename
        start = os.getcwd() if path in _STDIN_NAMES else os.path.dirname(os.path.abspath(path))
        return cls._resolver.for_directory(start)
