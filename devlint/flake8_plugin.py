"""The flake8 plugin: the same engine, reported the way flake8 expects.

flake8 wants 1-based lines and 0-based columns (which is what the engine produces) and
applies `# noqa` itself, so the plugin does not. DEV4 is off by default, as in the CLI,
through flake8's extend-default-ignore. Rules whose codes flake8 would throw away
(`--select`, `--ignore`, the default ignore) are not run at all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, ClassVar

from devlint import __version__
from devlint.config import Config, ConfigError, discover_config
from devlint.engine import lint_source
from devlint.rules import all_rules

_STDIN_NAMES = frozenset({"-", "stdin", "<stdin>"})


class Plugin:
    name = "devlint"
    version = __version__

    _configs: ClassVar[dict[str, Config]] = {}
    _discarded: ClassVar[tuple[str, ...]] = ()  # codes flake8 would not report

    def __init__(self, tree: Any, filename: str, lines: list[str]) -> None:
        # `tree` is requested only so that flake8 hands over the file after its own parse
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, option_manager: Any) -> None:
        option_manager.extend_default_ignore(["DEV4"])

    @classmethod
    def parse_options(cls, options: Any) -> None:
        try:
            from flake8.style_guide import Decision, DecisionEngine

            engine = DecisionEngine(options)
            codes = [rule.code for rule in all_rules()]
            discarded = tuple(code for code in codes if engine.decision_for(code) is not Decision.Selected)
        except (ImportError, AttributeError, TypeError):  # another flake8: compute everything
            discarded = ()
        if discarded != cls._discarded:
            cls._discarded = discarded
            cls._configs = {}

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        text = "".join(self.lines)
        if text.startswith("\ufeff"):
            text = text[1:]
        result = lint_source(text, self.filename, self._config(), noqa=False)
        for diagnostic in result.diagnostics:
            yield diagnostic.line, diagnostic.col, f"{diagnostic.code} {diagnostic.message}", type(self)
        for error in result.errors:
            yield 1, 0, f"DEV999 devlint internal error: {error}", type(self)

    def _config(self) -> Config:
        path = self.filename
        start = os.getcwd() if path in _STDIN_NAMES else os.path.dirname(os.path.abspath(path))
        config = self._configs.get(start)
        if config is None:
            try:
                config = discover_config(start)
            except ConfigError:
                config = Config(root=start)
            # [tool.devlint] selects as in the CLI; DEV4 is computed too unless flake8
            # would discard it (its default ignore hides it unless the user selects it)
            config = config.with_overrides(extend_select=["DEV4"], ignore=list(self._discarded) or None)
            self._configs[start] = config
        return config
